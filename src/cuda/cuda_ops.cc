// CUDA kernels of existing operator types (the schemas live with the CPU
// kernels in ops/cpu). float32 only. Every kernel queues its work on the
// context's stream and returns without waiting for it.
//
// Inputs must already be on the op's device (the Copy op moves them there);
// a pointer from another device would fault the whole CUDA context, so each
// kernel checks first.
#include <cstdint>
#include <string>

#include "cuda/cuda_context.h"
#include "cuda/kernels.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

class CudaOperator : public Operator {
 public:
  using Operator::Operator;

 protected:
  CudaContext& cuda_context() const { return static_cast<CudaContext&>(context()); }
  cudaStream_t stream() const { return cuda_context().stream(); }

  // Input i, checked to be float32 and on this op's device.
  const Tensor& FloatInput(int i) const {
    const Tensor& t = Input(i);
    DP_ENFORCE_CODE(t.dtype() == DType::kFloat32, Code::kDType, InputDesc(i), " must be float32 on CUDA, got ",
                    t.DebugString());
    DP_ENFORCE(t.device() == device(), InputDesc(i), " is ", t.DebugString(), " but the op runs on ",
               DeviceName(device()), "; add a Copy op to move it");
    return t;
  }
};

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

// Y = X W^T + b, X flattened to [M, K] at `axis`, W [N, K] at `axis_w`, b [N].
// cuBLAS is column-major, where row-major Y [M, N] reads as Y^T [N, M]; so
// compute Y^T = W X^T, with W (row-major [N, K], i.e. column-major W^T)
// transposed and X^T (column-major view of row-major X) as is. The bias is
// written into Y first and the product added with beta = 1.
class FcOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& w = FloatInput(1);
    const Tensor& b = FloatInput(2);
    FcDims d = ComputeFcDims(def(), x.dims(), w.dims(), b.dims(), args().Int("axis", 1), args().Int("axis_w", 1));
    const int64_t m = d.m, n = d.n, k = d.k;
    Dims out = d.out;

    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b.data<float>();
    float* yp = Output(0, std::move(out), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchBroadcastRows(bp, yp, m, n, stream()));
    if (m == 0 || n == 0 || k == 0) return;  // Y = b (or empty); cuBLAS rejects zero sizes
    const float one = 1.0f;
    const int mi = BlasInt(m, "M"), ni = BlasInt(n, "N"), ki = BlasInt(k, "K");
    DP_CUBLAS_CHECK(cublasSgemm(cuda_context().cublas(), CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &one, wp, ki, xp,
                                ki, &one, yp, ni));
    if (relu_) DP_CUDA_CHECK(cuda::LaunchRelu(yp, yp, m * n, stream()));
  }
  // The fused activation, as on the CPU ("none" or "relu").
  const bool relu_ = FcActivationIsRelu(args());
};

DP_REGISTER_CUDA_OPERATOR(ConstantFill, ConstantFillOp);
DP_REGISTER_CUDA_OPERATOR(Relu, ReluOp);
DP_REGISTER_CUDA_OPERATOR(Add, AddOp);
DP_REGISTER_CUDA_OPERATOR(Scale, ScaleOp);
DP_REGISTER_CUDA_OPERATOR(FC, FcOp);

}  // namespace
}  // namespace dp
