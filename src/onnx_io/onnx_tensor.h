// ONNX tensors (TensorProto: initializers, Constant values) to dp's host
// tensors and back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor.h"
#include "onnx_io/onnx_proto.h"

namespace dp {

// dp's dtype of an ONNX element type (TensorProto::DataType); kUndefined
// when dp has none (int8, uint16, strings, complex, ...).
DType DTypeFromOnnx(int32_t elem_type);
// ONNX's element type of a dp dtype (every defined dtype has one).
int32_t OnnxElemType(DType dtype);
// "FLOAT", "INT8", ... (the number when ONNX has no such type).
std::string OnnxElemTypeName(int32_t elem_type);

// What an initializer or a Constant's tensor holds, as a CPU tensor; float16
// and bfloat16 are widened to float32 (dp computes in float32; the bits are
// kept exactly). Checked before anything is allocated: every dim >= 0 and
// their product representable, and the data (raw_data, or the typed field of
// its element type) exactly as many elements as the dims say. Data in an
// external file, a segment, or an element type dp has no dtype for are
// kUnimplemented; anything else wrong is kInvalidNet. `what` names the
// tensor in messages ("initializer 'w'").
Tensor TensorFromOnnx(const onnx::TensorProto& t, const std::string& what);

// A host tensor as ONNX's tensor `name`: dims, element type and raw_data
// (little-endian, as ONNX stores it).
void TensorToOnnx(const Tensor& host, const std::string& name, onnx::TensorProto* out);

// `s` for a message: a byte that breaks UTF-8 (or a NUL) as \xNN, so that
// dp's statuses are UTF-8 whatever a model holds.
std::string PrintableText(std::string_view s);

// A 2-D tensor's transpose ([rows, cols] -> [cols, rows], any dtype, on
// the host): the weights of ONNX's Gemm / MatMul and dp's FC differ so.
Tensor Transposed2D(const Tensor& host);

}  // namespace dp
