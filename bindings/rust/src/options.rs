//! Option structs as plain Rust structs. `Default` asks the library
//! (dp_*_options_init with this binding's struct size), so the defaults are
//! always the library's; each converts to its C struct only for the call
//! (dp keeps no pointer into options).
use crate::error::Result;
use crate::model::OptimizerInfo;
use crate::sys;
use crate::util::{cstring, CStrings};
use std::ffi::CString;
use std::mem::{size_of, MaybeUninit};
use std::os::raw::c_char;
use std::ptr;

/// A C options struct filled by its dp_*_options_init (all bytes zeroed
/// first, then struct_size = this binding's size).
fn c_init<T>(init: impl FnOnce(*mut T, usize)) -> T {
    let mut o = MaybeUninit::<T>::uninit();
    unsafe {
        ptr::write_bytes(o.as_mut_ptr(), 0, 1);
        init(o.as_mut_ptr(), size_of::<T>());
        o.assume_init()
    }
}

/// Which executor runs a net (DP_EXECUTOR_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executor {
    Default,
    Simple,
    Async,
}

/// What a net does with the memory of its temporaries (DP_MEMORY_*; blobs a
/// run writes and then reads itself: activations, gradients): keep every
/// blob, share blocks between temporaries whose lives never overlap, or free
/// each after its last use. With `Share` and `Free` a temporary is empty
/// after a run. `Default`: a definition's mode (keep) for a net, `Share` for
/// the builders. Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    Default,
    Keep,
    Share,
    Free,
}

impl Memory {
    pub(crate) fn value(self) -> i32 {
        match self {
            Memory::Default => sys::DP_MEMORY_DEFAULT,
            Memory::Keep => sys::DP_MEMORY_KEEP,
            Memory::Share => sys::DP_MEMORY_SHARE,
            Memory::Free => sys::DP_MEMORY_FREE,
        }
    }
    pub(crate) fn from_value(v: i32) -> Memory {
        match v {
            sys::DP_MEMORY_KEEP => Memory::Keep,
            sys::DP_MEMORY_SHARE => Memory::Share,
            sys::DP_MEMORY_FREE => Memory::Free,
            _ => Memory::Default,
        }
    }
}

/// Whether a net on one GPU runs as a CUDA graph, recorded on its second run
/// and replayed after that (DP_CUDA_GRAPHS_*): `Default` and `On` do, `Off`
/// runs op by op (a profiled run then times every op). Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaGraphs {
    Default,
    On,
    Off,
}

impl CudaGraphs {
    pub(crate) fn value(self) -> i32 {
        match self {
            CudaGraphs::Default => sys::DP_CUDA_GRAPHS_DEFAULT,
            CudaGraphs::On => sys::DP_CUDA_GRAPHS_ON,
            CudaGraphs::Off => sys::DP_CUDA_GRAPHS_OFF,
        }
    }
    pub(crate) fn from_value(v: i32) -> CudaGraphs {
        match v {
            sys::DP_CUDA_GRAPHS_ON => CudaGraphs::On,
            sys::DP_CUDA_GRAPHS_OFF => CudaGraphs::Off,
            _ => CudaGraphs::Default,
        }
    }
}

/// How a net's CUDA GEMMs (FC, Conv and their gradients) compute
/// (DP_MATH_*): tensors stay float32 in every mode; `Tf32`, `Bf16` and
/// `Fp16` round the GEMMs' inputs for tensor cores and accumulate in
/// float32; a training net in `Fp16` needs dynamic loss scaling
/// (`LossScaling::Dynamic`). CPU kernels compute in float32 whatever the
/// mode. Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MathMode {
    Default,
    Fp32,
    Tf32,
    Bf16,
    Fp16,
}

/// DP_LOSS_SCALING_*: dynamic loss scaling of the training nets, which
/// `MathMode::Fp16` needs: the gradients of the loss times a scale, unscaled
/// before the updates; a step whose gradients overflowed is skipped and the
/// scale halved (dp.h). Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossScaling {
    None,
    Dynamic,
}

impl LossScaling {
    pub(crate) fn value(self) -> i32 {
        match self {
            LossScaling::None => sys::DP_LOSS_SCALING_NONE,
            LossScaling::Dynamic => sys::DP_LOSS_SCALING_DYNAMIC,
        }
    }
    pub(crate) fn from_value(v: i32) -> LossScaling {
        if v == sys::DP_LOSS_SCALING_DYNAMIC {
            LossScaling::Dynamic
        } else {
            LossScaling::None
        }
    }
}

