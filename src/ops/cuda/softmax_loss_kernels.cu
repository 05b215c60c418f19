// The loss_norm family's softmax, loss (label losses, AveragedLoss,
// SquaredL2Distance) and accuracy kernels
// (cuda/op_launchers.h). Row reductions run one block per row (the grid
// strides over the rows, each block's threads over the row's columns); sums
// over rows and over all elements are block reductions of per-row values or
// of a fixed number of partial sums, so every result repeats bit for bit.
// The formulas are ops/math's, shared with the CPU kernels.
//
// A label outside [0, D) makes the CPU kernels throw; reading the labels on
// the host would stall the stream, so here it makes the values it touches
// NaN (the loss, the row's gradient, the accuracy), which the training
// loop's non-finite checks report.
#include <cmath>

#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/math/losses.h"
#include "ops/math/softmax.h"

namespace dp::cuda {
namespace {

using reduce::BlockReduce;
using reduce::BlockSum;

// One block per row, at most this many blocks (they stride over the rows).
constexpr int64_t kMaxRowBlocks = 65535;

int RowBlocks(int64_t rows) { return static_cast<int>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks); }

// The softmax of one row x[0, cols) into p (which may be x), by the whole
// block: the row's maximum, then exp(x - max) summed in double, then each
// exp times the float inverse of the sum (as the CPU's SoftmaxRow). Every
// thread gets the row's maximum and sum.
__device__ void SoftmaxRow(const float* x, float* p, int64_t cols, float* row_max, double* row_sum) {
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) mx = reduce::Max{}(mx, x[c]);
  mx = BlockReduce(mx, reduce::Max{}, -INFINITY);
  double sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = math::SoftmaxExp(x[c], mx);
    p[c] = e;  // read back only by this thread: p may be x
    sum += static_cast<double>(e);
  }
  sum = BlockSum(sum);
  const float inv = math::SoftmaxInverse<float>(sum);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) p[c] *= inv;
  *row_max = mx;
  *row_sum = sum;
}

__global__ void SoftmaxKernel(const float* x, float* p, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float mx;
    double sum;
    SoftmaxRow(x + r * cols, p + r * cols, cols, &mx, &sum);
  }
}

// Per row: log(softmax), x - max - log(sum(exp(x - max))), by the whole
// block; y may be x (each element read, then written, by one thread, after
// the reductions that read the whole row).
__global__ void LogSoftmaxKernel(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) mx = reduce::Max{}(mx, xr[c]);
    mx = BlockReduce(mx, reduce::Max{}, -INFINITY);
    double sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += static_cast<double>(math::SoftmaxExp(xr[c], mx));
    const float log_sum = math::LogSoftmaxLogSum<float>(BlockSum(sum));
    float* yr = y + r * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = math::LogSoftmax(xr[c], mx, log_sum);
  }
}

// Per row: dX = dY - exp(Y) * sum(dY), the sum in double as on the CPU.
__global__ void LogSoftmaxGradientKernel(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* yr = y + r * cols;
    const float* gr = dy + r * cols;
    double sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += static_cast<double>(gr[c]);
    const float sumf = static_cast<float>(BlockSum(sum));
    float* xr = dx + r * cols;  // may be dY: each element read, then written, by one thread
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) xr[c] = math::LogSoftmaxGradient(yr[c], gr[c], sumf);
  }
}

// Per row: the softmax, and the row's weighted loss w * -log P[label] and
// weight, for LossMeanKernel.
// With dx (the fused gradient, no weights): each row's dX = g * (P - onehot)
// as SoftmaxWithLossGradientKernel writes it, while the row's P is at hand.
__global__ void SoftmaxWithLossRowsKernel(const float* x, const int32_t* labels, const float* weights, float* p,
                                          double* row_loss, double* row_weight, int64_t rows, int64_t cols,
                                          float* dx, float g) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    const int32_t label = labels[r];
    const bool valid = math::LabelInRange(label, cols);
    const float x_label = valid ? xr[label] : 0.0f;  // read before the softmax is written
    float mx;
    double sum;
    SoftmaxRow(xr, p + r * cols, cols, &mx, &sum);
    if (threadIdx.x == 0) {
      const double w = weights ? static_cast<double>(weights[r]) : 1.0;
      row_loss[r] = valid ? w * math::SoftmaxCrossEntropy(sum, x_label, mx) : NAN;
      row_weight[r] = w;
    }
    if (dx != nullptr) {
      // The columns SoftmaxRow gave this thread: its P is this thread's own write.
      const float* pr = p + r * cols;
      float* dr = dx + r * cols;
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        dr[c] = valid ? math::SoftmaxWithLossGradient(g, pr[c], c == label) : NAN;
    }
  }
}

