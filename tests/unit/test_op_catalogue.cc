// What the op catalogue (dp_opschema_*, docs/OPS.md) reports, against the
// engine: every optional argument declares its default, and the declared
// values are the ones the kernels use (an op run with the argument set to its
// default gives the same bytes as without it); unknown op types get the
// nearest known one; engines are listed per device.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/blob.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/net_validate.h"
#include "ops/op_schema.h"
#include "ops/operator.h"
#include "op_test_util.h"

using namespace dp;
using namespace dp::testing;

TEST_CASE("every optional argument declares its default: a value of its kind, or a description") {
  int values = 0, described = 0;
  for (const std::string& type : OpSchemaRegistry::Types()) {
    CAPTURE(type);
    for (const auto& spec : OpSchemaRegistry::Find(type)->args()) {
      CAPTURE(spec.name);
      if (spec.required) {
        CHECK_FALSE(spec.default_value.has_value());
        CHECK(spec.default_text.empty());
        continue;
      }
      CHECK_FALSE(spec.default_text.empty());
      if (!spec.default_value) {
        ++described;
        continue;
      }
      ++values;
      CHECK(spec.default_value->name == spec.name);
      CHECK(ArgKindAccepts(spec.kind, spec.default_value->value));
      // Held as the kind itself (a float argument's default is a double), so
      // dp_argdef_kind of the default is the argument's kind.
      const auto& v = spec.default_value->value;
      if (spec.kind == ArgKind::kFloat) CHECK(std::holds_alternative<double>(v));
      if (spec.kind == ArgKind::kFloats) CHECK(std::holds_alternative<std::vector<double>>(v));
      CHECK(spec.default_text == ArgValueJson(v));
      // The default is an argument its own schema accepts.
      OpSchemaRegistry::Find(type)->VerifyArgs(Op(type, {}, {}, {*spec.default_value}), type);
    }
  }
  CHECK(values >= 60);
  CHECK(described >= 15);
}

TEST_CASE("argument values as JSON: shortest round-trip numbers, escaped strings, lists") {
  CHECK(ArgValueJson(0.1) == "0.1");
  CHECK(ArgValueJson(1.0) == "1");
  CHECK(ArgValueJson(1e-5) == "1e-05");
  CHECK(ArgValueJson(-0.0) == "-0");
  CHECK(ArgValueJson(int64_t{60000}) == "60000");
  CHECK(ArgValueJson(std::string("fixed")) == "\"fixed\"");
  CHECK(ArgValueJson(std::string("a\"b\\c\n")) == "\"a\\\"b\\\\c\\u000a\"");
  CHECK(ArgValueJson(std::vector<int64_t>{}) == "[]");
  CHECK(ArgValueJson(std::vector<int64_t>{1, -2}) == "[1, -2]");
  CHECK(ArgValueJson(std::vector<double>{0.5, 2}) == "[0.5, 2]");
  CHECK(ArgValueJson(std::vector<std::string>{"x", ""}) == "[\"x\", \"\"]");
}

// ---- declared defaults against the kernels --------------------------------------

