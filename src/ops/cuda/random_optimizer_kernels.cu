// The random_optimizer family's CUDA kernels (cuda/op_launchers.h): random
// fills and dropout on Philox (core/philox.h, the CPU's numbers bit for bit),
// and the optimizer updates on the formulas the CPU kernels run
// (ops/math/optimizer_updates.h). Grid-stride loops over int64_t indices.
#include "core/philox.h"
#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"
#include "ops/math/dropout.h"
#include "ops/math/learning_rate.h"
#include "ops/math/loss_scaling.h"
#include "ops/math/multi_tensor.h"
#include "ops/math/optimizer_updates.h"

namespace dp::cuda {
namespace {

using namespace grid;  // NOLINT: the launch geometry every kernel here shares

// ---- fills and dropout ------------------------------------------------------------

__global__ void UniformFillKernel(float* y, int64_t n, uint64_t seed, double lo, double hi) {
  for (int64_t i = FirstIndex(); i < n; i += Stride())
    y[i] = static_cast<float>(philox::UniformValue(seed, static_cast<uint64_t>(i), lo, hi));
}

__global__ void GaussianFillKernel(float* y, int64_t n, uint64_t seed, double mean, double stdev) {
  for (int64_t i = FirstIndex(); i < n; i += Stride())
    y[i] = static_cast<float>(philox::NormalValue(seed, static_cast<uint64_t>(i), mean, stdev));
}

// One thread per Philox block: the words of four elements. x may be y.
__global__ void DropoutKernel(const float* x, float* y, uint8_t* mask, int64_t n, uint64_t seed,
                              const int64_t* counter, uint64_t run, uint32_t threshold, float scale) {
  const uint64_t stream = counter != nullptr ? static_cast<uint64_t>(*counter) : run;
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = FirstIndex(); b < blocks; b += Stride()) {
    const philox::Block words = philox::StreamBlock(seed, stream, static_cast<uint64_t>(b));
    for (int k = 0; k < 4 && b * 4 + k < n; ++k) {
      const int64_t i = b * 4 + k;
      DropoutElement(x[i], words.w[k], threshold, scale, &y[i], &mask[i]);
    }
  }
}

__global__ void DropoutGradientKernel(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) dx[i] = DropoutGradElement(dy[i], mask[i], scale);
}

// ---- optimizer updates ----------------------------------------------------------

// The square roots the formulas take (IEEE-rounded on the device, as on the CPU).
struct FloatSqrt {
  __host__ __device__ float operator()(float x) const { return sqrtf(x); }
};
struct DoubleSqrt {
  __host__ __device__ double operator()(double x) const { return sqrt(x); }
};

__device__ __forceinline__ float Grad(const float* g, const float* g2, int64_t i) {
  return g2 != nullptr ? g[i] + g2[i] : g[i];
}

template <bool kWD>
__global__ void SgdKernel(float* p, const float* g, const float* g2, int64_t n, const float* lr_ptr, float wd) {
  const float lr = *lr_ptr;
  if (SkipsUpdate(lr)) return;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) p[i] = SgdStep<kWD>(p[i], Grad(g, g2, i), lr, wd);
}

template <bool kWD, bool kNesterov>
__global__ void MomentumKernel(float* p, const float* g, const float* g2, float* buf, int64_t n,
                               const float* lr_ptr, float mu, float wd) {
  const float lr = *lr_ptr;
  if (SkipsUpdate(lr)) return;
  for (int64_t i = FirstIndex(); i < n; i += Stride())
    MomentumStep<kWD, kNesterov>(&p[i], &buf[i], Grad(g, g2, i), lr, mu, wd);
}

// The step's coefficients, from lr and iter on the device, once per block.
template <bool kWD>
__global__ void AdamKernel(float* p, const float* g, const float* g2, float* m, float* v, int64_t n,
                           const float* lr, const int64_t* iter, AdamHyper hyper) {
  __shared__ AdamCoeffs<float> c;
  if (threadIdx.x == 0) c = MakeAdamCoeffs<float>(hyper, static_cast<double>(*lr), *iter, DoubleSqrt{});
  __syncthreads();
  if (SkipsUpdate(*lr)) return;  // every thread alike
  for (int64_t i = FirstIndex(); i < n; i += Stride())
    AdamStep<kWD>(&p[i], &m[i], &v[i], Grad(g, g2, i), c, FloatSqrt{});
}

