/*
 * dp — embeddable data-parallel deep-learning runtime. Public C API.
 *
 * Conventions (they hold for every function below unless it says otherwise):
 *
 * Errors. A fallible function returns dp_status*: NULL on success, otherwise
 *   an object owned by the caller, to be released with dp_status_free. Its
 *   code (DP_ERR_*) is stable across releases; its message is UTF-8 and names
 *   the op, blob or file concerned. There is no thread-local "last error".
 *   No C++ exception, abort or assert crosses this boundary: bad input gives
 *   a status. If a call fails, its out-parameters are left untouched.
 *   A function's check of its own arguments fails with a message that starts
 *   with the function's name and names the parameter or field as this header
 *   spells it ("dp_loader_create: options->keep_last must be 0 ..."); errors
 *   found further in (running a net, reading a file) name the net, op, blob
 *   or file instead. Messages are for people and may change; codes are for
 *   programs. tests/capi/test_status_audit.c checks every code documented
 *   here.
 *
 * Handles. All objects are opaque. Release functions (dp_*_free) return void
 *   and accept NULL. Passing a freed handle is undefined behaviour (as with
 *   free()); passing NULL where a handle is required gives
 *   DP_ERR_INVALID_ARGUMENT.
 *
 * Memory. Memory the library returns is freed by the library (dp_*_free).
 *   Tensor data is copied in, borrowed, or transferred with a deleter: see
 *   dp_tensor_create*. Strings are UTF-8 and NUL-terminated unless a length
 *   is passed. A pointer with a length may be NULL when the length is 0 (no
 *   bytes); NULL with a nonzero length is DP_ERR_INVALID_ARGUMENT. The
 *   host memory dp allocates (tensors, blobs, op scratch; not memory the
 *   caller supplies) is bounded, all of it together, by the memory the
 *   process may use: the tightest memory limit of its cgroups
 *   (cgroup v2 memory.max, v1 memory.limit_in_bytes, of its own cgroup and
 *   each ancestor: a container's limit), else physical memory, read once
 *   when dp first allocates. An allocation that would pass it fails with
 *   DP_ERR_OUT_OF_MEMORY naming the limit and where it comes from, instead
 *   of the kernel killing the process. The bound counts dp's allocations
 *   only: memory the rest of the process uses can still bring it to the
 *   limit first. dp_workspace_options.max_bytes lowers it per workspace.
 *   (Since 0.6.)
 *
 * Threads. Unless a function says otherwise it may be called from any thread,
 *   and concurrently on different handles. Per-object rules are given below.
 *
 * Bindings. bindings/{go,rust,java} wrap every function declared here; a
 *   change that adds to this header adds their wrappers in the same change
 *   (each binding's tests parse this file and fail on a function it lacks).
 *
 * Names. Every function is dp_<object>_<verb>[_<detail>], where <object> is
 *   the handle type or subsystem it acts on (status, log, device, dtype,
 *   tensor, workspace, string_list, buffer, netdef, opschema, net, model,
 *   parallel_model, ...); accessors name the property instead of a verb
 *   (dp_tensor_dims). Constructors are dp_<object>_create[_<detail>] or
 *   dp_<object>_from_<source>; destructors dp_<object>_free. The library-wide
 *   queries dp_version and dp_version_number are the only exceptions.
 *   Constants are DP_<GROUP>_<NAME>, types dp_<object>.
 *
 * Options structs. Each begins with uint32_t struct_size, the size of the
 *   caller's struct, and only ever grows at the end (a new field never goes
 *   into the tail padding of the struct it extends). Zero means default: a
 *   struct whose bytes are all zero except struct_size asks for every
 *   default, so every field's default is 0 (flags that default to on are
 *   named for turning them off: no_fuse; enums have their default as 0).
 *   Fill one in any of three equivalent ways:
 *     dp_net_options o = DP_NET_OPTIONS_INIT;          (C)
 *     dp_net_options_init(&o, sizeof o);               (any language)
 *     memset(&o, 0, sizeof o); o.struct_size = sizeof o;
 *   The library reads only the fields that lie wholly within struct_size;
 *   the others take their defaults, so a caller compiled against an older
 *   header keeps working with a newer library. A struct_size larger than
 *   the library knows is accepted when the extra bytes are all zero (the
 *   newer fields' defaults), and gives DP_ERR_UNIMPLEMENTED otherwise.
 *   A struct_size too small for a struct's leading fields (documented per
 *   struct) gives DP_ERR_INVALID_ARGUMENT. Options are only read during the
 *   call; the library keeps no pointer into them.
 *
 * Versions. Everything declared in 0.1.0 is the baseline; a declaration
 *   (function, field, constant) added later says "Since 0.N." in its
 *   comment.
 */
#ifndef DP_DP_H_
#define DP_DP_H_

#include <stddef.h>
#include <stdint.h>

/* DP_API marks the exported functions. The library's own sources are built
 * with DP_BUILDING_LIBRARY defined (capi/meson.build): on Windows they export
 * (dllexport) and every consumer imports (dllimport); on ELF and Mach-O the
 * library is built with hidden visibility and DP_API makes the API
 * visible. */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(DP_BUILDING_LIBRARY)
#define DP_API __declspec(dllexport)
#else
#define DP_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define DP_API __attribute__((visibility("default")))
#else
#define DP_API
#endif

/* The body of the *_INIT macros: struct_size set, every other field zero
 * (the defaults). C gets a designated initializer, which -Wextra's
 * -Wmissing-field-initializers accepts; in C++ prefer `T o{};
 * o.struct_size = sizeof o;` or the dp_*_options_init functions when
 * compiling with -Wextra. */
#if defined(__cplusplus)
#define DP_OPTIONS_INIT_(T) {(uint32_t)sizeof(T)}
#else
#define DP_OPTIONS_INIT_(T) {.struct_size = (uint32_t)sizeof(T)}
#endif

#if defined(__GNUC__)
#define DP_MUST_USE __attribute__((warn_unused_result))
#else
#define DP_MUST_USE
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

/* Version of the header the caller was compiled against. */
#define DP_VERSION_MAJOR 0
#define DP_VERSION_MINOR 6
#define DP_VERSION_PATCH 0
#define DP_VERSION_NUMBER (DP_VERSION_MAJOR * 10000 + DP_VERSION_MINOR * 100 + DP_VERSION_PATCH)
/* The ABI major version; the shared library is libdp.so.<DP_ABI_VERSION>. */
#define DP_ABI_VERSION 0

/* Version of the loaded library: "0.1.0". Static string, never freed. */
DP_API const char* dp_version(void);
/* DP_VERSION_NUMBER of the loaded library. Compare with the header's to
 * detect a mismatched library at load time. */
DP_API uint32_t dp_version_number(void);

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

/* Stable error codes. New codes may be added; existing ones never change. */
enum {
  DP_OK = 0,
  DP_ERR_INVALID_ARGUMENT = 1,    /* bad argument: NULL handle, bad value */
  DP_ERR_NOT_FOUND = 2,           /* missing blob, file, op kernel input */
  DP_ERR_ALREADY_EXISTS = 3,
  DP_ERR_OUT_OF_RANGE = 4,
  DP_ERR_UNIMPLEMENTED = 5,
  DP_ERR_INTERNAL = 6,            /* a bug in dp: please report it */
  DP_ERR_UNAVAILABLE = 7,         /* device or feature not present */
  DP_ERR_CANCELLED = 8,
  DP_ERR_TIMEOUT = 9,
  DP_ERR_DATA_LOSS = 10,          /* corrupted or truncated data (a gzip stream's CRC, an IDX file
                                     shorter than its header says) */
  DP_ERR_OUT_OF_MEMORY = 11,      /* the device, a workspace's max_bytes or the process's memory limit
                                     (see "Memory" above) refused memory */
  DP_ERR_FAILED_PRECONDITION = 12,/* call not valid in this state */
  DP_ERR_IO = 13,                 /* file system error */
  DP_ERR_PARSE = 14,              /* malformed FlatBuffer or JSON */
  DP_ERR_INVALID_NET = 15,        /* net fails validation against op schemas */
  DP_ERR_SHAPE = 16,              /* tensor shape mismatch */
  DP_ERR_DTYPE = 17               /* tensor element type mismatch */
};

typedef struct dp_status dp_status;

/* Code of a status; DP_OK for NULL. */
DP_API int32_t dp_status_code(const dp_status* status);
/* Message of a status ("" for NULL). Valid until the status is freed. */
DP_API const char* dp_status_message(const dp_status* status);
/* Releases a status. Accepts NULL. */
DP_API void dp_status_free(dp_status* status);
/* Name of a code: "INVALID_ARGUMENT". Static string; "UNKNOWN" if unknown. */
DP_API const char* dp_status_code_name(int32_t code);

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */
/* ------------------------------------------------------------------------ */

enum { DP_LOG_DEBUG = 0, DP_LOG_INFO = 1, DP_LOG_WARNING = 2, DP_LOG_ERROR = 3 };

/* Receives one log message. `message` is valid only during the call. It may
 * be called from any library thread, but never concurrently with itself. It
 * may call dp functions: what they log meanwhile goes to stderr instead (the
 * callback is never re-entered), and dp_log_set_callback is ignored there
 * (with a note on stderr). It must return (no longjmp, no exceptions). */
typedef void (*dp_log_callback)(void* user_data, int32_t level, const char* message);

/* Routes messages of `min_level` and above to `callback` (NULL restores the
 * default: stderr). The default minimum level is DP_LOG_WARNING. Process
 * wide; `user_data` must stay valid until the callback is replaced. */
DP_API void dp_log_set_callback(dp_log_callback callback, void* user_data, int32_t min_level);

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

enum { DP_DEVICE_CPU = 0, DP_DEVICE_CUDA = 1 };

/* Number of devices of a type. DP_DEVICE_CPU reports 1 (CPU devices are
 * logical: replicas cpu_0, cpu_1, ... all share the host). DP_DEVICE_CUDA
 * reports 0, successfully, when dp was built without CUDA, its CUDA module
 * or the CUDA libraries are missing, no driver is installed or no GPU is
 * visible; dp_build_info_get tells these apart (dp_build_info.cuda_state).
 * The first DP_DEVICE_CUDA count in a process loads the CUDA module (see
 * dp_build_info); nothing before it maps a CUDA library. Unknown types give
 * DP_ERR_INVALID_ARGUMENT. */
DP_API DP_MUST_USE dp_status* dp_device_count(int32_t device_type, int32_t* out_count);

/* A device field that is not set (dp_opdef_device_type of an op that runs on
 * its net's default device). */
enum { DP_DEVICE_NONE = -1 };

/* Memory of one device as dp uses it, filled by dp_device_memory_stats: set
 * struct_size to sizeof(dp_memory_stats); the library writes only the
 * fields that lie within struct_size and never struct_size itself. Figures
 * are bytes or counts since the process started (peak: since the last
 * dp_device_reset_peak_memory). Since 0.6.
 *
 * On the CPU (every cpu:N: CPU devices are replicas sharing the host's
 * memory) they count the host memory dp allocates itself (tensors, blobs, op
 * scratch; not memory the caller supplies): allocated is what is alive,
 * reserved equals allocated (freed host memory goes back at once), and
 * raw_allocs / raw_frees count dp's host allocations and frees.
 *
 * On a GPU (cuda:N) dp serves memory from a cache: requests are rounded up
 * to 512 bytes and carved from segments it takes from the device with
 * cudaMalloc and keeps when the blocks are freed, so that a training step
 * that frees and allocates the same sizes calls neither cudaMalloc nor
 * cudaFree. allocated counts the blocks handed out (rounded sizes), reserved
 * the segments held (allocated plus cached), raw_allocs the cudaMalloc and
 * raw_frees the cudaFree calls. The cache is given back to the device when
 * an allocation is refused, before it fails with DP_ERR_OUT_OF_MEMORY. */
typedef struct dp_memory_stats {
  uint32_t struct_size; /* set by the caller: sizeof(dp_memory_stats) */
  uint64_t allocated;   /* bytes dp's storage holds now */
  uint64_t peak;        /* the most allocated at once since the last reset */
  uint64_t reserved;    /* bytes dp holds from the device, its cache included */
  uint64_t raw_allocs;  /* allocations from the device itself (GPU: cudaMalloc calls) */
  uint64_t raw_frees;   /* frees to the device itself (GPU: cudaFree calls) */
} dp_memory_stats;

/* Fills *out with the statistics of device (device_type, device_id) (see
 * dp_memory_stats); *out is the caller's and is only written during the
 * call. Any thread, any time (also while nets run: the figures are then a
 * moment's). DP_ERR_INVALID_ARGUMENT for an unknown device_type, a negative
 * device_id, a NULL out or out->struct_size smaller than sizeof(uint32_t);
 * DP_ERR_UNAVAILABLE, naming the device, for a CUDA device that
 * dp_device_count does not report. Asking about a CUDA device loads the
 * CUDA module (see dp_build_info). Since 0.6. */
DP_API DP_MUST_USE dp_status* dp_device_memory_stats(int32_t device_type, int32_t device_id,
                                                     dp_memory_stats* out);

/* Makes the device's peak its allocated bytes now, so that the peak of a
 * stretch of work (a training step) can be measured. Process wide: the
 * statistics are the device's, not a workspace's. Any thread. The same
 * errors as dp_device_memory_stats (except those about out). Since 0.6. */
DP_API DP_MUST_USE dp_status* dp_device_reset_peak_memory(int32_t device_type, int32_t device_id);

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

/* dp decides how many threads its compute uses; no environment variable is
 * needed. It uses the CPUs of the process's affinity mask, capped by its
 * cgroup's CPU quota (a container's CPU limit), capped by the limit set
 * here. A net splits that budget between its CPU replicas (cpu:N: each
 * replica's ops get budget / N threads, so replicas never oversubscribe the
 * cores) and its ops split their work (GEMM blocks, a convolution's images)
 * across their share on dp's own threads; BLAS itself runs single-threaded
 * in them (dp sets OpenBLAS to one thread when it first multiplies, which
 * also applies to other users of OpenBLAS in the process). Idle threads
 * sleep. Processes started by dp-run are each bound to their own CPUs.
 *
 * Caps dp's compute threads at `max_threads` (0: no cap, the default).
 * Process wide, any thread, any time: nets created afterwards size their
 * worker pools from it, and ops started afterwards split their work within
 * it. DP_ERR_INVALID_ARGUMENT for a negative value. Since 0.5. */
DP_API DP_MUST_USE dp_status* dp_set_cpu_threads(int32_t max_threads);

/* The threads dp's compute uses now: the usable CPUs (affinity and cgroup
 * quota), capped by dp_set_cpu_threads; at least 1. Any thread. Since 0.5. */
DP_API int32_t dp_cpu_threads(void);

/* ------------------------------------------------------------------------ */
/* Build information                                                         */
/* ------------------------------------------------------------------------ */

