// The nets that run the forward: accumulate and train (every replica's
// forward and backward on its part of the global batch) and eval.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "comm/collective_checks.h"
#include "core/scope.h"
#include "graph/fusion.h"
#include "model/training.h"
#include "ops/gradient_registry.h"  // MakeArg
#include "ops/net_validate.h"
#include "ops/update_fusion.h"
#include "parallel/parallel_plan.h"

namespace dp {
namespace {

// `blob` as the host sees it: CUDA replicas' host-side copy, CPU ones' blob itself.
std::string HostSide(const ParallelPlan& p, const std::string& blob) {
  return p.replicas.cuda() ? HostCopyName(blob) : blob;
}

// `fn(r, gradient)` for every param's gradient in every replica.
template <typename Fn>
void ForEachGradient(const ParallelPlan& p, const Fn& fn) {
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& param : p.model.params) fn(r, p.Grad(r, param));
}

// An op of `type` (SplitBatch, BatchShares) splitting the global `x` into
// replica r's `blob`; CUDA replicas: split on the host, then each part copied
// to its device.
void AddSplit(const ParallelPlan& p, NetDef& net, const std::string& type, const std::string& x,
              const std::string& blob) {
  const Replicas& b = p.replicas;
  std::vector<std::string> parts;
  for (size_t r = 0; r < p.n; ++r) parts.push_back(HostSide(p, b.BlobName(r, blob)));
  net.ops.push_back(MakeOperatorDef(type, {x}, parts, {MakeArg("uneven", int64_t{p.options.uneven_split})}));
  if (b.cuda())
    for (size_t r = 0; r < p.n; ++r)
      net.ops.push_back(b.On(r, MakeOperatorDef("Copy", {parts[r]}, {b.BlobName(r, blob)})));
}

// Losses and metrics under their unscoped names: the replicas' values (on the
// host) weighted by their share of the batch, or averaged.
void AddAveragedOutputs(const ParallelPlan& p, NetDef& net) {
  const Replicas& b = p.replicas;
  for (const auto* list : {&p.model.losses, &p.model.metrics})
    for (const auto& x : *list) {
      std::vector<std::string> parts;
      for (size_t r = 0; r < p.n; ++r) {
        std::string part = b.BlobName(r, x);
        if (b.cuda()) {
          net.ops.push_back(MakeOperatorDef("Copy", {part}, {HostCopyName(part)}));
          part = HostCopyName(part);
        }
        if (p.weighted) {
          const std::string share = HostSide(p, b.BlobName(r, kBatchShareBlob));
          net.ops.push_back(MakeOperatorDef("Mul", {part, share}, {WeightedName(part)}));
          part = WeightedName(part);
        }
        parts.push_back(part);
      }
      net.ops.push_back(MakeOperatorDef("Sum", parts, {x}));
      if (p.n > 1 && !p.weighted)
        net.ops.push_back(MakeOperatorDef("Scale", {x}, {x}, {MakeArg("scale", 1.0 / static_cast<double>(p.n))}));
      net.external_outputs.push_back(x);
    }
}

// Several processes: the global batch's losses and metrics, which the last
// gradient bucket's allreduce left in replica 0's shares (AddGradientAllreduce),
// under the unscoped names.
void AddGlobalOutputs(const ParallelPlan& p, NetDef& net) {
  const Replicas& b = p.replicas;
  for (const auto* list : {&p.model.losses, &p.model.metrics})
    for (const auto& x : *list) {
      net.ops.push_back(MakeOperatorDef("Copy", {b.BlobName(0, GlobalShareName(x))}, {x}));
      net.external_outputs.push_back(x);
    }
}

// What train and accumulate share: the global batch split across replicas,
// each replica's forward and backward, and (unless `global_outputs`: the
// train net of several processes) losses and metrics averaged over the
// replicas of this process.
void AddReplicaSteps(const ParallelPlan& p, NetDef& net, const std::string& suffix, bool global_outputs) {
  const Replicas& b = p.replicas;
  net.name = p.name + "_parallel_" + suffix;
  net.executor = ExecutorKind::kAsync;
  for (const auto& x : p.model.inputs) {
    AddSplit(p, net, "SplitBatch", x, x);
    AddExternalInput(net, x);
  }
  if (p.weighted) AddSplit(p, net, "BatchShares", p.model.inputs.front(), kBatchShareBlob);
  AddLossScaleCopies(p, net);  // the seeds read it, or each GPU's copy
  b.AppendReplicated(net, p.tmpl);
  for (const auto& x : p.model.params) AddExternalInput(net, b.BlobName(0, x));
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& x : p.replicated) AddExternalInput(net, b.BlobName(r, x));
  if (!global_outputs) AddAveragedOutputs(p, net);
}

}  // namespace

