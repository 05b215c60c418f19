//! The input pipeline (dp_loader, since 0.5): feeds a workspace one batch
//! per step from tensors held in memory or from a closure that writes
//! samples into memory the loader provides, in a seeded shuffled order (the
//! same seed gives the same order in every run; `seek` resumes mid-run
//! exactly), gathering the next batches on its own thread.
//!
//! A `Loader` borrows its `Workspace` like a `Net` does, so it stays on the
//! workspace's thread and cannot outlive it; `next` feeds the blobs, and is
//! refused while an `AsyncRun` is in flight on the workspace. A dataset
//! tensor may borrow memory (`Tensor<'d>`) for as long as the workspace.
//! The fill closure runs on the loader's thread (hence `Send`), one call at
//! a time; it may borrow for as long as the loader (`'w`).
use crate::error::{check, Code, Error, Result};
use crate::options::LoaderOptions;
use crate::sys;
use crate::tensor::{dtype_name, DType, Element, Tensor};
use crate::util::{cstring, CStrings};
use crate::workspace::Workspace;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// One input of a callback loader (dp_loader_input): the blob it is fed
/// to, its element type and one sample's shape without the batch dimension
/// (empty for a scalar per sample).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderInput {
    pub blob: String,
    pub dtype: DType,
    pub sample_dims: Vec<i64>,
}

impl LoaderInput {
    pub fn new(blob: impl Into<String>, dtype: DType, sample_dims: &[i64]) -> LoaderInput {
        LoaderInput { blob: blob.into(), dtype, sample_dims: sample_dims.to_vec() }
    }
}

/// The batch a fill closure writes: for input j, sample `indices()[i]`
/// goes to row i of input j's buffer (`row_bytes(j)` bytes per row, in the
/// input's dtype and the machine's byte order). Each input's buffer can be
/// taken once per call, as bytes or as elements, and only for the call.
pub struct LoaderBatch<'a> {
    indices: &'a [i64],
    buffers: &'a [*mut c_void],
    row_bytes: &'a [usize],
    dtypes: &'a [i32],
    taken: &'a mut [bool],
}

impl<'a> LoaderBatch<'a> {
    /// The samples to write, one per row.
    pub fn indices(&self) -> &'a [i64] {
        self.indices
    }

    /// Rows in this batch (`indices().len()`).
    pub fn rows(&self) -> usize {
        self.indices.len()
    }

    pub fn num_inputs(&self) -> usize {
        self.buffers.len()
    }

    /// One sample's size in bytes for input `input` (0 if out of range).
    pub fn row_bytes(&self, input: usize) -> usize {
        self.row_bytes.get(input).copied().unwrap_or(0)
    }

    /// Input `input`'s whole buffer (`rows() * row_bytes(input)` bytes).
    /// InvalidArgument out of range, FailedPrecondition when taken already.
    pub fn bytes(&mut self, input: usize) -> Result<&'a mut [u8]> {
        if input >= self.buffers.len() {
            return Err(Error::new(
                Code::InvalidArgument,
                format!("input {} of a loader with {} inputs", input, self.buffers.len()),
            ));
        }
        if std::mem::replace(&mut self.taken[input], true) {
            return Err(Error::new(Code::FailedPrecondition, format!("input {}'s buffer is taken already", input)));
        }
        let n = self.indices.len() * self.row_bytes[input];
        let p = self.buffers[input] as *mut u8;
        if n == 0 || p.is_null() {
            return Ok(&mut []);
        }
        // Each buffer is handed out once per call (taken), and the buffers
        // are disjoint memory the loader owns for the call.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
    }

    /// Input `input`'s buffer as elements; a Dtype error when T is not the
    /// input's element type.
    pub fn values<T: Element>(&mut self, input: usize) -> Result<&'a mut [T]> {
        if let Some(&d) = self.dtypes.get(input) {
            if d != T::DTYPE.value() {
                return Err(Error::new(
                    Code::Dtype,
                    format!("input {} holds {}, not {}", input, dtype_name(d), T::DTYPE),
                ));
            }
        }
        let b = self.bytes(input)?;
        if b.is_empty() {
            return Ok(&mut []);
        }
        if (b.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
            return Err(Error::new(Code::InvalidArgument, "batch buffer is not aligned for its element type"));
        }
        let n = b.len() / std::mem::size_of::<T>();
        Ok(unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut T, n) })
    }
}

