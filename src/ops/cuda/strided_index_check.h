// The one shape limit of the CUDA kernels that walk collapsed strided
// layouts (ops/math/strided_index.h): Add/Sub/Mul/Div with broadcasting,
// SumReduceLike and Transpose take any shape whose dims, once size-1 dims
// are dropped and neighbours merged, number at most kMaxStridedDims.
#pragma once

#include <string>

#include "core/error.h"
#include "ops/math/strided_index.h"

namespace dp {

// kUnimplemented naming `what` when a layout did not fit a kernel's index.
inline void EnforceStridedIndexFits(bool fits, const std::string& what) {
  DP_ENFORCE_CODE(fits, Code::kUnimplemented, "the layout of ", what, " has more than ", math::kMaxStridedDims,
                  " dims even after merging neighbouring dims, more than the CUDA kernel indexes (the CPU kernel "
                  "takes any rank)");
}

}  // namespace dp
