// Dynamic loss scaling's arithmetic, shared by the CPU kernels of
// UnscaleGradients, UpdateLossScale and GateLearningRate
// (ops/cpu/loss_scaling_ops.cc) and their CUDA twins (ops/cuda/
// loss_scaling_ops.cc, random_optimizer_kernels.cu).
//
// A step computes its gradients of `scale` times the loss (the loss's
// gradient seed is multiplied by it), so that gradients too small for fp16
// products survive them; UnscaleGradients then divides them by the scale
// and says whether any element is not finite (an overflow). Such a step is
// skipped (GateLearningRate gives its updates a NaN rate) and the scale is
// cut by `backoff`; after `interval` steps in a row without one, it grows by
// `growth` (PyTorch's GradScaler and Apex's dynamic scaler work the same way).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dp::math {

struct LossScaleArgs {
  float growth = 2.0f;
  float backoff = 0.5f;
  int64_t interval = 2000;  // > 0
};

// Finite: neither infinite nor NaN (x - x is NaN for both).
template <typename T>
DP_HD inline bool IsFinite(T x) {
  return x - x == T(0);
}

// The scale and the count of steps in a row without an overflow, after a
// step that overflowed (`found`) or not. The count is a float (exact to
// 2^24 steps). The scale never becomes 0 or infinite: a cut below the
// smallest normal float or a growth to infinity leaves it as it is.
DP_HD inline void NextLossScale(float* scale, float* good_steps, bool found, const LossScaleArgs& a) {
  if (found) {
    const float cut = *scale * a.backoff;
    if (cut >= 1.17549435e-38f) *scale = cut;
    *good_steps = 0.0f;
    return;
  }
  *good_steps += 1.0f;
  if (*good_steps >= static_cast<float>(a.interval)) {
    const float grown = *scale * a.growth;
    if (IsFinite(grown)) *scale = grown;
    *good_steps = 0.0f;
  }
}

}  // namespace dp::math
