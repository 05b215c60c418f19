// The nets that make the replicas' state (init) and re-synchronise it (sync).
#include <set>
#include <string>
#include <vector>

#include "core/scope.h"
#include "model/training.h"
#include "ops/gradient_registry.h"  // MakeArg
#include "ops/net_validate.h"
#include "parallel/parallel_plan.h"

namespace dp {
namespace {

// Replica 0 runs the model's init net.
void AddReplicaZeroInit(const ParallelPlan& p, NetDef& init) {
  const Replicas& b = p.replicas;
  for (const auto& op : p.model.init_net.ops) init.ops.push_back(b.ScopedOp(op, 0));
  for (const auto& x : p.model.init_net.external_inputs) AddExternalInput(init, b.BlobName(0, x));
}

// A Broadcast from replica 0 of `per_replica` (unscoped: each replica's
// own), and one of `shared` (scoped: one blob for all of this process's
// replicas) from process 0 to the others, or nothing when there is nobody to
// send to.
void AddBroadcasts(const ParallelPlan& p, const std::vector<std::string>& per_replica,
                   const std::vector<std::string>& shared, const std::string& key, NetDef& net) {
  if (p.total_replicas() <= 1) return;
  if (!per_replica.empty())
    net.ops.push_back(p.replicas.Collective("Broadcast", p.replicas.PerReplica(per_replica),
                                            {MakeArg("root", int64_t{0})}));
  if (shared.empty()) return;
  std::vector<std::string> in{kCommBlob};
  in.insert(in.end(), shared.begin(), shared.end());
  net.ops.push_back(p.replicas.On(
      0, MakeOperatorDef("Broadcast", in, shared,
                         {MakeArg("num_devices", int64_t{1}), MakeArg("root", int64_t{0}), MakeArg("key", key)})));
}

// A shared model's params (scoped) when other processes hold their own copy:
// they must receive process 0's.
std::vector<std::string> SharedAcrossProcesses(const ParallelPlan& p) {
  std::vector<std::string> out;
  if (p.options.shared_model && p.shards > 1)
    for (const auto& param : p.model.params) out.push_back(p.replicas.BlobName(0, param));
  return out;
}

// The other replicas' params and computed params take shape (zeros like
// replica 0's), then receive replica 0's values; a shared model's params go
// to the other processes.
void AddBroadcastOfReplicated(const ParallelPlan& p, NetDef& init) {
  const Replicas& b = p.replicas;
  if (p.total_replicas() <= 1) return;
  for (size_t r = 1; r < p.n; ++r)
    for (const auto& x : p.replicated)
      init.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {b.BlobName(0, x)}, {b.BlobName(r, x)})));
  AddBroadcasts(p, p.replicated, SharedAcrossProcesses(p), "shared_params", init);
}

// The iteration counter (once, on the host), then each updating replica's
// optimizer state on its device (model/training.h describes the split); a
// sharded state: each replica's shards, zeros of its part's length.
void AddOptimizerState(const ParallelPlan& p, NetDef& init) {
  const Replicas& b = p.replicas;
  for (auto& op : IterationCounterInitOps(p.counter_device)) init.ops.push_back(std::move(op));
  if (p.options.loss_scaling.dynamic)
    for (auto& op : LossScalingInitOps(p.options.loss_scaling, p.counter_device)) init.ops.push_back(std::move(op));
  if (p.UnscalesPerReplica())  // the replicas' overflow flags (step_nets.cc), but the global one
    for (size_t r = 0; r < p.n; ++r)
      if (p.FoundInfName(r) != kFoundInfBlob)
        init.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {}, {p.FoundInfName(r)},
                                                   {MakeArg("shape", std::vector<int64_t>{}), MakeArg("value", 0.0)})));
  if (p.zero) {
    for (size_t r = 0; r < p.n; ++r)
      for (const auto& param : p.model.params)
        for (const auto& st : OptimizerStateBlobs(p.opt, b.BlobName(r, param)))
          init.ops.push_back(b.On(
              r, MakeOperatorDef("ConstantFill", {}, {st},
                                 {MakeArg("shape", std::vector<int64_t>{p.ShardLength(r, param)}),
                                  MakeArg("dtype", static_cast<int64_t>(p.param_info.at(param).dtype)),
                                  MakeArg("value", 0.0)})));
    return;
  }
  const auto params = b.PerReplica(p.model.params);
  for (size_t r = 0; r < p.updaters; ++r)
    for (auto& op : OptimizerStateInitOps(p.opt, params[r])) init.ops.push_back(b.On(r, std::move(op)));
}

// Accumulated gradients (AccumulatedGradientName) of every replica, zero.
void AddGradientAccumulators(const ParallelPlan& p, NetDef& init) {
  const Replicas& b = p.replicas;
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& param : p.model.params)
      init.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {b.BlobName(r, param)},
                                                 {AccumulatedGradientName(p.Grad(r, param))},
                                                 {MakeArg("value", 0.0)})));
}

// Everything a replica holds beyond its activations (unscoped) that the
// others hold too: params unless shared, computed params, optimizer state
// unless sharded, BMUF state.
std::vector<std::string> ReplicaState(const ParallelPlan& p) {
  std::vector<std::string> state = p.replicated;
  for (const auto& param : p.options.shared_model ? std::vector<std::string>{} : p.model.params) {
    if (!p.zero)
      for (const auto& st : OptimizerStateBlobs(p.opt, param)) state.push_back(st);
    if (p.options.bmuf.enabled)
      for (const auto& st : BmufStateBlobs(param)) state.push_back(st);
  }
  return state;
}

