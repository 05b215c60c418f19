// dp_model_parallelize, its options and the data-parallel model handle.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string>

#include "capi/handles.h"
#include "comm/process_group.h"
#include "core/device.h"
#include "core/utf8.h"
#include "cuda/cuda_runtime.h"

namespace {

// An environment variable that dp-run (or the user) set, or nothing.
std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// A whole decimal number in [lo, hi] from the environment.
std::optional<int64_t> EnvInt(const char* name, int64_t lo, int64_t hi) {
  const auto v = Env(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  DP_ENFORCE(errno == 0 && end != nullptr && *end == '\0' && x >= lo && x <= hi,
             "dp_model_parallelize: environment variable ", name, "='", v->substr(0, 40),
             "' must be a whole number in [", lo, ", ", hi, "]");
  return x;
}

// The several-processes fields of dp_parallel_options, each falling back to
// its environment variable (what dp-run sets) when zero or NULL.
void ReadShardOptions(const dp_parallel_options* options, dp::ParallelizeOptions& o) {
  static constexpr const char* kApi = "dp_model_parallelize";
  const bool have = DP_OPTIONS_HAVE(options, run_id);
  int32_t shards = have ? options->num_shards : 0;
  int32_t shard = have ? options->shard_id : 0;
  DP_ENFORCE(shards >= 0, kApi, ": options->num_shards must be >= 0 (0: DP_WORLD_SIZE or 1), got ", shards);
  if (shards == 0) {
    shards = 1;
    if (const auto world = EnvInt("DP_WORLD_SIZE", 1, 1 << 20)) {
      shards = static_cast<int32_t>(*world);
      const auto rank = EnvInt("DP_RANK", 0, *world - 1);
      DP_ENFORCE(rank.has_value() || *world == 1, kApi, ": environment variable DP_WORLD_SIZE=", *world,
                 " is set but DP_RANK is not (dp-run sets both)");
      DP_ENFORCE(shard == 0, kApi, ": options->shard_id ", shard, " with num_shards 0: the rank comes from DP_RANK");
      shard = static_cast<int32_t>(rank.value_or(0));
    }
  }
  DP_ENFORCE(shard >= 0 && shard < shards, kApi, ": options->shard_id ", shard, " must be in [0, num_shards ",
             shards, ")");
  o.num_shards = shards;
  o.shard_id = shard;
  const int64_t timeout = have ? options->timeout_ms : 0;
  DP_ENFORCE(timeout >= 0, kApi, ": options->timeout_ms must be >= 0 (0: DP_TIMEOUT_MS or 60000), got ", timeout);
  auto check_run_id = [&](const char* from) {
    DP_ENFORCE(!o.run_id.empty() && o.run_id.size() <= 200 && o.run_id.find('/') == std::string::npos &&
                   dp::FindInvalidUtf8(o.run_id) == std::string::npos,
               kApi, ": the run id '", o.run_id.substr(0, 40), "' (", from, ") must be 1 to 200 bytes of UTF-8 ",
               "without '/'");
  };
  const char* run_id = have ? options->run_id : nullptr;
  if (run_id != nullptr) {
    o.run_id = run_id;
    check_run_id("options->run_id");
  }
  auto check_transport = [&](const char* from) {
    DP_ENFORCE(dp::IsLocalTransport(o.local_transport), kApi, ": ",
               from, " '", o.local_transport.substr(0, 40), "' must be \"auto\", \"shm\" or \"tcp\"");
  };
  if (DP_OPTIONS_HAVE(options, memory))
    o.memory = dp::capi::CheckedMemoryMode(options->memory, dp::MemoryMode::kShare, "options->memory", kApi);
  if (DP_OPTIONS_HAVE(options, gradient_compression)) {
    const int32_t c = options->gradient_compression;
    DP_ENFORCE_CODE(c >= DP_GRADIENT_COMPRESSION_NONE && c <= DP_GRADIENT_COMPRESSION_FP16, dp::Code::kInvalidArgument,
                    kApi, ": options->gradient_compression ", c, " is not a DP_GRADIENT_COMPRESSION_* value");
    o.gradient_compression = c == DP_GRADIENT_COMPRESSION_BF16   ? dp::DType::kBFloat16
                             : c == DP_GRADIENT_COMPRESSION_FP16 ? dp::DType::kFloat16
                                                                 : dp::DType::kUndefined;
  }
  if (DP_OPTIONS_HAVE(options, shard_optimizer_state)) {
    DP_ENFORCE_CODE(options->shard_optimizer_state == 0 || options->shard_optimizer_state == 1,
                    dp::Code::kInvalidArgument, kApi, ": options->shard_optimizer_state must be 0 or 1, got ",
                    options->shard_optimizer_state);
    o.shard_optimizer_state = options->shard_optimizer_state != 0;
  }
  if (DP_OPTIONS_HAVE(options, loss_scaling)) {
    DP_ENFORCE_CODE(options->loss_scaling == DP_LOSS_SCALING_NONE || options->loss_scaling == DP_LOSS_SCALING_DYNAMIC,
                    dp::Code::kInvalidArgument, kApi, ": options->loss_scaling ", options->loss_scaling,
                    " is not a DP_LOSS_SCALING_* value");
    o.loss_scaling.dynamic = options->loss_scaling == DP_LOSS_SCALING_DYNAMIC;
    DP_ENFORCE_CODE(options->initial_loss_scale >= 0 && options->initial_loss_scale <= 3.4e38,
                    dp::Code::kInvalidArgument, kApi, ": options->initial_loss_scale must be a positive float (0: ",
                    "65536), got ", options->initial_loss_scale);
    if (options->initial_loss_scale != 0) o.loss_scaling.initial = options->initial_loss_scale;
  }
  const char* transport = DP_OPTIONS_HAVE(options, local_transport) ? options->local_transport : nullptr;
  if (transport != nullptr) {
    o.local_transport = transport;
    check_transport("options->local_transport");
  }
  // The environment only matters with several processes: one process is
  // not affected by variables meant for others.
  if (shards == 1) return;
  const char* store = have ? options->store : nullptr;
  if (store != nullptr) {
    o.store = store;
  } else if (auto v = Env("DP_STORE")) {
    o.store = *v;
  }
  if (timeout > 0) {
    o.timeout_ms = timeout;
  } else if (auto v = EnvInt("DP_TIMEOUT_MS", 1, int64_t{24} * 3600 * 1000)) {
    o.timeout_ms = *v;
  }
  const char* iface = have ? options->network_interface : nullptr;
  if (iface != nullptr) {
    o.interface = iface;
  } else if (auto v = Env("DP_INTERFACE")) {
    o.interface = *v;
  }
  if (run_id == nullptr)
    if (auto v = Env("DP_RUN_ID")) {
      o.run_id = *v;
      check_run_id("DP_RUN_ID");
    }
  if (transport == nullptr)
    if (auto v = Env("DP_LOCAL_TRANSPORT")) {
      o.local_transport = *v;
      check_transport("environment variable DP_LOCAL_TRANSPORT");
    }
}

}  // namespace

extern "C" {

void dp_parallel_options_init(dp_parallel_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

dp_status* dp_model_parallelize(const dp_model* model, const dp_parallel_options* options,
                                dp_parallel_model** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(options);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_OPTIONS_SIZE(options, no_fuse);
  // Zero means default throughout: the C struct's zeros map to the engine's
  // defaults here (dp::ParallelizeOptions keeps its own).
  DP_CHECK_ARG(options->device_type == DP_DEVICE_CPU || options->device_type == DP_DEVICE_CUDA,
               "options->device_type ", options->device_type, " is not a device type");
  DP_CHECK_ARG(options->device_ids != nullptr || options->num_devices == 0,
               "options->device_ids is NULL but options->num_devices is ", options->num_devices);
  DP_CHECK_ARG(options->device_ids == nullptr || options->num_devices > 0,
               "options->device_ids is set but options->num_devices is 0: no devices (leave device_ids NULL "
               "for every device)");
  DP_CHECK_ARG(options->first_bucket_bytes >= 0, "options->first_bucket_bytes must be >= 0 (0: 1 MiB), got ",
               options->first_bucket_bytes);
  DP_CHECK_ARG(options->bucket_bytes >= 0, "options->bucket_bytes must be >= 0 (0: 25 MiB), got ",
               options->bucket_bytes);
  dp::ParallelizeOptions o;
  o.device_type = static_cast<dp::DeviceType>(options->device_type);
  if (options->device_ids != nullptr) {
    o.device_ids.assign(options->device_ids, options->device_ids + options->num_devices);
  } else {
    // The default device set: every device of the type (CPU: one, cpu:0).
    const int count = dp::DeviceCount(o.device_type);
    DP_ENFORCE_CODE(count > 0, dp::Code::kUnavailable, __func__, ": options->device_ids is NULL (every ",
                    dp::DeviceTypeName(o.device_type), " device), but ",
                    !dp::DeviceTypeCompiledIn(o.device_type) ? std::string("dp was built without it")
                    : o.device_type == dp::DeviceType::kCUDA
                        ? "no such device is visible (" + dp::cuda::Probe().detail + ")"
                        : std::string("no such device is visible"));
    o.device_ids.resize(static_cast<size_t>(count));
    std::iota(o.device_ids.begin(), o.device_ids.end(), 0);
  }
  if (options->first_bucket_bytes != 0) o.first_bucket_bytes = options->first_bucket_bytes;
  if (options->bucket_bytes != 0) o.bucket_bytes = options->bucket_bytes;
  o.uneven_split = options->uneven_split != 0;
  o.fuse = options->no_fuse == 0;
  if (DP_OPTIONS_HAVE(options, accumulate_steps)) {
    DP_CHECK_ARG(options->accumulate_steps >= 0, "options->accumulate_steps must be >= 0 (0: 1), got ",
                 options->accumulate_steps);
    if (options->accumulate_steps != 0) o.accumulate_steps = options->accumulate_steps;
  }
  if (DP_OPTIONS_HAVE(options, bmuf_block_length) && options->bmuf != 0) {
    o.bmuf.enabled = true;
    const double lr = options->bmuf_block_lr;
    DP_CHECK_ARG(lr >= 0, "options->bmuf_block_lr must be > 0 (0: 1.0), got ", lr);
    if (lr != 0) o.bmuf.block_lr = lr;
    // The engine's block_momentum: negative = 1 - 1/N, else mu itself.
    const double mu = options->bmuf_block_momentum;
    DP_CHECK_ARG(!std::isnan(mu) && mu < 1,
                 "options->bmuf_block_momentum must be < 1 (0: 1 - 1/replicas, negative: none), got ", mu);
    o.bmuf.block_momentum = mu == 0 ? -1.0 : (mu < 0 ? 0.0 : mu);
    o.bmuf.nesterov = options->bmuf_no_nesterov == 0;
    DP_CHECK_ARG(options->bmuf_block_length >= 0, "options->bmuf_block_length must be >= 0 (0: 8), got ",
                 options->bmuf_block_length);
    if (options->bmuf_block_length != 0) o.bmuf.block_length = options->bmuf_block_length;
  }
  if (DP_OPTIONS_HAVE(options, computed_params)) {
    DP_CHECK_ARG(options->computed_params >= DP_COMPUTED_PARAMS_BROADCAST &&
                     options->computed_params <= DP_COMPUTED_PARAMS_NONE,
                 "options->computed_params ", options->computed_params, " is not a DP_COMPUTED_PARAMS_* value");
    o.computed_params = static_cast<dp::ComputedParamsSync>(options->computed_params);
  }
  if (DP_OPTIONS_HAVE(options, cuda_collectives)) {
    DP_CHECK_ARG(options->cuda_collectives == DP_CUDA_COLLECTIVES_NCCL ||
                     options->cuda_collectives == DP_CUDA_COLLECTIVES_TREE,
                 "options->cuda_collectives ", options->cuda_collectives, " is not a DP_CUDA_COLLECTIVES_* value");
    o.nccl = options->cuda_collectives == DP_CUDA_COLLECTIVES_NCCL;
  }
  if (DP_OPTIONS_HAVE(options, shared_model)) {
    DP_CHECK_ARG(options->shared_model == DP_SHARED_MODEL_OFF || options->shared_model == DP_SHARED_MODEL_ON ||
                     options->shared_model == DP_SHARED_MODEL_AUTO,
                 "options->shared_model ", options->shared_model, " is not a DP_SHARED_MODEL_* value");
    o.shared_model = options->shared_model == DP_SHARED_MODEL_ON;
    o.shared_model_auto = options->shared_model == DP_SHARED_MODEL_AUTO;
  }
  if (DP_OPTIONS_HAVE(options, sync_bn)) o.sync_bn = options->sync_bn != 0;
  ReadShardOptions(options, o);
  dp::ModelDef overridden;
  const dp::ModelDef& m = dp::capi::ModelWithLr(*model->def, DP_OPTIONS_HAVE(options, lr) ? options->lr : 0.0,
                                                &overridden, __func__);
  auto h = std::make_unique<dp_parallel_model>();
  h->nets = dp::Parallelize(m, o);
  h->model_name = m.name;
  h->device_type = o.device_type;
  *out = h.release();
  DP_API_END
}

dp_status* dp_parallel_model_nets(const dp_parallel_model* model, dp_netdef** out_init, dp_netdef** out_train,
                                  dp_netdef** out_eval) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  auto init = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(model->nets.init));
  auto train = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(model->nets.train));
  auto eval = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(model->nets.eval));
  if (out_init) *out_init = init.release();
  if (out_train) *out_train = train.release();
  if (out_eval) *out_eval = eval.release();
  DP_API_END
}

