// ONNX import and export (onnx_io/onnx_model.h) on graphs built here with
// ONNX's own classes: how nodes map onto dp's ops and what the model's lists
// hold, each op's numbers against a hand computation where the mapping does
// more than rename (Gemm's variants, Softmax's axis across opsets, SAME
// padding, ceil_mode), every way a graph can be wrong or unsupported (one
// error listing each unsupported node; nothing allocated for what a header
// claims), training an imported model, and export: checker-clean, and
// imported again it computes the same bits. PyTorch's models are checked
// against PyTorch's outputs in tests/onnx (check_torch_models.sh).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <onnx/checker.h>

#include "core/workspace.h"
#include "exec/net.h"
#include "expect_error.h"
#include "model/inference.h"
#include "model/training.h"
#include "onnx_io/onnx_model.h"
#include "onnx_io/onnx_proto.h"
#include "onnx_io/onnx_tensor.h"

using namespace dp;
using dp::testing::ExpectError;

namespace {

// An ONNX model under construction.
class Graph {
 public:
  explicit Graph(int64_t opset = 13) {
    model_.set_ir_version(7);
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g_ = model_.mutable_graph();
    g_->set_name("g");
  }

  // A float input; -1 dims are symbolic ("N").
  void Input(const std::string& name, const std::vector<int64_t>& dims) {
    auto* t = g_->add_input()->mutable_type()->mutable_tensor_type();
    g_->mutable_input(g_->input_size() - 1)->set_name(name);
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) {
      auto* dim = t->mutable_shape()->add_dim();
      if (d < 0) dim->set_dim_param("N");
      else dim->set_dim_value(d);
    }
  }
  void Output(const std::string& name) {
    auto* o = g_->add_output();
    o->set_name(name);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  onnx::TensorProto* Init(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return t;
  }
  void InitInt64(const std::string& name, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t x : values) t->add_int64_data(x);
  }
  onnx::NodeProto* Node(const std::string& type, const std::vector<std::string>& in,
                        const std::vector<std::string>& out, const std::string& name = "") {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (const auto& x : in) n->add_input(x);
    for (const auto& y : out) n->add_output(y);
    return n;
  }
  static void Int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void Ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void Float(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void String(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  onnx::GraphProto& proto() { return *g_; }
  onnx::ModelProto& model() { return model_; }
  std::string Bytes() const { return model_.SerializeAsString(); }
  ModelDef Import(const OnnxImportOptions& options = {}) const { return ModelFromOnnx(Bytes(), options); }

 private:
  onnx::ModelProto model_;
  onnx::GraphProto* g_;
};

std::vector<float> Ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i % 7) - 0.01f * static_cast<float>(i);
  return v;
}

Tensor FloatTensor(const std::vector<int64_t>& dims, const std::vector<float>& v) {
  Tensor t(dims, DType::kFloat32);
  REQUIRE(static_cast<size_t>(t.numel()) == v.size());
  std::copy(v.begin(), v.end(), t.mutable_data<float>());
  return t;
}

std::vector<float> Values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

// The model run as a deployment would: its init net, then its inference net
// of `outputs` on `inputs`. The workspace stays for export.
struct Run {
  std::shared_ptr<Workspace> ws = std::make_shared<Workspace>();
  std::map<std::string, std::vector<float>> out;

  Run(const ModelDef& m, const std::map<std::string, Tensor>& inputs, const std::vector<std::string>& outputs) {
    Net(std::make_shared<const NetDef>(m.init_net), ws).Run();
    for (const auto& [name, t] : inputs) ws->Feed(name, t);
    Net(std::make_shared<const NetDef>(BuildInference(m, outputs)), ws).Run();
    for (const auto& y : outputs) out[y] = Values(ws->GetTensor(y));
  }
};

bool Contains(const std::vector<std::string>& list, const std::string& x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

void CheckClose(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(std::fabs(got[i] - want[i]) <= tol, i, ": ", got[i], " vs ", want[i]);
}

// Exported with ws's params and example batch, checked by ONNX's checker,
// imported again and run: the same bits as `first`.
void CheckRoundTrip(const ModelDef& m, const Run& first, const std::map<std::string, Tensor>& inputs,
                    const std::vector<std::string>& outputs, int32_t opset = 13) {
  OnnxExportOptions o;
  o.outputs = outputs;
  o.opset = opset;
  const std::string bytes = ModelToOnnx(m, *first.ws, o);
  onnx::ModelProto proto;
  REQUIRE(proto.ParseFromString(bytes));
  CHECK_NOTHROW(onnx::checker::check_model(proto));
  const Run again(ModelFromOnnx(bytes, {}), inputs, outputs);
  for (const auto& y : outputs) CHECK_MESSAGE(again.out.at(y) == first.out.at(y), y);
}

}  // namespace