impl MathMode {
    pub(crate) fn value(self) -> i32 {
        match self {
            MathMode::Default => sys::DP_MATH_DEFAULT,
            MathMode::Fp32 => sys::DP_MATH_FP32,
            MathMode::Tf32 => sys::DP_MATH_TF32,
            MathMode::Bf16 => sys::DP_MATH_BF16,
            MathMode::Fp16 => sys::DP_MATH_FP16,
        }
    }
    pub(crate) fn from_value(v: i32) -> MathMode {
        match v {
            sys::DP_MATH_FP32 => MathMode::Fp32,
            sys::DP_MATH_TF32 => MathMode::Tf32,
            sys::DP_MATH_BF16 => MathMode::Bf16,
            sys::DP_MATH_FP16 => MathMode::Fp16,
            _ => MathMode::Default,
        }
    }
}

/// dp_workspace_options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceOptions {
    /// Cap on the bytes of the workspace's blobs; 0 = no cap of its own (the process's
    /// memory limit still bounds host memory; see dp.h, "Memory").
    pub max_bytes: u64,
}

impl Default for WorkspaceOptions {
    fn default() -> Self {
        let c: sys::dp_workspace_options = c_init(|p, n| unsafe { sys::dp_workspace_options_init(p, n) });
        WorkspaceOptions { max_bytes: c.max_bytes }
    }
}

impl WorkspaceOptions {
    pub(crate) fn to_c(&self) -> sys::dp_workspace_options {
        let mut c: sys::dp_workspace_options = c_init(|p, n| unsafe { sys::dp_workspace_options_init(p, n) });
        c.max_bytes = self.max_bytes;
        c
    }
}

/// dp_net_options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetOptions {
    pub executor: Executor,
    /// Async executor CPU workers; 0: the definition's, else the core count.
    pub num_workers: i32,
    /// CUDA workers per GPU; 0 means 1.
    pub streams_per_gpu: i32,
    /// Record per-op timings (see Net::trace_json).
    pub profile: bool,
    /// A blob fed since the last run that no net of the workspace reads (a
    /// misspelt name) fails the run with Code::NotFound before any op runs;
    /// false: a warning through the log callback, once per blob. Since 0.6.
    pub unread_feed_error: bool,
    /// `Memory::Default`: the definition's. Since 0.6.
    pub memory: Memory,
    /// `CudaGraphs::Default`: on. Since 0.6.
    pub cuda_graphs: CudaGraphs,
    /// `MathMode::Default`: FP32. Since 0.6.
    pub math_mode: MathMode,
}

impl Default for NetOptions {
    fn default() -> Self {
        let c: sys::dp_net_options = c_init(|p, n| unsafe { sys::dp_net_options_init(p, n) });
        NetOptions {
            executor: match c.executor {
                sys::DP_EXECUTOR_SIMPLE => Executor::Simple,
                sys::DP_EXECUTOR_ASYNC => Executor::Async,
                _ => Executor::Default,
            },
            num_workers: c.num_workers,
            streams_per_gpu: c.streams_per_gpu,
            profile: c.profile != 0,
            unread_feed_error: c.unread_feed_error != 0,
            memory: Memory::from_value(c.memory),
            cuda_graphs: CudaGraphs::from_value(c.cuda_graphs),
            math_mode: MathMode::from_value(c.math_mode),
        }
    }
}

impl NetOptions {
    pub(crate) fn to_c(&self) -> sys::dp_net_options {
        let mut c: sys::dp_net_options = c_init(|p, n| unsafe { sys::dp_net_options_init(p, n) });
        c.executor = match self.executor {
            Executor::Default => sys::DP_EXECUTOR_DEFAULT,
            Executor::Simple => sys::DP_EXECUTOR_SIMPLE,
            Executor::Async => sys::DP_EXECUTOR_ASYNC,
        };
        c.num_workers = self.num_workers;
        c.streams_per_gpu = self.streams_per_gpu;
        c.profile = self.profile as i32;
        c.unread_feed_error = self.unread_feed_error as i32;
        c.memory = self.memory.value();
        c.cuda_graphs = self.cuda_graphs.value();
        c.math_mode = self.math_mode.value();
        c
    }
}

