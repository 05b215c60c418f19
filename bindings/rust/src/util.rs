//! Small FFI helpers shared by the safe modules: strings in and out, and the
//! two library-owned containers (dp_string_list, dp_buffer).
use crate::error::{check, Code, Error, Result};
use crate::sys;
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr;

/// A Rust string as a C string; an interior NUL is an InvalidArgument error
/// (C would silently truncate it).
pub(crate) fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(Code::InvalidArgument, format!("{} contains a NUL byte: {:?}", what, s)))
}

/// Several strings, plus the pointer array C wants. Keep the struct alive
/// while the pointers are used.
pub(crate) struct CStrings {
    _owned: Vec<CString>,
    pub ptrs: Vec<*const c_char>,
}

impl CStrings {
    pub fn new<S: AsRef<str>>(items: &[S], what: &str) -> Result<CStrings> {
        let owned = items.iter().map(|s| cstring(s.as_ref(), what)).collect::<Result<Vec<_>>>()?;
        let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
        Ok(CStrings { _owned: owned, ptrs })
    }
    /// The array pointer, NULL when empty (dp reads NULL/0 as "all").
    pub fn as_ptr(&self) -> *const *const c_char {
        if self.ptrs.is_empty() {
            ptr::null()
        } else {
            self.ptrs.as_ptr()
        }
    }
    pub fn len(&self) -> usize {
        self.ptrs.len()
    }
}

/// A borrowed C string as &str with the caller-chosen lifetime (the header
/// says how long it lives); NULL gives "". dp promises UTF-8; invalid bytes
/// (never expected) give "".
pub(crate) unsafe fn borrowed_str<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("")
}

/// A NULL-able borrowed C string.
pub(crate) unsafe fn opt_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        Some(borrowed_str(p))
    }
}

pub(crate) unsafe fn static_str(p: *const c_char) -> &'static str {
    borrowed_str(p)
}

/// Owns a dp_string_list and copies it out.
pub(crate) struct StringList(*mut sys::dp_string_list);

impl StringList {
    /// Runs `f` with an out-pointer and takes the list it fills.
    pub fn fill(f: impl FnOnce(*mut *mut sys::dp_string_list) -> *mut sys::dp_status) -> Result<StringList> {
        let mut out = ptr::null_mut();
        check(f(&mut out))?;
        Ok(StringList(out))
    }
    pub fn to_vec(&self) -> Vec<String> {
        let n = unsafe { sys::dp_string_list_size(self.0) };
        (0..n).map(|i| unsafe { borrowed_str(sys::dp_string_list_get(self.0, i)) }.to_owned()).collect()
    }
    pub fn into_vec(self) -> Vec<String> {
        self.to_vec()
    }
}

impl Drop for StringList {
    fn drop(&mut self) {
        unsafe { sys::dp_string_list_free(self.0) }
    }
}

/// Runs `f` with an out-pointer to a dp_buffer and copies the bytes out.
pub(crate) fn buffer_bytes(f: impl FnOnce(*mut *mut sys::dp_buffer) -> *mut sys::dp_status) -> Result<Vec<u8>> {
    let mut out = ptr::null_mut();
    check(f(&mut out))?;
    unsafe {
        let data = sys::dp_buffer_data(out) as *const u8;
        let size = sys::dp_buffer_size(out);
        let v = if data.is_null() || size == 0 { Vec::new() } else { std::slice::from_raw_parts(data, size).to_vec() };
        sys::dp_buffer_free(out);
        Ok(v)
    }
}

/// A text buffer (JSON, DOT) as a String.
pub(crate) fn buffer_string(f: impl FnOnce(*mut *mut sys::dp_buffer) -> *mut sys::dp_status) -> Result<String> {
    let bytes = buffer_bytes(f)?;
    String::from_utf8(bytes).map_err(|_| Error::new(Code::Internal, "dp returned text that is not UTF-8"))
}

/// Fills one out-pointer handle.
pub(crate) fn out_handle<T>(f: impl FnOnce(*mut *mut T) -> *mut sys::dp_status) -> Result<*mut T> {
    let mut out = ptr::null_mut();
    check(f(&mut out))?;
    Ok(out)
}
