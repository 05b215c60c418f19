// The optimizer updates' per-element formulas, shared by the CPU kernels
// (ops/cpu/optimizer_ops.cc, bmuf_op.cc) and the CUDA kernels
// (ops/cuda/random_optimizer_kernels.cu), so that the CPU tests cover the
// arithmetic every CUDA thread runs.
//
// The formulas are templates over the value type: float or double for the
// scalar loops and CUDA, and on the CPU also SIMD vectors (the GNU vector
// types of <immintrin.h>, whose + - * / act per lane) for Adam and Adagrad,
// whose square root GCC does not vectorise by itself; `sqrt` is the caller's
// square root for that type. Decisions (weight decay, Nesterov) are template
// parameters so that the loops carry no branches.
//
// CUDA's results may differ from the CPU's in the last bits: nvcc fuses
// a * b + c into one FMA where the CPU rounds twice.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dp {

// A NaN learning rate skips the update: param and state stay as they are.
// GateLearningRate (ops/cpu/loss_scaling_ops.cc) makes the rate NaN for a
// step whose loss-scaled gradients overflowed, so that every update of the
// step skips it, on the host and on the device alike.
template <typename T>
DP_HD inline bool SkipsUpdate(T lr) {
  return lr != lr;
}

// The elements [begin, end) of part `part` of `parts` (0 <= part < parts) of
// n: parts of whole 64-element chunks, the last one short (or empty).
struct ElementRange {
  int64_t begin, end;
};
DP_HD inline ElementRange PartOfElements(int64_t n, int64_t part, int64_t parts) {
  const int64_t per_part = (n + parts * 64 - 1) / (parts * 64) * 64;
  const int64_t begin = part * per_part < n ? part * per_part : n;
  const int64_t end = begin + per_part < n ? begin + per_part : n;
  return {begin, end};
}

// SGD: d = g + wd p; p -= lr d.
template <bool kWD, typename T>
DP_HD inline T SgdStep(T p, T g, T lr, T wd) {
  T d = g;
  if constexpr (kWD) d += wd * p;
  return p - lr * d;
}

// Momentum SGD (PyTorch's): d = g + wd p; buf = mu buf + d;
// p -= lr (nesterov ? d + mu buf : buf).
template <bool kWD, bool kNesterov, typename T>
DP_HD inline void MomentumStep(T* p, T* buf, T g, T lr, T mu, T wd) {
  T d = g;
  if constexpr (kWD) d += wd * *p;
  const T v = mu * *buf + d;
  *buf = v;
  if constexpr (kNesterov)
    *p -= lr * (d + mu * v);
  else
    *p -= lr * v;
}

// Adam's arguments (the op's), as the CUDA launcher takes them.
struct AdamHyper {
  double beta1, beta2, epsilon, weight_decay;
};

// Adam's per-step coefficients, in the value type V.
template <typename V>
struct AdamCoeffs {
  V b1, c1, b2, c2;  // c = 1 - b
  V step;            // lr / (1 - beta1^t)
  V rs;              // 1 / sqrt(1 - beta2^t)
  V eps, wd;
};

// x^t for an integer t >= 0 by repeated squaring: exactly rounded
// multiplications, the same bits on the host and the device (unlike pow).
// Each squaring doubles the relative error, so it is about t ulp; in
// 1 - beta^t that is largest near t = 1 / (1 - beta), ~0.4 ulp / (1 - beta),
// far below float32's and small beside double's rounding of the update.
DP_HD inline double PowInt(double x, int64_t t) {
  double result = 1.0;
  for (; t > 0; t >>= 1) {
    if (t & 1) result *= x;
    x *= x;
  }
  return result;
}

// The coefficients of step t (the iteration, >= 1) with learning rate lr,
// computed in double and rounded to T once. `sqrt` is a double square root.
template <typename T, typename Sqrt>
DP_HD inline AdamCoeffs<T> MakeAdamCoeffs(const AdamHyper& h, double lr, int64_t t, Sqrt sqrt) {
  const double bc1 = 1.0 - PowInt(h.beta1, t), bc2 = 1.0 - PowInt(h.beta2, t);
  AdamCoeffs<T> c;
  c.b1 = static_cast<T>(h.beta1);
  c.c1 = static_cast<T>(1.0 - h.beta1);
  c.b2 = static_cast<T>(h.beta2);
  c.c2 = static_cast<T>(1.0 - h.beta2);
  c.step = static_cast<T>(lr / bc1);
  c.rs = static_cast<T>(1.0 / sqrt(bc2));
  c.eps = static_cast<T>(h.epsilon);
  c.wd = static_cast<T>(h.weight_decay);
  return c;
}

// torch.optim.Adam: d = g + wd p; m = b1 m + (1 - b1) d; v = b2 v + (1 - b2) d^2;
// p -= step m / (sqrt(v) rs + eps).
template <bool kWD, typename V, typename Sqrt>
DP_HD inline void AdamStep(V* p, V* m, V* v, V g, const AdamCoeffs<V>& c, Sqrt sqrt) {
  V d = g;
  if constexpr (kWD) d = d + c.wd * *p;
  const V mv = c.b1 * *m + c.c1 * d;
  const V vv = c.b2 * *v + c.c2 * (d * d);
  *m = mv;
  *v = vv;
  *p = *p - c.step * mv / (sqrt(vv) * c.rs + c.eps);
}

// Adagrad: d = g + wd p; h = decay h + d^2; p -= lr d / (sqrt(h) + eps).
template <bool kWD, typename V, typename Sqrt>
DP_HD inline void AdagradStep(V* p, V* h, V g, V lr, V eps, V decay, V wd, Sqrt sqrt) {
  V d = g;
  if constexpr (kWD) d = d + wd * *p;
  const V hv = decay * *h + d * d;
  *h = hv;
  *p = *p - lr * d / (sqrt(hv) + eps);
}

// BMUF's block update: delta = mu delta + lr (w - wg); wg += delta;
// w = wg (+ mu delta with Nesterov).
template <typename T>
DP_HD inline void BmufStep(T* w, T* wg, T* delta, T lr, T mu, bool nesterov) {
  const T d = mu * *delta + lr * (*w - *wg);
  *delta = d;
  *wg += d;
  *w = nesterov ? *wg + mu * d : *wg;
}

}  // namespace dp
