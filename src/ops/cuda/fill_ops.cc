// CUDA kernels of the fill ops (schemas in ops/cpu/fill_ops.cc).
#include <cstdint>
#include <vector>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

// Shape from the `shape` argument, or from input 0 (its shape, or with
// input_as_shape=1 its int64 values), as on the CPU.
class ConstantFillOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    // Without `dtype`, a fill shaped like an input takes its dtype (as on the CPU).
    const bool like = InputSize() > 0 && args().Int("input_as_shape", 0) == 0 && !args().Has("dtype");
    const int64_t dtype_arg =
        like ? static_cast<int64_t>(Input(0).dtype()) : args().Int("dtype", static_cast<int64_t>(DType::kFloat32));
    DType dtype;
    DP_ENFORCE_CODE(DTypeFromInt(static_cast<int32_t>(dtype_arg), &dtype), Code::kDType, "argument 'dtype' ",
                    dtype_arg, " is not a dtype");
    DP_ENFORCE_CODE(dtype == DType::kFloat32, Code::kDType, "ConstantFill on CUDA supports only float32, got ",
                    DTypeName(dtype), "; fill on the CPU and Copy");
    Dims dims = InputSize() == 0 ? args().Ints("shape", std::vector<int64_t>{}) : ShapeFromInput(Input(0));
    NumElements(dims);  // rejects negative dims
    const float value = static_cast<float>(args().Float("value", 0.0));
    Tensor* y = Output(0, std::move(dims), DType::kFloat32);
    DP_CUDA_CHECK(cuda::LaunchFill(y->mutable_data<float>(), y->numel(), value, stream()));
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

DP_REGISTER_CUDA_OPERATOR(ConstantFill, ConstantFillOp);

}  // namespace
}  // namespace dp
