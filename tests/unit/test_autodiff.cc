// The AddGradients transform: whole-net gradients against finite
// differences, summing of shared blobs, in-place ops, stop and
// non-differentiable paths, loss scaling, readiness order, JSON round trip.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "autodiff/add_gradients.h"
#include "ops/gradient_registry.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/fusion.h"
#include "graph/net_format.h"
#include "expect_error.h"
#include "op_test_util.h"

using namespace dp;
using namespace dp::testing;

namespace {

std::shared_ptr<Workspace> Run(const NetDef& def, const Feeds& feeds) {
  auto ws = std::make_shared<Workspace>();
  for (const auto& [n, t] : feeds) {
    Tensor c;
    c.CopyFrom(t);
    ws->Feed(n, c);
  }
  Net net(std::make_shared<const NetDef>(def), ws);
  net.Run();
  return ws;
}

double Scalar(const Workspace& ws, const std::string& name) { return ws.GetTensor(name).data<double>()[0]; }

// Every gradient of `res` against central differences of the (sum of) losses.
void CheckNetGradients(const NetDef& forward, const GradientResult& res, const Feeds& feeds,
                       const std::vector<std::string>& losses, double scale = 1.0) {
  auto ws = Run(res.net, feeds);
  for (const auto& entry : res.grads) {
    const std::string& param = entry.first;  // no structured binding: clang 14 cannot capture one
    const std::string& grad = entry.second;
    CAPTURE(param);
    const Tensor& g = ws->GetTensor(grad);
    Tensor x;
    for (const auto& [n, t] : feeds)
      if (n == param) x = t;
    REQUIRE(g.dims() == x.dims());
    const int64_t step = std::max<int64_t>(1, x.numel() / 16);
    for (int64_t j = 0; j < x.numel(); j += step) {
      double eps = 1e-6, l[2];
      for (int s = 0; s < 2; ++s) {
        Feeds f = feeds;
        for (auto& [n, t] : f)
          if (n == param) {
            Tensor c;
            c.CopyFrom(t);
            c.mutable_data<double>()[j] += s == 0 ? eps : -eps;
            t = c;
          }
        auto w = Run(forward, f);
        l[s] = 0;
        for (const auto& loss : losses) l[s] += Scalar(*w, loss);
      }
      double numeric = scale * (l[0] - l[1]) / (2 * eps);
      double analytic = g.data<double>()[j];
      CHECK_MESSAGE(std::abs(numeric - analytic) <= 1e-6 + 1e-5 * std::abs(numeric), param, "[", j,
                    "]: numeric ", numeric, ", analytic ", analytic);
    }
  }
}

// A two-layer MLP with softmax loss and an accuracy metric beside the loss.
NetDef Mlp(Feeds* feeds, bool inplace_relu) {
  *feeds = {{"x", RandomF64({6, 5}, 1)}, {"label", Labels({0, 2, 1, 3, 3, 0})}, {"w1", RandomF64({7, 5}, 2)},
            {"b1", RandomF64({7}, 3)},   {"w2", RandomF64({4, 7}, 4)},              {"b2", RandomF64({4}, 5)}};
  std::vector<OperatorDef> ops{Op("FC", {"x", "w1", "b1"}, {"h"})};
  if (inplace_relu)
    ops.push_back(Op("Relu", {"h"}, {"h"}));
  else
    ops.push_back(Op("Relu", {"h"}, {"hr"}));
  ops.push_back(Op("FC", {inplace_relu ? "h" : "hr", "w2", "b2"}, {"logits"}));
  ops.push_back(Op("SoftmaxWithLoss", {"logits", "label"}, {"p", "loss"}));
  ops.push_back(Op("Accuracy", {"p", "label"}, {"acc"}));
  return MakeNet(std::move(ops), *feeds);
}

}  // namespace

TEST_CASE("MLP gradients match finite differences; the data input gets no dX GEMM") {
  for (bool inplace : {false, true}) {
    CAPTURE(inplace);
    Feeds feeds;
    NetDef fwd = Mlp(&feeds, inplace);
    GradientOptions opt;
    opt.losses = {"loss"};
    opt.wrt = {"w1", "b1", "w2", "b2"};
    GradientResult res = AddGradients(fwd, opt);
    REQUIRE(res.grads.size() == 4);
    CHECK(res.grads[0] == std::pair<std::string, std::string>{"w1", "w1_grad"});
    CheckNetGradients(fwd, res, feeds, {"loss"});
    // The first FC's gradient has two outputs (dW, db): x is not differentiated.
    auto first_fc = std::find_if(res.net.ops.rbegin(), res.net.ops.rend(),
                                 [](const OperatorDef& o) { return o.type == "FCGradient"; });
    REQUIRE(first_fc != res.net.ops.rend());
    CHECK(first_fc->outputs.size() == 2);
    // Accuracy is beside the loss path, so it does not stop the transform; the
    // last layer's params are ready before the first layer's.
    CHECK(res.ready_after[2] < res.ready_after[0]);
    CHECK(res.first_gradient_op == fwd.ops.size());
  }
}

