// Parallelize: the data-parallel graph transform (Caffe2's Parallelize).
//
// From a one-device model it builds nets that train N replicas in one
// process, each on its own device under a name scope ("cpu_0/", "cpu_1/"):
//   init:  the model's init net on replica 0, Broadcast of every param and
//          computed param to the others, each replica's optimizer state, the
//          iteration counter and the communicator;
//   train: Iter + LearningRate, SplitBatch of every input (the global batch
//          is fed once, under its unscoped name), each replica's forward and
//          backward (loss gradient seeded with 1/N, so that summed gradients
//          are the gradient of the global mean loss), one Allreduce per
//          gradient bucket, each replica's optimizer update, and the losses
//          and metrics of the global batch under their unscoped names
//          (averaged over the replicas; with several processes they ride
//          the last bucket's Allreduce across them);
//   eval:  replica 0's params read by the inference-mode forward net, whose
//          other blobs keep their unscoped names;
//   sync:  replica 0's state broadcast to the others on demand.
// The replica template (one replica's forward and backward) may contain
// collectives over "this replica's tensors" (sync BN's statistics): each is
// merged with its counterparts in the other replicas into one op.
// Everything added is an operator; the executor overlaps each bucket's
// Allreduce with the rest of backward through blob dependencies alone.
// How the nets are built, file by file: parallel/parallel_plan.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "model/model_def.h"
#include "model/training.h"  // LossScaling
#include "ops/update_fusion.h"