/// dp_gradient_options.
#[derive(Debug, Clone, PartialEq)]
pub struct GradientOptions {
    /// Loss blobs (at least one).
    pub losses: Vec<String>,
    /// Blobs to differentiate with respect to; empty: every external input.
    pub wrt: Vec<String>,
    /// Blobs no gradient flows through.
    pub stop: Vec<String>,
    /// Seed of the loss gradients; 0 means 1.
    pub loss_scale: f64,
    /// The net made; `Memory::Default` is `Memory::Share`. Since 0.6.
    pub memory: Memory,
}

impl Default for GradientOptions {
    fn default() -> Self {
        let c: sys::dp_gradient_options = c_init(|p, n| unsafe { sys::dp_gradient_options_init(p, n) });
        GradientOptions {
            losses: Vec::new(),
            wrt: Vec::new(),
            stop: Vec::new(),
            loss_scale: c.loss_scale,
            memory: Memory::from_value(c.memory),
        }
    }
}

/// A C struct plus the strings its pointers point into.
pub(crate) struct GradientC {
    pub c: sys::dp_gradient_options,
    _keep: (CStrings, CStrings, CStrings),
}

impl GradientOptions {
    pub(crate) fn to_c(&self) -> Result<GradientC> {
        let losses = CStrings::new(&self.losses, "loss name")?;
        let wrt = CStrings::new(&self.wrt, "wrt name")?;
        let stop = CStrings::new(&self.stop, "stop name")?;
        let mut c: sys::dp_gradient_options = c_init(|p, n| unsafe { sys::dp_gradient_options_init(p, n) });
        c.losses = losses.as_ptr();
        c.num_losses = losses.len();
        c.wrt = wrt.as_ptr();
        c.num_wrt = wrt.len();
        c.stop = stop.as_ptr();
        c.num_stop = stop.len();
        c.loss_scale = self.loss_scale;
        c.memory = self.memory.value();
        Ok(GradientC { c, _keep: (losses, wrt, stop) })
    }
}

/// dp_training_options.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingOptions {
    /// Seed of the loss gradients; 0 means 1.
    pub loss_scale: f64,
    /// > 0 replaces the optimizer's base learning rate; 0: the model's.
    pub lr: f64,
    /// The train net's; `Memory::Default` is `Memory::Share`. Since 0.6.
    pub memory: Memory,
    /// Dynamic loss scaling (for `MathMode::Fp16`); its state
    /// ("optimizer/loss_scale", "optimizer/loss_scale_good_steps") belongs in
    /// checkpoints. Since 0.6.
    pub loss_scaling: LossScaling,
    /// Its first scale; 0: 65536 (2^16). Since 0.6.
    pub initial_loss_scale: f64,
}

impl Default for TrainingOptions {
    fn default() -> Self {
        let c: sys::dp_training_options = c_init(|p, n| unsafe { sys::dp_training_options_init(p, n) });
        TrainingOptions {
            loss_scale: c.loss_scale,
            lr: c.lr,
            memory: Memory::from_value(c.memory),
            loss_scaling: LossScaling::from_value(c.loss_scaling),
            initial_loss_scale: c.initial_loss_scale,
        }
    }
}

impl TrainingOptions {
    pub(crate) fn to_c(&self) -> sys::dp_training_options {
        let mut c: sys::dp_training_options = c_init(|p, n| unsafe { sys::dp_training_options_init(p, n) });
        c.loss_scale = self.loss_scale;
        c.lr = self.lr;
        c.memory = self.memory.value();
        c.loss_scaling = self.loss_scaling.value();
        c.initial_loss_scale = self.initial_loss_scale;
        c
    }
}

/// dp_inference_options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferenceOptions {
    /// Keep FC and Relu separate; false (the default) fuses them, as the
    /// training nets do.
    pub no_fuse: bool,
}

impl Default for InferenceOptions {
    fn default() -> Self {
        let c: sys::dp_inference_options = c_init(|p, n| unsafe { sys::dp_inference_options_init(p, n) });
        InferenceOptions { no_fuse: c.no_fuse != 0 }
    }
}

impl InferenceOptions {
    pub(crate) fn to_c(&self) -> sys::dp_inference_options {
        let mut c: sys::dp_inference_options = c_init(|p, n| unsafe { sys::dp_inference_options_init(p, n) });
        c.no_fuse = self.no_fuse as i32;
        c
    }
}

/// Device types (DP_DEVICE_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceType {
    Cpu,
    Cuda,
}

impl DeviceType {
    pub fn value(self) -> i32 {
        match self {
            DeviceType::Cpu => sys::DP_DEVICE_CPU,
            DeviceType::Cuda => sys::DP_DEVICE_CUDA,
        }
    }
}