TEST_CASE("a blob read by several ops gets its contributions summed") {
  // y = FC(x, w, b); z = FC(y, w2, b2) + y*y (Mul of y with itself) ; shared weight w used twice.
  Feeds feeds{{"x", RandomF64({3, 4}, 11)}, {"w", RandomF64({4, 4}, 12)}, {"b", RandomF64({4}, 13)}};
  NetDef fwd = MakeNet({Op("FC", {"x", "w", "b"}, {"y"}), Op("FC", {"y", "w", "b"}, {"z"}),
                        Op("Mul", {"y", "y"}, {"yy"}), Op("Add", {"z", "yy"}, {"s"}),
                        Op("AveragedLoss", {"s"}, {"loss"})},
                       feeds);
  GradientOptions opt;
  opt.losses = {"loss"};
  opt.wrt = {"x", "w", "b"};
  GradientResult res = AddGradients(fwd, opt);
  int sums = 0;
  for (size_t j = res.first_gradient_op; j < res.net.ops.size(); ++j)
    if (res.net.ops[j].type == "Sum") ++sums;
  CHECK(sums >= 3);  // y (3 reads), w (2), b (2)
  CheckNetGradients(fwd, res, feeds, {"loss"});
}

TEST_CASE("several losses, loss scale, and wrt = every external input") {
  Feeds feeds{{"a", RandomF64({4}, 21)}, {"b", RandomF64({4}, 22)}};
  NetDef fwd = MakeNet({Op("Mul", {"a", "b"}, {"ab"}), Op("AveragedLoss", {"ab"}, {"l1"}),
                        Op("AveragedLoss", {"a"}, {"l2"})},
                       feeds);
  GradientOptions opt;
  opt.losses = {"l1", "l2"};
  opt.loss_scale = 0.25;
  GradientResult res = AddGradients(fwd, opt);
  REQUIRE(res.grads.size() == 2);
  CheckNetGradients(fwd, res, feeds, {"l1", "l2"}, 0.25);
}

TEST_CASE("StopGradient-like fills, stop lists, non-differentiable paths and missing makers are reported") {
  Feeds feeds;
  NetDef fwd = Mlp(&feeds, false);
  GradientOptions opt;
  opt.losses = {"acc"};
  opt.wrt = {"w1"};
  ExpectError([&] { AddGradients(fwd, opt); }, Code::kInvalidNet, {"Accuracy", "not differentiable"});

  opt.losses = {"loss"};
  opt.stop = {"hr"};
  ExpectError([&] { AddGradients(fwd, opt); }, Code::kInvalidNet, {"loss 'loss'", "does not depend"});
  opt.wrt = {"w1", "w2"};
  ExpectError([&] { AddGradients(fwd, opt); }, Code::kInvalidNet, {"'w1'"});
  opt.stop.clear();

  opt.wrt = {"nope"};
  ExpectError([&] { AddGradients(fwd, opt); }, Code::kInvalidNet, {"'nope'", "not an external input"});
  opt.wrt = {"w1"};
  opt.losses = {"h"};
  CHECK_NOTHROW(AddGradients(fwd, opt));  // any blob may be a "loss" (its gradient is seeded)
  opt.losses = {"missing"};
  ExpectError([&] { AddGradients(fwd, opt); }, Code::kInvalidNet, {"'missing'", "not written"});
  opt.losses = {};
  ExpectError([&] { AddGradients(fwd, opt); }, Code::kInvalidArgument, {"no loss"});

  // Copy has no gradient maker registered.
  Feeds f2{{"a", RandomF64({3}, 1)}};
  NetDef copy = MakeNet({Op("Copy", {"a"}, {"c"}), Op("AveragedLoss", {"c"}, {"l"})}, f2);
  GradientOptions o2;
  o2.losses = {"l"};
  ExpectError([&] { AddGradients(copy, o2); }, Code::kInvalidNet, {"op 0 (Copy)", "no gradient"});

  // A fill shaped like a param stops the gradient: the loss does not depend on it.
  NetDef fill = MakeNet({Op("ConstantFill", {"a"}, {"c"}, {MakeArg("value", 1.0)}), Op("AveragedLoss", {"c"}, {"l"})}, f2);
  ExpectError([&] { AddGradients(fill, o2); }, Code::kInvalidNet, {"does not depend"});
}

