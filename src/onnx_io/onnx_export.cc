// ONNX export (onnx_model.h): the model's inference net, op by op into ONNX
// nodes of the chosen opset, its params and computed params as initializers,
// its model inputs as the graph's inputs; then ONNX's checker must accept it.
#include <onnx/checker.h>

#include <algorithm>
#include <map>
#include <set>

#include "dp_config.h"
#include "exec/net.h"
#include "model/inference.h"
#include "onnx_io/onnx_model.h"
#include "onnx_io/onnx_tensor.h"
#include "ops/cpu/conv_utils.h"
#include "ops/net_validate.h"

namespace dp {
namespace {

// What an op of the net that has no ONNX form throws (collected, reported
// with every other one).
struct NoOnnxForm {
  std::string reason;
};

// The IR version that goes with an opset (ONNX's versioning table).
int64_t IrVersionFor(int32_t opset) { return opset <= 11 ? 6 : opset <= 14 ? 7 : 8; }

class Exporter {
 public:
  Exporter(const ModelDef& model, const Workspace& ws, const OnnxExportOptions& options)
      : model_(model), ws_(ws), options_(options) {}

  std::string Run();

 private:
  void Convert(const OperatorDef& op, size_t index);
  void ConvertFC(const OperatorDef& op, const ArgReader& args);
  void ConvertWindow(const OperatorDef& op, const ArgReader& args, bool conv);
  void ConvertSoftmax(const OperatorDef& op, const ArgReader& args);
  void ConvertClip(const OperatorDef& op, const ArgReader& args);
  void ConvertFill(const OperatorDef& op);

  onnx::NodeProto* Node(const std::string& type, std::vector<std::string> inputs, std::vector<std::string> outputs);
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; !names_.insert(name).second; ++k) name = StrCat(base, "_", k);
    return name;
  }
  // A new initializer (a constant of the graph, not a param).
  std::string Const(const std::string& base, const Tensor& host) {
    const std::string name = Unique(base);
    TensorToOnnx(host, name, graph_->add_initializer());
    return name;
  }
  Tensor Host(const std::string& blob) const;
  // What dp's shape inference knows of an ONNX value (by its dp blob).
  const TensorInfo* Info(const std::string& value) const {
    auto blob = blob_of_.find(value);
    auto it = shapes_.find(blob != blob_of_.end() ? blob->second : value);
    return it != shapes_.end() && it->second.known() ? &it->second : nullptr;
  }
  int64_t Rank(const std::string& value) const {
    const TensorInfo* info = Info(value);
    return info != nullptr ? static_cast<int64_t>(info->dims.size()) : -1;
  }
  DType FloatDTypeOf(const std::string& value) const {
    const TensorInfo* info = Info(value);
    return info != nullptr && info->dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  }
  // ONNX values are written once; dp's blobs may be written again (a Relu in
  // place). Each write of a blob is a new ONNX value: the last one is named
  // as the blob (so that outputs keep their names), earlier ones get a suffix.
  std::string Current(const std::string& blob) const {
    auto it = current_.find(blob);
    return it != current_.end() ? it->second : blob;
  }
  std::string NextVersion(const std::string& blob) {
    const bool last = --writes_left_[blob] == 0 && !graph_inputs_.count(blob);
    const std::string name = last ? blob : Unique(StrCat(blob, "/", ++versions_[blob]));
    current_[blob] = name;
    blob_of_[name] = blob;
    return name;
  }
  Tensor Scalar(DType dtype, double v) const {
    Tensor t({}, dtype);
    if (dtype == DType::kFloat64) t.mutable_data<double>()[0] = v;
    else t.mutable_data<float>()[0] = static_cast<float>(v);
    return t;
  }

  const ModelDef& model_;
  const Workspace& ws_;
  const OnnxExportOptions& options_;
  onnx::ModelProto proto_;
  onnx::GraphProto* graph_ = nullptr;
  std::string node_name_;  // the dp op being converted, for its nodes' names
  std::set<std::string> names_;
  std::map<std::string, TensorInfo> shapes_;
  std::map<std::string, Tensor> initializers_;  // the params', on the host
  std::set<std::string> graph_inputs_;            // initializers and inputs: never written
  std::map<std::string, int> writes_left_, versions_;
  std::map<std::string, std::string> current_, blob_of_;  // blob -> its current value, and back
};

