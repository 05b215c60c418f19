// dp_netdef_add_gradients, dp_model and the training nets.
#include <cstddef>

#include "autodiff/add_gradients.h"
#include "capi/handles.h"
#include "ops/net_validate.h"
#include "model/inference.h"
#include "model/model_format.h"
#include "model/training.h"

namespace {

dp_model* NewModel(dp::ModelDef m) { return new dp_model{std::make_shared<const dp::ModelDef>(std::move(m))}; }

}  // namespace

namespace dp::capi {

const ModelDef& ModelWithLr(const ModelDef& model, double lr, ModelDef* storage, const char* func) {
  if (lr == 0) return model;
  DP_ENFORCE_CODE(lr > 0, Code::kInvalidArgument, func, ": options->lr must be > 0 (or 0 for the model's), got ", lr);
  DP_ENFORCE_CODE(model.optimizer.has_value(), Code::kInvalidArgument, func,
                  ": the model has no optimizer whose lr options->lr could set");
  *storage = model;
  storage->optimizer->lr = lr;
  return *storage;
}

}  // namespace dp::capi

extern "C" {

void dp_gradient_options_init(dp_gradient_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

void dp_training_options_init(dp_training_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

void dp_inference_options_init(dp_inference_options* options, size_t struct_size) {
  dp::capi::InitOptions(options, struct_size);
}

dp_status* dp_netdef_add_gradients(const dp_netdef* netdef, const dp_gradient_options* options, dp_netdef** out,
                                   dp_string_list** out_grad_map) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(netdef);
  DP_CHECK_NOT_NULL(options);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_OPTIONS_SIZE(options, loss_scale);
  dp::GradientOptions g;
  g.losses = dp::capi::Names(options->losses, options->num_losses, "options->losses", __func__);
  DP_CHECK_ARG(!g.losses.empty(), "options->losses is empty (num_losses 0): at least one loss is required");
  g.wrt = dp::capi::Names(options->wrt, options->num_wrt, "options->wrt", __func__);
  g.stop = dp::capi::Names(options->stop, options->num_stop, "options->stop", __func__);
  g.loss_scale = options->loss_scale == 0 ? 1.0 : options->loss_scale;
  const dp::MemoryMode memory =
      DP_OPTIONS_HAVE(options, memory)
          ? dp::capi::CheckedMemoryMode(options->memory, dp::MemoryMode::kShare, "options->memory", __func__)
          : dp::MemoryMode::kShare;
  dp::GradientResult r = dp::AddGradients(*netdef->def, g);
  r.net.memory = memory;
  std::unique_ptr<dp_string_list> map;
  if (out_grad_map != nullptr) {
    map = std::make_unique<dp_string_list>();
    for (const auto& [w, grad] : r.grads) {
      map->items.push_back(w);
      map->items.push_back(grad);
    }
  }
  auto def = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(std::move(r.net)));
  if (out_grad_map != nullptr) *out_grad_map = map.release();
  *out = def.release();
  DP_API_END
}

dp_status* dp_model_from_buffer(const void* data, size_t size, dp_model** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::capi::CheckInputBytes(data, size, "data", __func__);
  *out = NewModel(dp::ModelFromBuffer(data, size));
  DP_API_END
}

dp_status* dp_model_from_json(const char* json, size_t size, dp_model** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  dp::capi::CheckInputBytes(json, size, "json", __func__);
  *out = NewModel(dp::ModelFromJson(std::string_view(json, size)));
  DP_API_END
}

dp_status* dp_model_from_file(const char* path, dp_model** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(path);
  DP_CHECK_NOT_NULL(out);
  *out = NewModel(dp::ModelFromFile(path));
  DP_API_END
}

dp_status* dp_model_to_json(const dp_model* model, dp_buffer** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  *out = new dp_buffer{dp::ModelToJson(*model->def)};
  DP_API_END
}

dp_status* dp_model_to_buffer(const dp_model* model, dp_buffer** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  *out = new dp_buffer{dp::ModelToBuffer(*model->def)};
  DP_API_END
}

dp_status* dp_model_blobs(const dp_model* model, int32_t which, dp_string_list** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  const dp::ModelDef& m = *model->def;
  const std::vector<std::string>* list = nullptr;
  switch (which) {
    case DP_MODEL_PARAMS: list = &m.params; break;
    case DP_MODEL_COMPUTED_PARAMS: list = &m.computed_params; break;
    case DP_MODEL_INPUTS: list = &m.inputs; break;
    case DP_MODEL_LOSSES: list = &m.losses; break;
    case DP_MODEL_METRICS: list = &m.metrics; break;
    default: DP_CHECK_ARG(false, "which ", which, " is not a list (DP_MODEL_PARAMS .. DP_MODEL_METRICS)");
  }
  *out = new dp_string_list{*list};
  DP_API_END
}

void dp_model_free(dp_model* model) { delete model; }

dp_status* dp_model_build_training(const dp_model* model, const dp_training_options* options, dp_netdef** out_init,
                                   dp_netdef** out_train, dp_netdef** out_eval) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  dp::TrainingOptions opts;
  double lr = 0;
  if (options != nullptr) {
    DP_CHECK_OPTIONS_SIZE(options, loss_scale);
    DP_CHECK_ARG(options->loss_scale == options->loss_scale, "options->loss_scale is NaN");
    opts.loss_scale = options->loss_scale == 0 ? 1.0 : options->loss_scale;
    if (DP_OPTIONS_HAVE(options, lr)) lr = options->lr;
    if (DP_OPTIONS_HAVE(options, memory))
      opts.memory = dp::capi::CheckedMemoryMode(options->memory, dp::MemoryMode::kShare, "options->memory", __func__);
    if (DP_OPTIONS_HAVE(options, loss_scaling)) {
      DP_CHECK_ARG(options->loss_scaling == DP_LOSS_SCALING_NONE || options->loss_scaling == DP_LOSS_SCALING_DYNAMIC,
                   "options->loss_scaling ", options->loss_scaling, " is not a DP_LOSS_SCALING_* value");
      opts.loss_scaling.dynamic = options->loss_scaling == DP_LOSS_SCALING_DYNAMIC;
      DP_CHECK_ARG(options->initial_loss_scale >= 0 && options->initial_loss_scale <= 3.4e38,
                   "options->initial_loss_scale must be a positive float (0: 65536), got ", options->initial_loss_scale);
      if (options->initial_loss_scale != 0) opts.loss_scaling.initial = options->initial_loss_scale;
    }
  }
  dp::ModelDef overridden;
  dp::TrainingNets nets = dp::BuildTraining(dp::capi::ModelWithLr(*model->def, lr, &overridden, __func__), opts);
  auto init = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(std::move(nets.init)));
  auto train = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(std::move(nets.train)));
  auto eval = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(std::move(nets.eval)));
  if (out_init) *out_init = init.release();
  if (out_train) *out_train = train.release();
  if (out_eval) *out_eval = eval.release();
  DP_API_END
}

dp_status* dp_model_build_inference(const dp_model* model, const char* const* outputs, size_t num_outputs,
                                    const dp_inference_options* options, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  dp::InferenceOptions opts;
  if (options != nullptr) {
    DP_CHECK_OPTIONS_SIZE(options, no_fuse);
    opts.fuse = options->no_fuse == 0;
  }
  const std::vector<std::string> names = dp::capi::Names(outputs, num_outputs, "outputs", __func__);
  *out = dp::capi::NewNetDef(dp::BuildInference(*model->def, names, opts));
  DP_API_END
}

}  // extern "C"
