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

// A kernel's launch as the ops below call it: a plain launcher, or one
// with Clip's bounds, read from the op's arguments once, when it is made.
template <UnaryLauncher kLaunch>
struct Plain {
  cudaError_t operator()(const float* x, float* y, int64_t n, cudaStream_t s) const { return kLaunch(x, y, n, s); }
};
template <GradientLauncher kLaunch>
struct PlainGradient {
  cudaError_t operator()(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) const {
    return kLaunch(y, dy, dx, n, s);
  }
};
struct ClipLaunch {
  explicit ClipLaunch(const ArgReader& args) : bounds(ReadClipBounds(args)) {}
  cudaError_t operator()(const float* x, float* y, int64_t n, cudaStream_t s) const {
    return cuda::LaunchClip(x, y, n, static_cast<float>(bounds.lo), static_cast<float>(bounds.hi), s);
  }
  ClipBounds bounds;
};
struct ClipGradientLaunch {
  explicit ClipGradientLaunch(const ArgReader& args) : bounds(ReadClipBounds(args)) {}
  cudaError_t operator()(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) const {
    return cuda::LaunchClipGradient(y, dy, dx, n, static_cast<float>(bounds.lo), static_cast<float>(bounds.hi), s);
  }
  ClipBounds bounds;
};

template <typename Launch>
class ActivationOp final : public CudaOperator {
 public:
  explicit ActivationOp(const OpInit& init) : CudaOperator(init), launch_(MakeFromArgs<Launch>(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const float* xp = x.data<float>();  // before Output: Y may be X with fresh storage
    const int64_t n = x.numel();
    float* yp = Output(0, x.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(launch_(xp, yp, n, stream()));
  }
  const Launch launch_;
};

// dX from the forward output Y and dY.
template <typename Launch>
class ActivationGradientOp final : public CudaOperator {
 public:
  explicit ActivationGradientOp(const OpInit& init) : CudaOperator(init), launch_(MakeFromArgs<Launch>(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& y = FloatInput(0);
    const Tensor& dy = FloatInput(1);
    CheckYAndGrad(InputDesc(0), y.dims(), y.dtype(), InputDesc(1), dy.dims(), dy.dtype());
    const float* yp = y.data<float>();
    const float* dyp = dy.data<float>();  // before Output: dX may be dY (in place)
    const int64_t n = y.numel();
    float* dxp = Output(0, y.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(launch_(yp, dyp, dxp, n, stream()));
  }
  const Launch launch_;
};

DP_REGISTER_CUDA_OPERATOR(Relu, ActivationOp<Plain<cuda::LaunchRelu>>);
DP_REGISTER_CUDA_OPERATOR(ReluGradient, ActivationGradientOp<PlainGradient<cuda::LaunchReluGradient>>);
DP_REGISTER_CUDA_OPERATOR(Sigmoid, ActivationOp<Plain<cuda::LaunchSigmoid>>);
DP_REGISTER_CUDA_OPERATOR(SigmoidGradient, ActivationGradientOp<PlainGradient<cuda::LaunchSigmoidGradient>>);
DP_REGISTER_CUDA_OPERATOR(Tanh, ActivationOp<Plain<cuda::LaunchTanh>>);
DP_REGISTER_CUDA_OPERATOR(TanhGradient, ActivationGradientOp<PlainGradient<cuda::LaunchTanhGradient>>);
DP_REGISTER_CUDA_OPERATOR(Clip, ActivationOp<ClipLaunch>);
DP_REGISTER_CUDA_OPERATOR(ClipGradient, ActivationGradientOp<ClipGradientLaunch>);

}  // namespace
}  // namespace dp