namespace {

// Ops whose value defaults are not checked by running them, and why.
const std::map<std::string, std::string> kNotRun = {
    {"Print", "writes only log lines, no output to compare"},
    {"Save", "writes a file (test_checkpoint reads its iteration back)"},
    {"Load", "reads a file (test_checkpoint covers verify and mmap)"},
    {"CreateCpuCollectives", "its output is a communicator, not a tensor; the process arguments need peers"},
    {"CreateCudaCollectives", "needs GPUs"},
};

// `ops` run in order on `feeds`; the op at `target` is the one whose
// arguments are set to their defaults.
struct DefaultCase {
  std::vector<OperatorDef> ops;
  Feeds feeds;
  size_t target = 0;
};

DefaultCase One(OperatorDef op, Feeds feeds) { return {{std::move(op)}, std::move(feeds), 0}; }

Tensor F64(Dims dims, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  return RandomF64(std::move(dims), seed, lo, hi);
}
Tensor I64(std::vector<int64_t> v) { return Make<int64_t>({static_cast<int64_t>(v.size())}, v); }
Tensor Lr() { return Make<double>({1}, {0.1}); }

std::vector<DefaultCase> DefaultCases() {
  std::vector<DefaultCase> c;
  auto lr = [](std::vector<Argument> args) {
    args.insert(args.begin(), FloatArg("base_lr", 0.5));
    return One(Op("LearningRate", {"it"}, {"lr"}, std::move(args)), {{"it", I64({7})}});
  };
  c.push_back(lr({}));
  c.push_back(lr({StringArg("policy", "step")}));
  c.push_back(lr({StringArg("policy", "inv")}));
  c.push_back(lr({StringArg("policy", "cosine"), IntArg("max_iter", 20)}));
  c.push_back(lr({StringArg("policy", "cosine"), IntArg("warmup_iters", 20)}));
  c.push_back(One(Op("Dropout", {"x"}, {"y", "mask"}), {{"x", F64({4, 8}, 1)}}));
  {
    std::vector<uint8_t> mask(32);
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 != 0;
    c.push_back(One(Op("DropoutGradient", {"dy", "mask"}, {"dx"}),
                    {{"dy", F64({4, 8}, 2)}, {"mask", Make<uint8_t>({4, 8}, mask)}}));
  }
  c.push_back(One(Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2, 3})}), {}));
  c.push_back(One(Op("ConstantFill", {"x"}, {"y"}), {{"x", F64({2, 2}, 3)}}));
  c.push_back(One(Op("UniformFill", {}, {"y"}, {IntsArg("shape", {16}), IntArg("seed", 3)}), {}));
  c.push_back(One(Op("GaussianFill", {}, {"y"}, {IntsArg("shape", {16}), IntArg("seed", 3)}), {}));
  c.push_back(One(Op("XavierFill", {}, {"y"}, {IntsArg("shape", {4, 4}), IntArg("seed", 3)}), {}));
  c.push_back(One(Op("GivenTensorFill", {}, {"y"}, {IntsArg("shape", {2, 2}), FloatsArg("values", {0.1, -2, 3, 1e-9})}),
                  {}));
  // Without shape: a scalar (the random fills), or the like-input's shape.
  c.push_back(One(Op("UniformFill", {}, {"y"}, {IntArg("seed", 4)}), {}));
  c.push_back(One(Op("GaussianFill", {}, {"y"}, {IntArg("seed", 4)}), {}));
  c.push_back(One(Op("XavierFill", {"x"}, {"y"}, {IntArg("seed", 4)}), {{"x", F64({3, 2}, 50)}}));
  c.push_back(One(Op("Accuracy", {"s", "l"}, {"a"}), {{"s", F64({6, 4}, 4)}, {"l", Labels({0, 1, 2, 3, 0, 1})}}));
  c.push_back(One(Op("Flatten", {"x"}, {"y"}), {{"x", F64({2, 3, 4}, 5)}}));
  c.push_back(One(Op("Softmax", {"x"}, {"y"}), {{"x", F64({2, 3, 4}, 6)}}));
  c.push_back(One(Op("SoftmaxGradient", {"y", "dy"}, {"dx"}), {{"y", F64({3, 4}, 7, 0, 1)}, {"dy", F64({3, 4}, 8)}}));
  c.push_back(One(Op("LogSoftmax", {"x"}, {"y"}), {{"x", F64({2, 3, 4}, 54)}}));
  c.push_back(
      One(Op("LogSoftmaxGradient", {"y", "dy"}, {"dx"}), {{"y", F64({3, 4}, 55, -3, 0)}, {"dy", F64({3, 4}, 56)}}));
  c.push_back(One(Op("SoftmaxWithLoss", {"x", "l"}, {"p", "loss"}), {{"x", F64({3, 4}, 9)}, {"l", Labels({0, 3, 1})}}));
  // The fused gradient with its seed's default (1).
  c.push_back(One(Op("SoftmaxWithLoss", {"x", "l"}, {"p", "loss", "dx"}), {{"x", F64({3, 4}, 9)}, {"l", Labels({0, 3, 1})}}));
  // A good step that completes the default interval (the scale grows), and an overflow (it is cut).
  for (float found : {0.0f, 1.0f})
    c.push_back(One(Op("UpdateLossScale", {"s", "n", "f"}, {"s", "n"}),
                    {{"s", Make<float>({}, {8.0f})}, {"n", Make<float>({}, {1999.0f})}, {"f", Make<float>({}, {found})}}));
  // The whole of each gradient (part 0 of 1).
  c.push_back(One(Op("UnscaleGradients", {"s", "f", "g"}, {"f", "g"}),
                  {{"s", Make<float>({}, {4.0f})}, {"f", Make<float>({}, {0.0f})}, {"g", F64({200}, 60)}}));
  c.push_back(One(Op("SoftmaxWithLossGradient", {"p", "l", "dl"}, {"dx"}),
                  {{"p", F64({3, 4}, 10, 0, 1)}, {"l", Labels({0, 3, 1})}, {"dl", Make<double>({}, {0.7})}}));
  c.push_back(One(Op("BmufUpdate", {"w", "wg", "d"}, {"w", "wg", "d"}),
                  {{"w", F64({5}, 11)}, {"wg", F64({5}, 12)}, {"d", F64({5}, 13)}}));
  c.push_back(One(Op("Concat", {"a", "b"}, {"y", "split"}), {{"a", F64({2, 3}, 14)}, {"b", F64({2, 2}, 15)}}));
  c.push_back(One(Op("ConcatGradient", {"dy", "a", "b"}, {"da", "db"}),
                  {{"dy", F64({2, 5}, 16)}, {"a", F64({2, 3}, 17)}, {"b", F64({2, 2}, 18)}}));
  c.push_back(One(Op("Conv", {"x", "w", "b"}, {"y"}), {{"x", F64({1, 2, 5, 5}, 19)}, {"w", F64({4, 2, 3, 3}, 20)},
                                                       {"b", F64({4}, 21)}}));
  c.push_back(One(Op("ConvGradient", {"x", "w", "dy"}, {"dw", "db", "dx"}),
                  {{"x", F64({1, 2, 5, 5}, 22)}, {"w", F64({4, 2, 3, 3}, 23)}, {"dy", F64({1, 4, 3, 3}, 24)}}));
  const Tensor px = F64({1, 2, 4, 4}, 25);
  c.push_back(One(Op("MaxPool", {"x"}, {"y"}, {IntArg("kernel", 2)}), {{"x", px}}));
  c.push_back(One(Op("AveragePool", {"x"}, {"y"}, {IntArg("kernel", 2)}), {{"x", px}}));
  // With pads, where count_include_pad matters.
  c.push_back(One(Op("AveragePool", {"x"}, {"y"}, {IntArg("kernel", 3), IntArg("pad", 1)}), {{"x", px}}));
  c.push_back({{Op("MaxPool", {"x"}, {"y"}, {IntArg("kernel", 2)}),
                Op("MaxPoolGradient", {"x", "y", "dy"}, {"dx"}, {IntArg("kernel", 2)})},
               {{"x", px}, {"dy", F64({1, 2, 3, 3}, 26)}},
               1});
  c.push_back(One(Op("AveragePoolGradient", {"x", "dy"}, {"dx"}, {IntArg("kernel", 3), IntArg("pad", 1)}),
                  {{"x", px}, {"dy", F64({1, 2, 4, 4}, 27)}}));
  c.push_back(One(Op("AveragePoolGradient", {"x", "dy"}, {"dx"}, {IntArg("kernel", 2)}),
                  {{"x", px}, {"dy", F64({1, 2, 3, 3}, 51)}}));
  c.push_back(One(Op("SplitBatch", {"x"}, {"x0", "x1"}), {{"x", F64({4, 3}, 28)}}));
  c.push_back(One(Op("BatchShares", {"x"}, {"s0", "s1"}), {{"x", F64({4, 3}, 29)}}));
  c.push_back(
      One(Op("FC", {"x", "w", "b"}, {"y"}), {{"x", F64({3, 4}, 30)}, {"w", F64({2, 4}, 31)}, {"b", F64({2}, 32)}}));
  c.push_back(One(Op("FCGradient", {"x", "w", "dy"}, {"dw", "db", "dx"}),
                  {{"x", F64({3, 4}, 33)}, {"w", F64({2, 4}, 34)}, {"dy", F64({3, 2}, 35)}}));
  c.push_back(One(Op("Scale", {"x"}, {"y"}), {{"x", F64({5}, 36)}}));
  const Tensor p = F64({6}, 37), g = F64({6}, 38), s1 = F64({6}, 39), s2 = F64({6}, 40, 0, 1);
  c.push_back(One(Op("SGD", {"p", "g", "lr"}, {"p"}), {{"p", p}, {"g", g}, {"lr", Lr()}}));
  c.push_back(One(Op("MomentumSGD", {"p", "g", "m", "lr"}, {"p", "m"}), {{"p", p}, {"g", g}, {"m", s1}, {"lr", Lr()}}));
  c.push_back(One(Op("Adam", {"p", "g", "m", "v", "lr", "it"}, {"p", "m", "v"}),
                  {{"p", p}, {"g", g}, {"m", s1}, {"v", s2}, {"lr", Lr()}, {"it", I64({3})}}));
  c.push_back(One(Op("Adagrad", {"p", "g", "h", "lr"}, {"p", "h"}), {{"p", p}, {"g", g}, {"h", s2}, {"lr", Lr()}}));
  const Tensor q = F64({3}, 46), gq = F64({3}, 47), sq = F64({3}, 48, 0, 1);
  c.push_back(One(Op("MultiTensorSGD", {"p", "q", "g", "gq", "lr"}, {"p", "q"}),
                  {{"p", p}, {"q", q}, {"g", g}, {"gq", gq}, {"lr", Lr()}}));
  c.push_back(One(Op("MultiTensorMomentumSGD", {"p", "q", "m", "mq", "g", "gq", "lr"}, {"p", "q", "m", "mq"}),
                  {{"p", p}, {"q", q}, {"m", s1}, {"mq", sq}, {"g", g}, {"gq", gq}, {"lr", Lr()}}));
  c.push_back(One(Op("MultiTensorAdam", {"p", "q", "m", "mq", "v", "vq", "g", "gq", "lr", "it"},
                     {"p", "q", "m", "mq", "v", "vq"}),
                  {{"p", p}, {"q", q}, {"m", s1}, {"mq", sq}, {"v", s2}, {"vq", sq}, {"g", g}, {"gq", gq},
                   {"lr", Lr()}, {"it", I64({3})}}));
  c.push_back(One(Op("MultiTensorAdagrad", {"p", "q", "h", "hq", "g", "gq", "lr"}, {"p", "q", "h", "hq"}),
                  {{"p", p}, {"q", q}, {"h", s2}, {"hq", sq}, {"g", g}, {"gq", gq}, {"lr", Lr()}}));
  const Feeds bn = {{"x", F64({2, 3, 2, 2}, 41)}, {"scale", F64({3}, 42)}, {"bias", F64({3}, 43)},
                    {"rm", F64({3}, 44)}, {"rv", F64({3}, 45, 0.5, 1.5)}};
  c.push_back(One(Op("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y", "rm", "rv", "sm", "siv"}), bn));
  c.push_back({{Op("SpatialBNStats", {"x"}, {"stats"}),
                Op("SyncSpatialBN", {"x", "scale", "bias", "rm", "rv", "stats"}, {"y", "rm", "rv", "sm", "siv"})},
               bn,
               1});
  c.push_back({{Op("CreateCpuCollectives", {}, {"comm"}),
                Op("Allreduce", {"comm", "a", "b"}, {"a", "b"}, {IntArg("num_devices", 2)})},
               {{"a", F64({4}, 46)}, {"b", F64({4}, 47)}},
               1});
  c.push_back({{Op("CreateCpuCollectives", {}, {"comm"}),
                Op("ReduceScatter", {"comm", "a", "b"}, {"a", "b"}, {IntArg("num_devices", 2)})},
               {{"a", F64({200}, 52)}, {"b", F64({200}, 53)}},
               1});
  c.push_back({{Op("CreateCpuCollectives", {}, {"comm"}),
                Op("Broadcast", {"comm", "a", "b"}, {"a", "b"}, {IntArg("num_devices", 2)})},
               {{"a", F64({4}, 48)}, {"b", F64({4}, 49)}},
               1});
  return c;
}

