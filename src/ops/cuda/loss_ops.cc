// CUDA kernels of AveragedLoss and its gradient (schemas and CPU twins in
// ops/cpu/loss_ops.cc; kernels in softmax_loss_kernels.cu). The loss stays
// on the device; the gradient reads dloss there.
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

DP_REGISTER_CUDA_OPERATOR(AveragedLoss, AveragedLossOp);
DP_REGISTER_CUDA_OPERATOR(AveragedLossGradient, AveragedLossGradientOp);

}  // namespace
}  // namespace dp
