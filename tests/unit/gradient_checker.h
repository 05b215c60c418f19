// Finite-difference gradient checks for one operator, in float64.
//
// The loss is L = sum_k <R_k, O_k> over the checked outputs O_k with fixed
// random weights R_k. The analytic gradient comes from the op's registered
// gradient maker (R_k fed as the output gradients); the numeric one from
// central differences (L(x + eps) - L(x - eps)) / 2 eps, element by element.
// Both must agree to atol + rtol * |numeric|.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/gradient_registry.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"

namespace dp::testing {

struct GradCheckOptions {
  std::vector<int> inputs;   // inputs to check; empty: every float64 input
  std::vector<int> outputs;  // outputs in the loss; empty: every float64 output
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-5;
  int max_elements = 96;     // per input; larger tensors are sampled evenly
  uint32_t seed = 1234;
  // Re-create the forward net for every evaluation (ops with per-run state,
  // e.g. a random mask that advances, must see the same state each time).
  bool fresh_net_per_eval = false;
};

using GradFeeds = std::vector<std::pair<std::string, Tensor>>;

namespace detail {

inline Tensor DeepCopy(const Tensor& t) {
  Tensor c;
  c.CopyFrom(t);
  return c;
}

// Runs `def` in a fresh workspace fed with copies of `feeds`; returns the workspace.
inline std::shared_ptr<Workspace> RunIn(const NetDef& def, const GradFeeds& feeds) {
  auto ws = std::make_shared<Workspace>();
  for (const auto& [name, t] : feeds) ws->Feed(name, DeepCopy(t));
  Net net(std::make_shared<const NetDef>(def), ws);
  net.Run();
  return ws;
}

inline double Dot(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == DType::kFloat64);
  REQUIRE(b.dtype() == DType::kFloat64);
  REQUIRE(a.numel() == b.numel());
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.data<double>()[i] * b.data<double>()[i];
  return s;
}

}  // namespace detail

// Checks every wanted input gradient of `op` at the point given by `feeds`
// (every input must be fed). Returns the number of elements compared.
inline int64_t CheckGradient(const OperatorDef& op, const GradFeeds& feeds, GradCheckOptions opt = {}) {
  CAPTURE(op.type);
  auto feed_of = [&](const std::string& name) -> const Tensor& {
    for (const auto& [n, t] : feeds)
      if (n == name) return t;
    FAIL("input '", name, "' is not fed");
    static Tensor none;
    return none;
  };
  NetDef fwd;
  fwd.ops = {op};
  for (const auto& [n, t] : feeds) fwd.external_inputs.push_back(n);

  // Forward once to learn the outputs' shapes.
  auto ws0 = detail::RunIn(fwd, feeds);
  if (opt.outputs.empty())
    for (size_t k = 0; k < op.outputs.size(); ++k)
      if (ws0->GetTensor(op.outputs[k]).dtype() == DType::kFloat64) opt.outputs.push_back(static_cast<int>(k));
  if (opt.inputs.empty())
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (feed_of(op.inputs[i]).dtype() == DType::kFloat64) opt.inputs.push_back(static_cast<int>(i));
  REQUIRE(!opt.outputs.empty());
  REQUIRE(!opt.inputs.empty());

  std::mt19937 gen(opt.seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<Tensor> weights(op.outputs.size());
  GradFeeds gfeeds = feeds;
  GradientRequest req{op, OpLabel(op, 0), std::vector<std::string>(op.outputs.size()),
                      std::vector<std::string>(op.inputs.size())};
  for (int k : opt.outputs) {
    const Tensor& out = ws0->GetTensor(op.outputs[k]);
    Tensor w(out.dims(), DType::kFloat64);
    for (int64_t j = 0; j < w.numel(); ++j) w.mutable_data<double>()[j] = dist(gen);
    weights[k] = w;
    req.output_grads[k] = op.outputs[k] + "__gradcheck_go";
    gfeeds.emplace_back(req.output_grads[k], w);
  }
  for (int i : opt.inputs) req.input_grads[i] = op.inputs[i] + "__gradcheck_gi" + std::to_string(i);

  // Analytic: forward, then the maker's gradient ops.
  auto maker = GradientRegistry::Create(req);
  NetDef both = fwd;
  for (const auto& [n, t] : gfeeds)
    if (std::find(both.external_inputs.begin(), both.external_inputs.end(), n) == both.external_inputs.end())
      both.external_inputs.push_back(n);
  for (auto& g : maker->Get()) both.ops.push_back(std::move(g));
  for (int i : opt.inputs) REQUIRE_MESSAGE(maker->produced()[i], "maker did not produce input ", i, "'s gradient");
  auto wsg = detail::RunIn(both, gfeeds);

  // Numeric: central differences of the weighted loss.
  std::unique_ptr<Net> net;
  std::shared_ptr<Workspace> ws;
  auto loss_at = [&](const GradFeeds& f) {
    if (!net || opt.fresh_net_per_eval) {
      ws = std::make_shared<Workspace>();
      net = std::make_unique<Net>(std::make_shared<const NetDef>(fwd), ws);
    }
    for (const auto& [name, t] : f) ws->Feed(name, detail::DeepCopy(t));
    net->Run();
    double l = 0;
    for (int k : opt.outputs) l += detail::Dot(ws->GetTensor(op.outputs[k]), weights[k]);
    return l;
  };

  int64_t compared = 0;
  for (int i : opt.inputs) {
    CAPTURE(i);
    const std::string& name = op.inputs[i];
    const Tensor& x = feed_of(name);
    REQUIRE(x.dtype() == DType::kFloat64);
    const Tensor& ga = wsg->GetTensor(req.input_grads[i]);
    REQUIRE_MESSAGE(ga.dims() == x.dims(), "gradient of input ", i, " has dims ", DimsString(ga.dims()),
                    ", the input ", DimsString(x.dims()));
    REQUIRE(ga.dtype() == DType::kFloat64);
    const int64_t n = x.numel();
    const int64_t step = std::max<int64_t>(1, n / opt.max_elements);
    for (int64_t j = 0; j < n; j += step) {
      GradFeeds f = feeds;
      for (auto& [fn, ft] : f)
        if (fn == name) ft = detail::DeepCopy(ft);
      Tensor* xt = nullptr;
      for (auto& [fn, ft] : f)
        if (fn == name) xt = &ft;
      double orig = xt->data<double>()[j];
      xt->mutable_data<double>()[j] = orig + opt.eps;
      double lp = loss_at(f);
      xt->mutable_data<double>()[j] = orig - opt.eps;
      double lm = loss_at(f);
      double numeric = (lp - lm) / (2 * opt.eps);
      double analytic = ga.data<double>()[j];
      CAPTURE(j);
      CHECK_MESSAGE(std::abs(numeric - analytic) <= opt.atol + opt.rtol * std::abs(numeric), op.type, " input ", i,
                    " ('", name, "') element ", j, ": numeric ", numeric, ", analytic ", analytic);
      ++compared;
    }
  }
  return compared;
}

}  // namespace dp::testing
