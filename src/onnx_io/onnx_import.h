// The ONNX importer's inside: what a value of the graph is while importing,
// and the view one node's converter (onnx_import_ops.cc) has of the graph
// being imported (onnx_import.cc). Each converter turns one ONNX node into
// dp ops; what it cannot express it reports as Unsupported, and the importer
// lists every such node in one error.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/net_def.h"
#include "onnx_io/onnx_proto.h"

namespace dp::onnx_import {

// A value's dims as far as the import knows them: nullopt when its rank is
// not known, kUnknownDim for a dim that is not.
inline constexpr int64_t kUnknownDim = -1;
using Shape = std::optional<Dims>;

// An ONNX value (a graph input, an initializer, a node's output).
struct Value {
  std::string name;                        // its ONNX name, which its dp blob keeps
  std::shared_ptr<const Tensor> constant;  // its value when the import knows it (initializers, Constant)
  DType dtype = DType::kUndefined;         // kUndefined: not known
  Shape shape;
};

// What a converter throws for a node dp cannot import (an op, an attribute
// value, an input that is not a constant where dp needs one).
struct Unsupported {
  std::string reason;
};

class Importer;

// One node, as its converter sees it.
class Node {
 public:
  Node(const onnx::NodeProto& proto, int32_t opset, Importer& importer, std::string label)
      : proto_(proto), opset_(opset), importer_(importer), label_(std::move(label)) {}

  int32_t opset() const { return opset_; }
  const std::string& label() const { return label_; }
  const onnx::NodeProto& proto() const { return proto_; }

  // ---- inputs (an optional input left out is absent, or named "")
  bool Has(int i) const { return i < proto_.input_size() && !proto_.input(i).empty(); }
  const Value& In(int i) const;
  // Input i's value when it is a constant, else nullptr.
  const Tensor* ConstIn(int i) const;
  // Input i's value, which dp needs at import (a shape, a bound): Unsupported
  // when it is computed by the graph.
  const Tensor& RequireConst(int i, const char* role) const;
  // Input i as a blob the ops read: a constant becomes a blob of the model
  // that no optimizer updates (a computed param); Weight makes it a param.
  std::string Data(int i);
  std::string Weight(int i);
  // Input i (a constant weight) in another form (`tag` names it: "T" for
  // transposed): a param under input i's name when no other node reads it,
  // else under a new one; made once for every node that asks for that form.
  std::string WeightAs(int i, const std::string& tag, Tensor value);
  // A new constant blob, named as Temp(suffix) (trained: a param; else a
  // computed param).
  std::string NewConstant(const std::string& suffix, Tensor value, bool trained);

  // ---- outputs
  int NumOutputs() const { return proto_.output_size(); }
  // Whether output i is there and something (a node, the graph's outputs) reads it.
  bool OutputUsed(int i) const;
  // Output i, which `op` writes: its blob, recorded with what is known of it.
  std::string Out(int i, DType dtype, Shape shape);
  // Output i as a constant known at import (no op).
  void OutConst(int i, Tensor value);
  // A blob name nothing else has, for a value between the ops of this node.
  std::string Temp(const std::string& suffix);
  void Emit(OperatorDef op);

  // ---- attributes (a wrong type is kInvalidNet; a missing one without a
  // fallback is kInvalidNet, as ONNX requires it)
  bool HasAttr(const std::string& name) const { return Attr(name) != nullptr; }
  int64_t Int(const std::string& name, std::optional<int64_t> fallback = std::nullopt) const;
  std::vector<int64_t> Ints(const std::string& name, std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  float Float(const std::string& name, std::optional<float> fallback = std::nullopt) const;
  std::string String(const std::string& name, std::optional<std::string> fallback = std::nullopt) const;
  Tensor TensorAttr(const std::string& name) const;
  const onnx::AttributeProto* Attr(const std::string& name) const;

  template <typename... Args>
  [[noreturn]] void Fail(const Args&... reason) const {
    throw Unsupported{StrCat(reason...)};
  }

 private:
  const onnx::AttributeProto& Require(const std::string& name, int32_t type) const;

  const onnx::NodeProto& proto_;
  int32_t opset_;
  Importer& importer_;
  std::string label_;
};

// A converter, and the attributes it understands: a node with any other
// attribute is Unsupported rather than imported without it.
struct OpConverter {
  void (*convert)(Node& node);
  std::vector<std::string> attributes;
};

// The converters by ONNX op type (default domain).
const std::map<std::string, OpConverter>& Converters();

}  // namespace dp::onnx_import
