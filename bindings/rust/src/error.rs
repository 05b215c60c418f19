//! `dp::Error`: a dp_status turned into an owned Rust value (the status is
//! freed at once), plus the binding's own argument errors (interior NUL in
//! a string, a slice of the wrong length), which use the same stable codes.
use crate::sys;
use std::ffi::CStr;
use std::fmt;

/// The stable error codes of dp.h (DP_ERR_*). `Other` keeps codes added by a
/// newer library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    Cancelled,
    Timeout,
    DataLoss,
    OutOfMemory,
    FailedPrecondition,
    Io,
    Parse,
    InvalidNet,
    Shape,
    Dtype,
    Other(i32),
}

impl Code {
    /// The code for a DP_ERR_* value.
    pub fn from_raw(v: i32) -> Code {
        match v {
            sys::DP_ERR_INVALID_ARGUMENT => Code::InvalidArgument,
            sys::DP_ERR_NOT_FOUND => Code::NotFound,
            sys::DP_ERR_ALREADY_EXISTS => Code::AlreadyExists,
            sys::DP_ERR_OUT_OF_RANGE => Code::OutOfRange,
            sys::DP_ERR_UNIMPLEMENTED => Code::Unimplemented,
            sys::DP_ERR_INTERNAL => Code::Internal,
            sys::DP_ERR_UNAVAILABLE => Code::Unavailable,
            sys::DP_ERR_CANCELLED => Code::Cancelled,
            sys::DP_ERR_TIMEOUT => Code::Timeout,
            sys::DP_ERR_DATA_LOSS => Code::DataLoss,
            sys::DP_ERR_OUT_OF_MEMORY => Code::OutOfMemory,
            sys::DP_ERR_FAILED_PRECONDITION => Code::FailedPrecondition,
            sys::DP_ERR_IO => Code::Io,
            sys::DP_ERR_PARSE => Code::Parse,
            sys::DP_ERR_INVALID_NET => Code::InvalidNet,
            sys::DP_ERR_SHAPE => Code::Shape,
            sys::DP_ERR_DTYPE => Code::Dtype,
            other => Code::Other(other),
        }
    }

    /// The numeric DP_ERR_* value.
    pub fn value(self) -> i32 {
        match self {
            Code::InvalidArgument => sys::DP_ERR_INVALID_ARGUMENT,
            Code::NotFound => sys::DP_ERR_NOT_FOUND,
            Code::AlreadyExists => sys::DP_ERR_ALREADY_EXISTS,
            Code::OutOfRange => sys::DP_ERR_OUT_OF_RANGE,
            Code::Unimplemented => sys::DP_ERR_UNIMPLEMENTED,
            Code::Internal => sys::DP_ERR_INTERNAL,
            Code::Unavailable => sys::DP_ERR_UNAVAILABLE,
            Code::Cancelled => sys::DP_ERR_CANCELLED,
            Code::Timeout => sys::DP_ERR_TIMEOUT,
            Code::DataLoss => sys::DP_ERR_DATA_LOSS,
            Code::OutOfMemory => sys::DP_ERR_OUT_OF_MEMORY,
            Code::FailedPrecondition => sys::DP_ERR_FAILED_PRECONDITION,
            Code::Io => sys::DP_ERR_IO,
            Code::Parse => sys::DP_ERR_PARSE,
            Code::InvalidNet => sys::DP_ERR_INVALID_NET,
            Code::Shape => sys::DP_ERR_SHAPE,
            Code::Dtype => sys::DP_ERR_DTYPE,
            Code::Other(v) => v,
        }
    }

    /// The library's name of the code ("INVALID_ARGUMENT").
    pub fn name(self) -> &'static str {
        code_name(self.value())
    }
}

/// dp_status_code_name: the name of any code, "UNKNOWN" if unknown.
pub fn code_name(code: i32) -> &'static str {
    // Static string per dp.h.
    unsafe { crate::util::static_str(sys::dp_status_code_name(code)) }
}

/// A failed call: its stable code and the library's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: i32,
    message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error { code: code.value(), message: message.into() }
    }
    pub fn code(&self) -> Code {
        Code::from_raw(self.code)
    }
    pub fn raw_code(&self) -> i32 {
        self.code
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", code_name(self.code), self.message)
    }
}

impl std::error::Error for Error {}

/// Takes ownership of a status: Ok for NULL, else an Error; frees it.
pub(crate) fn check(status: *mut sys::dp_status) -> Result<()> {
    if status.is_null() {
        return Ok(());
    }
    // The message is valid until the status is freed: copy it first.
    let err = unsafe {
        let code = sys::dp_status_code(status);
        let msg = sys::dp_status_message(status);
        let message = if msg.is_null() { String::new() } else { CStr::from_ptr(msg).to_string_lossy().into_owned() };
        Error { code, message }
    };
    unsafe { sys::dp_status_free(status) };
    Err(err)
}