// One block: loss = SoftmaxLossMean of the rows' weighted losses.
__global__ void LossMeanKernel(const double* row_loss, const double* row_weight, int64_t rows, double scale,
                               float* loss) {
  double total = 0, weight_sum = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += row_loss[r];
    weight_sum += row_weight[r];
  }
  total = BlockSum(total);
  weight_sum = BlockSum(weight_sum);
  if (threadIdx.x == 0) loss[0] = static_cast<float>(math::SoftmaxLossMean(total, weight_sum, scale));
}

// Per row: dX = Y * (dY - dot(Y, dY)), the dot of float products summed in
// double and rounded to float (the CPU sums it in float).
__global__ void SoftmaxGradientKernel(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* yr = y + r * cols;
    const float* gr = dy + r * cols;
    double dot = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += static_cast<double>(yr[c] * gr[c]);
    const float dotf = static_cast<float>(BlockSum(dot));
    float* xr = dx + r * cols;  // may be dY: each element read, then written, by one thread
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) xr[c] = math::SoftmaxGradient(yr[c], gr[c], dotf);
  }
}

// One block: out[0] = the sum of n values, in double.
__global__ void SumToOneKernel(const float* v, int64_t n, double* out) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(v[i]);
  s = BlockSum(s);
  if (threadIdx.x == 0) out[0] = s;
}

// dX = g_i * (P - onehot(label_i)), g_i = scale * dloss * w_i / sum(w); the
// weights' sum from the device (weight_sum) or, without weights, `rows`.
__global__ void SoftmaxWithLossGradientKernel(const float* p, const int32_t* labels, const float* dloss,
                                              const float* weights, const double* weight_sum, int64_t rows,
                                              int64_t cols, double scale, float* dx) {
  const int64_t n = rows * cols;
  const double wsum = weight_sum ? weight_sum[0] : static_cast<double>(rows);
  const double g = math::SoftmaxLossGradientFactor(scale, static_cast<double>(dloss[0]), wsum);
  for (int64_t i = grid::FirstIndex(); i < n; i += grid::Stride()) {
    const int64_t r = i / cols, c = i % cols;
    const int32_t label = labels[r];
    dx[i] = math::LabelInRange(label, cols)
                ? math::SoftmaxWithLossGradient(math::SampleLossGradient(g, weights, r), p[i], c == label)
                : NAN;
  }
}

__global__ void LabelCrossEntropyKernel(const float* x, const int32_t* labels, float* y, int64_t rows,
                                        int64_t cols) {
  for (int64_t r = grid::FirstIndex(); r < rows; r += grid::Stride()) {
    const int32_t label = labels[r];
    y[r] = math::LabelInRange(label, cols) ? math::LabelCrossEntropy(x[r * cols + label]) : NAN;
  }
}

// dX is written whole: the label's element gets the gradient, the others 0.
__global__ void LabelCrossEntropyGradientKernel(const float* x, const int32_t* labels, const float* dy, float* dx,
                                                int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = grid::FirstIndex(); i < n; i += grid::Stride()) {
    const int64_t r = i / cols, c = i % cols;
    const int32_t label = labels[r];
    if (!math::LabelInRange(label, cols))
      dx[i] = NAN;
    else
      dx[i] = c == label ? math::LabelCrossEntropyGradient(x[i], dy[r]) : 0.0f;
  }
}

// Block b of gridDim.x: partials[b] = the sum of its stride of x, in double.
__global__ void PartialSumsKernel(const float* x, int64_t n, double* partials) {
  double s = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    s += static_cast<double>(x[i]);
  s = BlockSum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// One block: loss = the mean of n values from their `count` partial sums.
__global__ void MeanOfPartialsKernel(const double* partials, int64_t count, int64_t n, float* loss) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  s = BlockSum(s);
  if (threadIdx.x == 0) loss[0] = math::MeanOfSum<float>(s, n);
}

__global__ void AveragedLossGradientKernel(const float* dloss, float* dx, int64_t n) {
  const float g = math::AveragedLossGradient(dloss[0], n);
  for (int64_t i = grid::FirstIndex(); i < n; i += grid::Stride()) dx[i] = g;
}

// Per row: z = half the sum of (x - y)^2 over the row, in double.
__global__ void SquaredL2DistanceKernel(const float* x, const float* y, float* z, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      sum += math::SquaredDifference(x[r * cols + c], y[r * cols + c]);
    sum = BlockSum(sum);
    if (threadIdx.x == 0) z[r] = math::HalfOfSum<float>(sum);
  }
}

__global__ void SquaredL2DistanceGradientKernel(const float* x, const float* y, const float* dz, float* dx,
                                                int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = grid::FirstIndex(); i < n; i += grid::Stride())
    dx[i] = math::L2DistanceGradient(x[i], y[i], dz[i / cols]);
}

