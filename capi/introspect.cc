// Introspection of dp_netdef and dp_model: what bindings need to discover a
// net's or a model's contents without parsing FlatBuffers.
//
// dp_opdef and dp_argdef are never defined: a `const dp_opdef*` is the
// address of a dp::OperatorDef inside the netdef's immutable dp::NetDef (and
// a `const dp_argdef*` that of a dp::Argument), converted with
// reinterpret_cast and converted back before use. They are valid exactly as
// long as the shared dp::NetDef they point into.
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "capi/handles.h"

namespace {

const dp::OperatorDef* Op(const dp_opdef* op) { return reinterpret_cast<const dp::OperatorDef*>(op); }
const dp_opdef* View(const dp::OperatorDef& op) { return reinterpret_cast<const dp_opdef*>(&op); }
const dp::Argument* Arg(const dp_argdef* arg) { return reinterpret_cast<const dp::Argument*>(arg); }
const dp_argdef* View(const dp::Argument& arg) { return reinterpret_cast<const dp_argdef*>(&arg); }

const char* Item(const std::vector<std::string>* list, size_t i) {
  return list != nullptr && i < list->size() ? (*list)[i].c_str() : nullptr;
}

int32_t Kind(const dp::Argument& a) {
  return std::visit(
      [](const auto& v) -> int32_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) return DP_ARG_FLOAT;
        else if constexpr (std::is_same_v<T, int64_t>) return DP_ARG_INT;
        else if constexpr (std::is_same_v<T, std::string>) return DP_ARG_STRING;
        else if constexpr (std::is_same_v<T, std::vector<double>>) return DP_ARG_FLOATS;
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return DP_ARG_INTS;
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) return DP_ARG_STRINGS;
        else if constexpr (std::is_same_v<T, std::shared_ptr<const dp::NetDef>>) return DP_ARG_NET;
        else {
          static_assert(std::is_same_v<T, std::vector<std::shared_ptr<const dp::NetDef>>>, "a new argument kind");
          return DP_ARG_NETS;
        }
      },
      a.value);
}

const char* KindName(int32_t kind) {
  switch (kind) {
    case DP_ARG_FLOAT: return "float";
    case DP_ARG_INT: return "int";
    case DP_ARG_STRING: return "string";
    case DP_ARG_FLOATS: return "floats";
    case DP_ARG_INTS: return "ints";
    case DP_ARG_STRINGS: return "strings";
    case DP_ARG_NET: return "net";
    case DP_ARG_NETS: return "nets";
    default: return "?";
  }
}

// The argument's value of type T, or kInvalidArgument naming the argument,
// the kind it holds and the kind asked for (`func` is the C function).
template <typename T>
const T& Value(const dp_argdef* arg, int32_t want, const char* func) {
  DP_ENFORCE_CODE(arg != nullptr, dp::Code::kInvalidArgument, func, ": arg is NULL");
  const dp::Argument& a = *Arg(arg);
  const T* v = std::get_if<T>(&a.value);
  DP_ENFORCE_CODE(v != nullptr, dp::Code::kInvalidArgument, func, ": argument '", a.name, "' holds ",
                  KindName(Kind(a)), ", not ", KindName(want));
  return *v;
}

void CheckIndex(size_t i, size_t size, const dp::Argument& a, const char* func) {
  DP_ENFORCE_CODE(i < size, dp::Code::kOutOfRange, func, ": index ", i, " is out of range: argument '", a.name,
                  "' has ", size, " elements");
}

dp_netdef* SharedNetDef(std::shared_ptr<const dp::NetDef> def) { return new dp_netdef{std::move(def)}; }

}  // namespace

