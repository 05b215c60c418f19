// Gradient kernels of the basic CPU operators (FC, Relu, Softmax,
// SoftmaxWithLoss, AveragedLoss, Add, Mul, Sum, Scale, Reshape, Flatten,
// Alias): finite differences in float64 against the registered makers.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "autodiff/gradient_registry.h"
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

TEST_CASE("every registered maker's type has a kernel, and so do the gradient ops it emits") {
  // A checker that cannot fail on an empty registry is no checker.
  auto types = GradientRegistry::TypesWithMakers();
  CHECK(types.size() >= 12);
  for (const auto& t : types) {
    CAPTURE(t);
    CHECK(OperatorRegistry::Has(DeviceType::kCPU, t));
  }
  for (const char* t : {"FCGradient", "ReluGradient", "SoftmaxGradient", "SoftmaxWithLossGradient",
                        "AveragedLossGradient", "SumReduceLike", "ReshapeLike", "Alias"})
    CHECK(OperatorRegistry::Has(DeviceType::kCPU, t));
  CHECK(GradientRegistry::Kind("Accuracy") == GradientKind::kNone);
  CHECK(GradientRegistry::Kind("ConstantFill") == GradientKind::kStop);
  CHECK(GradientRegistry::Kind("NoSuchOp") == GradientKind::kUnknown);
}