dp_status* dp_parallel_model_accumulate_net(const dp_parallel_model* model, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  DP_ENFORCE_CODE(!model->nets.accumulate.ops.empty(), dp::Code::kFailedPrecondition,
                  "dp_parallel_model_accumulate_net: the model was parallelized without gradient accumulation "
                  "(accumulate_steps 1)");
  *out = dp::capi::NewNetDef(model->nets.accumulate);
  DP_API_END
}

dp_status* dp_parallel_model_block_net(const dp_parallel_model* model, dp_netdef** out, int32_t* out_block_length) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  DP_ENFORCE_CODE(!model->nets.block.ops.empty(), dp::Code::kFailedPrecondition,
                  "dp_parallel_model_block_net: the model was parallelized without BMUF");
  *out = dp::capi::NewNetDef(model->nets.block);
  if (out_block_length != nullptr) *out_block_length = model->nets.block_length;
  DP_API_END
}

dp_status* dp_parallel_model_sync_net(const dp_parallel_model* model, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  *out = dp::capi::NewNetDef(model->nets.sync);
  DP_API_END
}

dp_status* dp_parallel_model_sync(const dp_parallel_model* model, dp_workspace* workspace) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(workspace);
  dp::Net(std::make_shared<const dp::NetDef>(model->nets.sync), workspace->ws).Run();
  DP_API_END
}

