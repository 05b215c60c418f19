// FC (fully connected): Y = X W^T + b, with X flattened to [M, K] at `axis`,
// W of shape [N, K] (flattened at axis_w) and b of shape [N]. The bias is
// fused into the GEMM: Y is seeded with b and the product added (beta = 1).
#include <cblas.h>

#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

void Gemm(int m, int n, int k, const float* x, const float* w, float* y) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 1.0f, y, n);
}
void Gemm(int m, int n, int k, const double* x, const double* w, double* y) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, x, k, w, k, 1.0, y, n);
}

class FcOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& w = Input(1);
    const Tensor& b = Input(2);
    DP_ENFORCE_CODE(w.dtype() == x.dtype() && b.dtype() == x.dtype(), Code::kDType,
                    "X, W and b must share a dtype, got ", InputDesc(0), " ", x.DebugString(), ", ", InputDesc(1), " ",
                    w.DebugString(), ", ", InputDesc(2), " ", b.DebugString());
    FcDims d = ComputeFcDims(def(), x.dims(), w.dims(), b.dims(), args().Int("axis", 1), args().Int("axis_w", 1));
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* wp = w.data<T>();
      const T* bp = b.data<T>();
      T* yp = Output(0, d.out, x.dtype())->template mutable_data<T>();
      for (int64_t i = 0; i < d.m; ++i) std::copy(bp, bp + d.n, yp + i * d.n);
      if (d.m > 0 && d.n > 0 && d.k > 0)
        Gemm(static_cast<int>(d.m), static_cast<int>(d.n), static_cast<int>(d.k), xp, wp, yp);
    });
  }
};

DP_OPERATOR_SCHEMA(FC)
    .NumInputs(3)
    .NumOutputs(1)
    .Inputs({"X", "W", "b"})
    .Outputs({"Y"})
    .Arg("axis", "X is flattened to [prod(dims[:axis]), prod(dims[axis:])]; default 1")
    .Arg("axis_w", "W is flattened likewise; default 1")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      FcDims d = ComputeFcDims(op, in[0].dims, in[1].dims, in[2].dims, args.Int("axis", 1), args.Int("axis_w", 1));
      return std::vector<TensorInfo>{{d.out, in[0].dtype}};
    })
    .Doc("Y = X W^T + b (bias fused into the GEMM).");

DP_REGISTER_CPU_OPERATOR(FC, FcOp);

}  // namespace
}  // namespace dp
