// ONNX import (onnx_model.h): checks the graph's structure, walks its nodes
// in dependency order through their converters (onnx_import_ops.cc), then
// assembles the model: the forward net from the ops, the init net from the
// constants the ops read (one GivenTensorFill each), the lists of params,
// computed params, inputs, and the optional head and optimizer.
#include <algorithm>
#include <climits>
#include <map>
#include <queue>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <onnx/common/version.h>

#include "core/file_bytes.h"
#include "core/utf8.h"
#include "onnx_io/onnx_import.h"
#include "onnx_io/onnx_model.h"
#include "onnx_io/onnx_tensor.h"

namespace dp {
namespace onnx_import {

class Importer {
 public:
  Importer(const onnx::ModelProto& model, int32_t opset, const OnnxImportOptions& options)
      : graph_(model.graph()), opset_(opset), options_(options) {}

  ModelDef Run();

  // ---- for the converters (Node)
  const Value& Get(const std::string& name) const {
    auto it = values_.find(name);
    DP_ENFORCE_CODE(it != values_.end(), Code::kInternal, "ONNX value '", name, "' read before it was defined");
    return it->second;
  }
  void Define(Value v) { values_[v.name] = std::move(v); }
  int Uses(const std::string& name) const {
    auto it = uses_.find(name);
    return it == uses_.end() ? 0 : it->second;
  }
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; !names_.insert(name).second; ++k) name = StrCat(base, "_", k);
    return name;
  }
  // The constant `name` as a blob of the model (trained: a param).
  std::string UseConstant(const std::string& name, std::shared_ptr<const Tensor> value, bool trained) {
    auto [it, added] = constant_blobs_.try_emplace(name, ConstantBlob{std::move(value), trained});
    if (added) constant_order_.push_back(name);
    it->second.trained = it->second.trained || trained;
    return name;
  }
  // A constant derived from the weight `name` (`tag` says how: "T" for
  // transposed), made once however many nodes read it so.
  std::string DerivedWeight(const std::string& name, const std::string& tag, Tensor value) {
    auto [it, added] = derived_.try_emplace(name + '\n' + tag);
    if (added) {
      // A weight no other node reads keeps its name in its new form.
      const bool alone = Uses(name) == 1 && !constant_blobs_.count(name);
      it->second = alone ? name : Unique(StrCat(name, "/", tag));
      UseConstant(it->second, std::make_shared<const Tensor>(std::move(value)), true);
    }
    return it->second;
  }
  void Emit(OperatorDef op) { ops_.push_back(std::move(op)); }

 private:
  struct ConstantBlob {
    std::shared_ptr<const Tensor> value;
    bool trained = false;
  };

  void CheckNames() const;
  void DefineInitializers();
  void DefineInputs();
  std::vector<int> SortedNodes();
  void Convert(Node& node);
  std::string Label(int index) const;
  NetDef InitNet(const std::string& name) const;
  void AddHead(ModelDef& m);

  const onnx::GraphProto& graph_;
  int32_t opset_;
  const OnnxImportOptions& options_;
  std::map<std::string, Value> values_;
  std::set<std::string> names_;  // every name taken: the graph's and dp's own
  std::map<std::string, int> uses_;
  std::vector<std::string> inputs_;  // the graph's inputs that are not initializers
  std::vector<OperatorDef> ops_;
  std::map<std::string, ConstantBlob> constant_blobs_;
  std::vector<std::string> constant_order_;
  std::map<std::string, std::string> derived_;
};

namespace {

// A graph's dims above this are taken as unknown: the converters' shape
// arithmetic on known dims then never overflows.
constexpr int64_t kMaxShapeDim = int64_t{1} << 40;

// A value_info's element type and dims (-1 for a symbolic or missing dim).
Value ValueFromInfo(const onnx::ValueInfoProto& info) {
  Value v;
  v.name = info.name();
  if (!info.type().has_tensor_type()) return v;
  const auto& t = info.type().tensor_type();
  v.dtype = DTypeFromOnnx(t.elem_type());
  if (t.has_shape()) {
    Dims dims;
    for (const auto& d : t.shape().dim())
      dims.push_back(d.has_dim_value() && d.dim_value() >= 0 && d.dim_value() <= kMaxShapeDim ? d.dim_value()
                                                                                                : kUnknownDim);
    v.shape = dims;
  }
  return v;
}

}  // namespace

