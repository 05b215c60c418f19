// The elementwise family's CUDA kernels (cuda/op_launchers.h): grid-stride
// loops (a capped grid of 256-thread blocks covers any n), indices in
// int64_t. The per-element formulas and the broadcast / permutation index
// math are ops/math's, which the CPU kernels run too.
#include <cstdint>

#include "cuda/grid.cuh"
#include "cuda/op_launchers.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/math/activation.h"
#include "ops/math/binary.h"
#include "ops/math/broadcast.h"
#include "ops/math/strided_index.h"

namespace dp::cuda {
namespace {

using namespace grid;  // NOLINT: the launch geometry every kernel here shares

// ---- elementwise maps -------------------------------------------------------

template <typename F>
__global__ void MapKernel(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = f(x[i]);
}

// y[i] = f(a[i], b[i]); y may be a or b (each thread reads before it writes
// its own index).
template <typename F>
__global__ void ZipKernel(const float* a, const float* b, float* y, int64_t n, F f) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = f(a[i], b[i]);
}

template <typename F>
cudaError_t LaunchMap(const float* x, float* y, int64_t n, F f, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  MapKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n, f);
  return cudaGetLastError();
}

template <typename F>
cudaError_t LaunchZip(const float* a, const float* b, float* y, int64_t n, F f, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ZipKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, y, n, f);
  return cudaGetLastError();
}

struct ReluFn {
  __device__ float operator()(float x) const { return math::Relu(x); }
};
struct SigmoidFn {
  __device__ float operator()(float x) const { return math::Sigmoid(x); }
};
struct TanhFn {
  __device__ float operator()(float x) const { return math::Tanh(x); }
};
struct ScaleFn {
  float scale;
  __device__ float operator()(float x) const { return x * scale; }
};
struct ClipFn {
  float lo, hi;
  __device__ float operator()(float x) const { return math::Clip(x, lo, hi); }
};
// Gradients: (forward output y, output gradient dy) -> dx.
struct ReluGradientFn {
  __device__ float operator()(float y, float dy) const { return math::ReluGradient(y, dy); }
};
struct SigmoidGradientFn {
  __device__ float operator()(float y, float dy) const { return math::SigmoidGradient(y, dy); }
};
struct TanhGradientFn {
  __device__ float operator()(float y, float dy) const { return math::TanhGradient(y, dy); }
};
struct ClipGradientFn {
  float lo, hi;
  __device__ float operator()(float y, float dy) const { return math::ClipGradient(y, dy, lo, hi); }
};
template <math::BinaryOp op>
struct BinaryFn {
  __device__ float operator()(float a, float b) const { return math::ApplyBinary<op>(a, b); }
};

__global__ void FillKernel(float* y, int64_t n, float value) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = value;
}

__global__ void BroadcastRowsKernel(const float* b, float* y, int64_t n, int64_t cols) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = b[i % cols];
}

// ---- broadcasting binary ops ------------------------------------------------

// y[i] = a[oa] op b[ob] with the operands' offsets from the collapsed
// broadcast. y may alias an operand only where that operand has y's shape,
// so it is read at index i by the thread writing y[i].
template <math::BinaryOp op>
__global__ void BroadcastBinaryKernel(const float* a, const float* b, float* y, math::BroadcastIndex index,
                                      int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    int64_t oa, ob;
    math::BroadcastOffsets(index, i, &oa, &ob);
    y[i] = math::ApplyBinary<op>(a[oa], b[ob]);
  }
}

template <math::BinaryOp op>
cudaError_t LaunchBinaryOf(const float* a, const float* b, float* y, const math::BroadcastIndex& index, int64_t n,
                           cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const bool same_shape = index.rank == 0 || (index.rank == 1 && index.a_strides[0] == 1 && index.b_strides[0] == 1);
  if (same_shape) return LaunchZip(a, b, y, n, BinaryFn<op>{}, stream);
  BroadcastBinaryKernel<op><<<Blocks(n), kThreads, 0, stream>>>(a, b, y, index, n);
  return cudaGetLastError();
}

