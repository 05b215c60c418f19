// The arithmetic of the broadcasting binary ops (Add, Sub, Mul, Div), shared
// by their CPU kernels (ops/cpu/elementwise_ops.cc) and the CUDA kernel
// (ops/cuda/elementwise_kernels.cu), which takes the op as a BinaryOp.
#pragma once

#include "core/host_device.h"

namespace dp::math {

enum class BinaryOp : int { kAdd, kSub, kMul, kDiv };

// Div is IEEE division (x / 0 is +-inf, 0 / 0 NaN) for the float types it takes.
template <BinaryOp op, typename T>
DP_HD inline T ApplyBinary(T a, T b) {
  if constexpr (op == BinaryOp::kAdd) return a + b;
  if constexpr (op == BinaryOp::kSub) return a - b;
  if constexpr (op == BinaryOp::kMul) return a * b;
  if constexpr (op == BinaryOp::kDiv) return a / b;
}

}  // namespace dp::math
