// CUDA build: device discovery (through the module, cuda/module_loader.h)
// and the error helpers of cuda_context.h.
//
// A machine without a driver or without a GPU is normal, not an error: dp
// then has zero CUDA devices, and everything CPU keeps working.
#include "cuda/cuda_runtime.h"

#include <cuda_runtime.h>

#include "core/logging.h"
#include "cuda/cuda_context.h"
#include "cuda/module_loader.h"

namespace dp::cuda {
namespace {

// Version numbers as CUDA encodes them (1000 major + 10 minor) -> "13.0".
std::string VersionString(int v) { return StrCat(v / 1000, ".", (v % 1000) / 10); }

ProbeResult RunProbe() {
  ProbeResult r;
  const ModuleLoadReport& load = LoadReport();
  r.module_path = load.path;
  if (!load.loaded) {
    r.state = load.reason;
    switch (load.reason) {
      case Availability::kModuleNotFound:
        r.detail = StrCat("built with CUDA, but its module was not found: ", load.detail);
        break;
      case Availability::kRuntimeMissing:
        r.detail = StrCat("built with CUDA, but its module ", load.path,
                          " does not load (the CUDA runtime, cuBLAS or NCCL is missing): ", load.detail);
        break;
      default:
        r.detail = StrCat("built with CUDA, but ", load.path, " is not this build's module: ", load.detail);
        break;
    }
    return r;
  }
  // 0 (and success) when no driver is installed; any failure counts as none.
  if (cudaDriverGetVersion(&r.driver_version) != cudaSuccess) {
    cudaGetLastError();
    r.driver_version = 0;
  }
  if (cudaRuntimeGetVersion(&r.runtime_version) != cudaSuccess) {
    cudaGetLastError();
    r.runtime_version = 0;
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= 0) {
    // cudaErrorNoDevice, cudaErrorInsufficientDriver, ... The failure may be
    // left as the thread's last error; clear it so that it does not surface
    // in an unrelated check later.
    cudaGetLastError();
    const std::string why =
        err == cudaSuccess ? std::string("no device") : StrCat(cudaGetErrorString(err), " (", cudaGetErrorName(err), ")");
    if (r.driver_version == 0 || err == cudaErrorInsufficientDriver) {
      r.state = Availability::kNoDriver;
      r.detail = r.driver_version == 0
                     ? StrCat("built with CUDA, runtime ", VersionString(r.runtime_version),
                              " loaded, but no CUDA driver is installed: ", why)
                     : StrCat("built with CUDA, runtime ", VersionString(r.runtime_version), " loaded, but the driver (CUDA ",
                              VersionString(r.driver_version), ") cannot run it: ", why);
    } else {
      r.state = Availability::kNoDevice;
      r.detail = StrCat("built with CUDA, driver CUDA ", VersionString(r.driver_version),
                        ", but no GPU is visible: ", why);
    }
    return r;
  }
  r.state = Availability::kAvailable;
  r.device_count = count;
  r.detail = StrCat(count, " CUDA device", count == 1 ? "" : "s", ", driver CUDA ", VersionString(r.driver_version),
                    ", runtime ", VersionString(r.runtime_version));
  return r;
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

const ProbeResult& Probe() {
  // Once per process: devices do not come and go under a CUDA runtime, and
  // the first call may be slow (driver initialisation).
  static const ProbeResult result = [] {
    ProbeResult r = RunProbe();
    DP_LOG(kDebug, "CUDA: ", r.detail);
    return r;
  }();
  return result;
}

int DeviceCount() { return Probe().device_count; }

int DriverVersion() { return Probe().driver_version; }

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
                  "device ", DeviceName(device), " is not available (", count, " cuda devices: ", Probe().detail, ")");
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