TEST_CASE("ONNX import: a Gemm-Relu-Softmax graph; params, inputs and outputs keep the graph's names") {
  Graph g;
  g.Input("x", {-1, 3});
  g.Init("w", {2, 3}, {0.5f, -1, 2, 1, 0.25f, -0.5f});
  g.Init("b", {2}, {0.1f, -0.2f});
  Graph::Int(g.Node("Gemm", {"x", "w", "b"}, {"h"}, "fc"), "transB", 1);
  g.Node("Relu", {"h"}, {"r"});
  g.Node("Softmax", {"r"}, {"y"});
  g.Output("y");
  const ModelDef m = g.Import();
  CHECK(m.name == "g");
  CHECK(m.params == std::vector<std::string>{"w", "b"});
  CHECK(m.computed_params.empty());
  CHECK(m.inputs == std::vector<std::string>{"x"});
  CHECK(m.forward_net.external_outputs == std::vector<std::string>{"y"});
  CHECK(DefaultInferenceOutputs(m) == std::vector<std::string>{"y"});
  CHECK(m.init_net.ops.size() == 2);
  CHECK(m.init_net.ops[0].type == "GivenTensorFill");
  CHECK(m.forward_net.ops[0].type == "FC");
  CHECK(m.forward_net.ops[0].name == "fc");

  const std::vector<float> x{1, 2, 3, -1, 0, 2};
  const Run r(m, {{"x", FloatTensor({2, 3}, x)}}, {"y"});
  std::vector<float> want;
  const float w[2][3] = {{0.5f, -1, 2}, {1, 0.25f, -0.5f}}, b[2] = {0.1f, -0.2f};
  for (int i = 0; i < 2; ++i) {
    float h[2];
    for (int j = 0; j < 2; ++j) {
      h[j] = b[j];
      for (int k = 0; k < 3; ++k) h[j] += x[static_cast<size_t>(i * 3 + k)] * w[j][k];
      h[j] = std::max(h[j], 0.f);
    }
    const float mx = std::max(h[0], h[1]), s = std::exp(h[0] - mx) + std::exp(h[1] - mx);
    want.push_back(std::exp(h[0] - mx) / s);
    want.push_back(std::exp(h[1] - mx) / s);
  }
  CheckClose(r.out.at("y"), want);
  CheckRoundTrip(m, r, {{"x", FloatTensor({2, 3}, x)}}, {"y"});
}

