#include "onnx_io/onnx_tensor.h"

#include <bit>
#include <cstring>

#include "core/error.h"
#include "core/half_float.h"
#include "core/utf8.h"

namespace dp {
namespace {

static_assert(std::endian::native == std::endian::little, "ONNX stores raw_data little-endian, as this host does");

using onnx::TensorProto;

// More elements than any tensor dp could hold (2^48: a petabyte of bytes);
// also keeps the byte count of every dtype far from overflowing.
constexpr int64_t kMaxElements = int64_t{1} << 48;

int64_t CheckedNumel(const TensorProto& t, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    DP_ENFORCE_CODE(d >= 0, Code::kInvalidNet, what, " has a negative dim ", d);
    if (d == 0) return 0;
  }
  for (int64_t d : t.dims())
    DP_ENFORCE_CODE(!__builtin_mul_overflow(n, d, &n) && n <= kMaxElements, Code::kInvalidNet, what,
                    " declares more than 2^48 elements");
  return n;
}

// The typed field's element count must be the dims' product.
void CheckCount(int64_t have, int64_t want, const char* field, const std::string& what) {
  DP_ENFORCE_CODE(have == want, Code::kInvalidNet, what, " holds ", have, " values in ", field, " but its dims say ",
                  want);
}

// float16 / bfloat16 bits (from raw_data or int32_data) widened to float32.
template <typename Half16>
Tensor Widened(const Dims& dims, int64_t n, uint16_t (*bits_at)(const TensorProto&, int64_t), const TensorProto& t) {
  Tensor out(dims, DType::kFloat32);
  float* p = out.mutable_data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = ToFloat(Half16{bits_at(t, i)});
  return out;
}

uint16_t RawBits(const TensorProto& t, int64_t i) {
  uint16_t b;
  std::memcpy(&b, t.raw_data().data() + 2 * i, 2);
  return b;
}
uint16_t Int32Bits(const TensorProto& t, int64_t i) { return static_cast<uint16_t>(t.int32_data(static_cast<int>(i))); }

}  // namespace

DType DTypeFromOnnx(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT: return DType::kFloat32;
    case TensorProto::FLOAT16: return DType::kFloat16;
    case TensorProto::BFLOAT16: return DType::kBFloat16;
    case TensorProto::DOUBLE: return DType::kFloat64;
    case TensorProto::INT32: return DType::kInt32;
    case TensorProto::INT64: return DType::kInt64;
    case TensorProto::UINT8: return DType::kUInt8;
    case TensorProto::BOOL: return DType::kBool;
    default: return DType::kUndefined;
  }
}

int32_t OnnxElemType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return TensorProto::FLOAT;
    case DType::kFloat16: return TensorProto::FLOAT16;
    case DType::kBFloat16: return TensorProto::BFLOAT16;
    case DType::kFloat64: return TensorProto::DOUBLE;
    case DType::kInt32: return TensorProto::INT32;
    case DType::kInt64: return TensorProto::INT64;
    case DType::kUInt8: return TensorProto::UINT8;
    case DType::kBool: return TensorProto::BOOL;
    case DType::kUndefined: break;
  }
  DP_THROW(Code::kInternal, "no ONNX element type for dtype ", DTypeName(dtype));
}

std::string OnnxElemTypeName(int32_t elem_type) {
  return TensorProto::DataType_IsValid(elem_type) ? TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type))
                                                  : std::to_string(elem_type);
}

