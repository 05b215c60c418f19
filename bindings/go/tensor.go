package dp

/*
#include <stdlib.h>
#include <dp/dp.h>

// The deleter of tensors made from HostMemory: the memory came from malloc.
static void dp_go_free_deleter(void* data, void* user_data) { (void)user_data; free(data); }
static dp_deleter dp_go_free_deleter_ptr(void) { return dp_go_free_deleter; }
*/
import "C"

import (
	"reflect"
	"runtime"
	"sync"
	"unsafe"
)

// DType is a tensor element type (DP_DTYPE_*).
type DType int32

const (
	Float32  DType = C.DP_DTYPE_FLOAT32
	Float16  DType = C.DP_DTYPE_FLOAT16
	BFloat16 DType = C.DP_DTYPE_BFLOAT16
	Float64  DType = C.DP_DTYPE_FLOAT64
	Int32    DType = C.DP_DTYPE_INT32
	Int64    DType = C.DP_DTYPE_INT64
	Uint8    DType = C.DP_DTYPE_UINT8
	Bool     DType = C.DP_DTYPE_BOOL // one byte per element, 0 or 1
)

// Size is the element size in bytes (0 for unknown dtypes).
func (d DType) Size() int { return int(C.dp_dtype_size(C.int32_t(d))) }

// String is the dtype's name as dp's messages spell it ("float32", "int64";
// "dtype N" for a value this binding does not know).
func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	case Float64:
		return "float64"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Uint8:
		return "uint8"
	case Bool:
		return "bool"
	}
	return "dtype " + itoa(int(d))
}

// Element is a Go type with a dp dtype.
type Element interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8
}

// DTypeOf is the dtype of element type T, named types included (by their
// underlying kind: a `type Celsius float32` is Float32).
func DTypeOf[T Element]() DType {
	switch reflect.TypeOf(*new(T)).Kind() {
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Int32:
		return Int32
	case reflect.Int64:
		return Int64
	default: // the only kind left in Element
		return Uint8
	}
}

// Tensor is an immutable, dense, row-major host tensor. Its shape, dtype and
// contents never change, so every method may be called from any number of
// goroutines at once; Close may be called at any time (a call in progress
// finishes first).
type Tensor struct {
	r ref[C.dp_tensor]
}

func newTensor(p *C.dp_tensor) *Tensor {
	t := &Tensor{}
	t.r.set(p, "Tensor", func(p *C.dp_tensor) { C.dp_tensor_free(p) })
	runtime.SetFinalizer(t, func(t *Tensor) { t.r.close() })
	return t
}

func (t *Tensor) get() (*C.dp_tensor, func(), error) {
	if t == nil {
		return nil, noop, nil // NULL: dp reports INVALID_ARGUMENT
	}
	p, err := t.r.acquire()
	if err != nil {
		return nil, nil, err
	}
	return p, t.r.release, nil
}

// Close releases the tensor. Blobs fed from it keep its data. Idempotent.
func (t *Tensor) Close() {
	if t != nil {
		t.r.close()
	}
}

// NewTensor creates a tensor holding a copy of data, whose length must be
// the element count times the element size (ErrInvalidArgument otherwise).
// A nil slice is an empty one, as everywhere in Go: it holds the elements of
// a tensor with none (a dim of 0), and is a size mismatch for any other; a
// zero-filled tensor is NewZeroTensor's. dims nil or empty is a scalar. data
// is only read during the call.
func NewTensor(dtype DType, dims []int64, data []byte) (*Tensor, error) {
	// Never NULL: dp_tensor_create reads NULL data as "zero-filled".
	var empty [1]byte
	p := unsafe.Pointer(&empty[0])
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	return createTensor(dtype, dims, p, len(data))
}

// NewZeroTensor creates a zero-filled tensor (dp_tensor_create with NULL
// data). dims nil or empty is a scalar.
func NewZeroTensor(dtype DType, dims []int64) (*Tensor, error) {
	return createTensor(dtype, dims, nil, 0)
}

func createTensor(dtype DType, dims []int64, data unsafe.Pointer, nbytes int) (*Tensor, error) {
	var out *C.dp_tensor
	if err := statusErr(C.dp_tensor_create(C.int32_t(dtype), cdims(dims), C.size_t(len(dims)), data,
		C.size_t(nbytes), &out)); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// NewTensorOf creates a tensor of T's dtype holding a copy of data (as
// NewTensor: nil and empty are alike, a size mismatch unless the tensor has
// no elements). data is only read during the call.
func NewTensorOf[T Element](dims []int64, data []T) (*Tensor, error) {
	var b []byte
	if len(data) > 0 {
		var z T
		b = unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*int(unsafe.Sizeof(z)))
	}
	return NewTensor(DTypeOf[T](), dims, b)
}

