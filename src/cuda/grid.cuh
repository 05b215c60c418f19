// Launch geometry of dp's element-wise CUDA kernels (included by the .cu
// files only): grid-stride loops over int64_t indices, a capped grid of
// 256-thread blocks covering any n.
#pragma once

#include <cstdint>

namespace dp::cuda::grid {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU; larger n loops inside the kernel.
constexpr int64_t kMaxBlocks = 4096;

inline int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__device__ __forceinline__ int64_t FirstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t Stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

}  // namespace dp::cuda::grid