std::string Importer::Label(int index) const {
  const onnx::NodeProto& n = graph_.node(index);
  return StrCat(n.op_type(), n.name().empty() ? std::string() : StrCat(" '", n.name(), "'"), " (node ", index,
                ", opset ", opset_, ")");
}

// The graph's names become blob, op and model names, which must be UTF-8
// without NUL (they cross the C API as C strings and print as JSON): checked
// before anything prints one.
void Importer::CheckNames() const {
  auto check = [](const std::string& s, const auto&... what) {
    const size_t bad = FindInvalidUtf8(s);
    DP_ENFORCE_CODE(bad == std::string::npos, Code::kParse, "ONNX model: ", what..., " is not UTF-8 without NUL bytes (",
                    "byte ", bad, " of ", s.size(), ": '", PrintableText(s), "')");
  };
  check(graph_.name(), "the graph's name");
  for (const auto& t : graph_.initializer()) check(t.name(), "an initializer's name");
  for (const auto& v : graph_.input()) check(v.name(), "a graph input's name");
  for (const auto& v : graph_.output()) check(v.name(), "a graph output's name");
  for (int i = 0; i < graph_.node_size(); ++i) {
    const onnx::NodeProto& n = graph_.node(i);
    check(n.op_type(), "node ", i, "'s op type");
    check(n.name(), "node ", i, "'s name");
    check(n.domain(), "node ", i, "'s domain");
    for (const auto& x : n.input()) check(x, "an input name of node ", i);
    for (const auto& y : n.output()) check(y, "an output name of node ", i);
    for (const auto& a : n.attribute()) check(a.name(), "an attribute name of node ", i);
  }
}

void Importer::DefineInitializers() {
  DP_ENFORCE_CODE(graph_.sparse_initializer_size() == 0, Code::kUnimplemented, "sparse initializer '",
                  graph_.sparse_initializer(0).values().name(), "': dp reads dense tensors only");
  for (const auto& t : graph_.initializer()) {
    DP_ENFORCE_CODE(!t.name().empty(), Code::kInvalidNet, "an initializer has no name");
    DP_ENFORCE_CODE(names_.insert(t.name()).second, Code::kInvalidNet, "two initializers are named '", t.name(), "'");
    Value v;
    v.name = t.name();
    v.constant = std::make_shared<const Tensor>(TensorFromOnnx(t, StrCat("initializer '", t.name(), "'")));
    v.dtype = v.constant->dtype();
    v.shape = v.constant->dims();
    Define(std::move(v));
  }
}

void Importer::DefineInputs() {
  for (const auto& info : graph_.input()) {
    DP_ENFORCE_CODE(!info.name().empty(), Code::kInvalidNet, "a graph input has no name");
    if (values_.count(info.name())) continue;  // an initializer's (overridable) default: a constant here
    DP_ENFORCE_CODE(names_.insert(info.name()).second, Code::kInvalidNet, "two graph inputs are named '", info.name(),
                    "'");
    DP_ENFORCE_CODE(info.type().has_tensor_type(), Code::kUnimplemented, "graph input '", info.name(),
                    "' is not a tensor (sequences, maps and optionals have no dp form)");
    inputs_.push_back(info.name());
    Define(ValueFromInfo(info));
  }
}