// The op's tensor outputs, as (dims, dtype, bytes).
std::vector<std::string> OutputBytes(const Workspace& ws, const OperatorDef& op) {
  std::vector<std::string> out;
  for (const auto& name : op.outputs) {
    const Blob* b = ws.GetBlob(name);
    REQUIRE(b != nullptr);
    if (!b->IsType<Tensor>()) continue;
    const Tensor& t = b->Get<Tensor>();
    out.push_back(StrCat(name, " ", DimsString(t.dims()), " ", DTypeName(t.dtype()), " ",
                         std::string(static_cast<const char*>(t.raw_data()), t.nbytes())));
  }
  return out;
}

}  // namespace

TEST_CASE("declared default values are what the kernels use when the argument is absent") {
  std::set<std::pair<std::string, std::string>> checked;
  for (const DefaultCase& c : DefaultCases()) {
    const OperatorDef& target = c.ops[c.target];
    CAPTURE(target.type);
    const OpSchema* schema = OpSchemaRegistry::Find(target.type);
    REQUIRE(schema != nullptr);
    auto bare = RunOps(c.ops, c.feeds, Infer::kPartial);
    const auto want = OutputBytes(*bare, target);
    REQUIRE_FALSE(want.empty());
    for (const auto& spec : schema->args()) {
      if (!spec.default_value || target.FindArg(spec.name) != nullptr) continue;
      CAPTURE(spec.name);
      std::vector<OperatorDef> ops = c.ops;
      ops[c.target].args.push_back(*spec.default_value);
      auto with = RunOps(ops, c.feeds, Infer::kPartial);
      CHECK(OutputBytes(*with, target) == want);
      checked.insert({target.type, spec.name});
    }
  }
  // Every value default of every registered type is checked, or its type is
  // listed above with the reason it is not.
  for (const std::string& type : OpSchemaRegistry::Types()) {
    if (kNotRun.count(type) != 0 || type.rfind("Test", 0) == 0) continue;
    for (const auto& spec : OpSchemaRegistry::Find(type)->args()) {
      if (!spec.default_value) continue;
      CAPTURE(type);
      CAPTURE(spec.name);
      CHECK_MESSAGE(checked.count({type, spec.name}) == 1, "no case runs this default: add one to DefaultCases");
    }
  }
}

