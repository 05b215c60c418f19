// The private interface between libdp.so and its CUDA module, libdp_cuda.so.
//
// libdp.so needs no CUDA library to load: a CPU-only process never maps the
// CUDA runtime, cuBLAS or NCCL. Everything that does link them — dp's CUDA
// kernels, and the runtime, cuBLAS and NCCL themselves — is reached through
// the module, which libdp loads with dlopen the first time a CUDA device is
// counted or asked for (cuda/module_loader.h). The module hands back one
// table of plain function pointers, ModuleApi; libdp's CUDA code keeps
// calling cudaMalloc, cublasSgemm, LaunchRelu, ... by name, and those names
// resolve inside libdp to forwarders into the table (cuda/runtime_forwarders.cc,
// comm/collective_kernel_forwarders.cc).
//
// Both sides are built together from one tree, so the table holds no
// compatibility shims: the module is accepted only when its ABI number,
// table size and dp version equal libdp's. Anything added here is added to
// both sides by the lists below.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>

#include "cuda/op_launchers.h"  // DP_CUDA_KERNEL_LAUNCHERS

namespace dp::cuda {

// Bump whenever the table's meaning changes without its size changing.
inline constexpr uint32_t kModuleAbi = 1;
// Where libdp looks for the module: this path, relative to the directory
// libdp.so is in (cuda/module_loader.cc). A private directory ($libdir/dp):
// the module has no soname and is no library to link with.
inline constexpr const char* kModuleFileName = "libdp_cuda.so";
inline constexpr const char* kModuleDirectory = "dp";
// The module's one exported function: returns its table.
inline constexpr const char* kModuleEntryPoint = "dp_cuda_module_get";

// The CUDA runtime, cuBLAS (cuBLASLt too) and NCCL functions dp calls, as
// X(return type, name, (parameters), (arguments)). A name the library's
// header maps to a versioned symbol (cublasCreate -> cublasCreate_v2) is
// mapped here too, consistently on both sides.
#define DP_CUDA_LIBRARY_FUNCTIONS(X)                                                                          \
  X(cudaError_t, cudaGetDeviceCount, (int* count), (count))                                                   \
  X(cudaError_t, cudaDriverGetVersion, (int* version), (version))                                             \
  X(cudaError_t, cudaRuntimeGetVersion, (int* version), (version))                                            \
  X(cudaError_t, cudaGetLastError, (), ())                                                                    \
  X(const char*, cudaGetErrorString, (cudaError_t error), (error))                                            \
  X(const char*, cudaGetErrorName, (cudaError_t error), (error))                                              \
  X(cudaError_t, cudaGetDevice, (int* device), (device))                                                      \
  X(cudaError_t, cudaSetDevice, (int device), (device))                                                       \
  X(cudaError_t, cudaGetDeviceProperties, (cudaDeviceProp * prop, int device), (prop, device))                \
  X(cudaError_t, cudaDeviceSynchronize, (), ())                                                               \
  X(cudaError_t, cudaDeviceCanAccessPeer, (int* can, int device, int peer), (can, device, peer))              \
  X(cudaError_t, cudaDeviceEnablePeerAccess, (int peer, unsigned int flags), (peer, flags))                   \
  X(cudaError_t, cudaMalloc, (void** ptr, size_t size), (ptr, size))                                          \
  X(cudaError_t, cudaFree, (void* ptr), (ptr))                                                                \
  X(cudaError_t, cudaMemcpyAsync,                                                                             \
    (void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream),                     \
    (dst, src, count, kind, stream))                                                                          \
  X(cudaError_t, cudaMemsetAsync, (void* ptr, int value, size_t count, cudaStream_t stream),                 \
    (ptr, value, count, stream))                                                                              \
  X(cudaError_t, cudaMemGetInfo, (size_t * free, size_t * total), (free, total))                              \
  X(cudaError_t, cudaMallocHost, (void** ptr, size_t size), (ptr, size))                                      \
  X(cudaError_t, cudaFreeHost, (void* ptr), (ptr))                                                            \
  X(cudaError_t, cudaMemcpyPeerAsync,                                                                         \
    (void* dst, int dst_device, const void* src, int src_device, size_t count, cudaStream_t stream),          \
    (dst, dst_device, src, src_device, count, stream))                                                        \
  X(cudaError_t, cudaStreamCreateWithFlags, (cudaStream_t * stream, unsigned int flags), (stream, flags))     \
  X(cudaError_t, cudaStreamDestroy, (cudaStream_t stream), (stream))                                          \
  X(cudaError_t, cudaStreamSynchronize, (cudaStream_t stream), (stream))                                      \
  X(cudaError_t, cudaStreamQuery, (cudaStream_t stream), (stream))                                            \
  X(cudaError_t, cudaStreamWaitEvent, (cudaStream_t stream, cudaEvent_t event, unsigned int flags),           \
    (stream, event, flags))                                                                                   \
  X(cudaError_t, cudaEventCreateWithFlags, (cudaEvent_t * event, unsigned int flags), (event, flags))         \
  X(cudaError_t, cudaEventDestroy, (cudaEvent_t event), (event))                                              \
  X(cudaError_t, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream), (event, stream))                  \
  X(cudaError_t, cudaEventQuery, (cudaEvent_t event), (event))                                                \
  X(cudaError_t, cudaEventSynchronize, (cudaEvent_t event), (event))                                          \
  X(cudaError_t, cudaEventElapsedTime, (float* ms, cudaEvent_t start, cudaEvent_t end), (ms, start, end))    \
  X(cudaError_t, cudaStreamBeginCapture, (cudaStream_t stream, cudaStreamCaptureMode mode), (stream, mode))   \
  X(cudaError_t, cudaStreamEndCapture, (cudaStream_t stream, cudaGraph_t * graph), (stream, graph))           \
  X(cudaError_t, cudaStreamIsCapturing, (cudaStream_t stream, cudaStreamCaptureStatus * status),              \
    (stream, status))                                                                                         \
  X(cudaError_t, cudaGraphInstantiate, (cudaGraphExec_t * exec, cudaGraph_t graph, unsigned long long flags), \
    (exec, graph, flags))                                                                                     \
  X(cudaError_t, cudaGraphGetNodes, (cudaGraph_t graph, cudaGraphNode_t * nodes, size_t * count),             \
    (graph, nodes, count))                                                                                    \
  X(cudaError_t, cudaGraphNodeGetType, (cudaGraphNode_t node, cudaGraphNodeType * type), (node, type))       \
  X(cudaError_t, cudaGraphLaunch, (cudaGraphExec_t exec, cudaStream_t stream), (exec, stream))                \
  X(cudaError_t, cudaGraphExecDestroy, (cudaGraphExec_t exec), (exec))                                        \
  X(cudaError_t, cudaGraphDestroy, (cudaGraph_t graph), (graph))                                              \
  X(cublasStatus_t, cublasCreate, (cublasHandle_t * handle), (handle))                                        \
  X(cublasStatus_t, cublasDestroy, (cublasHandle_t handle), (handle))                                         \
  X(cublasStatus_t, cublasSetStream, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))          \
  X(const char*, cublasGetStatusString, (cublasStatus_t status), (status))                                    \
  X(const char*, cublasGetStatusName, (cublasStatus_t status), (status))                                      \
  X(cublasStatus_t, cublasSgemm,                                                                              \
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,          \
     const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta, float* c,       \
     int ldc),                                                                                                \
    (handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))                                   \
  X(cublasStatus_t, cublasSgemmStridedBatched,                                                                \
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,          \
     const float* alpha, const float* a, int lda, long long int stride_a, const float* b, int ldb,            \
     long long int stride_b, const float* beta, float* c, int ldc, long long int stride_c, int batch_count),  \
    (handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,      \
     batch_count))                                                                                            \
  X(cublasStatus_t, cublasGemmEx,                                                                             \
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,          \
     const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b, cudaDataType b_type,       \
     int ldb, const void* beta, void* c, cudaDataType c_type, int ldc, cublasComputeType_t compute,            \
     cublasGemmAlgo_t algo),                                                                                  \
    (handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc, compute,   \
     algo))                                                                                                   \
  X(cublasStatus_t, cublasGemmStridedBatchedEx,                                                               \
    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,          \
     const void* alpha, const void* a, cudaDataType a_type, int lda, long long int stride_a, const void* b,    \
     cudaDataType b_type, int ldb, long long int stride_b, const void* beta, void* c, cudaDataType c_type,     \
     int ldc, long long int stride_c, int batch_count, cublasComputeType_t compute, cublasGemmAlgo_t algo),   \
    (handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b, beta, c,     \
     c_type, ldc, stride_c, batch_count, compute, algo))                                                      \
  X(cublasStatus_t, cublasSgemv,                                                                              \
    (cublasHandle_t handle, cublasOperation_t trans, int m, int n, const float* alpha, const float* a, int lda, \
     const float* x, int incx, const float* beta, float* y, int incy),                                        \
    (handle, trans, m, n, alpha, a, lda, x, incx, beta, y, incy))                                             \
  X(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle), (handle))                                    \
  X(cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t handle), (handle))                                     \
  X(cublasStatus_t, cublasLtMatmulDescCreate,                                                                 \
    (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale), (desc, compute, scale))   \
  X(cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))                           \
  X(cublasStatus_t, cublasLtMatmulDescSetAttribute,                                                           \
    (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size),           \
    (desc, attr, buf, size))                                                                                  \
  X(cublasStatus_t, cublasLtMatrixLayoutCreate,                                                               \
    (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),           \
    (layout, type, rows, cols, ld))                                                                           \
  X(cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))                   \
  X(cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))              \
  X(cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))               \
  X(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,                                                     \
    (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf, size_t size), \
    (pref, attr, buf, size))                                                                                  \
  X(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,                                                           \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,    \
     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref, int requested,      \
     cublasLtMatmulHeuristicResult_t* results, int* returned),                                                \
    (handle, op, a, b, c, d, pref, requested, results, returned))                                             \
  X(cublasStatus_t, cublasLtMatmul,                                                                           \
    (cublasLtHandle_t handle, cublasLtMatmulDesc_t op, const void* alpha, const void* a,                      \
     cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc, const void* beta,           \
     const void* c, cublasLtMatrixLayout_t c_desc, void* d, cublasLtMatrixLayout_t d_desc,                    \
     const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes, cudaStream_t stream),         \
    (handle, op, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo, workspace, workspace_bytes,   \
     stream))                                                                                                 \
  X(const char*, ncclGetErrorString, (ncclResult_t result), (result))                                         \
  X(const char*, ncclGetLastError, (ncclComm_t comm), (comm))                                                 \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id), (id))                                                 \
  X(ncclResult_t, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int* devices), (comms, ndev, devices)) \
  X(ncclResult_t, ncclCommInitRankConfig,                                                                     \
    (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config),                         \
    (comm, nranks, id, rank, config))                                                                         \
  X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t * state), (comm, state))              \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))                                                   \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))                                                 \
  X(ncclResult_t, ncclGroupStart, (), ())                                                                     \
  X(ncclResult_t, ncclGroupEnd, (), ())                                                                       \
  X(ncclResult_t, ncclAllReduce,                                                                              \
    (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,        \
     cudaStream_t stream),                                                                                    \
    (send, recv, count, type, op, comm, stream))                                                              \
  X(ncclResult_t, ncclBroadcast,                                                                              \
    (const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,              \
     cudaStream_t stream),                                                                                    \
    (send, recv, count, type, root, comm, stream))                                                            \
  X(ncclResult_t, ncclAllGather,                                                                              \
    (const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm, cudaStream_t stream),  \
    (send, recv, count, type, comm, stream))                                                                  \
  X(ncclResult_t, ncclSend,                                                                                   \
    (const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream),    \
    (send, count, type, peer, comm, stream))                                                                  \
  X(ncclResult_t, ncclRecv,                                                                                   \
    (void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream),          \
    (recv, count, type, peer, comm, stream))