/// How computed params (BN statistics) are kept across replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputedParams {
    Broadcast,
    Average,
    None,
}

/// How CUDA replicas communicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaCollectives {
    Nccl,
    Tree,
}

/// dp_parallel_options (see dp.h for each field's meaning).
#[derive(Debug, Clone, PartialEq)]
pub struct ParallelOptions {
    pub device_type: DeviceType,
    /// One replica per id; empty: every device of device_type.
    pub device_ids: Vec<i32>,
    pub first_bucket_bytes: i64,
    pub bucket_bytes: i64,
    pub uneven_split: bool,
    pub no_fuse: bool,
    pub lr: f64,
    pub accumulate_steps: i32,
    pub bmuf: bool,
    pub bmuf_block_lr: f64,
    pub bmuf_block_momentum: f64,
    pub bmuf_no_nesterov: bool,
    pub bmuf_block_length: i32,
    pub computed_params: ComputedParams,
    pub cuda_collectives: CudaCollectives,
    pub shared_model: bool,
    /// dp picks `shared_model` from where the CPU replicas run
    /// (DP_SHARED_MODEL_AUTO: shared when their CPUs share a last-level
    /// cache); overrides `shared_model`.
    pub shared_model_auto: bool,
    pub sync_bn: bool,
    // Several processes (since 0.3): num_shards processes train one model,
    // meeting through `store`. 0/None reads the environment (what dp-run
    // sets), else the default.
    /// This process's rank in [0, num_shards).
    pub shard_id: i32,
    /// 0: DP_WORLD_SIZE and DP_RANK when DP_WORLD_SIZE is set, else 1.
    pub num_shards: i32,
    /// "file:///dir" or "redis://host:port[/prefix]"; None: DP_STORE.
    pub store: Option<String>,
    /// 0: DP_TIMEOUT_MS, else 60000.
    pub timeout_ms: i64,
    /// The interface to listen on ("eth0"); None: DP_INTERFACE, else the
    /// address the host name resolves to.
    pub network_interface: Option<String>,
    /// The job's id in the store; None: DP_RUN_ID, else "dp".
    pub run_id: Option<String>,
    /// Between the processes of one host (since 0.4): "auto" (shared memory
    /// where usable), "shm" or "tcp"; None: DP_LOCAL_TRANSPORT, else "auto".
    pub local_transport: Option<String>,
    /// The train and accumulate nets' memory; `Memory::Default` is
    /// `Memory::Share`. Since 0.6.
    pub memory: Memory,
    /// The gradient allreduce in 16 bits: half the bytes between processes
    /// (dp_parallel_options.gradient_compression). Since 0.6.
    pub gradient_compression: GradientCompression,
    /// ZeRO-1: the optimizer state sharded over every replica of every
    /// process (dp_parallel_options.shard_optimizer_state). Since 0.6.
    pub shard_optimizer_state: bool,
    /// Dynamic loss scaling (for `MathMode::Fp16`): one scale for every
    /// replica; not with BMUF; with `shard_optimizer_state` or several GPUs
    /// each replica checks its gradients (its shard), one verdict over every
    /// process. Since 0.6.
    pub loss_scaling: LossScaling,
    /// Its first scale; 0: 65536 (2^16). Since 0.6.
    pub initial_loss_scale: f64,
}

