// The C API's handle types and the exception boundary. Every exported
// function body runs inside DP_API_BEGIN / DP_API_END, which turns any C++
// exception into a dp_status. Nothing here is visible outside libdp.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "dp/dp.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "model/model_def.h"
#include "parallel/parallelize.h"

struct dp_status {
  int32_t code;
  std::string message;
};

struct dp_tensor {
  dp::Tensor tensor;
};

struct dp_workspace {
  std::shared_ptr<dp::Workspace> ws;
};

struct dp_netdef {
  std::shared_ptr<const dp::NetDef> def;
};

struct dp_model {
  std::shared_ptr<const dp::ModelDef> def;
};

struct dp_net {
  std::unique_ptr<dp::Net> net;
};

struct dp_string_list {
  std::vector<std::string> items;
};

struct dp_buffer {
  std::string bytes;
};

struct dp_parallel_model {
  dp::ParallelNets nets;
};

namespace dp::capi {

dp_status* MakeStatus(Code code, const std::string& message) noexcept;
dp_status* StatusFromCurrentException() noexcept;  // call inside a catch block

// Argument checks that name the parameter and the function.
#define DP_CHECK_ARG(cond, ...) \
  DP_ENFORCE_CODE(cond, ::dp::Code::kInvalidArgument, __func__, ": ", __VA_ARGS__)
#define DP_CHECK_NOT_NULL(p) DP_CHECK_ARG((p) != nullptr, #p " is NULL")

// A new handle owning `def` (not validated again: transforms' output).
inline dp_netdef* NewNetDef(NetDef def) { return new dp_netdef{std::make_shared<const NetDef>(std::move(def))}; }

// Whether the caller's option struct (which starts with struct_size) reaches
// past `field`: older callers pass shorter structs, and only the fields they
// have are read.
#define DP_OPTIONS_HAVE(options, field)                                                          \
  ((options)->struct_size >= offsetof(std::remove_cv_t<std::remove_pointer_t<decltype(options)>>, field) + \
                                 sizeof((options)->field))

// The model to build from: `model` itself, or with lr != 0 a copy in
// `storage` whose optimizer's base learning rate is lr (> 0, else
// kInvalidArgument naming `func`).
const ModelDef& ModelWithLr(const ModelDef& model, double lr, ModelDef* storage, const char* func);

}  // namespace dp::capi

#define DP_API_BEGIN try {
#define DP_API_END                                    \
  }                                                   \
  catch (...) {                                       \
    return ::dp::capi::StatusFromCurrentException();  \
  }                                                   \
  return nullptr;
