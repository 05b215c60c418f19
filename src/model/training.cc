#include "model/training.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/dtype.h"
#include "ops/gradient_registry.h"
#include "graph/fusion.h"
#include "ops/net_validate.h"

namespace dp {

void AddExternalInput(NetDef& net, const std::string& blob) {
  if (std::find(net.external_inputs.begin(), net.external_inputs.end(), blob) == net.external_inputs.end())
    net.external_inputs.push_back(blob);
}

std::vector<std::string> OptimizerStateBlobs(const OptimizerDef& opt, const std::string& param) {
  if (opt.type == "momentum") return {param + "/momentum"};
  if (opt.type == "adam") return {param + "/adam_m", param + "/adam_v"};
  if (opt.type == "adagrad") return {param + "/adagrad_h"};
  return {};
}

std::vector<OperatorDef> IterationCounterInitOps(DeviceOption where) {
  OperatorDef iter = MakeOperatorDef(
      "ConstantFill", {}, {kIterBlob},
      {MakeArg("shape", std::vector<int64_t>{1}), MakeArg("dtype", static_cast<int64_t>(DType::kInt64)),
       MakeArg("value", int64_t{0})});
  iter.device = DeviceOption{};  // filled on the CPU (CUDA fills are float32)
  if (where.type == DeviceType::kCPU) return {std::move(iter)};
  OperatorDef move = MakeOperatorDef("Copy", {kIterBlob}, {kIterBlob});
  move.device = where;
  return {std::move(iter), std::move(move)};
}

std::vector<OperatorDef> OptimizerStateInitOps(const OptimizerDef& opt, const std::vector<std::string>& params) {
  std::vector<OperatorDef> ops;
  for (const auto& p : params)
    for (const auto& s : OptimizerStateBlobs(opt, p))
      ops.push_back(MakeOperatorDef("ConstantFill", {p}, {s}, {MakeArg("value", 0.0)}));
  return ops;
}

std::vector<std::string> TrainingStateBlobs(const ModelDef& model) {
  std::vector<std::string> blobs = model.params;
  blobs.insert(blobs.end(), model.computed_params.begin(), model.computed_params.end());
  if (model.optimizer) {
    for (const auto& p : model.params)
      for (auto& s : OptimizerStateBlobs(*model.optimizer, p)) blobs.push_back(std::move(s));
    blobs.push_back(kIterBlob);
  }
  return blobs;
}

void AddOptimizerInit(NetDef& init, const OptimizerDef& opt, const std::vector<std::string>& params) {
  for (auto& op : IterationCounterInitOps()) init.ops.push_back(std::move(op));
  for (auto& op : OptimizerStateInitOps(opt, params)) init.ops.push_back(std::move(op));
}

std::vector<OperatorDef> IterAndLearningRateOps(const OptimizerDef& opt, DeviceOption where) {
  OperatorDef iter = MakeOperatorDef("Iter", {kIterBlob}, {kIterBlob});
  OperatorDef lr = MakeOperatorDef(
      "LearningRate", {kIterBlob}, {kLrBlob},
      {MakeArg("base_lr", opt.lr), MakeArg("policy", opt.lr_policy), MakeArg("gamma", opt.gamma),
       MakeArg("stepsize", opt.stepsize), MakeArg("power", opt.power), MakeArg("max_iter", opt.max_iter),
       MakeArg("warmup_iters", opt.warmup_iters), MakeArg("warmup_start_factor", opt.warmup_start_factor)});
  iter.device = where;  // placed, even on a GPU: HostOpUnlessPlaced keeps them there
  lr.device = where;
  return {std::move(iter), std::move(lr)};
}

std::vector<std::string> LossScalingStateBlobs() { return {kLossScaleBlob, kLossScaleStepsBlob}; }

void CheckLossScaling(const LossScaling& ls, const std::string& what) {
  if (!ls.dynamic) return;
  DP_ENFORCE_CODE(ls.initial > 0 && std::isfinite(ls.initial) && ls.initial <= 3.4e38, Code::kInvalidArgument,
                  what, ": the initial loss scale must be a positive float, got ", ls.initial);
  DP_ENFORCE_CODE(ls.growth_interval > 0 && ls.growth_interval <= (int64_t{1} << 24), Code::kInvalidArgument, what,
                  ": the loss scale's growth interval must be in 1..2^24 steps, got ", ls.growth_interval);
}

std::vector<OperatorDef> LossScalingInitOps(const LossScaling& ls, DeviceOption where) {
  std::vector<OperatorDef> ops;
  const std::pair<const char*, double> blobs[] = {
      {kLossScaleBlob, ls.initial}, {kLossScaleStepsBlob, 0.0}, {kFoundInfBlob, 0.0}};
  for (const auto& [blob, value] : blobs) {
    OperatorDef fill = MakeOperatorDef("ConstantFill", {}, {blob},
                                       {MakeArg("shape", std::vector<int64_t>{}), MakeArg("value", value)});
    fill.device = where;
    ops.push_back(std::move(fill));
  }
  return ops;
}

void ScaleLossSeeds(NetDef& net, const std::vector<std::string>& losses, const std::string& scale) {
  for (const auto& loss : losses) {
    auto seed = std::find_if(net.ops.begin(), net.ops.end(), [&](const OperatorDef& op) {
      return op.type == "ConstantFill" && op.name == loss + "_grad_seed" && op.outputs.size() == 1;
    });
    DP_ENFORCE_CODE(seed != net.ops.end(), Code::kInvalidNet, "loss scaling: no gradient seed of loss '", loss, "'");
    const std::string g = seed->outputs[0];
    OperatorDef scaled = MakeOperatorDef("Mul", {g, scale}, {g});
    scaled.name = loss + "_grad_seed_scaled";
    scaled.device = seed->device;
    net.ops.insert(seed + 1, std::move(scaled));
  }
}

std::vector<OperatorDef> UnscaleOps(const std::vector<std::string>& grads, const std::string& lr, DeviceOption where) {
  std::vector<std::string> ins{kLossScaleBlob, kFoundInfBlob};
  std::vector<std::string> outs{kFoundInfBlob};
  for (const auto& g : grads) {
    ins.push_back(g);
    outs.push_back(g);
  }
  OperatorDef unscale = MakeOperatorDef("UnscaleGradients", ins, outs);
  OperatorDef gate = MakeOperatorDef("GateLearningRate", {lr, kFoundInfBlob}, {kLrStepBlob});
  unscale.device = gate.device = where;
  return {std::move(unscale), std::move(gate)};
}

OperatorDef LossScaleUpdateOp(const LossScaling& ls, DeviceOption where) {
  OperatorDef op = MakeOperatorDef("UpdateLossScale", {kLossScaleBlob, kLossScaleStepsBlob, kFoundInfBlob},
                                   {kLossScaleBlob, kLossScaleStepsBlob},
                                   {MakeArg("growth_interval", ls.growth_interval)});
  op.device = where;
  return op;
}

OperatorDef OptimizerUpdateOp(const OptimizerDef& opt, const std::string& param, const std::string& grad,
                              const std::string& lr_blob, const std::string& iter_blob) {
  auto state = OptimizerStateBlobs(opt, param);
  Argument wd = MakeArg("weight_decay", opt.weight_decay);
  if (opt.type == "sgd") return MakeOperatorDef("SGD", {param, grad, lr_blob}, {param}, {wd});
  if (opt.type == "momentum")
    return MakeOperatorDef("MomentumSGD", {param, grad, state[0], lr_blob}, {param, state[0]},
                           {MakeArg("momentum", opt.momentum), MakeArg("nesterov", int64_t{opt.nesterov ? 1 : 0}), wd});
  if (opt.type == "adam")
    return MakeOperatorDef(
        "Adam", {param, grad, state[0], state[1], lr_blob, iter_blob}, {param, state[0], state[1]},
        {MakeArg("beta1", opt.beta1), MakeArg("beta2", opt.beta2), MakeArg("epsilon", opt.epsilon), wd});
  if (opt.type == "adagrad")
    return MakeOperatorDef("Adagrad", {param, grad, state[0], lr_blob}, {param, state[0]},
                           {MakeArg("epsilon", opt.epsilon), wd});
  DP_THROW(Code::kInvalidArgument, "optimizer: unknown type '", opt.type, "'");
}

NetDef InferenceNet(const NetDef& forward) {
  NetDef eval = forward;
  if (!eval.name.empty()) eval.name += "_eval";
  for (auto& op : eval.ops) {
    if (op.type != "SpatialBN" && op.type != "Dropout") continue;
    op.args.erase(std::remove_if(op.args.begin(), op.args.end(), [](const Argument& a) { return a.name == "is_test"; }),
                  op.args.end());
    op.args.push_back(MakeArg("is_test", int64_t{1}));
    // In inference mode these ops write only Y (and Dropout needs no counter).
    op.outputs.resize(1);
    if (op.type == "Dropout") op.inputs.resize(1);
  }
  ValidateNet(eval);
  return eval;
}

NetDef TrainingForwardNet(const ModelDef& model, bool fuse) {
  NetDef fwd = model.forward_net;
  // Dropout in training draws its masks from the iteration counter, so that
  // the counter (which checkpoints hold) is its whole random state.
  bool counted = false;
  for (auto& op : fwd.ops)
    if (op.type == "Dropout" && op.inputs.size() == 1 && ArgReader(op, op.type).Int("is_test", 0) == 0) {
      op.inputs.push_back(kIterBlob);
      counted = true;
    }
  if (counted) AddExternalInput(fwd, kIterBlob);
  if (!fuse) {
    if (counted) ValidateNet(fwd);
    return fwd;
  }
  std::set<std::string> keep;
  for (const auto* list : {&model.params, &model.computed_params, &model.inputs, &model.losses, &model.metrics})
    keep.insert(list->begin(), list->end());
  keep.insert(fwd.external_outputs.begin(), fwd.external_outputs.end());
  FuseFcRelu(fwd, keep);
  ValidateNet(fwd);
  return fwd;
}

const OptimizerDef& CheckTrainable(const ModelDef& model) {
  const std::string where = model.name.empty() ? std::string("model") : StrCat("model '", model.name, "'");
  DP_ENFORCE_CODE(model.optimizer.has_value(), Code::kInvalidArgument, where, ": has no optimizer to train with");
  DP_ENFORCE_CODE(!model.losses.empty(), Code::kInvalidArgument, where, ": has no losses to train on");
  DP_ENFORCE_CODE(!model.params.empty(), Code::kInvalidArgument, where, ": has no params to train");
  ValidateOptimizer(*model.optimizer);
  return *model.optimizer;
}

TrainingNets BuildTraining(const ModelDef& model, const TrainingOptions& options) {
  const OptimizerDef& opt = CheckTrainable(model);

  TrainingNets out;
  out.init = model.init_net;
  if (out.init.name.empty()) out.init.name = model.name + "_init";
  AddOptimizerInit(out.init, opt, model.params);
  const LossScaling& ls = options.loss_scaling;
  CheckLossScaling(ls, "TrainingOptions::loss_scaling");
  if (ls.dynamic)
    for (auto& op : LossScalingInitOps(ls, DeviceOption{})) {
      op.device.reset();  // beside the params: the init net's device
      out.init.ops.push_back(std::move(op));
    }
  ValidateNet(out.init);

  GradientOptions gopt;
  gopt.losses = model.losses;
  gopt.wrt = model.params;
  gopt.loss_scale = options.loss_scale;
  const NetDef forward = TrainingForwardNet(model, options.fuse);
  GradientResult g = AddGradients(forward, gopt);
  out.grads = g.grads;
  if (ls.dynamic) ScaleLossSeeds(g.net, model.losses);

  // Place each update after the last op that reads the param or writes its
  // gradient, so the sequential order is already correct.
  std::vector<std::vector<OperatorDef>> after(g.net.ops.size());
  for (size_t k = 0; k < g.grads.size(); ++k) {
    const auto& [param, grad] = g.grads[k];
    size_t last = g.ready_after[k];
    for (size_t j = 0; j < g.net.ops.size(); ++j) {
      const auto& op = g.net.ops[j];
      bool touches = std::find(op.inputs.begin(), op.inputs.end(), param) != op.inputs.end() ||
                     std::find(op.outputs.begin(), op.outputs.end(), grad) != op.outputs.end();
      if (touches) last = std::max(last, j);
    }
    OperatorDef update = OptimizerUpdateOp(opt, param, grad, ls.dynamic ? kLrStepBlob : kLrBlob);
    update.device = g.net.ops[last].device;
    // Loss scaling: every update waits for the unscaling of every gradient.
    after[ls.dynamic ? g.net.ops.size() - 1 : last].push_back(std::move(update));
  }
  if (ls.dynamic) {
    std::vector<std::string> grads;
    for (const auto& [param, grad] : g.grads) grads.push_back(grad);
    std::vector<OperatorDef> unscale = UnscaleOps(grads, kLrBlob, DeviceOption{});
    for (auto& op : unscale) op.device.reset();  // the net's device, as the gradients
    auto& tail = after[g.net.ops.size() - 1];
    tail.insert(tail.begin(), unscale.begin(), unscale.end());
    OperatorDef update_scale = LossScaleUpdateOp(ls, DeviceOption{});
    update_scale.device.reset();
    tail.push_back(std::move(update_scale));
  }

  NetDef& train = out.train;
  train = forward;
  train.name = model.name.empty() ? std::string("train") : model.name + "_train";
  train.ops = IterAndLearningRateOps(opt);
  for (size_t j = 0; j < g.net.ops.size(); ++j) {
    train.ops.push_back(g.net.ops[j]);
    for (auto& u : after[j]) train.ops.push_back(std::move(u));
  }
  AddExternalInput(train, kIterBlob);
  if (ls.dynamic)
    for (const char* b : {kLossScaleBlob, kLossScaleStepsBlob, kFoundInfBlob}) AddExternalInput(train, b);
  for (const auto& p : model.params)
    for (const auto& s : OptimizerStateBlobs(opt, p)) AddExternalInput(train, s);
  train.external_outputs = model.losses;
  train.external_outputs.insert(train.external_outputs.end(), model.metrics.begin(), model.metrics.end());
  train.external_outputs.push_back(kLrBlob);  // the step's rate stays readable (a memory plan keeps it)
  train.memory = options.memory;
  if (options.fuse) {
    FuseSoftmaxLossGradient(train);
    FuseOptimizerUpdates(train, {model.params}, options.update_fusion);
  }
  ValidateNet(train);

  out.eval = InferenceNet(forward);
  return out;
}

}  // namespace dp
