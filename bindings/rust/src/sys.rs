//! Raw declarations mirroring `include/dp/dp.h` exactly (types, constants,
//! structs, functions). Everything here is `unsafe` to call; the safe API in
//! the other modules is built on it. Keep in step with dp.h: the test
//! `header_coverage` fails when dp.h declares a function missing here.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

// Version of the header this binding mirrors.
pub const DP_VERSION_MAJOR: u32 = 0;
pub const DP_VERSION_MINOR: u32 = 6;
pub const DP_VERSION_PATCH: u32 = 0;
pub const DP_VERSION_NUMBER: u32 = DP_VERSION_MAJOR * 10000 + DP_VERSION_MINOR * 100 + DP_VERSION_PATCH;
pub const DP_ABI_VERSION: u32 = 0;

// Status codes.
pub const DP_OK: i32 = 0;
pub const DP_ERR_INVALID_ARGUMENT: i32 = 1;
pub const DP_ERR_NOT_FOUND: i32 = 2;
pub const DP_ERR_ALREADY_EXISTS: i32 = 3;
pub const DP_ERR_OUT_OF_RANGE: i32 = 4;
pub const DP_ERR_UNIMPLEMENTED: i32 = 5;
pub const DP_ERR_INTERNAL: i32 = 6;
pub const DP_ERR_UNAVAILABLE: i32 = 7;
pub const DP_ERR_CANCELLED: i32 = 8;
pub const DP_ERR_TIMEOUT: i32 = 9;
pub const DP_ERR_DATA_LOSS: i32 = 10;
pub const DP_ERR_OUT_OF_MEMORY: i32 = 11;
pub const DP_ERR_FAILED_PRECONDITION: i32 = 12;
pub const DP_ERR_IO: i32 = 13;
pub const DP_ERR_PARSE: i32 = 14;
pub const DP_ERR_INVALID_NET: i32 = 15;
pub const DP_ERR_SHAPE: i32 = 16;
pub const DP_ERR_DTYPE: i32 = 17;

pub const DP_LOG_DEBUG: i32 = 0;
pub const DP_LOG_INFO: i32 = 1;
pub const DP_LOG_WARNING: i32 = 2;
pub const DP_LOG_ERROR: i32 = 3;

pub const DP_DEVICE_CPU: i32 = 0;
pub const DP_DEVICE_CUDA: i32 = 1;
pub const DP_DEVICE_NONE: i32 = -1;

// dp_build_info.cuda_state (since 0.6).
pub const DP_CUDA_STATE_NOT_BUILT: i32 = 0;
pub const DP_CUDA_STATE_AVAILABLE: i32 = 1;
pub const DP_CUDA_STATE_MODULE_NOT_FOUND: i32 = 2;
pub const DP_CUDA_STATE_RUNTIME_MISSING: i32 = 3;
pub const DP_CUDA_STATE_MODULE_MISMATCH: i32 = 4;
pub const DP_CUDA_STATE_NO_DRIVER: i32 = 5;
pub const DP_CUDA_STATE_NO_DEVICE: i32 = 6;

pub const DP_DTYPE_FLOAT32: i32 = 1;
pub const DP_DTYPE_FLOAT16: i32 = 2;
pub const DP_DTYPE_BFLOAT16: i32 = 3;
pub const DP_DTYPE_FLOAT64: i32 = 4;
pub const DP_DTYPE_INT32: i32 = 5;
pub const DP_DTYPE_INT64: i32 = 6;
pub const DP_DTYPE_UINT8: i32 = 7;
pub const DP_DTYPE_BOOL: i32 = 8;

pub const DP_ARG_FLOAT: i32 = 1;
pub const DP_ARG_INT: i32 = 2;
pub const DP_ARG_STRING: i32 = 3;
pub const DP_ARG_FLOATS: i32 = 4;
pub const DP_ARG_INTS: i32 = 5;
pub const DP_ARG_STRINGS: i32 = 6;
pub const DP_ARG_NET: i32 = 7;
pub const DP_ARG_NETS: i32 = 8;

// Since 0.6.
pub const DP_INPLACE_ALLOWED: i32 = 1;
pub const DP_INPLACE_ENFORCED: i32 = 2;
pub const DP_GRADIENT_UNDECLARED: i32 = 0;
pub const DP_GRADIENT_DIFFERENTIABLE: i32 = 1;
pub const DP_GRADIENT_NOT_DIFFERENTIABLE: i32 = 2;
pub const DP_GRADIENT_STOP: i32 = 3;