TEST_CASE("ONNX import: Gemm's transposes, alpha and beta, and the forms of C; MatMul over a 3-D input") {
  const std::vector<float> a = Ramp(6, -1, 0.5f), bt = Ramp(12, 0.5f, -0.25f), c = Ramp(4, 0.1f, 0.2f);
  // Reference: Y = alpha A B + beta C, A [2, 3], B [3, 4].
  auto gemm = [&](float alpha, float beta, const std::vector<float>& cc, bool c_rows) {
    std::vector<float> y(8);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j) {
        float s = 0;
        for (int k = 0; k < 3; ++k) s += a[static_cast<size_t>(i * 3 + k)] * bt[static_cast<size_t>(k * 4 + j)];
        y[static_cast<size_t>(i * 4 + j)] = alpha * s + beta * (cc.empty() ? 0 : cc[static_cast<size_t>(c_rows ? i * 4 + j : j)]);
      }
    return y;
  };
  struct Case {
    const char* name;
    bool trans_a, trans_b;
    float alpha, beta;
    int c_kind;  // 0: none, 1: [4], 2: [1, 4], 3: [2, 4] (added after the FC)
  };
  for (const Case& k : {Case{"plain", false, false, 1, 1, 1}, Case{"transA", true, false, 1, 1, 1},
                        Case{"transB", false, true, 1, 1, 2}, Case{"alpha beta", false, false, 2, 0.5f, 1},
                        Case{"no C", false, true, 1.5f, 1, 0}, Case{"C per row", false, false, 1, 2, 3}}) {
    CAPTURE(k.name);
    Graph g;
    g.Input("a", {k.trans_a ? 3 : 2, k.trans_a ? 2 : 3});
    std::vector<float> av = a;
    if (k.trans_a) av = {a[0], a[3], a[1], a[4], a[2], a[5]};
    std::vector<float> bv = bt;
    if (k.trans_b) {
      bv.clear();
      for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 3; ++i) bv.push_back(bt[static_cast<size_t>(i * 4 + j)]);
    }
    g.Init("B", k.trans_b ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4}, bv);
    std::vector<std::string> in{"a", "B"};
    std::vector<float> cv;
    if (k.c_kind == 1) g.Init("C", {4}, cv = c);
    if (k.c_kind == 2) g.Init("C", {1, 4}, cv = c);
    if (k.c_kind == 3) g.Init("C", {2, 4}, cv = Ramp(8, 0.3f, 0.1f));
    if (k.c_kind != 0) in.push_back("C");
    onnx::NodeProto* n = g.Node("Gemm", in, {"y"});
    if (k.trans_a) Graph::Int(n, "transA", 1);
    if (k.trans_b) Graph::Int(n, "transB", 1);
    if (k.alpha != 1) Graph::Float(n, "alpha", k.alpha);
    if (k.beta != 1) Graph::Float(n, "beta", k.beta);
    g.Output("y");
    const ModelDef m = g.Import();
    // B is a param (transposed or scaled in place: no other node reads it); a
    // C of N values the bias, a C per row a constant added after.
    CHECK(Contains(m.params, "B"));
    if (k.c_kind == 0) CHECK(Contains(m.computed_params, "y/zero_bias"));
    if (k.c_kind == 1 || k.c_kind == 2) CHECK(Contains(m.params, "C"));
    if (k.c_kind == 3) CHECK(Contains(m.computed_params, "C"));
    const std::map<std::string, Tensor> inputs{{"a", FloatTensor({k.trans_a ? 3 : 2, k.trans_a ? 2 : 3}, av)}};
    const Run r(m, inputs, {"y"});
    CheckClose(r.out.at("y"), gemm(k.alpha, k.beta, cv, k.c_kind == 3));
    CheckRoundTrip(m, r, inputs, {"y"});
  }

  // MatMul: A [2, 2, 3] x B [3, 4] over A's last axis.
  Graph g;
  g.Input("a", {2, 2, 3});
  g.Init("B", {3, 4}, bt);
  g.Node("MatMul", {"a", "B"}, {"y"});
  g.Output("y");
  const ModelDef m = g.Import();
  std::vector<float> a2 = a;
  a2.insert(a2.end(), a.begin(), a.end());
  const std::map<std::string, Tensor> inputs{{"a", FloatTensor({2, 2, 3}, a2)}};
  const Run r(m, inputs, {"y"});
  std::vector<float> want = gemm(1, 0, {}, false);
  want.insert(want.end(), want.begin(), want.end());
  CheckClose(r.out.at("y"), want);
  CheckRoundTrip(m, r, inputs, {"y"});
}

TEST_CASE("ONNX import: Softmax before opset 13 flattens from its axis; from 13 it is one axis, moved last") {
  const std::vector<float> x = Ramp(24, -1, 0.3f);  // [2, 3, 4]
  for (int64_t opset : {11, 13}) {
    CAPTURE(opset);
    Graph g(opset);
    g.Input("x", {2, 3, 4});
    Graph::Int(g.Node("Softmax", {"x"}, {"y"}), "axis", 1);
    Graph::Int(g.Node("LogSoftmax", {"x"}, {"z"}), "axis", 1);
    g.Output("y");
    g.Output("z");
    const ModelDef m = g.Import();
    const std::map<std::string, Tensor> inputs{{"x", FloatTensor({2, 3, 4}, x)}};
    const Run r(m, inputs, {"y", "z"});
    std::vector<float> want(24);
    for (int b = 0; b < 2; ++b) {
      if (opset < 13) {  // over the 12 elements of [3, 4]
        float mx = -1e30f, s = 0;
        for (int i = 0; i < 12; ++i) mx = std::max(mx, x[static_cast<size_t>(b * 12 + i)]);
        for (int i = 0; i < 12; ++i) s += std::exp(x[static_cast<size_t>(b * 12 + i)] - mx);
        for (int i = 0; i < 12; ++i) want[static_cast<size_t>(b * 12 + i)] = std::exp(x[static_cast<size_t>(b * 12 + i)] - mx) / s;
      } else {  // over the 3 along axis 1, for each of the 4 columns
        for (int col = 0; col < 4; ++col) {
          float mx = -1e30f, s = 0;
          for (int i = 0; i < 3; ++i) mx = std::max(mx, x[static_cast<size_t>(b * 12 + i * 4 + col)]);
          for (int i = 0; i < 3; ++i) s += std::exp(x[static_cast<size_t>(b * 12 + i * 4 + col)] - mx);
          for (int i = 0; i < 3; ++i)
            want[static_cast<size_t>(b * 12 + i * 4 + col)] = std::exp(x[static_cast<size_t>(b * 12 + i * 4 + col)] - mx) / s;
        }
      }
    }
    CheckClose(r.out.at("y"), want);
    std::vector<float> log_want(want.size());
    for (size_t i = 0; i < want.size(); ++i) log_want[i] = std::log(want[i]);
    CheckClose(r.out.at("z"), log_want, 1e-5f);
    // Exported at the same opset (dp writes 11 and up), and imported again.
    CheckRoundTrip(m, r, inputs, {"y", "z"}, static_cast<int32_t>(opset));
  }
}

