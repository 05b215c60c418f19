// The element-wise kernels of the copy-and-sum tree: grid-stride loops over
// int64_t indices, like kernels.cu.
#include "comm/active_scale.h"
#include "comm/collective_kernels.h"
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

}  // namespace

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

}  // namespace dp::cuda
