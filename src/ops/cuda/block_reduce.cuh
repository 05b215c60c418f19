// Deterministic block-wide sums for dp's CUDA reductions (included by .cu
// files only): warp shuffles, then the warps' partial sums combined by warp
// 0 through shared memory. The order of the additions depends only on the
// block size, never on scheduling, so a sum repeats bitwise run after run.
#pragma once

namespace dp::cuda {

constexpr int kWarpSize = 32;

template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of v over the block, valid in thread 0. blockDim.x must be a
// multiple of 32 (at most 1024); `partials` holds blockDim.x / 32 values in
// shared memory. Every thread of the block must call it; it may be called
// again right after (it synchronises before returning).
template <typename T>
__device__ T BlockSum(T v, T* partials) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = WarpSum(v);
  if (lane == 0) partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / kWarpSize) ? partials[lane] : T(0);
    v = WarpSum(v);
  }
  __syncthreads();
  return v;
}

}  // namespace dp::cuda
