// The loss_norm family's batch-normalisation kernels (cuda/op_launchers.h),
// for SpatialBN, its gradient and the synchronised BN ops' per-replica parts.
//
// Per-channel sums run in two stages, both block reductions in double: each
// channel's N * S values split into a fixed number of parts
// (bn::BnPartialsPerChannel), one block per (channel, part), then one block
// per channel adds its parts. The split depends only on the shape, so every
// sum repeats bit for bit. The statistics take two passes as on the CPU (a
// mean, then sums about it), and every formula is ops/math/batchnorm.h's.
//
// The allreduced statistics of the synchronised ops stay on the device (their
// count included): the CPU's checks of that count need its value on the host,
// so here a count that is not above 1 gives non-finite outputs instead.
#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/math/batchnorm.h"

namespace dp::cuda {
namespace {

using reduce::BlockSum;

constexpr int64_t kMaxBlocks = 65535;
// Threads of the per-channel stage adding at most 64 parts.
constexpr int kPartThreads = 64;

int CappedBlocks(int64_t n) { return static_cast<int>(n < kMaxBlocks ? n : kMaxBlocks); }

// A channel's values and their squares about a per-channel shift (the
// statistics' passes): (x - k, (x - k)^2), k = BnShift(shift_sum[ch]) or 0.
struct CenteredTerm {
  const float* x;
  const double* shift_sum;  // null: k = 0
  double count;
  __device__ double Constant(int64_t ch) const { return shift_sum ? bn::BnShift(shift_sum[ch], count) : 0.0; }
  __device__ void Add(int64_t i, double k, double& a, double& b) const {
    const double v = static_cast<double>(x[i]) - k;
    a += v;
    b += v * v;
  }
};

// The gradient's sums: (dy, dy * (x - mean)).
struct GradTerm {
  const float* x;
  const float* dy;
  const float* mean;
  __device__ double Constant(int64_t ch) const { return static_cast<double>(mean[ch]); }
  __device__ void Add(int64_t i, double m, double& a, double& b) const {
    const double g = static_cast<double>(dy[i]);
    a += g;
    b += bn::BnGradTerm(g, static_cast<double>(x[i]), m);
  }
};

// Stage 1: block (ch, part) sums its part of channel ch's values into
// partials[2 * (ch * parts + part)] and the next double.
template <typename Term>
__global__ void ChannelPartialsKernel(Term term, bn::BnDims d, int64_t parts, double* partials) {
  const int64_t per_channel = d.values_per_channel();
  for (int64_t b = blockIdx.x; b < d.c * parts; b += gridDim.x) {
    const int64_t ch = b / parts, part = b % parts;
    const double k = term.Constant(ch);
    double sa = 0, sb = 0;
    for (int64_t j = part * blockDim.x + threadIdx.x; j < per_channel; j += parts * blockDim.x)
      term.Add(d.element(ch, j), k, sa, sb);
    sa = BlockSum(sa);
    sb = BlockSum(sb);
    if (threadIdx.x == 0) {
      partials[2 * b] = sa;
      partials[2 * b + 1] = sb;
    }
  }
}

// Stage 2: one block per channel adds its parts; the second sum is scaled by
// b_factor[ch] when given, and skipped when b_out is null.
__global__ void ChannelTotalsKernel(const double* partials, int64_t channels, int64_t parts, const float* b_factor,
                                    double* a_out, double* b_out) {
  for (int64_t ch = blockIdx.x; ch < channels; ch += gridDim.x) {
    double sa = 0, sb = 0;
    for (int64_t p = threadIdx.x; p < parts; p += blockDim.x) {
      sa += partials[2 * (ch * parts + p)];
      sb += partials[2 * (ch * parts + p) + 1];
    }
    sa = BlockSum(sa);
    sb = BlockSum(sb);
    if (threadIdx.x == 0) {
      a_out[ch] = sa;
      if (b_out) b_out[ch] = b_factor ? sb * static_cast<double>(b_factor[ch]) : sb;
    }
  }
}

template <typename Term>
cudaError_t ChannelSums(Term term, bn::BnDims d, double* partials, const float* b_factor, double* a_out,
                        double* b_out, cudaStream_t stream) {
  if (d.c <= 0) return cudaSuccess;
  const int64_t parts = bn::BnPartialsPerChannel(d);
  ChannelPartialsKernel<<<CappedBlocks(d.c * parts), reduce::kThreads, 0, stream>>>(term, d, parts, partials);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  ChannelTotalsKernel<<<CappedBlocks(d.c), kPartThreads, 0, stream>>>(partials, d.c, parts, b_factor, a_out, b_out);
  return cudaGetLastError();
}

// Per channel: the batch moments, the normalisation's coefficients (mean,
// inv_std), the running statistics (in place when new_* are the inputs) and
// the saved statistics.
__global__ void TrainingFinalizeKernel(const float* running_mean, const float* running_var, bn::BnSums sums,
                                       bn::BnCount count, int64_t channels, double epsilon, double momentum,
                                       double* coeffs, float* new_running_mean, float* new_running_var,
                                       float* saved_mean, float* saved_inv_std) {
  const double cnt = count.value();
  for (int64_t c = grid::FirstIndex(); c < channels; c += grid::Stride()) {
    const double shift = sums.shift_sum ? bn::BnShift(sums.shift_sum[c], cnt) : 0.0;
    const bn::BnMoments m = bn::BnMomentsFromSums(sums.sum[c], sums.sumsq[c], shift, cnt);
    const double inv_std = bn::BnInvStd(m.var, epsilon);
    coeffs[c] = m.mean;
    coeffs[channels + c] = inv_std;
    const double rm = static_cast<double>(running_mean[c]), rv = static_cast<double>(running_var[c]);
    new_running_mean[c] = static_cast<float>(bn::BnRunningMean(momentum, rm, m.mean));
    new_running_var[c] = static_cast<float>(bn::BnRunningVar(momentum, rv, m.var, cnt));
    saved_mean[c] = static_cast<float>(m.mean);
    saved_inv_std[c] = static_cast<float>(inv_std);
  }
}

__global__ void InferenceCoefficientsKernel(const float* running_mean, const float* running_var, int64_t channels,
                                            double epsilon, double* coeffs) {
  for (int64_t c = grid::FirstIndex(); c < channels; c += grid::Stride()) {
    coeffs[c] = static_cast<double>(running_mean[c]);
    coeffs[channels + c] = bn::BnInvStd(static_cast<double>(running_var[c]), epsilon);
  }
}

// y = (x - mean) * inv_std * scale + bias, per element (y may be x).
__global__ void NormalizeKernel(const float* x, const float* scale, const float* bias, const double* coeffs,
                                bn::BnDims d, float* y) {
  const int64_t n = d.n * d.c * d.s;
  for (int64_t i = grid::FirstIndex(); i < n; i += grid::Stride()) {
    const int64_t c = d.channel_of(i);
    const double a = bn::BnScaleFactor(coeffs[d.c + c], static_cast<double>(scale[c]));
    y[i] = static_cast<float>(bn::BnNormalize(static_cast<double>(x[i]), coeffs[c], a, static_cast<double>(bias[c])));
  }
}

// The training-mode input gradient, per element (dx may be dy).
__global__ void BackwardKernel(const float* x, const float* dy, const float* scale, const float* mean,
                               const float* inv_std, const double* sum_dy, const double* sum_dy_xhat,
                               bn::BnCount count, bn::BnDims d, float* dx) {
  const int64_t n = d.n * d.c * d.s;
  const double cnt = count.value();
  for (int64_t i = grid::FirstIndex(); i < n; i += grid::Stride()) {
    const int64_t c = d.channel_of(i);
    const double is = static_cast<double>(inv_std[c]);
    const double k = bn::BnScaleFactor(is, static_cast<double>(scale[c]));
    dx[i] = static_cast<float>(bn::BnBackwardInput(static_cast<double>(x[i]), static_cast<double>(dy[i]),
                                                   static_cast<double>(mean[c]), is, k, sum_dy[c] / cnt,
                                                   sum_dy_xhat[c] / cnt));
  }
}

// dscale, dbias and (when given) gstats = [sum_dy_xhat (C), sum_dy (C), count].
__global__ void StoreGradSumsKernel(const double* sum_dy, const double* sum_dy_xhat, int64_t channels, double count,
                                    float* dscale, float* dbias, double* gstats) {
  for (int64_t c = grid::FirstIndex(); c < channels; c += grid::Stride()) {
    dscale[c] = static_cast<float>(sum_dy_xhat[c]);
    dbias[c] = static_cast<float>(sum_dy[c]);
    if (gstats) {
      gstats[c] = sum_dy_xhat[c];
      gstats[channels + c] = sum_dy[c];
    }
  }
  if (gstats && grid::FirstIndex() == 0) gstats[2 * channels] = count;
}

// SpatialBNStats' [sum (C), sum of squares (C), count] from LaunchBnMoments' sums.
__global__ void StatsPackKernel(const double* sums, int64_t channels, double count, double* stats) {
  for (int64_t c = grid::FirstIndex(); c < channels; c += grid::Stride()) {
    const double mean = bn::BnShift(sums[c], count);
    const double sum = sums[channels + c], m2 = sums[2 * channels + c];
    stats[c] = bn::BnStatsSum(count, mean, sum);
    stats[channels + c] = bn::BnStatsSumSq(count, mean, sum, m2);
  }
  if (grid::FirstIndex() == 0) stats[2 * channels] = count;
}

}  // namespace

cudaError_t LaunchBnMoments(const float* x, bn::BnDims d, double* partials, double* sums, cudaStream_t stream) {
  const double count = d.count();
  cudaError_t e = ChannelSums(CenteredTerm{x, nullptr, count}, d, partials, nullptr, sums, nullptr, stream);
  if (e != cudaSuccess) return e;
  return ChannelSums(CenteredTerm{x, sums, count}, d, partials, nullptr, sums + d.c, sums + 2 * d.c, stream);
}

cudaError_t LaunchBnTrainingFinalize(const float* running_mean, const float* running_var, bn::BnSums sums,
                                     bn::BnCount count, int64_t channels, double epsilon, double momentum,
                                     double* coeffs, float* new_running_mean, float* new_running_var,
                                     float* saved_mean, float* saved_inv_std, cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  TrainingFinalizeKernel<<<grid::Blocks(channels), grid::kThreads, 0, stream>>>(
      running_mean, running_var, sums, count, channels, epsilon, momentum, coeffs, new_running_mean,
      new_running_var, saved_mean, saved_inv_std);
  return cudaGetLastError();
}

cudaError_t LaunchBnInferenceCoefficients(const float* running_mean, const float* running_var, int64_t channels,
                                          double epsilon, double* coeffs, cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  InferenceCoefficientsKernel<<<grid::Blocks(channels), grid::kThreads, 0, stream>>>(running_mean, running_var,
                                                                                    channels, epsilon, coeffs);
  return cudaGetLastError();
}

cudaError_t LaunchBnNormalize(const float* x, const float* scale, const float* bias, const double* coeffs,
                              bn::BnDims d, float* y, cudaStream_t stream) {
  const int64_t n = d.n * d.c * d.s;
  if (n <= 0) return cudaSuccess;
  NormalizeKernel<<<grid::Blocks(n), grid::kThreads, 0, stream>>>(x, scale, bias, coeffs, d, y);
  return cudaGetLastError();
}

cudaError_t LaunchBnGradSums(const float* x, const float* dy, const float* mean, const float* inv_std, bn::BnDims d,
                             double* partials, double* sums, cudaStream_t stream) {
  return ChannelSums(GradTerm{x, dy, mean}, d, partials, inv_std, sums, sums + d.c, stream);
}

cudaError_t LaunchBnBackward(const float* x, const float* dy, const float* scale, const float* mean,
                             const float* inv_std, const double* sum_dy, const double* sum_dy_xhat, bn::BnCount count,
                             bn::BnDims d, float* dx, cudaStream_t stream) {
  const int64_t n = d.n * d.c * d.s;
  if (n <= 0) return cudaSuccess;
  BackwardKernel<<<grid::Blocks(n), grid::kThreads, 0, stream>>>(x, dy, scale, mean, inv_std, sum_dy, sum_dy_xhat,
                                                                 count, d, dx);
  return cudaGetLastError();
}

cudaError_t LaunchBnStoreGradSums(const double* sum_dy, const double* sum_dy_xhat, int64_t channels, double count,
                                  float* dscale, float* dbias, double* gstats, cudaStream_t stream) {
  if (channels <= 0 && !gstats) return cudaSuccess;
  StoreGradSumsKernel<<<grid::Blocks(channels > 0 ? channels : 1), grid::kThreads, 0, stream>>>(
      sum_dy, sum_dy_xhat, channels, count, dscale, dbias, gstats);
  return cudaGetLastError();
}

cudaError_t LaunchBnStatsPack(const double* sums, int64_t channels, double count, double* stats,
                              cudaStream_t stream) {
  StatsPackKernel<<<grid::Blocks(channels > 0 ? channels : 1), grid::kThreads, 0, stream>>>(sums, channels, count,
                                                                                          stats);
  return cudaGetLastError();
}

}  // namespace dp::cuda