/* How the loaded library was built, and the CUDA driver it found. Filled by
 * dp_build_info_get: set struct_size to sizeof(dp_build_info); the library
 * writes only the fields that lie within struct_size (older callers pass
 * shorter structs, newer ones longer: the fields it does not know stay as
 * they were) and never writes struct_size. Strings are static: valid for
 * the life of the process, never freed; "" when not applicable. Versions are
 * integers as the libraries encode them; 0 when dp was built without CUDA.
 *
 * CUDA is a module of its own. A build with CUDA installs libdp_cuda.so in
 * dp/ beside libdp.so ($libdir/dp/libdp_cuda.so); libdp.so itself links no
 * CUDA library, so it loads on hosts without the CUDA runtime or a GPU, and
 * a process that never asks for a CUDA device maps none. The first time a
 * CUDA device is counted or asked for (dp_device_count(DP_DEVICE_CUDA), a net
 * or parallel model on CUDA, or this function), libdp loads the module from
 * there (or from the path in the environment variable DP_CUDA_MODULE, when
 * set), which
 * brings the CUDA runtime, cuBLAS and NCCL (CUDA 13: libcudart.so.13,
 * libcublas.so.13, libnccl.so.2). When any of that is missing, dp has zero
 * CUDA devices and cuda_state says why. */
typedef struct dp_build_info {
  uint32_t struct_size;         /* set by the caller: sizeof(dp_build_info) */
  const char* version;          /* dp_version(): "0.1.0" */
  int32_t cuda;                 /* 1: built with CUDA (runtime, cuBLAS, NCCL), 0: CPU only */
  int32_t cuda_runtime_version; /* CUDART_VERSION compiled against: 1000 major + 10 minor (13000) */
  int32_t cuda_driver_version;  /* CUDA version of the installed driver, found at run time, same
                                   encoding; 0 when there is none (or built without CUDA, or the
                                   module did not load) */
  int32_t cublas_version;       /* CUBLAS_VERSION compiled against: 10000 major + 100 minor + patch */
  int32_t nccl_version;         /* NCCL_VERSION_CODE compiled against: 10000 major + 100 minor + patch */
  const char* cuda_archs;       /* SM architectures with device code, comma separated ("80,90"); PTX
                                   of the last one is embedded too. "" without CUDA */
  const char* blas;             /* the CPU BLAS library: "OpenBLAS" */
  const char* blas_config;      /* its build configuration (openblas_get_config()), e.g.
                                   "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64" */
  const char* compiler;         /* the C++ compiler: "gcc 12.2.0" */
  const char* build_type;       /* meson's buildtype: "release", "debug", "debugoptimized", ... */
  /* --- Since 0.6 --- */
  int32_t cuda_state;           /* DP_CUDA_STATE_*: whether CUDA devices are there, and if not why */
  int32_t cuda_loaded_runtime_version; /* cudaRuntimeGetVersion of the runtime the module loaded
                                   (1000 major + 10 minor); 0 when none was loaded */
  const char* cuda_state_detail;/* one line saying what was found, e.g. "built with CUDA, but its
                                   module was not found: ..." or "1 CUDA device, driver CUDA 13.0,
                                   runtime 13.0"; "built without CUDA" without CUDA */
  const char* cuda_module;      /* the module's path, loaded or looked for; "" without CUDA */
  int32_t onnx;                 /* 1: built with ONNX import and export (dp_model_from_onnx_file and
                                   the rest); 0: those functions return DP_ERR_UNIMPLEMENTED */
  const char* onnx_version;     /* the ONNX library's version ("1.12.0"); "" without ONNX */
} dp_build_info;

/* dp_build_info.cuda_state. Since 0.6. */
enum {
  DP_CUDA_STATE_NOT_BUILT = 0,        /* dp was built without CUDA */
  DP_CUDA_STATE_AVAILABLE = 1,        /* at least one CUDA device is visible */
  DP_CUDA_STATE_MODULE_NOT_FOUND = 2, /* built with CUDA, but libdp_cuda.so is not in dp/ beside
                                         libdp.so (nor at DP_CUDA_MODULE) */
  DP_CUDA_STATE_RUNTIME_MISSING = 3,  /* the module is there but does not load: a CUDA library it
                                         needs (runtime, cuBLAS, NCCL) is missing */
  DP_CUDA_STATE_MODULE_MISMATCH = 4,  /* the module belongs to another build of dp */
  DP_CUDA_STATE_NO_DRIVER = 5,        /* no CUDA driver, or one too old for the runtime */
  DP_CUDA_STATE_NO_DEVICE = 6         /* a driver, but no GPU visible */
};

/* Fills *out (see dp_build_info). Any thread. DP_ERR_INVALID_ARGUMENT when
 * out is NULL or out->struct_size is smaller than sizeof(uint32_t). In a
 * CUDA build the first call in a process loads the CUDA module and asks the
 * driver (see above), unless a CUDA device count already did; it never
 * fails for want of the module, the CUDA libraries, a driver or a GPU. */
DP_API DP_MUST_USE dp_status* dp_build_info_get(dp_build_info* out);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

enum {
  DP_DTYPE_FLOAT32 = 1,
  DP_DTYPE_FLOAT16 = 2,
  DP_DTYPE_BFLOAT16 = 3,
  DP_DTYPE_FLOAT64 = 4,
  DP_DTYPE_INT32 = 5,
  DP_DTYPE_INT64 = 6,
  DP_DTYPE_UINT8 = 7,
  DP_DTYPE_BOOL = 8  /* one byte per element, 0 or 1 */
};

/* A dense, row-major tensor in host memory. Its shape, dtype and contents
 * never change after creation (nets write new tensors rather than changing
 * one you hold), so a dp_tensor may be read from many threads at once. */
typedef struct dp_tensor dp_tensor;

/* Called exactly once when dp no longer needs transferred memory. */
typedef void (*dp_deleter)(void* data, void* user_data);

/* Element size in bytes of a dtype; 0 for unknown values. */
DP_API size_t dp_dtype_size(int32_t dtype);

/* Creates a tensor holding a copy of `data` (`nbytes` must equal the element
 * count times the element size). `data` may be NULL for a zero-filled tensor
 * (then nbytes is ignored): from 1 MiB up its memory is fresh zero pages
 * that take no memory until written, so a large one is created at once
 * (since 0.6). `dims` may be NULL when ndim is 0 (a scalar).
 * Errors, here and in the two functions below: DP_ERR_DTYPE for an unknown
 * dtype; DP_ERR_SHAPE for a negative dim, an nbytes that does not match, or
 * a byte size past SIZE_MAX; DP_ERR_INVALID_ARGUMENT for NULL dims with
 * ndim > 0, ndim > 64 or a NULL out; DP_ERR_OUT_OF_MEMORY when the memory
 * cannot be allocated or would pass the process's memory limit (see
 * "Memory" above). */
DP_API DP_MUST_USE dp_status* dp_tensor_create(int32_t dtype, const int64_t* dims, size_t ndim,
                                               const void* data, size_t nbytes, dp_tensor** out);

/* Creates a tensor over caller memory without copying. dp only reads it. The
 * memory must stay valid and unchanged until the tensor and every workspace
 * blob fed from it are gone (freed, overwritten by a feed, or their
 * workspace freed). `data` must be aligned to the element size
 * (DP_ERR_INVALID_ARGUMENT otherwise, and for NULL data with nbytes > 0). */
DP_API DP_MUST_USE dp_status* dp_tensor_create_borrowed(int32_t dtype, const int64_t* dims, size_t ndim,
                                                        const void* data, size_t nbytes, dp_tensor** out);

/* Like dp_tensor_create_borrowed, but dp takes ownership: once the last
 * reference is gone, deleter(data, user_data) is called exactly once, from
 * whichever thread drops it. On failure ownership stays with the caller and
 * the deleter is not called. `deleter` may be NULL (then nothing is called). */
DP_API DP_MUST_USE dp_status* dp_tensor_create_owned(int32_t dtype, const int64_t* dims, size_t ndim, void* data,
                                                     size_t nbytes, dp_deleter deleter, void* user_data,
                                                     dp_tensor** out);

/* Accessors. They accept NULL and then return 0 / NULL. */
DP_API int32_t dp_tensor_dtype(const dp_tensor* tensor);
DP_API size_t dp_tensor_ndim(const dp_tensor* tensor);
/* The ndim dimensions; valid for the tensor's lifetime. NULL for scalars. */
DP_API const int64_t* dp_tensor_dims(const dp_tensor* tensor);
DP_API int64_t dp_tensor_numel(const dp_tensor* tensor);
DP_API size_t dp_tensor_nbytes(const dp_tensor* tensor);
/* Read-only pointer to the elements; valid for the tensor's lifetime. */
DP_API const void* dp_tensor_data(const dp_tensor* tensor);

/* Copies the elements into dst, which must have room for exactly
 * dp_tensor_nbytes(tensor) bytes (`nbytes`; DP_ERR_SHAPE otherwise). */
DP_API DP_MUST_USE dp_status* dp_tensor_copy_to(const dp_tensor* tensor, void* dst, size_t nbytes);

DP_API void dp_tensor_free(dp_tensor* tensor);

/* ------------------------------------------------------------------------ */
/* Workspaces                                                                */
/* ------------------------------------------------------------------------ */

/* Named blobs that nets read and write. A workspace lives until it is freed
 * and every net created in it is freed (nets keep it alive).
 *
 * Threads. dp_workspace_feed and dp_workspace_fetch, and the calls that read
 * or replace blobs the same way (dp_checkpoint_save, _save_async and _load,
 * dp_parallel_model_save, dp_loader_next), may be called from any number of
 * threads at once, on the same blob or on different ones: each blob is
 * replaced whole, and a fetch returns what the blob held before a concurrent
 * feed or what that feed put there, never a mix. They may also be called
 * while nets run, except on the blobs those nets use: a blob that a running
 * net writes may be neither fed nor fetched, and one that it reads may be
 * fetched but not fed (the run could see either tensor, or each in turn).
 * dp_workspace_has_blob and dp_workspace_list_blobs read no blob's contents:
 * any thread, any time, also while nets write the blobs concerned (a blob
 * that a run fills for the first time may be reported either way). Since 0.6;
 * before, concurrent feeds of one blob could crash. */
typedef struct dp_workspace dp_workspace;

/* A workspace with default options (no cap of its own; the process's
 * memory limit holds, see "Memory" above); the same as
 * dp_workspace_create_with_options(NULL, out). Free it with
 * dp_workspace_free. */
DP_API DP_MUST_USE dp_status* dp_workspace_create(dp_workspace** out);

/* Zero means default for every field (see "Options structs" above);
 * struct_size must reach at least max_bytes. */
typedef struct dp_workspace_options {
  uint32_t struct_size; /* sizeof(dp_workspace_options) */
  uint64_t max_bytes;   /* cap on the bytes the workspace's blobs may hold on each device; 0 = no
                           cap of its own */
} dp_workspace_options;

/* Every field its default: dp_workspace_options o = DP_WORKSPACE_OPTIONS_INIT; */
#define DP_WORKSPACE_OPTIONS_INIT DP_OPTIONS_INIT_(dp_workspace_options)

/* Fills in the defaults for callers that cannot use the macro (bindings):
 * zero-fills the first `struct_size` bytes of *options and sets
 * options->struct_size to struct_size. Pass sizeof of the struct as the
 * caller knows it: the size is passed rather than taken from this library's
 * header, so that a caller built against an older header (smaller struct)
 * is never written past its end, and one built against a newer header gets
 * its newer fields zeroed too. Does nothing when options is NULL or
 * struct_size < sizeof(uint32_t). Never fails; any thread. The same holds
 * for dp_net_options_init, dp_gradient_options_init,
 * dp_training_options_init and dp_parallel_options_init. */
DP_API void dp_workspace_options_init(dp_workspace_options* options, size_t struct_size);

/* Creates a workspace; `options` may be NULL (defaults) and is only read
 * during the call. Free the workspace with dp_workspace_free. Any thread.
 * DP_ERR_INVALID_ARGUMENT if options->struct_size is too small for max_bytes.
 *
 * max_bytes counts the memory dp allocates for the workspace's blobs: every
 * op output (on every device), including the copy an op makes before writing
 * a blob whose memory is shared, and the scratch memory ops of nets in the
 * workspace keep between runs (Conv's column matrix). It counts from
 * allocation until the memory is freed: when its blob is overwritten with a
 * different size or cleared, or, for a tensor fetched with
 * dp_workspace_fetch, once that tensor is freed too; scratch until its net is
 * freed. Tensors fed with dp_workspace_feed are the caller's allocations and
 * do not count.
 * The cap applies to each device on its own (since 0.6; before, to all
 * devices together): the host's memory (all CPU replicas cpu:N share it)
 * and each GPU's may each hold up to max_bytes for the workspace.
 * An op whose output would take a device's count past max_bytes fails with
 * DP_ERR_OUT_OF_MEMORY naming the net, the op, the output blob, the limit
 * (and the device, for a GPU) and the bytes asked; the net and the
 * workspace stay usable. Host memory is bounded besides by the process's
 * memory limit (see "Memory" above), with or without max_bytes (0): an
 * output that would take all of dp's host memory past it fails the same
 * way, naming that limit. A GPU that has no memory left fails the op the
 * same way too, naming the device, the bytes asked and the bytes dp has
 * allocated and reserved there (see dp_memory_stats). So max_bytes can only
 * lower the bound. */
DP_API DP_MUST_USE dp_status* dp_workspace_create_with_options(const dp_workspace_options* options,
                                                               dp_workspace** out);

DP_API void dp_workspace_free(dp_workspace* workspace);

/* Makes blob `name` hold the tensor's contents, without copying: the blob
 * shares the tensor's memory (see dp_tensor_create_borrowed for borrowed
 * memory). The caller keeps its handle and may free it at once.
 * DP_ERR_INVALID_ARGUMENT for an empty name. */
DP_API DP_MUST_USE dp_status* dp_workspace_feed(dp_workspace* workspace, const char* name, const dp_tensor* tensor);

/* Returns the tensor in blob `name`, without copying. Later runs do not
 * change it. Free it with dp_tensor_free. DP_ERR_NOT_FOUND if the blob does
 * not exist or is empty (the message says which: a net's blobs exist, empty,
 * from its creation until fed or written); DP_ERR_DTYPE if it holds
 * something else. */
DP_API DP_MUST_USE dp_status* dp_workspace_fetch(dp_workspace* workspace, const char* name, dp_tensor** out);

/* *out_has = 1 if the blob exists and holds something, else 0. */
DP_API DP_MUST_USE dp_status* dp_workspace_has_blob(const dp_workspace* workspace, const char* name,
                                                    int32_t* out_has);

/* A list of UTF-8 strings owned by the library. */
typedef struct dp_string_list dp_string_list;
DP_API size_t dp_string_list_size(const dp_string_list* list);
/* String i (NULL if out of range); valid until the list is freed. */
DP_API const char* dp_string_list_get(const dp_string_list* list, size_t i);
DP_API void dp_string_list_free(dp_string_list* list);

/* Sorted names of the non-empty blobs starting with `prefix` (NULL or "" for
 * all), e.g. the name scope "cpu_0/". */
