//! Models (dp_model), their one-device training nets, and data-parallel
//! models (dp_parallel_model).
use crate::error::{check, Result};
use crate::netdef::NetDef;
use crate::options::{
    InferenceOptions, LoadOptions, OnnxExportOptions, OnnxImportOptions, ParallelOptions, SaveOptions, TrainingOptions,
};
use crate::sys;
use crate::util::{borrowed_str, buffer_bytes, buffer_string, cstring, opt_str, out_handle, CStrings, StringList};
use crate::workspace::Workspace;
use std::os::raw::{c_char, c_void};
use std::ptr;

/// The blob lists of a model (DP_MODEL_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobList {
    Params,
    ComputedParams,
    Inputs,
    Losses,
    Metrics,
}

/// The nets of a model definition (DP_MODEL_INIT_NET / FORWARD_NET).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelNet {
    Init,
    Forward,
}

/// The three nets that train a model; all run in one workspace.
#[derive(Debug)]
pub struct TrainingNets {
    pub init: NetDef,
    pub train: NetDef,
    pub eval: NetDef,
}

/// A model's optimizer (dp_optimizer_info); strings borrow the model.
#[derive(Debug, Clone, PartialEq)]
pub struct OptimizerInfo<'a> {
    pub optimizer_type: &'a str,
    pub lr: f64,
    pub momentum: f64,
    pub nesterov: bool,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
    pub weight_decay: f64,
    pub lr_policy: &'a str,
    pub gamma: f64,
    pub stepsize: i64,
    pub power: f64,
    pub max_iter: i64,
    pub warmup_iters: i64,
    pub warmup_start_factor: f64,
}

pub struct Model {
    raw: *mut sys::dp_model,
}