TEST_CASE("ONNX import: SAME padding, ceil_mode and count_include_pad become dp's explicit pads") {
  const std::vector<float> x = Ramp(2 * 5 * 5, -1, 0.4f);  // [1, 2, 5, 5]
  Graph g(13);
  g.Input("x", {1, 2, 5, 5});
  g.Init("w", {3, 2, 3, 3}, Ramp(54, -0.5f, 0.15f));
  onnx::NodeProto* conv = g.Node("Conv", {"x", "w"}, {"c"});
  Graph::String(conv, "auto_pad", "SAME_UPPER");
  Graph::Ints(conv, "strides", {2, 2});
  onnx::NodeProto* pool = g.Node("MaxPool", {"x"}, {"p"});
  Graph::Ints(pool, "kernel_shape", {2, 2});
  Graph::Ints(pool, "strides", {2, 2});
  Graph::Int(pool, "ceil_mode", 1);
  onnx::NodeProto* avg = g.Node("AveragePool", {"x"}, {"q"});
  Graph::Ints(avg, "kernel_shape", {3, 3});
  Graph::Ints(avg, "pads", {1, 1, 1, 1});
  Graph::Int(avg, "count_include_pad", 1);
  g.Output("c");
  g.Output("p");
  g.Output("q");
  const ModelDef m = g.Import();
  // SAME_UPPER, 5 wide, stride 2, kernel 3: 3 outputs, 2 pads split 1 / 1.
  const OperatorDef& c = m.forward_net.ops[0];
  CHECK(ArgReader(c, "").Int("pad_t") == 1);
  CHECK(ArgReader(c, "").Int("pad_b") == 1);
  // ceil_mode: 5 wide, kernel 2, stride 2: 3 outputs, one pad at the end.
  const OperatorDef& p = m.forward_net.ops[1];
  CHECK(ArgReader(p, "").Int("pad_b") == 1);
  CHECK(ArgReader(p, "").Int("pad_r") == 1);
  const std::map<std::string, Tensor> inputs{{"x", FloatTensor({1, 2, 5, 5}, x)}};
  const Run r(m, inputs, {"c", "p", "q"});
  REQUIRE(r.out.at("p").size() == 2 * 3 * 3);
  for (int ch = 0; ch < 2; ++ch)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        float mx = -1e30f;
        for (int ih = 2 * oh; ih < std::min(2 * oh + 2, 5); ++ih)
          for (int iw = 2 * ow; iw < std::min(2 * ow + 2, 5); ++iw) mx = std::max(mx, x[static_cast<size_t>(ch * 25 + ih * 5 + iw)]);
        CHECK(r.out.at("p")[static_cast<size_t>(ch * 9 + oh * 3 + ow)] == mx);
      }
  // count_include_pad: every window divides by 9, pads included.
  const std::vector<float>& q = r.out.at("q");
  float corner = 0;
  for (int ih = 0; ih < 2; ++ih)
    for (int iw = 0; iw < 2; ++iw) corner += x[static_cast<size_t>(ih * 5 + iw)];
  CHECK(q[0] == doctest::Approx(corner / 9));
  CheckRoundTrip(m, r, inputs, {"c", "p", "q"});
}

