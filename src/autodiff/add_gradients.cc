#include "autodiff/add_gradients.h"

#include <algorithm>
#include <map>
#include <set>

#include "ops/gradient_registry.h"
#include "ops/net_validate.h"

// AddGradients runs these steps, in order:
//   1. CheckedWrt:        the blobs to differentiate, checked against the net;
//   2. AnalyseForward:    every blob's versions, and which depend on wrt;
//   3. FindGradientPath:  the ops on a path from wrt to the losses, and how
//                         many gradient contributions each blob version gets;
//   4. SeedLossGradients: d loss / d loss = loss_scale (times loss_weight);
//   5. AddOpGradients:    each op's gradient maker, last op first; a blob's
//                         contributions are summed into its gradient as soon
//                         as the last one exists (Contributions);
//   6. CheckNoClobber and CollectGradients: the result.
// The stop list is applied in step 2 (a stopped blob never depends on wrt).

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

// Step 1: the wrt blobs in order (options.wrt, or every external input), each
// an external input of the net, none twice.
std::vector<std::string> CheckedWrt(const NetDef& forward, const GradientOptions& options, const std::string& where) {
  std::set<std::string> externals(forward.external_inputs.begin(), forward.external_inputs.end());
  std::vector<std::string> wrt_list = options.wrt.empty() ? forward.external_inputs : options.wrt;
  std::set<std::string> seen;
  for (const auto& w : wrt_list) {
    DP_ENFORCE_CODE(externals.count(w), Code::kInvalidNet, where, ": wrt blob '", w,
                    "' is not an external input of the net");
    DP_ENFORCE_CODE(seen.insert(w).second, Code::kInvalidArgument, where, ": wrt blob '", w, "' is listed twice");
  }
  return wrt_list;
}

// Step 2: versions of every op's inputs and outputs, and the versions that
// depend on a wrt blob (not through a stopped blob or a kStop op).
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

// Which ops need a gradient, and the contributions each (blob, version) will
// receive: one per (active op, input slot that depends on wrt), plus one for
// a loss seed.
struct GradientPath {
  std::set<Versioned> flowing;     // versions a gradient flows into
  std::map<Versioned, int> total;  // contributions per flowing version
  std::vector<bool> active;        // per forward op: on a path from wrt to a loss
};

// Step 3: the losses (checked: distinct, written by an op, dependent on wrt),
// then the ops from the last to the first.
GradientPath FindGradientPath(const NetDef& forward, const ForwardInfo& f, const std::vector<std::string>& losses,
                              const std::string& where) {
  GradientPath path;
  std::set<std::string> loss_set;
  for (const auto& loss : losses) {
    DP_ENFORCE_CODE(loss_set.insert(loss).second, Code::kInvalidArgument, where, ": loss '", loss, "' is listed twice");
    auto it = f.final_ver.find(loss);
    DP_ENFORCE_CODE(it != f.final_ver.end() && it->second > 0, Code::kInvalidNet, where, ": loss '", loss,
                    "' is not written by any op of the net");
    Versioned v{loss, it->second};
    DP_ENFORCE_CODE(f.dep.count(v), Code::kInvalidNet, where, ": loss '", loss,
                    "' does not depend on any blob to differentiate (wrt), or only through StopGradient");
    path.flowing.insert(v);
    path.total[v] += 1;
  }
  const size_t nops = forward.ops.size();
  path.active.assign(nops, false);
  for (size_t j = nops; j-- > 0;) {
    const OperatorDef& op = forward.ops[j];
    bool out_flows = false;
    for (size_t o = 0; o < op.outputs.size(); ++o)
      out_flows = out_flows || path.flowing.count({op.outputs[o], f.out_ver[j][o]});
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
    path.active[j] = true;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      Versioned v{op.inputs[i], f.in_ver[j][i]};
      if (!f.dep.count(v)) continue;
      path.flowing.insert(v);
      path.total[v] += 1;
    }
  }
  return path;
}

std::string AutosplitName(const std::string& blob, int k, int total) {
  return total == 1 ? GradientName(blob) : StrCat(GradientName(blob), "_autosplit_", k);
}

