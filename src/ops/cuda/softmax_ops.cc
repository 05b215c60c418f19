// CUDA kernels of Softmax, LogSoftmax, SoftmaxWithLoss and their gradients
// (schemas and CPU twins in ops/cpu/softmax_ops.cc; kernels in
// softmax_loss_kernels.cu).
// The loss stays on the device. A label outside [0, D), which the CPU
// rejects, gives a NaN loss and NaN gradient rows here: checking it on the
// host would wait for the stream.
#include <cstdint>

#include "cuda/op_launchers.h"
#include "ops/cpu/loss_checks.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/math/softmax.h"

namespace dp {
namespace {

using RowsLauncher = cudaError_t (*)(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
using RowsGradientLauncher = cudaError_t (*)(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                                             cudaStream_t stream);

// Softmax or LogSoftmax: Y over the rows of X flattened at `axis`.
template <RowsLauncher kLaunch>
class SoftmaxRowsOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const SoftmaxRows shape = SoftmaxRowsAt(x.dims(), args().Int("axis", 1), InputDesc(0));
    const float* xp = x.data<float>();  // before Output: Y may be X
    const Dims dims = x.dims();
    float* yp = Output(0, dims, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(kLaunch(xp, yp, shape.rows, shape.cols, stream()));
  }
};

// Their gradients, from the forward output Y and dY.
template <RowsGradientLauncher kLaunch>
class SoftmaxRowsGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& y = FloatInput(0);
    const Tensor& dy = FloatInput(1);
    CheckSoftmaxGradInputs(y, InputDesc(0), dy, InputDesc(1));
    const SoftmaxRows shape = SoftmaxRowsAt(y.dims(), args().Int("axis", 1), InputDesc(0));
    const float* yp = y.data<float>();
    const float* dyp = dy.data<float>();  // before Output: dX may be dY
    const Dims dims = y.dims();
    float* dx = Output(0, dims, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(kLaunch(yp, dyp, dx, shape.rows, shape.cols, stream()));
  }
};

class SoftmaxWithLossOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& label = DeviceInput(1);
    int64_t rows, cols;
    CheckLogitsAndLabels(def(), x.dims(), x.dtype(), label.dims(), label.dtype(), &rows, &cols);
    const Tensor* weight = InputSize() > 2 ? &FloatInput(2) : nullptr;
    if (weight != nullptr) CheckLossWeights(def(), 2, weight->dims(), weight->dtype(), rows, x.dtype());
    CheckFusedGradient(def(), InputSize(), OutputSize());
    const double scale = args().Float("scale", 1.0);
    const float* xp = x.data<float>();
    const int32_t* lp = label.data<int32_t>();
    const float* wp = weight ? weight->data<float>() : nullptr;
    const Dims dims = x.dims();
    float* pp = Output(0, dims, DType::kFloat32)->mutable_data<float>();
    float* loss = Output(1, {}, DType::kFloat32)->mutable_data<float>();
    // The fused gradient (a third output): the CPU's factor, from grad_seed as float.
    float* dx = OutputSize() > 2 ? Output(2, dims, DType::kFloat32)->mutable_data<float>() : nullptr;
    const float g = dx ? static_cast<float>(math::SoftmaxLossGradientFactor(
                             scale, static_cast<double>(static_cast<float>(args().Float("grad_seed", 1.0))),
                             static_cast<double>(rows)))
                       : 0.0f;
    double* row_scratch = Scratch<double>(2 * rows);  // each row's weighted loss and weight
    DP_CUDA_CHECK(
        cuda::LaunchSoftmaxWithLoss(xp, lp, wp, scale, pp, loss, row_scratch, rows, cols, dx, g, stream()));
  }
};

class SoftmaxWithLossGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& p = FloatInput(0);
    const Tensor& label = DeviceInput(1);
    const Tensor& dl = FloatInput(2);
    int64_t rows, cols;
    CheckLogitsAndLabels(def(), p.dims(), p.dtype(), label.dims(), label.dtype(), &rows, &cols);
    CheckLossGradScalar(dl, InputDesc(2), p.dtype(), "P");
    const Tensor* weight = InputSize() > 3 ? &FloatInput(3) : nullptr;
    if (weight != nullptr) CheckLossWeights(def(), 3, weight->dims(), weight->dtype(), rows, p.dtype());
    const double scale = args().Float("scale", 1.0);
    const float* pp = p.data<float>();
    const int32_t* lp = label.data<int32_t>();
    const float* dlp = dl.data<float>();
    const float* wp = weight ? weight->data<float>() : nullptr;
    const Dims dims = p.dims();
    float* dx = Output(0, dims, DType::kFloat32)->mutable_data<float>();
    double* weight_sum = wp ? Scratch<double>(1) : nullptr;
    DP_CUDA_CHECK(
        cuda::LaunchSoftmaxWithLossGradient(pp, lp, dlp, wp, scale, dx, weight_sum, rows, cols, stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(Softmax, SoftmaxRowsOp<cuda::LaunchSoftmax>);
DP_REGISTER_CUDA_OPERATOR(SoftmaxGradient, SoftmaxRowsGradientOp<cuda::LaunchSoftmaxGradient>);
DP_REGISTER_CUDA_OPERATOR(LogSoftmax, SoftmaxRowsOp<cuda::LaunchLogSoftmax>);
DP_REGISTER_CUDA_OPERATOR(LogSoftmaxGradient, SoftmaxRowsGradientOp<cuda::LaunchLogSoftmaxGradient>);
DP_REGISTER_CUDA_OPERATOR(SoftmaxWithLoss, SoftmaxWithLossOp);
DP_REGISTER_CUDA_OPERATOR(SoftmaxWithLossGradient, SoftmaxWithLossGradientOp);

}  // namespace
}  // namespace dp
