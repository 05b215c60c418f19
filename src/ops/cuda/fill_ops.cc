// CUDA kernels of the fill ops (schemas in ops/cpu/fill_ops.cc), float32
// only. The random fills draw element i from Philox's (seed, i) as the CPU
// does, so a CUDA fill equals the CPU's float32 fill bit for bit.
// GivenTensorFill's kernel, a copy of its host elements in any of its
// dtypes, is device-generic and registered there for both devices.
#include <cstdint>
#include <vector>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/random_op_utils.h"

namespace dp {
namespace {

// Shape from the `shape` argument, or from input 0 (its shape, or with
// input_as_shape=1 its int64 values), and dtype as on the CPU; then Fill.
class CudaFillOp : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

  const char* GraphCaptureObstacle() const override {
    const bool shape_on_host = InputSize() > 0 && args().Int("input_as_shape", 0) != 0;
    return shape_on_host ? "with input_as_shape=1 it reads its shape on the host" : nullptr;
  }

 protected:
  virtual void Fill(Tensor* out) = 0;

 private:
  void RunOnDevice() final {
    const Tensor* like = InputSize() > 0 ? &Input(0) : nullptr;
    const DType dtype = FillDType(args(), like != nullptr ? like->dtype() : DType::kUndefined);
    DP_ENFORCE_CODE(dtype == DType::kFloat32, Code::kDType, def().type, " on CUDA supports only float32, got ",
                    DTypeName(dtype), "; fill on the CPU and Copy");
    Dims dims = like == nullptr ? args().Ints("shape", std::vector<int64_t>{}) : ShapeFromInput(*like);
    NumElements(dims);  // rejects negative dims
    Fill(Output(0, std::move(dims), DType::kFloat32));
  }

  Dims ShapeFromInput(const Tensor& like) {
    if (args().Int("input_as_shape", 0) == 0) return like.dims();
    DP_ENFORCE_CODE(like.dtype() == DType::kInt64 && like.ndim() == 1, Code::kShape,
                    "with input_as_shape=1 the input must be a 1-D int64 tensor, got ", like.DebugString());
    // The values are needed on the host now; a CUDA input may still be in
    // flight on this stream, so copy on the stream and wait for it.
    Dims dims(static_cast<size_t>(like.numel()));
    CopyBytes(like.nbytes(), like.raw_data(), like.device(), dims.data(), DeviceOption{}, &context());
    if (like.device().type == DeviceType::kCUDA) context().FinishDeviceComputation();
    return dims;
  }
};

class ConstantFillOp final : public CudaFillOp {
 public:
  using CudaFillOp::CudaFillOp;

 private:
  void Fill(Tensor* y) override {
    const float value = static_cast<float>(args().Float("value", 0.0));
    DP_CUDA_CHECK(cuda::LaunchFill(y->mutable_data<float>(), y->numel(), value, stream()));
  }
};

class UniformFillOp final : public CudaFillOp {
 public:
  using CudaFillOp::CudaFillOp;

 private:
  void Fill(Tensor* y) override {
    const auto [lo, hi] = UniformFillBounds(args());
    DP_CUDA_CHECK(
        cuda::LaunchUniformFill(y->mutable_data<float>(), y->numel(), RandomOpSeed(def(), args()), lo, hi, stream()));
  }
};

class GaussianFillOp final : public CudaFillOp {
 public:
  using CudaFillOp::CudaFillOp;

 private:
  void Fill(Tensor* y) override {
    const auto [mean, stdev] = GaussianFillParams(args());
    DP_CUDA_CHECK(cuda::LaunchGaussianFill(y->mutable_data<float>(), y->numel(), RandomOpSeed(def(), args()), mean,
                                           stdev, stream()));
  }
};

class XavierFillOp final : public CudaFillOp {
 public:
  using CudaFillOp::CudaFillOp;

 private:
  void Fill(Tensor* y) override {
    const double scale = XavierScale(y->dims());
    DP_CUDA_CHECK(cuda::LaunchUniformFill(y->mutable_data<float>(), y->numel(), RandomOpSeed(def(), args()), -scale,
                                          scale, stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(ConstantFill, ConstantFillOp);
DP_REGISTER_CUDA_OPERATOR(UniformFill, UniformFillOp);
DP_REGISTER_CUDA_OPERATOR(GaussianFill, GaussianFillOp);
DP_REGISTER_CUDA_OPERATOR(XavierFill, XavierFillOp);

}  // namespace
}  // namespace dp
