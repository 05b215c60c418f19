// FC (fully connected): Y = X W^T + b, with X flattened to [M, K] at `axis`,
// W of shape [N, K] (flattened at axis_w) and b of shape [N]. The bias is
// fused into the GEMM: Y is seeded with b and the product added (beta = 1).
#include <cblas.h>

#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

struct FcDims {
  int64_t m, k, n;
  Dims out;
};

FcDims ComputeFcDims(const Dims& x, const Dims& w, const Dims& b, int64_t axis_arg, int64_t axis_w_arg) {
  int axis = CanonicalAxis(axis_arg, static_cast<int>(x.size()), "X", true);
  int axis_w = CanonicalAxis(axis_w_arg, static_cast<int>(w.size()), "W", true);
  FcDims d;
  d.m = DimProduct(x, 0, axis);
  d.k = DimProduct(x, axis, static_cast<int>(x.size()));
  d.n = DimProduct(w, 0, axis_w);
  int64_t wk = DimProduct(w, axis_w, static_cast<int>(w.size()));
  if (wk != d.k)
    DP_THROW(Code::kShape, "X ", DimsString(x), " has ", d.k, " features per row but W ", DimsString(w),
             " expects ", wk, " (W is [N, K])");
  if (NumElements(b) != d.n)
    DP_THROW(Code::kShape, "b ", DimsString(b), " must have N = ", d.n, " elements to match W ", DimsString(w));
  d.out.assign(x.begin(), x.begin() + axis);
  d.out.push_back(d.n);
  return d;
}

void Gemm(bool, int m, int n, int k, const float* x, const float* w, float* y) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 1.0f, y, n);
}
void Gemm(bool, int m, int n, int k, const double* x, const double* w, double* y) {
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
    DP_ENFORCE_CODE(w.dtype() == x.dtype() && b.dtype() == x.dtype(), Code::kDType, "X, W and b must share a dtype, got ",
                    x.DebugString(), ", ", w.DebugString(), ", ", b.DebugString());
    FcDims d = ComputeFcDims(x.dims(), w.dims(), b.dims(), args().Int("axis", 1), args().Int("axis_w", 1));
    DP_ENFORCE_CODE(d.m <= INT32_MAX && d.n <= INT32_MAX && d.k <= INT32_MAX, Code::kShape,
                    "FC dimensions exceed the BLAS int range");
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* wp = w.data<T>();
      const T* bp = b.data<T>();
      T* yp = Output(0, d.out, x.dtype())->template mutable_data<T>();
      for (int64_t i = 0; i < d.m; ++i) std::copy(bp, bp + d.n, yp + i * d.n);
      if (d.m > 0 && d.n > 0 && d.k > 0)
        Gemm(true, static_cast<int>(d.m), static_cast<int>(d.n), static_cast<int>(d.k), xp, wp, yp);
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
    .ShapeInference([](const OperatorDef&, const ArgReader& args, const std::vector<TensorInfo>& in) {
      FcDims d = ComputeFcDims(in[0].dims, in[1].dims, in[2].dims, args.Int("axis", 1), args.Int("axis_w", 1));
      return std::vector<TensorInfo>{{d.out, in[0].dtype}};
    })
    .Doc("Y = X W^T + b (bias fused into the GEMM).");

DP_REGISTER_CPU_OPERATOR(FC, FcOp);

}  // namespace
}  // namespace dp
