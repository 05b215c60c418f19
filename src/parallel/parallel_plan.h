// The pieces of Parallelize (internal to parallel/): what every net builder
// reads (ParallelPlan, made once by parallelize.cc), and one builder per net
// of ParallelNets. Each builder returns a validated net (ValidateNet).
//   parallelize.cc  options checks, the plan (replica template, gradient
//                   buckets), Parallelize itself, which calls the builders;
//   replicas.cc     naming and placement of each replica's blobs and ops;
//   state_nets.cc   init and sync: the replicas' state made and re-broadcast;
//   step_nets.cc    accumulate, train and eval: the nets running the forward;
//   bmuf_nets.cc    BMUF's state and its block net;
//   join_nets.cc    the nets of a process that ran out of data (Join).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/scope.h"
#include "model/model_def.h"
#include "model/training.h"
#include "ops/op_schema.h"
#include "parallel/parallelize.h"
#include "parallel/replicas.h"

namespace dp {

// A replica's copy of the loss scale on its GPU (a template name, scoped per
// replica), with replicas on several GPUs (ParallelPlan::LossScaleOnReplicas).
inline const char* kReplicaLossScaleBlob = "optimizer/loss_scale_copy";

struct ParallelPlan {
  ParallelPlan(const ModelDef& model_, const ParallelizeOptions& options_, const OptimizerDef& opt_,
               const Replicas& replicas_)
      : model(model_), options(options_), opt(opt_), replicas(replicas_) {}

  const ModelDef& model;
  const ParallelizeOptions& options;
  const OptimizerDef& opt;    // the model's (checked)
  const Replicas& replicas;
  std::string name;           // prefix of the nets' names: the model's, or "model"
  size_t n = 0;               // replica count (this process's)
  size_t shards = 1;          // processes, each with n replicas
  int accumulate_steps = 1;   // options.accumulate_steps
  // Uneven splits with exact shares: the loss gradient and the averaged
  // losses and metrics are weighted by each replica's kBatchShareBlob.
  bool weighted = false;
  NetDef forward;             // the training forward net (one replica, unscoped)
  // The replica template: forward and backward of one replica (unscoped),
  // rewritten for sync BN when asked.
  NetDef tmpl;
  std::map<std::string, std::string> grad_of;     // param -> its gradient in the template
  std::vector<std::vector<std::string>> buckets;  // gradient buckets in launch order (params)
  // What each replica keeps: its params (unless shared) and computed params.
  std::vector<std::string> replicated;
  size_t updaters = 0;  // replicas that own params and optimizer state: the first `updaters`
  // One optimizer update op: `replica` runs it on `param` (or on part `part`
  // of `parts` of its elements: ops/cpu/optimizer_ops.cc).
  struct Update {
    size_t replica;
    std::string param;
    int64_t part = 0, parts = 1;
  };
  // Shared model: each param updated once, on the shared param and state,
  // the work spread over the replicas (parallelize.cc AssignUpdates).
  std::vector<Update> shared_updates;
  // Shared model in one process: no gradient allreduce; each update sums
  // the replicas' gradients itself (replica order) over the elements it
  // updates.
  bool sum_in_update = false;
  // Several processes (not BMUF): a process that runs out of data may join
  // (join_nets.cc). Every gradient bucket then carries each replica's active
  // flag (ActiveFlagName) and is divided by their sum: the loss gradient is
  // seeded with 1 (not 1 / replicas) and the average is over active replicas.
  bool joinable = false;
  // A sharded optimizer state (options.shard_optimizer_state, with more than
  // one replica in all): replica r of this process owns part ShardPart(r) of
  // total_replicas() of every param (comm/shards.h), and keeps the state of
  // that part alone; the gradient buckets are reduce-scattered and the
  // params all-gathered instead of one allreduce per bucket.
  bool zero = false;
  std::map<std::string, TensorInfo> param_info;  // zero: each param's dims and dtype, known at build time
  // Where the iteration counter and the learning rate live: the GPU when
  // every replica of this process is on that one GPU (the step can then be
  // one CUDA graph, Iter and LearningRate in it, no copy from the host), else
  // the host.
  DeviceOption counter_device;

  // Replicas over every process: what averages divide by.
  size_t total_replicas() const { return n * shards; }
  int64_t ShardPart(size_t r) const {
    return static_cast<int64_t>(options.shard_id) * static_cast<int64_t>(n) + static_cast<int64_t>(r);
  }
  // Elements of replica r's shard of `param` (zero).
  int64_t ShardLength(size_t r, const std::string& param) const;

  // Whether the step sums the gradients with an allreduce per bucket (not
  // with BMUF, one replica, or replicas summing them in their updates).
  bool AllreducesGradients() const { return !options.bmuf.enabled && total_replicas() > 1 && !sum_in_update; }

  // Every optimizer update: each updater's params, or the shared ones.
  std::vector<Update> Updates() const {
    if (!shared_updates.empty()) return shared_updates;
    std::vector<Update> updates;
    for (size_t r = 0; r < updaters; ++r)
      for (const auto& param : model.params) updates.push_back({r, param});
    return updates;
  }

