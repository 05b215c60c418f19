//! Safe Rust binding of dp, an embeddable data-parallel deep-learning
//! runtime, over its C API (`include/dp/dp.h`); the raw declarations are in
//! [`sys`].
//!
//! Rules carried into the types:
//! - Every fallible call returns `Result<T, Error>`; the dp_status is freed.
//! - Every handle is released by `Drop`.
//! - Immutable handles (NetDef, Model, ParallelModel, Tensor,
//!   CheckpointInfo, CheckpointJob) are `Send + Sync`, as dp.h allows.
//!   `Workspace` is `Send + Sync` (feeds and fetches from any number of
//!   threads; it refuses them while a net runs on it, since dp.h forbids
//!   feeding or fetching a blob that a running net writes); `Net` and
//!   `Loader` are neither, so a net runs on the thread that made it;
//!   `Canceller` cancels from any thread.
//! - Borrowed strings, arrays and views carry the lifetime of their owner.
//!
//! Memory fed without copying must outlive the workspace (this must not
//! compile):
//! ```compile_fail
//! let ws = dp::Workspace::new().unwrap();
//! {
//!     let data = vec![1f32; 4];
//!     ws.feed("x", &dp::Tensor::borrowed(&[4], &data).unwrap()).unwrap();
//! } // `data` dropped while the workspace still shares it
//! ws.fetch("x").unwrap();
//! ```
//! A net stays on its workspace's thread (this must not compile):
//! ```compile_fail
//! let ws = dp::Workspace::new().unwrap();
//! let def = dp::NetDef::from_json("{}").unwrap();
//! let net = dp::Net::new(&ws, &def, None).unwrap();
//! std::thread::scope(|s| { s.spawn(|| net.run()); });
//! ```
pub mod sys;

mod util;

pub mod checkpoint;
pub mod error;
pub mod loader;
pub mod log;
pub mod model;
pub mod net;
pub mod netdef;
pub mod opschema;
pub mod options;
pub mod tensor;
pub mod workspace;

pub use checkpoint::{CheckpointInfo, CheckpointJob, TensorInfo};
pub use error::{code_name, Code, Error, Result};
pub use loader::{Loader, LoaderBatch, LoaderInput};
pub use model::{BlobList, Model, ModelNet, OptimizerInfo, ParallelModel, TrainingNets};
pub use net::{AsyncRun, Canceller, Net, NetMemoryStats};
pub use netdef::{ArgDef, ArgKind, NetDef, OpDef};
pub use opschema::{op_types, ArgValue, GradientKind, InplacePair, InplaceRule, OpArg, OpSchema};
pub use options::{
    ComputedParams, CudaCollectives, CudaGraphs, DeviceType, Executor, GradientCompression, GradientOptions, InferenceOptions, LoadOptions, LossScaling, MathMode,
    LoaderOptions, Memory, NetOptions, OnnxExportOptions, OnnxHead, OnnxImportOptions, ParallelOptions, SaveOptions,
    TrainingOptions, WorkspaceOptions,
};
pub use tensor::{dtype_name, dtype_size, DType, Element, Tensor};
pub use workspace::Workspace;

use error::check;

/// Version of the loaded library ("0.6.0").
pub fn version() -> &'static str {
    unsafe { util::static_str(sys::dp_version()) }
}

/// DP_VERSION_NUMBER of the loaded library; compare with
/// `sys::DP_VERSION_NUMBER` (the header this binding mirrors).
pub fn version_number() -> u32 {
    unsafe { sys::dp_version_number() }
}

/// Number of devices of a type (CUDA: 0 when absent).
pub fn device_count(device_type: DeviceType) -> Result<i32> {
    device_count_raw(device_type.value())
}

/// dp_device_count with a raw DP_DEVICE_* value (unknown: InvalidArgument).
pub fn device_count_raw(device_type: i32) -> Result<i32> {
    let mut n = 0;
    check(unsafe { sys::dp_device_count(device_type, &mut n) })?;
    Ok(n)
}

/// One device's memory as dp uses it (dp_memory_stats), in bytes and counts
/// since the process started. On the CPU (every cpu:N is the host): the
/// memory dp allocates itself, `reserved` equal to `allocated`, the raw
/// counts its host allocations and frees. On a GPU: its caching allocator's
/// blocks handed out (`allocated`, rounded sizes), segments held
/// (`reserved`), cudaMalloc and cudaFree calls. Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStats {
    /// Bytes dp's storage holds now.
    pub allocated: u64,
    /// The most allocated at once since the last [`reset_peak_memory`].
    pub peak: u64,
    /// Bytes dp holds from the device, its cache included.
    pub reserved: u64,
    /// Allocations from the device itself (GPU: cudaMalloc calls).
    pub raw_allocs: u64,
    /// Frees to the device itself (GPU: cudaFree calls).
    pub raw_frees: u64,
}

/// The memory statistics of device (`device_type`, `device_id`)
/// (dp_device_memory_stats): InvalidArgument for a negative id, Unavailable
/// for a CUDA device [`device_count`] does not report. Any thread. Since 0.6.
pub fn device_memory_stats(device_type: DeviceType, device_id: i32) -> Result<MemoryStats> {
    device_memory_stats_raw(device_type.value(), device_id)
}

