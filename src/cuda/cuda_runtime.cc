// CUDA build: device discovery and the error helpers of cuda_context.h.
//
// A machine without a driver or without a GPU is normal, not an error: dp
// then has zero CUDA devices, and everything CPU keeps working.
#include "cuda/cuda_runtime.h"

#include <cuda_runtime.h>

#include "core/logging.h"
#include "cuda/cuda_context.h"

namespace dp::cuda {
namespace {

int QueryDeviceCount() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // cudaErrorNoDevice, cudaErrorInsufficientDriver, ... The failure may be
    // left as the thread's last error; clear it so that it does not surface
    // in an unrelated check later.
    cudaGetLastError();
    DP_LOG(kDebug, "no CUDA devices: cudaGetDeviceCount failed: ", cudaGetErrorString(err), " (",
           cudaGetErrorName(err), ")");
    return 0;
  }
  return count;
}

std::string CurrentDeviceName() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return "cuda:?";
  }
  return DeviceName({DeviceType::kCUDA, device});
}

}  // namespace

bool BuiltWithCuda() { return true; }

int DeviceCount() {
  // Asked once per process: devices do not come and go under a CUDA runtime,
  // and the first call may be slow (driver initialisation).
  static const int count = QueryDeviceCount();
  return count;
}

int DriverVersion() {
  // Asked once per process, like the device count.
  static const int version = [] {
    int v = 0;
    // 0 (and success) when no driver is installed; any failure counts as none.
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return v;
  }();
  return version;
}

void ThrowCudaError(cudaError_t err, const char* expr, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so that the next call starts clean
  Code code = err == cudaErrorMemoryAllocation ? Code::kOutOfMemory : Code::kInternal;
  DP_THROW(code, "CUDA error on ", CurrentDeviceName(), ": ", expr, " failed: ", cudaGetErrorString(err), " (",
           cudaGetErrorName(err), ") at ", file, ":", line);
}

void ThrowCublasError(cublasStatus_t status, const char* expr, const char* file, int line) {
  Code code = status == CUBLAS_STATUS_ALLOC_FAILED ? Code::kOutOfMemory : Code::kInternal;
  DP_THROW(code, "cuBLAS error on ", CurrentDeviceName(), ": ", expr, " failed: ", cublasGetStatusString(status),
           " (", cublasGetStatusName(status), ") at ", file, ":", line);
}

void CheckDeviceAvailable(DeviceOption device) {
  int count = DeviceCount();
  DP_ENFORCE_CODE(device.type == DeviceType::kCUDA && device.id >= 0 && device.id < count, Code::kUnavailable,
                  "device ", DeviceName(device), " is not available (", count, " cuda devices)");
}

DeviceGuard::DeviceGuard(int device) {
  int current = -1;
  DP_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) {
    DP_CUDA_CHECK(cudaSetDevice(device));
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  // Restoring can only fail if the runtime is already broken; nothing to do then.
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

}  // namespace dp::cuda
