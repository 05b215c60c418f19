// MaxPool's and AveragePool's kernels (cuda/op_launchers.h), on the window
// math of ops/math/pool_geometry.h that the CPU kernels run too. Forward:
// one thread per output, or one block per output when a window is large (a
// global pooling of a big plane), its elements split across the block's
// threads and combined in a fixed tree. Gradients: one thread per input
// element gathering from the outputs whose windows hold it, in the CPU
// scatter's order: deterministic, no atomics. MaxPoolGradient takes each
// window's winner (first maximum in scan order, as the CPU) from a first
// pass that writes them per output (LaunchPoolArgMax).
#include <limits>

#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"
#include "ops/math/pool_geometry.h"

namespace dp::cuda {
namespace {

using namespace grid;  // NOLINT: the launch geometry every kernel here shares
using math::PoolGeometry;
using math::PoolWindow;

// Windows of more elements than this get a block each.
constexpr int64_t kThreadWindowMax = 256;

bool BlockPerWindow(const PoolGeometry& g) { return g.kernel_h * g.kernel_w > kThreadWindowMax; }

int WindowBlocks(int64_t outputs) { return static_cast<int>(outputs < kMaxBlocks ? outputs : kMaxBlocks); }

__device__ PoolWindow WindowOf(const PoolGeometry& g, int64_t o) {
  return math::PoolWindowAt(g, o / g.out_w, o % g.out_w);
}

// ---- one thread per output ----

__global__ void MaxPoolKernel(const float* x, PoolGeometry g, float* y) {
  const int64_t n = g.planes * g.out_plane();
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t p = e / g.out_plane();
    y[e] = math::PoolWindowMax(x + p * g.in_plane(), g.width, WindowOf(g, e % g.out_plane()));
  }
}

__global__ void PoolArgMaxKernel(const float* x, PoolGeometry g, int64_t* argmax) {
  const int64_t n = g.planes * g.out_plane();
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t p = e / g.out_plane();
    argmax[e] = math::PoolWindowArgMax(x + p * g.in_plane(), g.width, WindowOf(g, e % g.out_plane()));
  }
}

__global__ void AveragePoolKernel(const float* x, PoolGeometry g, float* y) {
  const int64_t n = g.planes * g.out_plane(), full = g.kernel_h * g.kernel_w;
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t p = e / g.out_plane();
    const PoolWindow w = WindowOf(g, e % g.out_plane());
    const float sum = math::PoolWindowSum(x + p * g.in_plane(), g.width, w);
    y[e] = sum / static_cast<float>(math::PoolDivisor(w, g.count_include_pad != 0, full));
  }
}

// ---- one block per output ----

// The winner of each output's window: its value into y (NaN when it is a
// NaN, as PoolWindowMax) and/or its index in the plane into argmax.
__global__ void MaxPoolBlockKernel(const float* x, PoolGeometry g, float* y, int64_t* argmax) {
  __shared__ float value[kThreads];
  __shared__ int64_t index[kThreads];
  const int64_t n = g.planes * g.out_plane();
  for (int64_t e = blockIdx.x; e < n; e += gridDim.x) {
    const float* plane = x + (e / g.out_plane()) * g.in_plane();
    const PoolWindow w = WindowOf(g, e % g.out_plane());
    const int64_t ww = w.w1 - w.w0, count = (w.h1 - w.h0) * ww;
    float bv = 0.0f;
    int64_t bi = -1;  // none yet
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t i = (w.h0 + k / ww) * g.width + w.w0 + k % ww;
      if (bi < 0 || math::PoolPrefersFirst(plane[i], i, bv, bi)) {
        bv = plane[i];
        bi = i;
      }
    }
    value[threadIdx.x] = bv;
    index[threadIdx.x] = bi;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      const int t = static_cast<int>(threadIdx.x);
      if (t < half && index[t + half] >= 0 &&
          (index[t] < 0 || math::PoolPrefersFirst(value[t + half], index[t + half], value[t], index[t]))) {
        value[t] = value[t + half];
        index[t] = index[t + half];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (y != nullptr) y[e] = value[0] != value[0] ? std::numeric_limits<float>::quiet_NaN() : value[0];
      if (argmax != nullptr) argmax[e] = index[0];
    }
    __syncthreads();  // the arrays are refilled for the next output
  }
}