impl Default for ParallelOptions {
    fn default() -> Self {
        let c: sys::dp_parallel_options = c_init(|p, n| unsafe { sys::dp_parallel_options_init(p, n) });
        ParallelOptions {
            device_type: if c.device_type == sys::DP_DEVICE_CUDA { DeviceType::Cuda } else { DeviceType::Cpu },
            device_ids: Vec::new(),
            first_bucket_bytes: c.first_bucket_bytes,
            bucket_bytes: c.bucket_bytes,
            uneven_split: c.uneven_split != 0,
            no_fuse: c.no_fuse != 0,
            lr: c.lr,
            accumulate_steps: c.accumulate_steps,
            bmuf: c.bmuf != 0,
            bmuf_block_lr: c.bmuf_block_lr,
            bmuf_block_momentum: c.bmuf_block_momentum,
            bmuf_no_nesterov: c.bmuf_no_nesterov != 0,
            bmuf_block_length: c.bmuf_block_length,
            computed_params: match c.computed_params {
                sys::DP_COMPUTED_PARAMS_AVERAGE => ComputedParams::Average,
                sys::DP_COMPUTED_PARAMS_NONE => ComputedParams::None,
                _ => ComputedParams::Broadcast,
            },
            cuda_collectives: if c.cuda_collectives == sys::DP_CUDA_COLLECTIVES_TREE {
                CudaCollectives::Tree
            } else {
                CudaCollectives::Nccl
            },
            shared_model: c.shared_model == sys::DP_SHARED_MODEL_ON,
            shared_model_auto: c.shared_model == sys::DP_SHARED_MODEL_AUTO,
            sync_bn: c.sync_bn != 0,
            shard_id: c.shard_id,
            num_shards: c.num_shards,
            store: None,
            timeout_ms: c.timeout_ms,
            network_interface: None,
            run_id: None,
            local_transport: None,
            memory: Memory::from_value(c.memory),
            gradient_compression: match c.gradient_compression {
                sys::DP_GRADIENT_COMPRESSION_BF16 => GradientCompression::Bf16,
                sys::DP_GRADIENT_COMPRESSION_FP16 => GradientCompression::Fp16,
                _ => GradientCompression::None,
            },
            shard_optimizer_state: c.shard_optimizer_state != 0,
            loss_scaling: LossScaling::from_value(c.loss_scaling),
            initial_loss_scale: c.initial_loss_scale,
        }
    }
}

/// DP_GRADIENT_COMPRESSION_*: the gradient allreduce in float32, bfloat16 or
/// binary16. Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradientCompression {
    None,
    Bf16,
    Fp16,
}

impl ParallelOptions {
    /// Replicas cpu:0 .. cpu:n-1.
    pub fn cpu(n: usize) -> ParallelOptions {
        ParallelOptions { device_type: DeviceType::Cpu, device_ids: (0..n as i32).collect(), ..Default::default() }
    }

    /// The C struct; it points into self.device_ids and into the returned
    /// strings, so use it while both live.
    pub(crate) fn to_c(&self) -> Result<ParallelC> {
        let opt = |s: &Option<String>, what: &str| -> Result<Option<CString>> {
            match s {
                Some(v) => Ok(Some(cstring(v, what)?)),
                None => Ok(None),
            }
        };
        let store = opt(&self.store, "store")?;
        let network_interface = opt(&self.network_interface, "network_interface")?;
        let run_id = opt(&self.run_id, "run_id")?;
        let local_transport = opt(&self.local_transport, "local_transport")?;
        let ptr_of = |s: &Option<CString>| s.as_ref().map_or(ptr::null(), |s| s.as_ptr() as *const c_char);
        let mut c: sys::dp_parallel_options = c_init(|p, n| unsafe { sys::dp_parallel_options_init(p, n) });
        c.device_type = self.device_type.value();
        c.device_ids = if self.device_ids.is_empty() { ptr::null() } else { self.device_ids.as_ptr() };
        c.num_devices = self.device_ids.len();
        c.first_bucket_bytes = self.first_bucket_bytes;
        c.bucket_bytes = self.bucket_bytes;
        c.uneven_split = self.uneven_split as i32;
        c.no_fuse = self.no_fuse as i32;
        c.lr = self.lr;
        c.accumulate_steps = self.accumulate_steps;
        c.bmuf = self.bmuf as i32;
        c.bmuf_block_lr = self.bmuf_block_lr;
        c.bmuf_block_momentum = self.bmuf_block_momentum;
        c.bmuf_no_nesterov = self.bmuf_no_nesterov as i32;
        c.bmuf_block_length = self.bmuf_block_length;
        c.computed_params = match self.computed_params {
            ComputedParams::Broadcast => sys::DP_COMPUTED_PARAMS_BROADCAST,
            ComputedParams::Average => sys::DP_COMPUTED_PARAMS_AVERAGE,
            ComputedParams::None => sys::DP_COMPUTED_PARAMS_NONE,
        };
        c.cuda_collectives = match self.cuda_collectives {
            CudaCollectives::Nccl => sys::DP_CUDA_COLLECTIVES_NCCL,
            CudaCollectives::Tree => sys::DP_CUDA_COLLECTIVES_TREE,
        };
        c.shared_model = if self.shared_model_auto { sys::DP_SHARED_MODEL_AUTO } else { self.shared_model as i32 };
        c.sync_bn = self.sync_bn as i32;
        c.shard_id = self.shard_id;
        c.num_shards = self.num_shards;
        c.store = ptr_of(&store);
        c.timeout_ms = self.timeout_ms;
        c.network_interface = ptr_of(&network_interface);
        c.run_id = ptr_of(&run_id);
        c.local_transport = ptr_of(&local_transport);
        c.memory = self.memory.value();
        c.gradient_compression = match self.gradient_compression {
            GradientCompression::None => sys::DP_GRADIENT_COMPRESSION_NONE,
            GradientCompression::Bf16 => sys::DP_GRADIENT_COMPRESSION_BF16,
            GradientCompression::Fp16 => sys::DP_GRADIENT_COMPRESSION_FP16,
        };
        c.shard_optimizer_state = self.shard_optimizer_state as i32;
        c.loss_scaling = self.loss_scaling.value();
        c.initial_loss_scale = self.initial_loss_scale;
        Ok(ParallelC { c, _keep: [store, network_interface, run_id, local_transport] })
    }
}

