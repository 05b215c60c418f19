// The element types collectives sum (float32, float64, int32, int64), as
// C++ types: WithSumType(dtype, fn) calls fn(T{}) with dtype's type; and
// the sum itself, in buffer order, which every CPU collective shares.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

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

// out[k] = bufs[0][off + k] + bufs[1][off + k] + ... + bufs[n - 1][off + k]
// for k < c, summed in buffer order (so every caller gets the same bits);
// n >= 2, `bufs` point at T elements, out aliases none of them.
template <typename T, typename Ptr>
void SumInOrder(T* out, const Ptr* bufs, size_t n, int64_t off, int64_t c) {
  const T* b0 = reinterpret_cast<const T*>(bufs[0]) + off;
  const T* b1 = reinterpret_cast<const T*>(bufs[1]) + off;
  for (int64_t k = 0; k < c; ++k) out[k] = b0[k] + b1[k];
  for (size_t i = 2; i < n; ++i) {
    const T* bi = reinterpret_cast<const T*>(bufs[i]) + off;
    for (int64_t k = 0; k < c; ++k) out[k] += bi[k];
  }
}

}  // namespace dp
