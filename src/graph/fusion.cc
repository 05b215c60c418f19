#include "graph/fusion.h"

#include <algorithm>
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
    if (dev.type != DeviceType::kCPU || !fc.engine.empty()) continue;
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
  std::vector<OperatorDef> kept;
  for (size_t i = 0; i < net.ops.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(net.ops[i]));
  net.ops = std::move(kept);
  return fused;
}

}  // namespace dp
