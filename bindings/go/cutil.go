package dp

/*
#include <stdlib.h>
#include <dp/dp.h>
*/
import "C"

import (
	"strings"
	"unsafe"
)

// goStrings copies a dp_string_list into Go strings and frees it.
func goStrings(l *C.dp_string_list) []string {
	if l == nil {
		return nil
	}
	n := int(C.dp_string_list_size(l))
	out := make([]string, n)
	for i := 0; i < n; i++ {
		out[i] = C.GoString(C.dp_string_list_get(l, C.size_t(i)))
	}
	C.dp_string_list_free(l)
	return out
}

// goBytes copies a dp_buffer into Go memory and frees it.
func goBytes(b *C.dp_buffer) []byte {
	if b == nil {
		return nil
	}
	out := C.GoBytes(C.dp_buffer_data(b), C.int(C.dp_buffer_size(b)))
	C.dp_buffer_free(b)
	return out
}

// cStringArray is a C array of C strings (C memory: dp may read it from
// option structs, which must not hold Go pointers).
type cStringArray struct {
	ptr **C.char
	n   int
}

// newCStringArray copies s to C (see cString: `what` names the argument).
func newCStringArray(what string, s []string) (cStringArray, error) {
	if len(s) == 0 {
		return cStringArray{}, nil
	}
	for _, v := range s {
		if err := checkNoNUL(what, v); err != nil {
			return cStringArray{}, err
		}
	}
	arr := (**C.char)(C.malloc(C.size_t(len(s)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	view := unsafe.Slice(arr, len(s))
	for i, v := range s {
		view[i] = C.CString(v)
	}
	return cStringArray{arr, len(s)}, nil
}

func (a cStringArray) free() {
	if a.ptr == nil {
		return
	}
	for _, p := range unsafe.Slice(a.ptr, a.n) {
		C.free(unsafe.Pointer(p))
	}
	C.free(unsafe.Pointer(a.ptr))
}

// cString is a C copy of s (free it with freeStr). A C string ends at its
// first NUL, so a Go string holding one would reach dp as a shorter name or
// path (another blob, another file): it is refused with an
// ErrInvalidArgument naming the argument (`what`, e.g. "dp.Workspace.Feed:
// blob name"), as the Rust binding refuses it. Every string the binding
// passes to C goes through here or newCStringArray.
func cString(what, s string) (*C.char, error) {
	if err := checkNoNUL(what, s); err != nil {
		return nil, err
	}
	return C.CString(s), nil
}

// cStringOrNull is cString, with NULL for "" (dp's "not given").
func cStringOrNull(what, s string) (*C.char, error) {
	if s == "" {
		return nil, nil
	}
	return cString(what, s)
}

func checkNoNUL(what, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return argErr("%s contains a NUL byte: %q", what, s)
	}
	return nil
}

func freeStr(p *C.char) {
	if p != nil {
		C.free(unsafe.Pointer(p))
	}
}

// cdims points at dims (Go memory, borrowed for the call only) or is NULL.
func cdims(dims []int64) *C.int64_t {
	if len(dims) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&dims[0]))
}

func goDims(p *C.int64_t, n int) []int64 {
	out := make([]int64, n)
	if n > 0 && p != nil {
		copy(out, unsafe.Slice((*int64)(unsafe.Pointer(p)), n))
	}
	return out
}
