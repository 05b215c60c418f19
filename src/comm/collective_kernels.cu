// The element-wise kernels of the copy-and-sum tree: grid-stride loops over
// int64_t indices, like kernels.cu.
#include "comm/active_scale.h"
#include "comm/collective_kernels.h"
#include "comm/compressed_sum.h"
#include "core/half_float.h"
#include "cuda/grid.cuh"

namespace dp::cuda {
namespace {

using namespace grid;  // NOLINT: the launch geometry every kernel here shares

template <typename T>
__global__ void AccumulateKernel(T* dst, const T* src, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride())
    dst[i] = dst[i] + src[i];
}

template <typename T>
__global__ void ScaleInPlaceKernel(T* x, T scale, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride())
    x[i] = x[i] * scale;
}

template <typename T>
__global__ void ScaleByActiveKernel(T* x, const float* active, double scale, int64_t n) {
  const T s = static_cast<T>(ActiveScale(scale, *active));
  for (int64_t i = FirstIndex(); i < n; i += Stride())
    x[i] = x[i] * s;
}

__device__ inline float PostScale(double factor, const float* active, double scale) {
  return static_cast<float>(factor * (active != nullptr ? ActiveScale(scale, *active) : scale));
}

// A 16-bit word as H and back (H holds its bits alone).
template <typename H>
__device__ inline H AsHalf(uint16_t bits) {
  H h;
  h.bits = bits;
  return h;
}

template <typename H>
__global__ void RoundThroughKernel(float* x, float pre, double factor, const float* active, double scale, int64_t n) {
  const float post = PostScale(factor, active, scale);
  for (int64_t i = FirstIndex(); i < n; i += Stride()) x[i] = ToFloat(FromFloat<H>(x[i] * pre)) * post;
}

template <typename H>
__global__ void CastScaledKernel(const float* in, float pre, uint16_t* out, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) out[i] = FromFloat<H>(in[i] * pre).bits;
}

template <typename H>
__global__ void SumContributionsKernel(const uint16_t* inbox, int ranks, int64_t chunk, uint16_t* out) {
  const H* in = reinterpret_cast<const H*>(inbox);  // H is its 16 bits (core/half_float.h)
  for (int64_t j = FirstIndex(); j < chunk; j += Stride()) out[j] = SumContributions<H>(in, ranks, chunk, j).bits;
}

template <typename H>
__global__ void UncastScaledKernel(const uint16_t* in, double factor, const float* active, double scale, float* out,
                                   int64_t n) {
  const float post = PostScale(factor, active, scale);
  for (int64_t i = FirstIndex(); i < n; i += Stride()) out[i] = ToFloat(AsHalf<H>(in[i])) * post;
}

}  // namespace

template <typename H>
cudaError_t LaunchRoundThrough(float* x, float pre, double factor, const float* active, double scale, int64_t n,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  RoundThroughKernel<H><<<Blocks(n), kThreads, 0, stream>>>(x, pre, factor, active, scale, n);
  return cudaGetLastError();
}

template <typename H>
cudaError_t LaunchCastScaled(const float* in, float pre, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  CastScaledKernel<H><<<Blocks(n), kThreads, 0, stream>>>(in, pre, out, n);
  return cudaGetLastError();
}

template <typename H>
cudaError_t LaunchSumContributions(const uint16_t* inbox, int ranks, int64_t chunk, uint16_t* out,
                                   cudaStream_t stream) {
  if (chunk <= 0) return cudaSuccess;
  SumContributionsKernel<H><<<Blocks(chunk), kThreads, 0, stream>>>(inbox, ranks, chunk, out);
  return cudaGetLastError();
}

template <typename H>
cudaError_t LaunchUncastScaled(const uint16_t* in, double factor, const float* active, double scale, float* out,
                               int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  UncastScaledKernel<H><<<Blocks(n), kThreads, 0, stream>>>(in, factor, active, scale, out, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchScaleByActive(T* x, const float* active, double scale, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleByActiveKernel<T><<<Blocks(n), kThreads, 0, stream>>>(x, active, scale, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchAccumulate(T* dst, const T* src, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AccumulateKernel<T><<<Blocks(n), kThreads, 0, stream>>>(dst, src, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchScaleInPlace(T* x, T scale, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleInPlaceKernel<T><<<Blocks(n), kThreads, 0, stream>>>(x, scale, n);
  return cudaGetLastError();
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