// Per row: 1 when the label ranks among the top k, 0 when not, -1 when the
// label is out of range.
__global__ void AccuracyRowsKernel(const float* x, const int32_t* labels, int64_t rows, int64_t cols, int64_t top_k,
                                   int32_t* row_correct) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    const int32_t label = labels[r];
    const bool valid = math::LabelInRange(label, cols);
    const float label_score = valid ? xr[label] : 0.0f;
    long long rank = 0;  // classes ranked above the label
    if (valid)
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        rank += math::RanksAboveLabel(xr[c], label_score, c, label);
    rank = BlockSum(rank);
    if (threadIdx.x == 0) row_correct[r] = valid ? (rank < top_k ? 1 : 0) : -1;
  }
}

// One block: the fraction of rows counted correct (NaN if a label was out of range).
__global__ void AccuracyMeanKernel(const int32_t* row_correct, int64_t rows, float* accuracy) {
  long long correct = 0, invalid = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    correct += row_correct[r] > 0;
    invalid += row_correct[r] < 0;
  }
  correct = BlockSum(correct);
  invalid = BlockSum(invalid);
  if (threadIdx.x == 0) accuracy[0] = invalid > 0 ? NAN : math::AccuracyFraction(correct, rows);
}

}  // namespace

cudaError_t LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  SoftmaxKernel<<<RowBlocks(rows), reduce::kThreads, 0, stream>>>(x, y, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxGradient(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                                  cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  SoftmaxGradientKernel<<<RowBlocks(rows), reduce::kThreads, 0, stream>>>(y, dy, dx, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchLogSoftmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  LogSoftmaxKernel<<<RowBlocks(rows), reduce::kThreads, 0, stream>>>(x, y, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchLogSoftmaxGradient(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                                     cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  LogSoftmaxGradientKernel<<<RowBlocks(rows), reduce::kThreads, 0, stream>>>(y, dy, dx, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxWithLoss(const float* x, const int32_t* labels, const float* weights, double scale, float* p,
                                  float* loss, double* row_scratch, int64_t rows, int64_t cols, float* dx,
                                  float dx_factor, cudaStream_t stream) {
  if (rows > 0) {
    SoftmaxWithLossRowsKernel<<<RowBlocks(rows), reduce::kThreads, 0, stream>>>(
        x, labels, weights, p, row_scratch, row_scratch + rows, rows, cols, dx, dx_factor);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  LossMeanKernel<<<1, reduce::kThreads, 0, stream>>>(row_scratch, row_scratch + rows, rows, scale, loss);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxWithLossGradient(const float* p, const int32_t* labels, const float* dloss,
                                          const float* weights, double scale, float* dx, double* weight_sum,
                                          int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  if (weights) {
    SumToOneKernel<<<1, reduce::kThreads, 0, stream>>>(weights, rows, weight_sum);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  SoftmaxWithLossGradientKernel<<<grid::Blocks(n), grid::kThreads, 0, stream>>>(
      p, labels, dloss, weights, weights ? weight_sum : nullptr, rows, cols, scale, dx);
  return cudaGetLastError();
}

cudaError_t LaunchLabelCrossEntropy(const float* x, const int32_t* labels, float* y, int64_t rows, int64_t cols,
                                    cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  LabelCrossEntropyKernel<<<grid::Blocks(rows), grid::kThreads, 0, stream>>>(x, labels, y, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchLabelCrossEntropyGradient(const float* x, const int32_t* labels, const float* dy, float* dx,
                                            int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  LabelCrossEntropyGradientKernel<<<grid::Blocks(n), grid::kThreads, 0, stream>>>(x, labels, dy, dx, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchAveragedLoss(const float* x, float* loss, double* partials, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t count = math::SumPartials(n);
  PartialSumsKernel<<<static_cast<int>(count), reduce::kThreads, 0, stream>>>(x, n, partials);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  MeanOfPartialsKernel<<<1, reduce::kThreads, 0, stream>>>(partials, count, n, loss);
  return cudaGetLastError();
}

cudaError_t LaunchAveragedLossGradient(const float* dloss, float* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AveragedLossGradientKernel<<<grid::Blocks(n), grid::kThreads, 0, stream>>>(dloss, dx, n);
  return cudaGetLastError();
}

cudaError_t LaunchSquaredL2Distance(const float* x, const float* y, float* z, int64_t rows, int64_t cols,
                                    cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  SquaredL2DistanceKernel<<<RowBlocks(rows), reduce::kThreads, 0, stream>>>(x, y, z, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchSquaredL2DistanceGradient(const float* x, const float* y, const float* dz, float* dx, int64_t rows,
                                            int64_t cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  SquaredL2DistanceGradientKernel<<<grid::Blocks(n), grid::kThreads, 0, stream>>>(x, y, dz, dx, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchAccuracy(const float* x, const int32_t* labels, int64_t top_k, float* accuracy,
                           int32_t* row_correct, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows > 0) {
    AccuracyRowsKernel<<<RowBlocks(rows), reduce::kThreads, 0, stream>>>(x, labels, rows, cols, top_k, row_correct);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  AccuracyMeanKernel<<<1, reduce::kThreads, 0, stream>>>(row_correct, rows, accuracy);
  return cudaGetLastError();
}

}  // namespace dp::cuda
