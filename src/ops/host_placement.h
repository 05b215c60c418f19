// Host ops in device nets. An op whose schema declares it a host op
// (OpSchema::HostOp: Iter, LearningRate, Print, Save, ...) has no CUDA kernel:
// in a net that would run it on a CUDA device it runs on the host instead,
// and each of its outputs that a later op on a CUDA device reads is copied
// there once, right after it (Caffe2 placed such ops on the CPU by hand; dp
// does it for every net, so a model built for cuda:0 needs no CPU-only
// wiring).
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "graph/net_def.h"

namespace dp {

// The copy on `device` of the host op output `blob`: "<blob>@cuda:1".
std::string HostOutputCopyName(const std::string& blob, DeviceOption device);

// `def` with its host ops on cpu:0 and the copies their device readers need
// (readers then read HostOutputCopyName); nullptr when nothing changes, the
// common case (no host op on a CUDA device).
std::shared_ptr<const NetDef> PlaceHostOps(const NetDef& def);

}  // namespace dp