// The launchers of comm/collective_kernels.h, templates: one entry per
// instantiation, named with its type.
#define DP_CUDA_COLLECTIVE_LAUNCHERS(X)                                                                        \
  X(LaunchAccumulateF32, (float* dst, const float* src, int64_t n, cudaStream_t stream), (dst, src, n, stream)) \
  X(LaunchAccumulateF64, (double* dst, const double* src, int64_t n, cudaStream_t stream),                    \
    (dst, src, n, stream))                                                                                    \
  X(LaunchAccumulateI32, (int32_t* dst, const int32_t* src, int64_t n, cudaStream_t stream),                  \
    (dst, src, n, stream))                                                                                    \
  X(LaunchAccumulateI64, (int64_t* dst, const int64_t* src, int64_t n, cudaStream_t stream),                  \
    (dst, src, n, stream))                                                                                    \
  X(LaunchScaleInPlaceF32, (float* x, float scale, int64_t n, cudaStream_t stream), (x, scale, n, stream))    \
  X(LaunchScaleInPlaceF64, (double* x, double scale, int64_t n, cudaStream_t stream), (x, scale, n, stream))  \
  X(LaunchScaleByActiveF32, (float* x, const float* active, double scale, int64_t n, cudaStream_t stream),    \
    (x, active, scale, n, stream))                                                                            \
  X(LaunchScaleByActiveF64, (double* x, const float* active, double scale, int64_t n, cudaStream_t stream),   \
    (x, active, scale, n, stream))                                                                            \
  DP_CUDA_COMPRESSED_LAUNCHERS_(X, BF16)                                                                      \
  DP_CUDA_COMPRESSED_LAUNCHERS_(X, F16)
