// The C API's handle types and the exception boundary. Every exported
// function body runs inside DP_API_BEGIN / DP_API_END, which turns any C++
// exception into a dp_status. Nothing here is visible outside libdp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
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
  std::string model_name;  // recorded in its checkpoints
  dp::DeviceType device_type = dp::DeviceType::kCPU;
};

namespace dp::capi {

dp_status* MakeStatus(Code code, const std::string& message) noexcept;
dp_status* StatusFromCurrentException() noexcept;  // call inside a catch block

// Argument checks that name the parameter and the function.
#define DP_CHECK_ARG(cond, ...) \
  DP_ENFORCE_CODE(cond, ::dp::Code::kInvalidArgument, __func__, ": ", __VA_ARGS__)
#define DP_CHECK_NOT_NULL(p) DP_CHECK_ARG((p) != nullptr, #p " is NULL")
// The same in a helper that checks for the C function `func`.
#define DP_CHECK_ARG_IN(func, cond, ...) \
  DP_ENFORCE_CODE(cond, ::dp::Code::kInvalidArgument, func, ": ", __VA_ARGS__)

// A new handle owning `def` (not validated again: transforms' output).
inline dp_netdef* NewNetDef(NetDef def) { return new dp_netdef{std::make_shared<const NetDef>(std::move(def))}; }

// The end of `field` in the caller's option struct type: struct_size must
// reach it for the field to be read.
#define DP_OPTIONS_END(options, field) \
  (offsetof(std::remove_cv_t<std::remove_pointer_t<decltype(options)>>, field) + sizeof((options)->field))

// Whether the caller's option struct (which starts with struct_size) reaches
// past `field`: older callers pass shorter structs, and only the fields they
// have are read; the others keep their defaults (zero means default).
#define DP_OPTIONS_HAVE(options, field) ((options)->struct_size >= DP_OPTIONS_END(options, field))

inline const char* OptionsName(const dp_workspace_options*) { return "dp_workspace_options"; }
inline const char* OptionsName(const dp_net_options*) { return "dp_net_options"; }
inline const char* OptionsName(const dp_gradient_options*) { return "dp_gradient_options"; }
inline const char* OptionsName(const dp_training_options*) { return "dp_training_options"; }
inline const char* OptionsName(const dp_inference_options*) { return "dp_inference_options"; }
inline const char* OptionsName(const dp_parallel_options*) { return "dp_parallel_options"; }
inline const char* OptionsName(const dp_checkpoint_save_options*) { return "dp_checkpoint_save_options"; }
inline const char* OptionsName(const dp_checkpoint_load_options*) { return "dp_checkpoint_load_options"; }
inline const char* OptionsName(const dp_loader_options*) { return "dp_loader_options"; }
inline const char* OptionsName(const dp_onnx_import_options*) { return "dp_onnx_import_options"; }
inline const char* OptionsName(const dp_onnx_export_options*) { return "dp_onnx_export_options"; }

// Checks the caller's struct_size: at least `min_size` (the struct's leading,
// required fields; kInvalidArgument otherwise), and when it is larger than
// this library's struct, the bytes past it (newer fields) must all be zero,
// i.e. their defaults (kUnimplemented otherwise: an option this library
// does not have).
template <class T>
void CheckOptionsSize(const T* options, size_t min_size, const char* func) {
  const uint32_t size = options->struct_size;
  DP_ENFORCE_CODE(size >= min_size, Code::kInvalidArgument, func, ": options->struct_size ", size,
                  " is too small (at least ", min_size, " bytes; set it to sizeof(", OptionsName(options), "))");
  if (size <= sizeof(T)) return;
  const auto* bytes = reinterpret_cast<const unsigned char*>(options);
  for (size_t i = sizeof(T); i < size; ++i)
    DP_ENFORCE_CODE(bytes[i] == 0, Code::kUnimplemented, func, ": options->struct_size ", size,
                    " is larger than this library's ", OptionsName(options), " (", sizeof(T), " bytes) and byte ", i,
                    " is not zero: it sets an option this version of dp does not have");
}

// Checks struct_size (see CheckOptionsSize); `min_field` is the last field
// every caller must have.
#define DP_CHECK_OPTIONS_SIZE(options, min_field) \
  ::dp::capi::CheckOptionsSize((options), DP_OPTIONS_END(options, min_field), __func__)

// dp_*_options_init: zero-fills the caller's struct_size bytes and sets
// struct_size; nothing for NULL or a size that cannot hold struct_size.
template <class T>
void InitOptions(T* options, size_t struct_size) noexcept {
  if (options == nullptr || struct_size < sizeof(uint32_t) || struct_size > UINT32_MAX) return;
  std::memset(static_cast<void*>(options), 0, struct_size);
  options->struct_size = static_cast<uint32_t>(struct_size);
}

// A DP_MEMORY_* option (`what` names it after `func`; kInvalidArgument for
// another value); DEFAULT becomes `fallback`.
inline MemoryMode CheckedMemoryMode(int32_t value, MemoryMode fallback, const char* what, const char* func) {
  DP_ENFORCE_CODE(value >= DP_MEMORY_DEFAULT && value <= DP_MEMORY_FREE, Code::kInvalidArgument, func, ": ", what,
                  " ", value, " is not a DP_MEMORY_* value");
  return value == DP_MEMORY_DEFAULT ? fallback : static_cast<MemoryMode>(value);
}

// The model to build from: `model` itself, or with lr != 0 a copy in
// `storage` whose optimizer's base learning rate is lr (> 0, else
// kInvalidArgument naming `func`).
const ModelDef& ModelWithLr(const ModelDef& model, double lr, ModelDef* storage, const char* func);

// A C array of `n` names (`what` names it in errors, after `func`): NULL
// only with n == 0, no NULL element.
inline std::vector<std::string> Names(const char* const* names, size_t n, const char* what, const char* func) {
  DP_ENFORCE_CODE(names != nullptr || n == 0, Code::kInvalidArgument, func, ": ", what, " is NULL but its count is ",
                  n);
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    DP_ENFORCE_CODE(names[i] != nullptr, Code::kInvalidArgument, func, ": ", what, "[", i, "] is NULL");
    out.emplace_back(names[i]);
  }
  return out;
}

// The bytes of a serialised input (`param` names it in errors, after
// `func`): NULL with a nonzero size is a bad argument; zero bytes, NULL or
// not, are an empty input, which no format accepts (kParse, as for any other
// malformed input).
inline void CheckInputBytes(const void* data, size_t size, const char* param, const char* func) {
  DP_ENFORCE_CODE(data != nullptr || size == 0, Code::kInvalidArgument, func, ": ", param, " is NULL but size is ",
                  size);
  DP_ENFORCE_CODE(size > 0, Code::kParse, func, ": ", param, " is empty (size 0)");
}

}  // namespace dp::capi

#define DP_API_BEGIN try {
#define DP_API_END                                    \
  }                                                   \
  catch (...) {                                       \
    return ::dp::capi::StatusFromCurrentException();  \
  }                                                   \
  return nullptr;