void AddLossScaleCopies(const ParallelPlan& p, NetDef& net) {
  if (!p.options.loss_scaling.dynamic) return;
  AddExternalInput(net, kLossScaleBlob);
  if (p.LossScaleOnReplicas())
    for (size_t r = 0; r < p.n; ++r)
      net.ops.push_back(p.replicas.On(
          r, MakeOperatorDef("Copy", {kLossScaleBlob}, {p.replicas.BlobName(r, kReplicaLossScaleBlob)})));
}

// Computed params (written in place by the replicas' forward ops) kept in
// step: replica 0's broadcast, or the average; BMUF averages them in its
// block net instead.
void AddComputedParamsSync(const ParallelPlan& p, NetDef& train) {
  const ParallelizeOptions& o = p.options;
  if (p.total_replicas() <= 1 || p.model.computed_params.empty() || o.computed_params == ComputedParamsSync::kNone ||
      o.bmuf.enabled)
    return;
  const bool average = o.computed_params == ComputedParamsSync::kAverage;
  train.ops.push_back(p.replicas.Collective(
      average ? "Allreduce" : "Broadcast", p.replicas.PerReplica(p.model.computed_params),
      {average ? MakeArg("scale", 1.0 / static_cast<double>(p.total_replicas())) : MakeArg("root", int64_t{0}),
       MakeArg("key", std::string("computed_params"))}));
}

// One Allreduce per bucket; it depends only on its gradients, so the async
// executor starts it while the rest of backward runs. Joinable: each
// replica's active flag rides along as the bucket's last tensor, and the
// gradients are divided by the flags' sum.
void AddGradientAllreduce(const ParallelPlan& p, NetDef& train, bool active) {
  if (!p.AllreducesGradients()) return;
  for (size_t k = 0; k < p.buckets.size(); ++k) {
    std::vector<std::string> tensors;
    for (const auto& param : p.buckets[k]) tensors.push_back(p.grad_of.at(param));
    std::vector<Argument> args{MakeArg("key", "grad_bucket_" + std::to_string(k))};
    if (p.options.gradient_compression != DType::kUndefined) {  // the gradients, not the scalars riding along
      args.push_back(MakeArg("compress", AllreduceCompressionArg(p.options.gradient_compression)));
      // (ReduceScatter compresses the tensors it shards: these same ones.)
      if (!p.zero) args.push_back(MakeArg("compress_tensors", static_cast<int64_t>(tensors.size())));
    }
    // Several processes: each replica's losses and metrics ride the last
    // bucket (no collective of their own), summed over every replica of
    // every process and divided by the active ones: the global batch's
    // values (AddGlobalOutputs). Each rides as a scalar, the mean of its
    // elements (losses and metrics are scalars), so that a process that
    // joined, whose shadow step knows no shapes, adds a zero of the same size.
    if (p.joinable && k + 1 == p.buckets.size())
      for (const auto* list : {&p.model.losses, &p.model.metrics})
        for (const auto& x : *list) {
          for (size_t r = 0; r < p.n; ++r) {
            const std::string share = p.replicas.BlobName(r, GlobalShareName(x));
            train.ops.push_back(p.replicas.On(
                r, active ? MakeOperatorDef("AveragedLoss", {p.replicas.BlobName(r, x)}, {share})
                          : MakeOperatorDef("ConstantFill", {}, {share},
                                            {MakeArg("shape", std::vector<int64_t>{}), MakeArg("value", 0.0)})));
          }
          tensors.push_back(GlobalShareName(x));
        }
    if (p.joinable) {
      const std::string flag = ActiveFlagName(k);
      tensors.push_back(flag);
      for (size_t r = 0; r < p.n; ++r)
        train.ops.push_back(p.replicas.On(
            r, MakeOperatorDef("ConstantFill", {}, {p.replicas.BlobName(r, flag)},
                               {MakeArg("shape", std::vector<int64_t>{1}), MakeArg("value", active ? 1.0 : 0.0)})));
      args.push_back(MakeArg("average_active", int64_t{1}));
    }
    // A sharded optimizer state: each replica needs its part of the sums
    // alone (the scalars riding along are still summed whole).
    if (p.zero) args.push_back(MakeArg("shard_tensors", static_cast<int64_t>(p.buckets[k].size())));
    train.ops.push_back(p.replicas.Collective(p.zero ? "ReduceScatter" : "Allreduce", p.replicas.PerReplica(tensors),
                                              std::move(args)));
  }
}

