// ONNX models in and out of dp (docs/ONNX.md). Import turns an ONNX graph
// into a dp model: its initializers become the init net's values (params,
// or computed params when no op trains them), its nodes the forward net, its
// inputs and outputs the model's, named as in the graph. Export writes a
// model's inference net and current params as an ONNX model. Built on
// libonnx (the Meson feature `onnx`); a build without it has these functions
// too, and they throw kUnimplemented naming the feature.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/workspace.h"
#include "model/model_def.h"

namespace dp {

// The opsets of ONNX's default domain that import reads and export writes.
inline constexpr int32_t kOnnxImportMinOpset = 9;
inline constexpr int32_t kOnnxImportMaxOpset = 17;
inline constexpr int32_t kOnnxExportMinOpset = 11;
inline constexpr int32_t kOnnxExportMaxOpset = 17;
inline constexpr int32_t kOnnxExportDefaultOpset = 13;

struct OnnxImportOptions {
  // A training head on the graph's first output, taken as logits [N, classes]:
  // SoftmaxWithLoss against int32 labels (`labels`, a new model input) giving
  // "softmax" and the loss "loss", and Accuracy giving the metric "accuracy".
  enum class Head { kNone, kSoftmaxCrossEntropy };
  Head head = Head::kNone;
  std::string labels = "label";
  std::optional<OptimizerDef> optimizer;  // the model's; none: it serves but does not train
};

// The model an ONNX ModelProto's bytes describe. kParse for bytes that are
// no ONNX model; kUnimplemented for an opset outside [kOnnxImportMinOpset,
// kOnnxImportMaxOpset] and, in one error listing each of them, for every
// node dp cannot import; kInvalidNet for a graph that breaks ONNX's rules
// (a name read before anything defines it, a cycle, a tensor whose data
// disagrees with its dims). Nothing is allocated for what a tensor's dims
// claim before its data is there.
ModelDef ModelFromOnnx(std::string_view bytes, const OnnxImportOptions& options);
// The same from a file (kNotFound, kIo naming it).
ModelDef ModelFromOnnxFile(const std::string& path, const OnnxImportOptions& options);

struct OnnxExportOptions {
  std::vector<std::string> outputs;  // the graph's outputs; empty: the inference net's defaults
  std::string param_prefix;          // the params' blobs are param_prefix + name ("cuda_0/")
  int32_t opset = kOnnxExportDefaultOpset;
};

// The ONNX ModelProto bytes of `model`'s inference net (BuildInference, FC
// and Relu unfused) with the params and computed params `ws` holds (on any
// device) as initializers. The graph's inputs take the dtype and dims of the
// example batch ws holds under each model input's name (param_prefix +
// name), the first dim named "N" (the batch); the outputs' dims follow.
// kUnimplemented listing every op that has no ONNX form; kNotFound for a
// param or an input ws does not hold. The result passes ONNX's checker.
std::string ModelToOnnx(const ModelDef& model, const Workspace& ws, const OnnxExportOptions& options);

// Whether this build has ONNX, and libonnx's version ("1.12.0"; "" without).
bool OnnxBuilt();
const char* OnnxLibraryVersion();

}  // namespace dp