DP_API DP_MUST_USE dp_status* dp_workspace_list_blobs(const dp_workspace* workspace, const char* prefix,
                                                      dp_string_list** out);

/* ------------------------------------------------------------------------ */
/* Net definitions                                                           */
/* ------------------------------------------------------------------------ */

/* A parsed and validated net definition (schemas/net.fbs). Immutable, so
 * it may be used from many threads at once. Loading validates against the
 * operator schemas: unknown op types, input/output counts, required
 * arguments, in-place rules, inputs never fed nor produced, cycles. */
typedef struct dp_netdef dp_netdef;

/* From a binary FlatBuffer (file identifier "DPNT"); verified first. The
 * buffer is only read during the call. Errors of the three: DP_ERR_PARSE for
 * malformed bytes or text, an empty input (size 0, data NULL or not)
 * included; DP_ERR_INVALID_NET when the net fails validation (naming the op);
 * DP_ERR_INVALID_ARGUMENT for NULL data with a nonzero size. */
DP_API DP_MUST_USE dp_status* dp_netdef_from_buffer(const void* data, size_t size, dp_netdef** out);
/* From JSON text of `size` bytes (need not be NUL-terminated). */
DP_API DP_MUST_USE dp_status* dp_netdef_from_json(const char* json, size_t size, dp_netdef** out);
/* From a file holding either form (detected from its contents).
 * DP_ERR_NOT_FOUND when it does not exist, DP_ERR_IO when it cannot be read
 * (a directory included). */
DP_API DP_MUST_USE dp_status* dp_netdef_from_file(const char* path, dp_netdef** out);

/* Bytes owned by the library. */
typedef struct dp_buffer dp_buffer;
DP_API const void* dp_buffer_data(const dp_buffer* buffer);
DP_API size_t dp_buffer_size(const dp_buffer* buffer);
DP_API void dp_buffer_free(dp_buffer* buffer);

/* Serialises a definition as a binary FlatBuffer or as JSON text (the JSON
 * buffer is NUL-terminated; the size excludes the NUL). JSON numbers read
 * back bit for bit: each float in its shortest exact form (0.1, 1e-13,
 * -0.0); infinities and NaN are written inf, -inf and nan, which the
 * *_from_json functions read (strict JSON parsers do not), and a NaN's sign
 * and payload are not kept (every NaN is written as the quiet NaN, in the
 * binary form too). So binary -> JSON -> binary gives the same bytes. The
 * same holds for dp_model_to_json. */
DP_API DP_MUST_USE dp_status* dp_netdef_to_buffer(const dp_netdef* netdef, dp_buffer** out);
DP_API DP_MUST_USE dp_status* dp_netdef_to_json(const dp_netdef* netdef, dp_buffer** out);
/* The ops and their blob dependencies as Graphviz DOT (what dp_net_to_dot
 * shows, without creating the net): each op with its type, name and device. */
DP_API DP_MUST_USE dp_status* dp_netdef_to_dot(const dp_netdef* netdef, dp_buffer** out);

/* The net's name (may be ""); valid for the definition's lifetime. */
DP_API const char* dp_netdef_name(const dp_netdef* netdef);
DP_API size_t dp_netdef_num_ops(const dp_netdef* netdef);
DP_API void dp_netdef_free(dp_netdef* netdef);

/* --- Introspection of a definition ---------------------------------------
 * What a net holds, without parsing its FlatBuffer: external inputs and
 * outputs, default device and executor settings, and its ops, each with its
 * type, name, blobs, device, engine and arguments.
 *
 * Ops (dp_opdef) and arguments (dp_argdef) are borrowed, read-only views
 * into a dp_netdef. A dp_netdef never changes after creation, so every view
 * and every string, array or view a getter returns stays valid, unchanged,
 * until the dp_netdef it came from is freed (not after), and may be read
 * from any number of threads at once. Views are never freed by the caller.
 *
 * Getter contract. The getters of counts, names and views cannot fail and
 * return no status: a NULL handle gives 0 for counts and kinds, "" for the
 * object's own strings (name, type, engine), NULL for indexed items and
 * views, DP_DEVICE_NONE for device fields; an index out of range gives NULL.
 * The getters of argument values (dp_argdef_get_*) can fail and return a
 * status: DP_ERR_INVALID_ARGUMENT for a NULL argument or out-parameter or an
 * argument of another kind (kinds are never converted: an INT argument is not
 * read as FLOAT), DP_ERR_OUT_OF_RANGE for an element index past the end;
 * out-parameters are then left untouched. */

/* External inputs: blobs the caller feeds (or an earlier net wrote). */
DP_API size_t dp_netdef_num_external_inputs(const dp_netdef* netdef);
DP_API const char* dp_netdef_external_input(const dp_netdef* netdef, size_t i);
/* External outputs: blobs the caller reads. */
DP_API size_t dp_netdef_num_external_outputs(const dp_netdef* netdef);
DP_API const char* dp_netdef_external_output(const dp_netdef* netdef, size_t i);
/* The default device of ops that set none (DP_DEVICE_CPU, 0 unless the
 * definition says otherwise); DP_DEVICE_NONE for NULL. */
DP_API int32_t dp_netdef_device_type(const dp_netdef* netdef);
DP_API int32_t dp_netdef_device_id(const dp_netdef* netdef);
/* The executor the definition asks for (DP_EXECUTOR_*, see dp_net_options)
 * and its CPU worker count (0: the executor's default). */
DP_API int32_t dp_netdef_executor(const dp_netdef* netdef);
DP_API int32_t dp_netdef_num_workers(const dp_netdef* netdef);
/* The memory mode the definition asks for (DP_MEMORY_*, see dp_net_options;
 * SHARE for the train nets the builders make), DP_MEMORY_DEFAULT for NULL.
 * Since 0.6. */
DP_API int32_t dp_netdef_memory(const dp_netdef* netdef);

/* An operator of a definition: a borrowed view (see above). */
typedef struct dp_opdef dp_opdef;

/* Op i, 0 <= i < dp_netdef_num_ops, in run order; NULL if out of range. */
DP_API const dp_opdef* dp_netdef_op(const dp_netdef* netdef, size_t i);
/* The op's type ("FC"), name ("" when unnamed) and engine (kernel variant,
 * "" for the default). */
DP_API const char* dp_opdef_type(const dp_opdef* op);
DP_API const char* dp_opdef_name(const dp_opdef* op);
DP_API const char* dp_opdef_engine(const dp_opdef* op);
/* Input, output and control-input blob names (control inputs: blobs that
 * must be written before the op runs, without being read by it). */
DP_API size_t dp_opdef_num_inputs(const dp_opdef* op);
DP_API const char* dp_opdef_input(const dp_opdef* op, size_t i);
DP_API size_t dp_opdef_num_outputs(const dp_opdef* op);
DP_API const char* dp_opdef_output(const dp_opdef* op, size_t i);
DP_API size_t dp_opdef_num_control_inputs(const dp_opdef* op);
DP_API const char* dp_opdef_control_input(const dp_opdef* op, size_t i);
/* The device the op sets (DP_DEVICE_CPU / DP_DEVICE_CUDA and its id), or
 * DP_DEVICE_NONE for both when it sets none: it then runs on its net's
 * default device (dp_netdef_device_type / _id). */
DP_API int32_t dp_opdef_device_type(const dp_opdef* op);
DP_API int32_t dp_opdef_device_id(const dp_opdef* op);

/* An argument of an op: a borrowed view (see above). A dp_argdef is also the
 * default value of an argument in an op schema (dp_opschema_arg_default),
 * valid until that dp_opschema is freed. */
typedef struct dp_argdef dp_argdef;

/* The kinds of value an argument holds. Values are never 0 (0 is what
 * dp_argdef_kind returns for NULL). New kinds may be added. */
enum {
  DP_ARG_FLOAT = 1,   /* double */
  DP_ARG_INT = 2,     /* int64_t */
  DP_ARG_STRING = 3,  /* UTF-8 string */
  DP_ARG_FLOATS = 4,  /* list of double */
  DP_ARG_INTS = 5,    /* list of int64_t */
  DP_ARG_STRINGS = 6, /* list of strings */
  DP_ARG_NET = 7,     /* a nested net definition */
  DP_ARG_NETS = 8     /* a list of nested net definitions */
};

DP_API size_t dp_opdef_num_args(const dp_opdef* op);
/* Argument i in the definition's order; NULL if out of range. */
DP_API const dp_argdef* dp_opdef_arg(const dp_opdef* op, size_t i);
/* The argument named `name`; NULL when the op has none of that name (or op
 * or name is NULL). */
DP_API const dp_argdef* dp_opdef_find_arg(const dp_opdef* op, const char* name);

DP_API const char* dp_argdef_name(const dp_argdef* arg);
/* DP_ARG_*; 0 for NULL. */
DP_API int32_t dp_argdef_kind(const dp_argdef* arg);
/* Number of values: the length of a list kind (may be 0), 1 for the scalar
 * kinds FLOAT, INT, STRING and NET, 0 for NULL. */
DP_API size_t dp_argdef_num_values(const dp_argdef* arg);

/* The value of a FLOAT, INT or STRING argument. The string is borrowed. */
DP_API DP_MUST_USE dp_status* dp_argdef_get_float(const dp_argdef* arg, double* out);
DP_API DP_MUST_USE dp_status* dp_argdef_get_int(const dp_argdef* arg, int64_t* out);
DP_API DP_MUST_USE dp_status* dp_argdef_get_string(const dp_argdef* arg, const char** out);
/* The elements of a FLOATS or INTS argument: a borrowed, read-only array of
 * *out_count elements (*out_data may be NULL when the count is 0). */
DP_API DP_MUST_USE dp_status* dp_argdef_get_floats(const dp_argdef* arg, const double** out_data,
                                                    size_t* out_count);
DP_API DP_MUST_USE dp_status* dp_argdef_get_ints(const dp_argdef* arg, const int64_t** out_data,
                                                  size_t* out_count);
/* Element i of a STRINGS argument (borrowed). */
DP_API DP_MUST_USE dp_status* dp_argdef_get_string_at(const dp_argdef* arg, size_t i, const char** out);
/* The nested net of a NET argument, or element i of a NETS argument, as a
 * new dp_netdef handle (free it with dp_netdef_free). It shares the
 * definition without copying it and keeps it alive, so it may outlive the
 * dp_netdef it came from. Nested nets were validated with their parent. */
DP_API DP_MUST_USE dp_status* dp_argdef_get_net(const dp_argdef* arg, dp_netdef** out);
DP_API DP_MUST_USE dp_status* dp_argdef_get_net_at(const dp_argdef* arg, size_t i, dp_netdef** out);

/* --- Op catalogue -----------------------------------------------------------
 * Every operator type this library knows and what its schema accepts: inputs,
 * outputs, arguments (kind, default, required), in-place rules, the devices
 * with a kernel for it and its gradient. docs/OPS.md is generated from these
 * functions. Since 0.6.
 *
 * A dp_opschema is an immutable handle (free it with dp_opschema_free); it
 * may be read from any number of threads at once. Its getters follow the
 * getter contract above: no status; a NULL handle gives 0 for counts, kinds
 * and flags, "" for its type and doc; an index out of range gives NULL for
 * strings and views and 0 for kinds and flags. Every string and view they
 * return stays valid, unchanged, until the dp_opschema is freed. */

/* The names of every operator type (gradient ops such as ReluGradient
 * included), sorted, as a new list. Any thread. Since 0.6. */
DP_API DP_MUST_USE dp_status* dp_opschema_list_types(dp_string_list** out);

/* The schema of one operator type. Since 0.6. */
typedef struct dp_opschema dp_opschema;

/* The schema of op type `type` (case-sensitive: "Relu"), as a new handle.
 * DP_ERR_NOT_FOUND for an unknown type, naming the nearest known type when
 * one is close ("unknown operator type 'Relux' (did you mean 'Relu'?)");
 * DP_ERR_INVALID_ARGUMENT when type or out is NULL. Any thread. Since 0.6. */
DP_API DP_MUST_USE dp_status* dp_opschema_from_type(const char* type, dp_opschema** out);
/* Releases the handle. Accepts NULL. Since 0.6. */
DP_API void dp_opschema_free(dp_opschema* schema);

/* The type ("Relu") and a one-paragraph description of what the op
 * computes. Since 0.6. */
DP_API const char* dp_opschema_type(const dp_opschema* schema);
DP_API const char* dp_opschema_doc(const dp_opschema* schema);

/* How many inputs and outputs an op of this type takes, min to max
 * inclusive; max is INT32_MAX when there is no limit (Sum). Since 0.6. */
DP_API int32_t dp_opschema_min_inputs(const dp_opschema* schema);
DP_API int32_t dp_opschema_max_inputs(const dp_opschema* schema);
DP_API int32_t dp_opschema_min_outputs(const dp_opschema* schema);
DP_API int32_t dp_opschema_max_outputs(const dp_opschema* schema);
/* The names of the leading inputs and outputs, in order ("X", "W", "b"), as
 * messages and docs call them; inputs past the named ones are "input <i>".
 * Since 0.6. */
DP_API size_t dp_opschema_num_named_inputs(const dp_opschema* schema);
DP_API const char* dp_opschema_input_name(const dp_opschema* schema, size_t i);
DP_API size_t dp_opschema_num_named_outputs(const dp_opschema* schema);
DP_API const char* dp_opschema_output_name(const dp_opschema* schema, size_t i);

/* The arguments an op of this type may carry, in the schema's order; a net
 * giving any other is refused (DP_ERR_INVALID_ARGUMENT, with a "did you
 * mean"). Since 0.6. */
DP_API size_t dp_opschema_num_args(const dp_opschema* schema);
DP_API const char* dp_opschema_arg_name(const dp_opschema* schema, size_t i);
/* The kind of value argument i takes (DP_ARG_*): a FLOAT argument also takes
 * an INT value, a FLOATS argument an INTS value. Since 0.6. */
DP_API int32_t dp_opschema_arg_kind(const dp_opschema* schema, size_t i);
DP_API const char* dp_opschema_arg_doc(const dp_opschema* schema, size_t i);
/* 1 when every op of this type must give argument i, else 0. Since 0.6. */
DP_API int32_t dp_opschema_arg_required(const dp_opschema* schema, size_t i);
/* What the kernel uses when the optional argument i is absent, as a borrowed
 * dp_argdef view (named like the argument, of its kind; read it with
 * dp_argdef_get_*) valid until the dp_opschema is freed. NULL for a required
 * argument and for a default that is not one value (a seed hashed from the
 * output's name, another argument's value): dp_opschema_arg_default_text
 * describes those. Since 0.6. */
DP_API const dp_argdef* dp_opschema_arg_default(const dp_opschema* schema, size_t i);
/* The default of argument i as text: the value as JSON ("0.9", "1",
 * "\"fixed\"", "[]") when dp_opschema_arg_default has one, else a
 * description ("a hash of output 0's name"); "" for a required argument.
 * Since 0.6. */
DP_API const char* dp_opschema_arg_default_text(const dp_opschema* schema, size_t i);