/// dp_device_memory_stats with a raw DP_DEVICE_* value (unknown: InvalidArgument).
pub fn device_memory_stats_raw(device_type: i32, device_id: i32) -> Result<MemoryStats> {
    let mut c: sys::dp_memory_stats = unsafe { std::mem::zeroed() };
    c.struct_size = std::mem::size_of::<sys::dp_memory_stats>() as u32;
    check(unsafe { sys::dp_device_memory_stats(device_type, device_id, &mut c) })?;
    Ok(MemoryStats {
        allocated: c.allocated,
        peak: c.peak,
        reserved: c.reserved,
        raw_allocs: c.raw_allocs,
        raw_frees: c.raw_frees,
    })
}

/// Makes the device's peak its allocated bytes now (the device's, process
/// wide: dp_device_reset_peak_memory); the errors of [`device_memory_stats`].
/// Since 0.6.
pub fn reset_peak_memory(device_type: DeviceType, device_id: i32) -> Result<()> {
    check(unsafe { sys::dp_device_reset_peak_memory(device_type.value(), device_id) })
}

/// Caps dp's compute threads at `max_threads` (0: no cap, the default),
/// process wide (dp_set_cpu_threads, since 0.5): nets created afterwards
/// size their worker pools from it, ops started afterwards split their work
/// within it. InvalidArgument for a negative value.
pub fn set_cpu_threads(max_threads: i32) -> Result<()> {
    check(unsafe { sys::dp_set_cpu_threads(max_threads) })
}

/// The threads dp's compute uses now: the usable CPUs (affinity and cgroup
/// quota), capped by [`set_cpu_threads`]; at least 1 (dp_cpu_threads).
pub fn cpu_threads() -> i32 {
    unsafe { sys::dp_cpu_threads() }
}

/// Whether CUDA devices are there, and if not why (dp_build_info.cuda_state).
/// Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaState {
    /// dp was built without CUDA.
    NotBuilt,
    /// At least one CUDA device is visible.
    Available,
    /// Built with CUDA, but libdp_cuda.so is not in dp/ beside libdp (nor at DP_CUDA_MODULE).
    ModuleNotFound,
    /// The module is there but a CUDA library it needs is missing.
    RuntimeMissing,
    /// The module belongs to another build of dp.
    ModuleMismatch,
    /// No CUDA driver, or one too old for the runtime.
    NoDriver,
    /// A driver, but no GPU visible.
    NoDevice,
    /// A value this binding does not know (a newer library).
    Other(i32),
}

impl CudaState {
    fn from_raw(v: i32) -> CudaState {
        match v {
            sys::DP_CUDA_STATE_NOT_BUILT => CudaState::NotBuilt,
            sys::DP_CUDA_STATE_AVAILABLE => CudaState::Available,
            sys::DP_CUDA_STATE_MODULE_NOT_FOUND => CudaState::ModuleNotFound,
            sys::DP_CUDA_STATE_RUNTIME_MISSING => CudaState::RuntimeMissing,
            sys::DP_CUDA_STATE_MODULE_MISMATCH => CudaState::ModuleMismatch,
            sys::DP_CUDA_STATE_NO_DRIVER => CudaState::NoDriver,
            sys::DP_CUDA_STATE_NO_DEVICE => CudaState::NoDevice,
            other => CudaState::Other(other),
        }
    }
}

/// How the loaded library was built and what it found of CUDA
/// (dp_build_info); strings are static. Reading it loads dp's CUDA module in
/// a CUDA build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    pub version: &'static str,
    pub cuda: bool,
    pub cuda_runtime_version: i32,
    pub cuda_driver_version: i32,
    pub cublas_version: i32,
    pub nccl_version: i32,
    pub cuda_archs: &'static str,
    pub blas: &'static str,
    pub blas_config: &'static str,
    pub compiler: &'static str,
    pub build_type: &'static str,
    /// Since 0.6: why CUDA devices are there or not.
    pub cuda_state: CudaState,
    /// Since 0.6: the runtime version the CUDA module loaded (0: none).
    pub cuda_loaded_runtime_version: i32,
    /// Since 0.6: one line saying what was found of CUDA.
    pub cuda_state_detail: &'static str,
    /// Since 0.6: the CUDA module's path ("" without CUDA).
    pub cuda_module: &'static str,
    /// Since 0.6: built with ONNX import and export (`Model::from_onnx` and
    /// the rest); false: those return Code::Unimplemented.
    pub onnx: bool,
    /// Since 0.6: the ONNX library's version ("1.12.0"); "" without ONNX.
    pub onnx_version: &'static str,
}

/// dp_build_info_get.
pub fn build_info() -> Result<BuildInfo> {
    let mut c: sys::dp_build_info = unsafe { std::mem::zeroed() };
    c.struct_size = std::mem::size_of::<sys::dp_build_info>() as u32;
    check(unsafe { sys::dp_build_info_get(&mut c) })?;
    unsafe {
        Ok(BuildInfo {
            version: util::static_str(c.version),
            cuda: c.cuda != 0,
            cuda_runtime_version: c.cuda_runtime_version,
            cuda_driver_version: c.cuda_driver_version,
            cublas_version: c.cublas_version,
            nccl_version: c.nccl_version,
            cuda_archs: util::static_str(c.cuda_archs),
            blas: util::static_str(c.blas),
            blas_config: util::static_str(c.blas_config),
            compiler: util::static_str(c.compiler),
            build_type: util::static_str(c.build_type),
            cuda_state: CudaState::from_raw(c.cuda_state),
            cuda_loaded_runtime_version: c.cuda_loaded_runtime_version,
            cuda_state_detail: util::static_str(c.cuda_state_detail),
            cuda_module: util::static_str(c.cuda_module),
            onnx: c.onnx != 0,
            onnx_version: util::static_str(c.onnx_version),
        })
    }
}