onnx::NodeProto* Exporter::Node(const std::string& type, std::vector<std::string> inputs,
                                std::vector<std::string> outputs) {
  onnx::NodeProto* n = graph_->add_node();
  n->set_op_type(type);
  n->set_name(Unique(node_name_));
  for (auto& x : inputs) n->add_input(std::move(x));
  for (auto& y : outputs) n->add_output(std::move(y));
  return n;
}

void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void SetInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void SetFloat(onnx::NodeProto* n, const std::string& name, double v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}

Tensor Exporter::Host(const std::string& blob) const {
  const std::string name = options_.param_prefix + blob;
  Tensor t;
  try {
    t = ws_.GetTensor(name);
  } catch (Error& e) {
    throw e.Prepend(StrCat("param '", blob, "'"));
  }
  if (t.device().type == DeviceType::kCPU) return t;
  Tensor host(t.dims(), t.dtype());
  host.CopyFrom(t);
  return host;
}

// Y = X W^T + b: Gemm on X flattened at axis 1, or, over X's last axis, a
// MatMul by W transposed.
void Exporter::ConvertFC(const OperatorDef& op, const ArgReader& args) {
  const int64_t axis = args.Int("axis", 1), axis_w = args.Int("axis_w", 1);
  const std::string activation = args.String("activation", "none");
  const std::string &x = op.inputs[0], &w = op.inputs[1], &b = op.inputs[2], &y = op.outputs[0];
  const int64_t rank = Rank(x), rank_w = Rank(w);
  if (rank_w != 2 || (axis_w != 1 && axis_w != -1))
    throw NoOnnxForm{StrCat("W of rank ", rank_w, " flattened at axis_w ", axis_w, " (ONNX's are 2-D)")};
  const std::string linear = activation == "relu" ? Unique(y + "/linear") : y;
  if (axis == 1 || (rank >= 0 && axis == 1 - rank)) {
    std::string in = x;
    if (rank != 2) {
      in = Unique(x + "/flat");
      SetInt(Node("Flatten", {x}, {in}), "axis", 1);
    }
    SetInt(Node("Gemm", {in, w, b}, {linear}), "transB", 1);
  } else if (axis == -1 || (rank >= 0 && axis == rank - 1)) {
    // MatMul's B is W^T: a transposed initializer when W is one (what ONNX
    // importers fold), else a Transpose.
    const std::string product = Unique(y + "/product");
    std::string wt;
    auto param = initializers_.find(w);
    if (param != initializers_.end()) {
      wt = Const(w + "/T", Transposed2D(param->second));
    } else {
      wt = Unique(w + "/T");
      SetInts(Node("Transpose", {w}, {wt}), "perm", {1, 0});
    }
    Node("MatMul", {x, wt}, {product});
    Node("Add", {product, b}, {linear});
  } else {
    throw NoOnnxForm{StrCat("axis ", axis, " over X of rank ", rank, " (ONNX's Gemm flattens at 1, MatMul works on the last)")};
  }
  if (activation == "relu") Node("Relu", {linear}, {y});
  else if (activation != "none") throw NoOnnxForm{StrCat("activation '", activation, "'")};
}

void Exporter::ConvertWindow(const OperatorDef& op, const ArgReader& args, bool conv) {
  const bool global = !conv && args.Int("global_pooling", 0) != 0;
  if (global) {
    Node(op.type == "MaxPool" ? "GlobalMaxPool" : "GlobalAveragePool", {op.inputs[0]}, {op.outputs[0]});
    return;
  }
  std::optional<std::pair<int64_t, int64_t>> kernel;
  const conv::Window w = conv::ReadWindow(args, &kernel, conv);
  onnx::NodeProto* n = Node(op.type, op.inputs, {op.outputs[0]});
  if (kernel) {
    SetInts(n, "kernel_shape", {kernel->first, kernel->second});
  } else if (!conv) {
    throw NoOnnxForm{"a pooling without a kernel"};
  }
  SetInts(n, "strides", {w.sh, w.sw});
  SetInts(n, "pads", {w.pt, w.pl, w.pb, w.pr});
  if (conv) {
    SetInts(n, "dilations", {w.dh, w.dw});
    SetInt(n, "group", args.Int("group", 1));
  } else if (op.type == "AveragePool") {
    SetInt(n, "count_include_pad", args.Int("count_include_pad", 0));
  }
}