TEST_CASE("ONNX import: which initializers are params, computed params or folded away") {
  Graph g(13);
  g.Input("x", {-1, 2, 4, 4});
  g.Init("w", {2, 2, 1, 1}, {1, 0.5f, -0.5f, 1});
  g.Init("scale", {2}, {1.5f, 0.5f});
  g.Init("bias", {2}, {0.1f, -0.1f});
  g.Init("mean", {2}, {0.2f, -0.3f});
  g.Init("var", {2}, {1.2f, 0.8f});
  g.Init("offset", {1}, {0.25f});
  g.InitInt64("shape", {0, -1});
  g.Node("Conv", {"x", "w"}, {"c"});
  g.Node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"});
  g.Node("Add", {"bn", "offset"}, {"s"});
  onnx::NodeProto* k = g.Node("Constant", {}, {"two"});
  Graph::Float(k, "value_float", 2.0f);
  g.Node("Mul", {"s", "two"}, {"t"});
  g.Node("Reshape", {"t", "shape"}, {"y"});
  g.Output("y");
  const ModelDef m = g.Import();
  CHECK(m.params == std::vector<std::string>{"w", "scale", "bias"});
  CHECK(m.computed_params == std::vector<std::string>{"mean", "var", "offset", "two"});  // state and constants
  CHECK_FALSE(Contains(m.params, "shape"));                                               // folded into Reshape
  CHECK_FALSE(Contains(m.computed_params, "shape"));
  // BatchNormalization trains as dp's SpatialBN, its statistics updated in place.
  const OperatorDef& bn = m.forward_net.ops[1];
  CHECK(bn.type == "SpatialBN");
  CHECK(bn.outputs.size() == 5);
  CHECK(bn.outputs[1] == "mean");
  CHECK(bn.outputs[2] == "var");
  const std::vector<float> x = Ramp(64, -1, 0.2f);
  const std::map<std::string, Tensor> inputs{{"x", FloatTensor({2, 2, 4, 4}, x)}};
  const Run r(m, inputs, {"y"});
  // Inference: (w x - mean) / sqrt(var + eps) * scale + bias + offset, times 2.
  const float wv[2][2] = {{1, 0.5f}, {-0.5f, 1}}, sc[2] = {1.5f, 0.5f}, bi[2] = {0.1f, -0.1f},
              mu[2] = {0.2f, -0.3f}, va[2] = {1.2f, 0.8f};
  std::vector<float> want(64);
  for (int b = 0; b < 2; ++b)
    for (int o = 0; o < 2; ++o)
      for (int i = 0; i < 16; ++i) {
        const float conv = wv[o][0] * x[static_cast<size_t>(b * 32 + i)] + wv[o][1] * x[static_cast<size_t>(b * 32 + 16 + i)];
        want[static_cast<size_t>(b * 32 + o * 16 + i)] =
            2 * ((conv - mu[o]) / std::sqrt(va[o] + 1e-5f) * sc[o] + bi[o] + 0.25f);
      }
  CheckClose(r.out.at("y"), want, 1e-5f);
  CheckRoundTrip(m, r, inputs, {"y"});
}

TEST_CASE("ONNX import: one error lists every node dp cannot import, with its type, name, index and opset") {
  Graph g(13);
  g.Input("x", {1, 3, 8});
  g.Init("w1", {4, 3, 3}, Ramp(36, 0, 0.1f));
  g.Node("Conv", {"x", "w1"}, {"c"}, "conv1d");
  g.Node("Relu", {"c"}, {"r"});
  g.Node("LeakyRelu", {"r"}, {"l"}, "leaky");
  g.Node("Softmax", {"l"}, {"s"});
  g.Node("FusedGelu", {"s"}, {"y"}, "custom")->set_domain("com.example");
  g.Output("y");
  const std::string msg = ExpectError([&] { g.Import(); }, Code::kUnimplemented,
                                      {"3 parts", "Conv 'conv1d' (node 0, opset 13): a convolution over a rank-3 input",
                                       "LeakyRelu 'leaky' (node 2, opset 13): dp has no op for it",
                                       "FusedGelu 'custom' (node 4, opset 13): an op of domain 'com.example'"});
  CHECK(msg.find("Relu (node 1") == std::string::npos);
  CHECK(msg.find("Softmax") == std::string::npos);

  // An attribute dp does not implement is never dropped.
  Graph a(13);
  a.Input("x", {2, 3});
  Graph::Float(a.Node("Relu", {"x"}, {"y"}, "r"), "alpha", 0.1f);
  a.Output("y");
  ExpectError([&] { a.Import(); }, Code::kUnimplemented, {"Relu 'r'", "attribute 'alpha'"});

  // A node that needs a constant where the graph computes one.
  Graph s(13);
  s.Input("x", {2, 3});
  s.Input("shape", {2});
  s.Node("Reshape", {"x", "shape"}, {"y"}, "dyn");
  s.Output("y");
  ExpectError([&] { s.Import(); }, Code::kUnimplemented, {"Reshape 'dyn'", "input 1 (shape) is computed"});
}

