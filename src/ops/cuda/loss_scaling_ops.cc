// CUDA kernels of dynamic loss scaling's ops (schemas and semantics in
// ops/cpu/loss_scaling_ops.cc; arithmetic in ops/math/loss_scaling.h):
// float32 gradients (with part/parts: each gradient's part) unscaled by
// multi-tensor launches (ops/math/multi_tensor.h: ceil(N / 24) of them),
// found_inf zeroed first on the stream; the gate and the scale's update one
// thread each. Everything stays on the device: a step with loss scaling
// still needs no host sync.
#include <climits>
#include <cstdint>
#include <vector>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/math/multi_tensor.h"
#include "ops/math/optimizer_updates.h"  // PartOfElements
#include "ops/op_utils.h"

namespace dp {
namespace {

class CudaUnscaleGradientsOp final : public CudaOperator {
 public:
  explicit CudaUnscaleGradientsOp(const OpInit& init) : CudaOperator(init), parts_(ReadUnscaleParts(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& scale = DeviceInput(0);
    CheckLossScaleScalar(scale.dims(), scale.dtype(), InputDesc(0));
    CheckLossScaleScalar(DeviceInput(1).dims(), Input(1).dtype(), InputDesc(1));
    sizes_.clear();
    begins_.clear();
    for (int i = 2; i < InputSize(); ++i) {  // each gradient's part (the whole without parts)
      const ElementRange part = PartOfElements(FloatInput(i).numel(), parts_.part, parts_.parts);
      sizes_.push_back(part.end - part.begin);
      begins_.push_back(part.begin);
    }
    if (sizes_ != planned_sizes_) {  // the plan holds while the gradients keep their sizes
      launches_ = PlanMultiTensorLaunches(sizes_);
      planned_sizes_ = sizes_;
    }
    float* found = Output(0)->mutable_data<float>();
    DP_CUDA_CHECK(cudaMemsetAsync(found, 0, sizeof(float), stream()));
    for (const MultiTensorLaunch& launch : launches_) {
      DP_ENFORCE_CODE(launch.blocks <= INT_MAX, Code::kOutOfRange, "a launch of ", launch.blocks,
                      " chunks exceeds CUDA's grid");
      const MultiTensorList list = LaunchList(launch, sizes_, [&](MultiTensorList& l, int k, int i) {
        // in place of input 2 + i, from its part's first element
        l.param[k] = Output(1 + i)->mutable_data<float>() + begins_[static_cast<size_t>(i)];
      });
      DP_CUDA_CHECK(cuda::LaunchUnscaleGradients(list, launch.blocks, scale.data<float>(), found, stream()));
    }
  }

  const UnscaleParts parts_;
  std::vector<int64_t> sizes_, begins_, planned_sizes_;
  std::vector<MultiTensorLaunch> launches_;
};

class CudaGateLearningRateOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& lr = FloatInput(0);
    DP_ENFORCE_CODE(lr.numel() == 1, Code::kShape, InputDesc(0), " ", DimsString(lr.dims()), " must hold one value");
    CheckLossScaleScalar(DeviceInput(1).dims(), Input(1).dtype(), InputDesc(1));
    float* out = Output(0, lr.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchGateLearningRate(lr.data<float>(), Input(1).data<float>(), out, stream()));
  }
};

class CudaUpdateLossScaleOp final : public CudaOperator {
 public:
  explicit CudaUpdateLossScaleOp(const OpInit& init) : CudaOperator(init), args_(ReadLossScaleArgs(args())) {}

 private:
  void RunOnDevice() override {
    for (int i = 0; i < 3; ++i) CheckLossScaleScalar(DeviceInput(i).dims(), Input(i).dtype(), InputDesc(i));
    DP_CUDA_CHECK(cuda::LaunchUpdateLossScale(Output(0)->mutable_data<float>(), Output(1)->mutable_data<float>(),
                                              Input(2).data<float>(), args_, stream()));
  }

  const math::LossScaleArgs args_;
};

DP_REGISTER_CUDA_OPERATOR(UnscaleGradients, CudaUnscaleGradientsOp);
DP_REGISTER_CUDA_OPERATOR(GateLearningRate, CudaGateLearningRateOp);
DP_REGISTER_CUDA_OPERATOR(UpdateLossScale, CudaUpdateLossScaleOp);

}  // namespace
}  // namespace dp
