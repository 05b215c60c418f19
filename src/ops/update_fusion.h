// Fusing a step's optimizer updates into multi-tensor ops. A training step
// holds one update per param (SGD, MomentumSGD, Adam, Adagrad); on a GPU
// each is a kernel launch of a few microseconds' work, so a step with P
// params pays P launches. This pass turns the updates of a group of params
// into one MultiTensor* op (ops/cpu/multi_tensor_update_ops.cc), which
// computes the same bits in ceil(P / 24) launches.
//
// Updates fuse when they share a group, a device, a type, their arguments,
// the learning rate and iteration blobs, and carry no extra gradients or
// control inputs. The fused op takes the place of the group's last update;
// an earlier update joins it only if no op between them touches its param,
// its state or its gradient (reads or writes the first two, writes any of
// its inputs), so the net computes exactly what it did in every order the
// executors may choose. The caller chooses the groups: the updates a step
// runs together anyway (one device's whole step; a replica's gradient
// bucket, whose updates all wait for that bucket's allreduce).
#pragma once

#include <string>
#include <vector>

#include "graph/net_def.h"

namespace dp {

struct UpdateFusionOptions {
  // Updates on CUDA devices fuse; CPU ones only when this is set (on the CPU
  // an update costs no launch, and separate updates overlap backward).
  bool cpu = false;
};

// Fuses the updates of each group (params named as the updates' input 0) in
// `net`; params in no group are left alone. Returns the number of fused ops
// made: one per group of two updates or more, or more for a group past
// kMaxMultiTensors params (ops/optimizer_op_utils.h), each taking at most that.
int FuseOptimizerUpdates(NetDef& net, const std::vector<std::vector<std::string>>& groups,
                         const UpdateFusionOptions& options = {});

}  // namespace dp