// Loss scaling where each replica checks its own gradients
// (ParallelPlan::UnscalesPerReplica). A sharded optimizer state: replica r
// holds the sums of its shard of each gradient alone (the rest of its
// buffers are not summed and differ between processes), so it unscales and
// checks its shard. Several GPUs: each unscales its gradients on its GPU,
// reading its copy of the scale. Either way an Allreduce sums the replicas'
// flags over every process: one verdict, in replica 0's flag, copied to the
// host's global one where the scale lives there. On one replica's flags the
// gate would let one shard (or GPU) update and another skip, and the
// processes' scales would part.
namespace {
void AddReplicaUnscaling(const ParallelPlan& p, NetDef& train) {
  const Replicas& b = p.replicas;
  const bool copies = p.LossScaleOnReplicas();
  std::vector<std::vector<std::string>> flags;
  for (size_t r = 0; r < p.n; ++r) {
    const std::string found = p.FoundInfName(r);
    flags.push_back({found});
    std::vector<std::string> ins{copies ? b.BlobName(r, kReplicaLossScaleBlob) : kLossScaleBlob, found}, outs{found};
    for (const auto& param : p.model.params) {
      ins.push_back(p.Grad(r, param));
      outs.push_back(p.Grad(r, param));
    }
    std::vector<Argument> args;
    if (p.zero) args = {MakeArg("part", p.ShardPart(r)), MakeArg("parts", static_cast<int64_t>(p.total_replicas()))};
    train.ops.push_back(b.On(r, MakeOperatorDef("UnscaleGradients", ins, outs, std::move(args))));
    AddExternalInput(train, found);
  }
  AddExternalInput(train, kCommBlob);  // (a join net has no other collective before it)
  train.ops.push_back(b.Collective("Allreduce", flags, {MakeArg("key", std::string("found_inf"))}));
  if (copies) train.ops.push_back(MakeOperatorDef("Copy", {flags[0][0]}, {kFoundInfBlob}));  // to the host
  OperatorDef gate = MakeOperatorDef("GateLearningRate", {kLrBlob, kFoundInfBlob}, {kLrStepBlob});
  gate.device = p.counter_device;
  train.ops.push_back(std::move(gate));
}
}  // namespace

