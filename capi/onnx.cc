// dp_model_from_onnx_*, dp_model_to_onnx, dp_model_save_onnx: the C face of
// onnx_io/onnx_model.h.
#include <cstddef>
#include <string_view>

#include "capi/handles.h"
#include "checkpoint/atomic_file.h"
#include "onnx_io/onnx_model.h"

namespace {

// The optimizer a caller gives in a dp_optimizer_info: as in option
// structs, a field that is zero, or past its struct_size, takes the model
// format's default (OptimizerDef's).
dp::OptimizerDef OptimizerFromInfo(const dp_optimizer_info* in, const char* func) {
  DP_CHECK_ARG_IN(func, in->struct_size >= DP_OPTIONS_END(in, type), "options->optimizer->struct_size ",
                  in->struct_size, " does not reach its type (set it to sizeof(dp_optimizer_info))");
  DP_CHECK_ARG_IN(func, in->type != nullptr, "options->optimizer->type is NULL");
  dp::OptimizerDef o;
  o.type = in->type;
  auto take = [](auto& field, auto value) {
    if (value != 0) field = value;
  };
  if (DP_OPTIONS_HAVE(in, lr)) take(o.lr, in->lr);
  if (DP_OPTIONS_HAVE(in, momentum)) take(o.momentum, in->momentum);
  if (DP_OPTIONS_HAVE(in, nesterov)) o.nesterov = in->nesterov != 0;
  if (DP_OPTIONS_HAVE(in, beta1)) take(o.beta1, in->beta1);
  if (DP_OPTIONS_HAVE(in, beta2)) take(o.beta2, in->beta2);
  if (DP_OPTIONS_HAVE(in, epsilon)) take(o.epsilon, in->epsilon);
  if (DP_OPTIONS_HAVE(in, weight_decay)) take(o.weight_decay, in->weight_decay);
  if (DP_OPTIONS_HAVE(in, lr_policy) && in->lr_policy != nullptr && in->lr_policy[0] != '\0') o.lr_policy = in->lr_policy;
  if (DP_OPTIONS_HAVE(in, gamma)) take(o.gamma, in->gamma);
  if (DP_OPTIONS_HAVE(in, stepsize)) take(o.stepsize, in->stepsize);
  if (DP_OPTIONS_HAVE(in, power)) take(o.power, in->power);
  if (DP_OPTIONS_HAVE(in, max_iter)) take(o.max_iter, in->max_iter);
  if (DP_OPTIONS_HAVE(in, warmup_iters)) take(o.warmup_iters, in->warmup_iters);
  if (DP_OPTIONS_HAVE(in, warmup_start_factor)) take(o.warmup_start_factor, in->warmup_start_factor);
  return o;
}

dp::OnnxImportOptions ImportOptions(const dp_onnx_import_options* options, const char* func) {
  dp::OnnxImportOptions o;
  if (options == nullptr) return o;
  ::dp::capi::CheckOptionsSize(options, DP_OPTIONS_END(options, head), func);
  DP_CHECK_ARG_IN(func, options->head == DP_ONNX_HEAD_NONE || options->head == DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY,
                  "options->head ", options->head, " is not a DP_ONNX_HEAD_* value");
  if (options->head == DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY) o.head = dp::OnnxImportOptions::Head::kSoftmaxCrossEntropy;
  if (DP_OPTIONS_HAVE(options, labels) && options->labels != nullptr && options->labels[0] != '\0')
    o.labels = options->labels;
  if (DP_OPTIONS_HAVE(options, optimizer) && options->optimizer != nullptr)
    o.optimizer = OptimizerFromInfo(options->optimizer, func);
  return o;
}

dp::OnnxExportOptions ExportOptions(const dp_onnx_export_options* options, const char* func) {
  dp::OnnxExportOptions o;
  if (options == nullptr) return o;
  ::dp::capi::CheckOptionsSize(options, DP_OPTIONS_END(options, opset), func);
  if (options->opset != 0) o.opset = options->opset;
  if (DP_OPTIONS_HAVE(options, num_outputs))
    o.outputs = dp::capi::Names(options->outputs, options->num_outputs, "options->outputs", func);
  if (DP_OPTIONS_HAVE(options, param_prefix) && options->param_prefix != nullptr)
    o.param_prefix = options->param_prefix;
  return o;
}

std::string ToOnnx(const dp_model* model, const dp_workspace* workspace, const dp_onnx_export_options* options,
                   const char* func) {
  DP_CHECK_ARG_IN(func, model != nullptr, "model is NULL");
  DP_CHECK_ARG_IN(func, workspace != nullptr, "workspace is NULL");
  const dp::OnnxExportOptions o = ExportOptions(options, func);
  return dp::ModelToOnnx(*model->def, *workspace->ws, o);
}

}  // namespace

extern "C" {

void dp_onnx_import_options_init(dp_onnx_import_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

void dp_onnx_export_options_init(dp_onnx_export_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

dp_status* dp_model_from_onnx_buffer(const void* data, size_t size, const dp_onnx_import_options* options,
                                     dp_model** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::capi::CheckInputBytes(data, size, "data", __func__);
  const dp::OnnxImportOptions o = ImportOptions(options, __func__);
  *out = new dp_model{std::make_shared<const dp::ModelDef>(
      dp::ModelFromOnnx(std::string_view(static_cast<const char*>(data), size), o))};
  DP_API_END
}

dp_status* dp_model_from_onnx_file(const char* path, const dp_onnx_import_options* options, dp_model** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(path);
  DP_CHECK_NOT_NULL(out);
  const dp::OnnxImportOptions o = ImportOptions(options, __func__);
  *out = new dp_model{std::make_shared<const dp::ModelDef>(dp::ModelFromOnnxFile(path, o))};
  DP_API_END
}

dp_status* dp_model_to_onnx(const dp_model* model, const dp_workspace* workspace,
                            const dp_onnx_export_options* options, dp_buffer** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  *out = new dp_buffer{ToOnnx(model, workspace, options, __func__)};
  DP_API_END
}

dp_status* dp_model_save_onnx(const dp_model* model, const dp_workspace* workspace,
                              const dp_onnx_export_options* options, const char* path) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(path);
  const std::string bytes = ToOnnx(model, workspace, options, __func__);
  dp::AtomicFileWriter file(path);
  file.Write(bytes.data(), bytes.size());
  file.Commit();
  DP_API_END
}

}  // extern "C"
