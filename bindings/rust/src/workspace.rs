//! Workspaces: the named blobs nets read and write (dp_workspace).
//!
//! `Workspace<'d>`: `'d` bounds the caller memory that blobs may borrow
//! (tensors from [`Tensor::borrowed`]); the workspace, its nets and the
//! tensors fetched from it cannot outlive that memory. `'d` is invariant so
//! that a workspace cannot be re-labelled with a shorter borrow.
use crate::error::{check, Code, Error, Result};
use crate::options::WorkspaceOptions;
use crate::sys;
use crate::tensor::Tensor;
use crate::util::{cstring, StringList};
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr;

pub struct Workspace<'d> {
    raw: *mut sys::dp_workspace,
    /// Async runs (nets and none else) in flight on this workspace: while
    /// one runs, the binding refuses calls that could touch the blobs it
    /// writes (dp.h: feed/fetch "not on a blob that a running net writes").
    running: Cell<usize>,
    _borrow: PhantomData<fn(&'d ()) -> &'d ()>,
}

// Send: a workspace may be used from any thread (dp.h "Threads"), and its
// borrowed blobs are read-only Element slices (Sync). Not Sync: dp allows
// concurrent feed/fetch but not alongside a net writing the same blob, and
// a Net borrows its Workspace; keeping Workspace !Sync keeps every net of a
// workspace and every feed on one thread, where the binding serialises them.
unsafe impl<'d> Send for Workspace<'d> {}

impl<'d> Workspace<'d> {
    /// A workspace with default options (dp_workspace_create).
    pub fn new() -> Result<Workspace<'d>> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::dp_workspace_create(&mut out) })?;
        Ok(Self::wrap(out))
    }

    /// dp_workspace_create_with_options.
    pub fn with_options(options: &WorkspaceOptions) -> Result<Workspace<'d>> {
        let c = options.to_c();
        let mut out = ptr::null_mut();
        check(unsafe { sys::dp_workspace_create_with_options(&c, &mut out) })?;
        Ok(Self::wrap(out))
    }

    fn wrap(raw: *mut sys::dp_workspace) -> Workspace<'d> {
        Workspace { raw, running: Cell::new(0), _borrow: PhantomData }
    }

    pub fn as_raw(&self) -> *mut sys::dp_workspace {
        self.raw
    }

    pub(crate) fn idle(&self, what: &str) -> Result<()> {
        if self.running.get() != 0 {
            return Err(Error::new(
                Code::FailedPrecondition,
                format!("{}: a net started with run_async is still running on this workspace (wait for it first)", what),
            ));
        }
        Ok(())
    }

    pub(crate) fn start_run(&self) {
        self.running.set(self.running.get() + 1);
    }

    pub(crate) fn end_run(&self) {
        self.running.set(self.running.get() - 1);
    }

    /// Blob `name` shares the tensor's memory (dp_workspace_feed); a borrowed
    /// tensor must borrow for at least the workspace's `'d`.
    pub fn feed(&self, name: &str, tensor: &Tensor<'d>) -> Result<()> {
        self.idle("feed")?;
        let n = cstring(name, "blob name")?;
        check(unsafe { sys::dp_workspace_feed(self.raw, n.as_ptr(), tensor.as_raw()) })
    }

    /// The tensor in blob `name`, without copying (dp_workspace_fetch). It may
    /// share memory fed from borrowed data, hence `Tensor<'d>`.
    pub fn fetch(&self, name: &str) -> Result<Tensor<'d>> {
        self.idle("fetch")?;
        let n = cstring(name, "blob name")?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::dp_workspace_fetch(self.raw, n.as_ptr(), &mut out) })?;
        Ok(unsafe { Tensor::from_raw(out) })
    }

    /// Whether blob `name` exists and holds something.
    pub fn has_blob(&self, name: &str) -> Result<bool> {
        let n = cstring(name, "blob name")?;
        let mut has = 0i32;
        check(unsafe { sys::dp_workspace_has_blob(self.raw, n.as_ptr(), &mut has) })?;
        Ok(has != 0)
    }

    /// Sorted names of the non-empty blobs starting with `prefix` ("" for all).
    pub fn list_blobs(&self, prefix: &str) -> Result<Vec<String>> {
        let p = cstring(prefix, "prefix")?;
        Ok(StringList::fill(|out| unsafe { sys::dp_workspace_list_blobs(self.raw, p.as_ptr(), out) })?.into_vec())
    }
}

impl<'d> Drop for Workspace<'d> {
    fn drop(&mut self) {
        // Nets borrow the workspace, so none is alive (nor running) here.
        unsafe { sys::dp_workspace_free(self.raw) }
    }
}
