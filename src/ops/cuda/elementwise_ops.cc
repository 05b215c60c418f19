// CUDA kernels of the elementwise family (schemas in ops/cpu/relu_op.cc and
// ops/cpu/elementwise_ops.cc).
#include <cstdint>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

class ReluOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const float* xp = x.data<float>();  // before Output: Y may be X with fresh storage
    const int64_t n = x.numel();
    float* yp = Output(0, x.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchRelu(xp, yp, n, stream()));
  }
};

class AddOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& a = FloatInput(0);
    const Tensor& b = FloatInput(1);
    DP_ENFORCE_CODE(a.dims() == b.dims(), Code::kUnimplemented, "Add on CUDA needs inputs of one shape; ",
                    InputDesc(0), " is ", DimsString(a.dims()), " and ", InputDesc(1), " is ", DimsString(b.dims()),
                    " (broadcasting is CPU only)");
    const float* ap = a.data<float>();
    const float* bp = b.data<float>();
    const int64_t n = a.numel();
    float* yp = Output(0, a.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchAdd(ap, bp, yp, n, stream()));
  }
};

class ScaleOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const float scale = static_cast<float>(args().Float("scale", 1.0));
    const float* xp = x.data<float>();
    const int64_t n = x.numel();
    float* yp = Output(0, x.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchScale(xp, scale, yp, n, stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(Relu, ReluOp);
DP_REGISTER_CUDA_OPERATOR(Add, AddOp);
DP_REGISTER_CUDA_OPERATOR(Scale, ScaleOp);

}  // namespace
}  // namespace dp
