//! Net definitions (dp_netdef) and their read-only introspection views
//! (dp_opdef, dp_argdef). Views and the strings/arrays they return borrow
//! the NetDef (`'a`): dp.h says they stay valid until it is freed.
use crate::error::{check, Result};
use crate::options::{GradientOptions, Memory};
use crate::sys;
use crate::util::{borrowed_str, buffer_bytes, buffer_string, cstring, out_handle, StringList};
use std::os::raw::{c_char, c_void};
use std::ptr;

pub struct NetDef {
    raw: *mut sys::dp_netdef,
}

// dp.h: "Immutable, so it may be used from many threads at once."
unsafe impl Send for NetDef {}
unsafe impl Sync for NetDef {}

impl NetDef {
    pub(crate) fn wrap(raw: *mut sys::dp_netdef) -> NetDef {
        NetDef { raw }
    }
    pub fn as_raw(&self) -> *const sys::dp_netdef {
        self.raw
    }

    /// From JSON text (dp_netdef_from_json).
    pub fn from_json(json: &str) -> Result<NetDef> {
        Self::from_json_bytes(json.as_bytes())
    }
    /// From JSON bytes, which need not be NUL-terminated nor valid UTF-8 (dp
    /// reports what is wrong).
    pub fn from_json_bytes(json: &[u8]) -> Result<NetDef> {
        let h = out_handle(|o| unsafe { sys::dp_netdef_from_json(json.as_ptr() as *const c_char, json.len(), o) })?;
        Ok(Self::wrap(h))
    }
    /// From a binary FlatBuffer ("DPNT"), verified first.
    pub fn from_buffer(data: &[u8]) -> Result<NetDef> {
        let h = out_handle(|o| unsafe { sys::dp_netdef_from_buffer(data.as_ptr() as *const c_void, data.len(), o) })?;
        Ok(Self::wrap(h))
    }
    /// From a file holding either form.
    pub fn from_file(path: &str) -> Result<NetDef> {
        let p = cstring(path, "path")?;
        let h = out_handle(|o| unsafe { sys::dp_netdef_from_file(p.as_ptr(), o) })?;
        Ok(Self::wrap(h))
    }

    pub fn to_buffer(&self) -> Result<Vec<u8>> {
        buffer_bytes(|o| unsafe { sys::dp_netdef_to_buffer(self.raw, o) })
    }
    pub fn to_json(&self) -> Result<String> {
        buffer_string(|o| unsafe { sys::dp_netdef_to_json(self.raw, o) })
    }
    pub fn to_dot(&self) -> Result<String> {
        buffer_string(|o| unsafe { sys::dp_netdef_to_dot(self.raw, o) })
    }

    pub fn name(&self) -> &str {
        unsafe { borrowed_str(sys::dp_netdef_name(self.raw)) }
    }
    pub fn num_ops(&self) -> usize {
        unsafe { sys::dp_netdef_num_ops(self.raw) }
    }
    pub fn external_inputs(&self) -> Vec<&str> {
        let n = unsafe { sys::dp_netdef_num_external_inputs(self.raw) };
        (0..n).map(|i| unsafe { borrowed_str(sys::dp_netdef_external_input(self.raw, i)) }).collect()
    }
    pub fn external_outputs(&self) -> Vec<&str> {
        let n = unsafe { sys::dp_netdef_num_external_outputs(self.raw) };
        (0..n).map(|i| unsafe { borrowed_str(sys::dp_netdef_external_output(self.raw, i)) }).collect()
    }
    /// Default device type (DP_DEVICE_*) and id of ops that set none.
    pub fn device_type(&self) -> i32 {
        unsafe { sys::dp_netdef_device_type(self.raw) }
    }
    pub fn device_id(&self) -> i32 {
        unsafe { sys::dp_netdef_device_id(self.raw) }
    }
    /// DP_EXECUTOR_* the definition asks for.
    pub fn executor(&self) -> i32 {
        unsafe { sys::dp_netdef_executor(self.raw) }
    }
    pub fn num_workers(&self) -> i32 {
        unsafe { sys::dp_netdef_num_workers(self.raw) }
    }
    /// The memory mode the definition asks for (`Memory::Share` for the
    /// builders' train nets). Since 0.6.
    pub fn memory(&self) -> Memory {
        Memory::from_value(unsafe { sys::dp_netdef_memory(self.raw) })
    }
    /// Op i in run order; None out of range.
    pub fn op(&self, i: usize) -> Option<OpDef<'_>> {
        let p = unsafe { sys::dp_netdef_op(self.raw, i) };
        if p.is_null() {
            None
        } else {
            Some(OpDef { raw: p, _def: std::marker::PhantomData })
        }
    }
    pub fn ops(&self) -> Vec<OpDef<'_>> {
        (0..self.num_ops()).filter_map(|i| self.op(i)).collect()
    }

    /// This net followed by its gradient ops (dp_netdef_add_gradients); also
    /// the (wrt blob, gradient blob) pairs.
    pub fn add_gradients(&self, options: &GradientOptions) -> Result<(NetDef, Vec<(String, String)>)> {
        let c = options.to_c()?;
        let mut out = ptr::null_mut();
        let map = StringList::fill(|m| unsafe { sys::dp_netdef_add_gradients(self.raw, &c.c, &mut out, m) });
        let map = match map {
            Ok(m) => m.into_vec(),
            Err(e) => return Err(e),
        };
        let def = NetDef::wrap(out);
        let pairs = map.chunks(2).filter(|c| c.len() == 2).map(|c| (c[0].clone(), c[1].clone())).collect();
        Ok((def, pairs))
    }
}

