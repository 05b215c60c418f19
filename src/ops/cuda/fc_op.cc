// CUDA kernel of FC (schema in ops/cpu/fc_op.cc), on cuBLAS.
#include <cstdint>
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
    DP_CUBLAS_CHECK(cublasSgemm(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &one, wp, ki, xp, ki, &one, yp, ni));
    if (relu_) DP_CUDA_CHECK(cuda::LaunchRelu(yp, yp, m * n, stream()));
  }
  // The fused activation, as on the CPU ("none" or "relu").
  const bool relu_ = FcActivationIsRelu(args());
};

DP_REGISTER_CUDA_OPERATOR(FC, FcOp);

}  // namespace
}  // namespace dp
