// The nets that make the replicas' state (init) and re-synchronise it (sync).
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

// The other replicas' params and computed params take shape (zeros like
// replica 0's), then receive replica 0's values.
void AddBroadcastOfReplicated(const ParallelPlan& p, NetDef& init) {
  const Replicas& b = p.replicas;
  if (p.total_replicas() <= 1 || p.replicated.empty()) return;
  for (size_t r = 1; r < p.n; ++r)
    for (const auto& x : p.replicated)
      init.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {b.BlobName(0, x)}, {b.BlobName(r, x)})));
  init.ops.push_back(b.Collective("Broadcast", b.PerReplica(p.replicated), {MakeArg("root", int64_t{0})}));
}

// The iteration counter (once, on the host), then each updating replica's
// optimizer state on its device (model/training.h describes the split).
void AddOptimizerState(const ParallelPlan& p, NetDef& init) {
  const Replicas& b = p.replicas;
  init.ops.push_back(IterationCounterInitOp());
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

// Everything a replica holds beyond its activations (unscoped): params
// unless shared, computed params, optimizer and BMUF state.
std::vector<std::string> ReplicaState(const ParallelPlan& p) {
  std::vector<std::string> state = p.replicated;
  for (const auto& param : p.options.shared_model ? std::vector<std::string>{} : p.model.params) {
    for (const auto& st : OptimizerStateBlobs(p.opt, param)) state.push_back(st);
    if (p.options.bmuf.enabled)
      for (const auto& st : BmufStateBlobs(param)) state.push_back(st);
  }
  return state;
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
  for (const auto& x : TrainingStateBlobs(p.model))
    out.emplace_back(x, x == kIterBlob ? x : p.replicas.BlobName(0, x));  // the counter is global
  if (p.options.bmuf.enabled)
    for (const auto& param : p.model.params)
      for (const auto& st : BmufStateBlobs(param)) out.emplace_back(st, p.replicas.BlobName(0, st));
  return out;
}

NetDef BuildSyncNet(const ParallelPlan& p) {
  const Replicas& b = p.replicas;
  NetDef sync;
  sync.name = p.name + "_parallel_sync";
  const std::vector<std::string> state = ReplicaState(p);
  if (p.total_replicas() > 1 && !state.empty())
    sync.ops.push_back(b.Collective("Broadcast", b.PerReplica(state), {MakeArg("root", int64_t{0})}));
  if (!b.cuda()) {  // CUDA: Net::Run waits for the streams
    OperatorDef barrier = MakeOperatorDef("Barrier", {kCommBlob}, {});
    if (!sync.ops.empty()) barrier.control_inputs = {sync.ops.back().outputs.back()};  // after the broadcast
    sync.ops.push_back(std::move(barrier));
  }
  AddExternalInput(sync, kCommBlob);
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& x : state) AddExternalInput(sync, b.BlobName(r, x));
  ValidateNet(sync);
  return sync;
}

}  // namespace dp
