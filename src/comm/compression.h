// Compressed gradients (the `compress` argument of Allreduce and
// ReduceScatter): float32 tensors summed through a 16-bit float H (BFloat16
// or Half). Each contribution is rounded to H once, the contributions are
// summed in float and the sum is rounded once, so one process's two
// replicas give the bits of two processes of one replica each. binary16
// (range 65504) is scaled by 1 / contributions before the cast and back
// after, so that the sum cannot overflow where each term does not.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "comm/cpu_collectives.h"
#include "core/dtype.h"
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

// What each contribution is multiplied by before its cast to H.
template <typename H>
float CompressionPreScale(int contributions) {
  return std::is_same_v<H, Half> ? 1.0f / static_cast<float>(contributions) : 1.0f;
}

// What the sum is multiplied by after its cast back: the pre-scale undone,
// times the collective's scale s.
template <typename H>
float CompressionPostScale(int contributions, double s) {
  return static_cast<float>((std::is_same_v<H, Half> ? contributions : 1) * s);
}

// In one process: every device's contribution rounded through H, summed in
// device order, the sum rounded through H, times s, into every device.
template <typename H>
void AllreduceThroughHalf(CpuCollectives& collectives, const std::vector<CpuCollectives::Segment>& segments,
                          int devices, double s) {
  const float pre = CompressionPreScale<H>(devices), post = CompressionPostScale<H>(devices, s);
  for (const auto& seg : segments)
    for (void* b : seg.buffers) {
      float* p = static_cast<float*>(b);
      for (int64_t i = 0; i < seg.count; ++i) p[i] = ToFloat(FromFloat<H>(p[i] * pre));
    }
  collectives.AllreduceSum(segments, DType::kFloat32, 1.0);
  for (const auto& seg : segments)
    for (void* b : seg.buffers) {
      float* p = static_cast<float*>(b);
      for (int64_t i = 0; i < seg.count; ++i) p[i] = ToFloat(FromFloat<H>(p[i])) * post;
    }
}

}  // namespace dp
