// Loading the CUDA module (libdp_cuda.so) on demand, and why CUDA is absent
// when it is. Only compiled in CUDA builds; see cuda/module_api.h.
#pragma once

#include <string>

#include "cuda/cuda_runtime.h"
#include "cuda/module_api.h"

namespace dp::cuda {

// The module's table, loading the module on the first call (any thread;
// later calls return at once). nullptr when it cannot be loaded: no file
// beside libdp, the CUDA libraries it needs are missing, or it belongs to
// another build; LoadReport() says which.
const ModuleApi* Module();

struct ModuleLoadReport {
  bool loaded = false;
  Availability reason = Availability::kAvailable;  // kModuleNotFound / kRuntimeMissing / kModuleMismatch
  std::string path;    // the file loaded, or the one tried last
  std::string detail;  // dlerror's text or the mismatch
};
// The outcome of the load (loads first if nobody has asked yet).
const ModuleLoadReport& LoadReport();

// Where the module is looked for, in order: the DP_CUDA_MODULE environment
// variable (a path to the file; for tests and unusual installs), then the
// subdirectory dp/ of the directory of the object that holds this code
// (libdp.so: $libdir/dp/libdp_cuda.so, and capi/dp/ in the build tree).
// Exposed for tests.
std::string ModuleSearchPath();

}  // namespace dp::cuda
