// The element types collectives sum (float32, float64, int32, int64), as
// C++ types: WithSumType(dtype, fn) calls fn(T{}) with dtype's type.
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

}  // namespace dp
