// dp_checkpoint_*: saving and loading a workspace's tensors, and reading a
// checkpoint's header (src/checkpoint/).
#include <memory>

#include "capi/handles.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/workspace_checkpoint.h"
#include "checkpoint/write_pacer.h"
#include "exec/net.h"
#include "model/training.h"  // kIterBlob, TrainingStateBlobs

struct dp_checkpoint_job {
  std::unique_ptr<dp::AsyncCheckpointSave> save;
  std::string path;  // named by a timeout
};

struct dp_checkpoint_info {
  dp::CheckpointMeta meta;
  std::vector<dp::CheckpointEntry> entries;
};

// A file or directory argument: neither NULL nor empty.
#define DP_CHECK_PATH(p) \
  DP_CHECK_NOT_NULL(p);  \
  DP_CHECK_ARG((p)[0] != '\0', #p " is empty")

namespace {

// options->iteration, or with 0 the counter blob's value when it is saved.
int64_t IterationToRecord(const dp::Workspace& ws, const std::vector<std::string>& names, int64_t given) {
  if (given != 0) return given;
  bool saved = names.empty();
  for (const auto& n : names) saved = saved || n == dp::kIterBlob;
  const dp::Blob* b = ws.GetBlob(dp::kIterBlob);
  if (!saved || b == nullptr || !b->IsType<dp::Tensor>()) return -1;
  const std::shared_ptr<const dp::Tensor> held = b->Share<dp::Tensor>();  // a feed may replace it meanwhile
  const dp::Tensor& t = *held;
  if (t.dtype() != dp::DType::kInt64 || t.numel() != 1) return -1;
  if (t.device().type == dp::DeviceType::kCPU) return t.data<int64_t>()[0];
  dp::Tensor host;  // a step on one GPU keeps its counter there
  host.CopyFrom(t);
  return host.data<int64_t>()[0];
}

// What dp_checkpoint_save_options asks for, checked; `func` (the C
// function) names the call in errors.
struct SaveSettings {
  dp::CheckpointMeta meta;
  double async_write_share = dp::kDefaultAsyncWriteShare;
};

SaveSettings ReadSaveOptions(const dp::Workspace& ws, const std::vector<std::string>& blobs,
                             const dp_checkpoint_save_options* options, const std::string& model_name,
                             const char* func) {
  SaveSettings s;
  s.meta.model_name = model_name;
  int64_t iteration = 0;
  if (options != nullptr) {
    dp::capi::CheckOptionsSize(options, DP_OPTIONS_END(options, iteration), func);
    if (options->model_name != nullptr) s.meta.model_name = options->model_name;
    iteration = options->iteration;
    DP_ENFORCE_CODE(dp::ValidIteration(iteration), dp::Code::kInvalidArgument, func,
                    ": options->iteration must be >= -1 (-1: unknown, 0: from the counter), got ", iteration);
    if (DP_OPTIONS_HAVE(options, async_write_share) && options->async_write_share != 0) {
      s.async_write_share = options->async_write_share;
      dp::CheckWriteShare(s.async_write_share, dp::StrCat(func, ": options->async_write_share (0: the default)"));
    }
  }
  s.meta.iteration = IterationToRecord(ws, blobs, iteration);
  dp::CheckIteration(s.meta.iteration, dp::Code::kInvalidArgument,
                     dp::StrCat(func, ": the counter blob '", dp::kIterBlob, "' (the iteration to record)"));
  return s;
}

dp::LoadCheckpointOptions LoadOptions(const dp_checkpoint_load_options* options, const char* func) {
  dp::LoadCheckpointOptions o;
  if (options != nullptr) {
    dp::capi::CheckOptionsSize(options, DP_OPTIONS_END(options, num_names), func);
    o.bindings = dp::SameNames(dp::capi::Names(options->names, options->num_names, "options->names", func));
    if (DP_OPTIONS_HAVE(options, lenient)) o.lenient = options->lenient != 0;
    if (DP_OPTIONS_HAVE(options, no_verify)) o.verify = options->no_verify == 0;
    if (DP_OPTIONS_HAVE(options, mmap)) o.mapped = options->mmap != 0;
  }
  return o;
}

const dp::CheckpointEntry* Entry(const dp_checkpoint_info* info, size_t i) {
  return info != nullptr && i < info->entries.size() ? &info->entries[i] : nullptr;
}

}  // namespace

extern "C" {

void dp_checkpoint_save_options_init(dp_checkpoint_save_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

void dp_checkpoint_load_options_init(dp_checkpoint_load_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

dp_status* dp_checkpoint_save(const dp_workspace* workspace, const char* const* names, size_t num_names,
                              const char* path, const dp_checkpoint_save_options* options) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_PATH(path);
  const std::vector<std::string> list = dp::capi::Names(names, num_names, "names", __func__);
  const SaveSettings settings = ReadSaveOptions(*workspace->ws, list, options, "", __func__);
  dp::SaveCheckpoint(*workspace->ws, dp::SameNames(list), path, settings.meta);
  DP_API_END
}

dp_status* dp_checkpoint_save_async(const dp_workspace* workspace, const char* const* names, size_t num_names,
                                    const char* path, const dp_checkpoint_save_options* options,
                                    dp_checkpoint_job** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_PATH(path);
  DP_CHECK_NOT_NULL(out);
  const std::vector<std::string> list = dp::capi::Names(names, num_names, "names", __func__);
  SaveSettings settings = ReadSaveOptions(*workspace->ws, list, options, "", __func__);
  auto tensors = dp::SnapshotCheckpoint(*workspace->ws, dp::SameNames(list), path);
  auto job = std::make_unique<dp_checkpoint_job>();
  job->save = std::make_unique<dp::AsyncCheckpointSave>(std::move(tensors), path, std::move(settings.meta),
                                                    settings.async_write_share);
  job->path = path;
  *out = job.release();
  DP_API_END
}

dp_status* dp_checkpoint_wait(dp_checkpoint_job* job, int64_t timeout_ms) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(job);
  if (!job->save->Wait(timeout_ms))
    DP_THROW(dp::Code::kTimeout, "checkpoint '", job->path, "' is still being written after ", timeout_ms, " ms");
  DP_API_END
}

void dp_checkpoint_job_free(dp_checkpoint_job* job) { delete job; }

dp_status* dp_checkpoint_load(dp_workspace* workspace, const char* path, const dp_checkpoint_load_options* options) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_PATH(path);
  dp::LoadCheckpoint(*workspace->ws, path, LoadOptions(options, __func__));
  DP_API_END
}

dp_status* dp_checkpoint_list_steps(const char* dir, dp_string_list** out) {
  DP_API_BEGIN
  DP_CHECK_PATH(dir);
  DP_CHECK_NOT_NULL(out);
  *out = new dp_string_list{dp::ListStepCheckpoints(dir)};
  DP_API_END
}

dp_status* dp_checkpoint_prune(const char* dir, int32_t keep) {
  DP_API_BEGIN
  DP_CHECK_PATH(dir);
  DP_CHECK_ARG(keep >= 0, "keep must be >= 0, got ", keep);
  dp::PruneStepCheckpoints(dir, keep);
  DP_API_END
}

dp_status* dp_model_checkpoint_blobs(const dp_model* model, dp_string_list** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  *out = new dp_string_list{dp::TrainingStateBlobs(*model->def)};
  DP_API_END
}

// The whole tensors of a sharded optimizer state live in the workspace only
// while a save or load needs them: emptied when this goes.
class ShardedStateStaging {
 public:
  ShardedStateStaging(const dp::ParallelNets& nets, const std::shared_ptr<dp::Workspace>& ws)
      : nets_(nets), ws_(ws) {}
  ~ShardedStateStaging() {
    try {
      for (const auto& name : nets_.shard_full)
        if (dp::Blob* b = ws_->GetBlob(name)) b->Withdraw();
    } catch (...) {  // a lock that failed: the blobs stay, nothing is lost
    }
  }
  ShardedStateStaging(const ShardedStateStaging&) = delete;
  ShardedStateStaging& operator=(const ShardedStateStaging&) = delete;

 private:
  const dp::ParallelNets& nets_;
  const std::shared_ptr<dp::Workspace>& ws_;
};

dp_status* dp_parallel_model_save(const dp_parallel_model* model, const dp_workspace* workspace, const char* path,
                                  const dp_checkpoint_save_options* options) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_PATH(path);
  // A sharded optimizer state, whole for the file (every process gathers:
  // a collective), and emptied again however the save ends.
  ShardedStateStaging staging(model->nets, workspace->ws);
  if (!model->nets.shard_full.empty())
    dp::Net(std::make_shared<const dp::NetDef>(model->nets.shard_gather), workspace->ws).Run();
  if (model->nets.shard_id != 0) {
    // Every process holds the same state: rank 0 writes it; the others
    // still check their options so that a mistake shows on every rank.
    ReadSaveOptions(*workspace->ws, {}, options, model->model_name, __func__);
    return nullptr;
  }
  std::vector<dp::CheckpointBinding> bindings;
  std::vector<std::string> blobs;
  for (const auto& [name, blob] : model->nets.checkpoint) {
    bindings.push_back({name, blob});
    blobs.push_back(blob);
  }
  dp::CheckpointMeta meta = ReadSaveOptions(*workspace->ws, blobs, options, model->model_name, __func__).meta;
  meta.device_type = dp::DeviceTypeName(model->device_type);
  meta.replicas = static_cast<int32_t>(model->nets.scopes.size());
  meta.shards = model->nets.num_shards;
  dp::SaveCheckpoint(*workspace->ws, bindings, path, meta);
  DP_API_END
}

