// The launchers of the ops' CUDA kernels (ops/cuda/*_kernels.cu), as X-macro
// lists X(name, (parameters), (arguments)); each launcher returns
// cudaError_t: cudaSuccess, or the launch error (cudaGetLastError). Every
// launcher queues its work on `stream` and returns without waiting; sizes
// are elements, and an empty size launches nothing.
//
// The lists are the one place a launcher's signature is written: this header
// declares the functions from them (the .cu files define them), the CUDA
// module puts them in its table and libdp forwards to the table
// (cuda/module_api.h). One list per family of ops, as ops/cpu groups them;
// a new kernel is one line in its family's list. Parameter types are plain
// values, pointers and the DP_HD geometry structs of ops/math.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dp::cuda {

// ops/cuda/elementwise_kernels.cu: fills, activations, elementwise math and
// broadcasts, shape ops.
#define DP_CUDA_ELEMENTWISE_LAUNCHERS(X)                                                                     \
  X(LaunchFill, (float* y, int64_t n, float value, cudaStream_t stream), (y, n, value, stream))               \
  X(LaunchRelu, (const float* x, float* y, int64_t n, cudaStream_t stream), (x, y, n, stream))                \
  X(LaunchAdd, (const float* a, const float* b, float* y, int64_t n, cudaStream_t stream), (a, b, y, n, stream)) \
  X(LaunchScale, (const float* x, float scale, float* y, int64_t n, cudaStream_t stream),                     \
    (x, scale, y, n, stream))                                                                                 \
  X(LaunchBroadcastRows, (const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t stream),         \
    (b, y, rows, cols, stream))

// ops/cuda/nn_kernels.cu: FC and Conv helpers (bias, im2col/col2im), pooling.
#define DP_CUDA_NN_LAUNCHERS(X)

// ops/cuda/loss_norm_kernels.cu: softmax, losses, accuracy, batch norm.
#define DP_CUDA_LOSS_NORM_LAUNCHERS(X)

// ops/cuda/random_optimizer_kernels.cu: random fills, dropout, optimizer updates.
#define DP_CUDA_RANDOM_OPTIMIZER_LAUNCHERS(X)

#define DP_CUDA_KERNEL_LAUNCHERS(X)      \
  DP_CUDA_ELEMENTWISE_LAUNCHERS(X)       \
  DP_CUDA_NN_LAUNCHERS(X)                \
  DP_CUDA_LOSS_NORM_LAUNCHERS(X)         \
  DP_CUDA_RANDOM_OPTIMIZER_LAUNCHERS(X)

#define DP_CUDA_DECLARE_LAUNCHER_(name, params, args) cudaError_t name params;
DP_CUDA_KERNEL_LAUNCHERS(DP_CUDA_DECLARE_LAUNCHER_)
#undef DP_CUDA_DECLARE_LAUNCHER_

}  // namespace dp::cuda
