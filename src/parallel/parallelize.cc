// Parallelize: checks the options, plans the replicas (template, gradient
// buckets), then builds each net (parallel_plan.h says which file has which).
#include "parallel/parallelize.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "autodiff/add_gradients.h"
#include "comm/process_group.h"
#include "comm/shards.h"
#include "comm/store_address.h"
#include "core/cache_probe.h"
#include "core/cpu_budget.h"
#include "core/cpu_plan.h"
#include "core/cpu_topology.h"
#include "core/logging.h"
#include "core/scope.h"
#include "model/training.h"
#include "ops/net_validate.h"
#include "ops/operator.h"
#include "parallel/parallel_plan.h"
#include "parallel/replicas.h"
#include "parallel/sync_bn.h"

namespace dp {
namespace {

// The options' fields are named as in dp_parallel_options, whose one entry
// point, dp_model_parallelize, these messages start with.
constexpr const char* kApi = "dp_model_parallelize: ";

// shared_model_auto: one model when the replicas will run behind one
// last-level cache (measured where sysfs says so: core/cache_probe.h), a
// copy each otherwise. Only CPU replicas without BMUF can share one.
ParallelizeOptions ResolveSharedModel(ParallelizeOptions o) {
  if (!o.shared_model_auto) return o;
  o.shared_model_auto = false;
  const int n = static_cast<int>(o.device_ids.size());
  o.shared_model = o.device_type == DeviceType::kCPU && n > 1 && !o.bmuf.enabled && !o.shard_optimizer_state &&
                   PartsShareCache(DivideCpus(ProcessCpuTopology(), CpuBudget(), n));
  if (o.device_type == DeviceType::kCPU && n > 1)
    DP_LOG(kInfo, "parallelize: ", n, " CPU replicas ",
           o.shared_model ? "share one model (their CPUs share a last-level cache)"
                          : "keep a model each (their CPUs do not share a last-level cache)");
  return o;
}

void CheckOptions(const ParallelizeOptions& o) {
  DP_ENFORCE_CODE(o.device_type == DeviceType::kCPU || o.device_type == DeviceType::kCUDA, Code::kInvalidArgument,
                  kApi, "unknown options->device_type ", static_cast<int>(o.device_type));
  DP_ENFORCE_CODE(!o.device_ids.empty(), Code::kInvalidArgument, kApi, "no devices (options->device_ids is empty)");
  std::set<int32_t> seen;
  for (int32_t id : o.device_ids) {
    DP_ENFORCE_CODE(id >= 0, Code::kInvalidArgument, kApi, "options->device_ids holds a negative id ", id);
    if (seen.insert(id).second) continue;
    // One GPU named twice: two replicas with their own streams on it, a
    // testing aid for the replica path on a one-GPU machine. NCCL refuses two
    // ranks on one device; the copy-and-sum tree does not mind.
    DP_ENFORCE_CODE(o.device_type == DeviceType::kCUDA, Code::kInvalidArgument, kApi,
                    "options->device_ids lists device ", DeviceName({o.device_type, id}), " twice");
    DP_ENFORCE_CODE(!o.nccl, Code::kInvalidArgument, kApi, "options->device_ids lists ",
                    DeviceName({o.device_type, id}), " twice: NCCL cannot run two ranks on one GPU; two replicas ",
                    "on one GPU (a testing aid) need options->cuda_collectives DP_CUDA_COLLECTIVES_TREE");
  }
  if (o.gradient_compression != DType::kUndefined) {
    DP_ENFORCE_CODE(o.gradient_compression == DType::kBFloat16 || o.gradient_compression == DType::kFloat16,
                    Code::kInvalidArgument, kApi, "options->gradient_compression must be bf16 or fp16, got ",
                    DTypeName(o.gradient_compression));
    DP_ENFORCE_CODE(!o.bmuf.enabled, Code::kInvalidArgument, kApi,
                    "options->gradient_compression compresses the gradient allreduce, which BMUF does not run");
  }
  if (o.shard_optimizer_state) {
    DP_ENFORCE_CODE(!o.bmuf.enabled, Code::kInvalidArgument, kApi,
                    "options->shard_optimizer_state shards the state of the step's optimizer update; BMUF replicas "
                    "each run their own optimizer between blocks, so it cannot be combined with options->bmuf");
    DP_ENFORCE_CODE(!o.shared_model, Code::kInvalidArgument, kApi,
                    "options->shard_optimizer_state shards a model per replica; options->shared_model keeps one "
                    "model and one optimizer state for the replicas of a process already");
  }
  if (o.loss_scaling.dynamic) {
    CheckLossScaling(o.loss_scaling, std::string(kApi) + "options->loss_scaling");
    DP_ENFORCE_CODE(!o.bmuf.enabled, Code::kInvalidArgument, kApi,
                    "options->loss_scaling unscales the gradients summed every step, which BMUF does not sum");
  }
  DP_ENFORCE_CODE(o.accumulate_steps >= 1, Code::kInvalidArgument,
                  kApi, "options->accumulate_steps must be >= 1, got ", o.accumulate_steps);
  DP_ENFORCE_CODE(!o.shared_model || o.device_type == DeviceType::kCPU, Code::kInvalidArgument,
                  kApi, "options->shared_model is for CPU replicas only (they share host memory); ",
                  DeviceTypeName(o.device_type), " replicas each need their own params");
  if (o.bmuf.enabled) {
    DP_ENFORCE_CODE(o.bmuf.block_lr > 0, Code::kInvalidArgument, kApi, "options->bmuf_block_lr must be > 0, got ",
                    o.bmuf.block_lr);
    DP_ENFORCE_CODE(o.bmuf.block_momentum < 1, Code::kInvalidArgument,
                    kApi, "options->bmuf_block_momentum must be < 1, got ", o.bmuf.block_momentum);
    DP_ENFORCE_CODE(o.bmuf.block_length >= 1, Code::kInvalidArgument,
                    kApi, "options->bmuf_block_length must be >= 1, got ", o.bmuf.block_length);
    DP_ENFORCE_CODE(o.accumulate_steps == 1, Code::kInvalidArgument,
                    kApi, "BMUF and gradient accumulation cannot be combined (options->accumulate_steps ",
                    o.accumulate_steps, ")");
    DP_ENFORCE_CODE(!o.shared_model, Code::kInvalidArgument,
                    kApi, "BMUF needs a model per replica (each trains locally for a block); ",
                    "it cannot be combined with options->shared_model");
    DP_ENFORCE_CODE(!o.sync_bn, Code::kInvalidArgument,
                    kApi, "BMUF replicas train without communicating within a block; ",
                    "options->sync_bn (statistics exchanged every step) cannot be combined with it");
  }
  DP_ENFORCE_CODE(o.num_shards >= 1, Code::kInvalidArgument, kApi, "options->num_shards must be >= 1, got ",
                  o.num_shards);
  DP_ENFORCE_CODE(o.shard_id >= 0 && o.shard_id < o.num_shards, Code::kInvalidArgument, kApi, "options->shard_id ",
                  o.shard_id, " is out of range for ", o.num_shards, " shards");
  DP_ENFORCE_CODE(IsLocalTransport(o.local_transport), Code::kInvalidArgument, kApi, "options->local_transport '",
                  o.local_transport, "' must be auto, shm or tcp");
  if (o.num_shards > 1) {
    DP_ENFORCE_CODE(!o.store.empty(), Code::kInvalidArgument, kApi, o.num_shards,
                    " shards (processes) need a store where they meet (options->store or DP_STORE: ",
                    "file:///dir or redis://host:port)");
    try {
      ParseStoreAddress(o.store);  // a bad URL fails here, before any net runs
    } catch (Error& e) {
      throw e.Prepend(StrCat(kApi, "options->store"));
    }
    DP_ENFORCE_CODE(o.timeout_ms > 0, Code::kInvalidArgument, kApi, "options->timeout_ms must be > 0, got ",
                    o.timeout_ms);
    DP_ENFORCE_CODE(o.device_type == DeviceType::kCPU || o.nccl, Code::kInvalidArgument,
                    kApi, "CUDA replicas of several processes communicate through NCCL; the copy-and-sum "
                    "tree (options->cuda_collectives DP_CUDA_COLLECTIVES_TREE) works inside one process");
    DP_ENFORCE_CODE(!o.uneven_split, Code::kInvalidArgument,
                    kApi, "options->uneven_split weighs replicas by their share of one process's batch; with several "
                    "processes feed equal batches (a process that runs out of data joins instead)");
  }
  DP_ENFORCE_CODE(o.first_bucket_bytes > 0 && o.bucket_bytes > 0, Code::kInvalidArgument,
                  kApi, "bucket sizes must be positive (options->first_bucket_bytes ", o.first_bucket_bytes,
                  ", options->bucket_bytes ", o.bucket_bytes, ")");
}

// Each param's dims and dtype as the init net makes it (unknown where shape
// inference cannot tell).
std::map<std::string, TensorInfo> ParamInfo(const ModelDef& model) {
  std::map<std::string, TensorInfo> info;
  auto shapes = InferNetShapes(model.init_net, {});
  for (const auto& p : model.params) {
    auto it = shapes.find(p);
    info[p] = it == shapes.end() ? TensorInfo{} : it->second;
  }
  return info;
}

// Bytes of each param; -1 where shape inference cannot tell, or the count
// would not fit in int64 (such a gradient gets a bucket of its own; the
// init net will not make it anyway).
std::map<std::string, int64_t> ParamBytes(const std::map<std::string, TensorInfo>& info) {
  std::map<std::string, int64_t> bytes;
  for (const auto& [p, t] : info) {
    int64_t b = -1;
    if (t.known() && __builtin_mul_overflow(NumElements(t.dims), static_cast<int64_t>(DTypeSize(t.dtype)), &b))
      b = -1;
    bytes[p] = t.known() ? b : -1;
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
    const bool fits = !buckets.empty() && b >= 0 && filled >= 0 && b <= cap - filled;  // no overflow
    if (!fits) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(param);
    filled = b < 0 ? -1 : filled + b;
  }
  return buckets;
}

// A shared model's updates, spread over the replicas so that each updates a
// like number of bytes and the step's optimizer tail runs on every core:
// params of kSplitBytes or more in one part per replica (the task graph runs
// the parts at once), the others whole, largest first, each on the least
// loaded replica.
std::vector<ParallelPlan::Update> AssignUpdates(const ModelDef& model, const std::map<std::string, int64_t>& bytes,
                                                size_t replicas) {
  constexpr int64_t kSplitBytes = int64_t{256} << 10;
  std::vector<int64_t> load(replicas, 0);
  std::vector<ParallelPlan::Update> updates;
  std::vector<std::string> whole;
  for (const auto& param : model.params) {
    const int64_t b = bytes.at(param);
    if (replicas > 1 && b >= kSplitBytes) {
      for (size_t r = 0; r < replicas; ++r) {
        updates.push_back({r, param, static_cast<int64_t>(r), static_cast<int64_t>(replicas)});
        load[r] += b / static_cast<int64_t>(replicas);
      }
    } else {
      whole.push_back(param);
    }
  }
  std::stable_sort(whole.begin(), whole.end(),
                   [&](const std::string& a, const std::string& b) { return bytes.at(a) > bytes.at(b); });
  for (const auto& param : whole) {
    const size_t r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    updates.push_back({r, param});
    load[r] += std::max<int64_t>(bytes.at(param), 0);
  }
  return updates;
}

// CUDA replicas run every op of the template on their device: all must have
// CUDA kernels.
void CheckKernels(const NetDef& tmpl, DeviceType type) {
  DP_ENFORCE_CODE(DeviceTypeCompiledIn(type), Code::kUnavailable,
                  kApi, "CUDA replicas requested, but dp was built without CUDA");
  std::set<std::string> missing;
  for (const auto& op : tmpl.ops)
    if (!OperatorRegistry::Has(type, op.type)) missing.insert(op.type);
  if (missing.empty()) return;
  std::string list;
  for (const auto& t : missing) list += (list.empty() ? "" : ", ") + t;
  DP_THROW(Code::kUnimplemented, kApi, DeviceTypeName(type), " replicas need a ", DeviceTypeName(type),
           " kernel of every training op; these have none: ", list);
}

// The replica template (one replica's forward and backward) and what the
// builders derive from the model and options. Summed over replicas by the
// allreduce, a loss gradient seeded with 1/N gives the global mean (with
// uneven splits: the replica's share of the batch, kBatchShareBlob); BMUF
// replicas are separate local learners on their own mean loss.
ParallelPlan MakePlan(const ModelDef& model, const ParallelizeOptions& o, const OptimizerDef& opt,
                      const Replicas& replicas) {
  ParallelPlan plan(model, o, opt, replicas);
  const size_t n = replicas.size();
  plan.n = n;
  plan.shards = static_cast<size_t>(o.num_shards);
  plan.accumulate_steps = o.accumulate_steps;
  plan.name = model.name.empty() ? std::string("model") : model.name;
  // Exact shares of uneven batches (a model without inputs has no batch to split).
  plan.weighted = o.uneven_split && n > 1 && !o.bmuf.enabled && !model.inputs.empty();

  plan.forward = TrainingForwardNet(model, o.fuse);
  GradientOptions gopt;
  gopt.losses = model.losses;
  gopt.wrt = model.params;
  plan.joinable = plan.shards > 1 && !o.bmuf.enabled;
  // Summed over the replicas by the allreduce, the seed gives the global
  // mean; a joinable step divides by the active replicas in the allreduce
  // instead.
  const size_t seeded = plan.weighted || plan.joinable ? 1 : plan.total_replicas();
  gopt.loss_scale = o.bmuf.enabled ? 1.0 : 1.0 / (static_cast<double>(seeded) * plan.accumulate_steps);
  if (plan.weighted) gopt.loss_weight = kBatchShareBlob;
  const GradientResult g = AddGradients(plan.forward, gopt);
  plan.grad_of.insert(g.grads.begin(), g.grads.end());
  NetDef grad_net = g.net;
  bool one_gpu = replicas.cuda();
  for (size_t r = 1; r < plan.n; ++r) one_gpu = one_gpu && replicas.device(r) == replicas.device(0);
  if (one_gpu) plan.counter_device = replicas.device(0);
  // The seeds read the one global scale, or on several GPUs each replica's
  // copy of it on its device (AddReplicaSteps copies it there).
  if (o.loss_scaling.dynamic)
    ScaleLossSeeds(grad_net, model.losses, plan.LossScaleOnReplicas() ? kReplicaLossScaleBlob : kLossScaleBlob);
  const std::map<std::string, TensorInfo> info = ParamInfo(model);
  const std::map<std::string, int64_t> bytes = ParamBytes(info);
  plan.buckets = MakeBuckets(g, bytes, o);
  plan.tmpl = o.sync_bn && plan.total_replicas() > 1 ? SynchronizeBatchNorm(grad_net, kCommBlob) : grad_net;
  if (replicas.cuda()) CheckKernels(plan.tmpl, o.device_type);

  plan.replicated = o.shared_model ? std::vector<std::string>{} : model.params;
  plan.replicated.insert(plan.replicated.end(), model.computed_params.begin(), model.computed_params.end());
  plan.updaters = o.shared_model ? 1 : n;
  if (o.shared_model) plan.shared_updates = AssignUpdates(model, bytes, n);
  // One process of CPU replicas: no gradient allreduce; each update sums the
  // replicas' gradients as it reads them (replica order: the allreduce's sum,
  // bit for bit). With a shared model each element is updated once; with a
  // copy each, every replica's update reads every gradient, which beats an
  // allreduce (its own pass over all of them, on the collectives' threads,
  // while the replicas' runners wait) up to a few replicas: 2 CPU replicas
  // on cores without a shared cache, batch 64: 1.37-1.42 -> 1.11-1.34 ms.
  constexpr size_t kMaxCopiesSummingInUpdate = 4;
  plan.zero = o.shard_optimizer_state && plan.total_replicas() > 1;
  if (plan.zero) {
    // The shards' lengths are part of the nets (the state's init, the updates' parts).
    for (const auto& [param, t] : info)
      DP_ENFORCE_CODE(t.known() && bytes.at(param) >= 0, Code::kInvalidArgument, kApi,
                      "options->shard_optimizer_state needs every param's shape from the init net; shape "
                      "inference cannot tell the shape of param '", param, "'");
    plan.param_info = info;
  }
  plan.sum_in_update = plan.shards == 1 && n > 1 && o.device_type == DeviceType::kCPU && !o.bmuf.enabled &&
                       o.gradient_compression == DType::kUndefined && !plan.zero &&
                       (o.shared_model || n <= kMaxCopiesSummingInUpdate);
  return plan;
}

}  // namespace

int64_t ParallelPlan::ShardLength(size_t r, const std::string& param) const {
  const ElementRange part =
      PartOfElements(NumElements(param_info.at(param).dims), ShardPart(r), static_cast<int64_t>(total_replicas()));
  return part.end - part.begin;
}

std::string ActiveFlagName(size_t bucket) { return "parallel/active_" + std::to_string(bucket); }

std::string JoinCountBlob(const ParallelNets& nets) {
  return ScopedName(nets.scopes.empty() ? std::string() : nets.scopes[0], ActiveFlagName(0));
}

ParallelNets Parallelize(const ModelDef& model, const ParallelizeOptions& requested) {
  const OptimizerDef& opt = CheckTrainable(model);
  // Bad options are refused before AUTO probes the CPUs (threads, ~ms);
  // what AUTO resolves to (a shared model only for CPU replicas without
  // BMUF) passes the same checks.
  CheckOptions(requested);
  const ParallelizeOptions options = ResolveSharedModel(requested);
  const Replicas replicas(model, options);
  const ParallelPlan plan = MakePlan(model, options, opt, replicas);

  ParallelNets out;
  out.scopes = replicas.scopes();
  out.buckets = plan.buckets;
  out.init = BuildInitNet(plan);
  if (plan.accumulate_steps > 1) out.accumulate = BuildAccumulateNet(plan);
  out.train = BuildTrainNet(plan);
  if (options.bmuf.enabled) {
    out.block = BuildBlockNet(plan);
    out.block_length = options.bmuf.block_length;
  }
  out.sync = BuildSyncNet(plan);
  out.checkpoint = CheckpointBindings(plan);
  if (plan.zero) {
    out.shard_gather = BuildShardGatherNet(plan);
    out.shard_stage = BuildShardStageNet(plan);
    out.shard_scatter = BuildShardScatterNet(plan);
    ForEachShardedState(plan, [&](const std::string&, const std::string& full, const std::vector<std::string>&) {
      out.shard_full.push_back(full);
    });
  }
  out.eval = BuildEvalNet(plan);
  out.num_shards = options.num_shards;
  out.shard_id = options.shard_id;
  if (plan.joinable && !options.sync_bn) {  // sync BN's collectives run inside forward and backward
    out.join_collectives = BuildJoinCollectivesNet(plan);
    out.join_update = BuildJoinUpdateNet(plan);
  }
  if (options.num_shards > 1)
    for (NetDef* net : {&out.init, &out.accumulate, &out.train, &out.block, &out.sync, &out.join_collectives,
                        &out.join_update, &out.shard_gather})
      OrderCollectives(*net);
  out.train.memory = options.memory;
  out.accumulate.memory = options.memory;
  return out;
}

}  // namespace dp
