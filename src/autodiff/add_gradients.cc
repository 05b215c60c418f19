#include "autodiff/add_gradients.h"

#include <algorithm>
#include <map>
#include <set>

#include "ops/gradient_registry.h"
#include "ops/net_validate.h"

namespace dp {
namespace {

// A blob at one version: version 0 is what the net starts with, each write
// makes the next one.
using Versioned = std::pair<std::string, int>;

struct ForwardInfo {
  std::vector<std::vector<int>> in_ver, out_ver;  // per op, per input / output
  std::map<std::string, int> final_ver;
  std::set<Versioned> dep;                        // depends on a wrt blob
  std::map<Versioned, size_t> writer;             // which op made each version (> 0)
};

ForwardInfo AnalyseForward(const NetDef& net, const std::set<std::string>& wrt, const std::set<std::string>& stop) {
  ForwardInfo f;
  for (const auto& b : wrt)
    if (!stop.count(b)) f.dep.insert({b, 0});
  std::map<std::string, int>& ver = f.final_ver;
  for (size_t j = 0; j < net.ops.size(); ++j) {
    const OperatorDef& op = net.ops[j];
    std::vector<int> iv, ov;
    bool any_dep = false;
    for (const auto& in : op.inputs) {
      iv.push_back(ver[in]);
      any_dep = any_dep || f.dep.count({in, iv.back()}) > 0;
    }
    if (GradientRegistry::Kind(op.type) == GradientKind::kStop) any_dep = false;
    for (const auto& out : op.outputs) {
      ov.push_back(++ver[out]);
      f.writer[{out, ov.back()}] = j;
      if (any_dep && !stop.count(out)) f.dep.insert({out, ov.back()});
    }
    f.in_ver.push_back(std::move(iv));
    f.out_ver.push_back(std::move(ov));
  }
  return f;
}

std::string AutosplitName(const std::string& blob, int k, int total) {
  return total == 1 ? GradientName(blob) : StrCat(GradientName(blob), "_autosplit_", k);
}

}  // namespace

GradientResult AddGradients(const NetDef& forward, const GradientOptions& options) {
  ValidateNet(forward);
  const std::string where = StrCat("gradients of net '", forward.name, "'");
  DP_ENFORCE_CODE(!options.losses.empty(), Code::kInvalidArgument, where, ": no loss blobs given");
  DP_ENFORCE_CODE(options.loss_scale == options.loss_scale, Code::kInvalidArgument, where, ": loss_scale is NaN");

  std::set<std::string> externals(forward.external_inputs.begin(), forward.external_inputs.end());
  std::vector<std::string> wrt_list = options.wrt.empty() ? forward.external_inputs : options.wrt;
  std::set<std::string> wrt;
  for (const auto& w : wrt_list) {
    DP_ENFORCE_CODE(externals.count(w), Code::kInvalidNet, where, ": wrt blob '", w,
                    "' is not an external input of the net");
    DP_ENFORCE_CODE(wrt.insert(w).second, Code::kInvalidArgument, where, ": wrt blob '", w, "' is listed twice");
  }
  std::set<std::string> stop(options.stop.begin(), options.stop.end());

  ForwardInfo f = AnalyseForward(forward, wrt, stop);
  const size_t nops = forward.ops.size();

  // Which ops need a gradient, and the contributions each (blob, version)
  // will receive: one per (active op, input slot that depends on wrt), plus
  // one for a loss seed.
  std::set<Versioned> flowing;
  std::map<Versioned, int> total;
  std::set<std::string> loss_set;
  for (const auto& loss : options.losses) {
    DP_ENFORCE_CODE(loss_set.insert(loss).second, Code::kInvalidArgument, where, ": loss '", loss, "' is listed twice");
    auto it = f.final_ver.find(loss);
    DP_ENFORCE_CODE(it != f.final_ver.end() && it->second > 0, Code::kInvalidNet, where, ": loss '", loss,
                    "' is not written by any op of the net");
    Versioned v{loss, it->second};
    DP_ENFORCE_CODE(f.dep.count(v), Code::kInvalidNet, where, ": loss '", loss,
                    "' does not depend on any blob to differentiate (wrt), or only through StopGradient");
    flowing.insert(v);
    total[v] += 1;
  }
  std::vector<bool> active(nops, false);
  for (size_t j = nops; j-- > 0;) {
    const OperatorDef& op = forward.ops[j];
    bool out_flows = false;
    for (size_t o = 0; o < op.outputs.size(); ++o) out_flows = out_flows || flowing.count({op.outputs[o], f.out_ver[j][o]});
    bool in_dep = false;
    for (size_t i = 0; i < op.inputs.size(); ++i) in_dep = in_dep || f.dep.count({op.inputs[i], f.in_ver[j][i]});
    if (!out_flows || !in_dep) continue;
    GradientKind kind = GradientRegistry::Kind(op.type);
    if (kind == GradientKind::kNone)
      DP_THROW(Code::kInvalidNet, where, ": the losses depend on the wrt blobs through ", OpLabel(op, j),
               ", which is not differentiable (stop the gradient before it, or leave it out of the loss)");
    if (kind == GradientKind::kUnknown)
      DP_THROW(Code::kInvalidNet, where, ": ", OpLabel(op, j), ": no gradient is registered for op type '", op.type,
               "'");
    active[j] = true;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      Versioned v{op.inputs[i], f.in_ver[j][i]};
      if (!f.dep.count(v)) continue;
      flowing.insert(v);
      total[v] += 1;
    }
  }