template <bool kWD>
__global__ void AdagradKernel(float* p, const float* g, const float* g2, float* h, int64_t n, const float* lr_ptr,
                              float eps, float decay, float wd) {
  const float lr = *lr_ptr;
  if (SkipsUpdate(lr)) return;
  for (int64_t i = FirstIndex(); i < n; i += Stride())
    AdagradStep<kWD>(&p[i], &h[i], Grad(g, g2, i), lr, eps, decay, wd, FloatSqrt{});
}

// ---- multi-tensor updates ---------------------------------------------------------

// Block b updates one chunk of one tensor of the list (LocateChunk), each
// element with the formula the one-param kernel above applies to it.
template <bool kWD>
__global__ void MultiSgdKernel(MultiTensorList list, const float* lr_ptr, float wd) {
  const ChunkSpan c = LocateChunk(list.n, list.chunk_end, list.count, blockIdx.x);
  float* p = list.param[c.tensor];
  const float* g = list.grad[c.tensor];
  const float lr = *lr_ptr;
  if (SkipsUpdate(lr)) return;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) p[i] = SgdStep<kWD>(p[i], g[i], lr, wd);
}

template <bool kWD, bool kNesterov>
__global__ void MultiMomentumKernel(MultiTensorList list, const float* lr_ptr, float mu, float wd) {
  const ChunkSpan c = LocateChunk(list.n, list.chunk_end, list.count, blockIdx.x);
  float* p = list.param[c.tensor];
  float* buf = list.state0[c.tensor];
  const float* g = list.grad[c.tensor];
  const float lr = *lr_ptr;
  if (SkipsUpdate(lr)) return;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
    MomentumStep<kWD, kNesterov>(&p[i], &buf[i], g[i], lr, mu, wd);
}

template <bool kWD>
__global__ void MultiAdamKernel(MultiTensorList list, const float* lr, const int64_t* iter, AdamHyper hyper) {
  __shared__ AdamCoeffs<float> coeffs;
  if (threadIdx.x == 0) coeffs = MakeAdamCoeffs<float>(hyper, static_cast<double>(*lr), *iter, DoubleSqrt{});
  __syncthreads();
  if (SkipsUpdate(*lr)) return;  // every thread alike
  const ChunkSpan c = LocateChunk(list.n, list.chunk_end, list.count, blockIdx.x);
  float* p = list.param[c.tensor];
  float* m = list.state0[c.tensor];
  float* v = list.state1[c.tensor];
  const float* g = list.grad[c.tensor];
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
    AdamStep<kWD>(&p[i], &m[i], &v[i], g[i], coeffs, FloatSqrt{});
}

template <bool kWD>
__global__ void MultiAdagradKernel(MultiTensorList list, const float* lr_ptr, float eps, float decay, float wd) {
  const ChunkSpan c = LocateChunk(list.n, list.chunk_end, list.count, blockIdx.x);
  float* p = list.param[c.tensor];
  float* h = list.state0[c.tensor];
  const float* g = list.grad[c.tensor];
  const float lr = *lr_ptr;
  if (SkipsUpdate(lr)) return;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
    AdagradStep<kWD>(&p[i], &h[i], g[i], lr, eps, decay, wd, FloatSqrt{});
}

// A grid of `blocks` (at most 2^31 - 1: a chunk each, so 8 Ti elements).
inline unsigned MultiTensorGrid(int64_t blocks) { return static_cast<unsigned>(blocks); }

__global__ void BmufKernel(float* w, float* wg, float* delta, int64_t n, float lr, float mu, bool nesterov) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) BmufStep(&w[i], &wg[i], &delta[i], lr, mu, nesterov);
}

}  // namespace

cudaError_t LaunchUniformFill(float* y, int64_t n, uint64_t seed, double lo, double hi, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  UniformFillKernel<<<Blocks(n), kThreads, 0, stream>>>(y, n, seed, lo, hi);
  return cudaGetLastError();
}

