// Kernels the nn family's ops share (cuda/op_launchers.h): the per-channel
// sums of bias gradients. (FC's fused relu gradient is ReluGradient's kernel.)
#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"

namespace dp::cuda {
namespace {

using namespace grid;  // NOLINT: the launch geometry every kernel here shares

// One block per channel: each thread sums a strided share of the channel's
// outer * inner elements, then the block adds the partial sums in a fixed
// tree; so the result does not vary between runs.
__global__ void ChannelSumsKernel(const float* x, int64_t outer, int64_t channels, int64_t inner, float* sums) {
  __shared__ float partial[kThreads];
  const int64_t count = outer * inner;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    float acc = 0.0f;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
      const int64_t o = e / inner, i = e % inner;
      acc += x[(o * channels + c) * inner + i];
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[c] = partial[0];
    __syncthreads();  // partial is refilled for the next channel
  }
}

}  // namespace

// x [outer, channels, inner] -> sums [channels] (zeros when outer * inner is 0).
cudaError_t LaunchChannelSums(const float* x, int64_t outer, int64_t channels, int64_t inner, float* sums,
                              cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  const int blocks = static_cast<int>(channels < kMaxBlocks ? channels : kMaxBlocks);
  ChannelSumsKernel<<<blocks, kThreads, 0, stream>>>(x, outer, channels, inner, sums);
  return cudaGetLastError();
}

}  // namespace dp::cuda
