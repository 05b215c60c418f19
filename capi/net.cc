// dp_netdef and dp_net.
#include "capi/handles.h"
#include "graph/task_graph.h"
#include "graph/net_format.h"
#include "ops/net_validate.h"

namespace {

// Netdefs from outside (buffers, JSON, files) are validated once, here.
dp_netdef* ValidatedNetDef(dp::NetDef def) {
  dp::ValidateNet(def);
  return dp::capi::NewNetDef(std::move(def));
}

dp_buffer* NewBuffer(std::string bytes) { return new dp_buffer{std::move(bytes)}; }

}  // namespace

extern "C" {

dp_status* dp_netdef_from_buffer(const void* data, size_t size, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::capi::CheckInputBytes(data, size, "data", __func__);
  *out = ValidatedNetDef(dp::NetDefFromBuffer(data, size));
  DP_API_END
}

dp_status* dp_netdef_from_json(const char* json, size_t size, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::capi::CheckInputBytes(json, size, "json", __func__);
  *out = ValidatedNetDef(dp::NetDefFromJson(std::string_view(json, size)));
  DP_API_END
}

dp_status* dp_netdef_from_file(const char* path, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(path);
  DP_CHECK_NOT_NULL(out);
  dp::NetDef def = dp::NetDefFromFile(path);
  try {
    *out = ValidatedNetDef(std::move(def));
  } catch (dp::Error& e) {
    throw e.Prepend(dp::StrCat("file '", path, "'"));
  }
  DP_API_END
}

dp_status* dp_netdef_to_buffer(const dp_netdef* netdef, dp_buffer** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(netdef);
  DP_CHECK_NOT_NULL(out);
  *out = NewBuffer(dp::NetDefToBuffer(*netdef->def));
  DP_API_END
}

dp_status* dp_netdef_to_json(const dp_netdef* netdef, dp_buffer** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(netdef);
  DP_CHECK_NOT_NULL(out);
  *out = NewBuffer(dp::NetDefToJson(*netdef->def));  // std::string keeps a NUL after size()
  DP_API_END
}

dp_status* dp_netdef_to_dot(const dp_netdef* netdef, dp_buffer** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(netdef);
  DP_CHECK_NOT_NULL(out);
  *out = NewBuffer(dp::NetDefToDot(*netdef->def));
  DP_API_END
}

const void* dp_buffer_data(const dp_buffer* buffer) { return buffer ? buffer->bytes.data() : nullptr; }

size_t dp_buffer_size(const dp_buffer* buffer) { return buffer ? buffer->bytes.size() : 0; }

void dp_buffer_free(dp_buffer* buffer) { delete buffer; }

const char* dp_netdef_name(const dp_netdef* netdef) { return netdef ? netdef->def->name.c_str() : ""; }

size_t dp_netdef_num_ops(const dp_netdef* netdef) { return netdef ? netdef->def->ops.size() : 0; }

void dp_netdef_free(dp_netdef* netdef) { delete netdef; }

void dp_net_options_init(dp_net_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

dp_status* dp_net_create(dp_workspace* workspace, const dp_netdef* netdef, const dp_net_options* options,
                         dp_net** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_NOT_NULL(netdef);
  DP_CHECK_NOT_NULL(out);
  dp::NetOptions opts;
  if (options != nullptr) {
    DP_CHECK_OPTIONS_SIZE(options, executor);
    DP_CHECK_ARG(options->executor >= DP_EXECUTOR_DEFAULT && options->executor <= DP_EXECUTOR_ASYNC,
                 "options->executor ", options->executor, " is not a DP_EXECUTOR_* value");
    opts.executor = static_cast<dp::ExecutorKind>(options->executor);
    if (DP_OPTIONS_HAVE(options, num_workers)) {
      DP_CHECK_ARG(options->num_workers >= 0 && options->num_workers <= 1024, "options->num_workers must be in 0..1024, got ",
                   options->num_workers);
      opts.num_workers = options->num_workers;
    }
    if (DP_OPTIONS_HAVE(options, streams_per_gpu)) {
      DP_CHECK_ARG(options->streams_per_gpu >= 0 && options->streams_per_gpu <= 64,
                   "options->streams_per_gpu must be in 0..64, got ", options->streams_per_gpu);
      opts.streams_per_gpu = options->streams_per_gpu == 0 ? 1 : options->streams_per_gpu;
    }
    if (DP_OPTIONS_HAVE(options, profile)) opts.profile = options->profile != 0;
    if (DP_OPTIONS_HAVE(options, unread_feed_error)) opts.unread_feed_error = options->unread_feed_error != 0;
    if (DP_OPTIONS_HAVE(options, memory))
      opts.memory = dp::capi::CheckedMemoryMode(options->memory, dp::MemoryMode::kDefault, "options->memory", __func__);
    if (DP_OPTIONS_HAVE(options, cuda_graphs)) {
      DP_CHECK_ARG(options->cuda_graphs >= DP_CUDA_GRAPHS_DEFAULT && options->cuda_graphs <= DP_CUDA_GRAPHS_OFF,
                   "options->cuda_graphs ", options->cuda_graphs, " is not a DP_CUDA_GRAPHS_* value");
      opts.cuda_graphs = static_cast<dp::CudaGraphs>(options->cuda_graphs);
    }
    if (DP_OPTIONS_HAVE(options, math_mode)) {
      DP_CHECK_ARG(options->math_mode >= DP_MATH_DEFAULT && options->math_mode <= DP_MATH_FP16,
                   "options->math_mode ", options->math_mode, " is not a DP_MATH_* value");
      opts.math = static_cast<dp::MathMode>(options->math_mode);
    }
  }
  auto net = std::make_unique<dp::Net>(netdef->def, workspace->ws, opts);
  *out = new dp_net{std::move(net)};
  DP_API_END
}

dp_status* dp_net_run(dp_net* net) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(net);
  net->net->Run();
  DP_API_END
}

dp_status* dp_net_run_async(dp_net* net) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(net);
  net->net->RunAsync();
  DP_API_END
}

dp_status* dp_net_wait(dp_net* net, int64_t timeout_ms) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(net);
  auto timeout = timeout_ms < 0 ? std::chrono::milliseconds::max() : std::chrono::milliseconds(timeout_ms);
  if (!net->net->Wait(timeout))
    DP_THROW(dp::Code::kTimeout, net->net->label(), ": still running after ", timeout_ms, " ms");
  DP_API_END
}

void dp_net_cancel(dp_net* net) {
  if (net != nullptr) net->net->Cancel();
}

dp_status* dp_net_trace_json(const dp_net* net, dp_buffer** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(net);
  DP_CHECK_NOT_NULL(out);
  *out = NewBuffer(net->net->TraceJson());
  DP_API_END
}

dp_status* dp_net_to_dot(const dp_net* net, dp_buffer** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(net);
  DP_CHECK_NOT_NULL(out);
  *out = NewBuffer(net->net->Dot());
  DP_API_END
}

void dp_net_free(dp_net* net) { delete net; }

}  // extern "C"