// A shared model's state that other processes hold their own copy of
// (scoped): its params and their optimizer state.
std::vector<std::string> SharedStateAcrossProcesses(const ParallelPlan& p) {
  std::vector<std::string> out = SharedAcrossProcesses(p);
  for (size_t i = 0, n = out.size(); i < n; ++i)
    for (const auto& st : OptimizerStateBlobs(p.opt, out[i])) out.push_back(st);
  return out;
}

}  // namespace

NetDef BuildInitNet(const ParallelPlan& p) {
  NetDef init;
  init.name = p.name + "_parallel_init";
  AddReplicaZeroInit(p, init);
  init.ops.push_back(p.replicas.CreateComm());
  AddBroadcastOfReplicated(p, init);
  AddOptimizerState(p, init);
  if (p.options.bmuf.enabled) AddBmufInit(p, init);
  if (p.accumulate_steps > 1) AddGradientAccumulators(p, init);
  ValidateNet(init);
  return init;
}

std::vector<std::pair<std::string, std::string>> CheckpointBindings(const ParallelPlan& p) {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> sharded;  // a sharded state is saved whole (FullStateName)
  if (p.zero)
    for (const auto& param : p.model.params)
      for (const auto& st : OptimizerStateBlobs(p.opt, param)) sharded.insert(st);
  if (p.options.loss_scaling.dynamic)
    for (const auto& x : LossScalingStateBlobs()) out.emplace_back(x, x);  // global, as the counter
  for (const auto& x : TrainingStateBlobs(p.model))
    out.emplace_back(x, x == kIterBlob     ? x  // the counter is global
                        : sharded.count(x) ? FullStateName(x)
                                           : p.replicas.BlobName(0, x));
  if (p.options.bmuf.enabled)
    for (const auto& param : p.model.params)
      for (const auto& st : BmufStateBlobs(param)) out.emplace_back(st, p.replicas.BlobName(0, st));
  return out;
}

// Every param's state tensors whole, of every replica's shard (GatherShards
// on replica 0, shaped like its param).
NetDef BuildShardGatherNet(const ParallelPlan& p) {
  NetDef net;
  net.name = p.name + "_parallel_shard_gather";
  AddExternalInput(net, kCommBlob);
  ForEachShardedState(p, [&](const std::string& param, const std::string& full, const std::vector<std::string>& shards) {
    std::vector<std::string> in{kCommBlob, p.replicas.BlobName(0, param)};
    in.insert(in.end(), shards.begin(), shards.end());
    for (const auto& x : in) AddExternalInput(net, x);
    net.ops.push_back(p.replicas.On(
        0, MakeOperatorDef("GatherShards", in, {full}, {MakeArg("num_devices", static_cast<int64_t>(p.n))})));
    net.external_outputs.push_back(full);
  });
  ValidateNet(net);
  return net;
}

NetDef BuildShardStageNet(const ParallelPlan& p) {
  NetDef net;
  net.name = p.name + "_parallel_shard_stage";
  ForEachShardedState(p, [&](const std::string& param, const std::string& full, const std::vector<std::string>&) {
    const std::string like = p.replicas.BlobName(0, param);
    AddExternalInput(net, like);
    net.ops.push_back(p.replicas.On(0, MakeOperatorDef("ConstantFill", {like}, {full}, {MakeArg("value", 0.0)})));
    net.external_outputs.push_back(full);
  });
  ValidateNet(net);
  return net;
}

NetDef BuildShardScatterNet(const ParallelPlan& p) {
  NetDef net;
  net.name = p.name + "_parallel_shard_scatter";
  AddExternalInput(net, kCommBlob);
  ForEachShardedState(p, [&](const std::string&, const std::string& full, const std::vector<std::string>& shards) {
    AddExternalInput(net, full);
    // ScatterShards is a host op: GPU replicas' shards are cut on the host,
    // then each copied to its replica's device.
    std::vector<std::string> cut = shards;
    if (p.replicas.cuda())
      for (auto& x : cut) x += "/host";
    net.ops.push_back(p.replicas.On(0, MakeOperatorDef("ScatterShards", {kCommBlob, full}, cut,
                                                       {MakeArg("num_devices", static_cast<int64_t>(p.n))})));
    if (p.replicas.cuda())
      for (size_t r = 0; r < shards.size(); ++r)
        net.ops.push_back(p.replicas.On(r, MakeOperatorDef("Copy", {cut[r]}, {shards[r]})));
    for (const auto& x : shards) net.external_outputs.push_back(x);
  });
  ValidateNet(net);
  return net;
}

NetDef BuildSyncNet(const ParallelPlan& p) {
  const Replicas& b = p.replicas;
  NetDef sync;
  sync.name = p.name + "_parallel_sync";
  const std::vector<std::string> state = ReplicaState(p), shared = SharedStateAcrossProcesses(p);
  AddBroadcasts(p, state, shared, "shared_state", sync);
  if (!b.cuda()) {  // CUDA: Net::Run waits for the streams
    OperatorDef barrier = MakeOperatorDef("Barrier", {kCommBlob}, {});
    if (!sync.ops.empty()) barrier.control_inputs = {sync.ops.back().outputs.back()};  // after the broadcast
    sync.ops.push_back(std::move(barrier));
  }
  AddExternalInput(sync, kCommBlob);
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& x : state) AddExternalInput(sync, b.BlobName(r, x));
  for (const auto& x : shared) AddExternalInput(sync, x);
  ValidateNet(sync);
  return sync;
}

}  // namespace dp
