// libdp_cuda.so: dp's CUDA module. It holds what links the CUDA libraries —
// dp's kernels (ops/cuda/*_kernels.cu, comm/collective_kernels.cu) and the CUDA
// runtime, cuBLAS and NCCL it depends on — and hands libdp one table of
// their functions (cuda/module_api.h). It exports that function only.
#include "comm/collective_kernels.h"
#include "core/dtype.h"  // BFloat16, Half
#include "cuda/op_launchers.h"
#include "cuda/module_api.h"
#include "dp_config.h"

namespace dp::cuda {
namespace {

ModuleApi MakeTable() {
  ModuleApi api{};
  api.struct_size = sizeof(ModuleApi);
  api.abi = kModuleAbi;
  api.dp_version = DP_VERSION_STRING;
#define DP_CUDA_SET_FUNCTION_(ret, name, params, args) api.name = &::name;
  DP_CUDA_LIBRARY_FUNCTIONS(DP_CUDA_SET_FUNCTION_)
#undef DP_CUDA_SET_FUNCTION_
#define DP_CUDA_SET_LAUNCHER_(name, params, args) api.name = &name;
  DP_CUDA_KERNEL_LAUNCHERS(DP_CUDA_SET_LAUNCHER_)
#undef DP_CUDA_SET_LAUNCHER_
  api.LaunchAccumulateF32 = &LaunchAccumulate<float>;
  api.LaunchAccumulateF64 = &LaunchAccumulate<double>;
  api.LaunchAccumulateI32 = &LaunchAccumulate<int32_t>;
  api.LaunchAccumulateI64 = &LaunchAccumulate<int64_t>;
  api.LaunchScaleInPlaceF32 = &LaunchScaleInPlace<float>;
  api.LaunchScaleInPlaceF64 = &LaunchScaleInPlace<double>;
  api.LaunchScaleByActiveF32 = &LaunchScaleByActive<float>;
  api.LaunchScaleByActiveF64 = &LaunchScaleByActive<double>;
  api.LaunchRoundThroughBF16 = &LaunchRoundThrough<BFloat16>;
  api.LaunchCastScaledBF16 = &LaunchCastScaled<BFloat16>;
  api.LaunchSumContributionsBF16 = &LaunchSumContributions<BFloat16>;
  api.LaunchUncastScaledBF16 = &LaunchUncastScaled<BFloat16>;
  api.LaunchRoundThroughF16 = &LaunchRoundThrough<Half>;
  api.LaunchCastScaledF16 = &LaunchCastScaled<Half>;
  api.LaunchSumContributionsF16 = &LaunchSumContributions<Half>;
  api.LaunchUncastScaledF16 = &LaunchUncastScaled<Half>;
  return api;
}

}  // namespace
}  // namespace dp::cuda

extern "C" __attribute__((visibility("default"))) const dp::cuda::ModuleApi* dp_cuda_module_get() {
  static const dp::cuda::ModuleApi api = dp::cuda::MakeTable();
  return &api;
}