// The nodes in an order where each reads only what earlier ones (or the
// graph's inputs and initializers) define: ONNX's own order when it is one.
// Checks that every name is defined once and read only where defined.
std::vector<int> Importer::SortedNodes() {
  const int n = graph_.node_size();
  std::map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& y : graph_.node(i).output()) {
      if (y.empty()) continue;
      DP_ENFORCE_CODE(!values_.count(y), Code::kInvalidNet, Label(i), " writes '", y,
                      "', which is a graph input or an initializer");
      auto [it, added] = producer.emplace(y, i);
      DP_ENFORCE_CODE(added, Code::kInvalidNet, Label(i), " writes '", y, "', which ", Label(it->second),
                      " writes too (ONNX values are written once)");
      names_.insert(y);
    }
  std::vector<std::vector<int>> readers(static_cast<size_t>(n));
  std::vector<int> pending(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i)
    for (const auto& x : graph_.node(i).input()) {
      if (x.empty()) continue;  // an optional input left out
      ++uses_[x];
      auto it = producer.find(x);
      if (it == producer.end()) {
        DP_ENFORCE_CODE(values_.count(x), Code::kInvalidNet, Label(i), " reads '", x,
                        "', which no node, graph input or initializer defines");
        continue;
      }
      readers[static_cast<size_t>(it->second)].push_back(i);
      ++pending[static_cast<size_t>(i)];
    }
  for (const auto& out : graph_.output()) {
    DP_ENFORCE_CODE(producer.count(out.name()) || values_.count(out.name()), Code::kInvalidNet, "graph output '",
                    out.name(), "' is defined by no node, graph input or initializer");
    ++uses_[out.name()];
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i)
    if (pending[static_cast<size_t>(i)] == 0) ready.push(i);
  std::vector<int> order;
  order.reserve(static_cast<size_t>(n));
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int r : readers[static_cast<size_t>(i)])
      if (--pending[static_cast<size_t>(r)] == 0) ready.push(r);
  }
  if (static_cast<int>(order.size()) != n) {
    std::vector<std::string> stuck;
    for (int i = 0; i < n && stuck.size() < 5; ++i)
      if (pending[static_cast<size_t>(i)] > 0) stuck.push_back(Label(i));
    std::string list;
    for (const auto& s : stuck) list += (list.empty() ? "" : ", ") + s;
    DP_THROW(Code::kInvalidNet, n - static_cast<int>(order.size()),
             " nodes read values that only they or their readers write (a cycle), among them ", list);
  }
  return order;
}

void Importer::Convert(Node& node) {
  const onnx::NodeProto& p = node.proto();
  if (!p.domain().empty() && p.domain() != "ai.onnx")
    node.Fail("an op of domain '", p.domain(), "', which dp has no ops of");
  const auto& table = Converters();
  auto it = table.find(p.op_type());
  if (it == table.end()) node.Fail("dp has no op for it");
  DP_ENFORCE_CODE(p.output_size() > 0 && !p.output(0).empty(), Code::kInvalidNet, "the node has no output");
  for (const auto& a : p.attribute()) {
    const auto& known = it->second.attributes;
    if (std::find(known.begin(), known.end(), a.name()) == known.end())
      node.Fail("attribute '", a.name(), "', which dp does not implement");
  }
  it->second.convert(node);
  for (int i = 0; i < p.output_size(); ++i)
    DP_ENFORCE_CODE(p.output(i).empty() || values_.count(p.output(i)) || !node.OutputUsed(i), Code::kInternal,
                    "the converter of ", p.op_type(), " left output ", i, " ('", p.output(i), "') undefined");
}

NetDef Importer::InitNet(const std::string& name) const {
  NetDef init;
  init.name = name;
  for (const std::string& blob : constant_order_) {
    const Tensor& t = *constant_blobs_.at(blob).value;
    std::vector<Argument> args{{"shape", std::vector<int64_t>(t.dims())}};
    if (t.dtype() != DType::kFloat32) args.push_back({"dtype", static_cast<int64_t>(t.dtype())});
    const int64_t n = t.numel();
    switch (t.dtype()) {
      case DType::kFloat32: args.push_back({"values", std::vector<double>(t.data<float>(), t.data<float>() + n)}); break;
      case DType::kFloat64: args.push_back({"values", std::vector<double>(t.data<double>(), t.data<double>() + n)}); break;
      case DType::kInt64:
        args.push_back({"int_values", std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + n)});
        break;
      case DType::kInt32:
        args.push_back({"int_values", std::vector<int64_t>(t.data<int32_t>(), t.data<int32_t>() + n)});
        break;
      default:
        DP_THROW(Code::kUnimplemented, "constant '", blob, "' (", t.DebugString(),
                 ") is read as data; dp holds float32, float64, int32 and int64 constants");
    }
    init.ops.push_back(MakeOperatorDef("GivenTensorFill", {}, {blob}, std::move(args)));
  }
  return init;
}

