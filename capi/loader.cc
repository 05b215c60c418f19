// dp_loader_*: the input pipeline (data/loader.h, data/device_loader.h); dp_set_cpu_threads and
// dp_cpu_threads: the thread budget (core/cpu_budget.h).
#include "capi/handles.h"
#include "core/cpu_budget.h"
#include "data/device_loader.h"
#include "data/loader.h"

struct dp_loader {
  std::unique_ptr<dp::BatchLoader> loader;
};

namespace {

// dp_loader_options, checked here so that errors name its fields (the
// engine's LoaderOptions differ: drop_last, shard).
dp::LoaderOptions ReadOptions(const dp_loader_options* options, const char* func) {
  DP_ENFORCE_CODE(options != nullptr, dp::Code::kInvalidArgument, func,
                  ": options is NULL (options->batch_size has no default)");
  dp::capi::CheckOptionsSize(options, DP_OPTIONS_END(options, batch_size), func);
  dp::LoaderOptions o;
  o.batch_size = options->batch_size;
  DP_CHECK_ARG_IN(func, o.batch_size > 0, "options->batch_size must be > 0, got ", o.batch_size);
  if (DP_OPTIONS_HAVE(options, seed)) o.seed = options->seed;
  if (DP_OPTIONS_HAVE(options, no_shuffle)) o.shuffle = options->no_shuffle == 0;
  if (DP_OPTIONS_HAVE(options, keep_last)) o.drop_last = options->keep_last == 0;
  if (DP_OPTIONS_HAVE(options, num_shards)) {
    DP_CHECK_ARG_IN(func, options->num_shards >= 0, "options->num_shards must be >= 0 (0: 1), got ",
                    options->num_shards);
    if (options->num_shards != 0) o.num_shards = options->num_shards;
  }
  if (DP_OPTIONS_HAVE(options, shard_id)) o.shard = options->shard_id;
  DP_CHECK_ARG_IN(func, o.shard >= 0 && o.shard < o.num_shards, "options->shard_id ", o.shard,
                  " must be in [0, num_shards ", o.num_shards, ")");
  DP_CHECK_ARG_IN(func, o.batch_size % o.num_shards == 0, "options->batch_size ", o.batch_size,
                  " does not divide by options->num_shards ", o.num_shards, " (the processes sharing each batch)");
  DP_CHECK_ARG_IN(func, o.num_shards == 1 || o.drop_last, "options->keep_last must be 0 with several processes ",
                  "(num_shards ", o.num_shards, "): a last partial batch cannot be split evenly");
  if (DP_OPTIONS_HAVE(options, prefetch) && options->prefetch != 0) {
    DP_CHECK_ARG_IN(func, options->prefetch > 0 && options->prefetch <= 64,
                    "options->prefetch must be in 1..64 (0: 2), got ", options->prefetch);
    o.prefetch = options->prefetch;
  }
  if (DP_OPTIONS_HAVE(options, timeout_ms) && options->timeout_ms != 0) {
    DP_CHECK_ARG_IN(func, options->timeout_ms > 0, "options->timeout_ms must be > 0 (0: 60000), got ",
                    options->timeout_ms);
    o.timeout = std::chrono::milliseconds(options->timeout_ms);
  }
  return o;
}

// Where the dataset lives: options->device_type / device_id.
dp::DeviceOption ReadDevice(const dp_loader_options* options, const char* func) {
  if (!DP_OPTIONS_HAVE(options, device_id)) return {};
  DP_CHECK_ARG_IN(func, options->device_type == DP_DEVICE_CPU || options->device_type == DP_DEVICE_CUDA,
                  "options->device_type must be DP_DEVICE_CPU (0) or DP_DEVICE_CUDA, got ", options->device_type);
  if (options->device_type == DP_DEVICE_CPU) {
    DP_CHECK_ARG_IN(func, options->device_id == 0, "options->device_id must be 0 for the host, got ",
                    options->device_id);
    return {};
  }
  DP_CHECK_ARG_IN(func, options->device_id >= 0, "options->device_id must be >= 0, got ", options->device_id);
  return {dp::DeviceType::kCUDA, options->device_id};
}

// Whether a dataset for a GPU stays in host memory: options->host_dataset.
bool ReadHostDataset(const dp_loader_options* options, dp::DeviceOption device, const char* func) {
  if (!DP_OPTIONS_HAVE(options, host_dataset) || options->host_dataset == 0) return false;
  DP_CHECK_ARG_IN(func, options->host_dataset == 1, "options->host_dataset must be 0 or 1, got ",
                  options->host_dataset);
  DP_CHECK_ARG_IN(func, device.type != dp::DeviceType::kCPU,
                  "options->host_dataset is 1 but options->device_type is the host: the dataset is in host memory "
                  "anyway (set device_type DP_DEVICE_CUDA to stage its batches to a GPU)");
  return true;
}

// Blob names: none empty, none repeated; `what(i)` names name i as the
// caller passed it ("blob_names[1]", "inputs[1].blob").
template <class What>
void CheckBlobNames(const std::vector<dp::LoaderInput>& inputs, What what, const char* func) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    DP_CHECK_ARG_IN(func, !inputs[i].blob.empty(), what(i), " is empty");
    for (size_t j = 0; j < i; ++j)
      DP_CHECK_ARG_IN(func, inputs[i].blob != inputs[j].blob, what(i), " '", inputs[i].blob,
                      "' is named by two inputs (", what(j), " too)");
  }
}