// The compressed collectives' launchers of one 16-bit type (BF16, F16).
#define DP_CUDA_COMPRESSED_LAUNCHERS_(X, H)                                                                    \
  X(LaunchRoundThrough##H,                                                                                    \
    (float* x, float pre, double factor, const float* active, double scale, int64_t n, cudaStream_t stream),  \
    (x, pre, factor, active, scale, n, stream))                                                               \
  X(LaunchCastScaled##H, (const float* in, float pre, uint16_t* out, int64_t n, cudaStream_t stream),          \
    (in, pre, out, n, stream))                                                                                \
  X(LaunchSumContributions##H,                                                                                \
    (const uint16_t* inbox, int ranks, int64_t chunk, uint16_t* out, cudaStream_t stream),                   \
    (inbox, ranks, chunk, out, stream))                                                                       \
  X(LaunchUncastScaled##H,                                                                                    \
    (const uint16_t* in, double factor, const float* active, double scale, float* out, int64_t n,             \
     cudaStream_t stream),                                                                                    \
    (in, factor, active, scale, out, n, stream))

struct ModuleApi {
  uint32_t struct_size;  // sizeof(ModuleApi) as the module was built
  uint32_t abi;          // kModuleAbi as the module was built
  const char* dp_version;  // DP_VERSION_STRING of the module's build
#define DP_CUDA_TABLE_FUNCTION_(ret, name, params, args) ret(*name) params;
  DP_CUDA_LIBRARY_FUNCTIONS(DP_CUDA_TABLE_FUNCTION_)
#undef DP_CUDA_TABLE_FUNCTION_
#define DP_CUDA_TABLE_LAUNCHER_(name, params, args) cudaError_t(*name) params;
  DP_CUDA_KERNEL_LAUNCHERS(DP_CUDA_TABLE_LAUNCHER_)
  DP_CUDA_COLLECTIVE_LAUNCHERS(DP_CUDA_TABLE_LAUNCHER_)
#undef DP_CUDA_TABLE_LAUNCHER_
};

// The type of the module's entry point (kModuleEntryPoint).
using ModuleEntryFn = const ModuleApi* (*)();

}  // namespace dp::cuda
