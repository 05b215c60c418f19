// The element types collectives sum (float32, float64, int32, int64), as
// C++ types: WithSumType(dtype, fn) calls fn(T{}) with dtype's type; and
// the sum itself, in buffer order, which every CPU collective shares.
// Collectives between processes also sum bfloat16 and binary16 (compressed
// gradients: half the bytes on the wire): WithProcessSumType.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half_convert.h"
#include "core/half_float.h"

namespace dp {

inline bool IsSumType(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kInt32 || dtype == DType::kInt64;
}

// kDType naming `what` for any other dtype.
template <typename Fn>
void WithSumType(DType dtype, const char* what, const Fn& fn) {
  switch (dtype) {
    case DType::kFloat32: fn(float{}); break;
    case DType::kFloat64: fn(double{}); break;
    case DType::kInt32: fn(int32_t{}); break;
    case DType::kInt64: fn(int64_t{}); break;
    default:
      DP_THROW(Code::kDType, what, " supports float32, float64, int32 and int64, got ", DTypeName(dtype));
  }
}

inline bool IsProcessSumType(DType dtype) {
  return IsSumType(dtype) || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

// WithSumType and the 16-bit floats (BFloat16, Half).
template <typename Fn>
void WithProcessSumType(DType dtype, const char* what, const Fn& fn) {
  switch (dtype) {
    case DType::kBFloat16: fn(BFloat16{}); break;
    case DType::kFloat16: fn(Half{}); break;
    default:
      if (!IsSumType(dtype))
        DP_THROW(Code::kDType, what, " supports float32, float64, int32, int64, bfloat16 and float16, got ",
                 DTypeName(dtype));
      WithSumType(dtype, what, fn);
  }
}

template <typename T>
inline constexpr bool kIsHalfFloat = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

// out[k] = bufs[0][off + k] + bufs[1][off + k] + ... + bufs[n - 1][off + k]
// for k < c, summed in buffer order (so every caller gets the same bits);
// n >= 2, `bufs` point at T elements, out aliases none of them. 16-bit
// floats are summed in float and rounded once (to nearest even).
template <typename T, typename Ptr>
void SumInOrder(T* out, const Ptr* bufs, size_t n, int64_t off, int64_t c) {
  if constexpr (std::is_same_v<T, Half>) {
    // In blocks, input by input, through the bulk conversions (the scalar
    // binary16 ones do not vectorise).
    constexpr int64_t kBlock = 256;
    float acc[kBlock], term[kBlock];
    for (int64_t k0 = 0; k0 < c; k0 += kBlock) {
      const int64_t len = c - k0 < kBlock ? c - k0 : kBlock;
      HalvesToFloats(reinterpret_cast<const T*>(bufs[0]) + off + k0, acc, len);
      for (size_t i = 1; i < n; ++i) {
        HalvesToFloats(reinterpret_cast<const T*>(bufs[i]) + off + k0, term, len);
        for (int64_t k = 0; k < len; ++k) acc[k] += term[k];
      }
      FloatsToHalves(acc, out + k0, len);
    }
  } else if constexpr (kIsHalfFloat<T>) {
    // In blocks, input by input, so that the conversions vectorise.
    constexpr int64_t kBlock = 256;
    float acc[kBlock];
    for (int64_t k0 = 0; k0 < c; k0 += kBlock) {
      const int64_t len = c - k0 < kBlock ? c - k0 : kBlock;
      const T* b0 = reinterpret_cast<const T*>(bufs[0]) + off + k0;
      for (int64_t k = 0; k < len; ++k) acc[k] = ToFloat(b0[k]);
      for (size_t i = 1; i < n; ++i) {
        const T* bi = reinterpret_cast<const T*>(bufs[i]) + off + k0;
        for (int64_t k = 0; k < len; ++k) acc[k] += ToFloat(bi[k]);
      }
      for (int64_t k = 0; k < len; ++k) out[k0 + k] = FromFloat<T>(acc[k]);
    }
  } else {
    const T* b0 = reinterpret_cast<const T*>(bufs[0]) + off;
    const T* b1 = reinterpret_cast<const T*>(bufs[1]) + off;
    for (int64_t k = 0; k < c; ++k) out[k] = b0[k] + b1[k];
    for (size_t i = 2; i < n; ++i) {
      const T* bi = reinterpret_cast<const T*>(bufs[i]) + off;
      for (int64_t k = 0; k < c; ++k) out[k] += bi[k];
    }
  }
}

// bufs[me][k] = the SumInOrder of bufs[0..n)[k] for lo <= k < hi: a process's
// own part of a reduction, in place (chunk by chunk through an accumulator
// that stays in L1 while every input's chunk is read). n >= 2.
template <typename T>
void ReduceInto(char* const* bufs, int n, int me, int64_t lo, int64_t hi) {
  constexpr int64_t kChunk = static_cast<int64_t>((size_t{32} << 10) / sizeof(T));
  alignas(64) T acc[kChunk];
  T* out = reinterpret_cast<T*>(bufs[me]);
  for (int64_t pos = lo; pos < hi; pos += kChunk) {
    const int64_t c = hi - pos < kChunk ? hi - pos : kChunk;
    SumInOrder(acc, bufs, static_cast<size_t>(n), pos, c);  // out's own slice is among the inputs
    std::memcpy(out + pos, acc, static_cast<size_t>(c) * sizeof(T));
  }
}

}  // namespace dp