void Importer::AddHead(ModelDef& m) {
  DP_ENFORCE_CODE(!m.forward_net.external_outputs.empty(), Code::kInvalidArgument,
                  "a softmax cross-entropy head needs a graph output (the logits); the graph has none");
  const std::string logits = m.forward_net.external_outputs.front();
  const Value& v = Get(logits);
  DP_ENFORCE_CODE(!v.shape || v.shape->size() == 2, Code::kInvalidArgument,
                  "a softmax cross-entropy head reads logits [N, classes], but the graph's first output '", logits,
                  "' is ", DimsString(*v.shape));
  const std::string& labels = options_.labels;
  DP_ENFORCE_CODE(!labels.empty(), Code::kInvalidArgument, "the head's labels input has no name");
  DP_ENFORCE_CODE(FindInvalidUtf8(labels) == std::string::npos, Code::kInvalidArgument, "the head's labels input '",
                  PrintableText(labels), "' is not UTF-8 without NUL bytes");
  DP_ENFORCE_CODE(!names_.count(labels), Code::kInvalidArgument, "the head's labels input '", labels,
                  "' is already a name of the graph: choose another");
  names_.insert(labels);
  const std::string softmax = Unique("softmax"), loss = Unique("loss"), accuracy = Unique("accuracy");
  m.forward_net.ops.push_back(MakeOperatorDef("SoftmaxWithLoss", {logits, labels}, {softmax, loss}));
  m.forward_net.ops.push_back(MakeOperatorDef("Accuracy", {softmax, labels}, {accuracy}));
  m.inputs.push_back(labels);
  m.losses.push_back(loss);
  m.metrics.push_back(accuracy);
}

ModelDef Importer::Run() {
  CheckNames();
  DefineInitializers();
  DefineInputs();
  const std::vector<int> order = SortedNodes();

  std::vector<std::string> unsupported;
  for (int i : order) {
    const onnx::NodeProto& p = graph_.node(i);
    Node node(p, opset_, *this, Label(i));
    try {
      Convert(node);
    } catch (const Unsupported& u) {
      unsupported.push_back(StrCat(node.label(), ": ", u.reason));
      for (const auto& y : p.output())  // its readers go on without knowing more of it
        if (!y.empty() && !values_.count(y)) Define(Value{y, nullptr, DType::kUndefined, std::nullopt});
    } catch (Error& e) {
      throw e.Prepend(node.label());
    }
  }
  for (const auto& out : graph_.output()) {
    const Value& v = Get(out.name());
    if (v.constant != nullptr)
      unsupported.push_back(StrCat("graph output '", out.name(), "': a constant (dp's outputs are computed)"));
    else if (std::find(inputs_.begin(), inputs_.end(), out.name()) != inputs_.end())
      unsupported.push_back(StrCat("graph output '", out.name(), "': a graph input passed through"));
  }
  if (!unsupported.empty()) {
    std::string list;
    for (const auto& u : unsupported) list += (list.empty() ? "" : "; ") + u;
    DP_THROW(Code::kUnimplemented, "dp cannot import ", unsupported.size(), " part",
             unsupported.size() == 1 ? "" : "s", " of the ONNX graph (", graph_.node_size(), " nodes): ", list);
  }

  ModelDef m;
  m.name = graph_.name().empty() ? std::string("onnx") : graph_.name();
  m.forward_net.name = m.name;
  m.forward_net.ops = std::move(ops_);
  for (const auto& out : graph_.output()) m.forward_net.external_outputs.push_back(out.name());
  m.init_net = InitNet(m.name + "_init");
  for (const std::string& blob : constant_order_)
    (constant_blobs_.at(blob).trained ? m.params : m.computed_params).push_back(blob);
  std::set<std::string> read;
  for (const auto& op : m.forward_net.ops) read.insert(op.inputs.begin(), op.inputs.end());
  for (const std::string& x : inputs_)
    if (read.count(x)) m.inputs.push_back(x);
  if (options_.head == OnnxImportOptions::Head::kSoftmaxCrossEntropy) AddHead(m);
  m.optimizer = options_.optimizer;
  try {
    CompleteAndValidateModel(m);
  } catch (Error& e) {
    throw e.Prepend("the model imported from ONNX");
  }
  return m;
}