/* In-place rules: an (input, output) pair that may (ALLOWED) or must
 * (ENFORCED) name the same blob. Any other input and output of one op naming
 * the same blob fails validation (DP_ERR_INVALID_NET). Since 0.6. */
enum { DP_INPLACE_ALLOWED = 1, DP_INPLACE_ENFORCED = 2 };
/* The listed pairs. Pair i: its input and output index go to *out_input and
 * *out_output (either may be NULL) and its rule (DP_INPLACE_*) is returned;
 * 0, with the out-parameters untouched, when i is out of range. Since 0.6. */
DP_API size_t dp_opschema_num_inplace(const dp_opschema* schema);
DP_API int32_t dp_opschema_inplace_at(const dp_opschema* schema, size_t i, int32_t* out_input,
                                      int32_t* out_output);
/* A rule over every output: s >= 0 when each output o must be written in
 * place of input o + s, however many there are (collectives, s = 1: the
 * tensors after the communicator); -1 when there is no such rule (and for
 * NULL). Since 0.6. */
DP_API int32_t dp_opschema_inplace_shift(const dp_opschema* schema);

/* 1 when this library has a kernel for the type on device_type
 * (DP_DEVICE_*), else 0 (also for NULL and unknown device types). Every type
 * has a CPU kernel; a CUDA build has CUDA kernels for some (the list grows
 * between releases), a build without CUDA none. Any thread. Since 0.6. */
DP_API int32_t dp_opschema_has_kernel(const dp_opschema* schema, int32_t device_type);
/* The engines (kernel variants an op selects with its engine field,
 * dp_opdef_engine) registered for the type on device_type, sorted, as a new
 * list; empty when there is only the default kernel (an op naming an engine
 * that has no kernel runs the default one). DP_ERR_INVALID_ARGUMENT for a
 * NULL schema or out, or an unknown device type. Since 0.6. */
DP_API DP_MUST_USE dp_status* dp_opschema_engines(const dp_opschema* schema, int32_t device_type,
                                                  dp_string_list** out);

/* How dp_netdef_add_gradients treats an op type (dp_opschema_gradient).
 * Since 0.6. */
enum {
  DP_GRADIENT_UNDECLARED = 0,        /* nothing registered (gradient ops themselves): a gradient
                                        path through it is DP_ERR_INVALID_NET */
  DP_GRADIENT_DIFFERENTIABLE = 1,    /* has gradient ops */
  DP_GRADIENT_NOT_DIFFERENTIABLE = 2,/* Accuracy, optimizer updates: a loss that depends on a wrt blob
                                        through it is DP_ERR_INVALID_NET naming the op */
  DP_GRADIENT_STOP = 3               /* stops gradients on purpose (StopGradient, fills): its inputs
                                        receive none */
};
/* DP_GRADIENT_* of the type (DP_GRADIENT_UNDECLARED for NULL). Since 0.6. */
DP_API int32_t dp_opschema_gradient(const dp_opschema* schema);

/* ------------------------------------------------------------------------ */
/* Nets                                                                      */
/* ------------------------------------------------------------------------ */

enum { DP_EXECUTOR_DEFAULT = 0, DP_EXECUTOR_SIMPLE = 1, DP_EXECUTOR_ASYNC = 2 };

/* What a net does with the memory of its temporaries (since 0.6; the whole
 * story in docs/MEMORY.md). A temporary is a blob that a run writes before
 * it reads it and reads again itself: activations, their gradients, the
 * scratch blobs between ops. Never a temporary: the net's external inputs
 * and outputs, blobs read before they are written in the net (params,
 * optimizer state, counters), blobs no op of the net reads after its last
 * write (what the caller or another net is meant to read), blobs written in
 * parts, and blobs that another net of the workspace reads.
 * - KEEP: every blob keeps its memory for the life of the workspace (a
 *   caller may fetch any blob after a run).
 * - SHARE: temporaries take turns in blocks of memory: the net's plan gives
 *   two of them one block only when, in every order the executor may run the
 *   ops, the first is dead (all its readers and writers ran) before the
 *   second is written; results are bit for bit those of KEEP.
 * - FREE: each temporary's memory goes back to the allocator after its last
 *   use in the run (Caffe2's dynamic memory management).
 * With SHARE and FREE a temporary is empty after the run: fetching it is
 * DP_ERR_NOT_FOUND saying so (list it among the net's external outputs to
 * keep it). For a net definition DEFAULT is KEEP; the builders
 * (dp_netdef_add_gradients, dp_model_build_training, dp_model_parallelize)
 * make SHARE nets unless their options say otherwise. */
enum { DP_MEMORY_DEFAULT = 0, DP_MEMORY_KEEP = 1, DP_MEMORY_SHARE = 2, DP_MEMORY_FREE = 3 };

/* CUDA graphs (dp_net_options.cuda_graphs; since 0.6). A net whose ops all
 * run on one GPU, with host ops only before and after them, whose kernels
 * are all safe to capture and whose memory mode is KEEP or SHARE (DEFAULT
 * for a definition is KEEP; the builders' nets are SHARE) runs its GPU work
 * as one CUDA graph, recorded from its streams once a run on them found the
 * same bindings (the second run; with SHARE, the third: the first run's
 * sizes make a new plan), and later runs replay it with one launch. With
 * SHARE, blobs that pass between the graph and the host ops around it keep
 * their memory. Copies into the GPU that wait only for host ops (a fed
 * batch) run before the graph on every run, so the nets
 * dp_model_parallelize builds for one GPU qualify; those nets keep the
 * iteration counter and the learning rate on that GPU (in the graph). A blob the net only
 * reads may be fed again with a tensor of the same shape, dtype and device
 * between runs (copied into the buffer the graph reads); any change that
 * would make the graph wrong (another shape, a blob the net writes
 * replaced, memory that moved, a fetched tensor that still shares a written
 * blob) makes that run go op by op on the streams, and the next one record
 * the graph again; a net whose bindings keep changing stays on the streams.
 * A profiled run of a graph (dp_net_options.profile) shows the graph as one
 * span in dp_net_trace_json; OFF profiles op by op.
 * - DEFAULT, ON: as above.
 * - OFF: ops run one by one on the streams on every run. */
enum { DP_CUDA_GRAPHS_DEFAULT = 0, DP_CUDA_GRAPHS_ON = 1, DP_CUDA_GRAPHS_OFF = 2 };

/* Math modes (dp_net_options.math_mode; since 0.6): how a net's CUDA GEMMs
 * (FC, Conv and their gradients) compute. Tensors, params and optimizer
 * state stay float32 in every mode (float32 master weights by
 * construction); the modes trade the products' precision for tensor cores,
 * accumulating in float32:
 * - DEFAULT, FP32: float32 (cublasSgemm).
 * - TF32: inputs rounded to TF32 (10 mantissa bits) inside the GEMM.
 * - BF16: inputs rounded to bfloat16 (7 mantissa bits) inside the GEMM:
 *   autocast at the GEMMs; bf16 has float32's range, so no loss scaling.
 * - FP16 (since 0.6): inputs rounded to IEEE half (10 mantissa bits, range
 *   +-65504) inside the GEMM. Small gradients underflow in half, so a
 *   training net in FP16 must have been built with dynamic loss scaling
 *   (dp_training_options / dp_parallel_options .loss_scaling): dp_net_create
 *   refuses a net that computes gradients without it (no UnscaleGradients
 *   op and no op reading "optimizer/loss_scale"; DP_ERR_INVALID_ARGUMENT
 *   naming options->math_mode).
 * CPU kernels compute in float32 in every mode (a CPU net runs the same
 * bits whatever it says). */
enum { DP_MATH_DEFAULT = 0, DP_MATH_FP32 = 1, DP_MATH_TF32 = 2, DP_MATH_BF16 = 3, DP_MATH_FP16 = 4 };

/* Zero means default for every field; struct_size must reach at least
 * `executor`. */
typedef struct dp_net_options {
  uint32_t struct_size;    /* sizeof(dp_net_options) */
  int32_t executor;        /* DP_EXECUTOR_*; DEFAULT (0) takes the definition's, else ASYNC for nets
                              spanning several devices and SIMPLE otherwise */
  int32_t num_workers;     /* CPU worker threads of the async executor; 0 takes the definition's,
                              else the number of cores; at most 1024 (INVALID_ARGUMENT past it) */
  int32_t streams_per_gpu; /* CUDA workers, each with its own stream, per GPU; 0 means 1; at most 64 */
  int32_t profile;         /* 1: record per-op timings of every run (see dp_net_trace_json); 0: off */
  int32_t unread_feed_error; /* 1: a fed blob that no net reads fails the run (see dp_net_run);
                                0: a warning. Since 0.6. */
  int32_t memory;          /* DP_MEMORY_*; DEFAULT (0) takes the definition's. Since 0.6. */
  int32_t cuda_graphs;     /* DP_CUDA_GRAPHS_*: whether a net on one GPU runs as a CUDA graph;
                              DEFAULT (0) is ON. Since 0.6. */
  int32_t math_mode;       /* DP_MATH_*: how the net's CUDA GEMMs compute; DEFAULT (0) is FP32.
                              Since 0.6. */
} dp_net_options;

#define DP_NET_OPTIONS_INIT DP_OPTIONS_INIT_(dp_net_options)

/* See dp_workspace_options_init. */
DP_API void dp_net_options_init(dp_net_options* options, size_t struct_size);

/* A definition instantiated in a workspace, ready to run many times. */
typedef struct dp_net dp_net;

/* Creates a net: checks devices and kernels, creates its blobs in the
 * workspace. `options` may be NULL. The net keeps the workspace alive; the
 * definition is copied, so it may be freed afterwards. DP_ERR_UNAVAILABLE
 * naming the op and device when an op's device is not present;
 * DP_ERR_INVALID_ARGUMENT for options out of range. */
DP_API DP_MUST_USE dp_status* dp_net_create(dp_workspace* workspace, const dp_netdef* netdef,
                                            const dp_net_options* options, dp_net** out);

/* Runs every op once and returns when done. Errors name the net, the op
 * (index, type, name), its device and the blob concerned; after an error the
 * remaining ops are skipped and the net stays usable. Runs of one net never
 * overlap: a second dp_net_run or dp_net_run_async while one is in progress
 * fails with DP_ERR_FAILED_PRECONDITION. Different nets on the same
 * workspace may run concurrently only if they write disjoint blobs.
 * DP_ERR_CANCELLED if dp_net_cancel stopped the run.
 *
 * Unread feeds (since 0.6). A run first looks at the blobs fed since the
 * last run of any net of the workspace (by dp_workspace_feed or a loader;
 * not by dp_checkpoint_load): one that no net of the workspace reads (as an
 * external input) is most likely a misspelt name, and the net would go on
 * with a stale value of the blob meant. Each is reported with the nearest
 * name the nets read ("fed blob 'X' is read by no net of the workspace (did
 * you mean 'x'?)"): as a DP_LOG_WARNING through the log callback, once per
 * blob, or, when the net was created with options.unread_feed_error = 1, as
 * DP_ERR_NOT_FOUND before any op runs (the feed is then forgotten: the next
 * run goes on). Nets created later count as readers once created. A run
 * with nothing fed since the last one pays one atomic load for this. */
DP_API DP_MUST_USE dp_status* dp_net_run(dp_net* net);

/* Starts a run and returns at once (with the simple executor the run
 * completes before this returns). Collect it with dp_net_wait; until then
 * the net counts as running. */
DP_API DP_MUST_USE dp_status* dp_net_run_async(dp_net* net);

/* Waits up to timeout_ms (negative: without limit) for the run started by
 * dp_net_run_async. Returns NULL when it finished successfully, the run's
 * error when it failed, DP_ERR_TIMEOUT when it is still running (wait again
 * later), DP_ERR_FAILED_PRECONDITION when no run was started. Call it from
 * one thread at a time. */
DP_API DP_MUST_USE dp_status* dp_net_wait(dp_net* net, int64_t timeout_ms);

/* Asks the current run to stop at the next op boundary; the run then ends
 * with DP_ERR_CANCELLED (unless it finished first). Any thread, any time;
 * does nothing when no run is in progress. Accepts NULL. */
DP_API void dp_net_cancel(dp_net* net);

/* The last completed run as Chrome trace JSON (loads in chrome://tracing and
 * Perfetto): one event per op with its start, duration, worker thread,
 * device and chain. Empty "traceEvents" unless the net was created with
 * options.profile = 1. DP_ERR_FAILED_PRECONDITION while a run is in progress. */
DP_API DP_MUST_USE dp_status* dp_net_trace_json(const dp_net* net, dp_buffer** out);

/* The net's ops and dependencies as Graphviz DOT; the chains the async
 * executor runs as single tasks are drawn as clusters. */
DP_API DP_MUST_USE dp_status* dp_net_to_dot(const dp_net* net, dp_buffer** out);

/* Memory of a net's last run on one device, filled by dp_net_memory_stats.
 * Since 0.6. */
typedef struct dp_net_memory {
  uint32_t struct_size;    /* set by the caller: sizeof(dp_net_memory) */
  int32_t mode;            /* DP_MEMORY_KEEP, _SHARE or _FREE: what the net does */
  uint64_t peak_bytes;     /* the most bytes the workspace's blobs and op scratch held at once on
                              the device during the last run (memory fed by the caller not
                              counted; other nets running at the same time in the workspace count) */
  uint64_t bytes_in_use;   /* what they hold there now */
  uint64_t temporaries;    /* blobs the plan empties after their last use in a run */
  uint64_t slots;          /* SHARE: the blocks the temporaries take turns in */
  uint64_t slot_bytes;     /* SHARE: the bytes those blocks hold between runs (all devices) */
} dp_net_memory;

/* Fills *out for device (device_type, device_id) (see dp_net_memory);
 * *out is the caller's and only written during the call. Between runs:
 * DP_ERR_FAILED_PRECONDITION while a run is in progress.
 * DP_ERR_INVALID_ARGUMENT for an unknown device type, a negative id, a NULL
 * out or out->struct_size smaller than sizeof(uint32_t). Any thread. */
DP_API DP_MUST_USE dp_status* dp_net_memory_stats(const dp_net* net, int32_t device_type, int32_t device_id,
                                                  dp_net_memory* out);

/* Releases the net. A run started by dp_net_run_async and not yet waited for
 * is cancelled and waited for first (its error, if any, is dropped). Accepts
 * NULL. Not concurrently with other calls on the same net. */
DP_API void dp_net_free(dp_net* net);

/* ------------------------------------------------------------------------ */
/* Gradients                                                                 */
/* ------------------------------------------------------------------------ */

/* Zero means default for every field but `losses`, which has none;
 * struct_size must reach at least loss_scale. */