namespace dp {

// Blockwise model-update filtering (Chen & Huo 2016): replicas train on
// their own shards for block_length local steps without communication; then
// the `block` net averages the replicas' params (W) and applies
//   G = W - Wg;  Delta = block_momentum Delta + block_lr G;  Wg += Delta;
// every replica restarts from Wg (+ block_momentum Delta with Nesterov).
struct BmufOptions {
  bool enabled = false;
  double block_lr = 1.0;         // zeta > 0
  double block_momentum = -1.0;  // mu in [0, 1); negative: 1 - 1/N
  bool nesterov = true;
  int block_length = 8;          // local steps per block (for the caller's loop), >= 1
};

// What happens to computed params (BN running statistics) after each step's
// forward: replica 0's values copied to all (Caffe2's and DDP's default), the
// replicas' average, or nothing (each replica keeps its own statistics).
enum class ComputedParamsSync { kBroadcast = 0, kAverage = 1, kNone = 2 };  // = DP_COMPUTED_PARAMS_*

struct ParallelizeOptions {
  DeviceType device_type = DeviceType::kCPU;
  std::vector<int32_t> device_ids;  // one replica per id; distinct, >= 0, at least one
  // Gradient buckets, in bytes: the first (small, so that communication
  // starts early in backward) and the rest. Gradients are grouped in the
  // order backward produces them.
  int64_t first_bucket_bytes = int64_t{1} << 20;
  int64_t bucket_bytes = int64_t{25} << 20;
  bool uneven_split = false;  // allow global batches that do not divide by the replica count
  bool fuse = true;           // graph/fusion.h on the forward net and the loss gradient; the updates fused (ops/update_fusion.h)
  // Dynamic loss scaling (model/training.h), for fp16 products: one scale per
  // process beside the iteration counter, the gradients of every replica
  // unscaled together after their sums. Replicas of one memory only (CPU
  // replicas, or one GPU); not with BMUF; with a sharded optimizer state in
  // one process only (there the reduce-scatter leaves every sum everywhere).
  LossScaling loss_scaling;
  UpdateFusionOptions update_fusion;  // fused per replica and gradient bucket
  // Gradient accumulation: K > 1 builds an `accumulate` net that runs
  // forward and backward and adds the gradients up locally, without
  // communication; run it K - 1 times, then `train` once (which adds its own
  // batch, allreduces, updates and clears the sums). The update equals one
  // step on the K global batches together.
  int accumulate_steps = 1;
  ComputedParamsSync computed_params = ComputedParamsSync::kBroadcast;
  BmufOptions bmuf;  // instead of a gradient allreduce every step
  // CPU only: one copy of the params and optimizer state (replica 0's) that
  // every replica reads; gradients are still summed across replicas (in one
  // process by the updates themselves, without an allreduce), and each param
  // is updated once, the updates spread over the replicas (parallelize.cc
  // AssignUpdates). Saves the replicas' memory and repeated updates; not with
  // BMUF.
  bool shared_model = false;
  // Decide shared_model from where the replicas run: shared when their CPUs
  // share a last-level cache (topology, then a measurement), a copy each
  // otherwise (core/cpu_plan.h says why). CPU without BMUF; else copies.
  bool shared_model_auto = false;
  // Every training-mode SpatialBN normalises with the statistics of the
  // whole global batch (forward and backward), as one device would.
  bool sync_bn = false;
  // CUDA replicas: NCCL (true) or the copy-and-sum tree for the collectives.
  bool nccl = true;
  // Several processes (Caffe2's shards; DDP's ranks): num_shards processes
  // each run these nets on their own devices and feed their own part of the
  // data; gradients are summed over every device of every process (the loss
  // gradient is seeded with 1, and the allreduce divides by the active
  // replicas: devices x shards while all have data), rank 0's params are
  // broadcast by the init net, and every collective runs in the same order
  // in every process. The communicator meets the others through `store`.
  int num_shards = 1;
  int shard_id = 0;
  std::string store;          // file:///dir or redis://host:port[/prefix]; required with num_shards > 1
  int64_t timeout_ms = 60000; // rendezvous and every collective across processes
  std::string interface;      // network interface ("" : the host name's address)
  std::string run_id = "dp";  // the job's id: its keys in the store live under it
  // Between the processes of one host: "auto" (shared memory where usable),
  // "shm" or "tcp" (ProcessGroupOptions::local_transport).
  std::string local_transport = "auto";
  // The train and accumulate nets' memory mode (graph/memory_plan.h).
  MemoryMode memory = MemoryMode::kShare;
  // The gradient allreduce in 16 bits (the Allreduce op's compress): half the
  // bytes between processes. kUndefined: none; kBFloat16 or kFloat16 (scaled
  // against overflow). CPU replicas; in one process too (the replicas' sums
  // then round as across processes, and the updates no longer sum them).
  DType gradient_compression = DType::kUndefined;
  // ZeRO-1: the optimizer state sharded over every replica of every process
  // (comm/shards.h says which elements each owns). Each step reduce-scatters
  // the gradients (ReduceScatter: each replica gets its part summed), each
  // replica updates its part of the params with its part of the state, and
  // the params are all-gathered (Allgather). The sums are the allreduce's,
  // in the same order, so a step equals the unsharded step bit for bit in
  // one process and over shared memory. Each replica holds 1 / (replicas x
  // processes) of the state. CPU replicas with a model each (not
  // shared_model, which already keeps one state per process), not BMUF,
  // not compressed.
  bool shard_optimizer_state = false;
};

struct ParallelNets {
  NetDef init, train, eval;
  NetDef accumulate;  // only with accumulate_steps > 1 (no ops otherwise)
  NetDef block;       // only with BMUF: run after every block_length train steps
  // Re-synchronisation on demand: replica 0's params, computed params and
  // optimizer state broadcast to the others, then a barrier of the
  // communicator. Returns (Net::Run) once every replica holds them.
  NetDef sync;
  int block_length = 0;  // BMUF's block length (0 without BMUF)
  int num_shards = 1, shard_id = 0;  // the processes of the job, and this one
  // Several processes (not BMUF or sync BN): the nets of a process that ran
  // out of data (dp_parallel_model_join): run join_collectives; while the
  // active count it leaves in JoinCountBlob() is above 0, run join_update
  // and the collectives again.
  NetDef join_collectives, join_update;
  std::vector<std::string> scopes;  // per replica: "cpu_0/", ...
  // Gradient buckets in launch order: each a list of (unscoped) params.
  std::vector<std::vector<std::string>> buckets;
  // The training state to checkpoint, as (name in the file, blob): replica
  // 0's blobs under their unscoped names (TrainingStateBlobs, plus BMUF's
  // state), so that a file does not depend on the replica count; loading
  // into replica 0 and running `sync` restores every replica.
  std::vector<std::pair<std::string, std::string>> checkpoint;
  // A sharded optimizer state (shard_optimizer_state): the checkpoint holds
  // each state tensor whole, under its one-device name, through the blobs
  // `shard_full` (state name -> "parallel/full/<name>"). Before a save run
  // shard_gather (every process: a collective), which makes them of every
  // replica's shard; before a load run shard_stage (zeros shaped like the
  // params, what a strict load replaces), after it shard_scatter (each
  // replica's shard of them, no communication). Empty them afterwards.
  NetDef shard_gather, shard_stage, shard_scatter;
  std::vector<std::string> shard_full;
};

// Blob of the in-process communicator the collectives use.
inline const char* kCommBlob = "parallel/comm";
// Per replica (scoped), with uneven splits: its share of the global batch.
inline const char* kBatchShareBlob = "parallel/batch_share";
// Several processes: per replica and gradient bucket k, the float32 [1]
// flag "parallel/active_<k>" (scoped): 1 while the replica has data, 0 once
// its process joined, carried as the bucket allreduce's last tensor; after
// it, the number of active replicas, which the gradients are divided by.
std::string ActiveFlagName(size_t bucket);
// Where the join loop reads the active count: replica 0's flag of bucket 0.
std::string JoinCountBlob(const ParallelNets& nets);

// Throws kInvalidArgument for bad options (naming them), kInvalidNet for
// models that cannot be trained (see BuildTraining).
ParallelNets Parallelize(const ModelDef& model, const ParallelizeOptions& options);

}  // namespace dp
