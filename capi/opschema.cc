// The op catalogue: every registered operator type and its schema (inputs,
// outputs, arguments with their defaults, in-place rules), the devices with a
// kernel for it and its gradient, read from the engine's registries
// (ops/op_schema.h, ops/operator.h, ops/gradient_registry.h).
//
// Schemas are registered once, at load time, and never change or go away, so
// a dp_opschema only points at one; the views and strings it hands out point
// into it too. An argument's default is a dp::Argument inside the schema,
// handed out as a dp_argdef view like those of capi/introspect.cc.
#include <string>
#include <vector>

#include "capi/handles.h"
#include "ops/gradient_registry.h"
#include "ops/op_schema.h"
#include "ops/operator.h"

struct dp_opschema {
  const dp::OpSchema* schema;
};

namespace {

const dp::OpSchema::ArgSpec* ArgAt(const dp_opschema* s, size_t i) {
  return s != nullptr && i < s->schema->args().size() ? &s->schema->args()[i] : nullptr;
}

const char* Name(const std::vector<std::string>* names, size_t i) {
  return names != nullptr && i < names->size() ? (*names)[i].c_str() : nullptr;
}

int32_t ArgKindCode(dp::ArgKind kind) {
  switch (kind) {
    case dp::ArgKind::kFloat: return DP_ARG_FLOAT;
    case dp::ArgKind::kInt: return DP_ARG_INT;
    case dp::ArgKind::kString: return DP_ARG_STRING;
    case dp::ArgKind::kFloats: return DP_ARG_FLOATS;
    case dp::ArgKind::kInts: return DP_ARG_INTS;
    case dp::ArgKind::kStrings: return DP_ARG_STRINGS;
    case dp::ArgKind::kNet: return DP_ARG_NET;
    case dp::ArgKind::kNets: return DP_ARG_NETS;
  }
  return 0;
}

bool KnownDevice(int32_t device_type) { return device_type == DP_DEVICE_CPU || device_type == DP_DEVICE_CUDA; }

}  // namespace