TEST_CASE("ONNX import: malformed bytes and graphs are errors naming what is wrong") {
  ExpectError([] { ModelFromOnnx("", {}); }, Code::kParse, {"empty"});
  ExpectError([] { ModelFromOnnx(std::string("\xff\xff\xff\xff garbage", 13), {}); }, Code::kParse,
              {"not an ONNX model"});
  Graph ok;
  ok.Input("x", {2});
  ok.Node("Relu", {"x"}, {"y"});
  ok.Output("y");
  const std::string bytes = ok.Bytes();
  ExpectError([&] { ModelFromOnnx(bytes.substr(0, bytes.size() - 3), {}); }, Code::kParse);
  onnx::ModelProto no_graph;
  no_graph.set_ir_version(7);
  ExpectError([&] { ModelFromOnnx(no_graph.SerializeAsString(), {}); }, Code::kParse, {"without a graph"});
  for (int64_t opset : {int64_t{8}, int64_t{18}, (int64_t{1} << 32) + 13}) {
    Graph g(opset);
    g.Input("x", {2});
    g.Node("Relu", {"x"}, {"y"});
    g.Output("y");
    ExpectError([&] { g.Import(); }, Code::kUnimplemented, {StrCat("opset ", opset), "9 to 17"});
  }

  Graph dangling;
  dangling.Input("x", {2});
  dangling.Node("Add", {"x", "nowhere"}, {"y"}, "add");
  dangling.Output("y");
  ExpectError([&] { dangling.Import(); }, Code::kInvalidNet, {"Add 'add' (node 0", "'nowhere'", "defines"});

  Graph cycle;
  cycle.Input("x", {2});
  cycle.Node("Add", {"x", "b"}, {"a"}, "first");
  cycle.Node("Relu", {"a"}, {"b"}, "second");
  cycle.Output("b");
  ExpectError([&] { cycle.Import(); }, Code::kInvalidNet, {"cycle", "first"});

  Graph twice;
  twice.Input("x", {2});
  twice.Node("Relu", {"x"}, {"y"}, "one");
  twice.Node("Sigmoid", {"x"}, {"y"}, "two");
  twice.Output("y");
  ExpectError([&] { twice.Import(); }, Code::kInvalidNet, {"'y'", "written once"});

  Graph outputless;
  outputless.Input("x", {2, 3});
  outputless.Init("w", {3, 2}, Ramp(6, 0, 0.5f));
  outputless.Node("MatMul", {"x", "w"}, {}, "mm");
  outputless.Node("Relu", {"x"}, {"y"});
  outputless.Output("y");
  ExpectError([&] { outputless.Import(); }, Code::kInvalidNet, {"MatMul 'mm'", "has no output"});

  Graph no_output;
  no_output.Input("x", {2});
  no_output.Node("Relu", {"x"}, {"y"});
  no_output.Output("z");
  ExpectError([&] { no_output.Import(); }, Code::kInvalidNet, {"graph output 'z'"});

  // Names become dp's blob and model names: UTF-8 without NUL, or a parse
  // error that prints the bytes escaped.
  Graph latin1;
  latin1.proto().set_name(std::string("caf\xe9", 4));
  latin1.Input("x", {2});
  latin1.Node("Relu", {"x"}, {"y"});
  latin1.Output("y");
  ExpectError([&] { latin1.Import(); }, Code::kParse, {"the graph's name", "not UTF-8", "caf\\xe9"});
  Graph nul;
  nul.Input("x", {2});
  nul.Node("Relu", {"x"}, {std::string("y\0z", 3)});
  nul.Output(std::string("y\0z", 3));
  ExpectError([&] { nul.Import(); }, Code::kParse, {"a graph output's name", "not UTF-8", "y\\x00z"});

  Graph bad_attr;
  bad_attr.Input("x", {2, 3});
  Graph::String(bad_attr.Node("Softmax", {"x"}, {"y"}, "sm"), "axis", "one");
  bad_attr.Output("y");
  ExpectError([&] { bad_attr.Import(); }, Code::kInvalidNet, {"Softmax 'sm'", "attribute 'axis' is a STRING"});
}

