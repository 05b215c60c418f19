// Kernels the nn family's ops share (cuda/op_launchers.h): FC's bias and
// relu around its GEMMs (ops/math/fc_bias.h), the per-channel sums of bias
// gradients.
#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"

namespace dp::cuda {
namespace {

using namespace grid;  // NOLINT: the launch geometry every kernel here shares

// Y = act(Y + b) over Y [m, n], after the GEMM.
__global__ void FcBiasActivationKernel(float* y, const float* b, int64_t total, int64_t n, bool relu) {
  for (int64_t i = FirstIndex(); i < total; i += Stride()) y[i] = math::FcBiasActivation(y[i], b[i % n], relu);
}

// A block per tile of math::kFcBiasCols columns (grid-stride over tiles),
// kFcBiasRowGroups threads per column; see ops/math/fc_bias.h.
__global__ void FcBiasGradientKernel(const float* dy, const float* y, float* dz, float* db, int64_t m, int64_t n) {
  __shared__ float partial[math::kFcBiasRowGroups][math::kFcBiasCols];
  const int col = static_cast<int>(threadIdx.x), group = static_cast<int>(threadIdx.y);
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * math::kFcBiasCols; first < n;
       first += static_cast<int64_t>(gridDim.x) * math::kFcBiasCols) {
    const int64_t c = first + col;
    partial[group][col] = c < n ? math::FcBiasGradientPartial(dy, y, dz, m, n, c, group) : 0.0f;
    __syncthreads();
    if (group == 0 && c < n) {
      float sum = 0.0f;
      for (int g = 0; g < math::kFcBiasRowGroups; ++g) sum += partial[g][col];
      db[c] = sum;
    }
    __syncthreads();  // partial is refilled for the next tile
  }
}

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

cudaError_t LaunchFcBiasActivation(float* y, const float* b, int64_t m, int64_t n, bool relu, cudaStream_t stream) {
  const int64_t total = m * n;
  if (total <= 0) return cudaSuccess;
  FcBiasActivationKernel<<<Blocks(total), kThreads, 0, stream>>>(y, b, total, n, relu);
  return cudaGetLastError();
}

// dy [m, n] -> db [n] (zeros when m is 0), and with y dZ [m, n].
cudaError_t LaunchFcBiasGradient(const float* dy, const float* y, float* dz, float* db, int64_t m, int64_t n,
                                 cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t tiles = (n + math::kFcBiasCols - 1) / math::kFcBiasCols;
  const dim3 threads(math::kFcBiasCols, math::kFcBiasRowGroups);
  FcBiasGradientKernel<<<static_cast<int>(tiles < kMaxBlocks ? tiles : kMaxBlocks), threads, 0, stream>>>(
      dy, y, dz, db, m, n);
  return cudaGetLastError();
}

// x [outer, channels, inner] -> sums [channels] (zeros when outer * inner is 0).
cudaError_t LaunchChannelSums(const float* x, int64_t outer, int64_t channels, int64_t inner, float* sums,
                              cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  const int blocks = static_cast<int>(channels < kMaxBlocks ? channels : kMaxBlocks);
  ChannelSumsKernel<<<blocks, kThreads, 0, stream>>>(x, outer, channels, inner, sums);
  return cudaGetLastError();
}

}  // namespace dp::cuda