  // Replica r's gradient of `param`.
  std::string Grad(size_t r, const std::string& param) const { return replicas.BlobName(r, grad_of.at(param)); }
  // Loss scaling with replicas on several GPUs: the scale and the verdict
  // live on the host (counter_device); each replica reads a copy of the
  // scale on its GPU (kReplicaLossScaleBlob) and writes its flag there.
  bool LossScaleOnReplicas() const { return replicas.cuda() && counter_device.type != DeviceType::kCUDA; }
  // Replica r's overflow flag when each replica checks its own gradients
  // (a sharded state, or several GPUs; step_nets.cc, AddReplicaUnscaling):
  // replica 0's is the global one, which the gate and the scale's update
  // read, where it lives on replica 0's device.
  std::string FoundInfName(size_t r) const {
    return r == 0 && !LossScaleOnReplicas() ? std::string(kFoundInfBlob)
                                            : ScopedName(replicas.scopes()[r], kFoundInfBlob);
  }
  // Whether each replica unscales and checks its own gradients (see above).
  bool UnscalesPerReplica() const { return options.loss_scaling.dynamic && (zero || LossScaleOnReplicas()); }
};

// init: replica 0 runs the model's init net, the others receive its values;
// optimizer state per updating replica, the iteration counter once, the
// communicator, BMUF state and gradient accumulators where used.
NetDef BuildInitNet(const ParallelPlan& plan);

// accumulate (accumulate_steps > 1): forward and backward of every replica,
// gradients added to their accumulators, no communication.
NetDef BuildAccumulateNet(const ParallelPlan& plan);

// train: Iter + LearningRate, forward and backward of every replica, the
// accumulated gradients added, computed params kept in step, one Allreduce per
// gradient bucket (not with BMUF; with several processes the last one also
// carries each replica's losses and metrics, whose global values the net then
// writes under the unscoped names), the optimizer updates.
NetDef BuildTrainNet(const ParallelPlan& plan);

// block (BMUF only): the replicas' params and computed params averaged, then
// the block update of every replica.
NetDef BuildBlockNet(const ParallelPlan& plan);

// sync: replica 0's state broadcast to the others, then a barrier (CPU).
NetDef BuildSyncNet(const ParallelPlan& plan);

// eval: the inference-mode forward net on replica 0's params.
NetDef BuildEvalNet(const ParallelPlan& plan);

// The join nets of a process that ran out of data (joinable plans):
// join_collectives takes part in one train step's collectives of the others
// with zero gradients and active flags 0; join_update applies the optimizer
// update they apply, so that every process ends with the same state.
NetDef BuildJoinCollectivesNet(const ParallelPlan& plan);
NetDef BuildJoinUpdateNet(const ParallelPlan& plan);
// What train and the join nets share (step_nets.cc): computed params kept in
// step, the gradient allreduce (with this process's replicas `active` or
// not), the optimizer updates.
void AddComputedParamsSync(const ParallelPlan& plan, NetDef& net);
void AddGradientAllreduce(const ParallelPlan& plan, NetDef& net, bool active);
void AddOptimizerUpdates(const ParallelPlan& plan, NetDef& net);
// With loss scaling on several GPUs (ParallelPlan::LossScaleOnReplicas):
// each replica's copy of the host's scale, made at the start of each net
// that reads it (the step's seeds, or a join net's unscaling).
void AddLossScaleCopies(const ParallelPlan& plan, NetDef& net);

// With several processes every collective must run in the same order in
// each of them (they pair up in order): each collective of `net` gets a
// control input on the one before it, in list order (replicas.cc).
void OrderCollectives(NetDef& net);

// What ParallelNets::checkpoint holds (state_nets.cc).
std::vector<std::pair<std::string, std::string>> CheckpointBindings(const ParallelPlan& plan);

// A sharded optimizer state's checkpoint nets (state_nets.cc; ParallelNets
// says when each runs): the whole tensors gathered from the shards, made
// zero for a load to replace, and cut into the shards again.
NetDef BuildShardGatherNet(const ParallelPlan& plan);
// fn(param, its state tensor's whole name, the replicas' shards of it) for
// every state tensor of every param, in model order.
template <typename Fn>
void ForEachShardedState(const ParallelPlan& p, const Fn& fn) {
  for (const auto& param : p.model.params) {
    const std::vector<std::string> states = OptimizerStateBlobs(p.opt, param);
    for (size_t k = 0; k < states.size(); ++k) {
      std::vector<std::string> shards;
      for (size_t r = 0; r < p.n; ++r) shards.push_back(OptimizerStateBlobs(p.opt, p.replicas.BlobName(r, param))[k]);
      fn(param, FullStateName(states[k]), shards);
    }
  }
}
NetDef BuildShardStageNet(const ParallelPlan& plan);
NetDef BuildShardScatterNet(const ParallelPlan& plan);

// BMUF pieces the init and sync nets share (bmuf_nets.cc).
// The per-replica state of BMUF for `param` (unscoped): its global model and
// block momentum (core/scope.h BmufGlobalName, BmufDeltaName).
std::vector<std::string> BmufStateBlobs(const std::string& param);
// Appends to `init` every replica's BMUF state: Wg = W, Delta = 0.
void AddBmufInit(const ParallelPlan& plan, NetDef& init);

}  // namespace dp
