#include "parallel/parallelize.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "autodiff/add_gradients.h"
#include "autodiff/gradient_registry.h"
#include "graph/net_validate.h"
#include "model/training.h"

namespace dp {
namespace {

void CheckOptions(const ParallelizeOptions& o) {
  DP_ENFORCE_CODE(!o.device_ids.empty(), Code::kInvalidArgument, "parallelize: no devices (device_ids is empty)");
  std::set<int32_t> seen;
  for (int32_t id : o.device_ids) {
    DP_ENFORCE_CODE(id >= 0, Code::kInvalidArgument, "parallelize: device id ", id, " is negative");
    DP_ENFORCE_CODE(seen.insert(id).second, Code::kInvalidArgument, "parallelize: device ",
                    DeviceName({o.device_type, id}), " is listed twice");
  }
  DP_ENFORCE_CODE(o.device_type == DeviceType::kCPU, Code::kUnimplemented,
                  "parallelize: only CPU replicas are supported so far (got ", DeviceTypeName(o.device_type), ")");
  DP_ENFORCE_CODE(o.accumulate_steps >= 1, Code::kInvalidArgument,
                  "parallelize: accumulate_steps must be >= 1, got ", o.accumulate_steps);
  if (o.bmuf.enabled) {
    DP_ENFORCE_CODE(o.bmuf.block_lr > 0, Code::kInvalidArgument, "parallelize: BMUF block_lr must be > 0, got ",
                    o.bmuf.block_lr);
    DP_ENFORCE_CODE(o.bmuf.block_momentum < 1, Code::kInvalidArgument,
                    "parallelize: BMUF block_momentum must be < 1, got ", o.bmuf.block_momentum);
    DP_ENFORCE_CODE(o.bmuf.block_length >= 1, Code::kInvalidArgument,
                    "parallelize: BMUF block_length must be >= 1, got ", o.bmuf.block_length);
    DP_ENFORCE_CODE(o.accumulate_steps == 1, Code::kInvalidArgument,
                    "parallelize: BMUF and gradient accumulation cannot be combined (accumulate_steps ",
                    o.accumulate_steps, ")");
  }
  DP_ENFORCE_CODE(o.first_bucket_bytes > 0 && o.bucket_bytes > 0, Code::kInvalidArgument,
                  "parallelize: bucket sizes must be positive (first_bucket_bytes ", o.first_bucket_bytes,
                  ", bucket_bytes ", o.bucket_bytes, ")");
}

// `op` for replica `scope` on `device`: every blob and the op's name scoped.
OperatorDef ScopedOp(const OperatorDef& op, const std::string& scope, DeviceOption device) {
  OperatorDef r = op;
  for (auto& b : r.inputs) b = scope + b;
  for (auto& b : r.outputs) b = scope + b;
  for (auto& b : r.control_inputs) b = scope + b;
  if (!r.name.empty()) r.name = scope + r.name;
  r.device = device;
  return r;
}

// Bytes of each param as the init net makes it; -1 where shape inference
// cannot tell (such a gradient gets a bucket of its own).
std::map<std::string, int64_t> ParamBytes(const ModelDef& model) {
  std::map<std::string, int64_t> bytes;
  auto shapes = InferNetShapes(model.init_net, {});
  for (const auto& p : model.params) {
    auto it = shapes.find(p);
    bytes[p] = it != shapes.end() && it->second.known()
                   ? NumElements(it->second.dims) * static_cast<int64_t>(DTypeSize(it->second.dtype))
                   : -1;
  }
  return bytes;
}

// Params grouped into buckets in the order backward finishes their
// gradients: the first bucket up to first_bytes, the others up to
// bucket_bytes (a gradient larger than the cap has a bucket of its own).
std::vector<std::vector<std::string>> MakeBuckets(const GradientResult& g, const std::map<std::string, int64_t>& bytes,
                                                  const ParallelizeOptions& o) {
  std::vector<size_t> order(g.grads.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return g.ready_after[a] < g.ready_after[b]; });
  std::vector<std::vector<std::string>> buckets;
  int64_t filled = 0;
  for (size_t k : order) {
    const std::string& param = g.grads[k].first;
    const int64_t b = bytes.at(param);
    const int64_t cap = buckets.size() <= 1 ? o.first_bucket_bytes : o.bucket_bytes;
    const bool fits = !buckets.empty() && b >= 0 && filled >= 0 && filled + b <= cap;
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(param);
    filled = b < 0 ? -1 : filled + b;
  }
  return buckets;
}

}  // namespace

