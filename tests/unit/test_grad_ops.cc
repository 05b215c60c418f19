// Gradient kernels of the basic CPU operators (FC, Relu, Clip, Softmax,
// LogSoftmax, SoftmaxWithLoss, AveragedLoss, Add, Mul, Sum, Scale, Reshape,
// Flatten, Alias): finite differences in float64 against the registered
// makers.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ops/gradient_registry.h"
#include "ops/op_schema.h"
#include "ops/operator.h"
#include "gradient_checker.h"
#include "op_test_util.h"

using namespace dp;
using namespace dp::testing;

namespace {

Tensor RandomT(Dims dims, uint32_t seed, double lo = -1.5, double hi = 1.5) {
  return RandomF64(std::move(dims), seed, lo, hi);
}

}  // namespace

TEST_CASE("FC gradient: X, W, b at several axes") {
  CHECK(CheckGradient(Op("FC", {"x", "w", "b"}, {"y"}),
                      {{"x", RandomT({5, 7}, 1)}, {"w", RandomT({4, 7}, 2)}, {"b", RandomT({4}, 3)}}) > 0);
  // X [2, 3, 4] flattened at axis 2 -> M = 6, K = 4.
  CHECK(CheckGradient(Op("FC", {"x", "w", "b"}, {"y"}, {MakeArg("axis", 2)}),
                      {{"x", RandomT({2, 3, 4}, 4)}, {"w", RandomT({5, 4}, 5)}, {"b", RandomT({5}, 6)}}) > 0);
  // W [2, 3, 4] flattened at axis_w 2 -> N = 6.
  CHECK(CheckGradient(Op("FC", {"x", "w", "b"}, {"y"}, {MakeArg("axis_w", 2)}),
                      {{"x", RandomT({3, 4}, 7)}, {"w", RandomT({2, 3, 4}, 8)}, {"b", RandomT({6}, 9)}}) > 0);
}

TEST_CASE("FC with a fused relu: gradient, and forward equal to FC then Relu") {
  Argument relu{"activation", Argument::Value{std::string("relu")}};
  CheckGradient(Op("FC", {"x", "w", "b"}, {"y"}, {relu}),
                {{"x", RandomT({5, 7}, 61)}, {"w", RandomT({4, 7}, 62)}, {"b", RandomT({4}, 63)}});
  NetDef net;
  net.external_inputs = {"x", "w", "b"};
  net.ops = {Op("FC", {"x", "w", "b"}, {"y"}, {relu}), Op("FC", {"x", "w", "b"}, {"z"}), Op("Relu", {"z"}, {"z"})};
  auto ws = dp::testing::detail::RunIn(net, {{"x", RandomT({5, 7}, 64)}, {"w", RandomT({4, 7}, 65)},
                                             {"b", RandomT({4}, 66)}});
  const Tensor& y = ws->GetTensor("y");
  const Tensor& z = ws->GetTensor("z");
  int zeros = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    CHECK(y.data<double>()[i] == z.data<double>()[i]);
    zeros += y.data<double>()[i] == 0.0;
  }
  CHECK(zeros > 0);
  CHECK(zeros < y.numel());
}

TEST_CASE("FC gradient maker skips dX when it is not wanted") {
  OperatorDef fc = Op("FC", {"x", "w", "b"}, {"y"});
  GradientRequest req{fc, "fc", {"y_grad"}, {"", "w_grad", "b_grad"}};
  auto ops = GradientRegistry::Create(req)->Get();
  REQUIRE(ops.size() == 1);
  CHECK(ops[0].type == "FCGradient");
  CHECK(ops[0].outputs == std::vector<std::string>{"w_grad", "b_grad"});
  GradientRequest all{fc, "fc", {"y_grad"}, {"x_grad", "w_grad", "b_grad"}};
  CHECK(GradientRegistry::Create(all)->Get()[0].outputs.size() == 3);
}

TEST_CASE("Relu, Softmax, Scale, AveragedLoss gradients") {
  CheckGradient(Op("Relu", {"x"}, {"y"}), {{"x", RandomT({4, 6}, 11)}});
  CheckGradient(Op("Softmax", {"x"}, {"y"}), {{"x", RandomT({3, 5}, 12)}});
  CheckGradient(Op("Softmax", {"x"}, {"y"}, {MakeArg("axis", 2)}), {{"x", RandomT({2, 3, 4}, 13)}});
  CheckGradient(Op("Scale", {"x"}, {"y"}, {MakeArg("scale", 0.37)}), {{"x", RandomT({7}, 14)}});
  CheckGradient(Op("AveragedLoss", {"x"}, {"l"}), {{"x", RandomT({3, 4}, 15)}});
}

