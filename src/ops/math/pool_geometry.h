// Index math of 2-D NCHW pooling, shared by the CPU kernels
// (ops/cpu/pool_ops.cc) and the CUDA ones (ops/cuda/pool_kernels.cu): each
// output's window clipped to its input plane, the divisor of an average, the
// winner of a max (first maximum in scan order, or the first NaN), and, the
// other way round, the outputs whose windows hold an input element, so that
// the gradients are gathers per input element (deterministic, no atomics)
// that add in the order the CPU's scatter does.
#pragma once

#include <cstdint>
#include <limits>

#include "core/host_device.h"

namespace dp::math {

// Rows [h0, h1) x columns [w0, w1) of an input plane: one output's window,
// clipped to the plane (never empty: pads are smaller than the kernel).
struct PoolWindow {
  int64_t h0, h1, w0, w1;
};

// Along one axis: output `out` reads input coordinates [*lo, *hi).
DP_HD inline void PoolAxisBounds(int64_t out, int64_t kernel, int64_t stride, int64_t pad, int64_t in, int64_t* lo,
                                 int64_t* hi) {
  const int64_t start = out * stride - pad;
  *lo = start > 0 ? start : 0;
  *hi = start + kernel < in ? start + kernel : in;
}

// Along one axis: the outputs [*lo, *hi) whose windows hold input coordinate
// `in` (start = out * stride - pad <= in < start + kernel), within [0, out_extent).
DP_HD inline void PoolCoveringOutputs(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t out_extent,
                                      int64_t* lo, int64_t* hi) {
  const int64_t first = in + pad - kernel + 1;  // out * stride >= first
  const int64_t l = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int64_t h = (in + pad) / stride + 1;  // out * stride <= in + pad
  *lo = l;
  *hi = h < out_extent ? h : out_extent;
}

// The pooling of one image plane: X plane [height, width] -> Y plane [out_h, out_w].
struct PoolGeometry {
  int64_t planes = 0;  // N * C
  int64_t height = 0, width = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0;   // bottom and right pads only shape out_h / out_w
  int64_t count_include_pad = 0;  // AveragePool's divisor: 1, kh * kw; 0, the elements of X in the window

