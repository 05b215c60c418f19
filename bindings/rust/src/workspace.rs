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
use std::marker::PhantomData;
use std::ptr;
use std::sync::{Condvar, Mutex, MutexGuard};

pub struct Workspace<'d> {
    raw: *mut sys::dp_workspace,
    /// What is in flight on this workspace, so that no blob call races a
    /// run (dp.h: not on a blob that a running net writes; which blobs a net
    /// writes, the binding does not track, so none while a net runs).
    activity: Mutex<Activity>,
    /// Signalled when the last blob call in flight ends.
    calls_done: Condvar,
    _borrow: PhantomData<fn(&'d ()) -> &'d ()>,
}

#[derive(Default)]
struct Activity {
    /// Feeds, fetches, checkpoint and loader calls: any number at once.
    blob_calls: usize,
    /// Net runs (Net::run, an AsyncRun until collected, the parallel
    /// model's sync and join): one at a time, and no blob call meanwhile.
    runs: usize,
}

// Send: a workspace may be used from any thread (dp.h "Threads"), and its
// borrowed blobs are read-only Element slices (Sync). Sync: dp serialises
// feeds and fetches per blob, so any number of threads may make them at
// once; what dp forbids (a feed or fetch of a blob that a running net
// writes, two nets writing one blob) the workspace rules out at run time:
// blob calls fail while a net runs on it, a run waits for the blob calls in
// flight, and a second run fails while one is in flight.
unsafe impl<'d> Send for Workspace<'d> {}
unsafe impl<'d> Sync for Workspace<'d> {}

/// A blob call in flight (see `Workspace::blob_call`).
pub(crate) struct BlobCall<'a> {
    activity: &'a Mutex<Activity>,
    calls_done: &'a Condvar,
}

impl<'a> Drop for BlobCall<'a> {
    fn drop(&mut self) {
        let mut a = lock(self.activity);
        a.blob_calls -= 1;
        if a.blob_calls == 0 {
            self.calls_done.notify_all();
        }
    }
}

/// A run in flight (see `Workspace::begin_run`); ends when dropped.
pub(crate) struct RunCall<'a> {
    activity: &'a Mutex<Activity>,
}

impl<'a> Drop for RunCall<'a> {
    fn drop(&mut self) {
        lock(self.activity).runs -= 1;
    }
}

// The counters stay consistent whatever panics (nothing panics while holding
// the lock), so a poisoned lock is used as is.
fn lock(m: &Mutex<Activity>) -> MutexGuard<'_, Activity> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn running_error(what: &str) -> Error {
    Error::new(
        Code::FailedPrecondition,
        format!("{}: a net is running on this workspace (an AsyncRun not yet waited for, or a run on another thread)", what),
    )
}

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
        Workspace { raw, activity: Mutex::new(Activity::default()), calls_done: Condvar::new(), _borrow: PhantomData }
    }

    pub fn as_raw(&self) -> *mut sys::dp_workspace {
        self.raw
    }

    /// Starts a call that reads or writes blobs (`what` names it in the
    /// error): FailedPrecondition while a net runs on the workspace. Other
    /// blob calls may run at once; runs wait for it to end.
    pub(crate) fn blob_call(&self, what: &str) -> Result<BlobCall<'_>> {
        let mut a = lock(&self.activity);
        if a.runs != 0 {
            return Err(running_error(what));
        }
        a.blob_calls += 1;
        Ok(BlobCall { activity: &self.activity, calls_done: &self.calls_done })
    }

    /// Starts a run: FailedPrecondition while another is in flight; waits
    /// for the blob calls in flight to end (they are short and none starts
    /// meanwhile).
    pub(crate) fn begin_run(&self, what: &str) -> Result<RunCall<'_>> {
        let mut a = lock(&self.activity);
        if a.runs != 0 {
            return Err(running_error(what));
        }
        while a.blob_calls != 0 {
            a = self.calls_done.wait(a).unwrap_or_else(|e| e.into_inner());
        }
        a.runs += 1;
        Ok(RunCall { activity: &self.activity })
    }

    /// Blob `name` shares the tensor's memory (dp_workspace_feed); a borrowed
    /// tensor must borrow for at least the workspace's `'d`.
    pub fn feed(&self, name: &str, tensor: &Tensor<'d>) -> Result<()> {
        let _call = self.blob_call("feed")?;
        let n = cstring(name, "blob name")?;
        check(unsafe { sys::dp_workspace_feed(self.raw, n.as_ptr(), tensor.as_raw()) })
    }

    /// The tensor in blob `name`, without copying (dp_workspace_fetch). It may
    /// share memory fed from borrowed data, hence `Tensor<'d>`.
    pub fn fetch(&self, name: &str) -> Result<Tensor<'d>> {
        let _call = self.blob_call("fetch")?;
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
