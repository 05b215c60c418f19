// CUDA kernels of the activations and their gradients (schemas in
// ops/cpu/relu_op.cc and ops/cpu/activation_ops.cc), float32. The formulas
// are ops/math/activation.h's, which the CPU kernels run too; every kernel
// may run in place (Y = X, dX = dY), as on the CPU. Clip's bounds are read
// once, when the op is made, and rounded to float as the CPU's float32
// kernel rounds them.
#include <cstdint>

#include "cuda/op_launchers.h"
#include "ops/cpu/activation_checks.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

using UnaryLauncher = cudaError_t (*)(const float* x, float* y, int64_t n, cudaStream_t stream);
using GradientLauncher = cudaError_t (*)(const float* y, const float* dy, float* dx, int64_t n,
                                         cudaStream_t stream);

template <UnaryLauncher kLaunch>
class ActivationOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const float* xp = x.data<float>();  // before Output: Y may be X with fresh storage
    const int64_t n = x.numel();
    float* yp = Output(0, x.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(kLaunch(xp, yp, n, stream()));
  }
};

// dX from the forward output Y and dY.
template <GradientLauncher kLaunch>
class ActivationGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& y = FloatInput(0);
    const Tensor& dy = FloatInput(1);
    CheckYAndGrad(InputDesc(0), y.dims(), y.dtype(), InputDesc(1), dy.dims(), dy.dtype());
    const float* yp = y.data<float>();
    const float* dyp = dy.data<float>();  // before Output: dX may be dY (in place)
    const int64_t n = y.numel();
    float* dxp = Output(0, y.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(kLaunch(yp, dyp, dxp, n, stream()));
  }
};

class ClipOp final : public CudaOperator {
 public:
  explicit ClipOp(const OpInit& init) : CudaOperator(init), bounds_(ReadClipBounds(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const float* xp = x.data<float>();  // before Output: Y may be X with fresh storage
    const int64_t n = x.numel();
    float* yp = Output(0, x.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchClip(xp, yp, n, static_cast<float>(bounds_.lo), static_cast<float>(bounds_.hi),
                                   stream()));
  }
  const ClipBounds bounds_;
};

class ClipGradientOp final : public CudaOperator {
 public:
  explicit ClipGradientOp(const OpInit& init) : CudaOperator(init), bounds_(ReadClipBounds(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& y = FloatInput(0);
    const Tensor& dy = FloatInput(1);
    CheckYAndGrad(InputDesc(0), y.dims(), y.dtype(), InputDesc(1), dy.dims(), dy.dtype());
    const float* yp = y.data<float>();
    const float* dyp = dy.data<float>();  // before Output: dX may be dY (in place)
    const int64_t n = y.numel();
    float* dxp = Output(0, y.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchClipGradient(yp, dyp, dxp, n, static_cast<float>(bounds_.lo),
                                           static_cast<float>(bounds_.hi), stream()));
  }
  const ClipBounds bounds_;
};

DP_REGISTER_CUDA_OPERATOR(Relu, ActivationOp<cuda::LaunchRelu>);
DP_REGISTER_CUDA_OPERATOR(ReluGradient, ActivationGradientOp<cuda::LaunchReluGradient>);
DP_REGISTER_CUDA_OPERATOR(Sigmoid, ActivationOp<cuda::LaunchSigmoid>);
DP_REGISTER_CUDA_OPERATOR(SigmoidGradient, ActivationGradientOp<cuda::LaunchSigmoidGradient>);
DP_REGISTER_CUDA_OPERATOR(Tanh, ActivationOp<cuda::LaunchTanh>);
DP_REGISTER_CUDA_OPERATOR(TanhGradient, ActivationGradientOp<cuda::LaunchTanhGradient>);
DP_REGISTER_CUDA_OPERATOR(Clip, ClipOp);
DP_REGISTER_CUDA_OPERATOR(ClipGradient, ClipGradientOp);

}  // namespace
}  // namespace dp
