// Host ops and host outputs in device nets. An op whose schema declares it a
// host op (OpSchema::HostOp: Iter, LearningRate, Print, Save, ...) has no
// CUDA kernel: in a net that would run it on a CUDA device it runs on the
// host instead. Then every blob that an op on the host writes and a later op
// on a CUDA device reads (an iteration counter for Adam, a moved
// LearningRate's rate) is copied to that device once, right after its
// writer, and the readers read the copy. Caffe2 placed such ops and copies by
// hand; dp does it for every net, so a model built for cuda:0 needs no
// CPU-only wiring. Ops that read across devices themselves (Copy, Print,
// Save, a Reshape's host shape) read the originals.
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "graph/net_def.h"

namespace dp {

// The copy on `device` of the host-written `blob`: "<blob>@cuda:1".
std::string HostOutputCopyName(const std::string& blob, DeviceOption device);

// `def` with its host ops on cpu:0 and the copies their device readers need
// (readers then read HostOutputCopyName); nullptr when nothing changes, the
// common case (no op on a CUDA device, or none that reads a host-written blob).
std::shared_ptr<const NetDef> PlaceHostOps(const NetDef& def);

}  // namespace dp