// The optimizer updates (ParallelPlan::Updates), each on the replica that
// runs it, reading that replica's summed gradient, or every replica's
// gradient (sum_in_update). The learning rate lives where the counter does
// (ParallelPlan::counter_device); updates on another device read a copy.
void AddOptimizerUpdates(const ParallelPlan& p, NetDef& train) {
  const Replicas& b = p.replicas;
  const bool scaled = p.options.loss_scaling.dynamic;
  if (scaled) {
    // Every replica's gradients (the updates may read any of them), summed
    // where they are summed, unscaled together: one found_inf for all, so
    // every update skips an overflowing step alike.
    if (p.UnscalesPerReplica()) {
      AddReplicaUnscaling(p, train);
    } else {
      std::vector<std::string> grads;
      for (size_t r = 0; r < p.n; ++r)
        for (const auto& param : p.model.params) grads.push_back(p.Grad(r, param));
      for (auto& op : UnscaleOps(grads, kLrBlob, p.counter_device)) train.ops.push_back(std::move(op));
    }
    for (const char* x : {kLossScaleBlob, kLossScaleStepsBlob, kFoundInfBlob}) AddExternalInput(train, x);
  }
  std::set<size_t> lr_copied;
  for (const auto& u : p.Updates()) {
    std::string lr = scaled ? kLrStepBlob : kLrBlob;
    if (b.cuda() && b.device(u.replica) != p.counter_device) {  // the step's rate, gated or not, to the GPU
      const std::string from = lr;
      lr = b.BlobName(u.replica, kLrBlob);
      if (lr_copied.insert(u.replica).second)
        train.ops.push_back(b.On(u.replica, MakeOperatorDef("Copy", {from}, {lr})));
    }
    const std::string w = b.BlobName(u.replica, u.param);
    if (u.parts > 1 && u.part == 0) {  // the parts may not copy on write: copy now if need be
      std::vector<std::string> blobs{w};
      for (const auto& st : OptimizerStateBlobs(p.opt, w)) blobs.push_back(st);
      train.ops.push_back(b.On(u.replica, MakeOperatorDef("MakeWritable", blobs, blobs)));
    }
    OperatorDef op = OptimizerUpdateOp(p.opt, w, p.Grad(p.sum_in_update ? 0 : u.replica, u.param), lr);
    if (p.sum_in_update)
      for (size_t r = 1; r < p.n; ++r) op.inputs.push_back(p.Grad(r, u.param));
    if (u.parts > 1) {
      op.args.push_back(MakeArg("part", u.part));
      op.args.push_back(MakeArg("parts", u.parts));
    }
    if (p.zero) {  // the replica's part, with the state of that part alone
      op.args.push_back(MakeArg("part", p.ShardPart(u.replica)));
      op.args.push_back(MakeArg("parts", static_cast<int64_t>(p.total_replicas())));
      op.args.push_back(MakeArg("sharded_state", int64_t{1}));
    }
    train.ops.push_back(b.On(u.replica, std::move(op)));
    for (const auto& st : OptimizerStateBlobs(p.opt, w)) AddExternalInput(train, st);
  }
  if (p.options.fuse) {
    // One multi-tensor update per replica and gradient bucket (they wait for
    // that bucket's sums anyway), or per replica when nothing is summed.
    const std::vector<std::vector<std::string>> whole{p.model.params};
    std::vector<std::vector<std::string>> groups;
    for (size_t r = 0; r < b.size(); ++r)
      for (const auto& bucket : p.AllreducesGradients() ? p.buckets : whole) {
        groups.emplace_back();
        for (const auto& param : bucket) groups.back().push_back(b.BlobName(r, param));
      }
    FuseOptimizerUpdates(train, groups, p.options.update_fusion);
  }
  if (scaled) train.ops.push_back(LossScaleUpdateOp(p.options.loss_scaling, p.counter_device));
  if (!p.zero) return;
  // Each replica's part of the updated params to every replica, a bucket at
  // a time (the params of a bucket are updated once its sums are in).
  AddExternalInput(train, kCommBlob);
  for (size_t k = 0; k < p.buckets.size(); ++k)
    train.ops.push_back(b.Collective("Allgather", b.PerReplica(p.buckets[k]),
                                     {MakeArg("key", "param_bucket_" + std::to_string(k))}));
}

