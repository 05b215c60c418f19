// Package dp is the Go binding of dp, the embeddable data-parallel
// deep-learning runtime (libdp, C API include/dp/dp.h).
//
// Errors. Every failing call returns an error of type *Error carrying dp's
// stable code and message; compare with errors.Is against the sentinels
// (ErrNotFound, ...) or unwrap with errors.As. The C status is freed before
// the call returns.
//
// Handles. Every object that owns a dp handle (Tensor, Workspace, NetDef,
// Net, Model, ParallelModel, CheckpointJob, Loader, HostMemory) has an
// idempotent Close that releases it; a finalizer does the same for handles
// that are forgotten, but relying on it keeps C memory alive until the garbage
// collector runs. Close never blocks: when another goroutine is inside a
// call on the handle, the release happens as that call returns. Any call on
// a closed handle returns an error matching ErrClosed (getters without an
// error result return zero values). A nil handle is passed to dp as NULL,
// which dp reports as ErrInvalidArgument.
//
// Memory. cgo forbids C from keeping Go pointers after a call returns, so:
// Go slices are only ever borrowed for the duration of one call (tensor
// creation copies them; CopyTo writes into them); memory that dp keeps
// (NewTensorBorrowed, NewTensorOwned) must be C memory, allocated with
// AllocHostMemory. Strings returned by dp are copied into Go strings.
//
// Threads. dp has no thread-local state, so every function may be called
// from any goroutine. Per-type rules (which calls may overlap) are given on
// each type; they follow the header's.
package dp

/*
#cgo pkg-config: dp
#include <dp/dp.h>
*/
import "C"

// Version numbers of the header this binding was written against.
const (
	HeaderVersionMajor  = C.DP_VERSION_MAJOR
	HeaderVersionMinor  = C.DP_VERSION_MINOR
	HeaderVersionPatch  = C.DP_VERSION_PATCH
	HeaderVersionNumber = C.DP_VERSION_NUMBER
	ABIVersion          = C.DP_ABI_VERSION
)

// Version is the loaded library's version ("0.6.0").
func Version() string { return C.GoString(C.dp_version()) }

// VersionNumber is the loaded library's DP_VERSION_NUMBER; compare it with
// HeaderVersionNumber to detect a mismatched library.
func VersionNumber() uint32 { return uint32(C.dp_version_number()) }

// DeviceType selects CPU or CUDA devices.
type DeviceType int32

const (
	DeviceCPU  DeviceType = C.DP_DEVICE_CPU
	DeviceCUDA DeviceType = C.DP_DEVICE_CUDA
	// DeviceNone: a device field that is not set.
	DeviceNone DeviceType = C.DP_DEVICE_NONE
)