extern "C" {

// ---- dp_netdef ----

size_t dp_netdef_num_external_inputs(const dp_netdef* netdef) {
  return netdef ? netdef->def->external_inputs.size() : 0;
}

const char* dp_netdef_external_input(const dp_netdef* netdef, size_t i) {
  return Item(netdef ? &netdef->def->external_inputs : nullptr, i);
}

size_t dp_netdef_num_external_outputs(const dp_netdef* netdef) {
  return netdef ? netdef->def->external_outputs.size() : 0;
}

const char* dp_netdef_external_output(const dp_netdef* netdef, size_t i) {
  return Item(netdef ? &netdef->def->external_outputs : nullptr, i);
}

int32_t dp_netdef_device_type(const dp_netdef* netdef) {
  return netdef ? static_cast<int32_t>(netdef->def->device.type) : DP_DEVICE_NONE;
}

int32_t dp_netdef_device_id(const dp_netdef* netdef) { return netdef ? netdef->def->device.id : DP_DEVICE_NONE; }

int32_t dp_netdef_executor(const dp_netdef* netdef) {
  return netdef ? static_cast<int32_t>(netdef->def->executor) : DP_EXECUTOR_DEFAULT;
}

int32_t dp_netdef_num_workers(const dp_netdef* netdef) { return netdef ? netdef->def->num_workers : 0; }

int32_t dp_netdef_memory(const dp_netdef* netdef) {
  return netdef ? static_cast<int32_t>(netdef->def->memory) : DP_MEMORY_DEFAULT;
}

const dp_opdef* dp_netdef_op(const dp_netdef* netdef, size_t i) {
  if (netdef == nullptr || i >= netdef->def->ops.size()) return nullptr;
  return View(netdef->def->ops[i]);
}

// ---- dp_opdef ----

const char* dp_opdef_type(const dp_opdef* op) { return op ? Op(op)->type.c_str() : ""; }

const char* dp_opdef_name(const dp_opdef* op) { return op ? Op(op)->name.c_str() : ""; }

const char* dp_opdef_engine(const dp_opdef* op) { return op ? Op(op)->engine.c_str() : ""; }

size_t dp_opdef_num_inputs(const dp_opdef* op) { return op ? Op(op)->inputs.size() : 0; }

const char* dp_opdef_input(const dp_opdef* op, size_t i) { return Item(op ? &Op(op)->inputs : nullptr, i); }

size_t dp_opdef_num_outputs(const dp_opdef* op) { return op ? Op(op)->outputs.size() : 0; }

const char* dp_opdef_output(const dp_opdef* op, size_t i) { return Item(op ? &Op(op)->outputs : nullptr, i); }

size_t dp_opdef_num_control_inputs(const dp_opdef* op) { return op ? Op(op)->control_inputs.size() : 0; }

const char* dp_opdef_control_input(const dp_opdef* op, size_t i) {
  return Item(op ? &Op(op)->control_inputs : nullptr, i);
}

int32_t dp_opdef_device_type(const dp_opdef* op) {
  if (op == nullptr || !Op(op)->device.has_value()) return DP_DEVICE_NONE;
  return static_cast<int32_t>(Op(op)->device->type);
}

int32_t dp_opdef_device_id(const dp_opdef* op) {
  if (op == nullptr || !Op(op)->device.has_value()) return DP_DEVICE_NONE;
  return Op(op)->device->id;
}

size_t dp_opdef_num_args(const dp_opdef* op) { return op ? Op(op)->args.size() : 0; }

const dp_argdef* dp_opdef_arg(const dp_opdef* op, size_t i) {
  if (op == nullptr || i >= Op(op)->args.size()) return nullptr;
  return View(Op(op)->args[i]);
}

const dp_argdef* dp_opdef_find_arg(const dp_opdef* op, const char* name) {
  if (op == nullptr || name == nullptr) return nullptr;
  for (const auto& a : Op(op)->args)
    if (std::strcmp(a.name.c_str(), name) == 0) return View(a);  // the first, as the engine's FindArg
  return nullptr;
}

// ---- dp_argdef ----

const char* dp_argdef_name(const dp_argdef* arg) { return arg ? Arg(arg)->name.c_str() : ""; }

int32_t dp_argdef_kind(const dp_argdef* arg) { return arg ? Kind(*Arg(arg)) : 0; }

size_t dp_argdef_num_values(const dp_argdef* arg) {
  if (arg == nullptr) return 0;
  return std::visit(
      [](const auto& v) -> size_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<int64_t>> ||
                      std::is_same_v<T, std::vector<std::string>> ||
                      std::is_same_v<T, std::vector<std::shared_ptr<const dp::NetDef>>>)
          return v.size();
        else
          return 1;
      },
      Arg(arg)->value);
}

dp_status* dp_argdef_get_float(const dp_argdef* arg, double* out) {
  DP_API_BEGIN
  const double& v = Value<double>(arg, DP_ARG_FLOAT, __func__);
  DP_CHECK_NOT_NULL(out);
  *out = v;
  DP_API_END
}

dp_status* dp_argdef_get_int(const dp_argdef* arg, int64_t* out) {
  DP_API_BEGIN
  const int64_t& v = Value<int64_t>(arg, DP_ARG_INT, __func__);
  DP_CHECK_NOT_NULL(out);
  *out = v;
  DP_API_END
}

dp_status* dp_argdef_get_string(const dp_argdef* arg, const char** out) {
  DP_API_BEGIN
  const std::string& v = Value<std::string>(arg, DP_ARG_STRING, __func__);
  DP_CHECK_NOT_NULL(out);
  *out = v.c_str();
  DP_API_END
}

dp_status* dp_argdef_get_floats(const dp_argdef* arg, const double** out_data, size_t* out_count) {
  DP_API_BEGIN
  const auto& v = Value<std::vector<double>>(arg, DP_ARG_FLOATS, __func__);
  DP_CHECK_NOT_NULL(out_data);
  DP_CHECK_NOT_NULL(out_count);
  *out_data = v.data();
  *out_count = v.size();
  DP_API_END
}

