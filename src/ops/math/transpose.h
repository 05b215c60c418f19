// Transpose as index math, shared by the CPU and CUDA kernels: Y (row-major,
// Y.dims[k] = X.dims[axes[k]]) walked with X's strides, collapsed (output
// dims that are neighbours in X too merge into one).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/math/strided_index.h"

namespace dp::math {

// `axes` is a permutation of X's dims `in` (checked by the caller).
inline CollapsedLayout CollapseTranspose(const std::vector<int64_t>& in, const std::vector<int>& axes) {
  std::vector<int64_t> in_strides(in.size(), 1);
  for (size_t d = in.size(); d-- > 1;) in_strides[d - 1] = in_strides[d] * in[d];
  std::vector<int64_t> dims, strides;
  for (int a : axes) {
    dims.push_back(in[static_cast<size_t>(a)]);
    strides.push_back(in_strides[static_cast<size_t>(a)]);
  }
  return Collapse(dims, {strides});
}

}  // namespace dp::math
