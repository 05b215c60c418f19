// Launchers of the kernels behind the copy-and-sum tree of CudaCollectives
// (cuda_collectives.h). Like cuda/op_launchers.h: plain templates over raw device
// pointers, so that collective_kernels.cu (built by nvcc) needs no engine
// header. Each queues its kernel on `stream` (the caller makes the stream's
// device current) and returns the launch status; n == 0 launches nothing.
// Instantiated for float, double, int32_t and int64_t (LaunchScaleInPlace and
// LaunchScaleByActive: float and double). The compressed collectives'
// kernels (comm/compressed_sum.h's arithmetic) take a 16-bit float H,
// BFloat16 or Half (core/half_float.h), its buffers as raw 16-bit words.
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

// The post-scale of a compressed sum: static_cast<float>(factor * s), s being
// ActiveScale(scale, *active) when `active` is given (on the device), else
// scale (comm/compressed_sum.h, CompressionPostScale).

// x[i] = float(H(x[i] * pre)) * post(factor, active, scale)
template <typename H>
cudaError_t LaunchRoundThrough(float* x, float pre, double factor, const float* active, double scale, int64_t n,
                               cudaStream_t stream);
// out[i] = H(in[i] * pre)
template <typename H>
cudaError_t LaunchCastScaled(const float* in, float pre, uint16_t* out, int64_t n, cudaStream_t stream);
// out[j] = SumContributions<H>(inbox, ranks, chunk, j) for j < chunk
template <typename H>
cudaError_t LaunchSumContributions(const uint16_t* inbox, int ranks, int64_t chunk, uint16_t* out,
                                   cudaStream_t stream);
// out[i] = float(in[i]) * post(factor, active, scale)
template <typename H>
cudaError_t LaunchUncastScaled(const uint16_t* in, double factor, const float* active, double scale, float* out,
                               int64_t n, cudaStream_t stream);

// The compressed launchers' explicit instantiations for H, which both sides
// of the CUDA module (the kernels, libdp's forwarders) make.
#define DP_COMPRESSED_LAUNCHER_INSTANTIATIONS(H)                                                                \
  template cudaError_t LaunchRoundThrough<H>(float*, float, double, const float*, double, int64_t, cudaStream_t); \
  template cudaError_t LaunchCastScaled<H>(const float*, float, uint16_t*, int64_t, cudaStream_t);             \
  template cudaError_t LaunchSumContributions<H>(const uint16_t*, int, int64_t, uint16_t*, cudaStream_t);      \
  template cudaError_t LaunchUncastScaled<H>(const uint16_t*, double, const float*, double, float*, int64_t,   \
                                             cudaStream_t);

}  // namespace dp::cuda
