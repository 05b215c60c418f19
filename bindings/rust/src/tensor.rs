//! Tensors: dense, row-major, immutable host tensors (dp_tensor).
//!
//! Three ways in, each with the memory rule of dp.h:
//! - [`Tensor::new`] / [`Tensor::from_bytes`] / [`Tensor::zeros`] copy
//!   (dp_tensor_create): the result borrows nothing (`Tensor<'static>`).
//! - [`Tensor::borrowed`] (dp_tensor_create_borrowed) reads the caller's slice
//!   without copying: the `'a` of `Tensor<'a>` ties the tensor, and every
//!   workspace it is fed into (`Workspace<'a>`), to the slice, which the
//!   borrow checker then keeps alive and unchanged.
//! - [`Tensor::from_vec`] (dp_tensor_create_owned) hands a `Vec` to dp; dp
//!   drops it through a deleter, exactly once, from whichever thread lets go
//!   of it last. On failure the Vec is dropped by the binding.
use crate::error::{check, Code, Error, Result};
use crate::sys;
use crate::util::cstring;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::ptr;

/// Element types (DP_DTYPE_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    Float32,
    Float16,
    BFloat16,
    Float64,
    Int32,
    Int64,
    UInt8,
    Bool,
}

impl DType {
    pub fn value(self) -> i32 {
        match self {
            DType::Float32 => sys::DP_DTYPE_FLOAT32,
            DType::Float16 => sys::DP_DTYPE_FLOAT16,
            DType::BFloat16 => sys::DP_DTYPE_BFLOAT16,
            DType::Float64 => sys::DP_DTYPE_FLOAT64,
            DType::Int32 => sys::DP_DTYPE_INT32,
            DType::Int64 => sys::DP_DTYPE_INT64,
            DType::UInt8 => sys::DP_DTYPE_UINT8,
            DType::Bool => sys::DP_DTYPE_BOOL,
        }
    }
    /// None for values this binding does not know (0, or newer dtypes).
    pub fn from_raw(v: i32) -> Option<DType> {
        Some(match v {
            sys::DP_DTYPE_FLOAT32 => DType::Float32,
            sys::DP_DTYPE_FLOAT16 => DType::Float16,
            sys::DP_DTYPE_BFLOAT16 => DType::BFloat16,
            sys::DP_DTYPE_FLOAT64 => DType::Float64,
            sys::DP_DTYPE_INT32 => DType::Int32,
            sys::DP_DTYPE_INT64 => DType::Int64,
            sys::DP_DTYPE_UINT8 => DType::UInt8,
            sys::DP_DTYPE_BOOL => DType::Bool,
            _ => return None,
        })
    }
    /// dp_dtype_size: bytes per element.
    pub fn size(self) -> usize {
        dtype_size(self.value())
    }
    /// The name dp's messages give it ("float32", "uint8").
    pub fn name(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float64 => "float64",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::UInt8 => "uint8",
            DType::Bool => "bool",
        }
    }
}

/// The dtype's name ("float32").
impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The name of a raw DP_DTYPE_* value: DType::name, or "dtype N" for one
/// this binding does not know.
pub fn dtype_name(dtype: i32) -> String {
    DType::from_raw(dtype).map_or_else(|| format!("dtype {}", dtype), |d| d.name().to_string())
}

/// dp_dtype_size for any raw value; 0 when unknown.
pub fn dtype_size(dtype: i32) -> usize {
    unsafe { sys::dp_dtype_size(dtype) }
}

/// Rust types that are exactly a dp element type (every bit pattern valid,
/// so reading a dp tensor as a slice of them is sound).
pub unsafe trait Element: Copy + Send + Sync + 'static {
    const DTYPE: DType;
}
unsafe impl Element for f32 {
    const DTYPE: DType = DType::Float32;
}
unsafe impl Element for f64 {
    const DTYPE: DType = DType::Float64;
}
unsafe impl Element for i32 {
    const DTYPE: DType = DType::Int32;
}
unsafe impl Element for i64 {
    const DTYPE: DType = DType::Int64;
}
unsafe impl Element for u8 {
    const DTYPE: DType = DType::UInt8;
}

/// A dp tensor; `'a` is the lifetime of borrowed caller memory ('static
/// when dp owns the elements).
pub struct Tensor<'a> {
    raw: *mut sys::dp_tensor,
    _data: PhantomData<&'a [u8]>,
}