pub(crate) struct ParallelC {
    pub c: sys::dp_parallel_options,
    _keep: [Option<CString>; 4],
}

/// dp_checkpoint_save_options.
#[derive(Debug, Clone, PartialEq)]
pub struct SaveOptions {
    /// Recorded in the file; None: "".
    pub model_name: Option<String>,
    /// 0: the blob "optimizer/iter" if saved, else unknown (-1).
    pub iteration: i64,
    /// save_async only: share of wall time spent writing, (0, 1]; 0: 0.2.
    pub async_write_share: f64,
}

impl Default for SaveOptions {
    fn default() -> Self {
        let c: sys::dp_checkpoint_save_options =
            c_init(|p, n| unsafe { sys::dp_checkpoint_save_options_init(p, n) });
        SaveOptions { model_name: None, iteration: c.iteration, async_write_share: c.async_write_share }
    }
}

pub(crate) struct SaveC {
    pub c: sys::dp_checkpoint_save_options,
    _keep: Option<CString>,
}

impl SaveOptions {
    pub(crate) fn to_c(&self) -> Result<SaveC> {
        let name = match &self.model_name {
            Some(n) => Some(cstring(n, "model_name")?),
            None => None,
        };
        let mut c: sys::dp_checkpoint_save_options =
            c_init(|p, n| unsafe { sys::dp_checkpoint_save_options_init(p, n) });
        c.model_name = name.as_ref().map_or(ptr::null(), |n| n.as_ptr() as *const c_char);
        c.iteration = self.iteration;
        c.async_write_share = self.async_write_share;
        Ok(SaveC { c, _keep: name })
    }
}

/// dp_checkpoint_load_options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Tensors to load; None: every tensor of the file.
    pub names: Option<Vec<String>>,
    /// Create missing blobs and skip names the file lacks.
    pub lenient: bool,
    /// Skip the tensors' checksums.
    pub no_verify: bool,
    /// Map the file instead of reading it.
    pub mmap: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        let c: sys::dp_checkpoint_load_options =
            c_init(|p, n| unsafe { sys::dp_checkpoint_load_options_init(p, n) });
        LoadOptions { names: None, lenient: c.lenient != 0, no_verify: c.no_verify != 0, mmap: c.mmap != 0 }
    }
}

pub(crate) struct LoadC {
    pub c: sys::dp_checkpoint_load_options,
    _keep: Option<CStrings>,
}

impl LoadOptions {
    pub(crate) fn to_c(&self) -> Result<LoadC> {
        let names = match &self.names {
            Some(n) => Some(CStrings::new(n, "tensor name")?),
            None => None,
        };
        let mut c: sys::dp_checkpoint_load_options =
            c_init(|p, n| unsafe { sys::dp_checkpoint_load_options_init(p, n) });
        if let Some(n) = &names {
            // An explicit empty list still means "names given": pass a
            // non-NULL array only when there are names (NULL/0 = all).
            c.names = n.as_ptr();
            c.num_names = n.len();
        }
        c.lenient = self.lenient as i32;
        c.no_verify = self.no_verify as i32;
        c.mmap = self.mmap as i32;
        Ok(LoadC { c, _keep: names })
    }
}