TEST_CASE("ONNX import: a tensor's dims never allocate more than its data holds") {
  auto with_init = [](const std::function<void(onnx::TensorProto*)>& edit) {
    Graph g;
    g.Input("x", {2});
    onnx::TensorProto* t = g.Init("w", {2}, {1, 2});
    edit(t);
    g.Node("Add", {"x", "w"}, {"y"});
    g.Output("y");
    return g.Bytes();
  };
  // Huge dims over 8 bytes of raw_data: refused before any allocation.
  ExpectError([&] { ModelFromOnnx(with_init([](onnx::TensorProto* t) {
                                    t->clear_float_data();
                                    t->clear_dims();
                                    t->add_dims(int64_t{1} << 20);
                                    t->add_dims(int64_t{1} << 20);
                                    t->set_raw_data(std::string(8, '\0'));
                                  }), {}); },
              Code::kInvalidNet, {"initializer 'w'", "8 bytes of raw_data", "[1048576, 1048576]"});
  ExpectError([&] { ModelFromOnnx(with_init([](onnx::TensorProto* t) {
                                    for (int i = 0; i < 4; ++i) t->add_dims(int64_t{1} << 40);
                                  }), {}); },
              Code::kInvalidNet, {"initializer 'w'", "more than 2^48 elements"});
  ExpectError([&] { ModelFromOnnx(with_init([](onnx::TensorProto* t) { t->set_dims(0, -3); }), {}); },
              Code::kInvalidNet, {"negative dim -3"});
  ExpectError([&] { ModelFromOnnx(with_init([](onnx::TensorProto* t) { t->add_float_data(3); }), {}); },
              Code::kInvalidNet, {"3 values in float_data", "dims say 2"});
  ExpectError([&] { ModelFromOnnx(with_init([](onnx::TensorProto* t) {
                                    t->clear_float_data();
                                    t->set_data_location(onnx::TensorProto::EXTERNAL);
                                    auto* kv = t->add_external_data();
                                    kv->set_key("location");
                                    kv->set_value("weights.bin");
                                  }), {}); },
              Code::kUnimplemented, {"initializer 'w'", "external file ('weights.bin')"});
  ExpectError([&] { ModelFromOnnx(with_init([](onnx::TensorProto* t) {
                                    t->clear_float_data();
                                    t->set_data_type(onnx::TensorProto::STRING);
                                    t->add_string_data("a");
                                    t->add_string_data("b");
                                  }), {}); },
              Code::kUnimplemented, {"element type STRING"});

  // float16 initializers are widened to float32, value for value.
  Graph h;
  h.Input("x", {2});
  onnx::TensorProto* t = h.Init("w", {2}, {});
  t->set_data_type(onnx::TensorProto::FLOAT16);
  t->add_int32_data(0x3c00);  // 1.0
  t->add_int32_data(0xc000);  // -2.0
  h.Node("Add", {"x", "w"}, {"y"});
  h.Output("y");
  const Run r(h.Import(), {{"x", FloatTensor({2}, {0.5f, 0.5f})}}, {"y"});
  CHECK(r.out.at("y") == std::vector<float>{1.5f, -1.5f});
}

TEST_CASE("ONNX import with a softmax cross-entropy head and an optimizer trains") {
  Graph g;
  g.Input("x", {-1, 4});
  g.Init("w1", {8, 4}, Ramp(32, -0.4f, 0.13f));
  g.Init("b1", {8}, std::vector<float>(8, 0.f));
  g.Init("w2", {3, 8}, Ramp(24, 0.3f, -0.11f));
  g.Init("b2", {3}, std::vector<float>(3, 0.f));
  Graph::Int(g.Node("Gemm", {"x", "w1", "b1"}, {"h"}), "transB", 1);
  g.Node("Relu", {"h"}, {"r"});
  Graph::Int(g.Node("Gemm", {"r", "w2", "b2"}, {"logits"}), "transB", 1);
  g.Output("logits");
  OnnxImportOptions o;
  o.head = OnnxImportOptions::Head::kSoftmaxCrossEntropy;
  o.labels = "y";
  OptimizerDef adam;
  adam.type = "adam";
  adam.lr = 0.05;
  o.optimizer = adam;
  const ModelDef m = g.Import(o);
  CHECK(m.inputs == std::vector<std::string>{"x", "y"});
  CHECK(m.losses == std::vector<std::string>{"loss"});
  CHECK(m.metrics == std::vector<std::string>{"accuracy"});
  CHECK(DefaultInferenceOutputs(m) == std::vector<std::string>{"logits", "softmax"});

  TrainingNets nets = BuildTraining(m);
  auto ws = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(nets.init), ws).Run();
  Net train(std::make_shared<const NetDef>(nets.train), ws);
  // Class = the largest of the first three features.
  Tensor x({12, 4}, DType::kFloat32), y({12}, DType::kInt32);
  for (int i = 0; i < 12; ++i) {
    for (int k = 0; k < 4; ++k) x.mutable_data<float>()[i * 4 + k] = static_cast<float>((i * 7 + k * 5) % 11) / 5 - 1;
    const float* row = x.data<float>() + i * 4;
    y.mutable_data<int32_t>()[i] = static_cast<int32_t>(std::max_element(row, row + 3) - row);
  }
  ws->Feed("x", x);
  ws->Feed("y", y);
  const std::vector<float> w1_before = Values(ws->GetTensor("w1"));
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    train.Run();
    (step == 0 ? first : last) = ws->GetTensor("loss").data<float>()[0];
  }
  CHECK(Values(ws->GetTensor("w1")) != w1_before);
  CHECK(last < 0.5f * first);

  OnnxImportOptions taken;
  taken.head = OnnxImportOptions::Head::kSoftmaxCrossEntropy;
  taken.labels = "x";
  ExpectError([&] { g.Import(taken); }, Code::kInvalidArgument, {"labels input 'x'", "already a name"});
}