cudaError_t LaunchGaussianFill(float* y, int64_t n, uint64_t seed, double mean, double stdev, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GaussianFillKernel<<<Blocks(n), kThreads, 0, stream>>>(y, n, seed, mean, stdev);
  return cudaGetLastError();
}

cudaError_t LaunchDropout(const float* x, float* y, uint8_t* mask, int64_t n, uint64_t seed, const int64_t* counter,
                          uint64_t run, uint32_t threshold, float scale, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropoutKernel<<<Blocks((n + 3) / 4), kThreads, 0, stream>>>(x, y, mask, n, seed, counter, run, threshold, scale);
  return cudaGetLastError();
}

cudaError_t LaunchDropoutGradient(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale,
                                  cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  DropoutGradientKernel<<<Blocks(n), kThreads, 0, stream>>>(dy, mask, dx, n, scale);
  return cudaGetLastError();
}

cudaError_t LaunchSgd(float* p, const float* g, const float* g2, int64_t n, const float* lr, float weight_decay,
                      cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (weight_decay != 0)
    SgdKernel<true><<<Blocks(n), kThreads, 0, stream>>>(p, g, g2, n, lr, weight_decay);
  else
    SgdKernel<false><<<Blocks(n), kThreads, 0, stream>>>(p, g, g2, n, lr, weight_decay);
  return cudaGetLastError();
}

cudaError_t LaunchMomentumSgd(float* p, const float* g, const float* g2, float* momentum, int64_t n, const float* lr,
                              float mu, float weight_decay, bool nesterov, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool wd = weight_decay != 0;
  auto kernel = nesterov ? (wd ? MomentumKernel<true, true> : MomentumKernel<false, true>)
                         : (wd ? MomentumKernel<true, false> : MomentumKernel<false, false>);
  kernel<<<Blocks(n), kThreads, 0, stream>>>(p, g, g2, momentum, n, lr, mu, weight_decay);
  return cudaGetLastError();
}

cudaError_t LaunchAdam(float* p, const float* g, const float* g2, float* m, float* v, int64_t n, const float* lr,
                       const int64_t* iter, AdamHyper hyper, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  auto kernel = hyper.weight_decay != 0 ? AdamKernel<true> : AdamKernel<false>;
  kernel<<<Blocks(n), kThreads, 0, stream>>>(p, g, g2, m, v, n, lr, iter, hyper);
  return cudaGetLastError();
}

cudaError_t LaunchAdagrad(float* p, const float* g, const float* g2, float* h, int64_t n, const float* lr,
                          float epsilon, float decay, float weight_decay, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  auto kernel = weight_decay != 0 ? AdagradKernel<true> : AdagradKernel<false>;
  kernel<<<Blocks(n), kThreads, 0, stream>>>(p, g, g2, h, n, lr, epsilon, decay, weight_decay);
  return cudaGetLastError();
}

cudaError_t LaunchBmufUpdate(float* w, float* wg, float* delta, int64_t n, float block_lr, float block_momentum,
                             bool nesterov, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  BmufKernel<<<Blocks(n), kThreads, 0, stream>>>(w, wg, delta, n, block_lr, block_momentum, nesterov);
  return cudaGetLastError();
}

cudaError_t LaunchMultiTensorSgd(MultiTensorList list, int64_t blocks, const float* lr, float weight_decay,
                                 cudaStream_t stream) {
  if (blocks <= 0) return cudaSuccess;
  auto kernel = weight_decay != 0 ? MultiSgdKernel<true> : MultiSgdKernel<false>;
  kernel<<<MultiTensorGrid(blocks), kThreads, 0, stream>>>(list, lr, weight_decay);
  return cudaGetLastError();
}

cudaError_t LaunchMultiTensorMomentumSgd(MultiTensorList list, int64_t blocks, const float* lr, float mu,
                                         float weight_decay, bool nesterov, cudaStream_t stream) {
  if (blocks <= 0) return cudaSuccess;
  const bool wd = weight_decay != 0;
  auto kernel = nesterov ? (wd ? MultiMomentumKernel<true, true> : MultiMomentumKernel<false, true>)
                         : (wd ? MultiMomentumKernel<true, false> : MultiMomentumKernel<false, false>);
  kernel<<<MultiTensorGrid(blocks), kThreads, 0, stream>>>(list, lr, mu, weight_decay);
  return cudaGetLastError();
}