TEST_CASE("LogSoftmax gradient at several axes, through large logits too") {
  CHECK(CheckGradient(Op("LogSoftmax", {"x"}, {"y"}), {{"x", RandomT({3, 5}, 111, -3, 3)}}) == 15);
  CHECK(CheckGradient(Op("LogSoftmax", {"x"}, {"y"}, {MakeArg("axis", 2)}), {{"x", RandomT({2, 3, 4}, 112)}}) == 24);
  CHECK(CheckGradient(Op("LogSoftmax", {"x"}, {"y"}, {MakeArg("axis", -2)}), {{"x", RandomT({2, 3, 4}, 113)}}) == 24);
  CHECK(CheckGradient(Op("LogSoftmax", {"x"}, {"y"}, {MakeArg("axis", 0)}), {{"x", RandomT({2, 3}, 114)}}) == 6);
  // Logits up to 800 apart, where some softmax values underflow in double:
  // log(softmax) stays smooth there.
  CHECK(CheckGradient(Op("LogSoftmax", {"x"}, {"y"}), {{"x", RandomT({2, 4}, 115, -400, 400)}}) == 8);
}

TEST_CASE("Clip gradient: dX is dY inside the bounds and 0 where X was clipped") {
  // Elements below, inside and above [-0.5, 0.7], none within the
  // differences' step of a bound (where Clip has its kinks).
  const Tensor x = Make<double>({3, 4}, {-2.0, -0.9, -0.4, 0.0, 0.3, 0.69, 0.71, 1.4, -0.51, -0.49, 2.5, 0.1});
  CHECK(CheckGradient(Op("Clip", {"x"}, {"y"}, {MakeArg("min", -0.5), MakeArg("max", 0.7)}), {{"x", x}}) == 12);
  CHECK(CheckGradient(Op("Clip", {"x"}, {"y"}, {MakeArg("max", -0.2)}), {{"x", x}}) == 12);
  CHECK(CheckGradient(Op("Clip", {"x"}, {"y"}, {MakeArg("min", 0.05)}), {{"x", x}}) == 12);
  CHECK(CheckGradient(Op("Clip", {"x"}, {"y"}), {{"x", x}}) == 12);  // no bounds: the identity
  CHECK(CheckGradient(Op("Clip", {"x"}, {"y"}, {MakeArg("min", 0.0), MakeArg("max", 6.0)}),
                      {{"x", RandomT({4, 6}, 116, -3, 9)}}) == 24);  // ReLU6
}

TEST_CASE("GivenTensorFill stops gradients like the other fills") {
  CHECK(GradientRegistry::Kind("GivenTensorFill") == GradientKind::kStop);
  CHECK(GradientRegistry::Kind("LogSoftmax") == GradientKind::kMaker);
  CHECK(GradientRegistry::Kind("Clip") == GradientKind::kMaker);
}

TEST_CASE("SoftmaxWithLoss gradient: plain, scaled, weighted") {
  GradCheckOptions loss_only;
  loss_only.outputs = {1};
  loss_only.inputs = {0};
  CheckGradient(Op("SoftmaxWithLoss", {"x", "l"}, {"p", "loss"}),
                {{"x", RandomT({4, 5}, 21, -3, 3)}, {"l", Labels({0, 4, 2, 2})}}, loss_only);
  CheckGradient(Op("SoftmaxWithLoss", {"x", "l"}, {"p", "loss"}, {MakeArg("scale", 0.25)}),
                {{"x", RandomT({4, 5}, 22, -3, 3)}, {"l", Labels({1, 3, 0, 4})}}, loss_only);
  CheckGradient(Op("SoftmaxWithLoss", {"x", "l", "w"}, {"p", "loss"}),
                {{"x", RandomT({4, 5}, 23, -3, 3)}, {"l", Labels({1, 3, 0, 4})}, {"w", RandomT({4}, 24, 0.1, 2)}},
                loss_only);
}

