// CUDA kernels of MaxPool, AveragePool and their gradients (schemas and
// shape rules in ops/cpu/pool_ops.cc and conv_utils.h), on the window math
// the CPU kernels run (ops/math/pool_geometry.h): the same windows, divisors
// and MaxPool winners (first maximum in scan order). The gradients gather per
// input element (ops/cuda/pool_kernels.cu), so they are deterministic.
#include <cstdint>

#include "cuda/op_launchers.h"
#include "ops/cpu/conv_utils.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

using conv::PoolShape;

// The pooled shape of X, with the window's element count checked as the CPU does.
PoolShape CheckedPoolShape(const OperatorDef& op, const ArgReader& args, const Dims& x) {
  PoolShape s = conv::ComputePoolShape(op, args, x);
  conv::CheckedProduct({s.win.kh, s.win.kw}, "a pooling window's element count");
  return s;
}

bool CountIncludePad(const ArgReader& args) { return args.Int("count_include_pad", 0) != 0; }

class MaxPoolOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const PoolShape s = CheckedPoolShape(def(), args(), x.dims());
    float* y = Output(0, s.y, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchMaxPool(x.data<float>(), s.Geometry(false), y, stream()));
  }
};

// Inputs X, Y, dY: the winners are found again on X (Y is checked, not read),
// as the CPU does, then each input element gathers the dY of the windows it won.
class MaxPoolGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& y = FloatInput(1);
    const Tensor& dy = FloatInput(2);
    const PoolShape s = CheckedPoolShape(def(), args(), x.dims());
    conv::CheckLikeY(def(), 1, "Y", y.dims(), s, x.dims());
    conv::CheckLikeY(def(), 2, "dY", dy.dims(), s, x.dims());
    const math::PoolGeometry g = s.Geometry(false);
    int64_t* argmax = Scratch<int64_t>(dy.numel());
    const float* dyp = dy.data<float>();
    float* dx = Output(0, x.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchPoolArgMax(x.data<float>(), g, argmax, stream()));
    DP_CUDA_CHECK(cuda::LaunchMaxPoolGradient(argmax, dyp, g, dx, stream()));
  }
};

class AveragePoolOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const PoolShape s = CheckedPoolShape(def(), args(), x.dims());
    float* y = Output(0, s.y, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchAveragePool(x.data<float>(), s.Geometry(CountIncludePad(args())), y, stream()));
  }
};

// Inputs X (for its shape) and dY.
class AveragePoolGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& dy = FloatInput(1);
    const PoolShape s = CheckedPoolShape(def(), args(), x.dims());
    conv::CheckLikeY(def(), 1, "dY", dy.dims(), s, x.dims());
    const float* dyp = dy.data<float>();
    float* dx = Output(0, x.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchAveragePoolGradient(dyp, s.Geometry(CountIncludePad(args())), dx, stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(MaxPool, MaxPoolOp);
DP_REGISTER_CUDA_OPERATOR(MaxPoolGradient, MaxPoolGradientOp);
DP_REGISTER_CUDA_OPERATOR(AveragePool, AveragePoolOp);
DP_REGISTER_CUDA_OPERATOR(AveragePoolGradient, AveragePoolGradientOp);

}  // namespace
}  // namespace dp