// ---- unknown op types ------------------------------------------------------------

TEST_CASE("an unknown op type names the nearest known one, at validation, shape inference and net creation") {
  const std::string json = R"({"name": "n", "external_inputs": ["x"], "ops": [
      {"type": "Relux", "inputs": ["x"], "outputs": ["y"]}]})";
  NetDef net;
  net.name = "n";
  net.external_inputs = {"x"};
  net.ops = {Op("Relux", {"x"}, {"y"})};
  ExpectError([&] { ValidateNet(net); }, Code::kInvalidNet,
              {"net 'n' op 0 (Relux)", "unknown operator type 'Relux' (did you mean 'Relu'?)"});
  ExpectError([&] { InferNetShapes(net, {}); }, Code::kInvalidNet, {"did you mean 'Relu'?"});
  // Net creation validates first; its kernel lookup says the same when it is reached.
  auto ws = std::make_shared<Workspace>();
  ExpectError([&] { Net n(std::make_shared<const NetDef>(net), ws); }, Code::kInvalidNet, {"did you mean 'Relu'?"});
  ExpectError([&] { OperatorRegistry::Create(OpInit{net.ops[0], 0, DeviceOption{}, ws.get()}); }, Code::kInvalidNet,
              {"op 0 (Relux)", "unknown operator type 'Relux' (did you mean 'Relu'?)"});
}