// ---- Node ---------------------------------------------------------------

const Value& Node::In(int i) const {
  DP_ENFORCE_CODE(Has(i), Code::kInvalidNet, "input ", i, " is missing, and ", proto_.op_type(), " needs it");
  return importer_.Get(proto_.input(i));
}

const Tensor* Node::ConstIn(int i) const { return Has(i) ? In(i).constant.get() : nullptr; }

const Tensor& Node::RequireConst(int i, const char* role) const {
  const Tensor* t = ConstIn(i);
  if (t == nullptr) Fail("input ", i, " (", role, ") is computed by the graph; dp needs it as a constant");
  return *t;
}

std::string Node::Data(int i) {
  const Value& v = In(i);
  return v.constant ? importer_.UseConstant(v.name, v.constant, false) : v.name;
}

std::string Node::Weight(int i) {
  const Value& v = In(i);
  return v.constant ? importer_.UseConstant(v.name, v.constant, true) : v.name;
}

std::string Node::WeightAs(int i, const std::string& tag, Tensor value) {
  return importer_.DerivedWeight(In(i).name, tag, std::move(value));
}

std::string Node::NewConstant(const std::string& suffix, Tensor value, bool trained) {
  return importer_.UseConstant(Temp(suffix), std::make_shared<const Tensor>(std::move(value)), trained);
}

bool Node::OutputUsed(int i) const {
  return i < proto_.output_size() && !proto_.output(i).empty() && importer_.Uses(proto_.output(i)) > 0;
}

std::string Node::Out(int i, DType dtype, Shape shape) {
  std::string name = i < proto_.output_size() ? proto_.output(i) : std::string();
  if (name.empty()) name = Temp(StrCat("output", i));
  importer_.Define(Value{name, nullptr, dtype, std::move(shape)});
  return name;
}

void Node::OutConst(int i, Tensor value) {
  DP_ENFORCE_CODE(i < proto_.output_size() && !proto_.output(i).empty(), Code::kInternal, "constant output ", i,
                  " has no name");
  Value v{proto_.output(i), nullptr, value.dtype(), value.dims()};
  v.constant = std::make_shared<const Tensor>(std::move(value));
  importer_.Define(std::move(v));
}

std::string Node::Temp(const std::string& suffix) {
  const std::string base = proto_.output_size() > 0 && !proto_.output(0).empty() ? proto_.output(0) : proto_.op_type();
  return importer_.Unique(StrCat(base, "/", suffix));
}

void Node::Emit(OperatorDef op) {
  if (op.name.empty()) op.name = proto_.name();
  importer_.Emit(std::move(op));
}