TEST_CASE("a gradient that needs a value overwritten in place is refused, naming both ops") {
  // Sigmoid-free case: Mul reads a and b; a later in-place Scale overwrites a.
  Feeds feeds{{"a", RandomF64({4}, 31)}, {"b", RandomF64({4}, 32)}};
  NetDef fwd = MakeNet({Op("Mul", {"a", "b"}, {"c"}), Op("Scale", {"a"}, {"a"}, {MakeArg("scale", 2.0)}),
                        Op("Add", {"c", "a"}, {"d"}), Op("AveragedLoss", {"d"}, {"l"})},
                       feeds);
  GradientOptions opt;
  opt.losses = {"l"};
  opt.wrt = {"b"};
  ExpectError([&] { AddGradients(fwd, opt); }, Code::kInvalidNet, {"op 0 (Mul)", "'a'", "op 1 (Scale)"});
}

TEST_CASE("the gradient net validates, runs, and survives a JSON round trip") {
  Feeds feeds;
  NetDef fwd = Mlp(&feeds, true);
  GradientOptions opt;
  opt.losses = {"loss"};
  opt.wrt = {"w1", "b1", "w2", "b2"};
  GradientResult res = AddGradients(fwd, opt);
  NetDef back = NetDefFromJson(NetDefToJson(res.net));
  REQUIRE(back.ops.size() == res.net.ops.size());
  auto a = Run(res.net, feeds), b = Run(back, feeds);
  for (const auto& [p, g] : res.grads) {
    const Tensor& ta = a->GetTensor(g);
    const Tensor& tb = b->GetTensor(g);
    REQUIRE(ta.numel() == tb.numel());
    for (int64_t i = 0; i < ta.numel(); ++i) CHECK(ta.data<double>()[i] == tb.data<double>()[i]);
  }
  // Gradient blobs are external outputs of the new net.
  for (const auto& [p, g] : res.grads)
    CHECK(std::find(res.net.external_outputs.begin(), res.net.external_outputs.end(), g) !=
          res.net.external_outputs.end());
}

TEST_CASE("SoftmaxWithLoss fused with its gradient: the gradient op's bits, two ops fewer; the pass's rules") {
  Feeds feeds;
  const NetDef fwd = Mlp(&feeds, false);
  GradientOptions opt;
  opt.losses = {"loss"};
  opt.wrt = {"w1", "b1", "w2", "b2"};
  for (double seed : {1.0, 0.25}) {  // 1/N of N replicas, say
    CAPTURE(seed);
    opt.loss_scale = seed;
    const GradientResult g = AddGradients(fwd, opt);
    NetDef fused = g.net;
    REQUIRE(FuseSoftmaxLossGradient(fused) == 1);
    CHECK(fused.ops.size() == g.net.ops.size() - 2);
    const auto loss_op = std::find_if(fused.ops.begin(), fused.ops.end(),
                                      [](const OperatorDef& o) { return o.type == "SoftmaxWithLoss"; });
    REQUIRE(loss_op != fused.ops.end());
    CHECK(loss_op->outputs == std::vector<std::string>{"p", "loss", "logits_grad"});
    for (const auto& op : fused.ops) CHECK(op.type != "SoftmaxWithLossGradient");
    auto wa = Run(g.net, feeds), wb = Run(fused, feeds);
    for (const std::string blob : {"loss", "p", "logits_grad", "w1_grad", "b1_grad", "w2_grad", "b2_grad"}) {
      CAPTURE(blob);
      const Tensor& ta = wa->GetTensor(blob);
      const Tensor& tb = wb->GetTensor(blob);
      REQUIRE(ta.numel() == tb.numel());
      for (int64_t i = 0; i < ta.numel(); ++i) CHECK(ta.data<double>()[i] == tb.data<double>()[i]);
    }
  }
  opt.loss_scale = 1.0;
  const GradientResult g = AddGradients(fwd, opt);
  auto seed_index = [](const NetDef& net) {
    for (size_t i = 0; i < net.ops.size(); ++i)
      if (net.ops[i].type == "ConstantFill") return i;
    FAIL("no seed");
    return size_t{0};
  };
  SUBCASE("the seed read by another op, or kept observable, stays") {
    NetDef net = g.net;
    net.ops.push_back(Op("Scale", {net.ops[seed_index(net)].outputs[0]}, {"seen"}));
    CHECK(FuseSoftmaxLossGradient(net) == 0);
    NetDef kept = g.net;
    kept.external_outputs.push_back(kept.ops[seed_index(kept)].outputs[0]);
    CHECK(FuseSoftmaxLossGradient(kept) == 0);
  }
  SUBCASE("a seed of another form (not a plain value) stays") {
    NetDef net = g.net;
    net.ops[seed_index(net)].args.push_back(MakeArg("dtype", int64_t{1}));
    CHECK(FuseSoftmaxLossGradient(net) == 0);
  }
  SUBCASE("P written between the loss and its gradient blocks it") {
    NetDef net = g.net;
    net.ops.insert(net.ops.begin() + static_cast<std::ptrdiff_t>(seed_index(net)), Op("Scale", {"p"}, {"p"}));
    CHECK(FuseSoftmaxLossGradient(net) == 0);
  }
  SUBCASE("another scale on the gradient op blocks it") {
    NetDef net = g.net;
    for (auto& op : net.ops)
      if (op.type == "SoftmaxWithLossGradient") op.args.push_back(MakeArg("scale", 2.0));
    CHECK(FuseSoftmaxLossGradient(net) == 0);
  }
  SUBCASE("weights keep the ops apart; a fused op with weights is refused") {
    NetDef net = g.net;
    for (auto& op : net.ops)
      if (op.type == "SoftmaxWithLoss" || op.type == "SoftmaxWithLossGradient") op.inputs.push_back("x_w");
    CHECK(FuseSoftmaxLossGradient(net) == 0);
    Feeds w = feeds;
    w.push_back({"x_w", RandomF64({6}, 9)});
    testing::ExpectError(
        [&] {
          Run(MakeNet({Op("SoftmaxWithLoss", {"x", "label", "x_w"}, {"p", "loss", "dx"})}, w), w);
        },
        Code::kInvalidArgument, {"output 2 'dx'", "takes no weights"});
  }
}

