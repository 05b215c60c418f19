// AveragedLoss: the mean of all elements of X, as a scalar.
#include <algorithm>

#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

class AveragedLossOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    DP_ENFORCE_CODE(x.numel() > 0, Code::kShape, InputDesc(0), " is empty: the mean of nothing is undefined");
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      double sum = 0;  // accumulate in double: losses over large batches
      for (int64_t i = 0; i < x.numel(); ++i) sum += xp[i];
      Output(0, {}, x.dtype())->template mutable_data<T>()[0] = static_cast<T>(sum / static_cast<double>(x.numel()));
    });
  }
};

// dX = dLoss / numel(X) everywhere.
class AveragedLossGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& dl = Input(1);
    DP_ENFORCE_CODE(dl.numel() == 1 && dl.dtype() == x.dtype(), Code::kShape, InputDesc(1),
                    " must be one value of X's dtype, got ", dl.DebugString());
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T g = static_cast<T>(static_cast<double>(dl.data<T>()[0]) / static_cast<double>(x.numel()));
      T* dx = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      std::fill(dx, dx + x.numel(), g);
    });
  }
};

DP_OPERATOR_SCHEMA(AveragedLoss)
    .NumInputs(1)
    .NumOutputs(1)
    .Inputs({"X"})
    .Outputs({"loss"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      DP_ENFORCE_CODE(NumElements(in[0].dims) > 0, Code::kShape, "X '", op.inputs[0],
                      "' is empty: the mean of nothing is undefined");
      return std::vector<TensorInfo>{{{}, in[0].dtype}};
    })
    .Doc("Mean of all elements of X (a scalar).");

DP_OPERATOR_SCHEMA(AveragedLossGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .Inputs({"X", "dloss"})
    .Outputs({"dX"})
    .IdenticalTypeAndShape()
    .Doc("dX = dloss / numel(X).");

DP_REGISTER_CPU_OPERATOR(AveragedLoss, AveragedLossOp);
DP_REGISTER_CPU_OPERATOR(AveragedLossGradient, AveragedLossGradientOp);
DP_SIMPLE_GRADIENT(AveragedLoss, { return {MakeOp("AveragedLossGradient", {I(0), GO(0)}, {GI(0)})}; });

}  // namespace
}  // namespace dp
