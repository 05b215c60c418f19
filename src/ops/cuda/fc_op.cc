// CUDA kernels of FC and FCGradient (schemas in ops/cpu/fc_op.cc), on cuBLAS.
#include <cstdint>
#include <string>
#include <utility>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

// Y = X W^T + b, X flattened to [M, K] at `axis`, W [N, K] at `axis_w`, b [N].
// cuBLAS is column-major, where row-major Y [M, N] reads as Y^T [N, M]; so
// compute Y^T = W X^T, with W (row-major [N, K], i.e. column-major W^T)
// transposed and X^T (column-major view of row-major X) as is. The bias is
// written into Y first and the product added with beta = 1.
class FcOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& w = FloatInput(1);
    const Tensor& b = FloatInput(2);
    FcDims d = ComputeFcDims(def(), x.dims(), w.dims(), b.dims(), args().Int("axis", 1), args().Int("axis_w", 1));
    const int64_t m = d.m, n = d.n, k = d.k;
    Dims out = d.out;

    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b.data<float>();
    float* yp = Output(0, std::move(out), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchBroadcastRows(bp, yp, m, n, stream()));
    if (m == 0 || n == 0 || k == 0) return;  // Y = b (or empty); cuBLAS rejects zero sizes
    const float one = 1.0f;
    const int mi = BlasInt(m, "M"), ni = BlasInt(n, "N"), ki = BlasInt(k, "K");
    Gemm(CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &one, wp, ki, xp, ki, &one, yp, ni);
    if (relu_) DP_CUDA_CHECK(cuda::LaunchRelu(yp, yp, m * n, stream()));
  }
  // The fused activation, as on the CPU ("none" or "relu").
  const bool relu_ = FcActivationIsRelu(args());
};

// dW = dY^T X, db = column sums of dY, dX = dY W (with three outputs); with
// a fused relu dY is first masked by Y > 0, as on the CPU. Row-major
// matrices are their transposes to column-major cuBLAS:
//   dW^T [K, N] = X^T [K, M] dY [M, N]    (dY^T read transposed)
//   dX^T [K, M] = W^T [K, N] dY^T [N, M]
//   db [N]      = dY^T [N, M] ones [M]    (a GEMV: deterministic, unlike atomics)
class FcGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& w = FloatInput(1);
    const Tensor& dy = FloatInput(2);
    const bool has_y = InputSize() == 4;
    const Tensor* y = has_y ? &FloatInput(3) : nullptr;
    const FcGradientDims checked = CheckFcGradientInputs(def(), args(), x.dims(), w.dims(), dy, y, InputDesc(2),
                                                         has_y ? InputDesc(3) : std::string());
    const int64_t m = checked.d.m, n = checked.d.n, k = checked.d.k;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* dyp = dy.data<float>();
    // Scratch: the ones of db's GEMV [M], then the masked dY [M, N] (relu).
    float* ones = Scratch<float>(m + (checked.relu ? m * n : 0));
    if (checked.relu) {
      float* dz = ones + m;
      DP_CUDA_CHECK(cuda::LaunchReluGradient(y->data<float>(), dyp, dz, m * n, stream()));
      dyp = dz;
    }
    float* dw = Output(0, w.dims(), DType::kFloat32)->mutable_data<float>();
    float* db = Output(1, {n}, DType::kFloat32)->mutable_data<float>();
    float* dx = OutputSize() > 2 ? Output(2, x.dims(), DType::kFloat32)->mutable_data<float>() : nullptr;
    const int mi = BlasInt(m, "M"), ni = BlasInt(n, "N"), ki = BlasInt(k, "K");
    const float one = 1.0f, zero = 0.0f;
    if (m == 0 || n == 0 || k == 0) {  // cuBLAS rejects zero sizes: dW and dX are zero (or empty)
      DP_CUDA_CHECK(cuda::LaunchFill(dw, n * k, 0.0f, stream()));
      if (dx) DP_CUDA_CHECK(cuda::LaunchFill(dx, m * k, 0.0f, stream()));
    } else {
      Gemm(CUBLAS_OP_N, CUBLAS_OP_T, ki, ni, mi, &one, xp, ki, dyp, ni, &zero, dw, ki);
      if (dx) Gemm(CUBLAS_OP_N, CUBLAS_OP_N, ki, mi, ni, &one, wp, ki, dyp, ni, &zero, dx, ki);
    }
    if (m == 0 || n == 0) {  // sums over no rows are 0
      DP_CUDA_CHECK(cuda::LaunchFill(db, n, 0.0f, stream()));
      return;
    }
    DP_CUDA_CHECK(cuda::LaunchFill(ones, m, 1.0f, stream()));
    DP_CUBLAS_CHECK(cublasSgemv(cublas(), CUBLAS_OP_N, ni, mi, &one, dyp, ni, ones, 1, &zero, db, 1));
  }
};

DP_REGISTER_CUDA_OPERATOR(FC, FcOp);
DP_REGISTER_CUDA_OPERATOR(FCGradient, FcGradientOp);

}  // namespace
}  // namespace dp