impl Drop for NetDef {
    fn drop(&mut self) {
        unsafe { sys::dp_netdef_free(self.raw) }
    }
}

impl std::fmt::Debug for NetDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NetDef({:?}, {} ops)", self.name(), self.num_ops())
    }
}

/// An op of a NetDef: a borrowed view, valid while the NetDef lives.
#[derive(Clone, Copy)]
pub struct OpDef<'a> {
    raw: *const sys::dp_opdef,
    _def: std::marker::PhantomData<&'a NetDef>,
}

// Views into an immutable NetDef: readable from any number of threads.
unsafe impl<'a> Send for OpDef<'a> {}
unsafe impl<'a> Sync for OpDef<'a> {}

fn list<'a>(n: usize, get: impl Fn(usize) -> *const c_char) -> Vec<&'a str> {
    (0..n).map(|i| unsafe { borrowed_str(get(i)) }).collect()
}

impl<'a> OpDef<'a> {
    pub fn op_type(&self) -> &'a str {
        unsafe { borrowed_str(sys::dp_opdef_type(self.raw)) }
    }
    pub fn name(&self) -> &'a str {
        unsafe { borrowed_str(sys::dp_opdef_name(self.raw)) }
    }
    pub fn engine(&self) -> &'a str {
        unsafe { borrowed_str(sys::dp_opdef_engine(self.raw)) }
    }
    pub fn inputs(&self) -> Vec<&'a str> {
        let r = self.raw;
        list(unsafe { sys::dp_opdef_num_inputs(r) }, |i| unsafe { sys::dp_opdef_input(r, i) })
    }
    pub fn outputs(&self) -> Vec<&'a str> {
        let r = self.raw;
        list(unsafe { sys::dp_opdef_num_outputs(r) }, |i| unsafe { sys::dp_opdef_output(r, i) })
    }
    pub fn control_inputs(&self) -> Vec<&'a str> {
        let r = self.raw;
        list(unsafe { sys::dp_opdef_num_control_inputs(r) }, |i| unsafe { sys::dp_opdef_control_input(r, i) })
    }
    /// The device the op sets; DP_DEVICE_NONE when it sets none.
    pub fn device_type(&self) -> i32 {
        unsafe { sys::dp_opdef_device_type(self.raw) }
    }
    pub fn device_id(&self) -> i32 {
        unsafe { sys::dp_opdef_device_id(self.raw) }
    }
    pub fn num_args(&self) -> usize {
        unsafe { sys::dp_opdef_num_args(self.raw) }
    }
    pub fn arg(&self, i: usize) -> Option<ArgDef<'a>> {
        ArgDef::wrap(unsafe { sys::dp_opdef_arg(self.raw, i) })
    }
    pub fn args(&self) -> Vec<ArgDef<'a>> {
        (0..self.num_args()).filter_map(|i| self.arg(i)).collect()
    }
    /// The argument named `name`; None when absent (or the name has a NUL).
    pub fn find_arg(&self, name: &str) -> Option<ArgDef<'a>> {
        let n = cstring(name, "argument name").ok()?;
        ArgDef::wrap(unsafe { sys::dp_opdef_find_arg(self.raw, n.as_ptr()) })
    }
}

