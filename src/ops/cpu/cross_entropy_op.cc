// LabelCrossEntropy: Y[i] = -log(max(X[i, label_i], 1e-20)) for probabilities
// X [N, D] (e.g. a Softmax's output) and int32 labels [N] (or [N, 1]).
// Its gradient is dX[i, label_i] = -dY[i] / max(X[i, label_i], 1e-20), zero
// elsewhere (Caffe2's convention: the clamp bounds the gradient's size, and
// a probability that has collapsed to zero is still pushed up).
#include <algorithm>
#include <cmath>

#include "ops/cpu/loss_checks.h"
#include "ops/gradient_registry.h"
#include "ops/math/losses.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

// Checks X [N, D] and label [N] / [N, 1] int32; shared by both kernels and
// their shape inference. xn / ln name the blobs in messages.
void CheckXAndLabel(const std::string& xn, const Dims& x, const std::string& ln, const Dims& label, DType lt,
                    int64_t* rows, int64_t* cols) {
  DP_ENFORCE_CODE(x.size() == 2, Code::kShape, xn, " must be 2-D [N, D], got ", DimsString(x));
  DP_ENFORCE_CODE(lt == DType::kInt32, Code::kDType, ln, " must be int32, got ", DTypeName(lt));
  bool ok = (label.size() == 1 && label[0] == x[0]) || (label.size() == 2 && label[0] == x[0] && label[1] == 1);
  DP_ENFORCE_CODE(ok, Code::kShape, ln, " ", DimsString(label), " must be [N] or [N, 1] with N = ", x[0], " to match ",
                  xn, " ", DimsString(x));
  *rows = x[0];
  *cols = x[1];
}

// dY must be [N] of X's dtype; shared by the gradient kernel and its inference.
void CheckCrossEntropyGrad(const std::string& dyn, const Dims& dy, DType dyt, const std::string& xn, DType xt,
                           int64_t rows) {
  DP_ENFORCE_CODE(dyt == xt, Code::kDType, dyn, " is ", DTypeName(dyt), " but ", xn, " is ", DTypeName(xt));
  DP_ENFORCE_CODE(dy.size() == 1 && dy[0] == rows, Code::kShape, dyn, " ", DimsString(dy), " must be [N] with N = ",
                  rows);
}

namespace {

// The label of sample i, checked against [0, cols).
int64_t Label(const int32_t* lp, int64_t i, int64_t cols, const std::string& ln) {
  const int32_t l = lp[i];
  if (!math::LabelInRange(l, cols))
    DP_THROW(Code::kOutOfRange, ln, ": label ", l, " of sample ", i, " is outside [0, ", cols, ")");
  return l;
}

class LabelCrossEntropyOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& label = Input(1);
    int64_t rows, cols;
    CheckXAndLabel(InputDesc(0), x.dims(), InputDesc(1), label.dims(), label.dtype(), &rows, &cols);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const int32_t* lp = label.data<int32_t>();
      for (int64_t i = 0; i < rows; ++i) Label(lp, i, cols, InputDesc(1));  // nothing written on error
      T* yp = Output(0, {rows}, x.dtype())->template mutable_data<T>();
      for (int64_t i = 0; i < rows; ++i) yp[i] = math::LabelCrossEntropy(xp[i * cols + lp[i]]);
    });
  }
};

class LabelCrossEntropyGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& label = Input(1);
    const Tensor& dy = Input(2);
    int64_t rows, cols;
    CheckXAndLabel(InputDesc(0), x.dims(), InputDesc(1), label.dims(), label.dtype(), &rows, &cols);
    CheckCrossEntropyGrad(InputDesc(2), dy.dims(), dy.dtype(), InputDesc(0), x.dtype(), rows);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const int32_t* lp = label.data<int32_t>();
      const T* dyp = dy.data<T>();
      for (int64_t i = 0; i < rows; ++i) Label(lp, i, cols, InputDesc(1));
      T* dxp = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      std::fill(dxp, dxp + rows * cols, T(0));
      for (int64_t i = 0; i < rows; ++i)
        dxp[i * cols + lp[i]] = math::LabelCrossEntropyGradient(xp[i * cols + lp[i]], dyp[i]);
    });
  }
};

DP_OPERATOR_SCHEMA(LabelCrossEntropy)
    .NumInputs(2)
    .NumOutputs(1)
    .Inputs({"X", "label"})
    .Outputs({"Y"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      int64_t rows, cols;
      CheckXAndLabel(StrCat("X '", op.inputs[0], "'"), in[0].dims, StrCat("label '", op.inputs[1], "'"), in[1].dims,
                     in[1].dtype, &rows, &cols);
      return std::vector<TensorInfo>{{{rows}, in[0].dtype}};
    })
    .Doc("Y[i] = -log(max(X[i, label_i], 1e-20)) for probabilities X [N, D] and int32 labels [N].");

DP_OPERATOR_SCHEMA(LabelCrossEntropyGradient)
    .NumInputs(3)
    .NumOutputs(1)
    .Inputs({"X", "label", "dY"})
    .Outputs({"dX"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      int64_t rows, cols;
      const std::string xn = StrCat("X '", op.inputs[0], "'");
      CheckXAndLabel(xn, in[0].dims, StrCat("label '", op.inputs[1], "'"), in[1].dims, in[1].dtype, &rows, &cols);
      CheckCrossEntropyGrad(StrCat("dY '", op.inputs[2], "'"), in[2].dims, in[2].dtype, xn, in[0].dtype, rows);
      return std::vector<TensorInfo>{in[0]};
    })
    .Doc("dX[i, label_i] = -dY[i] / max(X[i, label_i], 1e-20); zero elsewhere.");

DP_REGISTER_CPU_OPERATOR(LabelCrossEntropy, LabelCrossEntropyOp);
DP_REGISTER_CPU_OPERATOR(LabelCrossEntropyGradient, LabelCrossEntropyGradientOp);

}  // namespace

// Labels are integers: only X has a gradient.
DP_SIMPLE_GRADIENT(LabelCrossEntropy, {
  if (!NeedsGI(0)) return {};
  return {MakeOp("LabelCrossEntropyGradient", {I(0), I(1), GO(0)}, {GI(0)})};
});

}  // namespace dp
