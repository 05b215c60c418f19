// The element-wise kernels of the copy-and-sum tree: grid-stride loops over
// int64_t indices, like kernels.cu.
#include "cuda/collective_kernels.h"

namespace dp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // larger n loops inside the kernel

int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

template <typename T>
__global__ void AccumulateKernel(T* dst, const T* src, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = dst[i] + src[i];
}

template <typename T>
__global__ void ScaleInPlaceKernel(T* x, T scale, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = x[i] * scale;
}

}  // namespace

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

}  // namespace dp::cuda