dp_status* dp_parallel_model_join(const dp_parallel_model* model, dp_workspace* workspace, int64_t* out_steps) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(workspace);
  const dp::ParallelNets& nets = model->nets;
  int64_t steps = 0;
  if (nets.num_shards > 1) {
    DP_ENFORCE_CODE(!nets.join_collectives.ops.empty(), dp::Code::kFailedPrecondition,
                    "dp_parallel_model_join: a model parallelized with BMUF or sync BN cannot join (their ",
                    "collectives cannot be shadowed); give every process the same number of batches");
    dp::Net collectives(std::make_shared<const dp::NetDef>(nets.join_collectives), workspace->ws);
    dp::Net update(std::make_shared<const dp::NetDef>(nets.join_update), workspace->ws);
    const std::string count_blob = dp::JoinCountBlob(nets);
    for (;;) {
      collectives.Run();
      // Active replicas in this step (bucket 0's flags, summed): none left
      // means every process has joined, and nobody updates.
      const dp::Tensor count = workspace->ws->GetTensor(count_blob);
      if (count.data<float>()[0] < 0.5f) break;
      update.Run();
      ++steps;
    }
  }
  if (out_steps != nullptr) *out_steps = steps;
  DP_API_END
}

size_t dp_parallel_model_num_replicas(const dp_parallel_model* model) {
  return model == nullptr ? 0 : model->nets.scopes.size();
}

int32_t dp_parallel_model_num_shards(const dp_parallel_model* model) {
  return model == nullptr ? 0 : model->nets.num_shards;
}

int32_t dp_parallel_model_shard_id(const dp_parallel_model* model) {
  return model == nullptr ? -1 : model->nets.shard_id;
}

const char* dp_parallel_model_scope(const dp_parallel_model* model, size_t i) {
  if (model == nullptr || i >= model->nets.scopes.size()) return nullptr;
  return model->nets.scopes[i].c_str();
}

void dp_parallel_model_free(dp_parallel_model* model) { delete model; }

}  // extern "C"