typedef struct dp_gradient_options {
  uint32_t struct_size;          /* sizeof(dp_gradient_options) */
  const char* const* losses;     /* the loss blobs (at least one; required) */
  size_t num_losses;
  const char* const* wrt;        /* blobs to differentiate with respect to (the params);
                                    NULL/0: every external input of the net */
  size_t num_wrt;
  const char* const* stop;       /* blobs through which no gradient flows; may be NULL */
  size_t num_stop;
  double loss_scale;             /* the loss gradients are seeded with this value; 0 means 1.
                                    Data-parallel training in one process seeds 1/devices;
                                    with several processes it seeds 1 and the gradient
                                    allreduce divides by the active replicas. */
  int32_t memory;                /* DP_MEMORY_* of the net made; DEFAULT (0) is SHARE. Since 0.6. */
} dp_gradient_options;

#define DP_GRADIENT_OPTIONS_INIT DP_OPTIONS_INIT_(dp_gradient_options)

/* See dp_workspace_options_init. */
DP_API void dp_gradient_options_init(dp_gradient_options* options, size_t struct_size);

/* Returns a new definition: `netdef`'s ops followed by the ops computing the
 * gradients of the losses, in reverse order of the forward ops. Gradients of
 * blobs read by several ops are summed; the gradient of blob X is named
 * "X_grad". *out_grad_map (may be NULL) receives pairs: element 2k is a wrt
 * blob, element 2k+1 its gradient blob. DP_ERR_INVALID_NET names the op when
 * a gradient must pass through an op that has none (for example Accuracy),
 * when a wrt blob does not affect the losses, or when a gradient needs a
 * value that a later op overwrote in place; DP_ERR_INVALID_ARGUMENT when
 * options->losses is empty. Any thread; inputs are only read. */
DP_API DP_MUST_USE dp_status* dp_netdef_add_gradients(const dp_netdef* netdef, const dp_gradient_options* options,
                                                      dp_netdef** out, dp_string_list** out_grad_map);

/* ------------------------------------------------------------------------ */
/* Models                                                                    */
/* ------------------------------------------------------------------------ */

/* A model definition (schemas/model.fbs): an init net creating the params,
 * a forward net from the inputs to the losses (and metrics), the lists of
 * params, computed params (e.g. batch-norm running statistics), inputs,
 * losses and metrics, and the optimizer. Immutable; any thread. */
typedef struct dp_model dp_model;

/* From a binary FlatBuffer (identifier "DPMD", verified), JSON text of `size`
 * bytes, or a file holding either (a missing file is DP_ERR_NOT_FOUND, an
 * unreadable one DP_ERR_IO). Both nets are validated, and the model's
 * lists are checked against them (every param is created by the init net and
 * read by the forward net; losses and metrics are produced by it):
 * DP_ERR_INVALID_NET naming what fails. DP_ERR_PARSE for malformed input, an
 * empty one (size 0, NULL or not) included; DP_ERR_INVALID_ARGUMENT for NULL
 * data or json with a nonzero size. */
DP_API DP_MUST_USE dp_status* dp_model_from_buffer(const void* data, size_t size, dp_model** out);
DP_API DP_MUST_USE dp_status* dp_model_from_json(const char* json, size_t size, dp_model** out);
DP_API DP_MUST_USE dp_status* dp_model_from_file(const char* path, dp_model** out);
DP_API DP_MUST_USE dp_status* dp_model_to_json(const dp_model* model, dp_buffer** out);
DP_API DP_MUST_USE dp_status* dp_model_to_buffer(const dp_model* model, dp_buffer** out);

enum { DP_MODEL_PARAMS = 0, DP_MODEL_COMPUTED_PARAMS = 1, DP_MODEL_INPUTS = 2, DP_MODEL_LOSSES = 3,
       DP_MODEL_METRICS = 4 };
/* One of the model's blob lists (DP_MODEL_*), as a new list;
 * DP_ERR_INVALID_ARGUMENT for another `which`. */
DP_API DP_MUST_USE dp_status* dp_model_blobs(const dp_model* model, int32_t which, dp_string_list** out);
DP_API void dp_model_free(dp_model* model);

/* --- Introspection of a model ----------------------------------------------
 * Getters without a status accept NULL (then return "" / 0). */

/* The model's name ("" when unnamed); valid for the model's lifetime. */
DP_API const char* dp_model_name(const dp_model* model);

enum { DP_MODEL_INIT_NET = 0, DP_MODEL_FORWARD_NET = 1 };
/* The model's init net (creates the params and computed params) or forward
 * net (inputs and params to losses and metrics), as a new dp_netdef handle
 * to inspect with the dp_netdef_* getters or to run (free it with
 * dp_netdef_free). It shares the model's definition without copying it and
 * keeps it alive, so it may outlive the model handle. These are the model's
 * own nets, as validated (the forward net lists the params, computed params
 * and inputs among its external inputs); dp_model_build_training derives the
 * nets that train. DP_ERR_INVALID_ARGUMENT for another `which`. */
DP_API DP_MUST_USE dp_status* dp_model_net(const dp_model* model, int32_t which, dp_netdef** out);

/* 1 if the model has an optimizer, 0 if not (or model is NULL). */
DP_API int32_t dp_model_has_optimizer(const dp_model* model);

/* The model's optimizer as filled in by dp_model_get_optimizer. The library
 * fills it: set struct_size to sizeof(dp_optimizer_info) and the library
 * writes only the fields that lie within struct_size (older callers pass
 * shorter structs); it never writes struct_size. Defaults of the model
 * format apply to fields the model did not set. */
typedef struct dp_optimizer_info {
  uint32_t struct_size;        /* set by the caller: sizeof(dp_optimizer_info) */
  const char* type;            /* "sgd", "momentum", "adam" or "adagrad"; valid while the model lives */
  double lr;                   /* base learning rate */
  double momentum;             /* momentum */
  int32_t nesterov;            /* momentum: 1 for Nesterov's variant */
  double beta1;                /* adam */
  double beta2;                /* adam */
  double epsilon;              /* adam, adagrad */
  double weight_decay;         /* L2 decay added to every gradient */
  const char* lr_policy;       /* "fixed", "step", "exp", "inv" or "cosine"; valid while the model lives */
  double gamma;                /* step, exp, inv */
  int64_t stepsize;            /* step */
  double power;                /* inv */
  int64_t max_iter;            /* cosine */
  int64_t warmup_iters;        /* linear warm-up steps (0: none) */
  double warmup_start_factor;  /* warm-up starts at this fraction of lr */
} dp_optimizer_info;

/* Fills *out with the model's optimizer. DP_ERR_NOT_FOUND when the model has
 * none (see dp_model_has_optimizer); DP_ERR_INVALID_ARGUMENT when model or
 * out is NULL or out->struct_size is smaller than its own field. */
DP_API DP_MUST_USE dp_status* dp_model_get_optimizer(const dp_model* model, dp_optimizer_info* out);

/* Zero means default for every field; struct_size must reach at least
 * loss_scale. */
/* Dynamic loss scaling (dp_training_options.loss_scaling,
 * dp_parallel_options.loss_scaling; since 0.6), which the FP16 math mode
 * needs (see DP_MATH_FP16): the step computes the gradients of the loss
 * times a scale (initially 2^16), so that small gradients survive half
 * products; the train net then divides them by it before the updates, and
 * a step whose gradients overflowed (a gradient element not finite) is
 * skipped: params and optimizer state stay (the updates read the rate
 * "optimizer/lr_step", NaN for such a step; the iteration counter still
 * advances), and the scale halves. After 2000 steps in a row without an
 * overflow it doubles. While nothing overflows, training is the same as
 * without it, bit for bit (the scales are powers of two). The scale and
 * its count of good steps ("optimizer/loss_scale",
 * "optimizer/loss_scale_good_steps", float32 scalars) are training state:
 * dp_parallel_model_save holds them; with dp_model_build_training's nets
 * add them to dp_model_checkpoint_blobs' names. Data parallelism: one
 * scale for every replica of every process, not with BMUF
 * (DP_ERR_INVALID_ARGUMENT). With shard_optimizer_state, or replicas on
 * several GPUs of a process, each replica checks its gradients (its shard)
 * on its device and the verdicts are summed over every replica of every
 * process, so every replica skips the same steps.
 * - NONE (0): off.
 * - DYNAMIC: as above. */
enum { DP_LOSS_SCALING_NONE = 0, DP_LOSS_SCALING_DYNAMIC = 1 };

typedef struct dp_training_options {
  uint32_t struct_size;   /* sizeof(dp_training_options) */
  double loss_scale;      /* seed of the loss gradients; 0 means 1 */
  double lr;              /* > 0: replaces the optimizer's base learning rate; 0: the model's */
  int32_t memory;         /* DP_MEMORY_* of the train net; DEFAULT (0) is SHARE. Since 0.6. */
  /* Since 0.6: with loss_scaling DYNAMIC, the first scale (0: 65536 = 2^16;
   * else a positive float, a power of two for exact unscaling). */
  double initial_loss_scale;
  int32_t loss_scaling;   /* DP_LOSS_SCALING_*: dynamic loss scaling (for FP16 math). Since 0.6. */
} dp_training_options;

#define DP_TRAINING_OPTIONS_INIT DP_OPTIONS_INIT_(dp_training_options)

/* See dp_workspace_options_init. */
DP_API void dp_training_options_init(dp_training_options* options, size_t struct_size);

/* Builds the nets that train the model on one device (options may be NULL):
 * - init: the model's init net plus the optimizer's state (momentum, Adam
 *   moments, the int64 iteration counter "optimizer/iter"); run it once;
 * - train: one step: the iteration counter and learning rate
 *   ("optimizer/lr"), the forward net, its gradients and the optimizer's
 *   update of every param (on CUDA one multi-tensor op, MultiTensorAdam and
 *   the like, updates them all: the same bits in fewer launches); feed the
 *   inputs, run it once per batch;
 * - eval: the forward net in inference mode (dropout off, batch norm using
 *   its running statistics), for evaluation.
 * Any out-parameter may be NULL. All three run in one workspace. */
DP_API DP_MUST_USE dp_status* dp_model_build_training(const dp_model* model, const dp_training_options* options,
                                                      dp_netdef** out_init, dp_netdef** out_train,
                                                      dp_netdef** out_eval);

/* --- Inference -------------------------------------------------------------
 * Serving a trained model: a net from the model's inputs to chosen outputs
 * (the logits, the softmax) without labels, losses or metrics, reading the
 * params under the model's names. */

/* Zero means default for every field; struct_size must reach at least
 * no_fuse. Since 0.6. */
typedef struct dp_inference_options {
  uint32_t struct_size; /* sizeof(dp_inference_options) */
  int32_t no_fuse;      /* 1: keep FC and Relu separate; 0: fuse them (as dp_model_build_training
                           does, so that the outputs equal the eval net's bit for bit) */
} dp_inference_options;

#define DP_INFERENCE_OPTIONS_INIT DP_OPTIONS_INIT_(dp_inference_options)

/* See dp_workspace_options_init. Since 0.6. */
DP_API void dp_inference_options_init(dp_inference_options* options, size_t struct_size);

/* Builds the inference net of a model: the forward ops that the blobs
 * `outputs` (num_outputs names) need, in inference mode as the eval net of
 * dp_model_build_training (SpatialBN on its running statistics, Dropout
 * off), and nothing else: no loss, metric or label is read unless an output
 * needs it. A SoftmaxWithLoss whose loss is not asked for becomes a Softmax
 * (the same softmax, bit for bit, without labels). Each output equals the
 * eval net's blob of that name, bit for bit, for the same params and inputs.
 * `options` may be NULL (defaults).
 *
 * NULL with num_outputs 0 asks for the default outputs: the blobs the
 * model's losses and metrics are computed from (the inputs and other outputs
 * of the ops that write a loss or metric, where the forward net writes
 * them: "logits" and "softmax" for SoftmaxWithLoss + Accuracy), in the
 * order the net writes them; for a model without losses or metrics, the
 * forward net's external outputs that it writes (those of an imported ONNX
 * graph), or when it lists none the blobs it writes and no op reads
 * (since 0.6; before, always those). Name the outputs when a loss
 * is computed in several steps (a default would then need the labels).
 *
 * The net's external inputs are what its ops read: the params and computed
 * params it needs (under the model's names, in the model's order), then the
 * model inputs it needs ("data"); its external outputs are the outputs. An
 * output may be a loss or metric: the net then reads what it needs (the
 * labels).
 *
 * Serving. Run the net in a workspace holding the params: the training
 * workspace itself after dp_model_build_training, or one of its own fed the
 * param tensors (dp_workspace_fetch from the training workspace, replica 0's
 * scoped names "cpu_0/w" for a data-parallel model, then dp_workspace_feed
 * under the model's names: the tensors are shared, not copied), or loaded
 * from a checkpoint with dp_checkpoint_load (options lenient = 1 to create
 * the blobs, names = the net's external inputs that are not model inputs;
 * mmap = 1 shares the file's pages). Several threads serve one model with a
 * workspace and a net each, every workspace fed the same param tensors: the
 * params are in memory once, and a net never writes them (a workspace that
 * trains on meanwhile writes copies: copy-on-write), so the nets may run
 * concurrently. A dp_net must not run concurrently with itself.
 *
 * Errors: DP_ERR_NOT_FOUND for an output the forward net does not write in
 * inference mode (the message names the nearest blob it writes, or says
 * that the name is a model input or param, or written in training mode
 * only); DP_ERR_INVALID_ARGUMENT for an empty or repeated name, NULL
 * outputs with num_outputs > 0, or a model whose default outputs are empty.
 * Free the net with dp_netdef_free. Any thread; the model is only read.
 * Since 0.6. */
DP_API DP_MUST_USE dp_status* dp_model_build_inference(const dp_model* model, const char* const* outputs,
                                                       size_t num_outputs, const dp_inference_options* options,
                                                       dp_netdef** out);

/* ------------------------------------------------------------------------ */
/* ONNX                                                                      */
/* ------------------------------------------------------------------------ */

/* ONNX models in and out of dp (docs/ONNX.md), with no Python at run time.
 * In a build without ONNX (dp_build_info.onnx == 0) every function below
 * returns DP_ERR_UNIMPLEMENTED saying so. Since 0.6. */

/* dp_onnx_import_options.head. */
enum {
  DP_ONNX_HEAD_NONE = 0,                  /* the graph as it is: a model that serves (no loss) */
  DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY = 1  /* the graph's first output is logits [N, classes]: adds
                                             SoftmaxWithLoss against int32 labels (a new model
                                             input, `labels`) writing "softmax" and the loss
                                             "loss", and Accuracy writing the metric "accuracy"
                                             (each name suffixed "_1", ... if the graph has it) */
};

/* Zero means default for every field; struct_size must reach at least
 * head. */
typedef struct dp_onnx_import_options {
  uint32_t struct_size;     /* sizeof(dp_onnx_import_options) */
  int32_t head;             /* DP_ONNX_HEAD_* */
  const char* labels;       /* the head's labels input; NULL or "": "label" */
  /* The model's optimizer, read during the call, its fields as
   * dp_model_get_optimizer writes them: type is required ("sgd",
   * "momentum", "adam", "adagrad"); as in option structs, any other field
   * that is zero (NULL, "") or past its struct_size takes the model format's
   * default (lr 0.01, momentum 0.9, beta1 0.9, beta2 0.999, epsilon 1e-8,
   * lr_policy "fixed", ...: schemas/model.fbs). NULL: no optimizer, so the
   * model serves but dp_model_build_training refuses it. */
  const dp_optimizer_info* optimizer;
} dp_onnx_import_options;