pub const DP_EXECUTOR_DEFAULT: i32 = 0;
pub const DP_EXECUTOR_SIMPLE: i32 = 1;
pub const DP_EXECUTOR_ASYNC: i32 = 2;

pub const DP_MODEL_PARAMS: i32 = 0;
pub const DP_MODEL_COMPUTED_PARAMS: i32 = 1;
pub const DP_MODEL_INPUTS: i32 = 2;
pub const DP_MODEL_LOSSES: i32 = 3;
pub const DP_MODEL_METRICS: i32 = 4;

pub const DP_MODEL_INIT_NET: i32 = 0;
pub const DP_MODEL_FORWARD_NET: i32 = 1;

pub const DP_COMPUTED_PARAMS_BROADCAST: i32 = 0;
pub const DP_COMPUTED_PARAMS_AVERAGE: i32 = 1;
pub const DP_COMPUTED_PARAMS_NONE: i32 = 2;

pub const DP_CUDA_COLLECTIVES_NCCL: i32 = 0;
pub const DP_CUDA_COLLECTIVES_TREE: i32 = 1;
pub const DP_SHARED_MODEL_ON: i32 = 1;
pub const DP_SHARED_MODEL_AUTO: i32 = 2;
pub const DP_MEMORY_DEFAULT: i32 = 0;
pub const DP_MEMORY_KEEP: i32 = 1;
pub const DP_MEMORY_SHARE: i32 = 2;
pub const DP_MEMORY_FREE: i32 = 3;
pub const DP_CUDA_GRAPHS_DEFAULT: i32 = 0;
pub const DP_CUDA_GRAPHS_ON: i32 = 1;
pub const DP_CUDA_GRAPHS_OFF: i32 = 2;
pub const DP_MATH_DEFAULT: i32 = 0;
pub const DP_MATH_FP32: i32 = 1;
pub const DP_MATH_TF32: i32 = 2;
pub const DP_MATH_BF16: i32 = 3;
pub const DP_MATH_FP16: i32 = 4;
pub const DP_LOSS_SCALING_NONE: i32 = 0;
pub const DP_LOSS_SCALING_DYNAMIC: i32 = 1;
pub const DP_GRADIENT_COMPRESSION_NONE: i32 = 0;
pub const DP_GRADIENT_COMPRESSION_BF16: i32 = 1;
pub const DP_GRADIENT_COMPRESSION_FP16: i32 = 2;

// dp_onnx_import_options.head (since 0.6).
pub const DP_ONNX_HEAD_NONE: i32 = 0;
pub const DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY: i32 = 1;

// Opaque handles: zero-sized, unconstructible, neither Send nor Sync by
// themselves (the safe wrappers decide per handle).
macro_rules! opaque {
    ($($name:ident),*) => {$(
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
            _not_send_sync: std::marker::PhantomData<*mut u8>,
        }
    )*};
}
opaque!(
    dp_status, dp_tensor, dp_workspace, dp_string_list, dp_netdef, dp_buffer, dp_opdef, dp_argdef, dp_net,
    dp_model, dp_parallel_model, dp_checkpoint_info, dp_checkpoint_job, dp_loader, dp_opschema
);

pub type dp_log_callback = Option<unsafe extern "C" fn(user_data: *mut c_void, level: i32, message: *const c_char)>;
pub type dp_deleter = Option<unsafe extern "C" fn(data: *mut c_void, user_data: *mut c_void)>;
// Since 0.5.
pub type dp_loader_fill_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        indices: *const i64,
        count: usize,
        buffers: *const *mut c_void,
        row_bytes: *const usize,
        num_inputs: usize,
    ) -> i32,
>;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_build_info {
    pub struct_size: u32,
    pub version: *const c_char,
    pub cuda: i32,
    pub cuda_runtime_version: i32,
    pub cuda_driver_version: i32,
    pub cublas_version: i32,
    pub nccl_version: i32,
    pub cuda_archs: *const c_char,
    pub blas: *const c_char,
    pub blas_config: *const c_char,
    pub compiler: *const c_char,
    pub build_type: *const c_char,
    // Since 0.6.
    pub cuda_state: i32,
    pub cuda_loaded_runtime_version: i32,
    pub cuda_state_detail: *const c_char,
    pub cuda_module: *const c_char,
    pub onnx: i32,
    pub onnx_version: *const c_char,
}