dp_status* dp_parallel_model_load(const dp_parallel_model* model, dp_workspace* workspace, const char* path,
                                  const dp_checkpoint_load_options* options) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_PATH(path);
  dp::LoadCheckpointOptions o = LoadOptions(options, __func__);
  DP_CHECK_ARG(o.bindings.empty(), "options->names: a parallel model loads its whole training state");
  for (const auto& [name, blob] : model->nets.checkpoint) o.bindings.push_back({name, blob});
  // A sharded optimizer state: the whole tensors loaded into staging blobs
  // (made first: a strict load replaces blobs), each replica's shard taken
  // of them, the staging emptied however the load ends.
  ShardedStateStaging staging(model->nets, workspace->ws);
  if (!model->nets.shard_full.empty())
    dp::Net(std::make_shared<const dp::NetDef>(model->nets.shard_stage), workspace->ws).Run();
  dp::LoadCheckpoint(*workspace->ws, path, o);
  if (!model->nets.shard_full.empty())
    dp::Net(std::make_shared<const dp::NetDef>(model->nets.shard_scatter), workspace->ws).Run();
  // FinalizeAfterCheckpoint: replica 0's state to every replica.
  dp::Net(std::make_shared<const dp::NetDef>(model->nets.sync), workspace->ws).Run();
  DP_API_END
}

