#include "parallel/replicas.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "core/scope.h"
#include "model/training.h"  // kIterBlob
#include "ops/gradient_registry.h"  // MakeArg

namespace dp {
namespace {

// A collective of the template: over "this replica's tensors" (sync BN's).
bool IsCollective(const OperatorDef& op) {
  return (op.type == "Allreduce" || op.type == "Broadcast") && !op.inputs.empty() && op.inputs[0] == kCommBlob;
}

// Ops that talk to the other processes through the communicator: the
// collectives, the barrier, a sharded state's (comm/cpu_shard_ops.cc).
bool UsesComm(const OperatorDef& op) {
  static const char* const kTypes[] = {"Allreduce", "Broadcast", "Barrier", "ReduceScatter", "Allgather",
                                       "GatherShards"};
  return std::any_of(std::begin(kTypes), std::end(kTypes), [&](const char* t) { return op.type == t; }) &&
         !op.inputs.empty() && op.inputs[0] == kCommBlob;
}

}  // namespace

Replicas::Replicas(const ModelDef& model, const ParallelizeOptions& options)
    : options_(options), n_(options.device_ids.size()) {
  for (int32_t id : options.device_ids) {
    const DeviceOption d{options.device_type, id};
    // A device named again (one GPU twice, a testing aid) gets its
    // occurrence in the scope: "cuda_0/", then "cuda_0.1/".
    const auto again = std::count(devices_.begin(), devices_.end(), d);
    devices_.push_back(d);
    const std::string scope = ReplicaScope(d);
    scopes_.push_back(again == 0 ? scope : StrCat(scope.substr(0, scope.size() - 1), ".", again, "/"));
  }
  if (options.shared_model) shared_.insert(model.params.begin(), model.params.end());
}

Argument Replicas::NumDevicesArg() const { return MakeArg("num_devices", static_cast<int64_t>(n_)); }

std::string Replicas::BlobName(size_t r, const std::string& blob) const {
  // One communicator, one counter; one loss scale with its state.
  if (blob == kCommBlob || blob == kIterBlob || blob == kLossScaleBlob || blob == kLossScaleStepsBlob ||
      blob == kFoundInfBlob || blob == kLrStepBlob)
    return blob;
  return ScopedName(scopes_[shared_.count(blob) ? 0 : r], blob);
}

std::vector<std::vector<std::string>> Replicas::PerReplica(const std::vector<std::string>& list) const {
  std::vector<std::vector<std::string>> out(n_);
  for (size_t r = 0; r < n_; ++r)
    for (const auto& b : list) out[r].push_back(BlobName(r, b));
  return out;
}

OperatorDef Replicas::ScopedOp(const OperatorDef& op, size_t r) const {
  OperatorDef s = op;
  for (auto& b : s.inputs) b = BlobName(r, b);
  for (auto& b : s.outputs) b = BlobName(r, b);
  for (auto& b : s.control_inputs) b = BlobName(r, b);
  if (!s.name.empty()) s.name = ScopedName(scopes_[r], s.name);
  s.device = devices_[r];
  return s;
}

OperatorDef Replicas::On(size_t r, OperatorDef op) const {
  op.device = devices_[r];
  return op;
}

OperatorDef Replicas::Collective(const std::string& type, const std::vector<std::vector<std::string>>& per_replica,
                                 std::vector<Argument> args) const {
  std::vector<std::string> blobs;
  for (const auto& list : per_replica) blobs.insert(blobs.end(), list.begin(), list.end());
  std::vector<std::string> in{kCommBlob};
  in.insert(in.end(), blobs.begin(), blobs.end());
  args.insert(args.begin(), NumDevicesArg());
  // A stable name across processes and across nets made again (the sync net
  // of every dp_parallel_model_sync), so that the staged collective is
  // prepared once (comm/cpu_collectives.h StagingCache).
  const bool keyed = std::any_of(args.begin(), args.end(), [](const Argument& a) { return a.name == "key"; });
  if (!keyed && !blobs.empty()) args.push_back(MakeArg("key", type + ":" + blobs.front()));
  return On(0, MakeOperatorDef(type, std::move(in), std::move(blobs), std::move(args)));
}

void Replicas::AppendReplicated(NetDef& net, const NetDef& tmpl) const {
  for (const OperatorDef& op : tmpl.ops) {
    if (IsCollective(op)) {
      std::vector<std::string> tensors(op.inputs.begin() + 1, op.inputs.end());
      std::vector<Argument> args;
      for (const auto& a : op.args)
        if (a.name != "num_devices") args.push_back(a);
      net.ops.push_back(Collective(op.type, PerReplica(tensors), std::move(args)));
      continue;
    }
    for (size_t r = 0; r < n_; ++r) net.ops.push_back(ScopedOp(op, r));
  }
}

OperatorDef Replicas::CreateComm() const {
  std::vector<Argument> args;
  args.reserve(8);
  if (cuda()) {
    args.push_back(MakeArg("device_ids", std::vector<int64_t>(options_.device_ids.begin(), options_.device_ids.end())));
    args.push_back(MakeArg("nccl", int64_t{options_.nccl}));
  } else {
    args.push_back(NumDevicesArg());
  }
  // Several processes: where they meet (both communicators); how the CPU
  // ones talk (CUDA replicas use NCCL).
  if (options_.num_shards > 1) {
    args.push_back(MakeArg("world_size", int64_t{options_.num_shards}));
    args.push_back(MakeArg("rank", int64_t{options_.shard_id}));
    args.push_back(MakeArg("store", options_.store));
    args.push_back(MakeArg("timeout_ms", options_.timeout_ms));
    args.push_back(MakeArg("run_id", options_.run_id));
    if (!cuda() && !options_.interface.empty()) args.push_back(MakeArg("interface", options_.interface));
    if (!cuda() && options_.local_transport != "auto")
      args.push_back(MakeArg("local_transport", options_.local_transport));
  }
  return MakeOperatorDef(cuda() ? "CreateCudaCollectives" : "CreateCpuCollectives", {}, {kCommBlob}, std::move(args));
}

void OrderCollectives(NetDef& net) {
  const OperatorDef* previous = nullptr;
  for (OperatorDef& op : net.ops) {
    if (!UsesComm(op)) continue;
    // After the previous one: a control input on a tensor it wrote (every
    // collective but the barrier writes its tensors in place).
    if (previous != nullptr && !previous->outputs.empty()) {
      const std::string& after = previous->outputs.back();
      if (std::find(op.control_inputs.begin(), op.control_inputs.end(), after) == op.control_inputs.end())
        op.control_inputs.push_back(after);
    }
    previous = &op;
  }
}

}  // namespace dp