  GradientResult result;
  result.net = forward;
  result.net.name = forward.name.empty() ? std::string() : forward.name + "_with_gradients";
  std::vector<OperatorDef>& ops = result.net.ops;
  result.first_gradient_op = ops.size();

  std::map<Versioned, int> next;  // contributions handed out so far
  std::map<Versioned, std::vector<std::string>> parts;
  auto take = [&](const Versioned& v) {
    int k = next[v]++;
    std::string name = AutosplitName(v.first, k, total.at(v));
    parts[v].push_back(name);
    return name;
  };
  std::map<std::string, size_t> ready;  // wrt blob -> op index after which its gradient is final
  auto finish = [&](const Versioned& v, const std::optional<DeviceOption>& device) {
    if (next[v] != total.at(v)) return;
    if (total.at(v) > 1) {
      OperatorDef sum;
      sum.type = "Sum";
      sum.inputs = parts[v];
      sum.outputs = {GradientName(v.first)};
      sum.device = device;
      ops.push_back(std::move(sum));
    }
    if (v.second == 0 && wrt.count(v.first)) ready[v.first] = ops.size() - 1;
  };

  // Seeds: d loss / d loss = loss_scale, with the loss's shape and dtype.
  for (const auto& loss : options.losses) {
    Versioned v{loss, f.final_ver.at(loss)};
    const OperatorDef& producer = forward.ops[f.writer.at(v)];
    OperatorDef seed;
    seed.type = "ConstantFill";
    seed.name = loss + "_grad_seed";
    seed.inputs = {loss};
    seed.outputs = {take(v)};
    seed.args = {MakeArg("value", options.loss_scale)};
    seed.device = producer.device;
    ops.push_back(std::move(seed));
    if (!options.loss_weight.empty()) {
      const std::string g = ops.back().outputs[0];
      OperatorDef weigh = MakeOperatorDef("Mul", {g, options.loss_weight}, {g});
      weigh.name = loss + "_grad_seed_weight";
      weigh.device = producer.device;
      ops.push_back(std::move(weigh));
    }
    finish(v, producer.device);
  }

  for (size_t j = nops; j-- > 0;) {
    if (!active[j]) continue;
    const OperatorDef& op = forward.ops[j];
    const std::string label = OpLabel(op, j);
    GradientRequest req{op, label, std::vector<std::string>(op.outputs.size()),
                        std::vector<std::string>(op.inputs.size())};
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      Versioned v{op.outputs[o], f.out_ver[j][o]};
      if (!flowing.count(v)) continue;
      DP_ENFORCE_CODE(next[v] == total.at(v), Code::kInternal, where, ": gradient of '", v.first,
                      "' is incomplete at ", label);
      req.output_grads[o] = GradientName(v.first);
    }
    std::vector<Versioned> wanted;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      Versioned v{op.inputs[i], f.in_ver[j][i]};
      if (!f.dep.count(v)) continue;
      req.input_grads[i] = take(v);
      wanted.push_back(v);
    }
    auto maker = GradientRegistry::Create(req);
    std::vector<OperatorDef> gops = maker->Get();
    for (size_t i = 0; i < op.inputs.size(); ++i)
      if (!req.input_grads[i].empty() && !maker->produced()[i])
        DP_THROW(Code::kInvalidNet, where, ": ", label, " has no gradient with respect to input ", i, " '",
                 op.inputs[i], "', which depends on the wrt blobs");
    for (const ForwardRead& r : maker->reads()) {
      const std::string& blob = r.is_output ? op.outputs[r.index] : op.inputs[r.index];
      int v = r.is_output ? f.out_ver[j][r.index] : f.in_ver[j][r.index];
      if (v != f.final_ver.at(blob)) {
        size_t later = f.writer.at({blob, v + 1});
        DP_THROW(Code::kInvalidNet, where, ": the gradient of ", label, " needs blob '", blob, "' as ",
                 r.is_output ? "its output" : "its input", ", but ", OpLabel(forward.ops[later], later),
                 " overwrites it afterwards (write to a new blob instead of in place)");
      }
    }
    for (auto& g : gops) {
      if (!g.device) g.device = op.device;
      ops.push_back(std::move(g));
    }
    for (const auto& v : wanted) finish(v, op.device);
  }

  // Gradient blobs must not clobber forward blobs.
  std::set<std::string> forward_blobs(forward.external_inputs.begin(), forward.external_inputs.end());
  for (const auto& op : forward.ops) forward_blobs.insert(op.outputs.begin(), op.outputs.end());
  for (size_t j = result.first_gradient_op; j < ops.size(); ++j)
    for (const auto& out : ops[j].outputs)
      DP_ENFORCE_CODE(!forward_blobs.count(out), Code::kInvalidNet, where, ": gradient blob '", out,
                      "' (written by ", OpLabel(ops[j], j), ") is also a blob of the forward net; rename it");

  for (const auto& w : wrt_list) {
    auto it = ready.find(w);
    if (it == ready.end()) {
      if (options.wrt.empty()) continue;  // "all inputs": those the losses do not depend on are skipped
      DP_THROW(Code::kInvalidNet, where, ": the losses do not depend on wrt blob '", w, "'",
               stop.count(w) ? " (it is in the stop list)" : "");
    }
    result.grads.emplace_back(w, GradientName(w));
    result.ready_after.push_back(it->second);
  }
  for (const auto& g : result.grads) result.net.external_outputs.push_back(g.second);
  if (!options.loss_weight.empty() && !forward_blobs.count(options.loss_weight))
    result.net.external_inputs.push_back(options.loss_weight);
  ValidateNet(result.net);
  return result;
}

}  // namespace dp