dp_status* dp_argdef_get_ints(const dp_argdef* arg, const int64_t** out_data, size_t* out_count) {
  DP_API_BEGIN
  const auto& v = Value<std::vector<int64_t>>(arg, DP_ARG_INTS, __func__);
  DP_CHECK_NOT_NULL(out_data);
  DP_CHECK_NOT_NULL(out_count);
  *out_data = v.data();
  *out_count = v.size();
  DP_API_END
}

dp_status* dp_argdef_get_string_at(const dp_argdef* arg, size_t i, const char** out) {
  DP_API_BEGIN
  const auto& v = Value<std::vector<std::string>>(arg, DP_ARG_STRINGS, __func__);
  DP_CHECK_NOT_NULL(out);
  CheckIndex(i, v.size(), *Arg(arg), __func__);
  *out = v[i].c_str();
  DP_API_END
}

dp_status* dp_argdef_get_net(const dp_argdef* arg, dp_netdef** out) {
  DP_API_BEGIN
  const auto& v = Value<std::shared_ptr<const dp::NetDef>>(arg, DP_ARG_NET, __func__);
  DP_CHECK_NOT_NULL(out);
  DP_ENFORCE_CODE(v != nullptr, dp::Code::kInternal, __func__, ": argument '", Arg(arg)->name, "' holds no net");
  *out = SharedNetDef(v);
  DP_API_END
}

dp_status* dp_argdef_get_net_at(const dp_argdef* arg, size_t i, dp_netdef** out) {
  DP_API_BEGIN
  const auto& v = Value<std::vector<std::shared_ptr<const dp::NetDef>>>(arg, DP_ARG_NETS, __func__);
  DP_CHECK_NOT_NULL(out);
  CheckIndex(i, v.size(), *Arg(arg), __func__);
  DP_ENFORCE_CODE(v[i] != nullptr, dp::Code::kInternal, __func__, ": argument '", Arg(arg)->name, "' element ", i,
                  " holds no net");
  *out = SharedNetDef(v[i]);
  DP_API_END
}

// ---- dp_model ----

const char* dp_model_name(const dp_model* model) { return model ? model->def->name.c_str() : ""; }

dp_status* dp_model_net(const dp_model* model, int32_t which, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  const dp::NetDef* net = nullptr;
  switch (which) {
    case DP_MODEL_INIT_NET: net = &model->def->init_net; break;
    case DP_MODEL_FORWARD_NET: net = &model->def->forward_net; break;
    default: DP_CHECK_ARG(false, "which ", which, " is not a net (DP_MODEL_INIT_NET or DP_MODEL_FORWARD_NET)");
  }
  // Aliasing: the handle points at the model's net and owns the model.
  *out = SharedNetDef(std::shared_ptr<const dp::NetDef>(model->def, net));
  DP_API_END
}

int32_t dp_model_has_optimizer(const dp_model* model) {
  return model != nullptr && model->def->optimizer.has_value() ? 1 : 0;
}

dp_status* dp_model_get_optimizer(const dp_model* model, dp_optimizer_info* out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(out->struct_size >= sizeof(out->struct_size), "out->struct_size is ", out->struct_size,
               " (set it to sizeof(dp_optimizer_info))");
  const std::string label = model->def->name.empty() ? "the model" : dp::StrCat("model '", model->def->name, "'");
  DP_ENFORCE_CODE(model->def->optimizer.has_value(), dp::Code::kNotFound, __func__, ": ", label,
                  " has no optimizer");
  const dp::OptimizerDef& o = *model->def->optimizer;
  if (DP_OPTIONS_HAVE(out, type)) out->type = o.type.c_str();
  if (DP_OPTIONS_HAVE(out, lr)) out->lr = o.lr;
  if (DP_OPTIONS_HAVE(out, momentum)) out->momentum = o.momentum;
  if (DP_OPTIONS_HAVE(out, nesterov)) out->nesterov = o.nesterov ? 1 : 0;
  if (DP_OPTIONS_HAVE(out, beta1)) out->beta1 = o.beta1;
  if (DP_OPTIONS_HAVE(out, beta2)) out->beta2 = o.beta2;
  if (DP_OPTIONS_HAVE(out, epsilon)) out->epsilon = o.epsilon;
  if (DP_OPTIONS_HAVE(out, weight_decay)) out->weight_decay = o.weight_decay;
  if (DP_OPTIONS_HAVE(out, lr_policy)) out->lr_policy = o.lr_policy.c_str();
  if (DP_OPTIONS_HAVE(out, gamma)) out->gamma = o.gamma;
  if (DP_OPTIONS_HAVE(out, stepsize)) out->stepsize = o.stepsize;
  if (DP_OPTIONS_HAVE(out, power)) out->power = o.power;
  if (DP_OPTIONS_HAVE(out, max_iter)) out->max_iter = o.max_iter;
  if (DP_OPTIONS_HAVE(out, warmup_iters)) out->warmup_iters = o.warmup_iters;
  if (DP_OPTIONS_HAVE(out, warmup_start_factor)) out->warmup_start_factor = o.warmup_start_factor;
  DP_API_END
}

}  // extern "C"
