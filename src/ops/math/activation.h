// Per-element formulas of the activations and their gradients, shared by
// the CPU kernels (ops/cpu/relu_op.cc, activation_ops.cc) and their CUDA
// twins (ops/cuda/elementwise_kernels.cu). Gradients take the forward output
// y (not x), so that in-place activations stay differentiable.
#pragma once

#include <math.h>

#include "core/host_device.h"

namespace dp::math {

// exp and tanh of float in float (expf, tanhf on both compilers), of double in double.
DP_HD inline float Exp(float x) { return expf(x); }
DP_HD inline double Exp(double x) { return exp(x); }
DP_HD inline float Tanh(float x) { return tanhf(x); }
DP_HD inline double Tanh(double x) { return tanh(x); }

template <typename T>
DP_HD inline T Relu(T x) {
  return x > T(0) ? x : T(0);
}
// dX from y = Relu(x): dy where y > 0 (the kink at 0 gets 0).
template <typename T>
DP_HD inline T ReluGradient(T y, T dy) {
  return y > T(0) ? dy : T(0);
}

// Numerically stable logistic function: exp is only taken of non-positive
// arguments, so nothing overflows.
template <typename T>
DP_HD inline T Sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + Exp(-x));
  const T e = Exp(x);
  return e / (T(1) + e);
}
template <typename T>
DP_HD inline T SigmoidGradient(T y, T dy) {
  return dy * y * (T(1) - y);
}

template <typename T>
DP_HD inline T TanhGradient(T y, T dy) {
  return dy * (T(1) - y * y);
}

// x limited to [lo, hi] (lo <= hi); a NaN x fails both comparisons and
// stays NaN.
template <typename T>
DP_HD inline T Clip(T x, T lo, T hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
// dX from y = Clip(x): dy strictly inside (lo, hi), else 0. A clipped y
// equals its bound, so Y identifies the clipped elements even when Clip ran
// in place; at a bound itself (x == lo) the gradient is 0, as Relu's at 0.
template <typename T>
DP_HD inline T ClipGradient(T y, T dy, T lo, T hi) {
  return lo < y && y < hi ? dy : T(0);
}

}  // namespace dp::math