TEST_CASE("SoftmaxWithLoss refuses a gradient through its softmax output") {
  OperatorDef op = Op("SoftmaxWithLoss", {"x", "l"}, {"p", "loss"});
  GradientRequest req{op, "op 0 (SoftmaxWithLoss)", {"p_grad", "loss_grad"}, {"x_grad", ""}};
  try {
    GradientRegistry::Create(req)->Get();
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidNet);
    CHECK(e.message().find("'p'") != std::string::npos);
  }
}

TEST_CASE("Add and Mul gradients with broadcasting") {
  CheckGradient(Op("Add", {"a", "b"}, {"c"}), {{"a", RandomT({3, 4}, 31)}, {"b", RandomT({3, 4}, 32)}});
  CheckGradient(Op("Add", {"a", "b"}, {"c"}), {{"a", RandomT({2, 3, 4}, 33)}, {"b", RandomT({4}, 34)}});
  CheckGradient(Op("Add", {"a", "b"}, {"c"}), {{"a", RandomT({2, 1, 4}, 35)}, {"b", RandomT({3, 1}, 36)}});
  CheckGradient(Op("Mul", {"a", "b"}, {"c"}), {{"a", RandomT({3, 4}, 37)}, {"b", RandomT({3, 4}, 38)}});
  CheckGradient(Op("Mul", {"a", "b"}, {"c"}), {{"a", RandomT({2, 3, 4}, 39)}, {"b", RandomT({3, 1}, 40)}});
  CheckGradient(Op("Mul", {"a", "b"}, {"c"}), {{"a", RandomT({1}, 41)}, {"b", RandomT({2, 5}, 42)}});
}

TEST_CASE("Sub and Div gradients with broadcasting") {
  CheckGradient(Op("Sub", {"a", "b"}, {"c"}), {{"a", RandomT({3, 4}, 81)}, {"b", RandomT({3, 4}, 82)}});
  CheckGradient(Op("Sub", {"a", "b"}, {"c"}), {{"a", RandomT({2, 3, 4}, 83)}, {"b", RandomT({3, 1}, 84)}});
  CheckGradient(Op("Sub", {"a", "b"}, {"c"}), {{"a", RandomT({1}, 85)}, {"b", RandomT({2, 5}, 86)}});
  // Divisors kept away from 0, where the quotient's slope is steep.
  CheckGradient(Op("Div", {"a", "b"}, {"c"}), {{"a", RandomT({3, 4}, 87)}, {"b", RandomT({3, 4}, 88, 0.5, 2)}});
  CheckGradient(Op("Div", {"a", "b"}, {"c"}), {{"a", RandomT({2, 3, 4}, 89)}, {"b", RandomT({3, 1}, 90, -2, -0.5)}});
  CheckGradient(Op("Div", {"a", "b"}, {"c"}), {{"a", RandomT({2, 1, 4}, 91)}, {"b", RandomT({3, 1}, 92, 0.5, 2)}});
  CheckGradient(Op("Div", {"a", "b"}, {"c"}), {{"a", RandomT({}, 93)}, {"b", RandomT({2, 5}, 94, 0.5, 2)}});
  // Only one input's gradient wanted: each alone.
  for (int i = 0; i < 2; ++i) {
    GradCheckOptions one;
    one.inputs = {i};
    CheckGradient(Op("Div", {"a", "b"}, {"c"}), {{"a", RandomT({2, 3}, 95)}, {"b", RandomT({3}, 96, 0.5, 2)}}, one);
    CheckGradient(Op("Sub", {"a", "b"}, {"c"}), {{"a", RandomT({2, 3}, 97)}, {"b", RandomT({3}, 98)}}, one);
  }
}

TEST_CASE("SquaredL2Distance gradient: both inputs, and each alone") {
  CheckGradient(Op("SquaredL2Distance", {"x", "y"}, {"z"}), {{"x", RandomT({4, 3}, 101)}, {"y", RandomT({4, 3}, 102)}});
  CheckGradient(Op("SquaredL2Distance", {"x", "y"}, {"z"}),
                {{"x", RandomT({2, 3, 2}, 103)}, {"y", RandomT({2, 3, 2}, 104)}});
  CheckGradient(Op("SquaredL2Distance", {"x", "y"}, {"z"}), {{"x", RandomT({5}, 105)}, {"y", RandomT({5}, 106)}});
  for (int i = 0; i < 2; ++i) {
    GradCheckOptions one;
    one.inputs = {i};
    CheckGradient(Op("SquaredL2Distance", {"x", "y"}, {"z"}), {{"x", RandomT({3, 2}, 107)}, {"y", RandomT({3, 2}, 108)}},
                  one);
  }
}

