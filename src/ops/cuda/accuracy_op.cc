// CUDA kernel of Accuracy (schema and CPU twin in ops/cpu/accuracy_op.cc;
// kernel in softmax_loss_kernels.cu): top_k as on the CPU, the result a
// float32 scalar on the device. A label outside [0, D), which the CPU
// rejects, gives NaN here: checking it on the host would wait for the stream.
#include <cstdint>

#include "cuda/op_launchers.h"
#include "ops/cpu/loss_checks.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

class AccuracyOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& label = DeviceInput(1);
    CheckScoresAndLabels(def(), x.dims(), label.dims(), label.dtype());
    const int64_t rows = x.dim(0), cols = x.dim(1);
    const int64_t top_k = AccuracyTopK(args());
    const float* xp = x.data<float>();
    const int32_t* lp = label.data<int32_t>();
    float* out = Output(0, {}, DType::kFloat32)->mutable_data<float>();
    int32_t* row_correct = Scratch<int32_t>(rows);
    DP_CUDA_CHECK(cuda::LaunchAccuracy(xp, lp, top_k, out, row_correct, rows, cols, stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(Accuracy, AccuracyOp);

}  // namespace
}  // namespace dp
