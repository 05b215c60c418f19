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

#include "ops/math/optimizer_updates.h"

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
// The fills and dropout draw from Philox (core/philox.h) as the CPU does, so
// their outputs are the CPU's bit for bit. The updates run in place; g2 is
// null or a second gradient added to g; lr (float32) and iter (Adam's int64
// step, >= 1) are read on the device, so no host waits for them.
#define DP_CUDA_RANDOM_OPTIMIZER_LAUNCHERS(X)                                                                  \
  X(LaunchUniformFill, (float* y, int64_t n, uint64_t seed, double lo, double hi, cudaStream_t stream),        \
    (y, n, seed, lo, hi, stream))                                                                             \
  X(LaunchGaussianFill, (float* y, int64_t n, uint64_t seed, double mean, double stdev, cudaStream_t stream),   \
    (y, n, seed, mean, stdev, stream))                                                                        \
  X(LaunchDropout,                                                                                            \
    (const float* x, float* y, uint8_t* mask, int64_t n, uint64_t seed, const int64_t* counter, uint64_t run,  \
     uint32_t threshold, float scale, cudaStream_t stream),                                                   \
    (x, y, mask, n, seed, counter, run, threshold, scale, stream))                                            \
  X(LaunchDropoutGradient, (const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale,           \
                            cudaStream_t stream),                                                             \
    (dy, mask, dx, n, scale, stream))                                                                         \
  X(LaunchSgd, (float* p, const float* g, const float* g2, int64_t n, const float* lr, float weight_decay,     \
                cudaStream_t stream),                                                                         \
    (p, g, g2, n, lr, weight_decay, stream))                                                                  \
  X(LaunchMomentumSgd,                                                                                        \
    (float* p, const float* g, const float* g2, float* momentum, int64_t n, const float* lr, float mu,          \
     float weight_decay, bool nesterov, cudaStream_t stream),                                                 \
    (p, g, g2, momentum, n, lr, mu, weight_decay, nesterov, stream))                                          \
  X(LaunchAdam,                                                                                               \
    (float* p, const float* g, const float* g2, float* m, float* v, int64_t n, const float* lr,                \
     const int64_t* iter, AdamHyper hyper, cudaStream_t stream),                                              \
    (p, g, g2, m, v, n, lr, iter, hyper, stream))                                                             \
  X(LaunchAdagrad,                                                                                            \
    (float* p, const float* g, const float* g2, float* h, int64_t n, const float* lr, float epsilon,           \
     float decay, float weight_decay, cudaStream_t stream),                                                   \
    (p, g, g2, h, n, lr, epsilon, decay, weight_decay, stream))                                               \
  X(LaunchBmufUpdate,                                                                                         \
    (float* w, float* wg, float* delta, int64_t n, float block_lr, float block_momentum, bool nesterov,        \
     cudaStream_t stream),                                                                                    \
    (w, wg, delta, n, block_lr, block_momentum, nesterov, stream))

#define DP_CUDA_KERNEL_LAUNCHERS(X)      \
  DP_CUDA_ELEMENTWISE_LAUNCHERS(X)       \
  DP_CUDA_NN_LAUNCHERS(X)                \
  DP_CUDA_LOSS_NORM_LAUNCHERS(X)         \
  DP_CUDA_RANDOM_OPTIMIZER_LAUNCHERS(X)

#define DP_CUDA_DECLARE_LAUNCHER_(name, params, args) cudaError_t name params;
DP_CUDA_KERNEL_LAUNCHERS(DP_CUDA_DECLARE_LAUNCHER_)
#undef DP_CUDA_DECLARE_LAUNCHER_

}  // namespace dp::cuda
