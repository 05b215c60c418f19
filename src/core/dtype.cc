#include "core/dtype.h"

namespace dp {

static_assert(sizeof(bool) == 1, "bool tensors are one byte per element");

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat64: case DType::kInt64: return 8;
    case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kUInt8: case DType::kBool: return 1;
    case DType::kUndefined: return 0;
  }
  return 0;
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
    case DType::kUndefined: return "undefined";
  }
  return "undefined";
}

bool DTypeFromInt(int32_t value, DType* out) {
  if (value < static_cast<int32_t>(DType::kFloat32) || value > static_cast<int32_t>(DType::kBool))
    return false;
  *out = static_cast<DType>(value);
  return true;
}

}  // namespace dp
