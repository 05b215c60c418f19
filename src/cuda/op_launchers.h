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

#include "ops/math/batchnorm.h"
#include "ops/math/binary.h"
#include "ops/math/broadcast.h"
#include "ops/math/conv_geometry.h"
#include "ops/math/fc_bias.h"
#include "ops/math/learning_rate.h"
#include "ops/math/loss_scaling.h"
#include "ops/math/multi_tensor.h"
#include "ops/math/optimizer_updates.h"
#include "ops/math/pool_geometry.h"
#include "ops/math/strided_index.h"

namespace dp::cuda {

// ops/cuda/elementwise_kernels.cu: fills, activations, elementwise math and
// broadcasts, reductions to a broadcast operand's shape, data movement of the
// shape ops (Transpose's gather, Concat's rows) and of a loader's batches
// (rows by index: core's GatherRows on a GPU). Sizes in elements;
// `itemsize` (1, 2, 4 or 8 bytes) where any dtype moves.
#define DP_CUDA_ELEMENTWISE_LAUNCHERS(X)                                                                     \
  X(LaunchFill, (float* y, int64_t n, float value, cudaStream_t stream), (y, n, value, stream))               \
  X(LaunchRelu, (const float* x, float* y, int64_t n, cudaStream_t stream), (x, y, n, stream))                \
  X(LaunchReluGradient, (const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream),         \
    (y, dy, dx, n, stream))                                                                                   \
  X(LaunchSigmoid, (const float* x, float* y, int64_t n, cudaStream_t stream), (x, y, n, stream))             \
  X(LaunchSigmoidGradient, (const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream),      \
    (y, dy, dx, n, stream))                                                                                   \
  X(LaunchTanh, (const float* x, float* y, int64_t n, cudaStream_t stream), (x, y, n, stream))                \
  X(LaunchTanhGradient, (const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream),         \
    (y, dy, dx, n, stream))                                                                                   \
  X(LaunchClip, (const float* x, float* y, int64_t n, float lo, float hi, cudaStream_t stream),               \
    (x, y, n, lo, hi, stream))                                                                                \
  X(LaunchClipGradient,                                                                                       \
    (const float* y, const float* dy, float* dx, int64_t n, float lo, float hi, cudaStream_t stream),         \
    (y, dy, dx, n, lo, hi, stream))                                                                           \
  X(LaunchAdd, (const float* a, const float* b, float* y, int64_t n, cudaStream_t stream), (a, b, y, n, stream)) \
  X(LaunchBinary,                                                                                             \
    (::dp::math::BinaryOp op, const float* a, const float* b, float* y, ::dp::math::BroadcastIndex index,     \
     int64_t n, cudaStream_t stream),                                                                         \
    (op, a, b, y, index, n, stream))                                                                          \
  X(LaunchScale, (const float* x, float scale, float* y, int64_t n, cudaStream_t stream),                     \
    (x, scale, y, n, stream))                                                                                 \
  X(LaunchBroadcastRows, (const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t stream),         \
    (b, y, rows, cols, stream))                                                                               \
  X(LaunchSumReduce,                                                                                          \
    (const float* x, float* y, ::dp::math::ReduceIndex index, int64_t outputs, cudaStream_t stream),          \
    (x, y, index, outputs, stream))                                                                           \
  X(LaunchGather,                                                                                             \
    (const void* x, void* y, ::dp::math::StridedIndex index, int64_t n, int itemsize, cudaStream_t stream),   \
    (x, y, index, n, itemsize, stream))                                                                       \
  X(LaunchCopyRows,                                                                                           \
    (const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows, int64_t row_length,    \
     int itemsize, cudaStream_t stream),                                                                      \
    (src, src_stride, dst, dst_stride, rows, row_length, itemsize, stream))                                   \
  X(LaunchGatherRows,                                                                                         \
    (const void* src, int64_t src_rows, const int64_t* indices, void* dst, int64_t rows, int64_t row_length,  \
     int itemsize, cudaStream_t stream),                                                                      \
    (src, src_rows, indices, dst, rows, row_length, itemsize, stream))

// The nn family: ops/cuda/nn_kernels.cu (FC's bias and relu after its GEMM,
// and before its gradient's: ops/math/fc_bias.h; bias gradients), conv_kernels.cu (im2col / col2im and the column layout of a
// block of images), pool_kernels.cu (max and average pooling).
#define DP_CUDA_NN_LAUNCHERS(X)                                                                               \
  X(LaunchFcBiasActivation, (float* y, const float* b, int64_t m, int64_t n, bool relu, cudaStream_t stream), \
    (y, b, m, n, relu, stream))                                                                               \
  X(LaunchFcBiasGradient,                                                                                     \
    (const float* dy, const float* y, float* dz, float* db, int64_t m, int64_t n, cudaStream_t stream),       \
    (dy, y, dz, db, m, n, stream))                                                                            \
  X(LaunchChannelSums,                                                                                        \
    (const float* x, int64_t outer, int64_t channels, int64_t inner, float* sums, cudaStream_t stream),       \
    (x, outer, channels, inner, sums, stream))                                                                \
  X(LaunchIm2Col, (const float* x, math::ConvGeometry g, int64_t images, float* col, cudaStream_t stream),    \
    (x, g, images, col, stream))                                                                              \
  X(LaunchCol2Im, (const float* col, math::ConvGeometry g, int64_t images, float* dx, cudaStream_t stream),   \
    (col, g, images, dx, stream))                                                                             \
  X(LaunchColumnsToImages,                                                                                    \
    (const float* cols, const float* bias, int64_t images, int64_t channels, int64_t plane, float* y,         \
     cudaStream_t stream),                                                                                    \
    (cols, bias, images, channels, plane, y, stream))                                                         \
  X(LaunchImagesToColumns,                                                                                    \
    (const float* y, int64_t images, int64_t channels, int64_t plane, float* cols, cudaStream_t stream),      \
    (y, images, channels, plane, cols, stream))                                                               \
  X(LaunchMaxPool, (const float* x, math::PoolGeometry g, float* y, cudaStream_t stream), (x, g, y, stream))  \
  X(LaunchPoolArgMax, (const float* x, math::PoolGeometry g, int64_t* argmax, cudaStream_t stream),           \
    (x, g, argmax, stream))                                                                                   \
  X(LaunchMaxPoolGradient,                                                                                    \
    (const int64_t* argmax, const float* dy, math::PoolGeometry g, float* dx, cudaStream_t stream),           \
    (argmax, dy, g, dx, stream))                                                                              \
  X(LaunchAveragePool, (const float* x, math::PoolGeometry g, float* y, cudaStream_t stream),                 \
    (x, g, y, stream))                                                                                        \
  X(LaunchAveragePoolGradient, (const float* dy, math::PoolGeometry g, float* dx, cudaStream_t stream),       \
    (dy, g, dx, stream))

// ops/cuda/softmax_loss_kernels.cu: softmax, losses, accuracy; scalar results
// (loss, accuracy) are written on the device; SoftmaxWithLoss also writes
// its fused gradient dx (when not null) with the factor dx_factor. Scratch: SoftmaxWithLoss 2N
// doubles, its gradient 1, AveragedLoss math::SumPartials(n), Accuracy N int32.
// ops/cuda/batchnorm_kernels.cu: batch norm; partials are
// bn::BnPartialsSize(d) doubles, LaunchBnMoments' sums 3C
// (sum, sums about the mean and of their squares), coeffs 2C (mean, inv_std).
#define DP_CUDA_LOSS_NORM_LAUNCHERS(X)                                                                        \
  X(LaunchSoftmax, (const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream),                 \
    (x, y, rows, cols, stream))                                                                               \
  X(LaunchSoftmaxGradient,                                                                                    \
    (const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, cudaStream_t stream),              \
    (y, dy, dx, rows, cols, stream))                                                                          \
  X(LaunchLogSoftmax, (const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream),            \
    (x, y, rows, cols, stream))                                                                               \
  X(LaunchLogSoftmaxGradient,                                                                                 \
    (const float* y, const float* dy, float* dx, int64_t rows, int64_t cols, cudaStream_t stream),            \
    (y, dy, dx, rows, cols, stream))                                                                          \
  X(LaunchSoftmaxWithLoss,                                                                                    \
    (const float* x, const int32_t* labels, const float* weights, double scale, float* p, float* loss,          \
     double* row_scratch, int64_t rows, int64_t cols, float* dx, float dx_factor, cudaStream_t stream),        \
    (x, labels, weights, scale, p, loss, row_scratch, rows, cols, dx, dx_factor, stream))                     \
  X(LaunchSoftmaxWithLossGradient,                                                                            \
    (const float* p, const int32_t* labels, const float* dloss, const float* weights, double scale, float* dx,  \
     double* weight_sum, int64_t rows, int64_t cols, cudaStream_t stream),                                    \
    (p, labels, dloss, weights, scale, dx, weight_sum, rows, cols, stream))                                   \
  X(LaunchLabelCrossEntropy,                                                                                  \
    (const float* x, const int32_t* labels, float* y, int64_t rows, int64_t cols, cudaStream_t stream),         \
    (x, labels, y, rows, cols, stream))                                                                       \
  X(LaunchLabelCrossEntropyGradient,                                                                          \
    (const float* x, const int32_t* labels, const float* dy, float* dx, int64_t rows, int64_t cols,             \
     cudaStream_t stream),                                                                                    \
    (x, labels, dy, dx, rows, cols, stream))                                                                  \
  X(LaunchAveragedLoss, (const float* x, float* loss, double* partials, int64_t n, cudaStream_t stream),        \
    (x, loss, partials, n, stream))                                                                           \
  X(LaunchAveragedLossGradient, (const float* dloss, float* dx, int64_t n, cudaStream_t stream),                \
    (dloss, dx, n, stream))                                                                                   \
  X(LaunchSquaredL2Distance,                                                                                  \
    (const float* x, const float* y, float* z, int64_t rows, int64_t cols, cudaStream_t stream),               \
    (x, y, z, rows, cols, stream))                                                                            \
  X(LaunchSquaredL2DistanceGradient,                                                                          \
    (const float* x, const float* y, const float* dz, float* dx, int64_t rows, int64_t cols,                    \
     cudaStream_t stream),                                                                                    \
    (x, y, dz, dx, rows, cols, stream))                                                                       \
  X(LaunchAccuracy,                                                                                           \
    (const float* x, const int32_t* labels, int64_t top_k, float* accuracy, int32_t* row_correct, int64_t rows, \
     int64_t cols, cudaStream_t stream),                                                                      \
    (x, labels, top_k, accuracy, row_correct, rows, cols, stream))                                            \
  X(LaunchBnMoments, (const float* x, bn::BnDims d, double* partials, double* sums, cudaStream_t stream),       \
    (x, d, partials, sums, stream))                                                                           \
  X(LaunchBnTrainingFinalize,                                                                                 \
    (const float* running_mean, const float* running_var, bn::BnSums sums, bn::BnCount count, int64_t channels, \
     double epsilon, double momentum, double* coeffs, float* new_running_mean, float* new_running_var,          \
     float* saved_mean, float* saved_inv_std, cudaStream_t stream),                                           \
    (running_mean, running_var, sums, count, channels, epsilon, momentum, coeffs, new_running_mean,            \
     new_running_var, saved_mean, saved_inv_std, stream))                                                     \
  X(LaunchBnInferenceCoefficients,                                                                            \
    (const float* running_mean, const float* running_var, int64_t channels, double epsilon, double* coeffs,     \
     cudaStream_t stream),                                                                                    \
    (running_mean, running_var, channels, epsilon, coeffs, stream))                                           \
  X(LaunchBnNormalize,                                                                                        \
    (const float* x, const float* scale, const float* bias, const double* coeffs, bn::BnDims d, float* y,       \
     cudaStream_t stream),                                                                                    \
    (x, scale, bias, coeffs, d, y, stream))                                                                   \
  X(LaunchBnGradSums,                                                                                         \
    (const float* x, const float* dy, const float* mean, const float* inv_std, bn::BnDims d, double* partials,  \
     double* sums, cudaStream_t stream),                                                                      \
    (x, dy, mean, inv_std, d, partials, sums, stream))                                                        \
  X(LaunchBnBackward,                                                                                         \
    (const float* x, const float* dy, const float* scale, const float* mean, const float* inv_std,              \
     const double* sum_dy, const double* sum_dy_xhat, bn::BnCount count, bn::BnDims d, float* dx,              \
     cudaStream_t stream),                                                                                    \
    (x, dy, scale, mean, inv_std, sum_dy, sum_dy_xhat, count, d, dx, stream))                                 \
  X(LaunchBnStoreGradSums,                                                                                    \
    (const double* sum_dy, const double* sum_dy_xhat, int64_t channels, double count, float* dscale,            \
     float* dbias, double* gstats, cudaStream_t stream),                                                      \
    (sum_dy, sum_dy_xhat, channels, count, dscale, dbias, gstats, stream))                                    \
  X(LaunchBnStatsPack, (const double* sums, int64_t channels, double count, double* stats, cudaStream_t stream), \
    (sums, channels, count, stats, stream))

// ops/cuda/random_optimizer_kernels.cu: random fills, dropout, optimizer updates,
// the step counter and learning rate on the device (one thread each:
// Iter adds 1, saturating; LearningRate writes lr32 or lr64 from iter as
// ops/math/learning_rate.h says, step 0 for an iter below 1), and dynamic
// loss scaling (ops/math/loss_scaling.h: the gradients of `list` (param =
// the gradient) divided by *scale, *found set to 1 on a non-finite element
// and left otherwise (the caller zeroes it first); the gate; the scale's
// update). An update whose *lr is NaN leaves everything (SkipsUpdate).
// The fills and dropout draw from Philox (core/philox.h) as the CPU does, so
// their outputs are the CPU's bit for bit. The updates run in place; g2 is
// null or a second gradient added to g; lr (float32) and iter (Adam's int64
// step, >= 1) are read on the device, so no host waits for them. The
// multi-tensor updates run `blocks` blocks over `list`, a launch of
// PlanMultiTensorLaunches (ops/math/multi_tensor.h).
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
    (w, wg, delta, n, block_lr, block_momentum, nesterov, stream))                                            \
  X(LaunchMultiTensorSgd,                                                                                     \
    (::dp::MultiTensorList list, int64_t blocks, const float* lr, float weight_decay, cudaStream_t stream),    \
    (list, blocks, lr, weight_decay, stream))                                                                 \
  X(LaunchMultiTensorMomentumSgd,                                                                             \
    (::dp::MultiTensorList list, int64_t blocks, const float* lr, float mu, float weight_decay, bool nesterov, \
     cudaStream_t stream),                                                                                    \
    (list, blocks, lr, mu, weight_decay, nesterov, stream))                                                   \
  X(LaunchMultiTensorAdam,                                                                                    \
    (::dp::MultiTensorList list, int64_t blocks, const float* lr, const int64_t* iter, AdamHyper hyper,        \
     cudaStream_t stream),                                                                                    \
    (list, blocks, lr, iter, hyper, stream))                                                                  \
  X(LaunchMultiTensorAdagrad,                                                                                 \
    (::dp::MultiTensorList list, int64_t blocks, const float* lr, float epsilon, float decay,                  \
     float weight_decay, cudaStream_t stream),                                                                \
    (list, blocks, lr, epsilon, decay, weight_decay, stream))                                                 \
  X(LaunchUnscaleGradients,                                                                                   \
    (::dp::MultiTensorList list, int64_t blocks, const float* scale, float* found, cudaStream_t stream),       \
    (list, blocks, scale, found, stream))                                                                     \
  X(LaunchGateLearningRate, (const float* lr, const float* found, float* lr_step, cudaStream_t stream),        \
    (lr, found, lr_step, stream))                                                                             \
  X(LaunchUpdateLossScale,                                                                                    \
    (float* scale, float* good_steps, const float* found, ::dp::math::LossScaleArgs args, cudaStream_t stream), \
    (scale, good_steps, found, args, stream))                                                                 \
  X(LaunchIterIncrement, (int64_t* iter, cudaStream_t stream), (iter, stream))                                \
  X(LaunchLearningRate,                                                                                       \
    (const int64_t* iter, ::dp::math::LrSchedule schedule, float* lr32, double* lr64, cudaStream_t stream),     \
    (iter, schedule, lr32, lr64, stream))

#define DP_CUDA_KERNEL_LAUNCHERS(X)      \
  DP_CUDA_ELEMENTWISE_LAUNCHERS(X)       \
  DP_CUDA_NN_LAUNCHERS(X)                \
  DP_CUDA_LOSS_NORM_LAUNCHERS(X)         \
  DP_CUDA_RANDOM_OPTIMIZER_LAUNCHERS(X)

#define DP_CUDA_DECLARE_LAUNCHER_(name, params, args) cudaError_t name params;
DP_CUDA_KERNEL_LAUNCHERS(DP_CUDA_DECLARE_LAUNCHER_)
#undef DP_CUDA_DECLARE_LAUNCHER_

}  // namespace dp::cuda
