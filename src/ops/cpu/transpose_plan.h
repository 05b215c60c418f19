// Transpose's argument checks and output dims, shared by its CPU and CUDA
// kernels and its shape inference (ops/cpu/transpose_op.cc).
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/net_def.h"

namespace dp {

struct TransposePlan {
  std::vector<int> axes;  // canonical permutation
  Dims out;
};

// The permutation (from `axes`, or reversed without it) and the output dims.
// `what` names X in messages.
TransposePlan PlanTranspose(const Dims& in, const ArgReader& args, const std::string& what);

}  // namespace dp
