// CUDA kernels of SquaredL2Distance and its gradient (schemas in
// ops/cpu/loss_ops.cc), float32: Z[i] = 0.5 * sum_j (X[i, j] - Y[i, j])^2,
// one block per row summing in double (as the CPU does) in a fixed order;
// dX[i, j] = (X[i, j] - Y[i, j]) * dZ[i].
#include <cstdint>
#include <utility>

#include "cuda/op_launchers.h"
#include "ops/cpu/squared_l2_rows.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

class SquaredL2DistanceOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& y = FloatInput(1);
    const auto [n, d] = L2Rows(x.dims(), x.dtype(), InputDesc(0), y.dims(), y.dtype(), InputDesc(1));
    float* z = Output(0, {n}, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchSquaredL2Distance(x.data<float>(), y.data<float>(), z, n, d, stream()));
  }
};

class SquaredL2DistanceGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& y = FloatInput(1);
    const Tensor& dz = FloatInput(2);
    const auto [n, d] = L2Rows(x.dims(), x.dtype(), InputDesc(0), y.dims(), y.dtype(), InputDesc(1));
    DP_ENFORCE_CODE(dz.dtype() == x.dtype() && dz.dims() == Dims{n}, Code::kShape, InputDesc(2), " must be [", n,
                    "] of ", InputDesc(0), "'s dtype, got ", dz.DebugString());
    float* dx = Output(0, x.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchSquaredL2DistanceGradient(x.data<float>(), y.data<float>(), dz.data<float>(), dx, n, d,
                                                        stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(SquaredL2Distance, SquaredL2DistanceOp);
DP_REGISTER_CUDA_OPERATOR(SquaredL2DistanceGradient, SquaredL2DistanceGradientOp);

}  // namespace
}  // namespace dp