/// Since 0.6.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_memory_stats {
    pub struct_size: u32,
    pub allocated: u64,
    pub peak: u64,
    pub reserved: u64,
    pub raw_allocs: u64,
    pub raw_frees: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_workspace_options {
    pub struct_size: u32,
    pub max_bytes: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_net_options {
    pub struct_size: u32,
    pub executor: i32,
    pub num_workers: i32,
    pub streams_per_gpu: i32,
    pub profile: i32,
    pub unread_feed_error: i32,
    // Since 0.6.
    pub memory: i32,
    pub cuda_graphs: i32,
    pub math_mode: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_gradient_options {
    pub struct_size: u32,
    pub losses: *const *const c_char,
    pub num_losses: usize,
    pub wrt: *const *const c_char,
    pub num_wrt: usize,
    pub stop: *const *const c_char,
    pub num_stop: usize,
    pub loss_scale: f64,
    pub memory: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_optimizer_info {
    pub struct_size: u32,
    pub type_: *const c_char,
    pub lr: f64,
    pub momentum: f64,
    pub nesterov: i32,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    pub weight_decay: f64,
    pub lr_policy: *const c_char,
    pub gamma: f64,
    pub stepsize: i64,
    pub power: f64,
    pub max_iter: i64,
    pub warmup_iters: i64,
    pub warmup_start_factor: f64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_training_options {
    pub struct_size: u32,
    pub loss_scale: f64,
    pub lr: f64,
    pub memory: i32,
    // Since 0.6.
    pub initial_loss_scale: f64,
    pub loss_scaling: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_inference_options {
    pub struct_size: u32,
    pub no_fuse: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_parallel_options {
    pub struct_size: u32,
    pub device_type: i32,
    pub device_ids: *const i32,
    pub num_devices: usize,
    pub first_bucket_bytes: i64,
    pub bucket_bytes: i64,
    pub uneven_split: i32,
    pub no_fuse: i32,
    pub lr: f64,
    pub accumulate_steps: i32,
    pub bmuf: i32,
    pub bmuf_block_lr: f64,
    pub bmuf_block_momentum: f64,
    pub bmuf_no_nesterov: i32,
    pub bmuf_block_length: i32,
    pub computed_params: i32,
    pub cuda_collectives: i32,
    pub shared_model: i32,
    pub sync_bn: i32,
    // Several processes (since 0.3).
    pub shard_id: i32,
    pub num_shards: i32,
    pub store: *const c_char,
    pub timeout_ms: i64,
    pub network_interface: *const c_char,
    pub run_id: *const c_char,
    // Since 0.4.
    pub local_transport: *const c_char,
    // Since 0.6.
    pub memory: i32,
    pub gradient_compression: i32,
    pub shard_optimizer_state: i32,
    // Since 0.6.
    pub initial_loss_scale: f64,
    pub loss_scaling: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_net_memory {
    pub struct_size: u32,
    pub mode: i32,
    pub peak_bytes: u64,
    pub bytes_in_use: u64,
    pub temporaries: u64,
    pub slots: u64,
    pub slot_bytes: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_checkpoint_save_options {
    pub struct_size: u32,
    pub model_name: *const c_char,
    pub iteration: i64,
    pub async_write_share: f64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_checkpoint_load_options {
    pub struct_size: u32,
    pub names: *const *const c_char,
    pub num_names: usize,
    pub lenient: i32,
    pub no_verify: i32,
    pub mmap: i32,
}

/// Since 0.6.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_onnx_import_options {
    pub struct_size: u32,
    pub head: i32,
    pub labels: *const c_char,
    pub optimizer: *const dp_optimizer_info,
}

/// Since 0.6.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_onnx_export_options {
    pub struct_size: u32,
    pub opset: i32,
    pub outputs: *const *const c_char,
    pub num_outputs: usize,
    pub param_prefix: *const c_char,
}

// Since 0.5.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_loader_options {
    pub struct_size: u32,
    pub batch_size: i64,
    pub seed: u64,
    pub no_shuffle: i32,
    pub keep_last: i32,
    pub num_shards: i32,
    pub shard_id: i32,
    pub prefetch: i32,
    pub timeout_ms: i32,
    // Since 0.6.
    pub device_type: i32,
    pub device_id: i32,
    pub host_dataset: i32,
}

// Since 0.5.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct dp_loader_input {
    pub blob: *const c_char,
    pub dtype: i32,
    pub sample_dims: *const i64,
    pub sample_ndim: usize,
}

extern "C" {
    // Version
    pub fn dp_version() -> *const c_char;
    pub fn dp_version_number() -> u32;

    // Status
    pub fn dp_status_code(status: *const dp_status) -> i32;
    pub fn dp_status_message(status: *const dp_status) -> *const c_char;
    pub fn dp_status_free(status: *mut dp_status);
    pub fn dp_status_code_name(code: i32) -> *const c_char;

    // Logging
    pub fn dp_log_set_callback(callback: dp_log_callback, user_data: *mut c_void, min_level: i32);

    // Devices and build information
    pub fn dp_device_count(device_type: i32, out_count: *mut i32) -> *mut dp_status;
    pub fn dp_build_info_get(out: *mut dp_build_info) -> *mut dp_status;
    // Since 0.6.
    pub fn dp_device_memory_stats(device_type: i32, device_id: i32, out: *mut dp_memory_stats) -> *mut dp_status;
    pub fn dp_device_reset_peak_memory(device_type: i32, device_id: i32) -> *mut dp_status;

    // Threads (since 0.5)
    pub fn dp_set_cpu_threads(max_threads: i32) -> *mut dp_status;
    pub fn dp_cpu_threads() -> i32;

    // Tensors
    pub fn dp_dtype_size(dtype: i32) -> usize;
    pub fn dp_tensor_create(
        dtype: i32, dims: *const i64, ndim: usize, data: *const c_void, nbytes: usize, out: *mut *mut dp_tensor,
    ) -> *mut dp_status;
    pub fn dp_tensor_create_borrowed(
        dtype: i32, dims: *const i64, ndim: usize, data: *const c_void, nbytes: usize, out: *mut *mut dp_tensor,
    ) -> *mut dp_status;
    pub fn dp_tensor_create_owned(
        dtype: i32, dims: *const i64, ndim: usize, data: *mut c_void, nbytes: usize, deleter: dp_deleter,
        user_data: *mut c_void, out: *mut *mut dp_tensor,
    ) -> *mut dp_status;
    pub fn dp_tensor_dtype(tensor: *const dp_tensor) -> i32;
    pub fn dp_tensor_ndim(tensor: *const dp_tensor) -> usize;
    pub fn dp_tensor_dims(tensor: *const dp_tensor) -> *const i64;
    pub fn dp_tensor_numel(tensor: *const dp_tensor) -> i64;
    pub fn dp_tensor_nbytes(tensor: *const dp_tensor) -> usize;
    pub fn dp_tensor_data(tensor: *const dp_tensor) -> *const c_void;
    pub fn dp_tensor_copy_to(tensor: *const dp_tensor, dst: *mut c_void, nbytes: usize) -> *mut dp_status;
    pub fn dp_tensor_free(tensor: *mut dp_tensor);

    // Workspaces
    pub fn dp_workspace_create(out: *mut *mut dp_workspace) -> *mut dp_status;
    pub fn dp_workspace_options_init(options: *mut dp_workspace_options, struct_size: usize);
    pub fn dp_workspace_create_with_options(
        options: *const dp_workspace_options, out: *mut *mut dp_workspace,
    ) -> *mut dp_status;
    pub fn dp_workspace_free(workspace: *mut dp_workspace);
    pub fn dp_workspace_feed(workspace: *mut dp_workspace, name: *const c_char, tensor: *const dp_tensor)
        -> *mut dp_status;
    pub fn dp_workspace_fetch(workspace: *mut dp_workspace, name: *const c_char, out: *mut *mut dp_tensor)
        -> *mut dp_status;
    pub fn dp_workspace_has_blob(workspace: *const dp_workspace, name: *const c_char, out_has: *mut i32)
        -> *mut dp_status;
    pub fn dp_string_list_size(list: *const dp_string_list) -> usize;
    pub fn dp_string_list_get(list: *const dp_string_list, i: usize) -> *const c_char;
    pub fn dp_string_list_free(list: *mut dp_string_list);
    pub fn dp_workspace_list_blobs(
        workspace: *const dp_workspace, prefix: *const c_char, out: *mut *mut dp_string_list,
    ) -> *mut dp_status;

    // Net definitions
    pub fn dp_netdef_from_buffer(data: *const c_void, size: usize, out: *mut *mut dp_netdef) -> *mut dp_status;
    pub fn dp_netdef_from_json(json: *const c_char, size: usize, out: *mut *mut dp_netdef) -> *mut dp_status;
    pub fn dp_netdef_from_file(path: *const c_char, out: *mut *mut dp_netdef) -> *mut dp_status;
    pub fn dp_buffer_data(buffer: *const dp_buffer) -> *const c_void;
    pub fn dp_buffer_size(buffer: *const dp_buffer) -> usize;
    pub fn dp_buffer_free(buffer: *mut dp_buffer);
    pub fn dp_netdef_to_buffer(netdef: *const dp_netdef, out: *mut *mut dp_buffer) -> *mut dp_status;
    pub fn dp_netdef_to_json(netdef: *const dp_netdef, out: *mut *mut dp_buffer) -> *mut dp_status;
    pub fn dp_netdef_to_dot(netdef: *const dp_netdef, out: *mut *mut dp_buffer) -> *mut dp_status;
    pub fn dp_netdef_name(netdef: *const dp_netdef) -> *const c_char;
    pub fn dp_netdef_num_ops(netdef: *const dp_netdef) -> usize;
    pub fn dp_netdef_free(netdef: *mut dp_netdef);

    // Introspection of a definition
    pub fn dp_netdef_num_external_inputs(netdef: *const dp_netdef) -> usize;
    pub fn dp_netdef_external_input(netdef: *const dp_netdef, i: usize) -> *const c_char;
    pub fn dp_netdef_num_external_outputs(netdef: *const dp_netdef) -> usize;
    pub fn dp_netdef_external_output(netdef: *const dp_netdef, i: usize) -> *const c_char;
    pub fn dp_netdef_device_type(netdef: *const dp_netdef) -> i32;
    pub fn dp_netdef_device_id(netdef: *const dp_netdef) -> i32;
    pub fn dp_netdef_executor(netdef: *const dp_netdef) -> i32;
    pub fn dp_netdef_num_workers(netdef: *const dp_netdef) -> i32;
    pub fn dp_netdef_memory(netdef: *const dp_netdef) -> i32;
    pub fn dp_netdef_op(netdef: *const dp_netdef, i: usize) -> *const dp_opdef;
    pub fn dp_opdef_type(op: *const dp_opdef) -> *const c_char;
    pub fn dp_opdef_name(op: *const dp_opdef) -> *const c_char;
    pub fn dp_opdef_engine(op: *const dp_opdef) -> *const c_char;
    pub fn dp_opdef_num_inputs(op: *const dp_opdef) -> usize;
    pub fn dp_opdef_input(op: *const dp_opdef, i: usize) -> *const c_char;
    pub fn dp_opdef_num_outputs(op: *const dp_opdef) -> usize;
    pub fn dp_opdef_output(op: *const dp_opdef, i: usize) -> *const c_char;
    pub fn dp_opdef_num_control_inputs(op: *const dp_opdef) -> usize;
    pub fn dp_opdef_control_input(op: *const dp_opdef, i: usize) -> *const c_char;
    pub fn dp_opdef_device_type(op: *const dp_opdef) -> i32;
    pub fn dp_opdef_device_id(op: *const dp_opdef) -> i32;
    pub fn dp_opdef_num_args(op: *const dp_opdef) -> usize;
    pub fn dp_opdef_arg(op: *const dp_opdef, i: usize) -> *const dp_argdef;
    pub fn dp_opdef_find_arg(op: *const dp_opdef, name: *const c_char) -> *const dp_argdef;
    pub fn dp_argdef_name(arg: *const dp_argdef) -> *const c_char;
    pub fn dp_argdef_kind(arg: *const dp_argdef) -> i32;
    pub fn dp_argdef_num_values(arg: *const dp_argdef) -> usize;
    pub fn dp_argdef_get_float(arg: *const dp_argdef, out: *mut f64) -> *mut dp_status;
    pub fn dp_argdef_get_int(arg: *const dp_argdef, out: *mut i64) -> *mut dp_status;
    pub fn dp_argdef_get_string(arg: *const dp_argdef, out: *mut *const c_char) -> *mut dp_status;
    pub fn dp_argdef_get_floats(arg: *const dp_argdef, out_data: *mut *const f64, out_count: *mut usize)
        -> *mut dp_status;
    pub fn dp_argdef_get_ints(arg: *const dp_argdef, out_data: *mut *const i64, out_count: *mut usize)
        -> *mut dp_status;
    pub fn dp_argdef_get_string_at(arg: *const dp_argdef, i: usize, out: *mut *const c_char) -> *mut dp_status;
    pub fn dp_argdef_get_net(arg: *const dp_argdef, out: *mut *mut dp_netdef) -> *mut dp_status;
    pub fn dp_argdef_get_net_at(arg: *const dp_argdef, i: usize, out: *mut *mut dp_netdef) -> *mut dp_status;

    // Op catalogue (since 0.6)
    pub fn dp_opschema_list_types(out: *mut *mut dp_string_list) -> *mut dp_status;
    pub fn dp_opschema_from_type(type_: *const c_char, out: *mut *mut dp_opschema) -> *mut dp_status;
    pub fn dp_opschema_free(schema: *mut dp_opschema);
    pub fn dp_opschema_type(schema: *const dp_opschema) -> *const c_char;
    pub fn dp_opschema_doc(schema: *const dp_opschema) -> *const c_char;
    pub fn dp_opschema_min_inputs(schema: *const dp_opschema) -> i32;
    pub fn dp_opschema_max_inputs(schema: *const dp_opschema) -> i32;
    pub fn dp_opschema_min_outputs(schema: *const dp_opschema) -> i32;
    pub fn dp_opschema_max_outputs(schema: *const dp_opschema) -> i32;
    pub fn dp_opschema_num_named_inputs(schema: *const dp_opschema) -> usize;
    pub fn dp_opschema_input_name(schema: *const dp_opschema, i: usize) -> *const c_char;
    pub fn dp_opschema_num_named_outputs(schema: *const dp_opschema) -> usize;
    pub fn dp_opschema_output_name(schema: *const dp_opschema, i: usize) -> *const c_char;
    pub fn dp_opschema_num_args(schema: *const dp_opschema) -> usize;
    pub fn dp_opschema_arg_name(schema: *const dp_opschema, i: usize) -> *const c_char;
    pub fn dp_opschema_arg_kind(schema: *const dp_opschema, i: usize) -> i32;
    pub fn dp_opschema_arg_doc(schema: *const dp_opschema, i: usize) -> *const c_char;
    pub fn dp_opschema_arg_required(schema: *const dp_opschema, i: usize) -> i32;
    pub fn dp_opschema_arg_default(schema: *const dp_opschema, i: usize) -> *const dp_argdef;
    pub fn dp_opschema_arg_default_text(schema: *const dp_opschema, i: usize) -> *const c_char;
    pub fn dp_opschema_num_inplace(schema: *const dp_opschema) -> usize;
    pub fn dp_opschema_inplace_at(schema: *const dp_opschema, i: usize, out_input: *mut i32, out_output: *mut i32)
        -> i32;
    pub fn dp_opschema_inplace_shift(schema: *const dp_opschema) -> i32;
    pub fn dp_opschema_has_kernel(schema: *const dp_opschema, device_type: i32) -> i32;
    pub fn dp_opschema_engines(schema: *const dp_opschema, device_type: i32, out: *mut *mut dp_string_list)
        -> *mut dp_status;
    pub fn dp_opschema_gradient(schema: *const dp_opschema) -> i32;

    // Nets
    pub fn dp_net_options_init(options: *mut dp_net_options, struct_size: usize);
    pub fn dp_net_create(
        workspace: *mut dp_workspace, netdef: *const dp_netdef, options: *const dp_net_options, out: *mut *mut dp_net,
    ) -> *mut dp_status;
    pub fn dp_net_run(net: *mut dp_net) -> *mut dp_status;
    pub fn dp_net_run_async(net: *mut dp_net) -> *mut dp_status;
    pub fn dp_net_wait(net: *mut dp_net, timeout_ms: i64) -> *mut dp_status;
    pub fn dp_net_cancel(net: *mut dp_net);
    pub fn dp_net_trace_json(net: *const dp_net, out: *mut *mut dp_buffer) -> *mut dp_status;
    pub fn dp_net_memory_stats(net: *const dp_net, device_type: i32, device_id: i32, out: *mut dp_net_memory)
        -> *mut dp_status;
    pub fn dp_net_to_dot(net: *const dp_net, out: *mut *mut dp_buffer) -> *mut dp_status;
    pub fn dp_net_free(net: *mut dp_net);

    // Gradients
    pub fn dp_gradient_options_init(options: *mut dp_gradient_options, struct_size: usize);
    pub fn dp_netdef_add_gradients(
        netdef: *const dp_netdef, options: *const dp_gradient_options, out: *mut *mut dp_netdef,
        out_grad_map: *mut *mut dp_string_list,
    ) -> *mut dp_status;

    // Models
    pub fn dp_model_from_buffer(data: *const c_void, size: usize, out: *mut *mut dp_model) -> *mut dp_status;
    pub fn dp_model_from_json(json: *const c_char, size: usize, out: *mut *mut dp_model) -> *mut dp_status;
    pub fn dp_model_from_file(path: *const c_char, out: *mut *mut dp_model) -> *mut dp_status;
    pub fn dp_model_to_json(model: *const dp_model, out: *mut *mut dp_buffer) -> *mut dp_status;
    pub fn dp_model_to_buffer(model: *const dp_model, out: *mut *mut dp_buffer) -> *mut dp_status;
    pub fn dp_model_blobs(model: *const dp_model, which: i32, out: *mut *mut dp_string_list) -> *mut dp_status;
    pub fn dp_model_free(model: *mut dp_model);
    pub fn dp_model_name(model: *const dp_model) -> *const c_char;
    pub fn dp_model_net(model: *const dp_model, which: i32, out: *mut *mut dp_netdef) -> *mut dp_status;
    pub fn dp_model_has_optimizer(model: *const dp_model) -> i32;
    pub fn dp_model_get_optimizer(model: *const dp_model, out: *mut dp_optimizer_info) -> *mut dp_status;
    pub fn dp_training_options_init(options: *mut dp_training_options, struct_size: usize);
    pub fn dp_model_build_training(
        model: *const dp_model, options: *const dp_training_options, out_init: *mut *mut dp_netdef,
        out_train: *mut *mut dp_netdef, out_eval: *mut *mut dp_netdef,
    ) -> *mut dp_status;
    pub fn dp_inference_options_init(options: *mut dp_inference_options, struct_size: usize);
    pub fn dp_model_build_inference(
        model: *const dp_model, outputs: *const *const c_char, num_outputs: usize,
        options: *const dp_inference_options, out: *mut *mut dp_netdef,
    ) -> *mut dp_status;

    // ONNX (since 0.6)
    pub fn dp_onnx_import_options_init(options: *mut dp_onnx_import_options, struct_size: usize);
    pub fn dp_model_from_onnx_buffer(
        data: *const c_void, size: usize, options: *const dp_onnx_import_options, out: *mut *mut dp_model,
    ) -> *mut dp_status;
    pub fn dp_model_from_onnx_file(
        path: *const c_char, options: *const dp_onnx_import_options, out: *mut *mut dp_model,
    ) -> *mut dp_status;
    pub fn dp_onnx_export_options_init(options: *mut dp_onnx_export_options, struct_size: usize);
    pub fn dp_model_to_onnx(
        model: *const dp_model, workspace: *const dp_workspace, options: *const dp_onnx_export_options,
        out: *mut *mut dp_buffer,
    ) -> *mut dp_status;
    pub fn dp_model_save_onnx(
        model: *const dp_model, workspace: *const dp_workspace, options: *const dp_onnx_export_options,
        path: *const c_char,
    ) -> *mut dp_status;

    // Data parallelism
    pub fn dp_parallel_options_init(options: *mut dp_parallel_options, struct_size: usize);
    pub fn dp_model_parallelize(
        model: *const dp_model, options: *const dp_parallel_options, out: *mut *mut dp_parallel_model,
    ) -> *mut dp_status;
    pub fn dp_parallel_model_nets(
        model: *const dp_parallel_model, out_init: *mut *mut dp_netdef, out_train: *mut *mut dp_netdef,
        out_eval: *mut *mut dp_netdef,
    ) -> *mut dp_status;
    pub fn dp_parallel_model_accumulate_net(model: *const dp_parallel_model, out: *mut *mut dp_netdef)
        -> *mut dp_status;
    pub fn dp_parallel_model_block_net(
        model: *const dp_parallel_model, out: *mut *mut dp_netdef, out_block_length: *mut i32,
    ) -> *mut dp_status;
    pub fn dp_parallel_model_sync_net(model: *const dp_parallel_model, out: *mut *mut dp_netdef) -> *mut dp_status;
    pub fn dp_parallel_model_sync(model: *const dp_parallel_model, workspace: *mut dp_workspace) -> *mut dp_status;
    pub fn dp_parallel_model_num_replicas(model: *const dp_parallel_model) -> usize;
    pub fn dp_parallel_model_num_shards(model: *const dp_parallel_model) -> i32;
    pub fn dp_parallel_model_shard_id(model: *const dp_parallel_model) -> i32;
    pub fn dp_parallel_model_join(
        model: *const dp_parallel_model, workspace: *mut dp_workspace, out_steps: *mut i64,
    ) -> *mut dp_status;
    pub fn dp_parallel_model_scope(model: *const dp_parallel_model, i: usize) -> *const c_char;
    pub fn dp_parallel_model_free(model: *mut dp_parallel_model);

    // Checkpoints
    pub fn dp_checkpoint_save_options_init(options: *mut dp_checkpoint_save_options, struct_size: usize);
    pub fn dp_checkpoint_save(
        workspace: *const dp_workspace, names: *const *const c_char, num_names: usize, path: *const c_char,
        options: *const dp_checkpoint_save_options,
    ) -> *mut dp_status;
    pub fn dp_checkpoint_load_options_init(options: *mut dp_checkpoint_load_options, struct_size: usize);
    pub fn dp_checkpoint_load(
        workspace: *mut dp_workspace, path: *const c_char, options: *const dp_checkpoint_load_options,
    ) -> *mut dp_status;
    pub fn dp_checkpoint_info_from_file(path: *const c_char, out: *mut *mut dp_checkpoint_info) -> *mut dp_status;
    pub fn dp_checkpoint_info_dp_version(info: *const dp_checkpoint_info) -> *const c_char;
    pub fn dp_checkpoint_info_model_name(info: *const dp_checkpoint_info) -> *const c_char;
    pub fn dp_checkpoint_info_iteration(info: *const dp_checkpoint_info) -> i64;
    pub fn dp_checkpoint_info_num_tensors(info: *const dp_checkpoint_info) -> usize;
    pub fn dp_checkpoint_info_tensor_name(info: *const dp_checkpoint_info, i: usize) -> *const c_char;
    pub fn dp_checkpoint_info_tensor_dtype(info: *const dp_checkpoint_info, i: usize) -> i32;
    pub fn dp_checkpoint_info_tensor_ndim(info: *const dp_checkpoint_info, i: usize) -> usize;
    pub fn dp_checkpoint_info_tensor_dims(info: *const dp_checkpoint_info, i: usize) -> *const i64;
    pub fn dp_checkpoint_info_tensor_nbytes(info: *const dp_checkpoint_info, i: usize) -> u64;
    pub fn dp_checkpoint_info_free(info: *mut dp_checkpoint_info);
    pub fn dp_checkpoint_save_async(
        workspace: *const dp_workspace, names: *const *const c_char, num_names: usize, path: *const c_char,
        options: *const dp_checkpoint_save_options, out: *mut *mut dp_checkpoint_job,
    ) -> *mut dp_status;
    pub fn dp_checkpoint_wait(job: *mut dp_checkpoint_job, timeout_ms: i64) -> *mut dp_status;
    pub fn dp_checkpoint_job_free(job: *mut dp_checkpoint_job);
    pub fn dp_checkpoint_list_steps(dir: *const c_char, out: *mut *mut dp_string_list) -> *mut dp_status;
    pub fn dp_checkpoint_prune(dir: *const c_char, keep: i32) -> *mut dp_status;
    pub fn dp_model_checkpoint_blobs(model: *const dp_model, out: *mut *mut dp_string_list) -> *mut dp_status;
    pub fn dp_parallel_model_save(
        model: *const dp_parallel_model, workspace: *const dp_workspace, path: *const c_char,
        options: *const dp_checkpoint_save_options,
    ) -> *mut dp_status;
    pub fn dp_parallel_model_load(
        model: *const dp_parallel_model, workspace: *mut dp_workspace, path: *const c_char,
        options: *const dp_checkpoint_load_options,
    ) -> *mut dp_status;

    // Data: the input pipeline (since 0.5)
    pub fn dp_loader_options_init(options: *mut dp_loader_options, struct_size: usize);
    pub fn dp_loader_create(
        workspace: *mut dp_workspace, blob_names: *const *const c_char, tensors: *const *const dp_tensor,
        num_inputs: usize, options: *const dp_loader_options, out: *mut *mut dp_loader,
    ) -> *mut dp_status;
    pub fn dp_loader_create_callback(
        workspace: *mut dp_workspace, inputs: *const dp_loader_input, num_inputs: usize, num_samples: i64,
        fill: dp_loader_fill_fn, user_data: *mut c_void, options: *const dp_loader_options,
        out: *mut *mut dp_loader,
    ) -> *mut dp_status;
    pub fn dp_loader_next(loader: *mut dp_loader, out_fed: *mut i32) -> *mut dp_status;
    pub fn dp_loader_seek(loader: *mut dp_loader, epoch: i64, step: i64) -> *mut dp_status;
    pub fn dp_loader_steps_per_epoch(loader: *const dp_loader) -> i64;
    pub fn dp_loader_epoch(loader: *const dp_loader) -> i64;
    pub fn dp_loader_step(loader: *const dp_loader) -> i64;
    pub fn dp_loader_batch_rows(loader: *const dp_loader) -> i64;
    pub fn dp_loader_free(loader: *mut dp_loader);

    // Data: files
    pub fn dp_tensor_from_idx_file(path: *const c_char, out: *mut *mut dp_tensor) -> *mut dp_status;
}