TEST_CASE("ONNX export: checker-clean at every opset, the batch named, ops without an ONNX form listed") {
  Graph g;
  g.Input("x", {-1, 1, 6, 6});
  g.Init("w", {2, 1, 3, 3}, Ramp(18, -0.3f, 0.1f));
  g.Init("b", {2}, {0.1f, -0.1f});
  g.Init("fw", {5, 8}, Ramp(40, -0.2f, 0.07f));
  g.Init("fb", {5}, Ramp(5, 0, 0.1f));
  onnx::NodeProto* conv = g.Node("Conv", {"x", "w", "b"}, {"c"});
  Graph::Ints(conv, "pads", {1, 1, 1, 1});
  g.Node("Relu", {"c"}, {"r"});
  onnx::NodeProto* pool = g.Node("MaxPool", {"r"}, {"p"});
  Graph::Ints(pool, "kernel_shape", {3, 3});
  Graph::Ints(pool, "strides", {3, 3});
  g.Node("Flatten", {"p"}, {"f"});
  Graph::Int(g.Node("Gemm", {"f", "fw", "fb"}, {"logits"}), "transB", 1);
  g.Node("Softmax", {"logits"}, {"prob"});
  g.Output("prob");
  const ModelDef m = g.Import();
  const std::map<std::string, Tensor> inputs{{"x", FloatTensor({3, 1, 6, 6}, Ramp(108, -1, 0.21f))}};
  const Run r(m, inputs, {"prob"});
  for (int32_t opset = kOnnxExportMinOpset; opset <= kOnnxExportMaxOpset; ++opset) {
    CAPTURE(opset);
    CheckRoundTrip(m, r, inputs, {"prob"}, opset);
  }
  OnnxExportOptions o;
  onnx::ModelProto proto;
  REQUIRE(proto.ParseFromString(ModelToOnnx(m, *r.ws, o)));
  CHECK(proto.opset_import(0).version() == kOnnxExportDefaultOpset);
  CHECK(proto.producer_name() == "dp");
  REQUIRE(proto.graph().input_size() == 1);
  const auto& in = proto.graph().input(0).type().tensor_type().shape();
  CHECK(in.dim(0).dim_param() == "N");
  CHECK(in.dim(2).dim_value() == 6);
  const auto& out = proto.graph().output(0).type().tensor_type().shape();
  CHECK(out.dim(0).dim_param() == "N");  // grows with the batch
  CHECK(out.dim(1).dim_value() == 5);
  CHECK(proto.graph().initializer_size() == 4);

  o.opset = 10;
  ExpectError([&] { ModelToOnnx(m, *r.ws, o); }, Code::kInvalidArgument, {"opsets 11 to 17"});
  o.opset = 13;
  o.param_prefix = "cpu_0/";
  ExpectError([&] { ModelToOnnx(m, *r.ws, o); }, Code::kNotFound, {"param 'w'", "cpu_0/w"});
  Workspace params_only;
  for (const auto& p : m.params) params_only.Feed(p, r.ws->GetTensor(p));
  ExpectError([&] { ModelToOnnx(m, params_only, {}); }, Code::kNotFound, {"model input 'x'", "example batch"});

  // A scalar output (here computed from constants alone) has a shape with
  // no dims, as the checker requires.
  Graph scalar;
  scalar.Init("a", {}, {1.5f});
  scalar.Init("b", {}, {-0.25f});
  scalar.Node("Add", {"a", "b"}, {"s"});
  scalar.Output("s");
  const ModelDef sm = scalar.Import();
  const Run sr(sm, {}, {"s"});
  CHECK(sr.out.at("s") == std::vector<float>{1.25f});
  REQUIRE(proto.ParseFromString(ModelToOnnx(sm, *sr.ws, {})));
  CHECK(proto.graph().output(0).type().tensor_type().has_shape());
  CHECK(proto.graph().output(0).type().tensor_type().shape().dim_size() == 0);

  // A net whose ops ONNX has no form for: every one listed.
  ModelDef loss = m;
  loss.forward_net.ops.push_back(MakeOperatorDef("SquaredL2Distance", {"prob", "prob"}, {"d1"}));
  loss.forward_net.ops.push_back(MakeOperatorDef("SquaredL2Distance", {"logits", "logits"}, {"d2"}));
  ExpectError([&] {
    OnnxExportOptions both;
    both.outputs = {"d1", "d2"};
    ModelToOnnx(loss, *r.ws, both);
  }, Code::kUnimplemented, {"2 of the inference net's", "(SquaredL2Distance)", "ONNX has no op"});
}