// The gradient contributions of every blob version: hands out their names
// (GradientName(blob) for a single one, "X_grad_autosplit_k" for several) and,
// once the last one is written, sums several into GradientName(blob). Records
// after which op each wrt blob's gradient is final.
class Contributions {
 public:
  Contributions(const std::map<Versioned, int>& total, const std::set<std::string>& wrt, std::vector<OperatorDef>& ops)
      : total_(total), wrt_(wrt), ops_(ops) {}

  // The blob that the next contribution to `v` is written to.
  std::string Take(const Versioned& v) {
    int k = next_[v]++;
    std::string name = AutosplitName(v.first, k, total_.at(v));
    parts_[v].push_back(name);
    return name;
  }

  // Whether every contribution to `v` has been handed out.
  bool Complete(const Versioned& v) { return next_[v] == total_.at(v); }

  // After the op writing a contribution to `v`: the Sum (on `device`) once
  // all of them exist.
  void Finish(const Versioned& v, const std::optional<DeviceOption>& device) {
    if (!Complete(v)) return;
    if (total_.at(v) > 1) {
      OperatorDef sum;
      sum.type = "Sum";
      sum.inputs = parts_[v];
      sum.outputs = {GradientName(v.first)};
      sum.device = device;
      ops_.push_back(std::move(sum));
    }
    if (v.second == 0 && wrt_.count(v.first)) ready_[v.first] = ops_.size() - 1;
  }

  // wrt blob -> index of the op after which its gradient is final.
  const std::map<std::string, size_t>& ready() const { return ready_; }

 private:
  const std::map<Versioned, int>& total_;
  const std::set<std::string>& wrt_;
  std::vector<OperatorDef>& ops_;
  std::map<Versioned, int> next_;  // contributions handed out so far
  std::map<Versioned, std::vector<std::string>> parts_;
  std::map<std::string, size_t> ready_;
};

// Step 4: d loss / d loss = loss_scale, with the loss's shape and dtype,
// multiplied by options.loss_weight when set; on the loss producer's device.
void SeedLossGradients(const NetDef& forward, const ForwardInfo& f, const GradientOptions& options,
                       Contributions& contributions, std::vector<OperatorDef>& ops) {
  for (const auto& loss : options.losses) {
    Versioned v{loss, f.final_ver.at(loss)};
    const OperatorDef& producer = forward.ops[f.writer.at(v)];
    OperatorDef seed;
    seed.type = "ConstantFill";
    seed.name = loss + "_grad_seed";
    seed.inputs = {loss};
    seed.outputs = {contributions.Take(v)};
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
    contributions.Finish(v, producer.device);
  }
}

// The gradient maker must not read a forward value that a later op overwrote.
void CheckForwardReads(const NetDef& forward, const ForwardInfo& f, size_t j, const GradientMaker& maker,
                       const std::string& label, const std::string& where) {
  const OperatorDef& op = forward.ops[j];
  for (const ForwardRead& r : maker.reads()) {
    const std::string& blob = r.is_output ? op.outputs[r.index] : op.inputs[r.index];
    int v = r.is_output ? f.out_ver[j][r.index] : f.in_ver[j][r.index];
    if (v != f.final_ver.at(blob)) {
      size_t later = f.writer.at({blob, v + 1});
      DP_THROW(Code::kInvalidNet, where, ": the gradient of ", label, " needs blob '", blob, "' as ",
               r.is_output ? "its output" : "its input", ", but ", OpLabel(forward.ops[later], later),
               " overwrites it afterwards (write to a new blob instead of in place)");
    }
  }
}

// Step 5 for forward op j (active): its gradient ops, from its outputs'
// complete gradients to contributions for its inputs that depend on wrt.
void AddOpGradients(const NetDef& forward, const ForwardInfo& f, const GradientPath& path, size_t j,
                    Contributions& contributions, std::vector<OperatorDef>& ops, const std::string& where) {
  const OperatorDef& op = forward.ops[j];
  const std::string label = OpLabel(op, j);
  GradientRequest req{op, label, std::vector<std::string>(op.outputs.size()),
                      std::vector<std::string>(op.inputs.size())};
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    Versioned v{op.outputs[o], f.out_ver[j][o]};
    if (!path.flowing.count(v)) continue;
    DP_ENFORCE_CODE(contributions.Complete(v), Code::kInternal, where, ": gradient of '", v.first,
                    "' is incomplete at ", label);
    req.output_grads[o] = GradientName(v.first);
  }
  std::vector<Versioned> wanted;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    Versioned v{op.inputs[i], f.in_ver[j][i]};
    if (!f.dep.count(v)) continue;
    req.input_grads[i] = contributions.Take(v);
    wanted.push_back(v);
  }
  auto maker = GradientRegistry::Create(req);
  std::vector<OperatorDef> gops = maker->Get();
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (!req.input_grads[i].empty() && !maker->produced()[i])
      DP_THROW(Code::kInvalidNet, where, ": ", label, " has no gradient with respect to input ", i, " '",
               op.inputs[i], "', which depends on the wrt blobs");
  CheckForwardReads(forward, f, j, *maker, label, where);
  for (auto& g : gops) {
    if (!g.device) g.device = op.device;
    ops.push_back(std::move(g));
  }
  for (const auto& v : wanted) contributions.Finish(v, op.device);
}

