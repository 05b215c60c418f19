// CUDA kernels of Iter and LearningRate (schemas in ops/cpu/iter_op.cc and
// learning_rate_op.cc), for a net that keeps its step counter on the GPU: a
// training net for one GPU, whose CUDA graph then holds them, so no copy of
// the counter or the rate crosses from the host in a step.
//
// The counter is read on the device only, so the host checks of the CPU
// kernels (iter >= 1 for LearningRate, no overflow for Iter) become the
// device's: LearningRate computes step 0's rate for an iter below 1, and
// Iter stops at INT64_MAX.
#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/learning_rate_args.h"
#include "ops/op_utils.h"

namespace dp {
namespace {

class CudaIterOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& iter = DeviceInput(0);
    CheckIterationCounter(iter.dims(), iter.dtype(), InputDesc(0));
    // In place (the schema enforces it): a fetched counter keeps its value,
    // as on the CPU (mutable_data copies a shared storage first).
    DP_CUDA_CHECK(cuda::LaunchIterIncrement(Output(0)->mutable_data<int64_t>(), stream()));
  }
};

class CudaLearningRateOp final : public CudaOperator {
 public:
  explicit CudaLearningRateOp(const OpInit& init) : CudaOperator(init), config_(ParseLrConfig(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& iter = DeviceInput(0);
    CheckIterationCounter(iter.dims(), iter.dtype(), InputDesc(0));
    Tensor* out = Output(0, Dims{1}, config_.dtype);
    const bool f32 = config_.dtype == DType::kFloat32;
    DP_CUDA_CHECK(cuda::LaunchLearningRate(iter.data<int64_t>(), config_.schedule,
                                           f32 ? out->mutable_data<float>() : nullptr,
                                           f32 ? nullptr : out->mutable_data<double>(), stream()));
  }

  const LrConfig config_;
};

DP_REGISTER_CUDA_OPERATOR(Iter, CudaIterOp);
DP_REGISTER_CUDA_OPERATOR(LearningRate, CudaLearningRateOp);

}  // namespace
}  // namespace dp
