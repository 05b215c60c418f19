// dp_parallelize and the data-parallel model handle.
#include "capi/handles.h"

extern "C" {

dp_status* dp_parallelize(const dp_model* model, const dp_parallel_options* options, dp_parallel_model** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(options);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(DP_OPTIONS_HAVE(options, fuse), "options->struct_size ", options->struct_size, " is too small");
  DP_CHECK_ARG(options->device_type == DP_DEVICE_CPU || options->device_type == DP_DEVICE_CUDA,
               "options->device_type ", options->device_type, " is not a device type");
  DP_CHECK_ARG(options->device_ids != nullptr || options->num_devices == 0,
               "options->device_ids is NULL but options->num_devices is ", options->num_devices);
  dp::ParallelizeOptions o;
  o.device_type = static_cast<dp::DeviceType>(options->device_type);
  o.device_ids.assign(options->device_ids, options->device_ids + options->num_devices);
  o.first_bucket_bytes = options->first_bucket_bytes;
  o.bucket_bytes = options->bucket_bytes;
  o.uneven_split = options->uneven_split != 0;
  o.fuse = options->fuse != 0;
  if (DP_OPTIONS_HAVE(options, accumulate_steps)) o.accumulate_steps = options->accumulate_steps;
  if (DP_OPTIONS_HAVE(options, bmuf_block_length) && options->bmuf != 0) {
    o.bmuf.enabled = true;
    o.bmuf.block_lr = options->bmuf_block_lr;
    o.bmuf.block_momentum = options->bmuf_block_momentum;
    o.bmuf.nesterov = options->bmuf_nesterov != 0;
    o.bmuf.block_length = options->bmuf_block_length;
  }
  if (DP_OPTIONS_HAVE(options, computed_params)) {
    DP_CHECK_ARG(options->computed_params >= DP_COMPUTED_PARAMS_BROADCAST &&
                     options->computed_params <= DP_COMPUTED_PARAMS_NONE,
                 "options->computed_params ", options->computed_params, " is not a DP_COMPUTED_PARAMS_* value");
    o.computed_params = static_cast<dp::ComputedParamsSync>(options->computed_params);
  }
  if (DP_OPTIONS_HAVE(options, nccl)) o.nccl = options->nccl != 0;
  if (DP_OPTIONS_HAVE(options, shared_model)) o.shared_model = options->shared_model != 0;
  if (DP_OPTIONS_HAVE(options, sync_bn)) o.sync_bn = options->sync_bn != 0;
  dp::ModelDef overridden;
  const dp::ModelDef& m = dp::capi::ModelWithLr(*model->def, DP_OPTIONS_HAVE(options, lr) ? options->lr : 0.0,
                                                &overridden, __func__);
  auto h = std::make_unique<dp_parallel_model>();
  h->nets = dp::Parallelize(m, o);
  *out = h.release();
  DP_API_END
}

dp_status* dp_parallel_model_nets(const dp_parallel_model* model, dp_netdef** out_init, dp_netdef** out_train,
                                  dp_netdef** out_eval) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  auto init = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(model->nets.init));
  auto train = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(model->nets.train));
  auto eval = std::unique_ptr<dp_netdef>(dp::capi::NewNetDef(model->nets.eval));
  if (out_init) *out_init = init.release();
  if (out_train) *out_train = train.release();
  if (out_eval) *out_eval = eval.release();
  DP_API_END
}

dp_status* dp_parallel_model_accumulate_net(const dp_parallel_model* model, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  DP_ENFORCE_CODE(!model->nets.accumulate.ops.empty(), dp::Code::kFailedPrecondition,
                  "dp_parallel_model_accumulate_net: the model was parallelized without gradient accumulation "
                  "(accumulate_steps 1)");
  *out = dp::capi::NewNetDef(model->nets.accumulate);
  DP_API_END
}

dp_status* dp_parallel_model_block_net(const dp_parallel_model* model, dp_netdef** out, int32_t* out_block_length) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  DP_ENFORCE_CODE(!model->nets.block.ops.empty(), dp::Code::kFailedPrecondition,
                  "dp_parallel_model_block_net: the model was parallelized without BMUF");
  *out = dp::capi::NewNetDef(model->nets.block);
  if (out_block_length != nullptr) *out_block_length = model->nets.block_length;
  DP_API_END
}

dp_status* dp_parallel_model_sync_net(const dp_parallel_model* model, dp_netdef** out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(out);
  *out = dp::capi::NewNetDef(model->nets.sync);
  DP_API_END
}

dp_status* dp_parallel_model_sync(const dp_parallel_model* model, dp_workspace* workspace) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(model);
  DP_CHECK_NOT_NULL(workspace);
  dp::Net(std::make_shared<const dp::NetDef>(model->nets.sync), workspace->ws).Run();
  DP_API_END
}

size_t dp_parallel_model_num_replicas(const dp_parallel_model* model) {
  return model == nullptr ? 0 : model->nets.scopes.size();
}

const char* dp_parallel_model_scope(const dp_parallel_model* model, size_t i) {
  if (model == nullptr || i >= model->nets.scopes.size()) return nullptr;
  return model->nets.scopes[i].c_str();
}

void dp_parallel_model_free(dp_parallel_model* model) { delete model; }

}  // extern "C"
