#include "model/inference.h"

#include <algorithm>
#include <set>

#include "graph/fusion.h"
#include "model/training.h"
#include "ops/net_validate.h"
#include "ops/op_schema.h"

namespace dp {
namespace {

std::string ModelLabel(const ModelDef& model) {
  return model.name.empty() ? std::string("model") : StrCat("model '", model.name, "'");
}

bool Contains(const std::vector<std::string>& list, const std::string& x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

// The forward net in inference mode, fused as the training nets fuse it
// (so that its values are the eval net's), with `outputs` kept observable.
NetDef InferenceModeForward(const ModelDef& model, const std::vector<std::string>& outputs, bool fuse) {
  NetDef fwd = model.forward_net;
  if (fuse) {
    std::set<std::string> keep(outputs.begin(), outputs.end());
    keep.insert(fwd.external_outputs.begin(), fwd.external_outputs.end());
    for (const auto* list : {&model.params, &model.computed_params, &model.inputs, &model.losses, &model.metrics})
      keep.insert(list->begin(), list->end());
    FuseFcRelu(fwd, keep);
  }
  return InferenceNet(fwd);
}

// Every blob the net's ops write, in the order first written.
std::vector<std::string> WrittenBlobs(const NetDef& net) {
  std::vector<std::string> written;
  for (const auto& op : net.ops)
    for (const auto& y : op.outputs)
      if (!Contains(written, y)) written.push_back(y);
  return written;
}

std::vector<std::string> DefaultOutputs(const ModelDef& model, const NetDef& fwd) {
  const std::vector<std::string> written = WrittenBlobs(fwd);
  auto is_head = [&](const OperatorDef& op) {
    return std::any_of(op.outputs.begin(), op.outputs.end(),
                       [&](const std::string& y) { return Contains(model.losses, y) || Contains(model.metrics, y); });
  };
  std::vector<std::string> outputs;
  auto add = [&](const std::string& x) {
    if (Contains(written, x) && !Contains(model.losses, x) && !Contains(model.metrics, x) &&
        !Contains(model.inputs, x) && !Contains(model.params, x) && !Contains(model.computed_params, x) &&
        !Contains(outputs, x))
      outputs.push_back(x);
  };
  for (const auto& op : fwd.ops) {
    if (!is_head(op)) continue;
    for (const auto& x : op.inputs) add(x);
    for (const auto& y : op.outputs) add(y);
  }
  if (outputs.empty())  // no losses or metrics: the outputs the forward net names (an imported graph's)
    for (const auto& y : fwd.external_outputs) add(y);
  if (outputs.empty()) {  // nor those: the net's ends
    std::set<std::string> read;
    for (const auto& op : fwd.ops) {
      read.insert(op.inputs.begin(), op.inputs.end());
      read.insert(op.control_inputs.begin(), op.control_inputs.end());
    }
    for (const auto& y : written)
      if (!read.count(y)) add(y);
  }
  // In the order the net first writes them.
  std::stable_sort(outputs.begin(), outputs.end(), [&](const std::string& a, const std::string& b) {
    return std::find(written.begin(), written.end(), a) < std::find(written.begin(), written.end(), b);
  });
  return outputs;
}

void CheckOutputs(const ModelDef& model, const std::vector<std::string>& outputs, const NetDef& fwd) {
  const std::string where = ModelLabel(model);
  const std::vector<std::string> written = WrittenBlobs(fwd);
  std::set<std::string> seen;
  for (const auto& y : outputs) {
    DP_ENFORCE_CODE(!y.empty(), Code::kInvalidArgument, where, ": an inference output name is empty");
    DP_ENFORCE_CODE(seen.insert(y).second, Code::kInvalidArgument, where, ": inference output '", y,
                    "' is named twice");
    if (Contains(written, y)) continue;
    if (Contains(model.inputs, y) || Contains(model.params, y) || Contains(model.computed_params, y))
      DP_THROW(Code::kNotFound, where, ": inference output '", y, "' is ",
               Contains(model.inputs, y)   ? "an input"
               : Contains(model.params, y) ? "a param"
                                           : "a computed param",
               " of the model, which its forward net reads but does not write");
    if (Contains(WrittenBlobs(model.forward_net), y))
      DP_THROW(Code::kNotFound, where, ": inference output '", y,
               "' is written by the forward net in training mode only (batch statistics, running averages)");
    const std::string* close = ClosestName(y, written);
    DP_THROW(Code::kNotFound, where, ": the forward net writes no blob '", y, "'",
             close != nullptr ? StrCat(" (did you mean '", *close, "'?)") : std::string());
  }
}

// The ops that `outputs` need, in order; a SoftmaxWithLoss whose loss is not
// needed becomes a Softmax, which computes the same softmax without labels.
std::vector<OperatorDef> NeededOps(const NetDef& fwd, const std::vector<std::string>& outputs) {
  std::set<std::string> needed(outputs.begin(), outputs.end());
  std::vector<OperatorDef> kept;
  for (size_t i = fwd.ops.size(); i-- > 0;) {
    OperatorDef op = fwd.ops[i];
    if (std::none_of(op.outputs.begin(), op.outputs.end(), [&](const std::string& y) { return needed.count(y); }))
      continue;
    if (op.type == "SoftmaxWithLoss" && op.outputs.size() == 2 && !needed.count(op.outputs[1])) {
      op.type = "Softmax";
      op.inputs.resize(1);
      op.outputs.resize(1);
      op.args.clear();
      op.engine.clear();
    }
    for (const auto& y : op.outputs) needed.erase(y);
    needed.insert(op.inputs.begin(), op.inputs.end());
    needed.insert(op.control_inputs.begin(), op.control_inputs.end());
    kept.push_back(std::move(op));
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

}  // namespace

std::vector<std::string> DefaultInferenceOutputs(const ModelDef& model, const InferenceOptions& options) {
  return DefaultOutputs(model, InferenceModeForward(model, {}, options.fuse));
}

NetDef BuildInference(const ModelDef& model, const std::vector<std::string>& requested,
                      const InferenceOptions& options) {
  std::vector<std::string> outputs = requested;
  NetDef fwd = InferenceModeForward(model, outputs, options.fuse);
  if (outputs.empty()) {
    outputs = DefaultOutputs(model, fwd);
    DP_ENFORCE_CODE(!outputs.empty(), Code::kInvalidArgument, ModelLabel(model),
                    ": found no default inference outputs (see DefaultInferenceOutputs): name them");
  }
  CheckOutputs(model, outputs, fwd);

  NetDef net;
  net.name = (model.name.empty() ? std::string("model") : model.name) + "_inference";
  net.executor = fwd.executor;
  net.num_workers = fwd.num_workers;
  net.device = fwd.device;
  net.ops = NeededOps(fwd, outputs);
  // External inputs: what the ops read before any of them writes it, in the
  // forward net's order (params, computed params, inputs as the model lists them).
  std::set<std::string> written, read_first;
  for (const auto& op : net.ops) {
    for (const auto* list : {&op.inputs, &op.control_inputs})
      for (const auto& x : *list)
        if (!written.count(x)) read_first.insert(x);
    written.insert(op.outputs.begin(), op.outputs.end());
  }
  for (const auto& x : fwd.external_inputs)
    if (read_first.erase(x)) net.external_inputs.push_back(x);
  net.external_inputs.insert(net.external_inputs.end(), read_first.begin(), read_first.end());
  net.external_outputs = outputs;
  ValidateNet(net);
  return net;
}

}  // namespace dp