TEST_CASE("Sum, Alias, Reshape, Flatten gradients") {
  CheckGradient(Op("Sum", {"a", "b", "c"}, {"y"}),
                {{"a", RandomT({2, 3}, 51)}, {"b", RandomT({2, 3}, 52)}, {"c", RandomT({2, 3}, 53)}});
  CheckGradient(Op("Alias", {"a"}, {"y"}), {{"a", RandomT({5}, 54)}});
  CheckGradient(Op("Reshape", {"a"}, {"y"}, {MakeArg("shape", std::vector<int64_t>{3, -1})}),
                {{"a", RandomT({2, 3, 2}, 55)}});
  CheckGradient(Op("Reshape", {"a"}, {"y", "old"}, {MakeArg("shape", std::vector<int64_t>{4, 3})}),
                {{"a", RandomT({2, 6}, 56)}}, GradCheckOptions{{0}, {0}});
  CheckGradient(Op("Flatten", {"a"}, {"y"}), {{"a", RandomT({2, 3, 2}, 57)}});
}

// ---- every maker against the registries ---------------------------------------

namespace {

// A maker that emits an op type with neither schema nor kernel, for a forward
// type with a schema but no kernel: what the registry check below must catch
// (and what it skips when checking the real makers).
constexpr const char* kBrokenForwardType = "GradOpsTestBrokenForward";
DP_OPERATOR_SCHEMA(GradOpsTestBrokenForward).NumInputs(1).NumOutputs(1);
DP_SIMPLE_GRADIENT(GradOpsTestBrokenForward,
                   { return {MakeOp("GradOpsTestNoSuchGradient", {I(0), GO(0)}, {GI(0)})}; });

// What is wrong with the maker of `type` and the gradient ops it emits: the
// forward type must have a schema and a CPU kernel; the maker is asked for
// gradients of forward ops of every arity its schema allows (from the minimum
// up to a few more inputs and outputs), with every input's gradient wanted and
// the output gradients flowing from all outputs, from the first only or from
// the last only. Requests it refuses with a dp::Error (SoftmaxWithLoss with a
// gradient through its softmax output, Dropout in training without its mask)
// are skipped, but it must accept one and emit something. Every emitted op's
// type must have a schema and a CPU kernel, the op must pass its schema
// (arity, in-place rules, required arguments), and it may read only the
// forward op's blobs, the flowing output gradients and what earlier emitted
// ops wrote. `emitted` collects the emitted types.
std::vector<std::string> MakerProblems(const std::string& type, std::set<std::string>* emitted) {
  std::vector<std::string> problems;
  const OpSchema* schema = OpSchemaRegistry::Find(type);
  if (!OperatorRegistry::Has(DeviceType::kCPU, type)) problems.push_back(type + " has no CPU kernel");
  if (schema == nullptr) {
    problems.push_back(type + " has a gradient maker but no schema");
    return problems;
  }
  const int max_in = std::min(schema->max_inputs(), schema->min_inputs() + 3);
  const int max_out = std::min(schema->max_outputs(), std::max(1, schema->min_outputs()) + 5);
  int accepted = 0;
  for (int nin = schema->min_inputs(); nin <= max_in; ++nin) {
    for (int nout = std::max(1, schema->min_outputs()); nout <= max_out; ++nout) {
      for (int flow = 0; flow < 3; ++flow) {  // all outputs, the first, the last
        OperatorDef fwd;
        fwd.type = type;
        std::vector<std::string> input_grads, output_grads;
        for (int i = 0; i < nin; ++i) {
          fwd.inputs.push_back(StrCat("in", i));
          input_grads.push_back(StrCat("in", i, "_grad"));
        }
        for (int o = 0; o < nout; ++o) {
          fwd.outputs.push_back(StrCat("out", o));
          const bool flows = flow == 0 || (flow == 1 && o == 0) || (flow == 2 && o == nout - 1);
          output_grads.push_back(flows ? StrCat("out", o, "_grad") : std::string());
        }
        const std::string label = StrCat(type, " with ", nin, " inputs, ", nout, " outputs, gradients from ",
                                          flow == 0 ? "all outputs" : flow == 1 ? "output 0" : "the last output");
        // (Only the arity follows the schema: the blob names are all distinct,
        // also where it enforces in-place outputs; makers do not care.)
        std::vector<OperatorDef> ops;
        try {
          GradientRequest req{fwd, label, output_grads, input_grads};
          ops = GradientRegistry::Create(req)->Get();
        } catch (const Error&) {
          continue;  // a request this maker refuses
        }
        ++accepted;
        std::set<std::string> readable(fwd.inputs.begin(), fwd.inputs.end());
        readable.insert(fwd.outputs.begin(), fwd.outputs.end());
        for (const auto& g : output_grads)
          if (!g.empty()) readable.insert(g);
        for (const OperatorDef& op : ops) {
          const std::string where = StrCat(label, ": emits ", op.type);
          emitted->insert(op.type);
          const OpSchema* gs = OpSchemaRegistry::Find(op.type);
          if (gs == nullptr) problems.push_back(where + ", which has no schema");
          if (!OperatorRegistry::Has(DeviceType::kCPU, op.type))
            problems.push_back(where + ", which has no CPU kernel");
          if (gs != nullptr) {
            try {
              gs->Verify(op, where);
            } catch (const Error& e) {
              problems.push_back(e.message());
            }
          }
          for (const auto& in : op.inputs)
            if (readable.count(in) == 0) problems.push_back(StrCat(where, " reading '", in, "', which nothing wrote"));
          readable.insert(op.outputs.begin(), op.outputs.end());
        }
        if (ops.empty()) problems.push_back(label + ": emits no op although every input's gradient is wanted");
      }
    }
  }
  if (accepted == 0) problems.push_back(type + ": its maker refused every request");
  return problems;
}

}  // namespace

