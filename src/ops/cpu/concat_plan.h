// Concat's and ConcatGradient's checks and row layout, shared by their CPU
// and CUDA kernels and their shape inference (ops/cpu/concat_op.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/net_def.h"

namespace dp {

struct ConcatPlan {
  int axis;
  Dims out;
  std::vector<int64_t> sizes;  // per input, its dim along axis
  int64_t outer;               // prod(dims[:axis])
  int64_t inner;               // prod(dims[axis+1:])
};

// Checks that the pieces fit together and computes the joined dims. names[i]
// names piece i.
ConcatPlan PlanConcat(const std::vector<std::string>& names, const std::vector<const Dims*>& dims,
                      const std::vector<DType>& dtypes, int64_t axis_arg);

// ConcatGradient's plan: the Xi (names, dims) joined along the axis, which
// must give dY's dims (dy_name names dY in messages).
ConcatPlan PlanConcatGradient(const std::string& dy_name, const Dims& dy, const std::vector<std::string>& names,
                              const std::vector<const Dims*>& dims, int64_t axis_arg);

// Row layout of Concat and its gradient: for each of the `outer` rows of the
// joined tensor, piece i holds sizes[i] * inner contiguous elements starting
// at element RowStarts(p)[i] of the row (the last entry is the row length).
std::vector<int64_t> RowStarts(const ConcatPlan& p);

// Which input each output of ConcatGradient is the gradient of (indices into
// X0..Xn-1), from `grad_indices` or every input in order; checked.
std::vector<int64_t> GradIndices(const ArgReader& args, size_t num_pieces, size_t num_outputs);

}  // namespace dp