// TensorFromIDXFile reads an IDX file (MNIST format, gzip or not).
func TensorFromIDXFile(path string) (*Tensor, error) {
	cp, err := cString("dp.TensorFromIDXFile: path", path)
	if err != nil {
		return nil, err
	}
	defer freeStr(cp)
	var out *C.dp_tensor
	if err := statusErr(C.dp_tensor_from_idx_file(cp, &out)); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// DType is the element type (0 when closed).
func (t *Tensor) DType() DType {
	p, done, err := t.get()
	if err != nil {
		return 0
	}
	defer done()
	return DType(C.dp_tensor_dtype(p))
}

// Dims is a copy of the dimensions (empty for scalars; nil when closed).
func (t *Tensor) Dims() []int64 {
	p, done, err := t.get()
	if err != nil {
		return nil
	}
	defer done()
	return goDims(C.dp_tensor_dims(p), int(C.dp_tensor_ndim(p)))
}

// NumElements is the element count (0 when closed).
func (t *Tensor) NumElements() int64 {
	p, done, err := t.get()
	if err != nil {
		return 0
	}
	defer done()
	return int64(C.dp_tensor_numel(p))
}

// NumBytes is the data size in bytes (0 when closed).
func (t *Tensor) NumBytes() int {
	p, done, err := t.get()
	if err != nil {
		return 0
	}
	defer done()
	return int(C.dp_tensor_nbytes(p))
}

// Bytes is a Go copy of the elements.
func (t *Tensor) Bytes() ([]byte, error) {
	p, done, err := t.get()
	if err != nil {
		return nil, err
	}
	defer done()
	if p == nil {
		return nil, argErr("dp.Tensor.Bytes: tensor is nil")
	}
	n := C.dp_tensor_nbytes(p)
	if n == 0 {
		return []byte{}, nil
	}
	return C.GoBytes(C.dp_tensor_data(p), C.int(n)), nil
}

// CopyTo copies the elements into dst, which must be exactly NumBytes long.
// dst is only written during the call.
func (t *Tensor) CopyTo(dst []byte) error {
	p, done, err := t.get()
	if err != nil {
		return err
	}
	defer done()
	var d unsafe.Pointer
	if len(dst) > 0 {
		d = unsafe.Pointer(&dst[0])
	}
	return statusErr(C.dp_tensor_copy_to(p, d, C.size_t(len(dst))))
}

// TensorValues copies a tensor's elements into a new []T; ErrDType when the
// tensor's dtype is not T's.
func TensorValues[T Element](t *Tensor) ([]T, error) {
	if dt := t.DType(); dt != DTypeOf[T]() {
		if _, _, err := t.get(); err != nil {
			return nil, err
		}
		return nil, &Error{code: CodeDType, msg: "tensor holds " + dt.String() + ", not " + DTypeOf[T]().String()}
	}
	var z T
	n := t.NumBytes() / int(unsafe.Sizeof(z))
	out := make([]T, n)
	var b []byte
	if n > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), n*int(unsafe.Sizeof(z)))
	}
	if err := t.CopyTo(b); err != nil {
		return nil, err
	}
	return out, nil
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

// HostMemory is C memory (malloc) that dp may keep: the only memory that
// NewTensorBorrowed and NewTensorOwned accept, since cgo forbids C from
// keeping Go pointers. Fill it through Bytes (a view of the C memory, valid
// until Free or a transfer). Not for concurrent writers.
type HostMemory struct {
	mu sync.Mutex
	p  unsafe.Pointer
	n  int
}

// AllocHostMemory allocates n bytes of zeroed C memory (malloc'ed, so
// aligned for every dtype).
func AllocHostMemory(n int) *HostMemory {
	sz := n
	if sz == 0 {
		sz = 1
	}
	m := &HostMemory{p: C.calloc(C.size_t(sz), 1), n: n}
	runtime.SetFinalizer(m, func(m *HostMemory) { m.Free() })
	return m
}

// Bytes is a view of the C memory (nil after Free or a transfer). Do not
// keep it past Free, and do not change it while a borrowed tensor or blob
// uses it.
func (m *HostMemory) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(m.p), m.n)
}

// Len is the size in bytes.
func (m *HostMemory) Len() int { return m.n }

// Free releases the memory; idempotent. The caller must make sure no
// borrowed tensor or blob still uses it (see NewTensorBorrowed). A finalizer
// frees it too once unreachable, so keep the HostMemory reachable (e.g.
// runtime.KeepAlive) while dp borrows it.
func (m *HostMemory) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.p != nil {
		C.free(m.p)
		m.p = nil
	}
}

// NewTensorBorrowed creates a tensor over mem without copying. dp only
// reads it. mem must stay allocated (not Freed, and reachable) and unchanged
// until the tensor and every blob fed from it are gone.
func NewTensorBorrowed(dtype DType, dims []int64, mem *HostMemory) (*Tensor, error) {
	if mem == nil {
		return nil, argErr("dp.NewTensorBorrowed: mem is nil")
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.p == nil {
		return nil, closedErr("HostMemory")
	}
	var out *C.dp_tensor
	if err := statusErr(C.dp_tensor_create_borrowed(C.int32_t(dtype), cdims(dims), C.size_t(len(dims)), mem.p,
		C.size_t(mem.n), &out)); err != nil {
		return nil, err
	}
	return newTensor(out), nil
}

// NewTensorOwned hands mem to dp without copying: on success mem is emptied
// (Bytes returns nil, Free does nothing) and dp frees the memory once the
// last tensor or blob using it is gone, from whichever thread drops it. On
// failure mem stays the caller's.
func NewTensorOwned(dtype DType, dims []int64, mem *HostMemory) (*Tensor, error) {
	if mem == nil {
		return nil, argErr("dp.NewTensorOwned: mem is nil")
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if mem.p == nil {
		return nil, closedErr("HostMemory")
	}
	var out *C.dp_tensor
	if err := statusErr(C.dp_tensor_create_owned(C.int32_t(dtype), cdims(dims), C.size_t(len(dims)), mem.p,
		C.size_t(mem.n), C.dp_go_free_deleter_ptr(), nil, &out)); err != nil {
		return nil, err
	}
	mem.p = nil
	return newTensor(out), nil
}