NetDef BuildAccumulateNet(const ParallelPlan& p) {
  NetDef acc;
  AddReplicaSteps(p, acc, "accumulate", false);
  ForEachGradient(p, [&](size_t r, const std::string& grad) {
    const std::string sum = AccumulatedGradientName(grad);
    acc.ops.push_back(p.replicas.On(r, MakeOperatorDef("Sum", {sum, grad}, {sum})));
    AddExternalInput(acc, sum);
  });
  if (p.options.fuse) FuseSoftmaxLossGradient(acc);
  ValidateNet(acc);
  return acc;
}

NetDef BuildTrainNet(const ParallelPlan& p) {
  const Replicas& b = p.replicas;
  const bool accumulating = p.accumulate_steps > 1;
  NetDef train;
  train.ops = IterAndLearningRateOps(p.opt, p.counter_device);
  AddExternalInput(train, kIterBlob);
  AddExternalInput(train, kCommBlob);
  AddReplicaSteps(p, train, "train", p.joinable);
  if (accumulating)  // this step's gradient plus the accumulated ones
    ForEachGradient(p, [&](size_t r, const std::string& grad) {
      train.ops.push_back(b.On(r, MakeOperatorDef("Sum", {grad, AccumulatedGradientName(grad)}, {grad})));
      AddExternalInput(train, AccumulatedGradientName(grad));
    });
  AddComputedParamsSync(p, train);
  AddGradientAllreduce(p, train, true);
  if (p.joinable) AddGlobalOutputs(p, train);
  AddOptimizerUpdates(p, train);
  if (accumulating)  // the next accumulation starts from zero
    ForEachGradient(p, [&](size_t r, const std::string& grad) {
      const std::string sum = AccumulatedGradientName(grad);
      train.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {sum}, {sum}, {MakeArg("value", 0.0)})));
    });
  train.external_outputs.push_back(kLrBlob);  // the step's rate stays readable (a memory plan keeps it)
  if (p.options.fuse) FuseSoftmaxLossGradient(train);
  ValidateNet(train);
  return train;
}

// Replica 0's params and computed params; every other blob keeps its
// unscoped name. CUDA replicas: the model's inputs, fed on the host, are
// copied to replica 0's device first (EvalInputName).
NetDef BuildEvalNet(const ParallelPlan& p) {
  const Replicas& b = p.replicas;
  NetDef eval = InferenceNet(p.forward);
  eval.name = p.name + "_parallel_eval";
  std::set<std::string> replica_blobs(p.model.params.begin(), p.model.params.end());
  replica_blobs.insert(p.model.computed_params.begin(), p.model.computed_params.end());
  const std::set<std::string> inputs(p.model.inputs.begin(), p.model.inputs.end());
  std::vector<std::string> read;  // the model inputs the eval net reads, in model order
  auto rename = [&](std::string& x) {
    if (replica_blobs.count(x)) x = b.BlobName(0, x);
  };
  for (auto& op : eval.ops) {
    for (auto& x : op.inputs) {
      rename(x);
      if (!b.cuda() || !inputs.count(x)) continue;
      if (std::find(read.begin(), read.end(), x) == read.end()) read.push_back(x);
      x = EvalInputName(b.BlobName(0, x));
    }
    for (auto& x : op.outputs) rename(x);
    op.device = b.device(0);
  }
  std::vector<OperatorDef> copies;
  for (const auto& x : read)
    copies.push_back(b.On(0, MakeOperatorDef("Copy", {x}, {EvalInputName(b.BlobName(0, x))})));
  eval.ops.insert(eval.ops.begin(), copies.begin(), copies.end());
  for (auto& x : eval.external_inputs) rename(x);
  ValidateNet(eval);
  return eval;
}

}  // namespace dp