dp_status* dp_checkpoint_info_from_file(const char* path, dp_checkpoint_info** out) {
  DP_API_BEGIN
  DP_CHECK_PATH(path);
  DP_CHECK_NOT_NULL(out);
  dp::CheckpointReader reader(path);
  auto info = std::make_unique<dp_checkpoint_info>();
  info->meta = reader.meta();
  info->entries = reader.entries();
  *out = info.release();
  DP_API_END
}

const char* dp_checkpoint_info_dp_version(const dp_checkpoint_info* info) {
  return info != nullptr ? info->meta.dp_version.c_str() : "";
}

const char* dp_checkpoint_info_model_name(const dp_checkpoint_info* info) {
  return info != nullptr ? info->meta.model_name.c_str() : "";
}

int64_t dp_checkpoint_info_iteration(const dp_checkpoint_info* info) {
  return info != nullptr ? info->meta.iteration : -1;
}

size_t dp_checkpoint_info_num_tensors(const dp_checkpoint_info* info) {
  return info != nullptr ? info->entries.size() : 0;
}

const char* dp_checkpoint_info_tensor_name(const dp_checkpoint_info* info, size_t i) {
  const dp::CheckpointEntry* e = Entry(info, i);
  return e != nullptr ? e->name.c_str() : nullptr;
}

int32_t dp_checkpoint_info_tensor_dtype(const dp_checkpoint_info* info, size_t i) {
  const dp::CheckpointEntry* e = Entry(info, i);
  return e != nullptr ? static_cast<int32_t>(e->dtype) : 0;
}

size_t dp_checkpoint_info_tensor_ndim(const dp_checkpoint_info* info, size_t i) {
  const dp::CheckpointEntry* e = Entry(info, i);
  return e != nullptr ? e->dims.size() : 0;
}

const int64_t* dp_checkpoint_info_tensor_dims(const dp_checkpoint_info* info, size_t i) {
  const dp::CheckpointEntry* e = Entry(info, i);
  return e != nullptr && !e->dims.empty() ? e->dims.data() : nullptr;
}

uint64_t dp_checkpoint_info_tensor_nbytes(const dp_checkpoint_info* info, size_t i) {
  const dp::CheckpointEntry* e = Entry(info, i);
  return e != nullptr ? e->length : 0;
}

void dp_checkpoint_info_free(dp_checkpoint_info* info) { delete info; }

}  // extern "C"