// The engine's own errors (the dataset's, a batch that does not fit it),
// with the function's name in front.
template <class Make>
std::unique_ptr<dp::BatchLoader> NewLoader(Make make, const char* func) {
  try {
    return make();
  } catch (dp::Error& e) {
    throw e.Prepend(func);
  }
}

// Runs the caller's fill function; a nonzero return fails the batch.
class CallbackSource final : public dp::BatchSource {
 public:
  CallbackSource(int64_t size, dp_loader_fill_fn fill, void* user_data, size_t num_inputs)
      : size_(size), fill_(fill), user_data_(user_data), num_inputs_(num_inputs) {}
  int64_t size() const override { return size_; }
  void Fill(const int64_t* indices, size_t count, void* const* buffers, const size_t* row_bytes) override {
    const int32_t rc = fill_(user_data_, indices, count, buffers, row_bytes, num_inputs_);
    DP_ENFORCE_CODE(rc == 0, dp::Code::kInternal, "the loader's fill callback returned ", rc);
  }

 private:
  int64_t size_;
  dp_loader_fill_fn fill_;
  void* user_data_;
  size_t num_inputs_;
};

}  // namespace

extern "C" {

dp_status* dp_set_cpu_threads(int32_t max_threads) {
  DP_API_BEGIN
  DP_CHECK_ARG(max_threads >= 0, "max_threads must be >= 0 (0: no cap), got ", max_threads);
  dp::SetCpuThreadLimit(max_threads);
  DP_API_END
}

int32_t dp_cpu_threads(void) { return dp::CpuBudget(); }

void dp_loader_options_init(dp_loader_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

dp_status* dp_loader_create(dp_workspace* workspace, const char* const* blob_names, const dp_tensor* const* tensors,
                            size_t num_inputs, const dp_loader_options* options, dp_loader** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(num_inputs > 0, "num_inputs is 0: a loader feeds at least one blob");
  DP_CHECK_NOT_NULL(blob_names);
  DP_CHECK_NOT_NULL(tensors);
  dp::LoaderOptions o = ReadOptions(options, __func__);
  const dp::DeviceOption device = ReadDevice(options, __func__);
  const bool staged = ReadHostDataset(options, device, __func__);
  std::vector<dp::LoaderInput> inputs;
  std::vector<dp::Tensor> data;
  for (size_t i = 0; i < num_inputs; ++i) {
    DP_CHECK_ARG(blob_names[i] != nullptr, "blob_names[", i, "] is NULL");
    DP_CHECK_ARG(tensors[i] != nullptr, "tensors[", i, "] is NULL");
    const dp::Tensor& t = tensors[i]->tensor;
    DP_ENFORCE_CODE(t.ndim() >= 1, dp::Code::kShape, __func__, ": tensors[", i, "] ", t.DebugString(),
                    " for blob '", blob_names[i], "' has no sample dimension (dim 0)");
    inputs.push_back({blob_names[i], t.dtype(), dp::Dims(t.dims().begin() + 1, t.dims().end())});
    data.push_back(t);
  }
  CheckBlobNames(inputs, [](size_t i) { return dp::StrCat("blob_names[", i, "]"); }, __func__);
  auto loader = NewLoader(
      [&]() -> std::unique_ptr<dp::BatchLoader> {
        if (device.type != dp::DeviceType::kCPU && !staged) {
          std::vector<std::string> blobs;
          for (const dp::LoaderInput& in : inputs) blobs.push_back(in.blob);
          return std::make_unique<dp::DeviceLoader>(workspace->ws, blobs, data, device, o);
        }
        o.target = device;  // the host, or the GPU the batches are staged to
        return std::make_unique<dp::Loader>(workspace->ws, std::move(inputs), dp::MakeTensorSource(std::move(data)),
                                            o);
      },
      __func__);
  *out = new dp_loader{std::move(loader)};
  DP_API_END
}

dp_status* dp_loader_create_callback(dp_workspace* workspace, const dp_loader_input* inputs, size_t num_inputs,
                                     int64_t num_samples, dp_loader_fill_fn fill, void* user_data,
                                     const dp_loader_options* options, dp_loader** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_NOT_NULL(inputs);
  DP_CHECK_NOT_NULL(fill);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(num_inputs > 0, "num_inputs is 0: a loader feeds at least one blob");
  DP_CHECK_ARG(num_samples > 0, "num_samples must be positive, got ", num_samples);
  dp::LoaderOptions o = ReadOptions(options, __func__);
  o.target = ReadDevice(options, __func__);  // a GPU: the batches are staged there
  ReadHostDataset(options, o.target, __func__);  // checked only: a callback's samples are on the host
  std::vector<dp::LoaderInput> in;
  for (size_t i = 0; i < num_inputs; ++i) {
    const dp_loader_input& x = inputs[i];
    DP_CHECK_ARG(x.blob != nullptr, "inputs[", i, "].blob is NULL");
    DP_CHECK_ARG(x.sample_dims != nullptr || x.sample_ndim == 0, "inputs[", i, "].sample_dims is NULL");
    DP_CHECK_ARG(x.sample_ndim <= 32, "inputs[", i, "].sample_ndim is ", x.sample_ndim, " (at most 32)");
    dp::DType dtype;
    DP_ENFORCE_CODE(dp::DTypeFromInt(x.dtype, &dtype), dp::Code::kDType, __func__, ": inputs[", i,
                    "].dtype ", x.dtype, " is not a DP_DTYPE_* value");
    dp::Dims dims(x.sample_dims, x.sample_dims + x.sample_ndim);
    for (int64_t d : dims) DP_CHECK_ARG(d >= 0, "inputs[", i, "].sample_dims holds a negative dim ", d);
    in.push_back({x.blob, dtype, std::move(dims)});
  }
  CheckBlobNames(in, [](size_t i) { return dp::StrCat("inputs[", i, "].blob"); }, __func__);
  auto loader = NewLoader(
      [&] {
        return std::make_unique<dp::Loader>(
            workspace->ws, std::move(in), std::make_unique<CallbackSource>(num_samples, fill, user_data, num_inputs),
            o);
      },
      __func__);
  *out = new dp_loader{std::move(loader)};
  DP_API_END
}

dp_status* dp_loader_next(dp_loader* loader, int32_t* out_fed) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(loader);
  DP_CHECK_NOT_NULL(out_fed);
  *out_fed = loader->loader->Next() ? 1 : 0;
  DP_API_END
}

dp_status* dp_loader_seek(dp_loader* loader, int64_t epoch, int64_t step) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(loader);
  try {
    loader->loader->Seek(epoch, step);
  } catch (dp::Error& e) {
    throw e.Prepend(__func__);
  }
  DP_API_END
}

int64_t dp_loader_steps_per_epoch(const dp_loader* loader) { return loader ? loader->loader->steps_per_epoch() : 0; }
int64_t dp_loader_epoch(const dp_loader* loader) { return loader ? loader->loader->epoch() : 0; }
int64_t dp_loader_step(const dp_loader* loader) { return loader ? loader->loader->step() : 0; }
int64_t dp_loader_batch_rows(const dp_loader* loader) { return loader ? loader->loader->batch_rows() : 0; }

void dp_loader_free(dp_loader* loader) { delete loader; }

}  // extern "C"