TEST_CASE("every registered maker's type has a kernel, and so do the gradient ops it emits") {
  // Derived from the registries: every type with a maker, every op type its
  // maker emits. A checker that cannot fail on an empty registry is no checker.
  const std::vector<std::string> types = GradientRegistry::TypesWithMakers();
  CHECK(types.size() >= 12);
  std::set<std::string> emitted;
  for (const auto& type : types) {
    if (type == kBrokenForwardType) continue;
    CAPTURE(type);
    for (const auto& problem : MakerProblems(type, &emitted)) FAIL_CHECK(problem);
  }
  // The derivation found the gradient ops (a few that must be among them).
  for (const char* t : {"FCGradient", "ReluGradient", "SoftmaxWithLossGradient", "SumReduceLike", "ReshapeLike",
                        "ConvGradient"})
    CHECK_MESSAGE(emitted.count(t) == 1, t);
  std::string list;
  for (const auto& t : emitted) list += " " + t;
  MESSAGE((types.size() - 1), " gradient makers emit ", emitted.size(), " op types:", list);
  CHECK(GradientRegistry::Kind("Accuracy") == GradientKind::kNone);
  CHECK(GradientRegistry::Kind("ConstantFill") == GradientKind::kStop);
  CHECK(GradientRegistry::Kind("NoSuchOp") == GradientKind::kUnknown);
}

TEST_CASE("the maker check reports an emitted op type without schema or kernel") {
  std::set<std::string> emitted;
  const std::vector<std::string> problems = MakerProblems(kBrokenForwardType, &emitted);
  CHECK(emitted == std::set<std::string>{"GradOpsTestNoSuchGradient"});
  auto reported = [&](const std::string& needle) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& p) { return p.find(needle) != std::string::npos; });
  };
  CHECK(reported("GradOpsTestBrokenForward has no CPU kernel"));
  CHECK(reported("emits GradOpsTestNoSuchGradient, which has no schema"));
  CHECK(reported("emits GradOpsTestNoSuchGradient, which has no CPU kernel"));
  std::set<std::string> none;
  CHECK(MakerProblems("GradOpsTestNoSchema", &none) ==
        std::vector<std::string>{"GradOpsTestNoSchema has no CPU kernel",
                                 "GradOpsTestNoSchema has a gradient maker but no schema"});
}