cudaError_t LaunchMultiTensorAdam(MultiTensorList list, int64_t blocks, const float* lr, const int64_t* iter,
                                  AdamHyper hyper, cudaStream_t stream) {
  if (blocks <= 0) return cudaSuccess;
  auto kernel = hyper.weight_decay != 0 ? MultiAdamKernel<true> : MultiAdamKernel<false>;
  kernel<<<MultiTensorGrid(blocks), kThreads, 0, stream>>>(list, lr, iter, hyper);
  return cudaGetLastError();
}

cudaError_t LaunchMultiTensorAdagrad(MultiTensorList list, int64_t blocks, const float* lr, float epsilon,
                                     float decay, float weight_decay, cudaStream_t stream) {
  if (blocks <= 0) return cudaSuccess;
  auto kernel = weight_decay != 0 ? MultiAdagradKernel<true> : MultiAdagradKernel<false>;
  kernel<<<MultiTensorGrid(blocks), kThreads, 0, stream>>>(list, lr, epsilon, decay, weight_decay);
  return cudaGetLastError();
}

namespace {

__global__ void IterIncrementKernel(int64_t* iter) {
  if (*iter < INT64_MAX) *iter += 1;
}

__global__ void LearningRateKernel(const int64_t* iter, math::LrSchedule schedule, float* lr32, double* lr64) {
  const int64_t it = *iter > 1 ? *iter - 1 : 0;
  const double lr = math::LearningRateAt(schedule, it);
  if (lr32 != nullptr) *lr32 = static_cast<float>(lr);
  if (lr64 != nullptr) *lr64 = lr;
}

}  // namespace

cudaError_t LaunchIterIncrement(int64_t* iter, cudaStream_t stream) {
  IterIncrementKernel<<<1, 1, 0, stream>>>(iter);
  return cudaGetLastError();
}

cudaError_t LaunchLearningRate(const int64_t* iter, math::LrSchedule schedule, float* lr32, double* lr64,
                               cudaStream_t stream) {
  LearningRateKernel<<<1, 1, 0, stream>>>(iter, schedule, lr32, lr64);
  return cudaGetLastError();
}

namespace {

// Block b divides one chunk of one gradient (LocateChunk) by the scale; a
// thread that saw a non-finite element marks found (every such write stores
// the same 1).
__global__ void UnscaleKernel(MultiTensorList list, const float* scale, float* found) {
  const ChunkSpan c = LocateChunk(list.n, list.chunk_end, list.count, blockIdx.x);
  float* g = list.param[c.tensor];
  const float inv = 1.0f / *scale;
  bool any = false;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
    any = any || !math::IsFinite(g[i]);
    g[i] *= inv;
  }
  if (any) *found = 1.0f;
}

__global__ void GateLearningRateKernel(const float* lr, const float* found, float* lr_step) {
  *lr_step = *found != 0.0f ? __int_as_float(0x7fc00000) : *lr;
}

__global__ void UpdateLossScaleKernel(float* scale, float* good_steps, const float* found, math::LossScaleArgs args) {
  math::NextLossScale(scale, good_steps, *found != 0.0f, args);
}

}  // namespace

cudaError_t LaunchUnscaleGradients(MultiTensorList list, int64_t blocks, const float* scale, float* found,
                                   cudaStream_t stream) {
  if (blocks <= 0) return cudaSuccess;
  UnscaleKernel<<<MultiTensorGrid(blocks), kThreads, 0, stream>>>(list, scale, found);
  return cudaGetLastError();
}

cudaError_t LaunchGateLearningRate(const float* lr, const float* found, float* lr_step, cudaStream_t stream) {
  GateLearningRateKernel<<<1, 1, 0, stream>>>(lr, found, lr_step);
  return cudaGetLastError();
}

cudaError_t LaunchUpdateLossScale(float* scale, float* good_steps, const float* found, math::LossScaleArgs args,
                                  cudaStream_t stream) {
  UpdateLossScaleKernel<<<1, 1, 0, stream>>>(scale, good_steps, found, args);
  return cudaGetLastError();
}

}  // namespace dp::cuda
