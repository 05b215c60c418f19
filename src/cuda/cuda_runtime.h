// What the rest of the engine needs to know about CUDA, whether or not dp
// was built with it. Without CUDA (or without its module, runtime, driver or
// a GPU) dp simply has zero CUDA devices, and Probe() says why.
#pragma once

#include <string>

namespace dp::cuda {

bool BuiltWithCuda();

// Why there are CUDA devices or not. The values are the C API's
// DP_CUDA_STATE_* (dp_build_info.cuda_state).
enum class Availability {
  kNotBuilt = 0,        // dp was built without CUDA
  kAvailable = 1,       // the module, runtime and driver loaded, and at least one GPU is visible
  kModuleNotFound = 2,  // built with CUDA, but libdp_cuda.so is not where libdp looks for it
  kRuntimeMissing = 3,  // the module is there but does not load: the CUDA libraries it needs are missing
  kModuleMismatch = 4,  // the module belongs to another build of dp
  kNoDriver = 5,        // no CUDA driver, or one too old for the runtime
  kNoDevice = 6,        // a driver, but no GPU visible (CUDA_VISIBLE_DEVICES, containers)
};

struct ProbeResult {
  Availability state = Availability::kNotBuilt;
  int device_count = 0;
  int driver_version = 0;   // cudaDriverGetVersion: 1000 major + 10 minor; 0 without a driver
  int runtime_version = 0;  // cudaRuntimeGetVersion of the runtime the module loaded; 0 if none
  std::string detail;       // one line: what was found and why CUDA is (un)available
  std::string module_path;  // the module loaded or tried; "" when built without CUDA
};

// Loads the module and asks the runtime once per process, on the first call
// (which may take a moment: the runtime initialises the driver); later calls
// return at once. Any thread; never throws.
const ProbeResult& Probe();

// Visible CUDA devices: Probe().device_count. Asking loads the module.
int DeviceCount();
// Probe().driver_version.
int DriverVersion();

}  // namespace dp::cuda