/// dp_loader_options (since 0.5). `batch_size` has no default (the
/// library's is 0, which it refuses): set it, or use [`LoaderOptions::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderOptions {
    /// The global batch: samples per step over all processes; > 0.
    pub batch_size: i64,
    /// The shuffle's seed.
    pub seed: u64,
    /// Every epoch in dataset order.
    pub no_shuffle: bool,
    /// Feed a last partial batch too (one process only); false: dropped.
    pub keep_last: bool,
    /// Processes that share each global batch (0: 1); batch_size divides by it.
    pub num_shards: i32,
    /// This process, in [0, num_shards): it is fed rows
    /// [shard_id * B / S, (shard_id + 1) * B / S) of every global batch.
    pub shard_id: i32,
    /// Batches gathered ahead, 1..64 (0: 2, double buffering).
    pub prefetch: i32,
    /// Longest `Loader::next` waits for a batch (0: 60000).
    pub timeout_ms: i32,
    /// Where the batches are fed (since 0.6): `Cpu` (the default) in host
    /// memory; `Cuda`: on GPU `device_id`, `Loader::new`'s dataset copied
    /// there once and each batch gathered there, unless `host_dataset`; a
    /// callback loader's batches staged there.
    pub device: DeviceType,
    /// The GPU, with `device` `Cuda`; 0 otherwise.
    pub device_id: i32,
    /// With `Cuda` (since 0.6): `Loader::new` keeps the dataset in host
    /// memory and stages each batch to the GPU (page-locked buffers, a copy
    /// stream ahead of the steps), for a dataset that does not fit there.
    pub host_dataset: bool,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        let c: sys::dp_loader_options = c_init(|p, n| unsafe { sys::dp_loader_options_init(p, n) });
        LoaderOptions {
            batch_size: c.batch_size,
            seed: c.seed,
            no_shuffle: c.no_shuffle != 0,
            keep_last: c.keep_last != 0,
            num_shards: c.num_shards,
            shard_id: c.shard_id,
            prefetch: c.prefetch,
            timeout_ms: c.timeout_ms,
            device: if c.device_type == sys::DP_DEVICE_CUDA { DeviceType::Cuda } else { DeviceType::Cpu },
            device_id: c.device_id,
            host_dataset: c.host_dataset != 0,
        }
    }
}

impl LoaderOptions {
    /// Every default, with the given batch size.
    pub fn new(batch_size: i64) -> LoaderOptions {
        LoaderOptions { batch_size, ..Default::default() }
    }

    pub(crate) fn to_c(&self) -> sys::dp_loader_options {
        let mut c: sys::dp_loader_options = c_init(|p, n| unsafe { sys::dp_loader_options_init(p, n) });
        c.batch_size = self.batch_size;
        c.seed = self.seed;
        c.no_shuffle = self.no_shuffle as i32;
        c.keep_last = self.keep_last as i32;
        c.num_shards = self.num_shards;
        c.shard_id = self.shard_id;
        c.prefetch = self.prefetch;
        c.timeout_ms = self.timeout_ms;
        c.device_type = self.device.value();
        c.device_id = self.device_id;
        c.host_dataset = self.host_dataset as i32;
        c
    }
}

/// What ONNX import adds after the graph (DP_ONNX_HEAD_*). Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnnxHead {
    /// The graph as it is: a model that serves (no loss).
    None,
    /// The graph's first output is logits [N, classes]: adds SoftmaxWithLoss
    /// against int32 labels (a new model input, `labels`) writing "softmax"
    /// and the loss "loss", and Accuracy writing the metric "accuracy" (each
    /// name suffixed "_1", ... if the graph has it).
    SoftmaxCrossEntropy,
}

/// dp_onnx_import_options (see [`Model::from_onnx`](crate::Model::from_onnx)).
/// Since 0.6.
#[derive(Debug, Clone, PartialEq)]
pub struct OnnxImportOptions<'a> {
    pub head: OnnxHead,
    /// The head's labels input; None or "": "label".
    pub labels: Option<String>,
    /// The model's optimizer, read during the call (e.g. another model's
    /// [`optimizer`](crate::Model::optimizer)); None: none, so the model
    /// serves but `build_training` refuses it. `optimizer_type` is required;
    /// any other field that is zero ("" for `lr_policy`) takes the model
    /// format's default (lr 0.01, momentum 0.9, beta2 0.999, "fixed", ...).
    pub optimizer: Option<OptimizerInfo<'a>>,
}

impl<'a> Default for OnnxImportOptions<'a> {
    fn default() -> Self {
        let c: sys::dp_onnx_import_options = c_init(|p, n| unsafe { sys::dp_onnx_import_options_init(p, n) });
        OnnxImportOptions {
            head: if c.head == sys::DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY {
                OnnxHead::SoftmaxCrossEntropy
            } else {
                OnnxHead::None
            },
            labels: None,
            optimizer: None,
        }
    }
}

