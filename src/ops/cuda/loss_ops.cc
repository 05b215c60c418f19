// CUDA kernels of AveragedLoss, SquaredL2Distance and their gradients
// (schemas and CPU twins in ops/cpu/loss_ops.cc; kernels in
// softmax_loss_kernels.cu). The loss stays on the device; the gradients read
// dloss / dZ there.
#include <cstdint>

#include "cuda/op_launchers.h"
#include "ops/cpu/loss_checks.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/math/losses.h"

namespace dp {
namespace {

class AveragedLossOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    CheckAveragedLossInput(x.dims(), InputDesc(0));
    const float* xp = x.data<float>();
    const int64_t n = x.numel();
    float* loss = Output(0, {}, DType::kFloat32)->mutable_data<float>();
    double* partials = Scratch<double>(math::SumPartials(n));
    DP_CUDA_CHECK(cuda::LaunchAveragedLoss(xp, loss, partials, n, stream()));
  }
};

class AveragedLossGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& dl = FloatInput(1);
    CheckLossGradScalar(dl, InputDesc(1), x.dtype(), "X");
    const float* dlp = dl.data<float>();
    const int64_t n = x.numel();
    const Dims dims = x.dims();
    float* dx = Output(0, dims, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchAveragedLossGradient(dlp, dx, n, stream()));
  }
};

class SquaredL2DistanceOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& y = FloatInput(1);
    const auto [n, d] = L2Rows(x.dims(), x.dtype(), InputDesc(0), y.dims(), y.dtype(), InputDesc(1));
    const float* xp = x.data<float>();
    const float* yp = y.data<float>();
    float* z = Output(0, {n}, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchSquaredL2Distance(xp, yp, z, n, d, stream()));
  }
};

// dX = (X - Y) * dZ per row; the gradient of Y is this op with X and Y swapped.
class SquaredL2DistanceGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& y = FloatInput(1);
    const Tensor& dz = FloatInput(2);
    const auto [n, d] = L2Rows(x.dims(), x.dtype(), InputDesc(0), y.dims(), y.dtype(), InputDesc(1));
    CheckL2DistanceGrad(dz, InputDesc(2), n, x.dtype(), InputDesc(0));
    const float* xp = x.data<float>();
    const float* yp = y.data<float>();
    const float* dzp = dz.data<float>();
    const Dims dims = x.dims();
    float* dx = Output(0, dims, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchSquaredL2DistanceGradient(xp, yp, dzp, dx, n, d, stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(AveragedLoss, AveragedLossOp);
DP_REGISTER_CUDA_OPERATOR(AveragedLossGradient, AveragedLossGradientOp);
DP_REGISTER_CUDA_OPERATOR(SquaredL2Distance, SquaredL2DistanceOp);
DP_REGISTER_CUDA_OPERATOR(SquaredL2DistanceGradient, SquaredL2DistanceGradientOp);

}  // namespace
}  // namespace dp