// dp.h: "Immutable; any thread."
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Model {
    pub fn from_json(json: &str) -> Result<Model> {
        Self::from_json_bytes(json.as_bytes())
    }
    pub fn from_json_bytes(json: &[u8]) -> Result<Model> {
        let h = out_handle(|o| unsafe { sys::dp_model_from_json(json.as_ptr() as *const c_char, json.len(), o) })?;
        Ok(Model { raw: h })
    }
    /// From a binary FlatBuffer ("DPMD"), verified.
    pub fn from_buffer(data: &[u8]) -> Result<Model> {
        let h = out_handle(|o| unsafe { sys::dp_model_from_buffer(data.as_ptr() as *const c_void, data.len(), o) })?;
        Ok(Model { raw: h })
    }
    pub fn from_file(path: &str) -> Result<Model> {
        let p = cstring(path, "path")?;
        Ok(Model { raw: out_handle(|o| unsafe { sys::dp_model_from_file(p.as_ptr(), o) })? })
    }
    /// From an ONNX model (a serialised ModelProto; opsets 9 to 17): its
    /// initializers become the init net, its nodes the forward net, all
    /// named as in the graph (dp_model_from_onnx_buffer). None: default
    /// options. Code::Parse for bytes that are not an ONNX model,
    /// Code::Unimplemented for what dp cannot import (and in a build without
    /// ONNX, `build_info().onnx` false), Code::InvalidNet for a graph that
    /// breaks ONNX's rules. Since 0.6.
    pub fn from_onnx(data: &[u8], options: Option<&OnnxImportOptions<'_>>) -> Result<Model> {
        let c = match options {
            Some(o) => Some(o.to_c()?),
            None => None,
        };
        let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_onnx_import_options);
        let h = out_handle(|o| unsafe {
            sys::dp_model_from_onnx_buffer(data.as_ptr() as *const c_void, data.len(), copt, o)
        })?;
        Ok(Model { raw: h })
    }
    /// From a file holding an ONNX model (see [`Model::from_onnx`];
    /// Code::NotFound and Code::Io for a file that is missing or
    /// unreadable). Since 0.6.
    pub fn from_onnx_file(path: &str, options: Option<&OnnxImportOptions<'_>>) -> Result<Model> {
        let p = cstring(path, "path")?;
        let c = match options {
            Some(o) => Some(o.to_c()?),
            None => None,
        };
        let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_onnx_import_options);
        Ok(Model { raw: out_handle(|o| unsafe { sys::dp_model_from_onnx_file(p.as_ptr(), copt, o) })? })
    }
    pub fn as_raw(&self) -> *const sys::dp_model {
        self.raw
    }
    /// The model's inference net (`build_inference` with `options.outputs`,
    /// unfused) as an ONNX model, with the params it reads from `ws` as
    /// initializers (dp_model_to_onnx). `ws` must hold an example batch of
    /// each model input the net reads (its dtype and dims give the graph
    /// input's, the first dim named "N"): run the init net and feed a batch
    /// first. None: default options. Code::NotFound for a param or input
    /// `ws` does not hold, Code::Unimplemented listing every op without an
    /// ONNX form, Code::InvalidArgument for an opset outside 11..17. Not
    /// while a net runs on `ws`. Since 0.6.
    pub fn to_onnx(&self, ws: &Workspace<'_>, options: Option<&OnnxExportOptions>) -> Result<Vec<u8>> {
        let _call = ws.blob_call("Model::to_onnx")?;
        let c = match options {
            Some(o) => Some(o.to_c()?),
            None => None,
        };
        let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_onnx_export_options);
        buffer_bytes(|o| unsafe { sys::dp_model_to_onnx(self.raw, ws.as_raw(), copt, o) })
    }
    /// [`Model::to_onnx`]'s model written to `path` atomically (a temporary
    /// file beside it, renamed over it; dp_model_save_onnx): Code::Io naming
    /// the file when it cannot be written, and then nothing is left at
    /// `path` that was not there before. Since 0.6.
    pub fn save_onnx(&self, ws: &Workspace<'_>, path: &str, options: Option<&OnnxExportOptions>) -> Result<()> {
        let _call = ws.blob_call("Model::save_onnx")?;
        let p = cstring(path, "path")?;
        let c = match options {
            Some(o) => Some(o.to_c()?),
            None => None,
        };
        let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_onnx_export_options);
        check(unsafe { sys::dp_model_save_onnx(self.raw, ws.as_raw(), copt, p.as_ptr()) })
    }
    pub fn to_json(&self) -> Result<String> {
        buffer_string(|o| unsafe { sys::dp_model_to_json(self.raw, o) })
    }
    pub fn to_buffer(&self) -> Result<Vec<u8>> {
        buffer_bytes(|o| unsafe { sys::dp_model_to_buffer(self.raw, o) })
    }
    pub fn blobs(&self, which: BlobList) -> Result<Vec<String>> {
        let w = match which {
            BlobList::Params => sys::DP_MODEL_PARAMS,
            BlobList::ComputedParams => sys::DP_MODEL_COMPUTED_PARAMS,
            BlobList::Inputs => sys::DP_MODEL_INPUTS,
            BlobList::Losses => sys::DP_MODEL_LOSSES,
            BlobList::Metrics => sys::DP_MODEL_METRICS,
        };
        self.blobs_raw(w)
    }
    /// dp_model_blobs with a raw DP_MODEL_* value (errors for unknown ones).
    pub fn blobs_raw(&self, which: i32) -> Result<Vec<String>> {
        Ok(StringList::fill(|o| unsafe { sys::dp_model_blobs(self.raw, which, o) })?.into_vec())
    }
    pub fn name(&self) -> &str {
        unsafe { borrowed_str(sys::dp_model_name(self.raw)) }
    }
    /// The model's own init or forward net, as a handle that may outlive it.
    pub fn net(&self, which: ModelNet) -> Result<NetDef> {
        let w = match which {
            ModelNet::Init => sys::DP_MODEL_INIT_NET,
            ModelNet::Forward => sys::DP_MODEL_FORWARD_NET,
        };
        Ok(NetDef::wrap(out_handle(|o| unsafe { sys::dp_model_net(self.raw, w, o) })?))
    }
    pub fn has_optimizer(&self) -> bool {
        unsafe { sys::dp_model_has_optimizer(self.raw) != 0 }
    }
    /// The optimizer; Code::NotFound when the model has none.
    pub fn optimizer(&self) -> Result<OptimizerInfo<'_>> {
        let mut c: sys::dp_optimizer_info = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::dp_optimizer_info>() as u32;
        check(unsafe { sys::dp_model_get_optimizer(self.raw, &mut c) })?;
        Ok(OptimizerInfo {
            optimizer_type: unsafe { borrowed_str(c.type_) },
            lr: c.lr,
            momentum: c.momentum,
            nesterov: c.nesterov != 0,
            beta1: c.beta1,
            beta2: c.beta2,
            epsilon: c.epsilon,
            weight_decay: c.weight_decay,
            lr_policy: unsafe { borrowed_str(c.lr_policy) },
            gamma: c.gamma,
            stepsize: c.stepsize,
            power: c.power,
            max_iter: c.max_iter,
            warmup_iters: c.warmup_iters,
            warmup_start_factor: c.warmup_start_factor,
        })
    }
    /// One-device training nets (dp_model_build_training); None: defaults.
    pub fn build_training(&self, options: Option<&TrainingOptions>) -> Result<TrainingNets> {
        let c = options.map(|o| o.to_c());
        let copt = c.as_ref().map_or(ptr::null(), |c| c as *const sys::dp_training_options);
        let (mut i, mut t, mut e) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        check(unsafe { sys::dp_model_build_training(self.raw, copt, &mut i, &mut t, &mut e) })?;
        Ok(TrainingNets { init: NetDef::wrap(i), train: NetDef::wrap(t), eval: NetDef::wrap(e) })
    }
    /// The inference net (dp_model_build_inference): the forward ops that
    /// `outputs` need, in inference mode, without losses, metrics or labels;
    /// empty `outputs` ask for the default ones (the blobs the losses and
    /// metrics are computed from: "logits", "softmax"). It reads the params
    /// under the model's names: run it in a workspace holding them, e.g. one
    /// per serving thread, each fed the same param tensors (fetched from the
    /// trained workspace: shared, not copied). None: default options.
    /// Code::NotFound names an output the forward net does not write.
    pub fn build_inference<S: AsRef<str>>(
        &self, outputs: &[S], options: Option<&InferenceOptions>,
    ) -> Result<NetDef> {
        let names = CStrings::new(outputs, "output name")?;
        let c = options.map(|o| o.to_c());
        let copt = c.as_ref().map_or(ptr::null(), |c| c as *const sys::dp_inference_options);
        let h = out_handle(|o| unsafe {
            sys::dp_model_build_inference(self.raw, names.as_ptr(), names.len(), copt, o)
        })?;
        Ok(NetDef::wrap(h))
    }
    /// The blobs holding the training state (dp_model_checkpoint_blobs).
    pub fn checkpoint_blobs(&self) -> Result<Vec<String>> {
        Ok(StringList::fill(|o| unsafe { sys::dp_model_checkpoint_blobs(self.raw, o) })?.into_vec())
    }
    /// Data-parallel training over the devices of `options`.
    pub fn parallelize(&self, options: &ParallelOptions) -> Result<ParallelModel> {
        let c = options.to_c()?; // points into options.device_ids and c's strings, alive here
        Ok(ParallelModel { raw: out_handle(|o| unsafe { sys::dp_model_parallelize(self.raw, &c.c, o) })? })
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { sys::dp_model_free(self.raw) }
    }
}

