// dp_build_info_get: how libdp was built (versions of the libraries it was
// compiled against, SM architectures, BLAS, compiler) and what it found of
// CUDA at run time (module, runtime, driver, devices: cuda/cuda_runtime.h),
// and whether it has ONNX.
#include <string>

#include <cblas.h>

#include "capi/handles.h"
#include "cuda/cuda_runtime.h"
#include "dp_config.h"
#include "onnx_io/onnx_model.h"

#if defined(DP_WITH_CUDA)
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#define DP_CUDART_VERSION CUDART_VERSION
#define DP_CUBLAS_VERSION CUBLAS_VERSION
#define DP_NCCL_VERSION NCCL_VERSION_CODE
#else
#define DP_CUDART_VERSION 0
#define DP_CUBLAS_VERSION 0
#define DP_NCCL_VERSION 0
#endif

namespace {

// cuda_state is the engine's Availability, value for value.
using dp::cuda::Availability;
static_assert(static_cast<int>(Availability::kNotBuilt) == DP_CUDA_STATE_NOT_BUILT);
static_assert(static_cast<int>(Availability::kAvailable) == DP_CUDA_STATE_AVAILABLE);
static_assert(static_cast<int>(Availability::kModuleNotFound) == DP_CUDA_STATE_MODULE_NOT_FOUND);
static_assert(static_cast<int>(Availability::kRuntimeMissing) == DP_CUDA_STATE_RUNTIME_MISSING);
static_assert(static_cast<int>(Availability::kModuleMismatch) == DP_CUDA_STATE_MODULE_MISMATCH);
static_assert(static_cast<int>(Availability::kNoDriver) == DP_CUDA_STATE_NO_DRIVER);
static_assert(static_cast<int>(Availability::kNoDevice) == DP_CUDA_STATE_NO_DEVICE);

// openblas_get_config() assembles its answer in one static buffer on every
// call, so concurrent calls would race: ask once, keep a copy for good.
const char* BlasConfig() {
  static const std::string* config = new std::string([] {
    const char* c = openblas_get_config();
    return std::string(c != nullptr ? c : "");
  }());
  return config->c_str();
}

}  // namespace

extern "C" {

dp_status* dp_build_info_get(dp_build_info* out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(out->struct_size >= sizeof(out->struct_size), "out->struct_size is ", out->struct_size,
               " (set it to sizeof(dp_build_info))");
  // Everything is gathered before the first write: a failure leaves *out alone.
  const int32_t cuda = dp::cuda::BuiltWithCuda() ? 1 : 0;
  const dp::cuda::ProbeResult& probe = dp::cuda::Probe();  // loads the CUDA module
  const char* blas_config = BlasConfig();
  if (DP_OPTIONS_HAVE(out, version)) out->version = DP_VERSION_STRING;
  if (DP_OPTIONS_HAVE(out, cuda)) out->cuda = cuda;
  if (DP_OPTIONS_HAVE(out, cuda_runtime_version)) out->cuda_runtime_version = DP_CUDART_VERSION;
  if (DP_OPTIONS_HAVE(out, cuda_driver_version)) out->cuda_driver_version = probe.driver_version;
  if (DP_OPTIONS_HAVE(out, cublas_version)) out->cublas_version = DP_CUBLAS_VERSION;
  if (DP_OPTIONS_HAVE(out, nccl_version)) out->nccl_version = DP_NCCL_VERSION;
  if (DP_OPTIONS_HAVE(out, cuda_archs)) out->cuda_archs = DP_CUDA_ARCHS;
  if (DP_OPTIONS_HAVE(out, blas)) out->blas = "OpenBLAS";
  if (DP_OPTIONS_HAVE(out, blas_config)) out->blas_config = blas_config;
  if (DP_OPTIONS_HAVE(out, compiler)) out->compiler = DP_COMPILER;
  if (DP_OPTIONS_HAVE(out, build_type)) out->build_type = DP_BUILD_TYPE;
  if (DP_OPTIONS_HAVE(out, cuda_state)) out->cuda_state = static_cast<int32_t>(probe.state);
  if (DP_OPTIONS_HAVE(out, cuda_loaded_runtime_version)) out->cuda_loaded_runtime_version = probe.runtime_version;
  if (DP_OPTIONS_HAVE(out, cuda_state_detail)) out->cuda_state_detail = probe.detail.c_str();
  if (DP_OPTIONS_HAVE(out, cuda_module)) out->cuda_module = probe.module_path.c_str();
  if (DP_OPTIONS_HAVE(out, onnx)) out->onnx = dp::OnnxBuilt() ? 1 : 0;
  if (DP_OPTIONS_HAVE(out, onnx_version)) out->onnx_version = dp::OnnxLibraryVersion();
  DP_API_END
}

}  // extern "C"
