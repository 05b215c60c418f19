#include "ops/update_fusion.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_schema.h"
#include "ops/optimizer_op_utils.h"

namespace dp {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

// What makes two updates fusable besides their group: type, device, lr,
// iter and the arguments (sorted by name, values as JSON).
std::string FusionKey(const NetDef& net, const OperatorDef& op, const UpdateLayout& layout, size_t group) {
  const DeviceOption d = net.OpDevice(op);
  std::string key = StrCat(group, "|", op.type, "|", DeviceName(d), "|", op.inputs[static_cast<size_t>(layout.lr())]);
  if (layout.has_iter) key += "|" + op.inputs[static_cast<size_t>(layout.iter())];
  std::vector<std::pair<std::string, std::string>> args;
  for (const auto& a : op.args) args.emplace_back(a.name, ArgValueJson(a.value));
  std::sort(args.begin(), args.end());
  for (const auto& [name, value] : args) key += "|" + name + "=" + value;
  return key;
}

// Whether `other` (an op between an update and where the fused op goes)
// keeps the update from moving past it: it reads or writes what the update
// writes, or writes what the update reads.
bool Conflicts(const OperatorDef& update, const OperatorDef& other) {
  for (const auto& out : update.outputs)
    if (Contains(other.inputs, out) || Contains(other.outputs, out) || Contains(other.control_inputs, out))
      return true;
  for (const auto& in : update.inputs)
    if (Contains(other.outputs, in)) return true;
  return false;
}

// The multi-tensor op of `members` (ops of one type, in net order).
OperatorDef FusedUpdate(const std::vector<const OperatorDef*>& members, const UpdateLayout& layout) {
  const OperatorDef& last = *members.back();
  OperatorDef fused;
  fused.type = MultiTensorUpdateType(last.type);
  fused.args = last.args;
  fused.device = last.device;
  fused.engine = last.engine;
  auto input = [&](const OperatorDef& op, int j) { return op.inputs[static_cast<size_t>(j)]; };
  for (const auto* op : members) fused.inputs.push_back(input(*op, 0));
  for (int k = 0; k < layout.num_states; ++k)
    for (const auto* op : members) fused.inputs.push_back(input(*op, 2 + k));
  for (const auto* op : members) fused.inputs.push_back(input(*op, 1));
  fused.inputs.push_back(input(last, layout.lr()));
  if (layout.has_iter) fused.inputs.push_back(input(last, layout.iter()));
  fused.outputs.assign(fused.inputs.begin(), fused.inputs.begin() + (1 + layout.num_states) *
                                                                        static_cast<std::ptrdiff_t>(members.size()));
  return fused;
}

}  // namespace

int FuseOptimizerUpdates(NetDef& net, const std::vector<std::vector<std::string>>& groups,
                         const UpdateFusionOptions& options) {
  std::map<std::string, size_t> group_of;
  for (size_t g = 0; g < groups.size(); ++g)
    for (const auto& param : groups[g]) group_of.emplace(param, g);

  // The candidates of each key, as op indices in net order.
  std::map<std::string, std::vector<size_t>> candidates;
  std::vector<std::string> keys;  // first-seen order, so the result does not depend on map order
  for (size_t j = 0; j < net.ops.size(); ++j) {
    const OperatorDef& op = net.ops[j];
    const UpdateLayout* layout = FindUpdateLayout(op.type);
    if (layout == nullptr || static_cast<int>(op.inputs.size()) != layout->num_inputs() ||
        static_cast<int>(op.outputs.size()) != 1 + layout->num_states || !op.control_inputs.empty())
      continue;
    const DeviceType device = net.OpDevice(op).type;
    if (device != DeviceType::kCUDA && !(device == DeviceType::kCPU && options.cpu)) continue;
    const auto g = group_of.find(op.inputs[0]);
    if (g == group_of.end()) continue;
    const std::string key = FusionKey(net, op, *layout, g->second);
    auto [it, fresh] = candidates.emplace(key, std::vector<size_t>{});
    if (fresh) keys.push_back(key);
    it->second.push_back(j);
  }

  // Each key's fusable members: the last candidate, and each earlier one
  // that nothing between it and the last keeps from moving there.
  std::vector<bool> removed(net.ops.size(), false);
  std::map<size_t, std::vector<OperatorDef>> fused_at;  // the last member's index -> the fused ops
  for (const auto& key : keys) {
    const std::vector<size_t>& c = candidates[key];
    if (c.size() < 2) continue;
    const size_t last = c.back();
    std::vector<size_t> members;
    for (size_t m : c) {
      bool movable = true;
      for (size_t k = m + 1; k <= last && movable && m != last; ++k)
        movable = !Conflicts(net.ops[m], net.ops[k]);
      if (movable) members.push_back(m);
    }
    if (members.size() < 2) continue;
    // At most kMaxMultiTensors params an op (the schema's bound): the first
    // ops of a large group take the place of the last update too, in order.
    const UpdateLayout& layout = *FindUpdateLayout(net.ops[last].type);
    for (size_t begin = 0; begin < members.size(); begin += kMaxMultiTensors) {
      const size_t end = std::min(members.size(), begin + static_cast<size_t>(kMaxMultiTensors));
      std::vector<const OperatorDef*> ops;
      for (size_t k = begin; k < end; ++k) ops.push_back(&net.ops[members[k]]);
      fused_at[last].push_back(FusedUpdate(ops, layout));
    }
    for (size_t m : members) removed[m] = true;
  }

  std::vector<OperatorDef> out;
  out.reserve(net.ops.size());
  int made = 0;
  for (size_t j = 0; j < net.ops.size(); ++j) {
    const auto f = fused_at.find(j);
    if (f != fused_at.end()) {
      for (auto& op : f->second) out.push_back(std::move(op));
      made += static_cast<int>(f->second.size());
    } else if (!removed[j]) {
      out.push_back(std::move(net.ops[j]));
    }
  }
  net.ops = std::move(out);
  return made;
}

}  // namespace dp
