// Finds libdp_cuda.so, loads it once and checks that it is this build's.
#include "cuda/module_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "dp_config.h"

namespace dp::cuda {
namespace {

// The directory of the shared object (or executable) holding this code:
// libdp.so's, whose dp/ holds the module.
std::string OwnDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ModuleSearchPath), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  // A relative name is relative to the directory the process started in;
  // resolve it while that is still likely the current one.
  if (!path.empty() && path[0] != '/') {
    if (char* real = realpath(path.c_str(), nullptr)) {
      path = real;
      free(real);
    }
  }
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// Every function of the table is set: a module that left one out would
// crash on first use instead of failing here.
bool TableComplete(const ModuleApi& api, std::string* missing) {
#define DP_CUDA_CHECK_FUNCTION_(ret, name, params, args) \
  if (api.name == nullptr) *missing = #name;
  DP_CUDA_LIBRARY_FUNCTIONS(DP_CUDA_CHECK_FUNCTION_)
#undef DP_CUDA_CHECK_FUNCTION_
#define DP_CUDA_CHECK_LAUNCHER_(name, params, args) \
  if (api.name == nullptr) *missing = #name;
  DP_CUDA_KERNEL_LAUNCHERS(DP_CUDA_CHECK_LAUNCHER_)
  DP_CUDA_COLLECTIVE_LAUNCHERS(DP_CUDA_CHECK_LAUNCHER_)
#undef DP_CUDA_CHECK_LAUNCHER_
  return missing->empty();
}

struct Loaded {
  ModuleLoadReport report;
  const ModuleApi* api = nullptr;
};

Loaded Load() {
  Loaded out;
  ModuleLoadReport& r = out.report;
  r.path = ModuleSearchPath();
  // RTLD_LOCAL: the CUDA libraries' symbols stay out of the process's global
  // scope. RTLD_NODELETE: never unloaded (the runtime keeps state and
  // threads for the life of the process).
  void* handle = dlopen(r.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* err = dlerror();
    r.detail = err != nullptr ? err : "dlopen failed";
    // The module itself missing, or a library it needs?
    struct stat st {};
    const bool exists = r.path.find('/') != std::string::npos
                            ? stat(r.path.c_str(), &st) == 0
                            : r.detail.rfind(r.path + ":", 0) != 0;  // dlerror names the file it could not open
    r.reason = exists ? Availability::kRuntimeMissing : Availability::kModuleNotFound;
    return out;
  }
  r.reason = Availability::kModuleMismatch;
  auto entry = reinterpret_cast<ModuleEntryFn>(dlsym(handle, kModuleEntryPoint));
  if (entry == nullptr) {
    r.detail = StrCat("it has no ", kModuleEntryPoint);
    return out;
  }
  const ModuleApi* api = entry();
  std::string missing;
  if (api == nullptr) {
    r.detail = StrCat(kModuleEntryPoint, " returned no table");
  } else if (api->abi != kModuleAbi || api->struct_size != sizeof(ModuleApi) || api->dp_version == nullptr ||
             std::strcmp(api->dp_version, DP_VERSION_STRING) != 0) {
    r.detail = StrCat("it is dp ", api->dp_version != nullptr ? api->dp_version : "?", " with module ABI ", api->abi,
                      " and a table of ", api->struct_size, " bytes; libdp is dp ", DP_VERSION_STRING,
                      " with module ABI ", kModuleAbi, " and ", sizeof(ModuleApi), " bytes");
  } else if (!TableComplete(*api, &missing)) {
    r.detail = StrCat("its table has no ", missing);
  } else {
    r.loaded = true;
    r.reason = Availability::kAvailable;
    out.api = api;
  }
  return out;
}

const Loaded& Once() {
  static const Loaded loaded = Load();
  return loaded;
}

}  // namespace

std::string ModuleSearchPath() {
  if (const char* env = std::getenv("DP_CUDA_MODULE"); env != nullptr && env[0] != '\0') return env;
  const std::string dir = OwnDirectory();
  return dir.empty() ? std::string(kModuleFileName) : StrCat(dir, "/", kModuleDirectory, "/", kModuleFileName);
}

const ModuleApi* Module() { return Once().api; }

const ModuleLoadReport& LoadReport() { return Once().report; }

}  // namespace dp::cuda
