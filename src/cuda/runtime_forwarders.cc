// libdp's side of the CUDA module (cuda/module_api.h): definitions of the CUDA
// runtime, cuBLAS and NCCL functions that dp's CUDA code calls, and of the
// launchers of the ops' kernels (cuda/op_launchers.h), each forwarding to the
// module's table. So libdp.so links none of those libraries, and its CUDA
// code is written as if it did. Hidden like the rest of the engine: nothing here is exported.
//
// Every CUDA path first asks for a visible device (CheckDeviceAvailable),
// which loads the module; a call that comes without one gets an error
// value, never a crash.
#include "cuda/module_api.h"
#include "cuda/module_loader.h"
#include "cuda/op_launchers.h"

namespace {

// What a forwarder returns when the module is not loaded.
template <typename T>
T Unloaded();
template <>
cudaError_t Unloaded<cudaError_t>() { return cudaErrorSharedObjectInitFailed; }
template <>
cublasStatus_t Unloaded<cublasStatus_t>() { return CUBLAS_STATUS_NOT_INITIALIZED; }
template <>
ncclResult_t Unloaded<ncclResult_t>() { return ncclSystemError; }
template <>
const char* Unloaded<const char*>() { return "the CUDA module (libdp_cuda.so) is not loaded"; }

}  // namespace

extern "C" {
#define DP_CUDA_FORWARD_FUNCTION_(ret, name, params, args)  \
  ret name params {                                         \
    const dp::cuda::ModuleApi* api = dp::cuda::Module();    \
    return api != nullptr ? api->name args : Unloaded<ret>(); \
  }
DP_CUDA_LIBRARY_FUNCTIONS(DP_CUDA_FORWARD_FUNCTION_)
#undef DP_CUDA_FORWARD_FUNCTION_
}  // extern "C"

namespace dp::cuda {
#define DP_CUDA_FORWARD_LAUNCHER_(name, params, args)              \
  cudaError_t name params {                                        \
    const ModuleApi* api = Module();                               \
    return api != nullptr ? api->name args : Unloaded<cudaError_t>(); \
  }
DP_CUDA_KERNEL_LAUNCHERS(DP_CUDA_FORWARD_LAUNCHER_)
#undef DP_CUDA_FORWARD_LAUNCHER_
}  // namespace dp::cuda