TEST_CASE("op type suggestions: other case first, then at most one or two edits, else none") {
  CHECK(OpSchemaRegistry::UnknownTypeMessage("relu") == "unknown operator type 'relu' (did you mean 'Relu'?)");
  CHECK(OpSchemaRegistry::UnknownTypeMessage("fc") == "unknown operator type 'fc' (did you mean 'FC'?)");
  CHECK(OpSchemaRegistry::UnknownTypeMessage("Sofmax") == "unknown operator type 'Sofmax' (did you mean 'Softmax'?)");
  CHECK(OpSchemaRegistry::UnknownTypeMessage("SquaredL2Distanse") ==
        "unknown operator type 'SquaredL2Distanse' (did you mean 'SquaredL2Distance'?)");
  CHECK(OpSchemaRegistry::UnknownTypeMessage("Convolution") == "unknown operator type 'Convolution'");
  CHECK(OpSchemaRegistry::UnknownTypeMessage("") == "unknown operator type ''");
  const std::vector<std::string> names{"scale", "scala"};
  REQUIRE(ClosestName("SCALE", names) != nullptr);
  CHECK(*ClosestName("SCALE", names) == "scale");
}

// ---- engines ---------------------------------------------------------------------

namespace {

// Writes `tag` into its output, so a test can tell which kernel ran.
template <int tag>
class TaggedOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override { Output(0, {}, DType::kInt64)->template mutable_data<int64_t>()[0] = tag; }
};

