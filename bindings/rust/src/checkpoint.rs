//! Checkpoint files: save/load of workspace blobs, header info, background
//! saves, and directories of step checkpoints.
use crate::error::{check, Result};
use crate::options::{LoadOptions, SaveOptions};
use crate::sys;
use crate::tensor::DType;
use crate::util::{borrowed_str, cstring, out_handle, CStrings, StringList};
use crate::workspace::Workspace;
use std::marker::PhantomData;
use std::ptr;

fn save_opts(options: Option<&SaveOptions>) -> Result<Option<crate::options::SaveC>> {
    match options {
        Some(o) => Ok(Some(o.to_c()?)),
        None => Ok(None),
    }
}

/// Saves blobs `names` (empty: every blob holding a tensor) to `path`,
/// atomically (dp_checkpoint_save).
pub fn save<S: AsRef<str>>(ws: &Workspace<'_>, names: &[S], path: &str, options: Option<&SaveOptions>) -> Result<()> {
    let _call = ws.blob_call("checkpoint::save")?;
    let n = CStrings::new(names, "blob name")?;
    let p = cstring(path, "path")?;
    let c = save_opts(options)?;
    let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_checkpoint_save_options);
    check(unsafe { sys::dp_checkpoint_save(ws.as_raw(), n.as_ptr(), n.len(), p.as_ptr(), copt) })
}

/// Loads tensors of the checkpoint at `path` into `ws` (dp_checkpoint_load):
/// all or nothing.
pub fn load(ws: &Workspace<'_>, path: &str, options: Option<&LoadOptions>) -> Result<()> {
    let _call = ws.blob_call("checkpoint::load")?;
    let p = cstring(path, "path")?;
    let c = match options {
        Some(o) => Some(o.to_c()?),
        None => None,
    };
    let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_checkpoint_load_options);
    check(unsafe { sys::dp_checkpoint_load(ws.as_raw(), p.as_ptr(), copt) })
}

/// Starts a background save (dp_checkpoint_save_async). The job holds a
/// snapshot of the blobs, which may share memory the workspace borrows, so
/// it cannot outlive the workspace's `'d`.
pub fn save_async<'d, S: AsRef<str>>(
    ws: &Workspace<'d>, names: &[S], path: &str, options: Option<&SaveOptions>,
) -> Result<CheckpointJob<'d>> {
    let _call = ws.blob_call("checkpoint::save_async")?;
    let n = CStrings::new(names, "blob name")?;
    let p = cstring(path, "path")?;
    let c = save_opts(options)?;
    let copt = c.as_ref().map_or(ptr::null(), |c| &c.c as *const sys::dp_checkpoint_save_options);
    let h = out_handle(|o| unsafe { sys::dp_checkpoint_save_async(ws.as_raw(), n.as_ptr(), n.len(), p.as_ptr(), copt, o) })?;
    Ok(CheckpointJob { raw: h, _borrow: PhantomData })
}

/// A background save. Dropping it waits for the write (dp_checkpoint_job_free).
pub struct CheckpointJob<'d> {
    raw: *mut sys::dp_checkpoint_job,
    _borrow: PhantomData<fn(&'d ()) -> &'d ()>,
}

// dp.h: dp_checkpoint_wait "Any thread"; the snapshot is read-only.
unsafe impl<'d> Send for CheckpointJob<'d> {}
unsafe impl<'d> Sync for CheckpointJob<'d> {}

impl<'d> CheckpointJob<'d> {
    /// Waits up to `timeout_ms` (negative: no limit): Ok once the file is in
    /// place, Code::Timeout while it is written, else the write's error.
    pub fn wait(&self, timeout_ms: i64) -> Result<()> {
        check(unsafe { sys::dp_checkpoint_wait(self.raw, timeout_ms) })
    }
}

impl<'d> Drop for CheckpointJob<'d> {
    fn drop(&mut self) {
        unsafe { sys::dp_checkpoint_job_free(self.raw) }
    }
}

/// One tensor of a checkpoint's header.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo<'a> {
    pub name: &'a str,
    /// Raw DP_DTYPE_* value.
    pub dtype: i32,
    pub dims: &'a [i64],
    pub nbytes: u64,
}

impl<'a> TensorInfo<'a> {
    pub fn dtype(&self) -> Option<DType> {
        DType::from_raw(self.dtype)
    }
}

/// A checkpoint's header (dp_checkpoint_info); strings and dims borrow it.
pub struct CheckpointInfo {
    raw: *mut sys::dp_checkpoint_info,
}

// dp.h: "Immutable; any thread."
unsafe impl Send for CheckpointInfo {}
unsafe impl Sync for CheckpointInfo {}

impl CheckpointInfo {
    pub fn from_file(path: &str) -> Result<CheckpointInfo> {
        let p = cstring(path, "path")?;
        Ok(CheckpointInfo { raw: out_handle(|o| unsafe { sys::dp_checkpoint_info_from_file(p.as_ptr(), o) })? })
    }
    pub fn dp_version(&self) -> &str {
        unsafe { borrowed_str(sys::dp_checkpoint_info_dp_version(self.raw)) }
    }
    pub fn model_name(&self) -> &str {
        unsafe { borrowed_str(sys::dp_checkpoint_info_model_name(self.raw)) }
    }
    /// The training iteration; -1 when unknown.
    pub fn iteration(&self) -> i64 {
        unsafe { sys::dp_checkpoint_info_iteration(self.raw) }
    }
    pub fn num_tensors(&self) -> usize {
        unsafe { sys::dp_checkpoint_info_num_tensors(self.raw) }
    }
    /// Tensor i in file order; None out of range.
    pub fn tensor(&self, i: usize) -> Option<TensorInfo<'_>> {
        unsafe {
            let name = sys::dp_checkpoint_info_tensor_name(self.raw, i);
            if name.is_null() {
                return None;
            }
            let ndim = sys::dp_checkpoint_info_tensor_ndim(self.raw, i);
            let dims = sys::dp_checkpoint_info_tensor_dims(self.raw, i);
            Some(TensorInfo {
                name: borrowed_str(name),
                dtype: sys::dp_checkpoint_info_tensor_dtype(self.raw, i),
                dims: if ndim == 0 || dims.is_null() { &[] } else { std::slice::from_raw_parts(dims, ndim) },
                nbytes: sys::dp_checkpoint_info_tensor_nbytes(self.raw, i),
            })
        }
    }
    pub fn tensors(&self) -> Vec<TensorInfo<'_>> {
        (0..self.num_tensors()).filter_map(|i| self.tensor(i)).collect()
    }
}

impl Drop for CheckpointInfo {
    fn drop(&mut self) {
        unsafe { sys::dp_checkpoint_info_free(self.raw) }
    }
}

/// Step checkpoints of `dir` that verify, newest first (dp_checkpoint_list_steps).
pub fn list_steps(dir: &str) -> Result<Vec<String>> {
    let d = cstring(dir, "dir")?;
    Ok(StringList::fill(|o| unsafe { sys::dp_checkpoint_list_steps(d.as_ptr(), o) })?.into_vec())
}

/// Removes all but the `keep` newest step checkpoints of `dir` (0: none).
pub fn prune(dir: &str, keep: i32) -> Result<()> {
    let d = cstring(dir, "dir")?;
    check(unsafe { sys::dp_checkpoint_prune(d.as_ptr(), keep) })
}

/// The file name of step `iteration` in `dir`: "<dir>/step-<9 digits>.dpckpt".
pub fn step_path(dir: &str, iteration: i64) -> String {
    format!("{}/step-{:09}.dpckpt", dir, iteration)
}
