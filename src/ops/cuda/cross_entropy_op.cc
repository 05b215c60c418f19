// CUDA kernels of LabelCrossEntropy and its gradient (schemas and CPU twins
// in ops/cpu/cross_entropy_op.cc; kernels in softmax_loss_kernels.cu). A
// label outside [0, D), which the CPU rejects, gives NaN in its row here:
// checking it on the host would wait for the stream.
#include <cstdint>

#include "cuda/op_launchers.h"
#include "ops/cpu/loss_checks.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

class LabelCrossEntropyOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& label = DeviceInput(1);
    int64_t rows, cols;
    CheckXAndLabel(InputDesc(0), x.dims(), InputDesc(1), label.dims(), label.dtype(), &rows, &cols);
    const float* xp = x.data<float>();
    const int32_t* lp = label.data<int32_t>();
    float* yp = Output(0, {rows}, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchLabelCrossEntropy(xp, lp, yp, rows, cols, stream()));
  }
};

class LabelCrossEntropyGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& label = DeviceInput(1);
    const Tensor& dy = FloatInput(2);
    int64_t rows, cols;
    CheckXAndLabel(InputDesc(0), x.dims(), InputDesc(1), label.dims(), label.dtype(), &rows, &cols);
    CheckCrossEntropyGrad(InputDesc(2), dy.dims(), dy.dtype(), InputDesc(0), x.dtype(), rows);
    const float* xp = x.data<float>();
    const int32_t* lp = label.data<int32_t>();
    const float* dyp = dy.data<float>();
    const Dims dims = x.dims();
    float* dx = Output(0, dims, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchLabelCrossEntropyGradient(xp, lp, dyp, dx, rows, cols, stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(LabelCrossEntropy, LabelCrossEntropyOp);
DP_REGISTER_CUDA_OPERATOR(LabelCrossEntropyGradient, LabelCrossEntropyGradientOp);

}  // namespace
}  // namespace dp