  DP_HD int64_t in_plane() const { return height * width; }
  DP_HD int64_t out_plane() const { return out_h * out_w; }
};

DP_HD inline PoolWindow PoolWindowAt(const PoolGeometry& g, int64_t oh, int64_t ow) {
  PoolWindow w;
  PoolAxisBounds(oh, g.kernel_h, g.stride_h, g.pad_t, g.height, &w.h0, &w.h1);
  PoolAxisBounds(ow, g.kernel_w, g.stride_w, g.pad_l, g.width, &w.w0, &w.w1);
  return w;
}

// What an average divides by: the whole window (`full` = kh * kw, pads
// included; with the floor output-size rule a window never reaches past the
// padded input) or its part inside the plane.
DP_HD inline int64_t PoolDivisor(const PoolWindow& w, bool include_pad, int64_t full) {
  return include_pad ? full : (w.h1 - w.h0) * (w.w1 - w.w0);
}

// The sum of a window of a plane, in scan order (rows top to bottom, each
// left to right).
template <typename T>
DP_HD T PoolWindowSum(const T* plane, int64_t width, const PoolWindow& w) {
  T acc = T(0);
  for (int64_t ih = w.h0; ih < w.h1; ++ih)
    for (int64_t iw = w.w0; iw < w.w1; ++iw) acc += plane[ih * width + iw];
  return acc;
}

// The maximum of a window of a plane (NaN if any is NaN). Branch-free:
// window maxima of random data are unpredictable.
template <typename T>
DP_HD T PoolWindowMax(const T* plane, int64_t width, const PoolWindow& w) {
  T m = plane[w.h0 * width + w.w0];
  bool nan = false;
  for (int64_t ih = w.h0; ih < w.h1; ++ih) {
    const T* row = plane + ih * width;
    for (int64_t iw = w.w0; iw < w.w1; ++iw) {
      const T v = row[iw];
      nan |= v != v;
      m = v > m ? v : m;
    }
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

// Index in the plane of that maximum: the first in scan order (strictly
// greater values replace it), or the first NaN. Branch-free as
// PoolWindowMax; a window holding a NaN is scanned again for it.
template <typename T>
DP_HD int64_t PoolWindowArgMax(const T* plane, int64_t width, const PoolWindow& w) {
  int64_t best = w.h0 * width + w.w0;
  T bv = plane[best];
  bool nan = false;
  for (int64_t ih = w.h0; ih < w.h1; ++ih) {
    const T* row = plane + ih * width;
    for (int64_t iw = w.w0; iw < w.w1; ++iw) {
      const T v = row[iw];
      nan |= v != v;
      const bool gt = v > bv;
      best = gt ? ih * width + iw : best;
      bv = gt ? v : bv;
    }
  }
  if (nan) {
    for (int64_t ih = w.h0; ih < w.h1; ++ih)
      for (int64_t iw = w.w0; iw < w.w1; ++iw)
        if (plane[ih * width + iw] != plane[ih * width + iw]) return ih * width + iw;
  }
  return best;
}

// Of two candidates for a window's winner (value and index in the plane),
// the one the scan above picks: a NaN over a number, else the larger value,
// ties (and two NaNs) to the lower index. Associative and commutative, so a
// parallel reduction over a window finds the scan's winner.
template <typename T>
DP_HD bool PoolPrefersFirst(T va, int64_t ia, T vb, int64_t ib) {
  const bool na = va != va, nb = vb != vb;
  if (na != nb) return na;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

// dX of input element (ih, iw) of a plane under AveragePool: each covering
// output's dY over its divisor, in output order (the CPU scatter's order).
template <typename T>
DP_HD T AveragePoolGradientAt(const PoolGeometry& g, const T* dy_plane, int64_t ih, int64_t iw) {
  int64_t oh0, oh1, ow0, ow1;
  PoolCoveringOutputs(ih, g.kernel_h, g.stride_h, g.pad_t, g.out_h, &oh0, &oh1);
  PoolCoveringOutputs(iw, g.kernel_w, g.stride_w, g.pad_l, g.out_w, &ow0, &ow1);
  const int64_t full = g.kernel_h * g.kernel_w;
  T sum = T(0);
  for (int64_t oh = oh0; oh < oh1; ++oh)
    for (int64_t ow = ow0; ow < ow1; ++ow) {
      const int64_t n = PoolDivisor(PoolWindowAt(g, oh, ow), g.count_include_pad != 0, full);
      sum += dy_plane[oh * g.out_w + ow] / static_cast<T>(n);
    }
  return sum;
}

// dX of input element (ih, iw) of a plane under MaxPool: the dY of every
// covering output whose winner (`argmax_plane`, per output) it is, in output order.
template <typename T>
DP_HD T MaxPoolGradientAt(const PoolGeometry& g, const int64_t* argmax_plane, const T* dy_plane, int64_t ih,
                          int64_t iw) {
  int64_t oh0, oh1, ow0, ow1;
  PoolCoveringOutputs(ih, g.kernel_h, g.stride_h, g.pad_t, g.out_h, &oh0, &oh1);
  PoolCoveringOutputs(iw, g.kernel_w, g.stride_w, g.pad_l, g.out_w, &ow0, &ow1);
  const int64_t self = ih * g.width + iw;
  T sum = T(0);
  for (int64_t oh = oh0; oh < oh1; ++oh)
    for (int64_t ow = ow0; ow < ow1; ++ow)
      if (argmax_plane[oh * g.out_w + ow] == self) sum += dy_plane[oh * g.out_w + ow];
  return sum;
}

}  // namespace dp::math
