//! Nets: a NetDef instantiated in a workspace (dp_net).
//!
//! A `Net` borrows its `Workspace`, so it cannot outlive the Rust handle
//! (dp itself would keep the workspace alive, but the borrow also keeps the
//! workspace's borrowed blob memory `'d` alive for as long as the net runs).
use crate::error::{check, Code, Result};
use crate::netdef::NetDef;
use crate::options::{DeviceType, Memory, NetOptions};
use crate::sys;
use crate::util::buffer_string;
use crate::workspace::{RunCall, Workspace};
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ptr;

pub struct Net<'w, 'd> {
    raw: *mut sys::dp_net,
    ws: &'w Workspace<'d>,
    /// The run started by run_async, until collected.
    in_flight: RefCell<Option<RunCall<'w>>>,
}

// Neither Send nor Sync: a net runs on the thread that made it (dp_net_run
// is not for concurrent calls on one net). Other threads may feed and fetch
// its workspace; the workspace keeps those calls and the runs apart.
// Cancelling from other threads goes through `Canceller`.

impl<'w, 'd> Net<'w, 'd> {
    /// dp_net_create: `options` None takes every default. The definition is
    /// copied and may be dropped afterwards.
    pub fn new(ws: &'w Workspace<'d>, def: &NetDef, options: Option<&NetOptions>) -> Result<Net<'w, 'd>> {
        let _call = ws.blob_call("Net::new")?; // creates blobs
        let c = options.map(|o| o.to_c());
        let copt = c.as_ref().map_or(ptr::null(), |c| c as *const sys::dp_net_options);
        let mut out = ptr::null_mut();
        check(unsafe { sys::dp_net_create(ws.as_raw(), def.as_raw(), copt, &mut out) })?;
        Ok(Net { raw: out, ws, in_flight: RefCell::new(None) })
    }

    pub fn as_raw(&self) -> *mut sys::dp_net {
        self.raw
    }

    /// Runs every op once (dp_net_run). Cancelled runs give Code::Cancelled.
    pub fn run(&self) -> Result<()> {
        let _run = self.ws.begin_run("Net::run")?;
        check(unsafe { sys::dp_net_run(self.raw) })
    }

    /// Starts a run (dp_net_run_async); collect it with `AsyncRun::wait`.
    /// Until then the workspace refuses feeds, fetches and other runs.
    pub fn run_async(&self) -> Result<AsyncRun<'_, 'w, 'd>> {
        let run = self.ws.begin_run("Net::run_async")?;
        check(unsafe { sys::dp_net_run_async(self.raw) })?;
        *self.in_flight.borrow_mut() = Some(run);
        Ok(AsyncRun { net: self, result: None })
    }

    /// A handle that may cancel this net's runs from any thread.
    pub fn canceller(&self) -> Canceller<'_> {
        Canceller { raw: self.raw, _net: PhantomData }
    }

    /// The last run's per-op trace as Chrome trace JSON (needs profile).
    pub fn trace_json(&self) -> Result<String> {
        buffer_string(|o| unsafe { sys::dp_net_trace_json(self.raw, o) })
    }

    /// The net's memory on device (`device_type`, `device_id`) after its last
    /// run (dp_net_memory_stats); FailedPrecondition while a run is in
    /// progress.
    pub fn memory_stats(&self, device_type: DeviceType, device_id: i32) -> Result<NetMemoryStats> {
        self.memory_stats_raw(device_type.value(), device_id)
    }

    /// memory_stats with a raw DP_DEVICE_* value (unknown: InvalidArgument).
    pub fn memory_stats_raw(&self, device_type: i32, device_id: i32) -> Result<NetMemoryStats> {
        let mut c: sys::dp_net_memory = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::dp_net_memory>() as u32;
        check(unsafe { sys::dp_net_memory_stats(self.raw, device_type, device_id, &mut c) })?;
        Ok(NetMemoryStats {
            mode: Memory::from_value(c.mode),
            peak_bytes: c.peak_bytes,
            bytes_in_use: c.bytes_in_use,
            temporaries: c.temporaries,
            slots: c.slots,
            slot_bytes: c.slot_bytes,
        })
    }

    /// The ops and their dependencies as Graphviz DOT.
    pub fn to_dot(&self) -> Result<String> {
        buffer_string(|o| unsafe { sys::dp_net_to_dot(self.raw, o) })
    }

    fn finish(&self) {
        self.in_flight.borrow_mut().take();
    }
}

impl<'w, 'd> Drop for Net<'w, 'd> {
    fn drop(&mut self) {
        // Only reachable with a run in flight if its AsyncRun was leaked.
        if self.in_flight.borrow().is_some() {
            unsafe {
                sys::dp_net_cancel(self.raw);
                let _ = check(sys::dp_net_wait(self.raw, -1));
            }
            self.finish();
        }
        unsafe { sys::dp_net_free(self.raw) }
    }
}

/// A run started by `Net::run_async`. Dropping it cancels the run and
/// waits for it (the workspace must not be touched while it runs).
pub struct AsyncRun<'n, 'w, 'd> {
    net: &'n Net<'w, 'd>,
    result: Option<Result<()>>,
}

impl<'n, 'w, 'd> AsyncRun<'n, 'w, 'd> {
    /// Waits up to `timeout_ms` (negative: no limit). Code::Timeout while it
    /// still runs (wait again); once finished, every call returns the run's
    /// result.
    pub fn wait(&mut self, timeout_ms: i64) -> Result<()> {
        if let Some(r) = &self.result {
            return r.clone();
        }
        let r = check(unsafe { sys::dp_net_wait(self.net.raw, timeout_ms) });
        if let Err(e) = &r {
            if e.code() == Code::Timeout {
                return r;
            }
        }
        self.net.finish();
        self.result = Some(r.clone());
        r
    }

    pub fn is_finished(&self) -> bool {
        self.result.is_some()
    }

    /// Asks the run to stop at the next op boundary.
    pub fn cancel(&self) {
        unsafe { sys::dp_net_cancel(self.net.raw) }
    }

    pub fn canceller(&self) -> Canceller<'_> {
        self.net.canceller()
    }
}

impl<'n, 'w, 'd> Drop for AsyncRun<'n, 'w, 'd> {
    fn drop(&mut self) {
        if self.result.is_none() {
            unsafe { sys::dp_net_cancel(self.net.raw) };
            let _ = self.wait(-1);
        }
    }
}

/// Cancels a net's current run (dp_net_cancel) from any thread.
#[derive(Clone, Copy)]
pub struct Canceller<'n> {
    raw: *mut sys::dp_net,
    _net: PhantomData<&'n ()>,
}

// dp.h: dp_net_cancel "Any thread, any time; does nothing when no run is in
// progress". The lifetime keeps the net alive.
unsafe impl<'n> Send for Canceller<'n> {}
unsafe impl<'n> Sync for Canceller<'n> {}

impl<'n> Canceller<'n> {
    pub fn cancel(&self) {
        unsafe { sys::dp_net_cancel(self.raw) }
    }
}

/// A net's memory on one device after its last run (dp_net_memory), in bytes
/// and counts. Since 0.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetMemoryStats {
    /// What the net does: Keep, Share or Free.
    pub mode: Memory,
    /// The most the workspace held on the device during the last run.
    pub peak_bytes: u64,
    /// What it holds there now.
    pub bytes_in_use: u64,
    /// Blobs the plan empties after their last use.
    pub temporaries: u64,
    /// Share: the blocks they take turns in.
    pub slots: u64,
    /// Share: the bytes those blocks hold between runs.
    pub slot_bytes: u64,
}
