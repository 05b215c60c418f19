// dp_netdef and dp_net.
#include "capi/handles.h"
#include "graph/net_format.h"
#include "graph/net_validate.h"

namespace {

dp_netdef* NewNetDef(dp::NetDef def) {
  dp::ValidateNet(def);
  return new dp_netdef{std::make_shared<const dp::NetDef>(std::move(def))};
}

dp_buffer* NewBuffer(std::string bytes) { return new dp_buffer{std::move(bytes)}; }

}  // namespace

extern "C" {

dp_status* dp_netdef_from_buffer(const void* data, size_t size, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(data);
  DP_CHECK_NOT_NULL(out);
  *out = NewNetDef(dp::NetDefFromBuffer(data, size));
  DP_API_END
}

dp_status* dp_netdef_from_json(const char* json, size_t size, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_ARG(json != nullptr || size == 0, "json is NULL");
  DP_CHECK_NOT_NULL(out);
  *out = NewNetDef(dp::NetDefFromJson(std::string_view(json ? json : "", size)));
  DP_API_END
}

dp_status* dp_netdef_from_file(const char* path, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(path);
  DP_CHECK_NOT_NULL(out);
  dp::NetDef def = dp::NetDefFromFile(path);
  try {
    *out = NewNetDef(std::move(def));
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

const void* dp_buffer_data(const dp_buffer* buffer) { return buffer ? buffer->bytes.data() : nullptr; }

size_t dp_buffer_size(const dp_buffer* buffer) { return buffer ? buffer->bytes.size() : 0; }

void dp_buffer_free(dp_buffer* buffer) { delete buffer; }

const char* dp_netdef_name(const dp_netdef* netdef) { return netdef ? netdef->def->name.c_str() : ""; }

size_t dp_netdef_num_ops(const dp_netdef* netdef) { return netdef ? netdef->def->ops.size() : 0; }

void dp_netdef_free(dp_netdef* netdef) { delete netdef; }

dp_status* dp_net_create(dp_workspace* workspace, const dp_netdef* netdef, const dp_net_options* options,
                         dp_net** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(workspace);
  DP_CHECK_NOT_NULL(netdef);
  DP_CHECK_NOT_NULL(out);
  dp::NetOptions opts;
  if (options != nullptr) {
    // Read only the fields the caller's struct has (older callers have fewer).
    DP_CHECK_ARG(options->struct_size >= offsetof(dp_net_options, executor) + sizeof(int32_t),
                 "options->struct_size ", options->struct_size, " is too small");
    DP_CHECK_ARG(options->executor >= DP_EXECUTOR_DEFAULT && options->executor <= DP_EXECUTOR_ASYNC,
                 "unknown executor ", options->executor);
    opts.executor = static_cast<dp::ExecutorKind>(options->executor);
    if (options->struct_size >= offsetof(dp_net_options, num_workers) + sizeof(int32_t)) {
      DP_CHECK_ARG(options->num_workers >= 0, "num_workers must be >= 0, got ", options->num_workers);
      opts.num_workers = options->num_workers;
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

void dp_net_free(dp_net* net) { delete net; }

}  // extern "C"
