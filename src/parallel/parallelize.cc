#include "parallel/parallelize.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "autodiff/add_gradients.h"
#include "ops/gradient_registry.h"
#include "ops/net_validate.h"
#include "model/training.h"
#include "ops/operator.h"
#include "parallel/sync_bn.h"

namespace dp {
namespace {

void CheckOptions(const ParallelizeOptions& o) {
  DP_ENFORCE_CODE(o.device_type == DeviceType::kCPU || o.device_type == DeviceType::kCUDA, Code::kInvalidArgument,
                  "parallelize: unknown device type ", static_cast<int>(o.device_type));
  DP_ENFORCE_CODE(!o.device_ids.empty(), Code::kInvalidArgument, "parallelize: no devices (device_ids is empty)");
  std::set<int32_t> seen;
  for (int32_t id : o.device_ids) {
    DP_ENFORCE_CODE(id >= 0, Code::kInvalidArgument, "parallelize: device id ", id, " is negative");
    DP_ENFORCE_CODE(seen.insert(id).second, Code::kInvalidArgument, "parallelize: device ",
                    DeviceName({o.device_type, id}), " is listed twice");
  }
  DP_ENFORCE_CODE(o.accumulate_steps >= 1, Code::kInvalidArgument,
                  "parallelize: accumulate_steps must be >= 1, got ", o.accumulate_steps);
  DP_ENFORCE_CODE(!o.shared_model || o.device_type == DeviceType::kCPU, Code::kInvalidArgument,
                  "parallelize: a shared model is for CPU replicas only (they share host memory); ",
                  DeviceTypeName(o.device_type), " replicas each need their own params");
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
    DP_ENFORCE_CODE(!o.shared_model, Code::kInvalidArgument,
                    "parallelize: BMUF needs a model per replica (each trains locally for a block); ",
                    "it cannot be combined with a shared model");
    DP_ENFORCE_CODE(!o.sync_bn, Code::kInvalidArgument,
                    "parallelize: BMUF replicas train without communicating within a block; ",
                    "sync BN (statistics exchanged every step) cannot be combined with it");
  }
  DP_ENFORCE_CODE(o.first_bucket_bytes > 0 && o.bucket_bytes > 0, Code::kInvalidArgument,
                  "parallelize: bucket sizes must be positive (first_bucket_bytes ", o.first_bucket_bytes,
                  ", bucket_bytes ", o.bucket_bytes, ")");
}

// Bytes of each param as the init net makes it; -1 where shape inference
// cannot tell, or the count would not fit in int64 (such a gradient gets a
// bucket of its own; the init net will not make it anyway).
std::map<std::string, int64_t> ParamBytes(const ModelDef& model) {
  std::map<std::string, int64_t> bytes;
  auto shapes = InferNetShapes(model.init_net, {});
  for (const auto& p : model.params) {
    auto it = shapes.find(p);
    int64_t b = -1;
    if (it != shapes.end() && it->second.known() &&
        __builtin_mul_overflow(NumElements(it->second.dims), static_cast<int64_t>(DTypeSize(it->second.dtype)), &b))
      b = -1;
    bytes[p] = b;
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

bool IsCollective(const OperatorDef& op) {
  return (op.type == "Allreduce" || op.type == "Broadcast") && !op.inputs.empty() && op.inputs[0] == kCommBlob;
}

// The nets' builder: where each replica's blobs live and how ops are placed.
class Builder {
 public:
  Builder(const ModelDef& model, const ParallelizeOptions& o) : o_(o), n_(o.device_ids.size()) {
    for (int32_t id : o.device_ids) {
      devices_.push_back({o.device_type, id});
      scopes_.push_back(DeviceScope(devices_.back()));
    }
    if (o.shared_model) shared_.insert(model.params.begin(), model.params.end());
  }

  size_t size() const { return n_; }
  const std::vector<std::string>& scopes() const { return scopes_; }
  const DeviceOption& device(size_t r) const { return devices_[r]; }
  bool cuda() const { return o_.device_type == DeviceType::kCUDA; }
  Argument Devices() const { return MakeArg("num_devices", static_cast<int64_t>(n_)); }

  // Replica r's name of a template blob: the communicator is global, shared
  // params are replica 0's, everything else is in r's scope.
  std::string Name(size_t r, const std::string& blob) const {
    if (blob == kCommBlob) return blob;
    return scopes_[shared_.count(blob) ? 0 : r] + blob;
  }

  // `op` of the template for replica r: blobs renamed, placed on r's device.
  OperatorDef Scoped(const OperatorDef& op, size_t r) const {
    OperatorDef s = op;
    for (auto& b : s.inputs) b = Name(r, b);
    for (auto& b : s.outputs) b = Name(r, b);
    for (auto& b : s.control_inputs) b = Name(r, b);
    if (!s.name.empty()) s.name = scopes_[r] + s.name;
    s.device = devices_[r];
    return s;
  }

  // An op placed on replica r's device.
  OperatorDef On(size_t r, OperatorDef op) const {
    op.device = devices_[r];
    return op;
  }

  // A collective over `per_replica` tensors of each replica (device-major),
  // written in place; placed on replica 0's device.
  OperatorDef Collective(const std::string& type, const std::vector<std::vector<std::string>>& per_replica,
                         std::vector<Argument> args) const {
    std::vector<std::string> blobs;
    for (const auto& list : per_replica) blobs.insert(blobs.end(), list.begin(), list.end());
    std::vector<std::string> in{kCommBlob};
    in.insert(in.end(), blobs.begin(), blobs.end());
    args.insert(args.begin(), Devices());
    return On(0, MakeOperatorDef(type, std::move(in), std::move(blobs), std::move(args)));
  }

  // Template blobs `list` of every replica, by replica.
  std::vector<std::vector<std::string>> PerReplica(const std::vector<std::string>& list) const {
    std::vector<std::vector<std::string>> out(n_);
    for (size_t r = 0; r < n_; ++r)
      for (const auto& b : list) out[r].push_back(Name(r, b));
    return out;
  }

  // Appends the replicas' copies of `tmpl`, op by op (op i of every replica,
  // then op i + 1), so that a template collective becomes one op over every
  // replica's tensors, after all their producers and before all consumers.
  void AddReplicas(NetDef& net, const NetDef& tmpl) const {
    for (const OperatorDef& op : tmpl.ops) {
      if (IsCollective(op)) {
        std::vector<std::string> tensors(op.inputs.begin() + 1, op.inputs.end());
        std::vector<Argument> args;
        for (const auto& a : op.args)
          if (a.name != "num_devices") args.push_back(a);
        net.ops.push_back(Collective(op.type, PerReplica(tensors), std::move(args)));
        continue;
      }
      for (size_t r = 0; r < n_; ++r) net.ops.push_back(Scoped(op, r));
    }
  }

  // The op creating the communicator.
  OperatorDef CreateComm() const {
    if (!cuda()) return MakeOperatorDef("CreateCpuCollectives", {}, {kCommBlob}, {Devices()});
    return MakeOperatorDef("CreateCudaCollectives", {}, {kCommBlob},
                           {MakeArg("device_ids", std::vector<int64_t>(o_.device_ids.begin(), o_.device_ids.end())),
                            MakeArg("nccl", int64_t{o_.nccl})});
  }

 private:
  const ParallelizeOptions& o_;
  const size_t n_;
  std::vector<DeviceOption> devices_;
  std::vector<std::string> scopes_;
  std::set<std::string> shared_;
};

// CUDA replicas run every op of the template on their device: all must have
// CUDA kernels.
void CheckKernels(const NetDef& tmpl, DeviceType type) {
  DP_ENFORCE_CODE(DeviceTypeCompiledIn(type), Code::kUnavailable,
                  "parallelize: CUDA replicas requested, but dp was built without CUDA");
  std::set<std::string> missing;
  for (const auto& op : tmpl.ops)
    if (!OperatorRegistry::Has(type, op.type)) missing.insert(op.type);
  if (missing.empty()) return;
  std::string list;
  for (const auto& t : missing) list += (list.empty() ? "" : ", ") + t;
  DP_THROW(Code::kUnimplemented, "parallelize: ", DeviceTypeName(type), " replicas need a ", DeviceTypeName(type),
           " kernel of every training op; these have none: ", list);
}

}  // namespace

ParallelNets Parallelize(const ModelDef& model, const ParallelizeOptions& o) {
  const OptimizerDef& opt = CheckTrainable(model);
  CheckOptions(o);
  const Builder b(model, o);
  const size_t n = b.size();
  const int k = o.accumulate_steps;
  // Exact shares of uneven batches (a model without inputs has no batch to split).
  const bool weighted = o.uneven_split && n > 1 && !o.bmuf.enabled && !model.inputs.empty();
  const std::string name = model.name.empty() ? std::string("model") : model.name;

  ParallelNets out;
  out.scopes = b.scopes();

  // ---- The replica template: forward and backward of one replica. Summed
  // over replicas by the allreduce, a loss gradient seeded with 1/N gives the
  // global mean (with uneven splits: the replica's share of the batch); BMUF
  // replicas are separate local learners on their own mean loss.
  const NetDef forward = TrainingForwardNet(model, o.fuse);
  GradientOptions gopt;
  gopt.losses = model.losses;
  gopt.wrt = model.params;
  gopt.loss_scale = o.bmuf.enabled ? 1.0 : 1.0 / (static_cast<double>(weighted ? 1 : n) * k);
  if (weighted) gopt.loss_weight = kBatchShareBlob;
  const GradientResult g = AddGradients(forward, gopt);
  std::map<std::string, std::string> grad_of(g.grads.begin(), g.grads.end());
  out.buckets = MakeBuckets(g, ParamBytes(model), o);
  const NetDef tmpl = o.sync_bn && n > 1 ? SynchronizeBatchNorm(g.net, kCommBlob) : g.net;
  if (b.cuda()) CheckKernels(tmpl, o.device_type);

  // What each replica keeps: its params (unless shared) and computed params.
  std::vector<std::string> replicated = o.shared_model ? std::vector<std::string>{} : model.params;
  replicated.insert(replicated.end(), model.computed_params.begin(), model.computed_params.end());
  // Replicas that own params and run the optimizer.
  const size_t updaters = o.shared_model ? 1 : n;

  // ---- init: replica 0 initialises, the others receive its values.
  NetDef& init = out.init;
  init.name = name + "_parallel_init";
  for (const auto& op : model.init_net.ops) init.ops.push_back(b.Scoped(op, 0));
  for (const auto& x : model.init_net.external_inputs) AddExternalInput(init, b.Name(0, x));
  init.ops.push_back(b.CreateComm());
  if (n > 1 && !replicated.empty()) {
    // The other replicas' blobs take shape (zeros like replica 0's), then
    // receive replica 0's values.
    for (size_t r = 1; r < n; ++r)
      for (const auto& x : replicated)
        init.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {b.Name(0, x)}, {b.Name(r, x)})));
    init.ops.push_back(b.Collective("Broadcast", b.PerReplica(replicated), {MakeArg("root", int64_t{0})}));
  }
  {
    NetDef state;  // optimizer state per replica, zeros shaped like its params
    std::vector<std::string> no_params;
    AddOptimizerInit(state, opt, no_params);  // the iteration counter
    init.ops.insert(init.ops.end(), state.ops.begin(), state.ops.end());
    const auto params = b.PerReplica(model.params);
    for (size_t r = 0; r < updaters; ++r) {
      NetDef per;
      AddOptimizerInit(per, opt, params[r]);
      for (size_t j = 1; j < per.ops.size(); ++j) init.ops.push_back(b.On(r, per.ops[j]));  // op 0: a counter
    }
  }
  if (o.bmuf.enabled)
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : model.params) {
        const std::string w = b.Name(r, p);
        init.ops.push_back(b.On(r, MakeOperatorDef("Copy", {w}, {w + "/bmuf_global"})));
        init.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {w}, {w + "/bmuf_delta"}, {MakeArg("value", 0.0)})));
      }
  // Accumulated gradients live in "<grad>_acc" of each replica.
  auto for_each_grad = [&](const auto& fn) {
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : model.params) fn(r, b.Name(r, grad_of.at(p)));
  };
  if (k > 1)
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : model.params)
        init.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {b.Name(r, p)}, {b.Name(r, grad_of.at(p)) + "_acc"},
                                                   {MakeArg("value", 0.0)})));
  ValidateNet(init);

  // ---- train (and accumulate): the global batch split across replicas,
  // each replica's forward and backward, losses and metrics averaged.
  auto replica_steps = [&](NetDef& net, const std::string& suffix) {
    net.name = name + "_parallel_" + suffix;
    net.executor = ExecutorKind::kAsync;
    // CUDA replicas: split on the host, then each part to its device.
    const std::string host = b.cuda() ? "/host" : "";
    auto split = [&](const std::string& type, const std::string& x, const std::string& blob) {
      std::vector<std::string> parts;
      for (size_t r = 0; r < n; ++r) parts.push_back(b.Name(r, blob) + host);
      net.ops.push_back(MakeOperatorDef(type, {x}, parts, {MakeArg("uneven", int64_t{o.uneven_split})}));
      if (b.cuda())
        for (size_t r = 0; r < n; ++r) net.ops.push_back(b.On(r, MakeOperatorDef("Copy", {parts[r]}, {b.Name(r, blob)})));
    };
    for (const auto& x : model.inputs) {
      split("SplitBatch", x, x);
      AddExternalInput(net, x);
    }
    if (weighted) split("BatchShares", model.inputs.front(), kBatchShareBlob);
    b.AddReplicas(net, tmpl);
    for (const auto& x : model.params) AddExternalInput(net, b.Name(0, x));
    for (size_t r = 0; r < n; ++r)
      for (const auto& x : replicated) AddExternalInput(net, b.Name(r, x));
    // Losses and metrics: the replicas' values (on the host) weighted by
    // their share of the batch, or averaged.
    for (const auto* list : {&model.losses, &model.metrics})
      for (const auto& x : *list) {
        std::vector<std::string> parts;
        for (size_t r = 0; r < n; ++r) {
          std::string part = b.Name(r, x);
          if (b.cuda()) {
            net.ops.push_back(MakeOperatorDef("Copy", {part}, {part + host}));
            part += host;
          }
          if (weighted) {
            net.ops.push_back(MakeOperatorDef("Mul", {part, b.Name(r, kBatchShareBlob) + host}, {part + "/weighted"}));
            part += "/weighted";
          }
          parts.push_back(part);
        }
        net.ops.push_back(MakeOperatorDef("Sum", parts, {x}));
        if (n > 1 && !weighted)
          net.ops.push_back(MakeOperatorDef("Scale", {x}, {x}, {MakeArg("scale", 1.0 / static_cast<double>(n))}));
        net.external_outputs.push_back(x);
      }
  };
  if (k > 1) {
    replica_steps(out.accumulate, "accumulate");
    for_each_grad([&](size_t r, const std::string& grad) {
      out.accumulate.ops.push_back(b.On(r, MakeOperatorDef("Sum", {grad + "_acc", grad}, {grad + "_acc"})));
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
      train.ops.push_back(b.On(r, MakeOperatorDef("Sum", {grad, grad + "_acc"}, {grad})));
      AddExternalInput(train, grad + "_acc");
    });
  // Computed params (written in place by the replicas' forward ops) kept in
  // step; BMUF averages them in its block net instead.
  if (n > 1 && !model.computed_params.empty() && o.computed_params != ComputedParamsSync::kNone &&
      !o.bmuf.enabled) {
    const bool average = o.computed_params == ComputedParamsSync::kAverage;
    train.ops.push_back(b.Collective(average ? "Allreduce" : "Broadcast", b.PerReplica(model.computed_params),
                                     {average ? MakeArg("scale", 1.0 / static_cast<double>(n))
                                              : MakeArg("root", int64_t{0})}));
  }
  // One Allreduce per bucket; it depends only on its gradients, so the async
  // executor starts it while the rest of backward runs.
  if (!o.bmuf.enabled && n > 1)
    for (const auto& bucket : out.buckets) {
      std::vector<std::string> grads;
      for (const auto& p : bucket) grads.push_back(grad_of.at(p));
      train.ops.push_back(b.Collective("Allreduce", b.PerReplica(grads), {}));
    }
  // The learning rate lives on the host; CUDA updates read a copy on their device.
  for (size_t r = 0; r < updaters; ++r) {
    std::string lr = kLrBlob;
    if (b.cuda()) {
      lr = b.Name(r, kLrBlob);
      train.ops.push_back(b.On(r, MakeOperatorDef("Copy", {kLrBlob}, {lr})));
    }
    for (const auto& p : model.params) {
      const std::string w = b.Name(r, p);
      train.ops.push_back(b.On(r, OptimizerUpdateOp(opt, w, b.Name(r, grad_of.at(p)), lr)));
      for (const auto& st : OptimizerStateBlobs(opt, w)) AddExternalInput(train, st);
    }
  }
  if (k > 1)  // the next accumulation starts from zero
    for_each_grad([&](size_t r, const std::string& grad) {
      train.ops.push_back(
          b.On(r, MakeOperatorDef("ConstantFill", {grad + "_acc"}, {grad + "_acc"}, {MakeArg("value", 0.0)})));
    });
  ValidateNet(train);

  // ---- block (BMUF): average every replica's params and computed params,
  // then the block update on each replica (identical values, identical results).
  if (o.bmuf.enabled) {
    NetDef& block = out.block;
    block.name = name + "_parallel_block";
    out.block_length = o.bmuf.block_length;
    const double mu = o.bmuf.block_momentum < 0 ? 1.0 - 1.0 / static_cast<double>(n) : o.bmuf.block_momentum;
    block.ops.push_back(
        b.Collective("Allreduce", b.PerReplica(replicated), {MakeArg("scale", 1.0 / static_cast<double>(n))}));
    for (const auto& x : block.ops.back().inputs) AddExternalInput(block, x);
    for (size_t r = 0; r < n; ++r)
      for (const auto& p : model.params) {
        const std::string w = b.Name(r, p);
        block.ops.push_back(b.On(r, MakeOperatorDef("BmufUpdate", {w, w + "/bmuf_global", w + "/bmuf_delta"},
                                                    {w, w + "/bmuf_global", w + "/bmuf_delta"},
                                                    {MakeArg("block_lr", o.bmuf.block_lr), MakeArg("block_momentum", mu),
                                                     MakeArg("nesterov", int64_t{o.bmuf.nesterov})})));
        AddExternalInput(block, w + "/bmuf_global");
        AddExternalInput(block, w + "/bmuf_delta");
      }
    ValidateNet(block);
  }

  // ---- sync: everything a replica holds beyond its activations, from
  // replica 0, then a barrier.
  {
    NetDef& sync = out.sync;
    sync.name = name + "_parallel_sync";
    std::vector<std::string> state = replicated;
    for (const auto& p : o.shared_model ? std::vector<std::string>{} : model.params) {
      for (const auto& st : OptimizerStateBlobs(opt, p)) state.push_back(st);
      if (o.bmuf.enabled) {
        state.push_back(p + "/bmuf_global");
        state.push_back(p + "/bmuf_delta");
      }
    }
    if (n > 1 && !state.empty())
      sync.ops.push_back(b.Collective("Broadcast", b.PerReplica(state), {MakeArg("root", int64_t{0})}));
    if (!b.cuda()) {  // CUDA: Net::Run waits for the streams
      OperatorDef barrier = MakeOperatorDef("Barrier", {kCommBlob}, {});
      if (!sync.ops.empty()) barrier.control_inputs = {sync.ops.back().outputs.back()};  // after the broadcast
      sync.ops.push_back(std::move(barrier));
    }
    AddExternalInput(sync, kCommBlob);
    for (size_t r = 0; r < n; ++r)
      for (const auto& x : state) AddExternalInput(sync, b.Name(r, x));
    ValidateNet(sync);
  }

  // ---- eval: replica 0's params, everything else unscoped.
  NetDef& eval = out.eval;
  eval = InferenceNet(forward);
  eval.name = name + "_parallel_eval";
  std::set<std::string> replica_blobs(model.params.begin(), model.params.end());
  replica_blobs.insert(model.computed_params.begin(), model.computed_params.end());
  auto rename = [&](std::string& x) {
    if (replica_blobs.count(x)) x = b.Name(0, x);
  };
  for (auto& op : eval.ops) {
    for (auto& x : op.inputs) rename(x);
    for (auto& x : op.outputs) rename(x);
    op.device = b.device(0);
  }
  for (auto& x : eval.external_inputs) rename(x);
  ValidateNet(eval);
  return out;
}

}  // namespace dp