/// Kinds of argument values (DP_ARG_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    Float,
    Int,
    String,
    Floats,
    Ints,
    Strings,
    Net,
    Nets,
    Other(i32),
}

impl ArgKind {
    /// The kind of a DP_ARG_* value.
    pub fn from_raw(k: i32) -> ArgKind {
        match k {
            sys::DP_ARG_FLOAT => ArgKind::Float,
            sys::DP_ARG_INT => ArgKind::Int,
            sys::DP_ARG_STRING => ArgKind::String,
            sys::DP_ARG_FLOATS => ArgKind::Floats,
            sys::DP_ARG_INTS => ArgKind::Ints,
            sys::DP_ARG_STRINGS => ArgKind::Strings,
            sys::DP_ARG_NET => ArgKind::Net,
            sys::DP_ARG_NETS => ArgKind::Nets,
            k => ArgKind::Other(k),
        }
    }
}

/// An argument of an op: a borrowed view, valid while the NetDef lives.
#[derive(Clone, Copy)]
pub struct ArgDef<'a> {
    raw: *const sys::dp_argdef,
    _def: std::marker::PhantomData<&'a NetDef>,
}

unsafe impl<'a> Send for ArgDef<'a> {}
unsafe impl<'a> Sync for ArgDef<'a> {}

impl<'a> ArgDef<'a> {
    /// A view of `raw`, which must stay valid for `'a` (a NetDef's argument,
    /// or an OpSchema's default while its handle lives).
    pub(crate) fn wrap(raw: *const sys::dp_argdef) -> Option<ArgDef<'a>> {
        if raw.is_null() {
            None
        } else {
            Some(ArgDef { raw, _def: std::marker::PhantomData })
        }
    }
    pub fn name(&self) -> &'a str {
        unsafe { borrowed_str(sys::dp_argdef_name(self.raw)) }
    }
    pub fn kind(&self) -> ArgKind {
        ArgKind::from_raw(unsafe { sys::dp_argdef_kind(self.raw) })
    }
    pub fn num_values(&self) -> usize {
        unsafe { sys::dp_argdef_num_values(self.raw) }
    }
    /// Values are never converted: another kind is an InvalidArgument error.
    pub fn get_float(&self) -> Result<f64> {
        let mut v = 0.0;
        check(unsafe { sys::dp_argdef_get_float(self.raw, &mut v) })?;
        Ok(v)
    }
    pub fn get_int(&self) -> Result<i64> {
        let mut v = 0;
        check(unsafe { sys::dp_argdef_get_int(self.raw, &mut v) })?;
        Ok(v)
    }
    pub fn get_string(&self) -> Result<&'a str> {
        let mut p = ptr::null();
        check(unsafe { sys::dp_argdef_get_string(self.raw, &mut p) })?;
        Ok(unsafe { borrowed_str(p) })
    }
    pub fn get_floats(&self) -> Result<&'a [f64]> {
        let (mut p, mut n) = (ptr::null(), 0usize);
        check(unsafe { sys::dp_argdef_get_floats(self.raw, &mut p, &mut n) })?;
        Ok(if n == 0 || p.is_null() { &[] } else { unsafe { std::slice::from_raw_parts(p, n) } })
    }
    pub fn get_ints(&self) -> Result<&'a [i64]> {
        let (mut p, mut n) = (ptr::null(), 0usize);
        check(unsafe { sys::dp_argdef_get_ints(self.raw, &mut p, &mut n) })?;
        Ok(if n == 0 || p.is_null() { &[] } else { unsafe { std::slice::from_raw_parts(p, n) } })
    }
    pub fn get_string_at(&self, i: usize) -> Result<&'a str> {
        let mut p = ptr::null();
        check(unsafe { sys::dp_argdef_get_string_at(self.raw, i, &mut p) })?;
        Ok(unsafe { borrowed_str(p) })
    }
    pub fn get_strings(&self) -> Result<Vec<&'a str>> {
        (0..self.num_values()).map(|i| self.get_string_at(i)).collect()
    }
    /// The nested net of a NET argument: a new handle that may outlive this one.
    pub fn get_net(&self) -> Result<NetDef> {
        Ok(NetDef::wrap(out_handle(|o| unsafe { sys::dp_argdef_get_net(self.raw, o) })?))
    }
    pub fn get_net_at(&self, i: usize) -> Result<NetDef> {
        Ok(NetDef::wrap(out_handle(|o| unsafe { sys::dp_argdef_get_net_at(self.raw, i, o) })?))
    }
}