// Step 6: gradient blobs (ops from `first` on) must not clobber forward blobs.
void CheckNoClobber(const std::set<std::string>& forward_blobs, const std::vector<OperatorDef>& ops, size_t first,
                    const std::string& where) {
  for (size_t j = first; j < ops.size(); ++j)
    for (const auto& out : ops[j].outputs)
      DP_ENFORCE_CODE(!forward_blobs.count(out), Code::kInvalidNet, where, ": gradient blob '", out,
                      "' (written by ", OpLabel(ops[j], j), ") is also a blob of the forward net; rename it");
}

// Step 6: (wrt blob, gradient) pairs in wrt order, with the op after which
// each is final. With options.wrt empty ("all inputs") blobs the losses do
// not depend on are skipped; named ones are an error.
void CollectGradients(const std::vector<std::string>& wrt_list, const std::map<std::string, size_t>& ready,
                      const GradientOptions& options, const std::set<std::string>& stop, GradientResult& result,
                      const std::string& where) {
  for (const auto& w : wrt_list) {
    auto it = ready.find(w);
    if (it == ready.end()) {
      if (options.wrt.empty()) continue;
      DP_THROW(Code::kInvalidNet, where, ": the losses do not depend on wrt blob '", w, "'",
               stop.count(w) ? " (it is in the stop list)" : "");
    }
    result.grads.emplace_back(w, GradientName(w));
    result.ready_after.push_back(it->second);
  }
}

}  // namespace

GradientResult AddGradients(const NetDef& forward, const GradientOptions& options) {
  ValidateNet(forward);
  const std::string where = StrCat("gradients of net '", forward.name, "'");
  DP_ENFORCE_CODE(!options.losses.empty(), Code::kInvalidArgument, where, ": no loss blobs given");
  DP_ENFORCE_CODE(options.loss_scale == options.loss_scale, Code::kInvalidArgument, where, ": loss_scale is NaN");

  const std::vector<std::string> wrt_list = CheckedWrt(forward, options, where);
  const std::set<std::string> wrt(wrt_list.begin(), wrt_list.end());
  const std::set<std::string> stop(options.stop.begin(), options.stop.end());
  const ForwardInfo f = AnalyseForward(forward, wrt, stop);
  const GradientPath path = FindGradientPath(forward, f, options.losses, where);

  GradientResult result;
  result.net = forward;
  result.net.name = forward.name.empty() ? std::string() : forward.name + "_with_gradients";
  std::vector<OperatorDef>& ops = result.net.ops;
  result.first_gradient_op = ops.size();

  Contributions contributions(path.total, wrt, ops);
  SeedLossGradients(forward, f, options, contributions, ops);
  for (size_t j = forward.ops.size(); j-- > 0;)
    if (path.active[j]) AddOpGradients(forward, f, path, j, contributions, ops, where);

  std::set<std::string> forward_blobs(forward.external_inputs.begin(), forward.external_inputs.end());
  for (const auto& op : forward.ops) forward_blobs.insert(op.outputs.begin(), op.outputs.end());
  CheckNoClobber(forward_blobs, ops, result.first_gradient_op, where);

  CollectGradients(wrt_list, contributions.ready(), options, stop, result, where);
  for (const auto& g : result.grads) result.net.external_outputs.push_back(g.second);
  if (!options.loss_weight.empty() && !forward_blobs.count(options.loss_weight))
    result.net.external_inputs.push_back(options.loss_weight);
  ValidateNet(result.net);
  return result;
}

}  // namespace dp