const onnx::AttributeProto* Node::Attr(const std::string& name) const {
  for (const auto& a : proto_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

const onnx::AttributeProto& Node::Require(const std::string& name, int32_t type) const {
  const onnx::AttributeProto* a = Attr(name);
  DP_ENFORCE_CODE(a != nullptr, Code::kInvalidNet, "attribute '", name, "' is required");
  // Old exporters leave `type` unset; then the field that holds a value says it.
  DP_ENFORCE_CODE(a->type() == type || a->type() == onnx::AttributeProto::UNDEFINED, Code::kInvalidNet,
                  "attribute '", name, "' is a ", onnx::AttributeProto::AttributeType_Name(a->type()), ", not a ",
                  onnx::AttributeProto::AttributeType_Name(static_cast<onnx::AttributeProto::AttributeType>(type)));
  return *a;
}

int64_t Node::Int(const std::string& name, std::optional<int64_t> fallback) const {
  if (fallback && !HasAttr(name)) return *fallback;
  const auto& a = Require(name, onnx::AttributeProto::INT);
  DP_ENFORCE_CODE(a.has_i(), Code::kInvalidNet, "attribute '", name, "' holds no int");
  return a.i();
}

std::vector<int64_t> Node::Ints(const std::string& name, std::optional<std::vector<int64_t>> fallback) const {
  if (fallback && !HasAttr(name)) return *fallback;
  const auto& a = Require(name, onnx::AttributeProto::INTS);
  return {a.ints().begin(), a.ints().end()};
}

float Node::Float(const std::string& name, std::optional<float> fallback) const {
  if (fallback && !HasAttr(name)) return *fallback;
  const auto& a = Require(name, onnx::AttributeProto::FLOAT);
  DP_ENFORCE_CODE(a.has_f(), Code::kInvalidNet, "attribute '", name, "' holds no float");
  return a.f();
}

std::string Node::String(const std::string& name, std::optional<std::string> fallback) const {
  if (fallback && !HasAttr(name)) return *fallback;
  return Require(name, onnx::AttributeProto::STRING).s();
}

Tensor Node::TensorAttr(const std::string& name) const {
  const auto& a = Require(name, onnx::AttributeProto::TENSOR);
  DP_ENFORCE_CODE(a.has_t(), Code::kInvalidNet, "attribute '", name, "' holds no tensor");
  return TensorFromOnnx(a.t(), StrCat("attribute '", name, "'"));
}

}  // namespace onnx_import

namespace {

// The version of ONNX's default domain the model imports.
int32_t DefaultDomainOpset(const onnx::ModelProto& model) {
  int64_t opset = -1;  // as the model says it: no narrowing before the range check
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  DP_ENFORCE_CODE(opset >= 0, Code::kInvalidNet, "the ONNX model imports no opset of ONNX's default domain");
  DP_ENFORCE_CODE(opset >= kOnnxImportMinOpset && opset <= kOnnxImportMaxOpset, Code::kUnimplemented,
                  "the ONNX model uses opset ", opset, " of the default domain; dp imports opsets ",
                  kOnnxImportMinOpset, " to ", kOnnxImportMaxOpset,
                  " (onnx.version_converter.convert_version converts a model to another)");
  return static_cast<int32_t>(opset);
}

}  // namespace

ModelDef ModelFromOnnx(std::string_view bytes, const OnnxImportOptions& options) {
  DP_ENFORCE_CODE(!bytes.empty(), Code::kParse, "the ONNX model is empty (0 bytes)");
  DP_ENFORCE_CODE(bytes.size() <= static_cast<size_t>(INT_MAX), Code::kParse, "the ONNX model is ", bytes.size(),
                  " bytes: over protobuf's 2 GiB");
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(INT_MAX);
  DP_ENFORCE_CODE(model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage(), Code::kParse, "not an ONNX model: ",
                  bytes.size(), " bytes that do not parse as an ONNX ModelProto");
  DP_ENFORCE_CODE(model.has_graph(), Code::kParse, "not an ONNX model: ", bytes.size(),
                  " bytes of protobuf without a graph");
  onnx_import::Importer importer(model, DefaultDomainOpset(model), options);
  return importer.Run();
}

ModelDef ModelFromOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  const std::string bytes = ReadFileBytes(path, "ONNX model");
  try {
    return ModelFromOnnx(bytes, options);
  } catch (Error& e) {
    throw e.Prepend(StrCat("file '", path, "'"));
  }
}

bool OnnxBuilt() { return true; }
const char* OnnxLibraryVersion() { return onnx::LAST_RELEASE_VERSION; }

}  // namespace dp
