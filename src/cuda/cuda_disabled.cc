// CPU-only build (-Dcuda=disabled, or no toolkit found with -Dcuda=auto).
#include "cuda/cuda_runtime.h"

namespace dp::cuda {

bool BuiltWithCuda() { return false; }
int DeviceCount() { return 0; }
int DriverVersion() { return 0; }

}  // namespace dp::cuda