DP_OPERATOR_SCHEMA(TestCatalogueEngines).NumInputs(0).NumOutputs(1).Doc("test only");
DP_REGISTER_CPU_OPERATOR(TestCatalogueEngines, TaggedOp<0>);
DP_REGISTER_CPU_OPERATOR(TestCatalogueEngines_ENGINE_SLOW, TaggedOp<2>);
DP_REGISTER_CPU_OPERATOR(TestCatalogueEngines_ENGINE_FAST, TaggedOp<1>);

int64_t RunWithEngine(const std::string& engine) {
  OperatorDef op = Op("TestCatalogueEngines", {}, {"y"});
  op.engine = engine;
  auto ws = RunOp(op, {}, Infer::kPartial);
  return ws->GetTensor("y").data<int64_t>()[0];
}

}  // namespace

TEST_CASE("engines are listed per device, sorted, and an op picks its engine's kernel") {
  CHECK(OperatorRegistry::Engines(DeviceType::kCPU, "TestCatalogueEngines") ==
        std::vector<std::string>{"FAST", "SLOW"});
  CHECK(OperatorRegistry::Engines(DeviceType::kCUDA, "TestCatalogueEngines").empty());
  CHECK(OperatorRegistry::Engines(DeviceType::kCPU, "TestCatalogue").empty());  // a prefix is not a type
  CHECK(OperatorRegistry::Engines(DeviceType::kCPU, "Relu").empty());
  CHECK(RunWithEngine("") == 0);
  CHECK(RunWithEngine("FAST") == 1);
  CHECK(RunWithEngine("SLOW") == 2);
  CHECK(RunWithEngine("NONE") == 0);  // no such engine: the default kernel
}
