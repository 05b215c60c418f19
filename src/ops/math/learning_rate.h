// The learning-rate schedules of LearningRate, shared by its CPU kernel
// (ops/cpu/learning_rate_op.cc) and its CUDA twin (ops/cuda/schedule_ops.cc,
// random_optimizer_kernels.cu), in double precision on both. `it` is the
// step's index from 0 (iter - 1):
//   fixed   base_lr
//   step    base_lr * gamma^floor(it / stepsize)
//   exp     base_lr * gamma^it
//   inv     base_lr * (1 + gamma * it)^(-power)
//   cosine  0.5 * base_lr * (1 + cos(pi * min(it, max_iter) / max_iter))
// times, during the first warmup_iters steps, a factor rising linearly from
// warmup_start_factor (it = 0) to 1 (it = warmup_iters).
#pragma once

#include <math.h>

#include <cstdint>

#include "core/host_device.h"

namespace dp::math {

enum LrPolicy : int32_t { kLrFixed = 0, kLrStep, kLrExp, kLrInv, kLrCosine };

struct LrSchedule {
  int32_t policy = kLrFixed;
  double base_lr = 0, gamma = 0.1, power = 1.0, warmup_start_factor = 0.1;
  int64_t stepsize = 1, max_iter = 1, warmup_iters = 0;  // stepsize, max_iter > 0
};

DP_HD inline double LearningRateAt(const LrSchedule& c, int64_t it) {
  const double x = static_cast<double>(it);
  double lr = c.base_lr;
  switch (c.policy) {
    case kLrStep: lr *= pow(c.gamma, static_cast<double>(it / c.stepsize)); break;
    case kLrExp: lr *= pow(c.gamma, x); break;
    case kLrInv: lr *= pow(1.0 + c.gamma * x, -c.power); break;
    case kLrCosine: {
      const double frac = static_cast<double>(it < c.max_iter ? it : c.max_iter) / static_cast<double>(c.max_iter);
      lr *= 0.5 * (1.0 + cos(3.141592653589793 * frac));
      break;
    }
    default: break;  // fixed
  }
  if (it < c.warmup_iters) {
    const double s = c.warmup_start_factor;
    lr *= s + (1.0 - s) * x / static_cast<double>(c.warmup_iters);
  }
  return lr;
}

}  // namespace dp::math
