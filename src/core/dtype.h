// Element types. The numeric values are the DP_DTYPE_* constants of the C API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dp {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kFloat64 = 4,
  kInt32 = 5,
  kInt64 = 6,
  kUInt8 = 7,
  kBool = 8,
};

// Storage-only half types: kernels that compute in them convert to float.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

size_t DTypeSize(DType t);                // 0 for kUndefined
std::string_view DTypeName(DType t);      // "float32", ...
bool DTypeFromInt(int32_t value, DType* out);  // false for unknown values

template <typename T> constexpr DType DTypeOf();
template <> constexpr DType DTypeOf<float>() { return DType::kFloat32; }
template <> constexpr DType DTypeOf<double>() { return DType::kFloat64; }
template <> constexpr DType DTypeOf<Half>() { return DType::kFloat16; }
template <> constexpr DType DTypeOf<BFloat16>() { return DType::kBFloat16; }
template <> constexpr DType DTypeOf<int32_t>() { return DType::kInt32; }
template <> constexpr DType DTypeOf<int64_t>() { return DType::kInt64; }
template <> constexpr DType DTypeOf<uint8_t>() { return DType::kUInt8; }
template <> constexpr DType DTypeOf<bool>() { return DType::kBool; }

}  // namespace dp