// dp's softmax is over the dims from `axis` on, flattened: ONNX's before
// opset 13, and from 13 its over the last axis when that is all of them.
void Exporter::ConvertSoftmax(const OperatorDef& op, const ArgReader& args) {
  const int64_t axis = args.Int("axis", 1), rank = Rank(op.inputs[0]);
  const std::string &x = op.inputs[0], &y = op.outputs[0];
  if (options_.opset < 13) {
    SetInt(Node(op.type, {x}, {y}), "axis", axis);
  } else if (axis == -1 || (rank >= 0 && axis == rank - 1)) {
    SetInt(Node(op.type, {x}, {y}), "axis", -1);
  } else {
    const std::string flat = Unique(x + "/flat"), soft = Unique(y + "/flat"), shape = Unique(x + "/shape");
    SetInt(Node("Flatten", {x}, {flat}), "axis", axis);
    SetInt(Node(op.type, {flat}, {soft}), "axis", -1);
    Node("Shape", {x}, {shape});
    Node("Reshape", {soft, shape}, {y});
  }
}

void Exporter::ConvertClip(const OperatorDef& op, const ArgReader& args) {
  const DType dtype = FloatDTypeOf(op.inputs[0]);
  std::vector<std::string> inputs{op.inputs[0], "", ""};
  if (args.Has("min")) inputs[1] = Const(op.outputs[0] + "/min", Scalar(dtype, args.Float("min")));
  if (args.Has("max")) inputs[2] = Const(op.outputs[0] + "/max", Scalar(dtype, args.Float("max")));
  while (inputs.back().empty()) inputs.pop_back();
  Node("Clip", inputs, {op.outputs[0]});
}

// A fill without inputs computes the same tensor every run: a Constant.
void Exporter::ConvertFill(const OperatorDef& op) {
  if (!op.inputs.empty()) throw NoOnnxForm{"a fill shaped like its input"};
  NetDef one;
  one.ops = {op};
  one.ops[0].device.reset();
  auto scratch = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(std::move(one)), scratch).Run();
  onnx::NodeProto* n = Node("Constant", {}, {op.outputs[0]});
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  TensorToOnnx(scratch->GetTensor(op.outputs[0]), op.outputs[0], a->mutable_t());
}

