// CUDA kernels of Dropout and DropoutGradient (schemas and the seed/counter
// semantics in ops/cpu/dropout_op.cc), float32 only. The mask is the CPU's
// for the same seed and counter (Philox words, ops/math/dropout.h); the
// counter, an int64 [1] on the device, is read by the kernel, so no host
// waits for it. Without a counter the op counts its runs as the CPU op does.
#include <cstdint>

#include "core/philox.h"
#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/random_op_utils.h"

namespace dp {
namespace {

class DropoutOp final : public CudaOperator {
 public:
  explicit DropoutOp(const OpInit& init)
      : CudaOperator(init), seed_(RandomOpSeed(init.def, ArgReader(init.def, OpLabel(init.def, init.index)))) {}

  const char* GraphCaptureObstacle() const override {
    return InputSize() > 1 || DropoutIsTest(args())
               ? nullptr
               : "without a counter input it counts its runs on the host, and a replayed graph would draw the same "
                 "mask every run";
  }

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const double ratio = DropoutRatio(args());
    const bool is_test = DropoutIsTest(args());
    CheckDropoutOutputs(is_test, static_cast<size_t>(OutputSize()), OutputDesc(0));
    const Dims dims = x.dims();
    if (is_test) {
      if (OutputSize() > 1) {
        Tensor* mask = Output(1, dims, DType::kUInt8);
        if (mask->numel() > 0)
          DP_CUDA_CHECK(cudaMemsetAsync(mask->mutable_data<uint8_t>(), 1, static_cast<size_t>(mask->numel()),
                                        stream()));
      }
      Tensor* y = Output(0);
      if (y != &x) y->ShareData(x);
      return;
    }
    const uint64_t run = runs_++;
    const int64_t* counter = nullptr;
    if (InputSize() > 1) {
      CheckDropoutCounter(Input(1), InputDesc(1));
      counter = DeviceInput(1).data<int64_t>();
    }
    const float* xp = x.data<float>();  // before Output: Y may be X (in place)
    float* yp = Output(0, dims, DType::kFloat32)->mutable_data<float>();
    uint8_t* mp = Output(1, dims, DType::kUInt8)->mutable_data<uint8_t>();
    DP_CUDA_CHECK(cuda::LaunchDropout(xp, yp, mp, NumElements(dims), seed_, counter, run,
                                      philox::UniformThreshold(ratio), static_cast<float>(1.0 / (1.0 - ratio)),
                                      stream()));
  }

  const uint64_t seed_;
  uint64_t runs_ = 0;  // without a counter: the stream; runs of one net never overlap
};

// dX = dY * mask / (1 - ratio); with is_test=1, dX = dY (no mask needed).
class DropoutGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& dy = FloatInput(0);
    const double ratio = DropoutRatio(args());
    if (DropoutIsTest(args())) {
      Tensor* dx = Output(0);
      if (dx != &dy) dx->ShareData(dy);
      return;
    }
    CheckDropoutGradientHasMask(static_cast<size_t>(InputSize()));
    const Tensor& mask = DeviceInput(1);
    CheckDropoutMask({mask.dims(), mask.dtype()}, InputDesc(1), {dy.dims(), dy.dtype()}, InputDesc(0));
    const float* dyp = dy.data<float>();  // before Output: dX may be dY (in place)
    float* dxp = Output(0, dy.dims(), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchDropoutGradient(dyp, mask.data<uint8_t>(), dxp, dy.numel(),
                                              static_cast<float>(1.0 / (1.0 - ratio)), stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(Dropout, DropoutOp);
DP_REGISTER_CUDA_OPERATOR(DropoutGradient, DropoutGradientOp);

}  // namespace
}  // namespace dp