// ---- SumReduceLike ----------------------------------------------------------

// One thread per output, summing its `count` elements in X's order: for
// short sums (or many outputs), where a block per output would idle.
__global__ void SumReduceThreadKernel(const float* x, float* y, math::ReduceIndex index, int64_t outputs) {
  for (int64_t o = FirstIndex(); o < outputs; o += Stride()) {
    const int64_t base = math::StridedOffset(index.kept, o);
    float sum = 0.0f;
    for (int64_t r = 0; r < index.count; ++r) sum += x[base + math::StridedOffset(index.reduced, r)];
    y[o] = sum;
  }
}

// One block per output: the threads take every blockDim-th element, then
// BlockSum adds their partial sums in a fixed order.
__global__ void SumReduceBlockKernel(const float* x, float* y, math::ReduceIndex index, int64_t outputs) {
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t base = math::StridedOffset(index.kept, o);
    float sum = 0.0f;
    for (int64_t r = threadIdx.x; r < index.count; r += blockDim.x) sum += x[base + math::StridedOffset(index.reduced, r)];
    sum = reduce::BlockSum(sum);
    if (threadIdx.x == 0) y[o] = sum;
  }
}

// Sums up to this long run one per thread when there are enough outputs to
// fill the GPU; short sums always do.
constexpr int64_t kShortSum = 64;
constexpr int64_t kThreadSumMax = 4096;
constexpr int64_t kManyOutputs = 65536;

// ---- data movement ----------------------------------------------------------

// Elements of `itemsize` bytes as one unsigned word each.
template <int kBytes> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

// Calls launch(W{}) with W the word of `itemsize` bytes.
template <typename Launch>
cudaError_t ForItemsize(int itemsize, Launch launch) {
  switch (itemsize) {
    case 1: return launch(Word<1>::type{});
    case 2: return launch(Word<2>::type{});
    case 4: return launch(Word<4>::type{});
    case 8: return launch(Word<8>::type{});
    default: return cudaErrorInvalidValue;
  }
}

// y[i] = x[StridedOffset(index, i)]: Transpose (Y walked in order, coalesced
// writes).
template <typename W>
__global__ void GatherKernel(const W* x, W* y, math::StridedIndex index, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] = x[math::StridedOffset(index, i)];
}

// rows x row_length elements between two row strides (Concat's pieces).
template <typename W>
__global__ void CopyRowsKernel(const W* src, int64_t src_stride, W* dst, int64_t dst_stride, int64_t row_length,
                               int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const int64_t r = i / row_length, c = i - r * row_length;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
}

// dst row r = src row indices[r] (rows of row_length words); an index out
// of range gives zeros. Consecutive threads take consecutive words of a
// row: coalesced on both sides.
template <typename W>
__global__ void GatherRowsKernel(const W* src, int64_t src_rows, const int64_t* indices, W* dst,
                                 int64_t row_length, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const int64_t r = i / row_length, c = i - r * row_length;
    const int64_t s = indices[r];
    dst[i] = s >= 0 && s < src_rows ? src[s * row_length + c] : W{0};
  }
}

int CappedBlocks(int64_t units) { return static_cast<int>(units < kMaxBlocks ? units : kMaxBlocks); }

}  // namespace