extern "C" {

dp_status* dp_opschema_list_types(dp_string_list** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  *out = new dp_string_list{dp::OpSchemaRegistry::Types()};
  DP_API_END
}

dp_status* dp_opschema_from_type(const char* type, dp_opschema** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(type);
  DP_CHECK_NOT_NULL(out);
  const dp::OpSchema* schema = dp::OpSchemaRegistry::Find(type);
  DP_ENFORCE_CODE(schema != nullptr, dp::Code::kNotFound, __func__, ": ",
                  dp::OpSchemaRegistry::UnknownTypeMessage(type));
  *out = new dp_opschema{schema};
  DP_API_END
}

void dp_opschema_free(dp_opschema* schema) { delete schema; }

const char* dp_opschema_type(const dp_opschema* schema) { return schema ? schema->schema->type().c_str() : ""; }

const char* dp_opschema_doc(const dp_opschema* schema) { return schema ? schema->schema->doc().c_str() : ""; }

// Schema counts are ints; INT_MAX (INT32_MAX) means no limit.
int32_t dp_opschema_min_inputs(const dp_opschema* schema) { return schema ? schema->schema->min_inputs() : 0; }

int32_t dp_opschema_max_inputs(const dp_opschema* schema) { return schema ? schema->schema->max_inputs() : 0; }

int32_t dp_opschema_min_outputs(const dp_opschema* schema) { return schema ? schema->schema->min_outputs() : 0; }

int32_t dp_opschema_max_outputs(const dp_opschema* schema) { return schema ? schema->schema->max_outputs() : 0; }

size_t dp_opschema_num_named_inputs(const dp_opschema* schema) {
  return schema ? schema->schema->input_names().size() : 0;
}

const char* dp_opschema_input_name(const dp_opschema* schema, size_t i) {
  return Name(schema ? &schema->schema->input_names() : nullptr, i);
}

size_t dp_opschema_num_named_outputs(const dp_opschema* schema) {
  return schema ? schema->schema->output_names().size() : 0;
}

const char* dp_opschema_output_name(const dp_opschema* schema, size_t i) {
  return Name(schema ? &schema->schema->output_names() : nullptr, i);
}

size_t dp_opschema_num_args(const dp_opschema* schema) { return schema ? schema->schema->args().size() : 0; }

const char* dp_opschema_arg_name(const dp_opschema* schema, size_t i) {
  const auto* a = ArgAt(schema, i);
  return a ? a->name.c_str() : nullptr;
}

int32_t dp_opschema_arg_kind(const dp_opschema* schema, size_t i) {
  const auto* a = ArgAt(schema, i);
  return a ? ArgKindCode(a->kind) : 0;
}

const char* dp_opschema_arg_doc(const dp_opschema* schema, size_t i) {
  const auto* a = ArgAt(schema, i);
  return a ? a->doc.c_str() : nullptr;
}

int32_t dp_opschema_arg_required(const dp_opschema* schema, size_t i) {
  const auto* a = ArgAt(schema, i);
  return a && a->required ? 1 : 0;
}

const dp_argdef* dp_opschema_arg_default(const dp_opschema* schema, size_t i) {
  const auto* a = ArgAt(schema, i);
  // The same view as dp_opdef_arg's: the address of a dp::Argument.
  return a && a->default_value ? reinterpret_cast<const dp_argdef*>(&*a->default_value) : nullptr;
}

const char* dp_opschema_arg_default_text(const dp_opschema* schema, size_t i) {
  const auto* a = ArgAt(schema, i);
  return a ? a->default_text.c_str() : nullptr;
}

size_t dp_opschema_num_inplace(const dp_opschema* schema) {
  return schema ? schema->schema->allow_inplace().size() + schema->schema->enforce_inplace().size() : 0;
}

int32_t dp_opschema_inplace_at(const dp_opschema* schema, size_t i, int32_t* out_input, int32_t* out_output) {
  if (schema == nullptr) return 0;
  // The enforced pairs first: they are the stronger rule.
  const auto& enforced = schema->schema->enforce_inplace();
  const auto& allowed = schema->schema->allow_inplace();
  const std::pair<int, int>* pair = nullptr;
  int32_t rule = 0;
  if (i < enforced.size()) {
    pair = &enforced[i];
    rule = DP_INPLACE_ENFORCED;
  } else if (i - enforced.size() < allowed.size()) {
    pair = &allowed[i - enforced.size()];
    rule = DP_INPLACE_ALLOWED;
  } else {
    return 0;
  }
  if (out_input != nullptr) *out_input = pair->first;
  if (out_output != nullptr) *out_output = pair->second;
  return rule;
}

int32_t dp_opschema_inplace_shift(const dp_opschema* schema) {
  return schema ? schema->schema->enforce_inplace_shift() : -1;
}

int32_t dp_opschema_has_kernel(const dp_opschema* schema, int32_t device_type) {
  if (schema == nullptr || !KnownDevice(device_type)) return 0;
  return dp::OperatorRegistry::Has(static_cast<dp::DeviceType>(device_type), schema->schema->type()) ? 1 : 0;
}

dp_status* dp_opschema_engines(const dp_opschema* schema, int32_t device_type, dp_string_list** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(schema);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(KnownDevice(device_type), "unknown device type ", device_type);
  *out = new dp_string_list{
      dp::OperatorRegistry::Engines(static_cast<dp::DeviceType>(device_type), schema->schema->type())};
  DP_API_END
}

int32_t dp_opschema_gradient(const dp_opschema* schema) {
  if (schema == nullptr) return DP_GRADIENT_UNDECLARED;
  switch (dp::GradientRegistry::Kind(schema->schema->type())) {
    case dp::GradientKind::kUnknown: return DP_GRADIENT_UNDECLARED;
    case dp::GradientKind::kMaker: return DP_GRADIENT_DIFFERENTIABLE;
    case dp::GradientKind::kNone: return DP_GRADIENT_NOT_DIFFERENTIABLE;
    case dp::GradientKind::kStop: return DP_GRADIENT_STOP;
  }
  return DP_GRADIENT_UNDECLARED;
}

}  // extern "C"