#define DP_ONNX_IMPORT_OPTIONS_INIT DP_OPTIONS_INIT_(dp_onnx_import_options)

/* See dp_workspace_options_init. */
DP_API void dp_onnx_import_options_init(dp_onnx_import_options* options, size_t struct_size);

/* A dp model from an ONNX model (a serialised ModelProto of `size` bytes, or
 * a file holding one), opsets 9 to 17 of the default domain. The graph's
 * initializers become the init net (one GivenTensorFill each, holding the
 * values): those a node trains (Conv and Gemm weights and biases, MatMul's B,
 * BatchNormalization's scale and bias) are the model's params, the others it
 * reads (BatchNormalization's running statistics, constants) its computed
 * params; its nodes become the forward net, its inputs that are not
 * initializers the model's inputs and its outputs the forward net's
 * external outputs, all named as in the graph (the defaults of
 * dp_model_build_inference). Constant nodes, shapes and bounds are folded
 * in. The model trains like any other once it has a loss and an optimizer
 * (options->head, options->optimizer): dp_model_build_training,
 * dp_model_parallelize.
 *
 * The ONNX ops dp imports (docs/ONNX.md says how each maps): Gemm, MatMul
 * with a 2-D initializer as B, Conv (2-D, any padding, strides, dilations
 * and groups), MaxPool, AveragePool (ceil_mode, count_include_pad),
 * GlobalAveragePool, GlobalMaxPool, BatchNormalization, Relu, Sigmoid, Tanh,
 * Clip, Softmax, LogSoftmax, Add, Sub, Mul, Div, Sum (broadcasting), Concat,
 * Flatten, Reshape with a constant shape, Transpose, Dropout (dropping in
 * training nets, the identity in inference ones), Identity and Constant.
 *
 * Errors (the model is all or nothing): DP_ERR_PARSE for bytes that are not
 * an ONNX model (empty ones included) or a name in it that is not UTF-8
 * without NUL; DP_ERR_UNIMPLEMENTED for an opset
 * outside 9..17, a tensor whose data is in an external file, and, in one
 * status that lists each (op type, name, node index, opset, why), every node
 * dp cannot import; DP_ERR_INVALID_NET for a graph that breaks ONNX's rules
 * (a name read that nothing defines, a cycle, a value written twice, a
 * tensor whose data disagrees with its dims); DP_ERR_INVALID_ARGUMENT for
 * bad options (a labels name the graph already has); DP_ERR_NOT_FOUND and
 * DP_ERR_IO for a file that is missing or unreadable. Nothing is allocated
 * for what a tensor's dims claim before its data is there. `options` may be
 * NULL (defaults). Any thread. */
DP_API DP_MUST_USE dp_status* dp_model_from_onnx_buffer(const void* data, size_t size,
                                                        const dp_onnx_import_options* options, dp_model** out);
DP_API DP_MUST_USE dp_status* dp_model_from_onnx_file(const char* path, const dp_onnx_import_options* options,
                                                      dp_model** out);

/* Zero means default for every field; struct_size must reach at least
 * opset. */
typedef struct dp_onnx_export_options {
  uint32_t struct_size;        /* sizeof(dp_onnx_export_options) */
  int32_t opset;               /* the default domain's opset written, 11 to 17; 0: 13 */
  const char* const* outputs;  /* the graph's outputs, as dp_model_build_inference's (read during
                                  the call); NULL with num_outputs 0: its defaults */
  size_t num_outputs;
  const char* param_prefix;    /* where the params are in the workspace: blob param_prefix + name
                                  ("cpu_0/" for replica 0 of a parallel model); NULL or "": the
                                  model's names */
} dp_onnx_export_options;

#define DP_ONNX_EXPORT_OPTIONS_INIT DP_OPTIONS_INIT_(dp_onnx_export_options)

/* See dp_workspace_options_init. */
DP_API void dp_onnx_export_options_init(dp_onnx_export_options* options, size_t struct_size);

/* The ONNX model (a serialised ModelProto) of the model's inference net
 * (dp_model_build_inference with options->outputs and no_fuse) with the
 * params and computed params it reads as initializers, read from `workspace`
 * (on any device, as they are when called: not while a net that writes
 * them runs). Names are the model's. The graph's inputs are the model inputs
 * the net reads, and the workspace must hold an example batch of each (like
 * the example input of torch.onnx.export): the input takes its dtype and
 * dims, the first dim named "N" (any batch size) when the net's shapes
 * follow a larger batch too; the outputs' dims follow (a dim that grows with
 * the batch is "N" too). The result passes ONNX's
 * checker (onnx.checker.check_model). To export a model as its init net
 * makes it, run the init net in a workspace first.
 *
 * Errors: DP_ERR_UNIMPLEMENTED listing every op of the net that has no ONNX
 * form (docs/ONNX.md lists the ops dp exports); DP_ERR_NOT_FOUND for a param
 * or an input the workspace does not hold (or an output the net does not
 * write, as in dp_model_build_inference); DP_ERR_INVALID_ARGUMENT for NULL
 * model or workspace, an opset outside 11..17 or bad outputs. `options` may
 * be NULL (defaults). Any thread. */
DP_API DP_MUST_USE dp_status* dp_model_to_onnx(const dp_model* model, const dp_workspace* workspace,
                                               const dp_onnx_export_options* options, dp_buffer** out);
/* The same, written to `path` atomically (a temporary file beside it,
 * fsynced, renamed over it): DP_ERR_IO naming the file when it cannot be
 * written, and then nothing is left at `path` that was not there before. */
DP_API DP_MUST_USE dp_status* dp_model_save_onnx(const dp_model* model, const dp_workspace* workspace,
                                                 const dp_onnx_export_options* options, const char* path);

/* ------------------------------------------------------------------------ */
/* Data parallelism                                                          */
/* ------------------------------------------------------------------------ */

/* A model turned into N replicas in this process, one per device, under the
 * name scopes "cpu_0/", "cpu_1/", ... Immutable; any thread. */
typedef struct dp_parallel_model dp_parallel_model;

/* Zero means default for every field; struct_size must reach at least
 * no_fuse. Negative sizes and counts give DP_ERR_INVALID_ARGUMENT naming the
 * option. */
typedef struct dp_parallel_options {
  uint32_t struct_size;       /* sizeof(dp_parallel_options) */
  int32_t device_type;        /* DP_DEVICE_CPU (0) or DP_DEVICE_CUDA (see dp_model_parallelize) */
  /* One replica per id: num_devices distinct ids >= 0, read during the call.
   * NULL with num_devices 0 (the default): every device of device_type, as
   * dp_device_count reports them (for CPU that is one replica, cpu:0).
   * NULL with num_devices > 0, or non-NULL with num_devices 0, is an error. */
  const int32_t* device_ids;
  size_t num_devices;
  int64_t first_bucket_bytes; /* the first gradient bucket (small: communication starts early);
                                 0 means 1 MiB */
  int64_t bucket_bytes;       /* every later bucket; 0 means 25 MiB */
  int32_t uneven_split;       /* 1: accept global batches that do not divide by the replica count */
  int32_t no_fuse;            /* 1: keep FC and Relu separate, and one optimizer update per param;
                                 0: fuse FC and Relu in the forward net (CPU, as dp_model_build_training
                                 does) and, on CUDA, each replica's updates of a gradient bucket into one
                                 multi-tensor op (the same bits in fewer kernel launches) */
  double lr;                  /* > 0: replaces the optimizer's base learning rate; 0: the model's */
  int32_t accumulate_steps;   /* K: gradient accumulation over K global batches (see
                                 dp_parallel_model_accumulate_net); 0 means 1 (none) */
  /* BMUF (blockwise model-update filtering) instead of a gradient allreduce
   * every step: replicas take bmuf_block_length local steps on their shards,
   * then the block net averages their params W and applies
   * G = W - Wg; Delta = mu Delta + zeta G; Wg += Delta; W = Wg (+ mu Delta
   * with Nesterov). See dp_parallel_model_block_net. */
  int32_t bmuf;                /* 1: enable; 0: off */
  double bmuf_block_lr;        /* zeta > 0; 0 means 1.0 */
  /* mu: 0 means the default, 1 - 1/(replica count); a negative value means
   * no block momentum (mu = 0); a value in (0, 1) is mu; >= 1 is an error. */
  double bmuf_block_momentum;
  int32_t bmuf_no_nesterov;    /* 1: plain block momentum; 0: Nesterov's variant */
  int32_t bmuf_block_length;   /* local steps per block; 0 means 8 */
  int32_t computed_params;     /* DP_COMPUTED_PARAMS_*: BN running statistics after each step's
                                  forward; 0 is BROADCAST */
  int32_t cuda_collectives;    /* DP_CUDA_COLLECTIVES_*: how CUDA replicas communicate; 0 is NCCL */
  /* DP_SHARED_MODEL_*. CPU only: ON (1) keeps one copy of the params and
   * optimizer state (replica 0's) that every replica reads; gradients are
   * still summed, and each param is updated once, the work spread over the
   * replicas (big params in one part per replica). Faster than a copy per
   * replica when the replicas' cores share a last-level cache: the update
   * is not repeated on every copy, and within a process the gradients are
   * summed by the updates, without an allreduce. Slower when they do not
   * (each updated line moves to the other replicas' caches): AUTO (2) picks
   * ON when the CPUs dp gives the replicas share one (from sysfs, confirmed
   * by a measurement of a few milliseconds during this call) and OFF
   * otherwise, and OFF for CUDA replicas and with BMUF. OFF (0, the
   * default): a copy per replica. ON is not allowed with BMUF. */
  int32_t shared_model;
  /* 1: every training-mode SpatialBN normalises with the mean and variance
   * of the whole global batch (statistics allreduced in forward and
   * backward), as one device would; not with BMUF. */
  int32_t sync_bn;
  /* --- Several processes (since 0.3) ---------------------------------------
   * num_shards processes (on one machine or several) train one model: each
   * builds the same parallel model with its own shard_id, feeds its own
   * part of the data (its batch is split over its devices), and gradients
   * are summed over every device of every process, so that a step equals
   * one device's step on all processes' batches together. The processes
   * meet through `store` (rendezvous, when the init net runs) and talk
   * through shared memory on one host and Gloo's TCP transport between
   * hosts (CPU replicas; see local_transport; CUDA replicas: NCCL across
   * processes, with DP_CUDA_COLLECTIVES_NCCL). Every collective is bounded
   * by timeout_ms: a process that dies or stalls makes the others' runs
   * fail with DP_ERR_UNAVAILABLE or DP_ERR_TIMEOUT naming the missing rank.
   * The dp-run launcher sets the environment variables named below; the
   * fallbacks to DP_STORE, DP_TIMEOUT_MS, DP_INTERFACE, DP_RUN_ID and
   * DP_LOCAL_TRANSPORT are read only when there are several processes
   * (explicit fields are always checked). docs/MULTIPROCESS.md has the
   * whole story. */
  int32_t shard_id;           /* this process's rank in [0, num_shards) */
  /* 0: from the environment: DP_WORLD_SIZE and DP_RANK when DP_WORLD_SIZE
   * is set, else 1 (this process alone; shard_id must be 0). */
  int32_t num_shards;
  /* Where the processes meet: "file:///shared/dir" (a directory every
   * process can reach; created when missing) or
   * "redis://host:port[/prefix]". NULL: DP_STORE. Required with several
   * processes. Read during the call. */
  const char* store;
  int64_t timeout_ms;         /* 0: DP_TIMEOUT_MS, else 60000 */
  /* The network interface to listen on ("eth0"). NULL: DP_INTERFACE, else
   * the address the host name resolves to. Read during the call. */
  const char* network_interface;
  /* The job's id: its keys in the store live under it, so that jobs sharing
   * a store never meet. NULL: DP_RUN_ID, else "dp". Read during the call. */
  const char* run_id;
  /* --- Since 0.4 ------------------------------------------------------------
   * How the processes of one host talk (CPU replicas): "auto" (shared
   * memory where /dev/shm is usable, else TCP; a gradient bucket that
   * /dev/shm cannot hold goes over TCP, with a warning), "shm" (shared
   * memory; an error where it is not usable or full) or "tcp" (Gloo over
   * loopback, as between hosts). Across hosts it is always Gloo over TCP;
   * with several processes on each of several hosts (the same number on
   * each), the collectives are hierarchical: shared memory inside each
   * host, TCP between hosts. Every process must pass the same. NULL:
   * DP_LOCAL_TRANSPORT, else "auto". Read during the call. */
  const char* local_transport;
  /* --- Since 0.6 ------------------------------------------------------------ */
  int32_t memory;             /* DP_MEMORY_* of the train and accumulate nets; DEFAULT (0) is SHARE */
  /* DP_GRADIENT_COMPRESSION_*: the gradient allreduce in 16 bits. Each
   * contribution (a process's replicas' float sum; in one process, each
   * replica's gradient) is rounded to bfloat16 or binary16 once, the
   * contributions are summed through float (shared memory rounds the sum
   * once, Gloo at each step of its ring), then cast back: half the bytes
   * between processes, and gradients within the 16-bit
   * type's rounding of float32's (binary16 is scaled by 1 / contributions
   * against overflow). CPU replicas (shared memory, Gloo, one process) and
   * CUDA replicas (in one process each GPU's gradient is a contribution;
   * across processes every GPU's, exchanged over NCCL in 16 bits and
   * summed in float in rank order). Not with BMUF. NONE (0): float32. */
  int32_t gradient_compression;
  /* 1: ZeRO-1. The optimizer state is sharded over every replica of every
   * process: each keeps the state of 1 / (replicas x processes) of each
   * param's elements. A step reduce-scatters the gradients, each replica
   * updates its part of the params, and the params are all-gathered. The
   * sums are the allreduce's in the same order, so training equals the
   * unsharded run bit for bit in one process and over shared memory (over
   * Gloo to float rounding). Checkpoints hold the state whole, as unsharded
   * runs write it (dp_parallel_model_save gathers it, which makes the save a
   * collective: every process must call it), so a sharded run resumes
   * unsharded and the other way round. The replicas' state blobs hold
   * their shards (1-D). With gradient_compression (since 0.6) the
   * reduce-scatter carries the gradients in 16 bits as the allreduce does,
   * with the same sums. CPU replicas with a model each: not with
   * DP_SHARED_MODEL_ON (DP_SHARED_MODEL_AUTO keeps a model each) or BMUF
   * (DP_ERR_INVALID_ARGUMENT); CUDA replicas (since 0.6: the reduce-scatter
   * is then the allreduce, the all-gather a broadcast of each part from the
   * replica that owns it, over NCCL across processes, and checkpoints copy
   * the shards through the host). 0: off. */
  int32_t shard_optimizer_state;
  /* Since 0.6: dynamic loss scaling (for FP16 math; see above
   * dp_training_options): its first scale (0: 65536), and
   * DP_LOSS_SCALING_*. */
  double initial_loss_scale;
  int32_t loss_scaling;
} dp_parallel_options;