type FillFn<'f> = dyn FnMut(&mut LoaderBatch<'_>) -> i32 + Send + 'f;

/// What user_data points at: the closure plus per-input scratch, reused by
/// every call (a call allocates nothing).
struct FillState<'f> {
    fill: Box<FillFn<'f>>,
    dtypes: Vec<i32>,
    taken: Vec<bool>,
}

unsafe extern "C" fn fill_trampoline(
    user_data: *mut c_void, indices: *const i64, count: usize, buffers: *const *mut c_void, row_bytes: *const usize,
    num_inputs: usize,
) -> i32 {
    // Nothing may unwind into C: a panic fails the batch as -1 would.
    catch_unwind(AssertUnwindSafe(|| {
        // dp calls one at a time, and the Loader never touches the state
        // until dp_loader_free has stopped the thread.
        let st = &mut *(user_data as *mut FillState<'_>);
        let k = num_inputs.min(st.taken.len());
        let indices = if count == 0 || indices.is_null() { &[][..] } else { std::slice::from_raw_parts(indices, count) };
        let (buffers, row_bytes) = if k == 0 || buffers.is_null() || row_bytes.is_null() {
            (&[][..], &[][..])
        } else {
            (std::slice::from_raw_parts(buffers, k), std::slice::from_raw_parts(row_bytes, k))
        };
        st.taken.iter_mut().for_each(|t| *t = false);
        let mut batch = LoaderBatch {
            indices,
            buffers,
            row_bytes,
            dtypes: &st.dtypes,
            taken: &mut st.taken[..buffers.len()],
        };
        (st.fill)(&mut batch)
    }))
    .unwrap_or(-1)
}

/// A loader feeding a workspace (dp_loader). `next` and `seek` take
/// `&mut self`: one call at a time, as dp.h requires. Dropping it stops its
/// thread (after the batch it is filling); batches already fed stay in
/// their blobs.
pub struct Loader<'w, 'd> {
    raw: *mut sys::dp_loader,
    ws: &'w Workspace<'d>,
    /// The callback's state (null for tensor loaders), freed after dp lets go.
    fill: *mut FillState<'w>,
}

// Neither Send nor Sync: one thread steps it (next and seek take &mut self);
// its feeds are blob calls of the workspace, kept apart from runs.

impl<'w, 'd> Loader<'w, 'd> {
    /// A loader over tensors (dp_loader_create): `(blob, tensor)` pairs,
    /// each tensor's dim 0 indexing the samples (all share it), fed as
    /// batches of shape `[rows, dims[1..]]`. The loader shares the tensors'
    /// memory (no copy); the `Tensor` handles may be dropped at once.
    /// Shape when the dim 0 differ, InvalidArgument for bad options or blob
    /// names or a dataset with no (full) batch.
    pub fn new(ws: &'w Workspace<'d>, inputs: &[(&str, &Tensor<'d>)], options: &LoaderOptions) -> Result<Self> {
        let names: Vec<&str> = inputs.iter().map(|(n, _)| *n).collect();
        let names = CStrings::new(&names, "blob name")?;
        let tensors: Vec<*const sys::dp_tensor> = inputs.iter().map(|(_, t)| t.as_raw()).collect();
        let c = options.to_c();
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::dp_loader_create(ws.as_raw(), names.as_ptr(), tensors.as_ptr(), tensors.len(), &c, &mut out)
        })?;
        Ok(Loader { raw: out, ws, fill: ptr::null_mut() })
    }

    /// A loader over `num_samples` samples that `fill` writes
    /// (dp_loader_create_callback). `fill` runs on the loader's thread, one
    /// call at a time, while the caller's steps run; it returns 0 on
    /// success, anything else fails the batch (`next` then gives Internal
    /// naming the value; a panic is caught and counts as -1). Errors as
    /// [`Loader::new`].
    pub fn with_callback<F>(
        ws: &'w Workspace<'d>, inputs: &[LoaderInput], num_samples: i64, options: &LoaderOptions, fill: F,
    ) -> Result<Self>
    where
        F: FnMut(&mut LoaderBatch<'_>) -> i32 + Send + 'w,
    {
        let names = inputs.iter().map(|i| cstring(&i.blob, "blob name")).collect::<Result<Vec<_>>>()?;
        let c_inputs: Vec<sys::dp_loader_input> = inputs
            .iter()
            .zip(&names)
            .map(|(i, n)| sys::dp_loader_input {
                blob: n.as_ptr(),
                dtype: i.dtype.value(),
                sample_dims: if i.sample_dims.is_empty() { ptr::null() } else { i.sample_dims.as_ptr() },
                sample_ndim: i.sample_dims.len(),
            })
            .collect();
        let state = Box::into_raw(Box::new(FillState {
            fill: Box::new(fill) as Box<FillFn<'w>>,
            dtypes: inputs.iter().map(|i| i.dtype.value()).collect(),
            taken: vec![false; inputs.len()],
        }));
        let c = options.to_c();
        let mut out = ptr::null_mut();
        let st = unsafe {
            sys::dp_loader_create_callback(
                ws.as_raw(),
                if c_inputs.is_empty() { ptr::null() } else { c_inputs.as_ptr() },
                c_inputs.len(),
                num_samples,
                Some(fill_trampoline),
                state as *mut c_void,
                &c,
                &mut out,
            )
        };
        if let Err(e) = check(st) {
            drop(unsafe { Box::from_raw(state) });
            return Err(e);
        }
        Ok(Loader { raw: out, ws, fill: state })
    }

    pub fn as_raw(&self) -> *mut sys::dp_loader {
        self.raw
    }

    /// Feeds the next batch of the epoch into the blobs (without copying)
    /// and returns true; at the end of an epoch feeds nothing and returns
    /// false, once: the next call starts the next epoch (dp_loader_next).
    /// Timeout when the batch is not ready in time; a failed fill's error
    /// (the same on every call until `seek`).
    pub fn next(&mut self) -> Result<bool> {
        let _call = self.ws.blob_call("Loader::next")?;
        let mut fed = 0i32;
        check(unsafe { sys::dp_loader_next(self.raw, &mut fed) })?;
        Ok(fed != 0)
    }

    /// The next `next` feeds step `step` of epoch `epoch` (both from 0,
    /// step < steps_per_epoch), e.g. to resume after a checkpoint load
    /// (dp_loader_seek). OutOfRange otherwise.
    pub fn seek(&mut self, epoch: i64, step: i64) -> Result<()> {
        check(unsafe { sys::dp_loader_seek(self.raw, epoch, step) })
    }

    /// Batches per epoch.
    pub fn steps_per_epoch(&self) -> i64 {
        unsafe { sys::dp_loader_steps_per_epoch(self.raw) }
    }

    /// The epoch the next `next` feeds from.
    pub fn epoch(&self) -> i64 {
        unsafe { sys::dp_loader_epoch(self.raw) }
    }

    /// The step of its epoch the next `next` feeds.
    pub fn step(&self) -> i64 {
        unsafe { sys::dp_loader_step(self.raw) }
    }

    /// This process's samples per batch (batch_size / num_shards).
    pub fn batch_rows(&self) -> i64 {
        unsafe { sys::dp_loader_batch_rows(self.raw) }
    }
}

impl<'w, 'd> Drop for Loader<'w, 'd> {
    fn drop(&mut self) {
        // Stops the thread first: the closure is not running after this.
        unsafe { sys::dp_loader_free(self.raw) };
        if !self.fill.is_null() {
            drop(unsafe { Box::from_raw(self.fill) });
        }
    }
}