Tensor TensorFromOnnx(const TensorProto& t, const std::string& what) {
  if (t.data_location() == TensorProto::EXTERNAL || t.external_data_size() > 0) {
    std::string location;
    for (const auto& kv : t.external_data())
      if (kv.key() == "location") location = kv.value();
    DP_THROW(Code::kUnimplemented, what, " keeps its data in an external file",
             location.empty() ? std::string() : StrCat(" ('", PrintableText(location), "')"),
             ": dp reads models whose tensors are inside the model (onnx.save_model with save_as_external_data=False)");
  }
  DP_ENFORCE_CODE(!t.has_segment(), Code::kUnimplemented, what, " is a segment of a larger tensor, which dp does not read");
  const DType dtype = DTypeFromOnnx(t.data_type());
  DP_ENFORCE_CODE(dtype != DType::kUndefined, Code::kUnimplemented, what, " has element type ",
                  OnnxElemTypeName(t.data_type()), ", which dp has no dtype for");
  const int64_t n = CheckedNumel(t, what);
  const Dims dims(t.dims().begin(), t.dims().end());
  const size_t item = DTypeSize(dtype);

  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    DP_ENFORCE_CODE(raw.size() == static_cast<uint64_t>(n) * item, Code::kInvalidNet, what, " has ", raw.size(),
                    " bytes of raw_data but its dims ", DimsString(dims), " of ", OnnxElemTypeName(t.data_type()),
                    " need ", static_cast<uint64_t>(n) * item);
    if (dtype == DType::kFloat16) return Widened<Half>(dims, n, RawBits, t);
    if (dtype == DType::kBFloat16) return Widened<BFloat16>(dims, n, RawBits, t);
    Tensor out(dims, dtype);
    if (n > 0) std::memcpy(out.raw_mutable_data(), raw.data(), raw.size());
    return out;
  }

  switch (dtype) {
    case DType::kFloat32: {
      CheckCount(t.float_data_size(), n, "float_data", what);
      Tensor out(dims, dtype);
      if (n > 0) std::memcpy(out.raw_mutable_data(), t.float_data().data(), static_cast<size_t>(n) * item);
      return out;
    }
    case DType::kFloat64: {
      CheckCount(t.double_data_size(), n, "double_data", what);
      Tensor out(dims, dtype);
      if (n > 0) std::memcpy(out.raw_mutable_data(), t.double_data().data(), static_cast<size_t>(n) * item);
      return out;
    }
    case DType::kInt64: {
      CheckCount(t.int64_data_size(), n, "int64_data", what);
      Tensor out(dims, dtype);
      if (n > 0) std::memcpy(out.raw_mutable_data(), t.int64_data().data(), static_cast<size_t>(n) * item);
      return out;
    }
    case DType::kFloat16:
      CheckCount(t.int32_data_size(), n, "int32_data", what);
      return Widened<Half>(dims, n, Int32Bits, t);
    case DType::kBFloat16:
      CheckCount(t.int32_data_size(), n, "int32_data", what);
      return Widened<BFloat16>(dims, n, Int32Bits, t);
    case DType::kInt32:
    case DType::kUInt8:
    case DType::kBool: {
      CheckCount(t.int32_data_size(), n, "int32_data", what);
      Tensor out(dims, dtype);
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        if (dtype == DType::kInt32) {
          out.mutable_data<int32_t>()[i] = v;
        } else if (dtype == DType::kBool) {
          out.mutable_data<bool>()[i] = v != 0;
        } else {
          DP_ENFORCE_CODE(v >= 0 && v <= 255, Code::kInvalidNet, what, " holds ", v, " in int32_data, not a uint8");
          out.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v);
        }
      }
      return out;
    }
    case DType::kUndefined: break;
  }
  DP_THROW(Code::kInternal, what, ": unhandled dtype ", DTypeName(dtype));
}

std::string PrintableText(std::string_view s) {
  std::string out;
  while (!s.empty()) {
    const size_t bad = FindInvalidUtf8(s);
    out.append(s.substr(0, bad == std::string_view::npos ? s.size() : bad));
    if (bad == std::string_view::npos) break;
    static const char kHex[] = "0123456789abcdef";
    const auto b = static_cast<unsigned char>(s[bad]);
    out += "\\x";
    out += kHex[b >> 4];
    out += kHex[b & 15];
    s.remove_prefix(bad + 1);
  }
  return out;
}

Tensor Transposed2D(const Tensor& host) {
  DP_ENFORCE_CODE(host.ndim() == 2, Code::kInternal, "transposing ", host.DebugString(), " as a matrix");
  const int64_t rows = host.dims()[0], cols = host.dims()[1];
  Tensor out({cols, rows}, host.dtype());
  const size_t item = host.itemsize();
  const auto* in = static_cast<const char*>(host.raw_data());
  auto* o = static_cast<char*>(out.raw_mutable_data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(o + static_cast<size_t>(c * rows + r) * item, in + static_cast<size_t>(r * cols + c) * item, item);
  return out;
}

void TensorToOnnx(const Tensor& host, const std::string& name, onnx::TensorProto* out) {
  DP_ENFORCE_CODE(host.device().type == DeviceType::kCPU, Code::kInternal, "ONNX tensor '", name,
                  "' from a tensor on ", DeviceName(host.device()));
  out->Clear();
  out->set_name(name);
  out->set_data_type(OnnxElemType(host.dtype()));
  for (int64_t d : host.dims()) out->add_dims(d);
  out->set_raw_data(host.numel() > 0 ? std::string(static_cast<const char*>(host.raw_data()), host.nbytes())
                                     : std::string());
}

}  // namespace dp
