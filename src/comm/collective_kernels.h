// Launchers of the kernels behind the copy-and-sum tree of CudaCollectives
// (cuda_collectives.h). Like cuda/op_launchers.h: plain templates over raw device
// pointers, so that collective_kernels.cu (built by nvcc) needs no engine
// header. Each queues its kernel on `stream` (the caller makes the stream's
// device current) and returns the launch status; n == 0 launches nothing.
// Instantiated for float, double, int32_t and int64_t (LaunchScaleInPlace and
// LaunchScaleByActive: float and double).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dp::cuda {

// dst[i] = dst[i] + src[i]: dst is the left operand, which fixes the tree's sum order.
template <typename T>
cudaError_t LaunchAccumulate(T* dst, const T* src, int64_t n, cudaStream_t stream);

// x[i] = x[i] * scale
template <typename T>
cudaError_t LaunchScaleInPlace(T* x, T scale, int64_t n, cudaStream_t stream);

// x[i] = x[i] * ActiveScale(scale, *active) (comm/active_scale.h): the mean
// over the replicas that had data, `active` being their flags' sum on the
// device (so the host never waits for it).
template <typename T>
cudaError_t LaunchScaleByActive(T* x, const float* active, double scale, int64_t n, cudaStream_t stream);

}  // namespace dp::cuda