TEST_CASE("FC + Relu fusion: same values and gradients, observable blobs kept") {
  for (bool inplace : {false, true}) {
    CAPTURE(inplace);
    Feeds feeds;
    NetDef fwd = Mlp(&feeds, inplace);
    NetDef fused = fwd;
    CHECK(FuseFcRelu(fused, {"loss", "acc"}) == 1);
    CHECK(fused.ops.size() == fwd.ops.size() - 1);
    CHECK(fused.ops[0].FindArg("activation") != nullptr);
    GradientOptions opt;
    opt.losses = {"loss"};
    opt.wrt = {"w1", "b1", "w2", "b2"};
    GradientResult a = AddGradients(fwd, opt), b = AddGradients(fused, opt);
    auto wa = Run(a.net, feeds), wb = Run(b.net, feeds);
    CHECK(Scalar(*wa, "loss") == doctest::Approx(Scalar(*wb, "loss")).epsilon(1e-12));
    for (const auto& [p, g] : a.grads) {
      const Tensor& ta = wa->GetTensor(g);
      const Tensor& tb = wb->GetTensor(g);
      REQUIRE(ta.numel() == tb.numel());
      for (int64_t i = 0; i < ta.numel(); ++i)
        CHECK(ta.data<double>()[i] == doctest::Approx(tb.data<double>()[i]).epsilon(1e-12));
    }
    CheckNetGradients(fused, b, feeds, {"loss"});
    // A kept pre-activation blob blocks the not-in-place fusion.
    NetDef kept = fwd;
    CHECK(FuseFcRelu(kept, {"h"}) == (inplace ? 1 : 0));
  }
  // A second reader of the FC output blocks it.
  Feeds feeds;
  NetDef fwd = Mlp(&feeds, false);
  NetDef on_gpu = fwd;
  fwd.ops.push_back(Op("Scale", {"h"}, {"h2"}));
  CHECK(FuseFcRelu(fwd, {}) == 0);
  // On a GPU as on the CPU (the CUDA FC and FCGradient take the activation,
  // the CUBLASLT engine's FC too); not across devices, nor with another engine.
  on_gpu.device = DeviceOption{DeviceType::kCUDA, 0};
  NetDef split = on_gpu, lt = on_gpu, other = on_gpu;
  CHECK(FuseFcRelu(on_gpu, {}) == 1);
  for (auto& op : split.ops)
    if (op.type == "Relu") op.device = DeviceOption{};  // the CPU
  CHECK(FuseFcRelu(split, {}) == 0);
  for (auto& op : lt.ops)
    if (op.type == "FC") op.engine = "CUBLASLT";
  CHECK(FuseFcRelu(lt, {}) == 1);
  for (auto& op : other.ops)
    if (op.type == "FC") op.engine = "SOMETHING_ELSE";
  CHECK(FuseFcRelu(other, {}) == 0);
}