/* Replica 0's values copied to all (the default), their average, or nothing. */
enum { DP_COMPUTED_PARAMS_BROADCAST = 0, DP_COMPUTED_PARAMS_AVERAGE = 1, DP_COMPUTED_PARAMS_NONE = 2 };
/* dp_parallel_options.shared_model */
enum { DP_SHARED_MODEL_OFF = 0, DP_SHARED_MODEL_ON = 1, DP_SHARED_MODEL_AUTO = 2 };

/* dp_parallel_options.gradient_compression (since 0.6) */
enum { DP_GRADIENT_COMPRESSION_NONE = 0, DP_GRADIENT_COMPRESSION_BF16 = 1, DP_GRADIENT_COMPRESSION_FP16 = 2 };

/* The collectives of CUDA replicas: NCCL's (the default), or the
 * copy-and-sum tree over peer copies. */
enum { DP_CUDA_COLLECTIVES_NCCL = 0, DP_CUDA_COLLECTIVES_TREE = 1 };

#define DP_PARALLEL_OPTIONS_INIT DP_OPTIONS_INIT_(dp_parallel_options)

/* See dp_workspace_options_init. */
DP_API void dp_parallel_options_init(dp_parallel_options* options, size_t struct_size);

/* Builds data-parallel training over the devices of `options`:
 * - init: the model's init net on replica 0, a broadcast of every param and
 *   computed param to the other replicas, each replica's optimizer state,
 *   the iteration counter and the communicator; run it once;
 * - train: one step on a global batch fed once under the model's input names
 *   ("data"): it is split along dim 0 across the replicas, each replica runs
 *   forward and backward, gradients are summed across replicas in buckets
 *   (each bucket's allreduce starts as soon as its gradients exist, while
 *   backward goes on), every replica applies the optimizer, and the losses
 *   and metrics of the global batch are written under their own, unscoped
 *   names (see "Losses and metrics" below); a batch that does not divide by
 *   the replica count fails with DP_ERR_SHAPE naming the input unless
 *   uneven_split is set;
 * - eval: the forward net in inference mode reading replica 0's params; its
 *   other blobs keep the model's names (its loss and metrics are those of
 *   the batch fed to this process).
 * The replicas stay identical: after every step all hold the params one
 * device would hold after training on the global batch (to float rounding).
 * With uneven_split each replica's loss weighs its share of the batch, so
 * this stays exact.
 *
 * Losses and metrics. After a train step, the model's names ("loss",
 * "accuracy") hold the global batch's values: the mean over every replica
 * of every process (each replica weighted by its share of the batch with
 * uneven_split; with several processes, over the processes that have not
 * joined), i.e. what one device computes on the whole global batch, to
 * float rounding; read them with dp_workspace_fetch. Every process reads
 * the same values: across processes they travel with the last gradient
 * bucket's allreduce (no collective of their own), so they are scalars
 * there (a non-scalar one's global value is the mean of its elements). The
 * scoped names ("cpu_0/loss") hold each replica's own value, on its part of
 * the batch. Exceptions, where no collective runs: the accumulate net's and
 * BMUF's unscoped values average this process's replicas only. Since 0.6
 * (before, with several processes the unscoped values were this process's).
 * `options` is required (a zeroed one with struct_size set: one CPU
 * replica, every default) and only read during the call. Bad options give
 * DP_ERR_INVALID_ARGUMENT naming the option. CUDA replicas need a CUDA
 * kernel of every op of the training step: DP_ERR_UNIMPLEMENTED lists those
 * without one (today the training ops have none), and DP_ERR_UNAVAILABLE
 * says dp was built without CUDA, or that the default device set (NULL
 * device_ids) is empty because no CUDA device is visible. Any thread. */
DP_API DP_MUST_USE dp_status* dp_model_parallelize(const dp_model* model, const dp_parallel_options* options,
                                                   dp_parallel_model** out);
/* The three nets as new netdefs (any out-parameter may be NULL); all run in
 * one workspace. */
DP_API DP_MUST_USE dp_status* dp_parallel_model_nets(const dp_parallel_model* model, dp_netdef** out_init,
                                                     dp_netdef** out_train, dp_netdef** out_eval);
/* With accumulate_steps K > 1: the net that runs forward and backward on a
 * global batch and adds each replica's gradients up locally, without any
 * communication. Run it K - 1 times, then the train net once (it adds its
 * own batch, allreduces, updates and clears the sums): the update equals
 * one step on the K batches together. DP_ERR_FAILED_PRECONDITION when K is 1. */
DP_API DP_MUST_USE dp_status* dp_parallel_model_accumulate_net(const dp_parallel_model* model, dp_netdef** out);
/* With BMUF: the block net (run it after every bmuf_block_length runs of the
 * train net), and the block length. DP_ERR_FAILED_PRECONDITION without BMUF. */
DP_API DP_MUST_USE dp_status* dp_parallel_model_block_net(const dp_parallel_model* model, dp_netdef** out,
                                                          int32_t* out_block_length);
/* The sync net: replica 0's params, computed params and optimizer state
 * broadcast to the other replicas, then a barrier of the communicator. Run
 * it (in the workspace of the other nets, after init) whenever replicas may
 * have drifted apart, e.g. after feeding one replica's params. */
DP_API DP_MUST_USE dp_status* dp_parallel_model_sync_net(const dp_parallel_model* model, dp_netdef** out);
/* Builds the sync net on `workspace` and runs it once: when it returns
 * DP_OK every replica holds replica 0's state. The workspace must hold the
 * init net's blobs (DP_ERR_NOT_FOUND naming a missing one otherwise). Not
 * concurrently with another net on the same workspace. */
DP_API DP_MUST_USE dp_status* dp_parallel_model_sync(const dp_parallel_model* model, dp_workspace* workspace);
DP_API size_t dp_parallel_model_num_replicas(const dp_parallel_model* model); /* 0 for NULL */
/* The processes of the job and this one's rank (1 and 0 for a one-process
 * model; 0 and -1 for NULL). Since 0.3. */
DP_API int32_t dp_parallel_model_num_shards(const dp_parallel_model* model);
DP_API int32_t dp_parallel_model_shard_id(const dp_parallel_model* model);
/* Uneven data across processes (DDP's Join): a process that has run out of
 * batches calls this instead of running the train net again. It takes part
 * in the others' steps (their collectives, with no data of its own: it
 * counts itself out of the gradient average) and applies the same optimizer
 * updates, until every process has joined; then it returns, as does every
 * other process's join. Each step of the active processes then equals one
 * device's step on their batches alone, and every process ends with the same
 * state. *out_steps (may be NULL) receives how many steps it shadowed. The
 * processes must feed equal batches while active, and join between steps
 * (not in the middle of a gradient accumulation). One process: returns at
 * once (0 steps). DP_ERR_FAILED_PRECONDITION with BMUF or sync BN (their
 * collectives cannot be shadowed). With computed params broadcast from rank
 * 0 (the default), a joined rank 0 keeps broadcasting its last statistics.
 * Errors of the collectives as for a train step. Not concurrently with
 * another net on the workspace. Since 0.3. */
DP_API DP_MUST_USE dp_status* dp_parallel_model_join(const dp_parallel_model* model, dp_workspace* workspace,
                                                     int64_t* out_steps);
/* Replica i's name scope ("cpu_1/"), valid while the model lives; NULL when
 * i is out of range or model is NULL. */
DP_API const char* dp_parallel_model_scope(const dp_parallel_model* model, size_t i);
DP_API void dp_parallel_model_free(dp_parallel_model* model);

/* ------------------------------------------------------------------------ */
/* Checkpoints (since 0.2)                                                   */
/* ------------------------------------------------------------------------ */

/* A checkpoint file holds named tensors and a little metadata; its layout is
 * docs/CHECKPOINT.md. Writes are atomic: the bytes go to a temporary file in
 * the same directory (".<name>.tmp.<pid>.<n>"), which is fsynced and renamed
 * over `path`, and the directory is fsynced; a crash at any moment leaves the
 * old file or the new one under `path`, never a partial one. Every part of
 * the file is checksummed (XXH3-64) and a reader verifies what it uses:
 * DP_ERR_DATA_LOSS names the file (and the tensor) for truncated or
 * corrupted bytes, DP_ERR_PARSE a file that is not a checkpoint,
 * DP_ERR_UNIMPLEMENTED a newer format version. */

/* Zero means default for every field; struct_size must reach at least
 * iteration. Since 0.2. */
typedef struct dp_checkpoint_save_options {
  uint32_t struct_size;   /* sizeof(dp_checkpoint_save_options) */
  const char* model_name; /* recorded in the file; NULL: "" */
  /* The training iteration recorded in the file. 0: the value of the blob
   * "optimizer/iter" (int64 [1], the training nets' counter) when it is
   * among the saved blobs, else unknown (-1). A recorded iteration is -1
   * (unknown) or >= 0, the rule every writer (the Save operator too) and
   * reader of checkpoints keeps: a value below -1, given here or read from
   * the counter, is DP_ERR_INVALID_ARGUMENT. */
  int64_t iteration;
  /* dp_checkpoint_save_async only: the share of wall time the background
   * writer spends writing, in (0, 1]. It writes 1 MiB at a time, each piece
   * sent to the device before the next, and rests in between so that writing
   * takes this share of the save's time: disk writes cost CPU time beyond
   * the writer's own (the kernel's and, on a virtual machine, the device
   * emulation's), and pacing them keeps training that runs alongside close
   * to its normal step time, while the save takes about 1/share times as
   * long. 0: 0.2; 1: as fast as the device goes; anything else outside
   * (0, 1] (or NaN) is DP_ERR_INVALID_ARGUMENT, in every call taking these
   * options. Since 0.2. */
  double async_write_share;
} dp_checkpoint_save_options;

#define DP_CHECKPOINT_SAVE_OPTIONS_INIT DP_OPTIONS_INIT_(dp_checkpoint_save_options)

/* See dp_workspace_options_init. Since 0.2. */
DP_API void dp_checkpoint_save_options_init(dp_checkpoint_save_options* options, size_t struct_size);

/* Saves the tensors of the blobs `names` (num_names of them; NULL and 0:
 * every blob of the workspace that holds a tensor) to `path`, atomically
 * (see above). Tensors on a GPU are copied to the host first. `options` may
 * be NULL (defaults) and is only read during the call. DP_ERR_NOT_FOUND
 * names a missing blob, DP_ERR_DTYPE one that holds no tensor, DP_ERR_IO the
 * file or directory that could not be written (a full disk, a directory that
 * does not exist or where no file can be created, a path that is a directory
 * included); on any error the file at `path`, if one was there, is left as
 * it was and the temporary file is removed. Do not run a net that writes these blobs during
 * the call. Any thread. Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_checkpoint_save(const dp_workspace* workspace, const char* const* names,
                                                 size_t num_names, const char* path,
                                                 const dp_checkpoint_save_options* options);

/* Zero means default for every field; struct_size must reach at least
 * num_names. Since 0.2. */
typedef struct dp_checkpoint_load_options {
  uint32_t struct_size;     /* sizeof(dp_checkpoint_load_options) */
  const char* const* names; /* the tensors to load; NULL and 0: every tensor of the file */
  size_t num_names;
  /* 0 (strict): every tensor loaded must replace an existing blob, and every
   * name asked for must be in the file (DP_ERR_NOT_FOUND otherwise).
   * 1 (lenient): blobs the workspace lacks are created, and names the file
   * lacks are skipped. */
  int32_t lenient;
  int32_t no_verify;        /* 1: skip the tensors' checksums (the header's are always checked) */
  /* 1: map the file into memory and make each tensor a read-only view of it
   * (no copy; a net that writes the blob copies it first). The file must not
   * be truncated while such tensors live. 0: read into memory dp owns. */
  int32_t mmap;
} dp_checkpoint_load_options;

#define DP_CHECKPOINT_LOAD_OPTIONS_INIT DP_OPTIONS_INIT_(dp_checkpoint_load_options)

/* See dp_workspace_options_init. Since 0.2. */
DP_API void dp_checkpoint_load_options_init(dp_checkpoint_load_options* options, size_t struct_size);

/* Loads tensors of the checkpoint at `path` into `workspace`. Everything is
 * read and verified before the first blob is replaced: on any error the
 * workspace is as it was. A blob that already holds a tensor must have the
 * file's dtype and shape (DP_ERR_DTYPE / DP_ERR_SHAPE naming the file and
 * the tensor); the loaded tensor goes to that blob's device. `options` may be
 * NULL (strict, verified, read). Do not run nets on the workspace during the
 * call. Any thread. Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_checkpoint_load(dp_workspace* workspace, const char* path,
                                                 const dp_checkpoint_load_options* options);

/* What a checkpoint holds, read from its header without reading the tensors
 * (the header's checksums are verified). Immutable; any thread. Since 0.2. */
typedef struct dp_checkpoint_info dp_checkpoint_info;

/* Opens `path` and reads its header into a new handle (free it with
 * dp_checkpoint_info_free). Errors as for dp_checkpoint_load, which reads
 * the same header: DP_ERR_PARSE also for a header whose checksums hold but
 * whose values no writer produces (an iteration below -1, an unknown dtype,
 * a negative dimension). Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_checkpoint_info_from_file(const char* path, dp_checkpoint_info** out);
/* The dp version that wrote it, the model name ("" when none), the
 * iteration (-1: unknown); strings valid while the handle lives; ""/-1 for
 * NULL. Since 0.2. */
DP_API const char* dp_checkpoint_info_dp_version(const dp_checkpoint_info* info);
DP_API const char* dp_checkpoint_info_model_name(const dp_checkpoint_info* info);
DP_API int64_t dp_checkpoint_info_iteration(const dp_checkpoint_info* info);
/* The tensors, in file order: count (0 for NULL), and tensor i's name (NULL
 * when out of range), dtype (DP_DTYPE_*; 0 when out of range), rank, dims
 * (a borrowed array of rank elements; NULL for rank 0 or out of range) and
 * byte size. Since 0.2. */
DP_API size_t dp_checkpoint_info_num_tensors(const dp_checkpoint_info* info);
DP_API const char* dp_checkpoint_info_tensor_name(const dp_checkpoint_info* info, size_t i);
DP_API int32_t dp_checkpoint_info_tensor_dtype(const dp_checkpoint_info* info, size_t i);
DP_API size_t dp_checkpoint_info_tensor_ndim(const dp_checkpoint_info* info, size_t i);
DP_API const int64_t* dp_checkpoint_info_tensor_dims(const dp_checkpoint_info* info, size_t i);
DP_API uint64_t dp_checkpoint_info_tensor_nbytes(const dp_checkpoint_info* info, size_t i);
/* Releases the handle. Accepts NULL. Since 0.2. */
DP_API void dp_checkpoint_info_free(dp_checkpoint_info* info);

/* A save running in the background (dp_checkpoint_save_async). Since 0.2. */
typedef struct dp_checkpoint_job dp_checkpoint_job;

