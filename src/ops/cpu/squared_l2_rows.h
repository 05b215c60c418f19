// SquaredL2Distance's input checks, shared by its CPU and CUDA kernels (and
// their gradients) and its shape inference (ops/cpu/loss_ops.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/tensor.h"

namespace dp {

// Rows and elements per row of X and Y [N, ...] (same shape and dtype,
// float32 or float64, at least 1-D). `x` and `y` describe the inputs in
// messages.
std::pair<int64_t, int64_t> L2Rows(const Dims& xd, DType xt, const std::string& x, const Dims& yd, DType yt,
                                   const std::string& y);

}  // namespace dp
