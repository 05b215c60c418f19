// The elementwise family's CUDA kernels (cuda/op_launchers.h): grid-stride
// loops (a capped grid of 256-thread blocks covers any n), indices in int64_t.
#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"

namespace dp::cuda {
namespace {

using namespace grid;  // NOLINT: the launch geometry every kernel here shares

__global__ void FillKernel(float* y, int64_t n, float value) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = value;
}

__global__ void ReluKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void AddKernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = a[i] + b[i];
}

__global__ void ScaleKernel(const float* x, float scale, float* y, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = x[i] * scale;
}

__global__ void BroadcastRowsKernel(const float* b, float* y, int64_t n, int64_t cols) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = b[i % cols];
}

}  // namespace

cudaError_t LaunchFill(float* y, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillKernel<<<Blocks(n), kThreads, 0, stream>>>(y, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchRelu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AddKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchScale(const float* x, float scale, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(x, scale, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchBroadcastRows(const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int64_t n = rows * cols;
  BroadcastRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(b, y, n, cols);
  return cudaGetLastError();
}

}  // namespace dp::cuda
