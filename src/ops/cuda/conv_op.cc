// CUDA kernels of Conv and ConvGradient (schemas and shape rules in
// ops/cpu/conv_op.cc and conv_utils.h), NCHW as the CPU: the batch in blocks
// of images whose column matrices lie side by side, [C * kh * kw, images *
// OH * OW] (im2col, ops/cuda/conv_kernels.cu), and one strided-batched cuBLAS
// GEMM per block over the groups (group g owns rows g * K of the columns,
// filters g * M/group of W).
//
// Row-major matrices are their transposes to column-major cuBLAS; per group,
// with L = images * OH * OW, col_g [K, L], W_g [M/g, K] and the block's dY
// moved to dYc_g [M/g, L]:
//   Conv:  out_g^T [L, M/g] = col_g^T [L, K] W_g^T [K, M/g]
//   dW:    dW_g^T [K, M/g] += col_g [K, L] dYc_g^T [L, M/g]   (blocks in order: deterministic)
//   dX:    dcol_g^T [L, K]  = dYc_g^T [L, M/g] W_g [M/g, K], then col2im (a gather, no atomics)
// and db is a per-channel sum over N, OH, OW (a fixed-order block reduction).
#include <algorithm>
#include <cstdint>

#include "cuda/op_launchers.h"
#include "ops/cpu/conv_utils.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

using conv::ConvShape;

// A block's column matrix and its [M, L] matrix (Y's or dY's columns) hold
// at most this many floats together (64 MiB; ConvGradient's dcol doubles
// the first); a block holds at least one image.
constexpr int64_t kMaxBlockElements = int64_t{1} << 24;

// The block of images one GEMM covers, and the sizes cuBLAS takes.
struct ConvBlocks {
  int64_t images = 1;  // per block
  int64_t rows = 0;    // of the column matrix: C * kh * kw
  int k = 0, mg = 0;   // per group: C/group * kh * kw, M/group
  int groups = 1;
  int64_t stride_w = 0;  // between groups in W: M/group * K

  explicit ConvBlocks(const ConvShape& s) {
    rows = conv::CheckedProduct({s.c, s.win.kh, s.win.kw}, "C * kh * kw");
    const int64_t per_image = conv::CheckedProduct({rows + s.m, s.out_hw()}, "(C * kh * kw + M) * OH * OW");
    images = std::clamp<int64_t>(kMaxBlockElements / std::max<int64_t>(1, per_image), 1, std::max<int64_t>(1, s.n));
    k = BlasInt(s.k(), "C/group * kh * kw");
    mg = BlasInt(s.mg, "M/group");
    groups = BlasInt(s.group, "group");
    stride_w = s.mg * s.k();
  }
  // GEMM columns of a block of `nb` images: L = nb * OH * OW.
  int Columns(const ConvShape& s, int64_t nb) const { return BlasInt(nb * s.out_hw(), "images * OH * OW"); }
};

class ConvOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& w = FloatInput(1);
    const Tensor* b = InputSize() > 2 ? &FloatInput(2) : nullptr;
    const ConvShape s = conv::ComputeConvShape(def(), args(), x.dims(), w.dims(), b ? &b->dims() : nullptr);
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b ? b->data<float>() : nullptr;
    float* yp = Output(0, s.y, DType::kFloat32)->mutable_data<float>();
    const int64_t ohw = s.out_hw(), chw = s.c * s.in_hw();
    if (ohw == 0 || s.n == 0 || s.m == 0) return;  // Y has no elements
    // No inputs per output (C = 0): Y is the bias, or zero.
    if (s.k() == 0) {
      DP_CUDA_CHECK(cuda::LaunchColumnsToImages(nullptr, bp, s.n, s.m, ohw, yp, stream()));
      return;
    }
    const ConvBlocks blk(s);
    const math::ConvGeometry g = s.Geometry();
    float* col = Scratch<float>((blk.rows + s.m) * blk.images * ohw);
    float* out = col + blk.rows * blk.images * ohw;  // [M, L]
    const float one = 1.0f, zero = 0.0f;
    for (int64_t n0 = 0; n0 < s.n; n0 += blk.images) {
      const int64_t nb = std::min(blk.images, s.n - n0);
      const int l = blk.Columns(s, nb);
      DP_CUDA_CHECK(cuda::LaunchIm2Col(xp + n0 * chw, g, nb, col, stream()));
      GemmStridedBatched(CUBLAS_OP_N, CUBLAS_OP_N, l, blk.mg, blk.k, &one, col, l, blk.k * static_cast<int64_t>(l), wp,
                         blk.k, blk.stride_w, &zero, out, l, blk.mg * static_cast<int64_t>(l), blk.groups);
      DP_CUDA_CHECK(cuda::LaunchColumnsToImages(out, bp, nb, s.m, ohw, yp + n0 * s.m * ohw, stream()));
    }
  }
};

class ConvGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& w = FloatInput(1);
    const Tensor& dy = FloatInput(2);
    const conv::ConvGradOutputs outs = conv::GradOutputs(def(), args());
    const ConvShape s = conv::GradShape(def(), args(), x.dims(), w.dims(), dy.dims());
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* dyp = dy.data<float>();
    float* dwp = Output(0, w.dims(), DType::kFloat32)->mutable_data<float>();
    float* dbp = outs.db ? Output(1, {s.m}, DType::kFloat32)->mutable_data<float>() : nullptr;
    float* dxp = outs.dx ? Output(outs.db ? 2 : 1, x.dims(), DType::kFloat32)->mutable_data<float>() : nullptr;
    const int64_t ohw = s.out_hw(), chw = s.c * s.in_hw();
    DP_CUDA_CHECK(cuda::LaunchFill(dwp, w.numel(), 0.0f, stream()));
    if (dbp) DP_CUDA_CHECK(cuda::LaunchChannelSums(dyp, s.n, s.m, ohw, dbp, stream()));
    if (s.k() == 0 || s.mg == 0 || ohw == 0 || s.n == 0) {  // dW and dX are zero
      if (dxp) DP_CUDA_CHECK(cuda::LaunchFill(dxp, x.numel(), 0.0f, stream()));
      return;
    }
    const ConvBlocks blk(s);
    const math::ConvGeometry g = s.Geometry();
    const int64_t col_size = blk.rows * blk.images * ohw;
    float* col = Scratch<float>(col_size * (dxp ? 2 : 1) + s.m * blk.images * ohw);
    float* dyc = col + col_size;                 // [M, L]
    float* dcol = dyc + s.m * blk.images * ohw;  // [C * kh * kw, L], with dX
    const float one = 1.0f, zero = 0.0f;
    for (int64_t n0 = 0; n0 < s.n; n0 += blk.images) {
      const int64_t nb = std::min(blk.images, s.n - n0);
      const int l = blk.Columns(s, nb);
      const int64_t stride_col = blk.k * static_cast<int64_t>(l), stride_dyc = blk.mg * static_cast<int64_t>(l);
      DP_CUDA_CHECK(cuda::LaunchIm2Col(xp + n0 * chw, g, nb, col, stream()));
      DP_CUDA_CHECK(cuda::LaunchImagesToColumns(dyp + n0 * s.m * ohw, nb, s.m, ohw, dyc, stream()));
      GemmStridedBatched(CUBLAS_OP_T, CUBLAS_OP_N, blk.k, blk.mg, l, &one, col, l, stride_col, dyc, l, stride_dyc, &one,
                         dwp, blk.k, blk.stride_w, blk.groups);
      if (!dxp) continue;
      GemmStridedBatched(CUBLAS_OP_N, CUBLAS_OP_T, l, blk.k, blk.mg, &one, dyc, l, stride_dyc, wp, blk.k, blk.stride_w,
                         &zero, dcol, l, stride_col, blk.groups);
      DP_CUDA_CHECK(cuda::LaunchCol2Im(dcol, g, nb, dxp + n0 * chw, stream()));
    }
  }
};

DP_REGISTER_CUDA_OPERATOR(Conv, ConvOp);
DP_REGISTER_CUDA_OPERATOR(ConvGradient, ConvGradientOp);

}  // namespace
}  // namespace dp
