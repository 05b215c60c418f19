#include "ops/net_validate.h"

#include <set>
#include <unordered_map>
#include <unordered_set>

namespace dp {
namespace {

std::string NetLabel(const NetDef& net) { return net.name.empty() ? "net" : StrCat("net '", net.name, "'"); }

void ValidateNested(const OperatorDef& op, const std::string& label) {
  for (const auto& a : op.args) {
    try {
      if (auto* n = std::get_if<std::shared_ptr<const NetDef>>(&a.value)) ValidateNet(**n);
      if (auto* v = std::get_if<std::vector<std::shared_ptr<const NetDef>>>(&a.value))
        for (const auto& n : *v) ValidateNet(*n);
    } catch (Error& e) {
      throw e.Prepend(StrCat(label, " argument '", a.name, "'"));
    }
  }
}

}  // namespace

void ValidateNet(const NetDef& net) {
  const std::string net_label = NetLabel(net);
  // The first op that writes each blob, to explain reads that come too early.
  std::unordered_map<std::string, size_t> first_writer;
  for (size_t i = 0; i < net.ops.size(); ++i)
    for (const auto& out : net.ops[i].outputs) first_writer.emplace(out, i);

  std::unordered_set<std::string> available(net.external_inputs.begin(), net.external_inputs.end());
  for (size_t i = 0; i < net.ops.size(); ++i) {
    const OperatorDef& op = net.ops[i];
    const std::string label = StrCat(net_label, " ", OpLabel(op, i));
    if (op.type.empty()) DP_THROW(Code::kInvalidNet, label, ": empty operator type");
    const OpSchema* schema = OpSchemaRegistry::Find(op.type);
    if (schema == nullptr) DP_THROW(Code::kInvalidNet, label, ": ", OpSchemaRegistry::UnknownTypeMessage(op.type));
    schema->Verify(op, label);
    ValidateNested(op, label);
    auto check_read = [&](const std::string& blob, const std::string& what) {
      if (available.count(blob) != 0) return;
      auto w = first_writer.find(blob);
      if (w != first_writer.end() && w->second >= i) {
        const OperatorDef& later = net.ops[w->second];
        DP_THROW(Code::kInvalidNet, label, ": ", what, " '", blob, "' is written only by ",
                 w->second == i ? "this op itself" : OpLabel(later, w->second),
                 ", which runs later: the net has a dependency cycle (ops run in list order)");
      }
      DP_THROW(Code::kInvalidNet, label, ": ", what, " '", blob,
               "' is neither an external input of the net nor written by any op");
    };
    for (size_t k = 0; k < op.inputs.size(); ++k) check_read(op.inputs[k], schema->InputName(k));
    for (const auto& c : op.control_inputs) check_read(c, "control input");
    for (const auto& out : op.outputs) available.insert(out);
  }
  for (const auto& out : net.external_outputs)
    if (available.count(out) == 0)
      DP_THROW(Code::kInvalidNet, net_label, ": external output '", out, "' is never written nor fed");
}

std::map<std::string, TensorInfo> InferNetShapes(const NetDef& net, std::map<std::string, TensorInfo> known) {
  const std::string net_label = NetLabel(net);
  for (size_t i = 0; i < net.ops.size(); ++i) {
    const OperatorDef& op = net.ops[i];
    const std::string label = StrCat(net_label, " ", OpLabel(op, i));
    const OpSchema* schema = OpSchemaRegistry::Find(op.type);
    if (schema == nullptr) DP_THROW(Code::kInvalidNet, label, ": ", OpSchemaRegistry::UnknownTypeMessage(op.type));
    std::vector<TensorInfo> in;
    for (const auto& name : op.inputs) {
      auto it = known.find(name);
      in.push_back(it == known.end() ? TensorInfo{} : it->second);
    }
    auto out = schema->InferShapes(op, label, in);
    for (size_t k = 0; k < op.outputs.size(); ++k) known[op.outputs[k]] = out[k];
  }
  return known;
}

}  // namespace dp
