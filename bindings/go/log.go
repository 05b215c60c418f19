package dp

/*
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <dp/dp.h>
extern void dpGoLog(void* user_data, int32_t level, char* message);
static uintptr_t dpGoThreadID(void) { return (uintptr_t)pthread_self(); }
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"unsafe"
)

// LogLevel is a message's severity (DP_LOG_*).
type LogLevel int32

const (
	LogDebug   LogLevel = C.DP_LOG_DEBUG
	LogInfo    LogLevel = C.DP_LOG_INFO
	LogWarning LogLevel = C.DP_LOG_WARNING
	LogError   LogLevel = C.DP_LOG_ERROR
)

// LogFunc receives one message. dp calls it from any of its threads (the
// Go runtime adopts them), never concurrently with itself, while holding its
// log lock: it may call dp (what those calls log goes to stderr, the callback
// is never re-entered) but not SetLogCallback (an error), and must not block
// on goroutines that log through dp. A panic in it is recovered and the
// message dropped.
type LogFunc func(level LogLevel, message string)

var logMu sync.Mutex // serialises SetLogCallback
// The OS thread running the callback now (0: none). dp never runs the
// callback concurrently with itself, so one value is enough; it tells a call
// from within the callback (same thread) from one on another goroutine.
var logThread atomic.Uintptr
var logHandle cgo.Handle
var logSlot unsafe.Pointer // C memory holding the handle (user_data)

// SetLogCallback routes messages of minLevel and above to f, process wide;
// nil restores dp's default (stderr). Called from within the callback it
// changes nothing and returns an ErrFailedPrecondition error (dp ignores
// such a change, and the running callback's state must stay alive).
func SetLogCallback(f LogFunc, minLevel LogLevel) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if logThread.Load() == uintptr(C.dpGoThreadID()) {
		return &Error{code: CodeFailedPrecondition, msg: "dp.SetLogCallback called from within the log callback"}
	}
	logMu.Lock()
	defer logMu.Unlock()
	oldHandle, oldSlot := logHandle, logSlot
	if f == nil {
		C.dp_log_set_callback(nil, nil, C.int32_t(minLevel))
		logHandle, logSlot = 0, nil
	} else {
		// The handle travels in C memory: user_data must not be a Go pointer,
		// and a uintptr cast to a pointer would upset go vet.
		h := cgo.NewHandle(f)
		slot := C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0))))
		*(*C.uintptr_t)(slot) = C.uintptr_t(h)
		C.dp_log_set_callback(C.dp_log_callback(C.dpGoLog), slot, C.int32_t(minLevel))
		logHandle, logSlot = h, slot
	}
	// dp calls the sink under the lock that dp_log_set_callback takes, so no
	// call can still be using the old user_data now.
	if oldSlot != nil {
		C.free(oldSlot)
		oldHandle.Delete()
	}
	return nil
}

//export dpGoLog
func dpGoLog(userData unsafe.Pointer, level C.int32_t, message *C.char) {
	logThread.Store(uintptr(C.dpGoThreadID()))
	defer logThread.Store(0)
	defer func() { _ = recover() }()
	if userData == nil {
		return
	}
	h := cgo.Handle(*(*C.uintptr_t)(userData))
	if f, ok := h.Value().(LogFunc); ok {
		f(LogLevel(level), C.GoString(message))
	}
}