/// The C optimizer struct plus its strings (boxed: the import options point
/// at it, so it must not move).
struct OptimizerC {
    c: sys::dp_optimizer_info,
    _keep: (CString, Option<CString>),
}

/// A C struct plus what its pointers point into.
pub(crate) struct OnnxImportC {
    pub c: sys::dp_onnx_import_options,
    _keep: (Option<CString>, Option<Box<OptimizerC>>),
}

impl<'a> OnnxImportOptions<'a> {
    pub(crate) fn to_c(&self) -> Result<OnnxImportC> {
        let labels = match &self.labels {
            Some(l) => Some(cstring(l, "labels")?),
            None => None,
        };
        let optimizer = match &self.optimizer {
            Some(o) => {
                let ty = cstring(o.optimizer_type, "optimizer type")?;
                let policy = if o.lr_policy.is_empty() { None } else { Some(cstring(o.lr_policy, "lr_policy")?) };
                let c = sys::dp_optimizer_info {
                    struct_size: size_of::<sys::dp_optimizer_info>() as u32,
                    type_: ty.as_ptr(),
                    lr: o.lr,
                    momentum: o.momentum,
                    nesterov: o.nesterov as i32,
                    beta1: o.beta1,
                    beta2: o.beta2,
                    epsilon: o.epsilon,
                    weight_decay: o.weight_decay,
                    lr_policy: policy.as_ref().map_or(ptr::null(), |p| p.as_ptr() as *const c_char),
                    gamma: o.gamma,
                    stepsize: o.stepsize,
                    power: o.power,
                    max_iter: o.max_iter,
                    warmup_iters: o.warmup_iters,
                    warmup_start_factor: o.warmup_start_factor,
                };
                Some(Box::new(OptimizerC { c, _keep: (ty, policy) }))
            }
            None => None,
        };
        let mut c: sys::dp_onnx_import_options = c_init(|p, n| unsafe { sys::dp_onnx_import_options_init(p, n) });
        c.head = match self.head {
            OnnxHead::None => sys::DP_ONNX_HEAD_NONE,
            OnnxHead::SoftmaxCrossEntropy => sys::DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY,
        };
        c.labels = labels.as_ref().map_or(ptr::null(), |l| l.as_ptr() as *const c_char);
        c.optimizer = optimizer.as_ref().map_or(ptr::null(), |o| &o.c as *const sys::dp_optimizer_info);
        Ok(OnnxImportC { c, _keep: (labels, optimizer) })
    }
}

/// dp_onnx_export_options (see [`Model::to_onnx`](crate::Model::to_onnx)).
/// Since 0.6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxExportOptions {
    /// The default domain's opset written, 11 to 17; 0: 13.
    pub opset: i32,
    /// The graph's outputs, as `build_inference`'s; empty: its defaults.
    pub outputs: Vec<String>,
    /// Where the params are in the workspace: blob `param_prefix` + name
    /// ("cpu_0/" for replica 0 of a parallel model); None or "": the
    /// model's names.
    pub param_prefix: Option<String>,
}

impl Default for OnnxExportOptions {
    fn default() -> Self {
        let c: sys::dp_onnx_export_options = c_init(|p, n| unsafe { sys::dp_onnx_export_options_init(p, n) });
        OnnxExportOptions { opset: c.opset, outputs: Vec::new(), param_prefix: None }
    }
}

/// A C struct plus the strings its pointers point into.
pub(crate) struct OnnxExportC {
    pub c: sys::dp_onnx_export_options,
    _keep: (CStrings, Option<CString>),
}

impl OnnxExportOptions {
    pub(crate) fn to_c(&self) -> Result<OnnxExportC> {
        let outputs = CStrings::new(&self.outputs, "output name")?;
        let prefix = match &self.param_prefix {
            Some(p) => Some(cstring(p, "param_prefix")?),
            None => None,
        };
        let mut c: sys::dp_onnx_export_options = c_init(|p, n| unsafe { sys::dp_onnx_export_options_init(p, n) });
        c.opset = self.opset;
        c.outputs = outputs.as_ptr();
        c.num_outputs = outputs.len();
        c.param_prefix = prefix.as_ref().map_or(ptr::null(), |p| p.as_ptr() as *const c_char);
        Ok(OnnxExportC { c, _keep: (outputs, prefix) })
    }
}