cudaError_t LaunchFill(float* y, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillKernel<<<Blocks(n), kThreads, 0, stream>>>(y, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchRelu(const float* x, float* y, int64_t n, cudaStream_t stream) {
  return LaunchMap(x, y, n, ReluFn{}, stream);
}

cudaError_t LaunchReluGradient(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  return LaunchZip(y, dy, dx, n, ReluGradientFn{}, stream);
}

cudaError_t LaunchSigmoid(const float* x, float* y, int64_t n, cudaStream_t stream) {
  return LaunchMap(x, y, n, SigmoidFn{}, stream);
}

cudaError_t LaunchSigmoidGradient(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  return LaunchZip(y, dy, dx, n, SigmoidGradientFn{}, stream);
}

cudaError_t LaunchTanh(const float* x, float* y, int64_t n, cudaStream_t stream) {
  return LaunchMap(x, y, n, TanhFn{}, stream);
}

cudaError_t LaunchTanhGradient(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  return LaunchZip(y, dy, dx, n, TanhGradientFn{}, stream);
}

cudaError_t LaunchClip(const float* x, float* y, int64_t n, float lo, float hi, cudaStream_t stream) {
  return LaunchMap(x, y, n, ClipFn{lo, hi}, stream);
}

cudaError_t LaunchClipGradient(const float* y, const float* dy, float* dx, int64_t n, float lo, float hi,
                               cudaStream_t stream) {
  return LaunchZip(y, dy, dx, n, ClipGradientFn{lo, hi}, stream);
}

cudaError_t LaunchAdd(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  return LaunchZip(a, b, y, n, BinaryFn<math::BinaryOp::kAdd>{}, stream);
}

cudaError_t LaunchBinary(math::BinaryOp op, const float* a, const float* b, float* y, math::BroadcastIndex index,
                         int64_t n, cudaStream_t stream) {
  switch (op) {
    case math::BinaryOp::kAdd: return LaunchBinaryOf<math::BinaryOp::kAdd>(a, b, y, index, n, stream);
    case math::BinaryOp::kSub: return LaunchBinaryOf<math::BinaryOp::kSub>(a, b, y, index, n, stream);
    case math::BinaryOp::kMul: return LaunchBinaryOf<math::BinaryOp::kMul>(a, b, y, index, n, stream);
    case math::BinaryOp::kDiv: return LaunchBinaryOf<math::BinaryOp::kDiv>(a, b, y, index, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchScale(const float* x, float scale, float* y, int64_t n, cudaStream_t stream) {
  return LaunchMap(x, y, n, ScaleFn{scale}, stream);
}

cudaError_t LaunchBroadcastRows(const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int64_t n = rows * cols;
  BroadcastRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(b, y, n, cols);
  return cudaGetLastError();
}

cudaError_t LaunchSumReduce(const float* x, float* y, math::ReduceIndex index, int64_t outputs,
                            cudaStream_t stream) {
  if (outputs <= 0) return cudaSuccess;
  if (index.count <= kShortSum || (outputs >= kManyOutputs && index.count <= kThreadSumMax)) {
    SumReduceThreadKernel<<<Blocks(outputs), kThreads, 0, stream>>>(x, y, index, outputs);
  } else {
    SumReduceBlockKernel<<<CappedBlocks(outputs), kThreads, 0, stream>>>(x, y, index, outputs);
  }
  return cudaGetLastError();
}

cudaError_t LaunchGather(const void* x, void* y, math::StridedIndex index, int64_t n, int itemsize,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return ForItemsize(itemsize, [&](auto word) {
    using W = decltype(word);
    GatherKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const W*>(x), static_cast<W*>(y), index, n);
    return cudaGetLastError();
  });
}

cudaError_t LaunchCopyRows(const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows,
                           int64_t row_length, int itemsize, cudaStream_t stream) {
  if (rows <= 0 || row_length <= 0) return cudaSuccess;
  const int64_t n = rows * row_length;
  return ForItemsize(itemsize, [&](auto word) {
    using W = decltype(word);
    CopyRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const W*>(src), src_stride, static_cast<W*>(dst),
                                                       dst_stride, row_length, n);
    return cudaGetLastError();
  });
}

cudaError_t LaunchGatherRows(const void* src, int64_t src_rows, const int64_t* indices, void* dst, int64_t rows,
                             int64_t row_length, int itemsize, cudaStream_t stream) {
  if (rows <= 0 || row_length <= 0) return cudaSuccess;
  const int64_t n = rows * row_length;
  return ForItemsize(itemsize, [&](auto word) {
    using W = decltype(word);
    GatherRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const W*>(src), src_rows, indices,
                                                         static_cast<W*>(dst), row_length, n);
    return cudaGetLastError();
  });
}

}  // namespace dp::cuda