ParallelNets Parallelize(const ModelDef& model, const ParallelizeOptions& o) {
  const OptimizerDef& opt = CheckTrainable(model);
  CheckOptions(o);
  const size_t n = o.device_ids.size();
  const int k = o.accumulate_steps;
  const std::string name = model.name.empty() ? std::string("model") : model.name;

  ParallelNets out;
  std::vector<DeviceOption> devices;
  for (int32_t id : o.device_ids) {
    devices.push_back({o.device_type, id});
    out.scopes.push_back(DeviceScope(devices.back()));
  }

  // Forward and backward of one replica, loss gradients seeded with 1/N.
  const NetDef forward = TrainingForwardNet(model, o.fuse);
  GradientOptions gopt;
  gopt.losses = model.losses;
  gopt.wrt = model.params;
  // Summed over replicas by the allreduce, 1/N per replica gives the global
  // mean; BMUF replicas are separate local learners on their own mean loss.
  gopt.loss_scale = o.bmuf.enabled ? 1.0 : 1.0 / (static_cast<double>(n) * k);
  const GradientResult g = AddGradients(forward, gopt);
  std::map<std::string, std::string> grad_of(g.grads.begin(), g.grads.end());
  out.buckets = MakeBuckets(g, ParamBytes(model), o);

  // ---- init: replica 0 initialises, the others receive its values.
  NetDef& init = out.init;
  init.name = name + "_parallel_init";
  for (const auto& op : model.init_net.ops) init.ops.push_back(ScopedOp(op, out.scopes[0], devices[0]));
  for (const auto& b : model.init_net.external_inputs) AddExternalInput(init, out.scopes[0] + b);
  init.ops.push_back(MakeOperatorDef("CreateCpuCollectives", {}, {kCommBlob},
                                     {MakeArg("num_devices", static_cast<int64_t>(n))}));
  if (n > 1) {
    // The other replicas' blobs take shape (zeros like replica 0's), then
    // receive replica 0's values.
    for (size_t r = 1; r < n; ++r)
      for (const auto* list : {&model.params, &model.computed_params})
        for (const auto& b : *list) {
          OperatorDef fill = MakeOperatorDef("ConstantFill", {out.scopes[0] + b}, {out.scopes[r] + b});
          fill.device = devices[r];
          init.ops.push_back(std::move(fill));
        }
    // Device-major: all of replica 0's blobs, then replica 1's, ...
    std::vector<std::string> major;
    for (const auto& s : out.scopes)
      for (const auto* list : {&model.params, &model.computed_params})
        for (const auto& b : *list) major.push_back(s + b);
    std::vector<std::string> in{kCommBlob};
    in.insert(in.end(), major.begin(), major.end());
    init.ops.push_back(MakeOperatorDef("Broadcast", in, major,
                                       {MakeArg("num_devices", static_cast<int64_t>(n)), MakeArg("root", int64_t{0})}));
  }
  {
    NetDef state;  // optimizer state per replica, zeros shaped like its params
    std::vector<std::string> no_params;
    AddOptimizerInit(state, opt, no_params);  // the iteration counter
    init.ops.insert(init.ops.end(), state.ops.begin(), state.ops.end());
    for (size_t r = 0; r < n; ++r) {
      std::vector<std::string> scoped;
      for (const auto& p : model.params) scoped.push_back(out.scopes[r] + p);
      NetDef per;
      AddOptimizerInit(per, opt, scoped);
      for (size_t j = 1; j < per.ops.size(); ++j) {  // op 0 is another counter
        per.ops[j].device = devices[r];
        init.ops.push_back(per.ops[j]);
      }
    }
  }
  if (o.bmuf.enabled)
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : model.params) {
        const std::string w = out.scopes[r] + p;
        OperatorDef copy = MakeOperatorDef("Copy", {w}, {w + "/bmuf_global"});
        OperatorDef zero = MakeOperatorDef("ConstantFill", {w}, {w + "/bmuf_delta"}, {MakeArg("value", 0.0)});
        copy.device = zero.device = devices[r];
        init.ops.push_back(std::move(copy));
        init.ops.push_back(std::move(zero));
      }
  if (k > 1)
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : model.params) {
        OperatorDef zero = MakeOperatorDef("ConstantFill", {out.scopes[r] + p},
                                           {out.scopes[r] + grad_of.at(p) + "_acc"}, {MakeArg("value", 0.0)});
        zero.device = devices[r];
        init.ops.push_back(std::move(zero));
      }
  ValidateNet(init);

  // ---- train (and accumulate): the global batch split across replicas,
  // each replica's forward and backward, losses and metrics averaged.
  auto replica_steps = [&](NetDef& net, const std::string& suffix) {
    net.name = name + "_parallel_" + suffix;
    net.executor = ExecutorKind::kAsync;
    for (const auto& x : model.inputs) {
      std::vector<std::string> parts;
      for (const auto& s : out.scopes) parts.push_back(s + x);
      net.ops.push_back(MakeOperatorDef("SplitBatch", {x}, parts, {MakeArg("uneven", int64_t{o.uneven_split})}));
      AddExternalInput(net, x);
    }
    for (size_t r = 0; r < n; ++r) {
      for (const auto& op : g.net.ops) net.ops.push_back(ScopedOp(op, out.scopes[r], devices[r]));
      for (const auto* list : {&model.params, &model.computed_params})
        for (const auto& b : *list) AddExternalInput(net, out.scopes[r] + b);
    }
    for (const auto* list : {&model.losses, &model.metrics})
      for (const auto& b : *list) {
        std::vector<std::string> parts;
        for (const auto& s : out.scopes) parts.push_back(s + b);
        net.ops.push_back(MakeOperatorDef("Sum", parts, {b}));
        if (n > 1)
          net.ops.push_back(MakeOperatorDef("Scale", {b}, {b}, {MakeArg("scale", 1.0 / static_cast<double>(n))}));
        net.external_outputs.push_back(b);
      }
  };
  // Accumulated gradients live in "<grad>_acc" of each replica.
  auto for_each_grad = [&](const auto& fn) {
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : model.params) fn(r, out.scopes[r] + grad_of.at(p));
  };
  if (k > 1) {
    replica_steps(out.accumulate, "accumulate");
    for_each_grad([&](size_t r, const std::string& grad) {
      OperatorDef add = MakeOperatorDef("Sum", {grad + "_acc", grad}, {grad + "_acc"});
      add.device = devices[r];
      out.accumulate.ops.push_back(std::move(add));
      AddExternalInput(out.accumulate, grad + "_acc");
    });
    ValidateNet(out.accumulate);
  }

  NetDef& train = out.train;
  train.ops = IterAndLearningRateOps(opt);
  AddExternalInput(train, kIterBlob);
  AddExternalInput(train, kCommBlob);
  replica_steps(train, "train");
  if (k > 1)  // this step's gradient plus the accumulated ones
    for_each_grad([&](size_t r, const std::string& grad) {
      OperatorDef add = MakeOperatorDef("Sum", {grad, grad + "_acc"}, {grad});
      add.device = devices[r];
      train.ops.push_back(std::move(add));
      AddExternalInput(train, grad + "_acc");
    });
  // Computed params (written in place by the replicas' forward ops) kept in
  // step; BMUF averages them in its block net instead.
  if (n > 1 && !model.computed_params.empty() && o.computed_params != ComputedParamsSync::kNone &&
      !o.bmuf.enabled) {
    std::vector<std::string> blobs;
    for (size_t r = 0; r < n; ++r)
      for (const auto& b : model.computed_params) blobs.push_back(out.scopes[r] + b);
    std::vector<std::string> in{kCommBlob};
    in.insert(in.end(), blobs.begin(), blobs.end());
    const bool average = o.computed_params == ComputedParamsSync::kAverage;
    std::vector<Argument> args{MakeArg("num_devices", static_cast<int64_t>(n))};
    args.push_back(average ? MakeArg("scale", 1.0 / static_cast<double>(n)) : MakeArg("root", int64_t{0}));
    train.ops.push_back(MakeOperatorDef(average ? "Allreduce" : "Broadcast", in, blobs, std::move(args)));
  }
  // One Allreduce per bucket; it depends only on its gradients, so the async
  // executor starts it while the rest of backward runs.
  for (const auto& bucket : o.bmuf.enabled ? std::vector<std::vector<std::string>>{} : out.buckets) {
    std::vector<std::string> grads;
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : bucket) grads.push_back(out.scopes[r] + grad_of.at(p));
    std::vector<std::string> in{kCommBlob};
    in.insert(in.end(), grads.begin(), grads.end());
    train.ops.push_back(MakeOperatorDef("Allreduce", in, grads, {MakeArg("num_devices", static_cast<int64_t>(n))}));
  }
  for (size_t r = 0; r < n; ++r)
    for (const auto& p : model.params) {
      OperatorDef u = OptimizerUpdateOp(opt, out.scopes[r] + p, out.scopes[r] + grad_of.at(p));
      u.device = devices[r];
      train.ops.push_back(std::move(u));
      for (const auto& st : OptimizerStateBlobs(opt, out.scopes[r] + p)) AddExternalInput(train, st);
    }
  if (k > 1)  // the next accumulation starts from zero
    for_each_grad([&](size_t r, const std::string& grad) {
      OperatorDef zero = MakeOperatorDef("ConstantFill", {grad + "_acc"}, {grad + "_acc"}, {MakeArg("value", 0.0)});
      zero.device = devices[r];
      train.ops.push_back(std::move(zero));
    });
  ValidateNet(train);

  // ---- block (BMUF): average every replica's params and computed params,
  // then the block update on each replica (identical values, identical results).
  if (o.bmuf.enabled) {
    NetDef& block = out.block;
    block.name = name + "_parallel_block";
    out.block_length = o.bmuf.block_length;
    const double mu = o.bmuf.block_momentum < 0 ? 1.0 - 1.0 / static_cast<double>(n) : o.bmuf.block_momentum;
    std::vector<std::string> blobs{kCommBlob};
    for (size_t r = 0; r < n; ++r)
      for (const auto* list : {&model.params, &model.computed_params})
        for (const auto& b : *list) blobs.push_back(out.scopes[r] + b);
    std::vector<std::string> outs(blobs.begin() + 1, blobs.end());
    block.ops.push_back(MakeOperatorDef("Allreduce", blobs, outs,
                                        {MakeArg("num_devices", static_cast<int64_t>(n)),
                                         MakeArg("scale", 1.0 / static_cast<double>(n))}));
    for (const auto& b : blobs) AddExternalInput(block, b);
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : model.params) {
        const std::string w = out.scopes[r] + p;
        OperatorDef u = MakeOperatorDef("BmufUpdate", {w, w + "/bmuf_global", w + "/bmuf_delta"},
                                        {w, w + "/bmuf_global", w + "/bmuf_delta"},
                                        {MakeArg("block_lr", o.bmuf.block_lr), MakeArg("block_momentum", mu),
                                         MakeArg("nesterov", int64_t{o.bmuf.nesterov})});
        u.device = devices[r];
        block.ops.push_back(std::move(u));
        AddExternalInput(block, w + "/bmuf_global");
        AddExternalInput(block, w + "/bmuf_delta");
      }
    ValidateNet(block);
  }

  // ---- eval: replica 0's params, everything else unscoped.
  NetDef& eval = out.eval;
  eval = InferenceNet(forward);
  eval.name = name + "_parallel_eval";
  std::set<std::string> replica_blobs(model.params.begin(), model.params.end());
  replica_blobs.insert(model.computed_params.begin(), model.computed_params.end());
  auto rename = [&](std::string& b) {
    if (replica_blobs.count(b)) b = out.scopes[0] + b;
  };
  for (auto& op : eval.ops) {
    for (auto& b : op.inputs) rename(b);
    for (auto& b : op.outputs) rename(b);
    op.device = devices[0];
  }
  for (auto& b : eval.external_inputs) rename(b);
  ValidateNet(eval);
  return out;
}

}  // namespace dp