// dp.h: "Its shape, dtype and contents never change after creation ... so a
// dp_tensor may be read from many threads at once"; release and the
// transferred Vec's deleter may run on any thread ("from whichever thread
// drops it"); borrowed memory is only read, and Element types are Sync.
unsafe impl<'a> Send for Tensor<'a> {}
unsafe impl<'a> Sync for Tensor<'a> {}

fn dims_ptr(dims: &[i64]) -> *const i64 {
    if dims.is_empty() {
        ptr::null()
    } else {
        dims.as_ptr()
    }
}

unsafe extern "C" fn drop_vec<T>(_data: *mut c_void, user_data: *mut c_void) {
    // Dropping a Vec of plain numbers cannot panic; nothing unwinds into C.
    drop(Box::from_raw(user_data as *mut Vec<T>));
}

impl Tensor<'static> {
    /// A copy of `data` with shape `dims` (dp_tensor_create). The element
    /// count must match the shape (else an error from dp).
    pub fn new<T: Element>(dims: &[i64], data: &[T]) -> Result<Tensor<'static>> {
        Self::create(T::DTYPE.value(), dims, data.as_ptr() as *const c_void, std::mem::size_of_val(data))
    }

    /// A copy of raw element bytes of any dtype (float16, bool, ...).
    pub fn from_bytes(dtype: DType, dims: &[i64], bytes: &[u8]) -> Result<Tensor<'static>> {
        Self::create(dtype.value(), dims, bytes.as_ptr() as *const c_void, bytes.len())
    }

    /// Same, with a raw DP_DTYPE_* value (dp rejects unknown ones).
    pub fn from_bytes_raw(dtype: i32, dims: &[i64], bytes: &[u8]) -> Result<Tensor<'static>> {
        Self::create(dtype, dims, bytes.as_ptr() as *const c_void, bytes.len())
    }

    /// A zero-filled tensor (dp_tensor_create with NULL data).
    pub fn zeros(dtype: DType, dims: &[i64]) -> Result<Tensor<'static>> {
        Self::create(dtype.value(), dims, ptr::null(), 0)
    }

    fn create(dtype: i32, dims: &[i64], data: *const c_void, nbytes: usize) -> Result<Tensor<'static>> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::dp_tensor_create(dtype, dims_ptr(dims), dims.len(), data, nbytes, &mut out) })?;
        Ok(Tensor { raw: out, _data: PhantomData })
    }

    /// Hands `data` to dp without copying (dp_tensor_create_owned): dp drops
    /// the Vec when the last reference (this tensor, a workspace blob) goes.
    pub fn from_vec<T: Element>(dims: &[i64], data: Vec<T>) -> Result<Tensor<'static>> {
        let nbytes = std::mem::size_of_val(&data[..]);
        let boxed = Box::new(data);
        let ptr_data = boxed.as_ptr() as *mut c_void;
        let user = Box::into_raw(boxed);
        let mut out = ptr::null_mut();
        let st = unsafe {
            sys::dp_tensor_create_owned(
                T::DTYPE.value(),
                dims_ptr(dims),
                dims.len(),
                ptr_data,
                nbytes,
                Some(drop_vec::<T>),
                user as *mut c_void,
                &mut out,
            )
        };
        if let Err(e) = check(st) {
            // "On failure ownership stays with the caller."
            drop(unsafe { Box::from_raw(user) });
            return Err(e);
        }
        Ok(Tensor { raw: out, _data: PhantomData })
    }

    /// Reads an IDX file (MNIST format, gzip or not) into a new tensor
    /// (dp_tensor_from_idx_file).
    pub fn from_idx_file(path: &str) -> Result<Tensor<'static>> {
        let p = cstring(path, "path")?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::dp_tensor_from_idx_file(p.as_ptr(), &mut out) })?;
        Ok(Tensor { raw: out, _data: PhantomData })
    }
}

