#include "graph/fusion.h"

#include <algorithm>
#include <optional>
#include <variant>
#include <vector>

namespace dp {
namespace {

bool Reads(const OperatorDef& op, const std::string& blob) {
  return std::find(op.inputs.begin(), op.inputs.end(), blob) != op.inputs.end() ||
         std::find(op.control_inputs.begin(), op.control_inputs.end(), blob) != op.control_inputs.end();
}
bool Writes(const OperatorDef& op, const std::string& blob) {
  return std::find(op.outputs.begin(), op.outputs.end(), blob) != op.outputs.end();
}

// Removes the ops marked in `drop` (net.ops' size), keeping the others' order.
void EraseDropped(NetDef& net, const std::vector<bool>& drop) {
  std::vector<OperatorDef> kept;
  for (size_t i = 0; i < net.ops.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(net.ops[i]));
  net.ops = std::move(kept);
}

bool HasActivation(const OperatorDef& op) {
  const Argument* a = op.FindArg("activation");
  if (a == nullptr) return false;
  const auto* s = std::get_if<std::string>(&a->value);
  return s == nullptr || *s != "none";
}

}  // namespace

int FuseFcRelu(NetDef& net, const std::set<std::string>& keep) {
  int fused = 0;
  std::vector<bool> drop(net.ops.size(), false);
  for (size_t i = 0; i < net.ops.size(); ++i) {
    OperatorDef& fc = net.ops[i];
    if (drop[i] || fc.type != "FC" || fc.outputs.size() != 1 || HasActivation(fc)) continue;
    const DeviceOption dev = net.OpDevice(fc);
    // An engine's kernel may not take the activation; CUBLASLT's does (in its epilogue).
    if (!fc.engine.empty() && fc.engine != "CUBLASLT") continue;
    const std::string y = fc.outputs[0];
    if (Reads(fc, y)) continue;  // FC in place of its input: leave it
    // The readers of this version of y: ops after i up to (and including) the next writer.
    std::vector<size_t> readers;
    size_t next_writer = net.ops.size();
    for (size_t j = i + 1; j < net.ops.size(); ++j) {
      if (drop[j]) continue;
      if (Reads(net.ops[j], y)) readers.push_back(j);
      if (Writes(net.ops[j], y)) {
        next_writer = j;
        break;
      }
    }
    if (readers.size() != 1) continue;
    const size_t r = readers[0];
    OperatorDef& relu = net.ops[r];
    if (relu.type != "Relu" || relu.inputs.size() != 1 || relu.outputs.size() != 1 || !(net.OpDevice(relu) == dev) ||
        !relu.control_inputs.empty())
      continue;
    const bool in_place = relu.outputs[0] == y;
    if (!in_place) {
      // y disappears: nobody may observe it, and nothing may write z in between.
      if (keep.count(y) || next_writer != net.ops.size()) continue;
      bool z_touched = false;
      for (size_t j = i + 1; j < r; ++j) z_touched = z_touched || Reads(net.ops[j], relu.outputs[0]) ||
                                                      Writes(net.ops[j], relu.outputs[0]);
      if (z_touched) continue;
      if (std::find(net.external_outputs.begin(), net.external_outputs.end(), y) != net.external_outputs.end())
        continue;
      fc.outputs[0] = relu.outputs[0];
    }
    fc.args.erase(std::remove_if(fc.args.begin(), fc.args.end(), [](const Argument& a) { return a.name == "activation"; }),
                  fc.args.end());
    fc.args.push_back(Argument{"activation", Argument::Value{std::string("relu")}});
    drop[r] = true;
    ++fused;
  }
  EraseDropped(net, drop);
  return fused;
}

namespace {

// The number argument `name` of `op` (nullopt when absent or not a number).
std::optional<double> NumberArg(const OperatorDef& op, const std::string& name) {
  const Argument* a = op.FindArg(name);
  if (a == nullptr) return std::nullopt;
  if (const auto* d = std::get_if<double>(&a->value)) return *d;
  if (const auto* i = std::get_if<int64_t>(&a->value)) return static_cast<double>(*i);
  return std::nullopt;
}

bool Observed(const NetDef& net, const std::string& blob) {
  return std::find(net.external_outputs.begin(), net.external_outputs.end(), blob) != net.external_outputs.end();
}

}  // namespace

int FuseSoftmaxLossGradient(NetDef& net) {
  int fused = 0;
  std::vector<bool> drop(net.ops.size(), false);
  for (size_t i = 0; i < net.ops.size(); ++i) {
    OperatorDef& loss_op = net.ops[i];
    if (drop[i] || loss_op.type != "SoftmaxWithLoss" || loss_op.inputs.size() != 2 || loss_op.outputs.size() != 2 ||
        !loss_op.engine.empty() || !loss_op.control_inputs.empty())
      continue;
    const DeviceOption dev = net.OpDevice(loss_op);
    // Copies: loss_op.outputs grows below.
    const std::string p = loss_op.outputs[0], label = loss_op.inputs[1], loss = loss_op.outputs[1];
    if (p == loss || Reads(loss_op, p) || Reads(loss_op, loss)) continue;
    const double scale = NumberArg(loss_op, "scale").value_or(1.0);
    // The seed: ConstantFill(loss) -> g, value only; then the gradient on
    // (P, label, g). Between them and up to the gradient nothing may write
    // P, the labels, the loss, g or dX, nor read dX (it appears earlier).
    size_t seed = net.ops.size(), grad = net.ops.size();
    for (size_t j = i + 1; j < net.ops.size() && grad == net.ops.size(); ++j) {
      if (drop[j]) continue;
      const OperatorDef& op = net.ops[j];
      if (seed == net.ops.size() && op.type == "ConstantFill" && op.inputs == std::vector<std::string>{loss} &&
          op.outputs.size() == 1 && op.args.size() == 1 && op.args[0].name == "value" && NumberArg(op, "value") &&
          op.control_inputs.empty() && net.OpDevice(op) == dev) {
        seed = j;
        continue;
      }
      if (seed != net.ops.size() && op.type == "SoftmaxWithLossGradient" && op.inputs.size() == 3 &&
          op.inputs[0] == p && op.inputs[1] == label && op.inputs[2] == net.ops[seed].outputs[0] &&
          op.outputs.size() == 1 && op.engine.empty() && op.control_inputs.empty() && net.OpDevice(op) == dev &&
          NumberArg(op, "scale").value_or(1.0) == scale) {
        grad = j;
        break;
      }
      if (Writes(op, p) || Writes(op, label) || Writes(op, loss)) break;
      if (seed != net.ops.size() && (Writes(op, net.ops[seed].outputs[0]) || Reads(op, net.ops[seed].outputs[0])))
        break;
    }
    if (grad == net.ops.size()) continue;
    const std::string g = net.ops[seed].outputs[0], dx = net.ops[grad].outputs[0];
    if (Observed(net, g) || dx == p || dx == loss || dx == label || dx == loss_op.inputs[0]) continue;
    bool clash = false;  // dX may not be touched before the gradient wrote it
    for (size_t j = i + 1; j < grad; ++j)
      clash = clash || (!drop[j] && (Reads(net.ops[j], dx) || Writes(net.ops[j], dx)));
    bool g_read_later = false;
    for (size_t j = grad + 1; j < net.ops.size(); ++j) g_read_later = g_read_later || Reads(net.ops[j], g);
    if (clash || g_read_later) continue;
    loss_op.outputs.push_back(dx);
    loss_op.args.push_back(Argument{"grad_seed", Argument::Value{*NumberArg(net.ops[seed], "value")}});
    drop[seed] = drop[grad] = true;
    ++fused;
  }
  EraseDropped(net, drop);
  return fused;
}

}  // namespace dp
