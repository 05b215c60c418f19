// Dropout's per-element math, shared by the CPU kernel (ops/cpu/dropout_op.cc)
// and the CUDA kernel (ops/cuda/random_optimizer_kernels.cu): the same word of
// the Philox stream keeps or drops the same element on both.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "core/philox.h"

namespace dp {

// Element i with its Philox word: kept when the word's 24-bit uniform is >=
// the ratio (philox::UniformThreshold(ratio)), then scaled by 1 / (1 - ratio).
template <typename T>
DP_HD inline void DropoutElement(T x, uint32_t word, uint32_t threshold, T scale, T* y, uint8_t* mask) {
  const bool keep = (word >> 8) >= threshold;
  *mask = keep ? 1 : 0;
  *y = keep ? x * scale : T(0);
}

// dX = dY * scale where the mask kept the element, else 0.
template <typename T>
DP_HD inline T DropoutGradElement(T dy, uint8_t mask, T scale) {
  return mask ? dy * scale : T(0);
}

}  // namespace dp
