// Deterministic block reductions for dp's CUDA kernels (included by the .cu
// files only): warp shuffles, then one warp over the warps' results through
// shared memory. The order of the additions depends only on blockDim, never
// on scheduling, so a sum repeats bit for bit run to run (no float atomics).
#pragma once

namespace dp::cuda::reduce {

// Threads per reducing block: a multiple of the warp size, at most 1024.
constexpr int kThreads = 256;

struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};

struct Max {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};

template <typename T, typename Op>
__device__ __forceinline__ T WarpReduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

// v reduced over the block with op (identity: op's neutral value); every
// thread gets the result. Every thread of the block must call it (it
// synchronises), and may call it again at once: the first barrier keeps a
// call's writes from racing the previous call's reads.
template <typename T, typename Op>
__device__ T BlockReduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpReduce(v, op);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    v = WarpReduce(lane < warps ? partial[lane] : identity, op);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

template <typename T>
__device__ T BlockSum(T v) {
  return BlockReduce(v, Sum{}, T(0));
}

}  // namespace dp::cuda::reduce
