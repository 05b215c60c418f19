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
// transposed and X^T (column-major view of row-major X) as is. Then one
// pass adds the bias and applies the fused relu (ops/math/fc_bias.h): two
// kernels a layer.
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
    if (m == 0 || n == 0) return;  // empty
    if (k == 0) {  // no products (cuBLAS rejects zero sizes): Y = act(b)
      DP_CUDA_CHECK(cuda::LaunchFill(yp, m * n, 0.0f, stream()));
    } else {
      const float one = 1.0f, zero = 0.0f;
      const int mi = BlasInt(m, "M"), ni = BlasInt(n, "N"), ki = BlasInt(k, "K");
      Gemm(CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &one, wp, ki, xp, ki, &zero, yp, ni);
    }
    DP_CUDA_CHECK(cuda::LaunchFcBiasActivation(yp, bp, m, n, relu_, stream()));
  }
  // The fused activation, as on the CPU ("none" or "relu").
  const bool relu_ = FcActivationIsRelu(args());
};

// dW = dZ^T X, db = column sums of dZ, dX = dZ W (with three outputs), where
// dZ is dY, or with a fused relu dY masked by Y > 0, as on the CPU. One
// kernel makes dZ and db (ops/math/fc_bias.h: deterministic, unlike
// atomics), then the GEMMs; row-major matrices are their transposes to
// column-major cuBLAS:
//   dW^T [K, N] = X^T [K, M] dZ [M, N]    (dZ^T read transposed)
//   dX^T [K, M] = W^T [K, N] dZ^T [N, M]
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
    float* dw = Output(0, w.dims(), DType::kFloat32)->mutable_data<float>();
    float* db = Output(1, {n}, DType::kFloat32)->mutable_data<float>();
    float* dx = OutputSize() > 2 ? Output(2, x.dims(), DType::kFloat32)->mutable_data<float>() : nullptr;
    // Scratch: the masked dY (relu).
    float* dz = checked.relu ? Scratch<float>(m * n) : nullptr;
    DP_CUDA_CHECK(cuda::LaunchFcBiasGradient(dyp, checked.relu ? y->data<float>() : nullptr, dz, db, m, n, stream()));
    if (checked.relu) dyp = dz;
    const int mi = BlasInt(m, "M"), ni = BlasInt(n, "N"), ki = BlasInt(k, "K");
    const float one = 1.0f, zero = 0.0f;
    if (m == 0 || n == 0 || k == 0) {  // cuBLAS rejects zero sizes: dW and dX are zero (or empty)
      DP_CUDA_CHECK(cuda::LaunchFill(dw, n * k, 0.0f, stream()));
      if (dx) DP_CUDA_CHECK(cuda::LaunchFill(dx, m * k, 0.0f, stream()));
    } else {
      Gemm(CUBLAS_OP_N, CUBLAS_OP_T, ki, ni, mi, &one, xp, ki, dyp, ni, &zero, dw, ki);
      if (dx) Gemm(CUBLAS_OP_N, CUBLAS_OP_N, ki, mi, ni, &one, wp, ki, dyp, ni, &zero, dx, ki);
    }
  }
};

DP_REGISTER_CUDA_OPERATOR(FC, FcOp);
DP_REGISTER_CUDA_OPERATOR(FCGradient, FcGradientOp);

}  // namespace
}  // namespace dp
