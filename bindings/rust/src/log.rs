//! Routing dp's log messages to a Rust closure (dp_log_set_callback).
//!
//! dp calls the closure from any of its threads (never two at once), hence
//! `Fn + Send + Sync + 'static`. A panic in the closure is caught before it
//! reaches C (unwinding into C++ would be undefined behaviour) and the
//! message is dropped. The closure must not change the log routing itself:
//! `set_callback` / `reset` called from inside it return an error.
use crate::error::{Code, Error, Result};
use crate::sys;
use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// Log levels (DP_LOG_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warning,
    Error,
}

impl Level {
    pub fn value(self) -> i32 {
        match self {
            Level::Debug => sys::DP_LOG_DEBUG,
            Level::Info => sys::DP_LOG_INFO,
            Level::Warning => sys::DP_LOG_WARNING,
            Level::Error => sys::DP_LOG_ERROR,
        }
    }
    fn from_raw(v: i32) -> Level {
        match v {
            sys::DP_LOG_DEBUG => Level::Debug,
            sys::DP_LOG_INFO => Level::Info,
            sys::DP_LOG_WARNING => Level::Warning,
            _ => Level::Error,
        }
    }
}

type LogFn = Box<dyn Fn(Level, &str) + Send + Sync + 'static>;

// The installed closure. dp holds a pointer to the inner LogFn (user_data),
// so it lives here until dp has switched to the next one.
static CURRENT: Mutex<Option<Box<LogFn>>> = Mutex::new(None);

thread_local! {
    static IN_CALLBACK: Cell<bool> = Cell::new(false);
}

unsafe extern "C" fn trampoline(user_data: *mut c_void, level: i32, message: *const c_char) {
    let f = &*(user_data as *const LogFn);
    let msg = if message.is_null() { std::borrow::Cow::Borrowed("") } else { CStr::from_ptr(message).to_string_lossy() };
    IN_CALLBACK.with(|c| c.set(true));
    let _ = catch_unwind(AssertUnwindSafe(|| f(Level::from_raw(level), &msg)));
    IN_CALLBACK.with(|c| c.set(false));
}

fn install(f: Option<LogFn>, min_level: Level) -> Result<()> {
    if IN_CALLBACK.with(|c| c.get()) {
        return Err(Error::new(Code::FailedPrecondition, "the log callback must not change dp's log routing"));
    }
    let mut cur = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    let new = f.map(Box::new);
    match &new {
        Some(b) => unsafe {
            sys::dp_log_set_callback(Some(trampoline), &**b as *const LogFn as *mut c_void, min_level.value())
        },
        None => unsafe { sys::dp_log_set_callback(None, std::ptr::null_mut(), min_level.value()) },
    }
    // dp serialises callback calls with its routing changes: once the call
    // above returned, the old closure is not running and is never called
    // again, so it may be dropped.
    let old = std::mem::replace(&mut *cur, new);
    drop(cur);
    drop(old);
    Ok(())
}

/// Routes messages of `min_level` and above to `f`, process wide.
pub fn set_callback<F>(min_level: Level, f: F) -> Result<()>
where
    F: Fn(Level, &str) + Send + Sync + 'static,
{
    install(Some(Box::new(f)), min_level)
}

/// Restores the default routing (stderr) with the given minimum level.
pub fn reset(min_level: Level) -> Result<()> {
    install(None, min_level)
}
