#include "model/model_def.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "ops/net_validate.h"

namespace dp {
namespace {

std::set<std::string> Written(const NetDef& net) {
  std::set<std::string> out;
  for (const auto& op : net.ops) out.insert(op.outputs.begin(), op.outputs.end());
  return out;
}

std::set<std::string> Read(const NetDef& net) {
  std::set<std::string> out;
  for (const auto& op : net.ops) out.insert(op.inputs.begin(), op.inputs.end());
  return out;
}

void AddExternal(NetDef& net, const std::string& blob) {
  if (std::find(net.external_inputs.begin(), net.external_inputs.end(), blob) == net.external_inputs.end())
    net.external_inputs.push_back(blob);
}

}  // namespace

void ValidateOptimizer(const OptimizerDef& o) {
  static const std::set<std::string> kTypes{"sgd", "momentum", "adam", "adagrad"};
  static const std::set<std::string> kPolicies{"fixed", "step", "exp", "inv", "cosine"};
  DP_ENFORCE_CODE(kTypes.count(o.type), Code::kInvalidArgument, "optimizer: unknown type '", o.type,
                  "' (sgd, momentum, adam, adagrad)");
  DP_ENFORCE_CODE(kPolicies.count(o.lr_policy), Code::kInvalidArgument, "optimizer: unknown lr_policy '", o.lr_policy,
                  "' (fixed, step, exp, inv, cosine)");
  auto finite = [](double v) { return std::isfinite(v); };
  DP_ENFORCE_CODE(finite(o.lr) && o.lr > 0, Code::kInvalidArgument, "optimizer: lr must be > 0, got ", o.lr);
  DP_ENFORCE_CODE(finite(o.momentum) && o.momentum >= 0 && o.momentum < 1, Code::kInvalidArgument,
                  "optimizer: momentum must be in [0, 1), got ", o.momentum);
  DP_ENFORCE_CODE(finite(o.beta1) && o.beta1 >= 0 && o.beta1 < 1 && finite(o.beta2) && o.beta2 >= 0 && o.beta2 < 1,
                  Code::kInvalidArgument, "optimizer: beta1 and beta2 must be in [0, 1), got ", o.beta1, " and ",
                  o.beta2);
  DP_ENFORCE_CODE(finite(o.epsilon) && o.epsilon > 0, Code::kInvalidArgument, "optimizer: epsilon must be > 0, got ",
                  o.epsilon);
  DP_ENFORCE_CODE(finite(o.weight_decay) && o.weight_decay >= 0, Code::kInvalidArgument,
                  "optimizer: weight_decay must be >= 0, got ", o.weight_decay);
  DP_ENFORCE_CODE(o.stepsize > 0 && o.max_iter > 0 && o.warmup_iters >= 0, Code::kInvalidArgument,
                  "optimizer: stepsize and max_iter must be > 0 and warmup_iters >= 0");
  DP_ENFORCE_CODE(finite(o.gamma) && finite(o.power) && finite(o.warmup_start_factor) && o.warmup_start_factor >= 0,
                  Code::kInvalidArgument, "optimizer: gamma, power and warmup_start_factor must be finite "
                  "(warmup_start_factor >= 0)");
}

void CompleteAndValidateModel(ModelDef& m) {
  const std::string where = m.name.empty() ? std::string("model") : StrCat("model '", m.name, "'");
  // One list per blob.
  std::set<std::string> seen;
  auto check_list = [&](const std::vector<std::string>& list, const char* what) {
    for (const auto& b : list) {
      DP_ENFORCE_CODE(!b.empty(), Code::kInvalidNet, where, ": empty blob name in ", what);
      DP_ENFORCE_CODE(seen.insert(b).second, Code::kInvalidNet, where, ": blob '", b, "' appears twice in the ",
                      "model's lists (last in ", what, ")");
    }
  };
  check_list(m.params, "params");
  check_list(m.computed_params, "computed_params");
  check_list(m.inputs, "inputs");
  check_list(m.losses, "losses");
  check_list(m.metrics, "metrics");

  for (const auto& b : m.params) AddExternal(m.forward_net, b);
  for (const auto& b : m.computed_params) AddExternal(m.forward_net, b);
  for (const auto& b : m.inputs) AddExternal(m.forward_net, b);
  try {
    ValidateNet(m.init_net);
  } catch (Error& e) {
    throw e.Prepend(StrCat(where, ": init_net"));
  }
  try {
    ValidateNet(m.forward_net);
  } catch (Error& e) {
    throw e.Prepend(StrCat(where, ": forward_net"));
  }

  const auto init_w = Written(m.init_net), fwd_w = Written(m.forward_net), fwd_r = Read(m.forward_net);
  for (const auto* list : {&m.params, &m.computed_params}) {
    const char* what = list == &m.params ? "param" : "computed param";
    for (const auto& b : *list) {
      DP_ENFORCE_CODE(init_w.count(b), Code::kInvalidNet, where, ": ", what, " '", b, "' is not created by the init net");
      DP_ENFORCE_CODE(fwd_r.count(b), Code::kInvalidNet, where, ": ", what, " '", b,
                      "' is not read by the forward net");
    }
  }
  for (const auto& b : m.params)
    DP_ENFORCE_CODE(!fwd_w.count(b), Code::kInvalidNet, where, ": param '", b,
                    "' is written by the forward net (only the optimizer updates params)");
  for (const auto& b : m.inputs) {
    DP_ENFORCE_CODE(fwd_r.count(b), Code::kInvalidNet, where, ": input '", b, "' is not read by the forward net");
    DP_ENFORCE_CODE(!init_w.count(b), Code::kInvalidNet, where, ": input '", b,
                    "' is created by the init net (inputs are fed per batch)");
  }
  for (const auto* list : {&m.losses, &m.metrics})
    for (const auto& b : *list)
      DP_ENFORCE_CODE(fwd_w.count(b), Code::kInvalidNet, where, ": ", list == &m.losses ? "loss" : "metric", " '", b,
                      "' is not written by the forward net");
  if (m.optimizer) {
    try {
      ValidateOptimizer(*m.optimizer);
    } catch (Error& e) {
      throw e.Prepend(where);
    }
  }
}

}  // namespace dp
