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

// `op` names the blobs in messages: "X 'data' [3, 5] has 5 features ...".
FcDims ComputeFcDims(const OperatorDef& op, const Dims& x, const Dims& w, const Dims& b, int64_t axis_arg,
                     int64_t axis_w_arg) {
  const std::string xn = StrCat("X '", op.inputs[0], "' "), wn = StrCat("W '", op.inputs[1], "' "),
                    bn = StrCat("b '", op.inputs[2], "' ");
  int axis = CanonicalAxis(axis_arg, static_cast<int>(x.size()), xn + DimsString(x), true);
  int axis_w = CanonicalAxis(axis_w_arg, static_cast<int>(w.size()), wn + DimsString(w), true);
  FcDims d;
  d.m = DimProduct(x, 0, axis);
  d.k = DimProduct(x, axis, static_cast<int>(x.size()));
  d.n = DimProduct(w, 0, axis_w);
  int64_t wk = DimProduct(w, axis_w, static_cast<int>(w.size()));
  if (wk != d.k)
    DP_THROW(Code::kShape, xn, DimsString(x), " has ", d.k, " features per row but ", wn, DimsString(w),
             " expects ", wk, " (W is [N, K])");
  if (NumElements(b) != d.n)
    DP_THROW(Code::kShape, bn, DimsString(b), " must have N = ", d.n, " elements to match ", wn, DimsString(w));
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
    DP_ENFORCE_CODE(w.dtype() == x.dtype() && b.dtype() == x.dtype(), Code::kDType,
                    "X, W and b must share a dtype, got ", InputDesc(0), " ", x.DebugString(), ", ", InputDesc(1), " ",
                    w.DebugString(), ", ", InputDesc(2), " ", b.DebugString());
    FcDims d = ComputeFcDims(def(), x.dims(), w.dims(), b.dims(), args().Int("axis", 1), args().Int("axis_w", 1));
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
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      FcDims d = ComputeFcDims(op, in[0].dims, in[1].dims, in[2].dims, args.Int("axis", 1), args.Int("axis_w", 1));
      return std::vector<TensorInfo>{{d.out, in[0].dtype}};
    })
    .Doc("Y = X W^T + b (bias fused into the GEMM).");

DP_REGISTER_CPU_OPERATOR(FC, FcOp);

}  // namespace
}  // namespace dp
