// CUDA kernels of the elementwise arithmetic (schemas in
// ops/cpu/elementwise_ops.cc): Add, Sub, Mul and Div with NumPy
// broadcasting, Sum, Scale and SumReduceLike, float32 (the CPU kernels also
// take float64 and, but for Div, int32 and int64; a training net's math is
// float32).
#include <cstdint>
#include <vector>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/cuda/strided_index_check.h"
#include "ops/math/binary.h"
#include "ops/math/broadcast.h"

namespace dp {
namespace {

template <math::BinaryOp kOp>
class BinaryOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& a = FloatInput(0);
    const Tensor& b = FloatInput(1);
    const std::string inputs = StrCat(InputDesc(0), " and ", InputDesc(1));
    Dims yd = BroadcastDims(a.dims(), b.dims(), inputs);
    math::BroadcastIndex index;
    EnforceStridedIndexFits(math::MakeBroadcastIndex(math::CollapseBroadcast(a.dims(), b.dims(), yd), &index),
                            inputs);
    // In place with broadcasting, Y may alias A or B yet be larger, so that
    // Resize would free the input; hold the inputs then, as the CPU kernel
    // does (their memory outlives the queued kernel: a CUDA free waits for
    // the device).
    Tensor ka, kb;
    if (yd != a.dims() || yd != b.dims()) ka = a, kb = b;
    const float* ap = (ka.defined() ? ka : a).data<float>();
    const float* bp = (kb.defined() ? kb : b).data<float>();
    const int64_t n = NumElements(yd);
    float* yp = Output(0, std::move(yd), DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchBinary(kOp, ap, bp, yp, index, n, stream()));
  }
};

// Y = X0 + X1 + ... in input order per element (the CPU's order).
class SumOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& first = FloatInput(0);
    std::vector<const float*> x;  // same shape, so in place (Y = input 0) is safe
    for (int i = 0; i < InputSize(); ++i) {
      const Tensor& t = FloatInput(i);
      DP_ENFORCE_CODE(t.dims() == first.dims(), Code::kShape, InputDesc(i), " has shape ", DimsString(t.dims()),
                      " but ", InputDesc(0), " has ", DimsString(first.dims()));
      x.push_back(t.data<float>());
    }
    const int64_t n = first.numel();
    float* y = Output(0, first.dims(), DType::kFloat32)->mutable_data<float>();
    if (x.size() == 1) {
      if (y != x[0] && n > 0)
        DP_CUDA_CHECK(cudaMemcpyAsync(y, x[0], static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                                      stream()));
      return;
    }
    DP_CUDA_CHECK(cuda::LaunchAdd(x[0], x[1], y, n, stream()));
    for (size_t i = 2; i < x.size(); ++i) DP_CUDA_CHECK(cuda::LaunchAdd(y, x[i], y, n, stream()));
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

// Y (like's shape) = X summed over the dims along which like was broadcast
// to X's shape, each output summed by one thread or one block in a fixed
// order (deterministic). Same shapes: Y shares X's storage (no copy).
class SumReduceLikeOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor x = FloatInput(0);  // held: Y may be the same blob
    const Dims yd = Input(1).dims();
    DP_ENFORCE_CODE(BroadcastDims(yd, x.dims(), StrCat(InputDesc(1), " and ", InputDesc(0))) == x.dims(), Code::kShape,
                    InputDesc(1), " ", DimsString(yd), " does not broadcast to ", InputDesc(0), " ",
                    DimsString(x.dims()));
    if (yd == x.dims()) {
      Output(0)->ShareData(x);
      return;
    }
    math::ReduceIndex index;
    EnforceStridedIndexFits(math::MakeReduceIndex(x.dims(), yd, &index), StrCat(InputDesc(0), " and ", InputDesc(1)));
    const float* xp = x.data<float>();
    float* yp = Output(0, yd, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchSumReduce(xp, yp, index, NumElements(yd), stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(Add, BinaryOp<math::BinaryOp::kAdd>);
DP_REGISTER_CUDA_OPERATOR(Sub, BinaryOp<math::BinaryOp::kSub>);
DP_REGISTER_CUDA_OPERATOR(Mul, BinaryOp<math::BinaryOp::kMul>);
DP_REGISTER_CUDA_OPERATOR(Div, BinaryOp<math::BinaryOp::kDiv>);
DP_REGISTER_CUDA_OPERATOR(Sum, SumOp);
DP_REGISTER_CUDA_OPERATOR(Scale, ScaleOp);
DP_REGISTER_CUDA_OPERATOR(SumReduceLike, SumReduceLikeOp);

}  // namespace
}  // namespace dp