void Exporter::Convert(const OperatorDef& op, size_t index) {
  const ArgReader args(op, "");
  const std::string& t = op.type;
  node_name_ = op.name.empty() ? StrCat(t, "_", index) : op.name;
  auto only_output = [&](const char* what) {
    if (op.outputs.size() > 1) throw NoOnnxForm{StrCat("its ", what, " output")};
  };
  if (t == "Relu" || t == "Sigmoid" || t == "Tanh" || t == "Add" || t == "Sub" || t == "Mul" || t == "Div" ||
      t == "Sum") {
    Node(t, op.inputs, op.outputs);
  } else if (t == "Alias" || t == "StopGradient" || t == "Copy" || t == "MakeWritable") {
    Node("Identity", {op.inputs[0]}, {op.outputs[0]});
  } else if (t == "Dropout") {  // inference nets drop nothing
    only_output("mask");
    Node("Identity", {op.inputs[0]}, {op.outputs[0]});
  } else if (t == "Scale") {
    const std::string s = Const(op.outputs[0] + "/scale", Scalar(FloatDTypeOf(op.inputs[0]), args.Float("scale", 1)));
    Node("Mul", {op.inputs[0], s}, {op.outputs[0]});
  } else if (t == "FC") {
    ConvertFC(op, args);
  } else if (t == "Conv") {
    ConvertWindow(op, args, true);
  } else if (t == "MaxPool" || t == "AveragePool") {
    ConvertWindow(op, args, false);
  } else if (t == "SpatialBN") {
    if (args.Int("is_test", 0) == 0 || op.outputs.size() > 1) throw NoOnnxForm{"batch statistics (training mode)"};
    onnx::NodeProto* n = Node("BatchNormalization", op.inputs, {op.outputs[0]});
    SetFloat(n, "epsilon", args.Float("epsilon", 1e-5));
    SetFloat(n, "momentum", args.Float("momentum", 0.9));
  } else if (t == "Softmax" || t == "LogSoftmax") {
    ConvertSoftmax(op, args);
  } else if (t == "Flatten") {
    SetInt(Node("Flatten", {op.inputs[0]}, {op.outputs[0]}), "axis", args.Int("axis", 1));
  } else if (t == "Reshape") {
    only_output("old_shape");
    std::string shape = op.inputs.size() > 1 ? op.inputs[1] : std::string();
    if (shape.empty()) {
      const std::vector<int64_t> dims = args.Ints("shape");
      Tensor s({static_cast<int64_t>(dims.size())}, DType::kInt64);
      std::copy(dims.begin(), dims.end(), s.mutable_data<int64_t>());
      shape = Const(op.outputs[0] + "/shape", s);
    }
    Node("Reshape", {op.inputs[0], shape}, {op.outputs[0]});
  } else if (t == "Transpose") {
    onnx::NodeProto* n = Node("Transpose", {op.inputs[0]}, {op.outputs[0]});
    if (args.Has("axes")) SetInts(n, "perm", args.Ints("axes"));
  } else if (t == "Concat") {
    only_output("split_info");
    SetInt(Node("Concat", op.inputs, {op.outputs[0]}), "axis", args.Int("axis", 1));
  } else if (t == "Clip") {
    ConvertClip(op, args);
  } else if (t == "ConstantFill" || t == "GivenTensorFill") {
    ConvertFill(op);
  } else {
    throw NoOnnxForm{"ONNX has no op it maps onto (dp exports the ops of inference nets: docs/ONNX.md)"};
  }
}

