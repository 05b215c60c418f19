// libdp's launchers of comm/collective_kernels.h: each instantiation forwards
// to the CUDA module's table (cuda/module_api.h), where the kernels live.
#include "comm/collective_kernels.h"
#include "core/dtype.h"  // BFloat16, Half
#include "cuda/module_api.h"
#include "cuda/module_loader.h"

namespace dp::cuda {
namespace {

// The table's launchers of each element type (the instantiations that
// collective_kernels.cu makes).
template <typename T>
struct TableLaunchers;
template <>
struct TableLaunchers<float> {
  static constexpr auto kAccumulate = &ModuleApi::LaunchAccumulateF32;
  static constexpr auto kScaleInPlace = &ModuleApi::LaunchScaleInPlaceF32;
  static constexpr auto kScaleByActive = &ModuleApi::LaunchScaleByActiveF32;
};
template <>
struct TableLaunchers<double> {
  static constexpr auto kAccumulate = &ModuleApi::LaunchAccumulateF64;
  static constexpr auto kScaleInPlace = &ModuleApi::LaunchScaleInPlaceF64;
  static constexpr auto kScaleByActive = &ModuleApi::LaunchScaleByActiveF64;
};
template <>
struct TableLaunchers<BFloat16> {
  static constexpr auto kRoundThrough = &ModuleApi::LaunchRoundThroughBF16;
  static constexpr auto kCastScaled = &ModuleApi::LaunchCastScaledBF16;
  static constexpr auto kSumContributions = &ModuleApi::LaunchSumContributionsBF16;
  static constexpr auto kUncastScaled = &ModuleApi::LaunchUncastScaledBF16;
};
template <>
struct TableLaunchers<Half> {
  static constexpr auto kRoundThrough = &ModuleApi::LaunchRoundThroughF16;
  static constexpr auto kCastScaled = &ModuleApi::LaunchCastScaledF16;
  static constexpr auto kSumContributions = &ModuleApi::LaunchSumContributionsF16;
  static constexpr auto kUncastScaled = &ModuleApi::LaunchUncastScaledF16;
};
template <>
struct TableLaunchers<int32_t> {
  static constexpr auto kAccumulate = &ModuleApi::LaunchAccumulateI32;
};
template <>
struct TableLaunchers<int64_t> {
  static constexpr auto kAccumulate = &ModuleApi::LaunchAccumulateI64;
};

// Calls the table's launcher, or fails as the runtime would without a module.
template <typename Launcher, typename... Args>
cudaError_t Forward(Launcher ModuleApi::*launcher, Args... args) {
  const ModuleApi* api = Module();
  return api != nullptr ? (api->*launcher)(args...) : cudaErrorSharedObjectInitFailed;
}

}  // namespace

template <typename T>
cudaError_t LaunchAccumulate(T* dst, const T* src, int64_t n, cudaStream_t stream) {
  return Forward(TableLaunchers<T>::kAccumulate, dst, src, n, stream);
}

template <typename T>
cudaError_t LaunchScaleInPlace(T* x, T scale, int64_t n, cudaStream_t stream) {
  return Forward(TableLaunchers<T>::kScaleInPlace, x, scale, n, stream);
}

template <typename T>
cudaError_t LaunchScaleByActive(T* x, const float* active, double scale, int64_t n, cudaStream_t stream) {
  return Forward(TableLaunchers<T>::kScaleByActive, x, active, scale, n, stream);
}

template <typename H>
cudaError_t LaunchRoundThrough(float* x, float pre, double factor, const float* active, double scale, int64_t n,
                               cudaStream_t stream) {
  return Forward(TableLaunchers<H>::kRoundThrough, x, pre, factor, active, scale, n, stream);
}

template <typename H>
cudaError_t LaunchCastScaled(const float* in, float pre, uint16_t* out, int64_t n, cudaStream_t stream) {
  return Forward(TableLaunchers<H>::kCastScaled, in, pre, out, n, stream);
}

template <typename H>
cudaError_t LaunchSumContributions(const uint16_t* inbox, int ranks, int64_t chunk, uint16_t* out,
                                   cudaStream_t stream) {
  return Forward(TableLaunchers<H>::kSumContributions, inbox, ranks, chunk, out, stream);
}

template <typename H>
cudaError_t LaunchUncastScaled(const uint16_t* in, double factor, const float* active, double scale, float* out,
                               int64_t n, cudaStream_t stream) {
  return Forward(TableLaunchers<H>::kUncastScaled, in, factor, active, scale, out, n, stream);
}

template cudaError_t LaunchAccumulate<float>(float*, const float*, int64_t, cudaStream_t);
template cudaError_t LaunchAccumulate<double>(double*, const double*, int64_t, cudaStream_t);
template cudaError_t LaunchAccumulate<int32_t>(int32_t*, const int32_t*, int64_t, cudaStream_t);
template cudaError_t LaunchAccumulate<int64_t>(int64_t*, const int64_t*, int64_t, cudaStream_t);
template cudaError_t LaunchScaleInPlace<float>(float*, float, int64_t, cudaStream_t);
template cudaError_t LaunchScaleInPlace<double>(double*, double, int64_t, cudaStream_t);
template cudaError_t LaunchScaleByActive<float>(float*, const float*, double, int64_t, cudaStream_t);
template cudaError_t LaunchScaleByActive<double>(double*, const float*, double, int64_t, cudaStream_t);
DP_COMPRESSED_LAUNCHER_INSTANTIATIONS(BFloat16)
DP_COMPRESSED_LAUNCHER_INSTANTIATIONS(Half)

}  // namespace dp::cuda
