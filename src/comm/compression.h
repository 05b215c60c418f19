// Compressed gradients (the `compress` argument of Allreduce and
// ReduceScatter) on the CPU: float32 tensors summed through a 16-bit float H
// (BFloat16 or Half), in the arithmetic of comm/compressed_sum.h. Each
// contribution is rounded to H once, the contributions are summed in float
// and the sum is rounded once, so one process's two replicas give the bits
// of two processes of one replica each.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "comm/compressed_sum.h"
#include "comm/cpu_collectives.h"
#include "core/dtype.h"
#include "core/half_convert.h"
#include "core/half_float.h"

namespace dp {

// fn(H{}) for compress's dtype (kBFloat16 or kFloat16).
template <typename Fn>
void WithCompressionType(DType compress, const Fn& fn) {
  if (compress == DType::kBFloat16)
    fn(BFloat16{});
  else
    fn(Half{});
}

// out[i] = H(in[i] * scale), n elements. binary16 goes through the bulk
// conversion (core/half_convert.h), in blocks that stay in L1.
template <typename H>
void CastScaled(const float* in, float scale, H* out, int64_t n) {
  if constexpr (std::is_same_v<H, Half>) {
    constexpr int64_t kBlock = 256;
    float scaled[kBlock];
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
      const int64_t len = n - i0 < kBlock ? n - i0 : kBlock;
      for (int64_t i = 0; i < len; ++i) scaled[i] = in[i0 + i] * scale;
      FloatsToHalves(scaled, out + i0, len);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = FromFloat<H>(in[i] * scale);
  }
}

// out[i] = float(in[i]) * scale, n elements.
template <typename H>
void UncastScaled(const H* in, float scale, float* out, int64_t n) {
  if constexpr (std::is_same_v<H, Half>) {
    HalvesToFloats(in, out, n);
    for (int64_t i = 0; i < n; ++i) out[i] *= scale;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = ToFloat(in[i]) * scale;
  }
}

// p[i] = float(H(p[i] * pre)) * post, in place, n elements.
template <typename H>
void RoundThrough(float* p, float pre, float post, int64_t n) {
  constexpr int64_t kBlock = 256;
  H cast[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t len = n - i0 < kBlock ? n - i0 : kBlock;
    CastScaled<H>(p + i0, pre, cast, len);
    UncastScaled<H>(cast, post, p + i0, len);
  }
}

// In one process: every device's contribution rounded through H, summed in
// device order, the sum rounded through H, times s, into every device.
template <typename H>
void AllreduceThroughHalf(CpuCollectives& collectives, const std::vector<CpuCollectives::Segment>& segments,
                          int devices, double s) {
  const float pre = CompressionPreScale<H>(devices), post = CompressionPostScale<H>(devices, s);
  for (const auto& seg : segments)
    for (void* b : seg.buffers) RoundThrough<H>(static_cast<float*>(b), pre, 1.0f, seg.count);
  collectives.AllreduceSum(segments, DType::kFloat32, 1.0);
  for (const auto& seg : segments)
    for (void* b : seg.buffers) RoundThrough<H>(static_cast<float*>(b), 1.0f, post, seg.count);
}

}  // namespace dp