// DeviceCount is the number of devices of a type (CPU: 1; CUDA: 0 when none
// is usable, see GetBuildInfo). The first CUDA count loads dp's CUDA module.
func DeviceCount(t DeviceType) (int, error) {
	var n C.int32_t
	if err := statusErr(C.dp_device_count(C.int32_t(t), &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// MemoryStats is one device's memory as dp uses it (dp_memory_stats), in
// bytes and counts since the process started. On the CPU (every cpu:N is
// the host): the memory dp allocates itself, with Reserved equal to
// Allocated and the raw counts its host allocations and frees. On a GPU:
// its caching allocator's blocks handed out (Allocated, rounded sizes),
// segments held (Reserved) and cudaMalloc / cudaFree calls (RawAllocs,
// RawFrees). Since 0.6.
type MemoryStats struct {
	Allocated uint64 // bytes dp's storage holds now
	Peak      uint64 // the most allocated at once since the last ResetPeakMemory
	Reserved  uint64 // bytes dp holds from the device, its cache included
	RawAllocs uint64 // allocations from the device itself (GPU: cudaMalloc calls)
	RawFrees  uint64 // frees to the device itself (GPU: cudaFree calls)
}

// DeviceMemoryStats reads the memory statistics of device (t, id), e.g.
// (DeviceCUDA, 0) for cuda:0. ErrInvalidArgument for an unknown type or a
// negative id, ErrUnavailable for a CUDA device DeviceCount does not report.
// Any goroutine. Since 0.6.
func DeviceMemoryStats(t DeviceType, id int) (MemoryStats, error) {
	if id < -1<<31 || id > 1<<31-1 {
		return MemoryStats{}, argErr("dp.DeviceMemoryStats: device id %d does not fit an int32", id)
	}
	var c C.dp_memory_stats
	c.struct_size = C.uint32_t(C.sizeof_dp_memory_stats)
	if err := statusErr(C.dp_device_memory_stats(C.int32_t(t), C.int32_t(id), &c)); err != nil {
		return MemoryStats{}, err
	}
	return MemoryStats{
		Allocated: uint64(c.allocated),
		Peak:      uint64(c.peak),
		Reserved:  uint64(c.reserved),
		RawAllocs: uint64(c.raw_allocs),
		RawFrees:  uint64(c.raw_frees),
	}, nil
}

// ResetPeakMemory makes device (t, id)'s peak its allocated bytes now (the
// device's, process wide), so that a stretch of work's peak can be read
// afterwards. The errors of DeviceMemoryStats. Any goroutine. Since 0.6.
func ResetPeakMemory(t DeviceType, id int) error {
	if id < -1<<31 || id > 1<<31-1 {
		return argErr("dp.ResetPeakMemory: device id %d does not fit an int32", id)
	}
	return statusErr(C.dp_device_reset_peak_memory(C.int32_t(t), C.int32_t(id)))
}

// SetCPUThreads caps the threads dp's compute uses at maxThreads (0: no
// cap, the default), process wide: nets created afterwards size their
// worker pools from it and ops started afterwards split their work within
// it. ErrInvalidArgument for a negative value. Any goroutine. Since 0.5.
func SetCPUThreads(maxThreads int) error {
	if maxThreads < -1<<31 || maxThreads > 1<<31-1 {
		return argErr("dp.SetCPUThreads: %d does not fit an int32", maxThreads)
	}
	return statusErr(C.dp_set_cpu_threads(C.int32_t(maxThreads)))
}

// CPUThreads is the number of threads dp's compute uses now: the usable
// CPUs (affinity mask and cgroup quota) capped by SetCPUThreads; at least
// 1. Since 0.5.
func CPUThreads() int { return int(C.dp_cpu_threads()) }

// CUDAState says whether CUDA devices are there, and if not why
// (dp_build_info.cuda_state). Since 0.6.
type CUDAState int32

const (
	CUDAStateNotBuilt       CUDAState = C.DP_CUDA_STATE_NOT_BUILT        // dp was built without CUDA
	CUDAStateAvailable      CUDAState = C.DP_CUDA_STATE_AVAILABLE        // at least one CUDA device
	CUDAStateModuleNotFound CUDAState = C.DP_CUDA_STATE_MODULE_NOT_FOUND // libdp_cuda.so is not in dp/ beside libdp
	CUDAStateRuntimeMissing CUDAState = C.DP_CUDA_STATE_RUNTIME_MISSING  // a CUDA library the module needs is missing
	CUDAStateModuleMismatch CUDAState = C.DP_CUDA_STATE_MODULE_MISMATCH  // the module is another build's
	CUDAStateNoDriver       CUDAState = C.DP_CUDA_STATE_NO_DRIVER        // no CUDA driver (or too old)
	CUDAStateNoDevice       CUDAState = C.DP_CUDA_STATE_NO_DEVICE        // a driver but no GPU visible
)

// BuildInfo says how the loaded library was built and what it found of
// CUDA (see dp_build_info). Reading it loads dp's CUDA module in a CUDA
// build.
type BuildInfo struct {
	Version            string
	CUDA               bool
	CUDARuntimeVersion int32
	CUDADriverVersion  int32
	CUBLASVersion      int32
	NCCLVersion        int32
	CUDAArchs          string
	BLAS               string
	BLASConfig         string
	Compiler           string
	BuildType          string
	// Since 0.6: why CUDA devices are there or not, the runtime version the
	// CUDA module loaded (0: none), a line saying what was found, and the
	// module's path ("" without CUDA).
	CUDAState                CUDAState
	CUDALoadedRuntimeVersion int32
	CUDAStateDetail          string
	CUDAModule               string
	// Since 0.6: whether dp was built with ONNX import and export
	// (ModelFromONNX and the rest; without it they return ErrUnimplemented),
	// and the ONNX library's version ("1.12.0"; "" without ONNX).
	ONNX        bool
	ONNXVersion string
}

// GetBuildInfo reads the build information of the loaded library.
func GetBuildInfo() (BuildInfo, error) {
	var c C.dp_build_info
	c.struct_size = C.uint32_t(C.sizeof_dp_build_info)
	if err := statusErr(C.dp_build_info_get(&c)); err != nil {
		return BuildInfo{}, err
	}
	return BuildInfo{
		Version:            C.GoString(c.version),
		CUDA:               c.cuda != 0,
		CUDARuntimeVersion: int32(c.cuda_runtime_version),
		CUDADriverVersion:  int32(c.cuda_driver_version),
		CUBLASVersion:      int32(c.cublas_version),
		NCCLVersion:        int32(c.nccl_version),
		CUDAArchs:          C.GoString(c.cuda_archs),
		BLAS:               C.GoString(c.blas),
		BLASConfig:         C.GoString(c.blas_config),
		Compiler:           C.GoString(c.compiler),
		BuildType:          C.GoString(c.build_type),

		CUDAState:                CUDAState(c.cuda_state),
		CUDALoadedRuntimeVersion: int32(c.cuda_loaded_runtime_version),
		CUDAStateDetail:          C.GoString(c.cuda_state_detail),
		CUDAModule:               C.GoString(c.cuda_module),

		ONNX:        c.onnx != 0,
		ONNXVersion: C.GoString(c.onnx_version),
	}, nil
}