__global__ void AveragePoolBlockKernel(const float* x, PoolGeometry g, float* y) {
  __shared__ float partial[kThreads];
  const int64_t n = g.planes * g.out_plane(), full = g.kernel_h * g.kernel_w;
  for (int64_t e = blockIdx.x; e < n; e += gridDim.x) {
    const float* plane = x + (e / g.out_plane()) * g.in_plane();
    const PoolWindow w = WindowOf(g, e % g.out_plane());
    const int64_t ww = w.w1 - w.w0, count = (w.h1 - w.h0) * ww;
    float acc = 0.0f;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) acc += plane[(w.h0 + k / ww) * g.width + w.w0 + k % ww];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) y[e] = partial[0] / static_cast<float>(math::PoolDivisor(w, g.count_include_pad != 0, full));
    __syncthreads();
  }
}

// ---- gradients: one thread per input element ----

__global__ void MaxPoolGradientKernel(const int64_t* argmax, const float* dy, PoolGeometry g, float* dx) {
  const int64_t n = g.planes * g.in_plane();
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t p = e / g.in_plane(), r = e % g.in_plane();
    const int64_t out = p * g.out_plane();
    dx[e] = math::MaxPoolGradientAt(g, argmax + out, dy + out, r / g.width, r % g.width);
  }
}

__global__ void AveragePoolGradientKernel(const float* dy, PoolGeometry g, float* dx) {
  const int64_t n = g.planes * g.in_plane();
  for (int64_t e = FirstIndex(); e < n; e += Stride()) {
    const int64_t p = e / g.in_plane(), r = e % g.in_plane();
    dx[e] = math::AveragePoolGradientAt(g, dy + p * g.out_plane(), r / g.width, r % g.width);
  }
}

}  // namespace

cudaError_t LaunchMaxPool(const float* x, PoolGeometry g, float* y, cudaStream_t stream) {
  const int64_t n = g.planes * g.out_plane();
  if (n <= 0) return cudaSuccess;
  if (BlockPerWindow(g))
    MaxPoolBlockKernel<<<WindowBlocks(n), kThreads, 0, stream>>>(x, g, y, nullptr);
  else
    MaxPoolKernel<<<Blocks(n), kThreads, 0, stream>>>(x, g, y);
  return cudaGetLastError();
}

cudaError_t LaunchPoolArgMax(const float* x, PoolGeometry g, int64_t* argmax, cudaStream_t stream) {
  const int64_t n = g.planes * g.out_plane();
  if (n <= 0) return cudaSuccess;
  if (BlockPerWindow(g))
    MaxPoolBlockKernel<<<WindowBlocks(n), kThreads, 0, stream>>>(x, g, nullptr, argmax);
  else
    PoolArgMaxKernel<<<Blocks(n), kThreads, 0, stream>>>(x, g, argmax);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPoolGradient(const int64_t* argmax, const float* dy, PoolGeometry g, float* dx,
                                  cudaStream_t stream) {
  const int64_t n = g.planes * g.in_plane();
  if (n <= 0) return cudaSuccess;
  MaxPoolGradientKernel<<<Blocks(n), kThreads, 0, stream>>>(argmax, dy, g, dx);
  return cudaGetLastError();
}

cudaError_t LaunchAveragePool(const float* x, PoolGeometry g, float* y, cudaStream_t stream) {
  const int64_t n = g.planes * g.out_plane();
  if (n <= 0) return cudaSuccess;
  if (BlockPerWindow(g))
    AveragePoolBlockKernel<<<WindowBlocks(n), kThreads, 0, stream>>>(x, g, y);
  else
    AveragePoolKernel<<<Blocks(n), kThreads, 0, stream>>>(x, g, y);
  return cudaGetLastError();
}

cudaError_t LaunchAveragePoolGradient(const float* dy, PoolGeometry g, float* dx, cudaStream_t stream) {
  const int64_t n = g.planes * g.in_plane();
  if (n <= 0) return cudaSuccess;
  AveragePoolGradientKernel<<<Blocks(n), kThreads, 0, stream>>>(dy, g, dx);
  return cudaGetLastError();
}

}  // namespace dp::cuda