std::string Exporter::Run() {
  DP_ENFORCE_CODE(options_.opset >= kOnnxExportMinOpset && options_.opset <= kOnnxExportMaxOpset,
                  Code::kInvalidArgument, "ONNX export writes opsets ", kOnnxExportMinOpset, " to ",
                  kOnnxExportMaxOpset, ", not ", options_.opset);
  InferenceOptions unfused;
  unfused.fuse = false;
  const NetDef net = BuildInference(model_, options_.outputs, unfused);

  proto_.set_ir_version(IrVersionFor(options_.opset));
  proto_.set_producer_name("dp");
  proto_.set_producer_version(DP_VERSION_STRING);
  auto* opset = proto_.add_opset_import();
  opset->set_domain("");
  opset->set_version(options_.opset);
  graph_ = proto_.mutable_graph();
  graph_->set_name(model_.name.empty() ? std::string("dp_model") : model_.name);

  auto listed = [](const std::vector<std::string>& list, const std::string& x) {
    return std::find(list.begin(), list.end(), x) != list.end();
  };
  // The inputs' dims are the example batch's in the workspace, the first
  // one any batch size ("N") when the net's shapes follow a batch one larger
  // too; the outputs' follow, a dim that grows with the batch being "N" as
  // well (unnamed when it grows otherwise).
  std::map<std::string, TensorInfo> known, grown;
  std::vector<std::string> inputs;
  int64_t batch = -1;  // the first input's
  for (const std::string& x : net.external_inputs) {
    names_.insert(x);
    graph_inputs_.insert(x);
    if (listed(model_.params, x) || listed(model_.computed_params, x)) {
      const Tensor host = Host(x);
      TensorToOnnx(host, x, graph_->add_initializer());
      known[x] = grown[x] = TensorInfo{host.dims(), host.dtype()};
      initializers_[x] = host;
      continue;
    }
    const Blob* blob = ws_.GetBlob(options_.param_prefix + x);
    DP_ENFORCE_CODE(blob != nullptr && !blob->empty() && blob->IsType<Tensor>(), Code::kNotFound, "model input '", x,
                    "' has no tensor in the workspace (as '", options_.param_prefix + x,
                    "'): feed an example batch, whose dims (the first one as any batch size) the graph's input takes");
    const Tensor fed = *blob->Share<Tensor>();
    DP_ENFORCE_CODE(fed.ndim() >= 1, Code::kInvalidArgument, "model input '", x, "' is a scalar: no batch dim");
    inputs.push_back(x);
    known[x] = grown[x] = TensorInfo{fed.dims(), fed.dtype()};
    grown[x].dims[0] += 1;
    if (batch < 0) batch = fed.dims()[0];
  }
  std::map<std::string, TensorInfo> shapes_grown;
  try {
    shapes_ = InferNetShapes(net, known);
  } catch (Error& e) {
    throw e.Prepend("the inference net does not fit the tensors of the workspace");
  }
  try {
    shapes_grown = InferNetShapes(net, grown);
  } catch (const Error&) {
    batch = -1;  // the first dims are no batch: the graph takes these dims alone
    shapes_grown = shapes_;
  }
  for (const std::string& x : inputs) {
    auto* input = graph_->add_input();
    input->set_name(x);
    auto* type = input->mutable_type()->mutable_tensor_type();
    type->set_elem_type(OnnxElemType(known[x].dtype));
    for (size_t i = 0; i < known[x].dims.size(); ++i) {
      auto* d = type->mutable_shape()->add_dim();
      if (i == 0 && batch >= 0) d->set_dim_param("N");
      else d->set_dim_value(known[x].dims[i]);
    }
  }
  for (const auto& op : net.ops) names_.insert(op.outputs.begin(), op.outputs.end());
  std::vector<std::string> unconverted;

  for (const auto& op : net.ops)
    for (const auto& y : op.outputs) ++writes_left_[y];
  for (const auto& y : net.external_outputs)
    if (graph_inputs_.count(y)) unconverted.push_back(StrCat("output '", y, "': an input the net writes again"));
  for (size_t i = 0; i < net.ops.size(); ++i) {
    OperatorDef op = net.ops[i];  // on ONNX's values: the inputs' current ones, a new one for each output
    for (auto& x : op.inputs) x = Current(x);
    for (auto& y : op.outputs) y = NextVersion(y);
    try {
      Convert(op, i);
    } catch (const NoOnnxForm& e) {
      unconverted.push_back(StrCat(OpLabel(net.ops[i], i), ": ", e.reason));
    }
  }
  if (!unconverted.empty()) {
    std::string list;
    for (const auto& u : unconverted) list += (list.empty() ? "" : "; ") + u;
    DP_THROW(Code::kUnimplemented, "dp cannot write ", unconverted.size(), " of the inference net's ", net.ops.size(),
             " ops as ONNX: ", list);
  }
  for (const std::string& y : net.external_outputs) {
    auto it = shapes_.find(y), grown_it = shapes_grown.find(y);
    DP_ENFORCE_CODE(it != shapes_.end() && it->second.known() && grown_it != shapes_grown.end() &&
                        grown_it->second.dims.size() == it->second.dims.size(),
                    Code::kUnimplemented, "output '", y, "': its dims do not follow from the inputs' by dp's shape "
                    "inference, and an ONNX graph's outputs need them");
    auto* output = graph_->add_output();
    output->set_name(y);
    auto* type = output->mutable_type()->mutable_tensor_type();
    type->set_elem_type(OnnxElemType(it->second.dtype));
    const Dims& dims = it->second.dims;
    const Dims& more = grown_it->second.dims;
    type->mutable_shape();  // a scalar's shape too: present, with no dims
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = type->mutable_shape()->add_dim();
      if (dims[i] == more[i]) d->set_dim_value(dims[i]);
      else if (dims[i] == batch && more[i] == batch + 1) d->set_dim_param("N");
    }
  }
  try {
    onnx::checker::check_model(proto_);
  } catch (const std::exception& e) {
    DP_THROW(Code::kInternal, "dp wrote an ONNX model that ONNX's checker rejects: ", e.what());
  }
  std::string bytes;
  DP_ENFORCE_CODE(proto_.ByteSizeLong() <= static_cast<size_t>(INT32_MAX) && proto_.SerializeToString(&bytes),
                  Code::kOutOfRange, "the ONNX model is over protobuf's 2 GiB (", proto_.ByteSizeLong(), " bytes)");
  return bytes;
}

}  // namespace

std::string ModelToOnnx(const ModelDef& model, const Workspace& ws, const OnnxExportOptions& options) {
  return Exporter(model, ws, options).Run();
}

}  // namespace dp