pub struct ParallelModel {
    raw: *mut sys::dp_parallel_model,
}

// dp.h: "Immutable; any thread."
unsafe impl Send for ParallelModel {}
unsafe impl Sync for ParallelModel {}

impl ParallelModel {
    pub fn as_raw(&self) -> *const sys::dp_parallel_model {
        self.raw
    }
    pub fn nets(&self) -> Result<TrainingNets> {
        let (mut i, mut t, mut e) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        check(unsafe { sys::dp_parallel_model_nets(self.raw, &mut i, &mut t, &mut e) })?;
        Ok(TrainingNets { init: NetDef::wrap(i), train: NetDef::wrap(t), eval: NetDef::wrap(e) })
    }
    /// The accumulation net (accumulate_steps > 1; FailedPrecondition else).
    pub fn accumulate_net(&self) -> Result<NetDef> {
        Ok(NetDef::wrap(out_handle(|o| unsafe { sys::dp_parallel_model_accumulate_net(self.raw, o) })?))
    }
    /// The BMUF block net and block length (FailedPrecondition without BMUF).
    pub fn block_net(&self) -> Result<(NetDef, i32)> {
        let mut len = 0i32;
        let h = out_handle(|o| unsafe { sys::dp_parallel_model_block_net(self.raw, o, &mut len) })?;
        Ok((NetDef::wrap(h), len))
    }
    pub fn sync_net(&self) -> Result<NetDef> {
        Ok(NetDef::wrap(out_handle(|o| unsafe { sys::dp_parallel_model_sync_net(self.raw, o) })?))
    }
    /// Builds and runs the sync net on `ws` (not while a net runs on it).
    pub fn sync(&self, ws: &Workspace<'_>) -> Result<()> {
        let _run = ws.begin_run("ParallelModel::sync")?; // runs nets
        check(unsafe { sys::dp_parallel_model_sync(self.raw, ws.as_raw()) })
    }
    /// Uneven data across processes: instead of another train step, shadows
    /// the other processes' steps until all have joined; the steps shadowed
    /// (0 at once with one process). Not while a net runs on `ws`.
    pub fn join(&self, ws: &Workspace<'_>) -> Result<i64> {
        let _run = ws.begin_run("ParallelModel::join")?; // runs nets
        let mut steps = 0i64;
        check(unsafe { sys::dp_parallel_model_join(self.raw, ws.as_raw(), &mut steps) })?;
        Ok(steps)
    }
    pub fn num_replicas(&self) -> usize {
        unsafe { sys::dp_parallel_model_num_replicas(self.raw) }
    }
    /// The job's process count (1 for a one-process model).
    pub fn num_shards(&self) -> i32 {
        unsafe { sys::dp_parallel_model_num_shards(self.raw) }
    }
    /// This process's rank in the job (0 for a one-process model).
    pub fn shard_id(&self) -> i32 {
        unsafe { sys::dp_parallel_model_shard_id(self.raw) }
    }
    /// Replica i's name scope ("cpu_1/"); None out of range.
    pub fn scope(&self, i: usize) -> Option<&str> {
        unsafe { opt_str(sys::dp_parallel_model_scope(self.raw, i)) }
    }
    /// Saves replica 0's training state under unscoped names.
    pub fn save(&self, ws: &Workspace<'_>, path: &str, options: Option<&SaveOptions>) -> Result<()> {
        let _call = ws.blob_call("ParallelModel::save")?;
        let p = cstring(path, "path")?;
        let c = match options {
            Some(o) => Some(o.to_c()?),
            None => None,
        };
        let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_checkpoint_save_options);
        check(unsafe { sys::dp_parallel_model_save(self.raw, ws.as_raw(), p.as_ptr(), copt) })
    }
    /// Loads a checkpoint into replica 0 and syncs every replica.
    pub fn load(&self, ws: &Workspace<'_>, path: &str, options: Option<&LoadOptions>) -> Result<()> {
        let _run = ws.begin_run("ParallelModel::load")?; // runs nets
        let p = cstring(path, "path")?;
        let c = match options {
            Some(o) => Some(o.to_c()?),
            None => None,
        };
        let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_checkpoint_load_options);
        check(unsafe { sys::dp_parallel_model_load(self.raw, ws.as_raw(), p.as_ptr(), copt) })
    }
}

impl Drop for ParallelModel {
    fn drop(&mut self) {
        unsafe { sys::dp_parallel_model_free(self.raw) }
    }
}

