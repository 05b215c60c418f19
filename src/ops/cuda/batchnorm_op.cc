// CUDA kernels of SpatialBN and SpatialBNGradient (schemas and CPU twins in
// ops/cpu/batchnorm_op.cc; kernels in batchnorm_kernels.cu): the same shape
// rules, statistics in double with two passes, the running statistics
// updated in place, the saved mean and inverse std for the gradient.
#include <cstdint>

#include "ops/cuda/batchnorm_forward.h"

namespace dp {
namespace {

using namespace bn;  // NOLINT: the shape rules and kernels of batch norm

class SpatialBNOp final : public CudaBnForwardOp {
 public:
  using CudaBnForwardOp::CudaBnForwardOp;

 private:
  void RunOnDevice() override {
    const BnMode mode = ReadMode(args(), static_cast<size_t>(OutputSize()));
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = CheckForward(in.names, in.dims, in.dtypes, mode.is_test);
    if (mode.is_test) {
      Forward(mode, d, {}, {}, Scratch<double>(2 * d.c));
      return;
    }
    // Scratch: coeffs (2C), the moments' sums (3C), the partials.
    double* coeffs = Scratch<double>(5 * d.c + BnPartialsSize(d));
    double* sums = coeffs + 2 * d.c;
    DP_CUDA_CHECK(cuda::LaunchBnMoments(FloatInput(0).data<float>(), d, sums + 3 * d.c, sums, stream()));
    Forward(mode, d, {sums + d.c, sums + 2 * d.c, sums}, {nullptr, d.count()}, coeffs);
  }
};

class SpatialBNGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = CheckGradient(in.names, in.dims, in.dtypes);
    const float* x = FloatInput(0).data<float>();
    const float* scale = FloatInput(1).data<float>();
    const float* dy = FloatInput(2).data<float>();  // before Output: dX may be dY
    const float* mean = FloatInput(3).data<float>();
    const float* inv_std = FloatInput(4).data<float>();
    // Scratch: sum_dy (C), sum_dy_xhat (C), the partials.
    double* sums = Scratch<double>(2 * d.c + BnPartialsSize(d));
    DP_CUDA_CHECK(cuda::LaunchBnGradSums(x, dy, mean, inv_std, d, sums + 2 * d.c, sums, stream()));
    const Dims xdims = Input(0).dims();
    float* dx = Output(0, xdims, DType::kFloat32)->mutable_data<float>();
    float* dscale = Output(1, {d.c}, DType::kFloat32)->mutable_data<float>();
    float* dbias = Output(2, {d.c}, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchBnBackward(x, dy, scale, mean, inv_std, sums, sums + d.c, {nullptr, d.count()}, d, dx,
                                         stream()));
    DP_CUDA_CHECK(cuda::LaunchBnStoreGradSums(sums, sums + d.c, d.c, d.count(), dscale, dbias, nullptr, stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(SpatialBN, SpatialBNOp);
DP_REGISTER_CUDA_OPERATOR(SpatialBNGradient, SpatialBNGradientOp);

}  // namespace
}  // namespace dp