impl<'a> Tensor<'a> {
    /// A tensor over `data` without copying (dp_tensor_create_borrowed). The
    /// slice stays borrowed (unchangeable, alive) for `'a`, which also bounds
    /// every workspace it is fed into.
    pub fn borrowed<T: Element>(dims: &[i64], data: &'a [T]) -> Result<Tensor<'a>> {
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::dp_tensor_create_borrowed(
                T::DTYPE.value(),
                dims_ptr(dims),
                dims.len(),
                data.as_ptr() as *const c_void,
                std::mem::size_of_val(data),
                &mut out,
            )
        })?;
        Ok(Tensor { raw: out, _data: PhantomData })
    }

    /// Raw-byte form of [`Tensor::borrowed`]; `bytes` must be aligned to the
    /// element size (dp checks).
    pub fn borrowed_bytes(dtype: DType, dims: &[i64], bytes: &'a [u8]) -> Result<Tensor<'a>> {
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::dp_tensor_create_borrowed(
                dtype.value(),
                dims_ptr(dims),
                dims.len(),
                bytes.as_ptr() as *const c_void,
                bytes.len(),
                &mut out,
            )
        })?;
        Ok(Tensor { raw: out, _data: PhantomData })
    }

    pub(crate) unsafe fn from_raw(raw: *mut sys::dp_tensor) -> Tensor<'a> {
        Tensor { raw, _data: PhantomData }
    }

    pub fn as_raw(&self) -> *const sys::dp_tensor {
        self.raw
    }

    /// The raw DP_DTYPE_* value.
    pub fn dtype_raw(&self) -> i32 {
        unsafe { sys::dp_tensor_dtype(self.raw) }
    }
    /// The element type (None for a dtype newer than this binding).
    pub fn dtype(&self) -> Option<DType> {
        DType::from_raw(self.dtype_raw())
    }
    pub fn ndim(&self) -> usize {
        unsafe { sys::dp_tensor_ndim(self.raw) }
    }
    /// The dimensions; empty for a scalar. Valid for the tensor's lifetime.
    pub fn dims(&self) -> &[i64] {
        let n = self.ndim();
        let p = unsafe { sys::dp_tensor_dims(self.raw) };
        if n == 0 || p.is_null() {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts(p, n) }
        }
    }
    pub fn numel(&self) -> i64 {
        unsafe { sys::dp_tensor_numel(self.raw) }
    }
    pub fn nbytes(&self) -> usize {
        unsafe { sys::dp_tensor_nbytes(self.raw) }
    }
    /// The element bytes, read-only, valid for the tensor's lifetime.
    pub fn bytes(&self) -> &[u8] {
        let n = self.nbytes();
        let p = unsafe { sys::dp_tensor_data(self.raw) } as *const u8;
        if n == 0 || p.is_null() {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts(p, n) }
        }
    }
    /// The elements as `&[T]`; a Dtype error when T is not the tensor's type.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        if self.dtype_raw() != T::DTYPE.value() {
            return Err(Error::new(
                Code::Dtype,
                format!("tensor holds {}, not {}", dtype_name(self.dtype_raw()), T::DTYPE),
            ));
        }
        let b = self.bytes();
        if b.is_empty() {
            return Ok(&[]);
        }
        if (b.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
            return Err(Error::new(Code::InvalidArgument, "tensor data is not aligned for its element type"));
        }
        Ok(unsafe { std::slice::from_raw_parts(b.as_ptr() as *const T, b.len() / std::mem::size_of::<T>()) })
    }
    /// Copies the element bytes into `dst`, which must be exactly nbytes long
    /// (dp_tensor_copy_to).
    pub fn copy_to(&self, dst: &mut [u8]) -> Result<()> {
        check(unsafe { sys::dp_tensor_copy_to(self.raw, dst.as_mut_ptr() as *mut c_void, dst.len()) })
    }
    /// A copy of the elements as a Vec<T> (dtype checked).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype_raw() != T::DTYPE.value() {
            return Err(Error::new(Code::Dtype, format!("tensor holds {}, not {}", dtype_name(self.dtype_raw()), T::DTYPE)));
        }
        let n = self.nbytes() / std::mem::size_of::<T>();
        let mut v: Vec<T> = Vec::with_capacity(n);
        check(unsafe { sys::dp_tensor_copy_to(self.raw, v.as_mut_ptr() as *mut c_void, n * std::mem::size_of::<T>()) })?;
        unsafe { v.set_len(n) };
        Ok(v)
    }
}

impl<'a> Drop for Tensor<'a> {
    fn drop(&mut self) {
        unsafe { sys::dp_tensor_free(self.raw) }
    }
}

impl<'a> std::fmt::Debug for Tensor<'a> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor(dtype={}, dims={:?})", self.dtype_raw(), self.dims())
    }
}
