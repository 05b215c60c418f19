package dp

/*
#include <dp/dp.h>
*/
import "C"

import (
	"errors"
	"fmt"
)

// Code is one of dp's stable error codes (DP_ERR_*).
type Code int32

const (
	CodeOK                 Code = C.DP_OK
	CodeInvalidArgument    Code = C.DP_ERR_INVALID_ARGUMENT
	CodeNotFound           Code = C.DP_ERR_NOT_FOUND
	CodeAlreadyExists      Code = C.DP_ERR_ALREADY_EXISTS
	CodeOutOfRange         Code = C.DP_ERR_OUT_OF_RANGE
	CodeUnimplemented      Code = C.DP_ERR_UNIMPLEMENTED
	CodeInternal           Code = C.DP_ERR_INTERNAL
	CodeUnavailable        Code = C.DP_ERR_UNAVAILABLE
	CodeCancelled          Code = C.DP_ERR_CANCELLED
	CodeTimeout            Code = C.DP_ERR_TIMEOUT
	CodeDataLoss           Code = C.DP_ERR_DATA_LOSS
	CodeOutOfMemory        Code = C.DP_ERR_OUT_OF_MEMORY
	CodeFailedPrecondition Code = C.DP_ERR_FAILED_PRECONDITION
	CodeIO                 Code = C.DP_ERR_IO
	CodeParse              Code = C.DP_ERR_PARSE
	CodeInvalidNet         Code = C.DP_ERR_INVALID_NET
	CodeShape              Code = C.DP_ERR_SHAPE
	CodeDType              Code = C.DP_ERR_DTYPE
)

// String is dp's name of the code ("NOT_FOUND"; "UNKNOWN" if unknown).
func (c Code) String() string { return C.GoString(C.dp_status_code_name(C.int32_t(c))) }

// Error is a failed dp call: a stable code and a message naming what failed.
// Sentinels (ErrNotFound, ...) match any *Error of their code with errors.Is.
type Error struct {
	code   Code
	msg    string
	closed bool // use of a closed handle (matches ErrClosed)
}

// Code is the stable error code.
func (e *Error) Code() Code { return e.code }

// Message is dp's message (without the code).
func (e *Error) Message() string { return e.msg }

func (e *Error) Error() string {
	if e.msg == "" {
		return "dp: " + e.code.String()
	}
	return "dp: " + e.code.String() + ": " + e.msg
}

// Is makes errors.Is(err, ErrX) true for every error of code X, and
// errors.Is(err, ErrClosed) true for uses of closed handles.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t.msg != "" {
		return false
	}
	if t.closed {
		return e.closed
	}
	return t.code == e.code
}

func sentinel(c Code) *Error { return &Error{code: c} }

// Sentinels, one per code, for errors.Is.
var (
	ErrInvalidArgument    = sentinel(CodeInvalidArgument)
	ErrNotFound           = sentinel(CodeNotFound)
	ErrAlreadyExists      = sentinel(CodeAlreadyExists)
	ErrOutOfRange         = sentinel(CodeOutOfRange)
	ErrUnimplemented      = sentinel(CodeUnimplemented)
	ErrInternal           = sentinel(CodeInternal)
	ErrUnavailable        = sentinel(CodeUnavailable)
	ErrCancelled          = sentinel(CodeCancelled)
	ErrTimeout            = sentinel(CodeTimeout)
	ErrDataLoss           = sentinel(CodeDataLoss)
	ErrOutOfMemory        = sentinel(CodeOutOfMemory)
	ErrFailedPrecondition = sentinel(CodeFailedPrecondition)
	ErrIO                 = sentinel(CodeIO)
	ErrParse              = sentinel(CodeParse)
	ErrInvalidNet         = sentinel(CodeInvalidNet)
	ErrShape              = sentinel(CodeShape)
	ErrDType              = sentinel(CodeDType)
	// ErrClosed: a handle used after Close. Such errors have code
	// CodeInvalidArgument too (a closed handle is the binding's NULL).
	ErrClosed = &Error{code: CodeInvalidArgument, closed: true}
)

// statusErr turns a dp_status into an error (nil for NULL) and frees it.
func statusErr(s *C.dp_status) error {
	if s == nil {
		return nil
	}
	e := &Error{code: Code(C.dp_status_code(s)), msg: C.GoString(C.dp_status_message(s))}
	C.dp_status_free(s)
	return e
}

func closedErr(kind string) error {
	return &Error{code: CodeInvalidArgument, msg: fmt.Sprintf("dp.%s used after Close", kind), closed: true}
}

func argErr(format string, a ...any) error {
	return &Error{code: CodeInvalidArgument, msg: fmt.Sprintf(format, a...)}
}

// IsCode reports whether err is a dp error with code c.
func IsCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.code == c
}
