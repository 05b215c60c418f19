// Launchers of dp's CUDA kernels. Plain functions over raw device pointers,
// so that kernels.cu (built by nvcc) needs no engine header. Each queues its
// kernel on `stream` and returns the launch status (cudaSuccess, or the error
// from cudaGetLastError); n == 0 launches nothing. All sizes are elements.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dp::cuda {

// y[i] = value
cudaError_t LaunchFill(float* y, int64_t n, float value, cudaStream_t stream);
// y[i] = max(x[i], 0); y may be x.
cudaError_t LaunchRelu(const float* x, float* y, int64_t n, cudaStream_t stream);
// y[i] = a[i] + b[i]; y may be a or b.
cudaError_t LaunchAdd(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// y[i] = scale * x[i]; y may be x.
cudaError_t LaunchScale(const float* x, float scale, float* y, int64_t n, cudaStream_t stream);
// y[i, j] = b[j] for y of shape [rows, cols] (row-major): the bias of FC.
cudaError_t LaunchBroadcastRows(const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace dp::cuda
