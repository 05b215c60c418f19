// CPU-only build (-Dcuda=disabled, or no toolkit found with -Dcuda=auto).
#include "cuda/cuda_runtime.h"

namespace dp::cuda {

bool BuiltWithCuda() { return false; }

const ProbeResult& Probe() {
  static const ProbeResult result = [] {
    ProbeResult r;
    r.detail = "built without CUDA";
    return r;
  }();
  return result;
}

int DeviceCount() { return 0; }
int DriverVersion() { return 0; }

}  // namespace dp::cuda