/* As dp_checkpoint_save, but the file is written by a thread of its own
 * while the caller goes on: the call only takes a snapshot of the blobs'
 * tensors, which copies nothing (storage is copy-on-write: a net that
 * overwrites a blob during the save copies it first, so the snapshot stays
 * as it was; GPU tensors are copied to the host here). Errors found while
 * taking the snapshot (a missing blob, bad arguments) are returned at once;
 * errors of the write by dp_checkpoint_wait. Free the job with
 * dp_checkpoint_job_free. Do not run a net on the workspace during this call
 * (during the write is fine). Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_checkpoint_save_async(const dp_workspace* workspace, const char* const* names,
                                                       size_t num_names, const char* path,
                                                       const dp_checkpoint_save_options* options,
                                                       dp_checkpoint_job** out);
/* Waits up to timeout_ms (negative: without limit) for the write: NULL once
 * the file is in place, the write's error if it failed (the previous file at
 * the path is then untouched), DP_ERR_TIMEOUT if it still runs (wait
 * again). Once finished, every call returns the same result. Any thread.
 * (The writer lets each tensor of the snapshot go as soon as it is written,
 * so a blob is copied on write only while its bytes are still to be
 * written.) Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_checkpoint_wait(dp_checkpoint_job* job, int64_t timeout_ms);
/* Waits for the write if it still runs, then releases the job. Accepts
 * NULL. Since 0.2. */
DP_API void dp_checkpoint_job_free(dp_checkpoint_job* job);

/* --- A directory of step checkpoints ----------------------------------------
 * Training that checkpoints as it goes names its files "step-<N>.dpckpt" in
 * one directory, N the iteration zero-padded to 9 digits
 * ("step-000000937.dpckpt"), saves each with dp_checkpoint_save (or
 * dp_parallel_model_save) and prunes old ones; to resume it loads the first
 * of dp_checkpoint_list_steps that loads, trying the next one if a file
 * turns out corrupted (DP_ERR_DATA_LOSS). */

/* The step checkpoints in `dir` whose headers verify, as paths
 * ("<dir>/step-....dpckpt"), newest (largest step) first; an empty list when
 * there are none. A file that fails verification is skipped with a
 * DP_LOG_WARNING message naming it and why; temporary files are never
 * listed. DP_ERR_NOT_FOUND / DP_ERR_IO when `dir` cannot be read. Free the
 * list with dp_string_list_free. Any thread. Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_checkpoint_list_steps(const char* dir, dp_string_list** out);

/* Removes all but the `keep` newest step checkpoints of `dir` (keep 0
 * removes none), and the temporary files of writers whose process no longer
 * runs (a crash during a save leaves one). DP_ERR_INVALID_ARGUMENT for a
 * negative keep; DP_ERR_NOT_FOUND / DP_ERR_IO when `dir` cannot be read. Any
 * thread, but not concurrently with a save into `dir` that might be pruned.
 * Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_checkpoint_prune(const char* dir, int32_t keep);

/* --- Checkpoints of models ------------------------------------------------
 * One-device training (dp_model_build_training) keeps its state in the blobs
 * dp_model_checkpoint_blobs lists: save them with dp_checkpoint_save and load
 * them with dp_checkpoint_load after running the init net. Data-parallel
 * models save replica 0's state under the same, unscoped names, so a file
 * does not depend on the device count: a checkpoint written by cpu:2 loads
 * into cpu:1, cpu:3 or one-device training, and the other way round. */

/* The blobs that hold a model's training state (Caffe2's
 * GetCheckpointParams): params, computed params (BN running statistics),
 * each param's optimizer state (momentum, Adam's moments, ...) and, with an
 * optimizer, the iteration counter "optimizer/iter" (the learning rate is a
 * function of it, and so are the masks of Dropout ops in training nets: the
 * counter is their random state). A new list; free it with
 * dp_string_list_free. Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_model_checkpoint_blobs(const dp_model* model, dp_string_list** out);

/* Saves replica 0's training state of a data-parallel model from
 * `workspace` (the one its nets run in) under unscoped names, atomically;
 * the file records the model's name (unless options->model_name says
 * otherwise), the iteration, the device type, the replica count and the
 * number of processes. With several processes only rank 0 writes (every
 * process holds the same state); the others return DP_OK without touching
 * `path`, so that every process may run the same code. A sharded optimizer
 * state (shard_optimizer_state) is gathered first, whole, as an unsharded
 * run saves it: then every process must call it (a collective; a process
 * that does not makes the others fail at the timeout). Not while a net runs
 * on the workspace. Errors as for dp_checkpoint_save. Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_parallel_model_save(const dp_parallel_model* model, const dp_workspace* workspace,
                                                     const char* path, const dp_checkpoint_save_options* options);
/* Loads a checkpoint's training state into replica 0 of a data-parallel
 * model (after its init net has run on `workspace`), then runs its sync net,
 * so that every replica holds it (Caffe2's FinalizeAfterCheckpoint). With
 * several processes every process must call it (the sync net's broadcast
 * from rank 0 is a collective); each reads `path`, and rank 0's state is
 * what every process ends with. A sharded optimizer state takes each
 * replica's shard of the file's whole tensors.
 * options->names must be NULL (the whole state is loaded); lenient, no_verify
 * and mmap apply. Everything is verified before replica 0's first blob
 * changes. Not while a net runs on the workspace. Since 0.2. */
DP_API DP_MUST_USE dp_status* dp_parallel_model_load(const dp_parallel_model* model, dp_workspace* workspace,
                                                     const char* path, const dp_checkpoint_load_options* options);

/* ------------------------------------------------------------------------ */
/* Data                                                                      */
/* ------------------------------------------------------------------------ */

/* The input pipeline. A loader feeds a workspace one batch per step from a
 * dataset held in memory (tensors sharing dim 0, the sample dimension) or
 * from a callback that writes samples into memory the loader provides. It
 * shuffles (each epoch a permutation that depends only on the seed and the
 * epoch: the same seed gives the same order in every run and every
 * process, and dp_loader_seek can resume mid-run exactly) and gathers the
 * next batches into a ring of buffers allocated once: a step allocates
 * no batch memory and the caller copies nothing. A loader over tensors gathers
 * ahead on its own thread at the lowest priority (SCHED_IDLE on Linux), on
 * CPU time the steps leave free, so it never takes a core from a running
 * net; dp_loader_next gathers, on the calling thread, the part of its batch
 * that thread has not. A callback loader's thread runs at normal priority. The net reads the fed batch in place, data-parallel nets
 * too (each replica reads its slice of the global batch where the loader
 * wrote it). Since 0.5. */
typedef struct dp_loader dp_loader;

/* Zero means default for every field; struct_size must reach at least
 * batch_size (which has no default). Since 0.5. */
typedef struct dp_loader_options {
  uint32_t struct_size; /* sizeof(dp_loader_options) */
  int64_t batch_size;   /* the global batch: samples per step over all processes; > 0 */
  uint64_t seed;        /* the shuffle's seed */
  int32_t no_shuffle;   /* 1: every epoch in dataset order */
  int32_t keep_last;    /* 1: a last partial batch is fed too (one process only); 0: dropped */
  int32_t num_shards;   /* processes that share each global batch (0: 1); batch_size divides by it */
  int32_t shard_id;     /* this process, 0 <= shard_id < num_shards: it is fed rows
                           [shard_id * B / S, (shard_id + 1) * B / S) of every global batch */
  int32_t prefetch;     /* batches gathered ahead, 1..64 (0: 2, double buffering) */
  int32_t timeout_ms;   /* longest dp_loader_next waits for a batch (0: 60000) */
  /* Since 0.6. DP_DEVICE_CUDA: batches are fed on GPU device_id, the
   * dataset held and gathered there (dp_loader_create) or the batches
   * staged there from the host (host_dataset 1, callback loaders; see
   * below); 0 (DP_DEVICE_CPU): in host memory. */
  int32_t device_type;
  int32_t device_id;    /* the GPU, with device_type DP_DEVICE_CUDA; 0 otherwise */
  /* Since 0.6. 1 with DP_DEVICE_CUDA: dp_loader_create keeps the dataset in
   * host memory and copies each batch to the GPU (see below), for a dataset
   * that does not fit there; 0: the dataset is copied to the GPU. */
  int32_t host_dataset;
} dp_loader_options;

#define DP_LOADER_OPTIONS_INIT DP_OPTIONS_INIT_(dp_loader_options)

/* See dp_workspace_options_init. Since 0.5. */
DP_API void dp_loader_options_init(dp_loader_options* options, size_t struct_size);

/* A loader over tensors: input i is tensors[i], whose dim 0 indexes the
 * samples (all share it), fed to blob blob_names[i] as a batch of shape
 * [rows, dims[1:]...] and its dtype. The loader shares the tensors' memory
 * (no copy): memory the tensors borrow must stay valid and unchanged until
 * the loader is freed; the caller may free its handles at once. The loader
 * keeps the workspace alive. DP_ERR_SHAPE when the tensors' dim 0 differ,
 * DP_ERR_INVALID_ARGUMENT for bad options or blob names (empty, repeated)
 * or a dataset with no (full) batch. Since 0.5.
 *
 * On a GPU (options->device_type DP_DEVICE_CUDA, since 0.6): for a dataset
 * that fits in the device's memory. The tensors are copied to the device
 * once, here (the caller may free or change them after this returns); each
 * epoch's order (the same as on the host, sample for sample) goes to the
 * device once, and dp_loader_next feeds batches that a kernel gathered
 * there, `prefetch` batches ahead on the loader's own stream while the
 * steps run: an epoch never waits on a host copy. The batches are tensors
 * on that device, which a net's ops on it read in place and a
 * data-parallel net splits there (replicas on other GPUs get theirs with a
 * device-to-device copy); fetching one copies it to the host. Training is
 * the same as with the host loader. DP_ERR_UNAVAILABLE without that device,
 * DP_ERR_OUT_OF_MEMORY when the dataset and prefetch + 2 batches do not
 * fit.
 *
 * Staged to a GPU (options->device_type DP_DEVICE_CUDA with
 * options->host_dataset 1, or a callback loader with DP_DEVICE_CUDA; since
 * 0.6): the batches are gathered on the host as above, into page-locked
 * buffers, and each is copied to the GPU as soon as it is gathered, on the
 * loader's own stream, so the copy of the next batch runs while the current
 * step computes; dp_loader_next feeds the batch on the device (as above),
 * waiting only if its copy has not finished. The dataset stays shared as
 * on the host. Page-locked memory the system will not give falls back to
 * ordinary memory (copies then take longer). The same batches as on the
 * host. */
DP_API DP_MUST_USE dp_status* dp_loader_create(dp_workspace* workspace, const char* const* blob_names,
                                               const dp_tensor* const* tensors, size_t num_inputs,
                                               const dp_loader_options* options, dp_loader** out);

/* One input of a callback loader: the blob it is fed to, its dtype
 * (DP_DTYPE_*) and one sample's shape (without the batch dimension; NULL
 * and 0 for a scalar per sample). Since 0.5. */
typedef struct dp_loader_input {
  const char* blob;
  int32_t dtype;
  const int64_t* sample_dims;
  size_t sample_ndim;
} dp_loader_input;

/* Writes samples indices[0..count) into the batch: for input j, sample
 * indices[i] goes to buffers[j] + i * row_bytes[j] (row_bytes[j] is one
 * sample's size). Returns 0 on success; anything else fails that batch:
 * dp_loader_next then gives DP_ERR_INTERNAL naming the value. Runs on the
 * loader's thread, one call at a time, while the caller's steps run; the
 * pointers are valid during the call only. It must return (no longjmp). */
typedef int32_t (*dp_loader_fill_fn)(void* user_data, const int64_t* indices, size_t count, void* const* buffers,
                                     const size_t* row_bytes, size_t num_inputs);

/* A loader over `num_samples` samples that `fill` writes. The inputs
 * (blob names and dims) are copied; `user_data` must stay valid until the
 * loader is freed. Errors as dp_loader_create, and DP_ERR_DTYPE for an
 * unknown inputs[i].dtype. Batches are filled in host memory; with
 * options->device_type DP_DEVICE_CUDA (since 0.6) they are then staged to
 * that GPU as dp_loader_create's with host_dataset 1 (DP_ERR_UNAVAILABLE
 * without the device). Since 0.5. */
DP_API DP_MUST_USE dp_status* dp_loader_create_callback(dp_workspace* workspace, const dp_loader_input* inputs,
                                                        size_t num_inputs, int64_t num_samples,
                                                        dp_loader_fill_fn fill, void* user_data,
                                                        const dp_loader_options* options, dp_loader** out);

/* Feeds the next batch of the epoch into the blobs (as dp_workspace_feed
 * would, without copying) and sets *out_fed to 1; at the end of an epoch
 * feeds nothing and sets *out_fed to 0, once: the next call starts the next
 * epoch. Call it between runs of the nets that read the blobs, from one
 * thread at a time. DP_ERR_TIMEOUT when the batch is not ready within
 * timeout_ms; a failed fill's error (the same on every call until
 * dp_loader_seek). Since 0.5. */
DP_API DP_MUST_USE dp_status* dp_loader_next(dp_loader* loader, int32_t* out_fed);

/* The next dp_loader_next feeds step `step` of epoch `epoch` (both from 0,
 * step < dp_loader_steps_per_epoch): after dp_checkpoint_load, seek to the
 * checkpoint's iteration to continue with exactly the batches an
 * uninterrupted run would have seen. DP_ERR_OUT_OF_RANGE otherwise. Not
 * concurrently with dp_loader_next. Since 0.5. */
DP_API DP_MUST_USE dp_status* dp_loader_seek(dp_loader* loader, int64_t epoch, int64_t step);

/* Batches per epoch; the epoch and step the next dp_loader_next feeds;
 * this process's samples per batch (batch_size / num_shards). 0 for NULL.
 * Since 0.5. */
DP_API int64_t dp_loader_steps_per_epoch(const dp_loader* loader);
DP_API int64_t dp_loader_epoch(const dp_loader* loader);
DP_API int64_t dp_loader_step(const dp_loader* loader);
DP_API int64_t dp_loader_batch_rows(const dp_loader* loader);

/* Stops the loader's thread (after the batch it is filling) and releases
 * the loader. Accepts NULL. Batches already fed stay in their blobs. Since
 * 0.5. */
DP_API void dp_loader_free(dp_loader* loader);

/* Reads an IDX file (the MNIST format; gzip-compressed or not, detected from
 * its contents) into a new tensor of the file's dims and element type
 * (uint8 -> DP_DTYPE_UINT8, int32 -> INT32, float32 -> FLOAT32,
 * float64 -> FLOAT64; int8/int16 are widened to INT32). Errors name the file:
 * DP_ERR_NOT_FOUND / DP_ERR_IO when it cannot be read, DP_ERR_PARSE for a bad
 * header, DP_ERR_DATA_LOSS when the data is truncated or the gzip stream is
 * corrupt. Any thread. */
DP_API DP_MUST_USE dp_status* dp_tensor_from_idx_file(const char* path, dp_tensor** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DP_DP_H_ */
