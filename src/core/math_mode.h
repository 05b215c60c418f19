// How a net's CUDA GEMMs (FC, Conv and their gradients) compute from float32
// tensors (dp_net_options.math_mode). Tensors, params and optimizer state stay
// float32 in every mode; the modes trade the products' precision for tensor
// cores: TF32 rounds the inputs to 10 mantissa bits, BF16 to 7 (cuBLAS's
// CUBLAS_COMPUTE_32F_FAST_TF32 / _FAST_16BF), both accumulating in float32.
// This is bf16 "autocast" at the GEMMs: float32 master weights by
// construction, no loss scaling needed (bf16 has float32's range). FP16
// rounds the inputs to IEEE half (10 mantissa bits, range +-65504: cuBLAS's
// _FAST_16F): gradients that small underflow and large ones overflow, so a
// training net in FP16 needs dynamic loss scaling (model/training.h,
// LossScaling; Net refuses a net that computes gradients without it).
// CPU kernels compute in float32 whatever the mode.
#pragma once

#include <cstdint>

namespace dp {

enum class MathMode : int32_t { kDefault = 0, kFp32 = 1, kTf32 = 2, kBf16 = 3, kFp16 = 4 };  // kDefault: kFp32

inline const char* MathModeName(MathMode mode) {
  switch (mode) {
    case MathMode::kDefault:
    case MathMode::kFp32: return "fp32";
    case MathMode::kTf32: return "tf32";
    case MathMode::kBf16: return "bf16";
    case MathMode::kFp16: return "fp16";
  }
  return "unknown";
}

}  // namespace dp
