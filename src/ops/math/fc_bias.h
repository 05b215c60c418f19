// FC's bias and fused relu on the GPU (ops/cuda/nn_kernels.cu), written as
// one thread's work so that the host tests walk the kernels' grids against
// the CPU ops (tests/unit/test_nn_math.cc).
//
// Forward: the GEMM writes X W^T (beta = 0), then one pass adds the bias and
// applies the relu: Y = act(GEMM + b).
//
// Backward: one kernel makes both what the relu mask and the bias need: dZ
// = dY where Y > 0 (with a fused relu) and db = the column sums of dZ. A
// block takes a tile of kFcBiasCols adjacent columns (a warp reads a row of
// the tile at once); its kFcBiasRowGroups threads per column each sum rows
// group, group + kFcBiasRowGroups, ... (FcBiasGradientPartial), and the
// partials are added in group order (a fixed order: the same bits on every
// run).
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "ops/math/activation.h"

namespace dp::math {

DP_HD inline float FcBiasActivation(float product, float bias, bool relu) {
  const float v = product + bias;
  return relu ? Relu(v) : v;
}

inline constexpr int kFcBiasCols = 32;
inline constexpr int kFcBiasRowGroups = 16;

// Rows group, group + kFcBiasRowGroups, ... of column c of dY [m, n]: with
// y (the forward output), masked by Y > 0 and written to dz; returns their
// sum.
DP_HD inline float FcBiasGradientPartial(const float* dy, const float* y, float* dz, int64_t m, int64_t n, int64_t c,
                                         int group) {
  float sum = 0.0f;
  for (int64_t r = group; r < m; r += kFcBiasRowGroups) {
    const int64_t i = r * n + c;
    float v = dy[i];
    if (y != nullptr) {
      v = ReluGradient(y[i], v);
      dz[i] = v;
    }
    sum += v;
  }
  return sum;
}

}  // namespace dp::math
