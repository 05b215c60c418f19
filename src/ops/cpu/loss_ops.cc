// AveragedLoss: the mean of all elements of X, as a scalar.
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

DP_REGISTER_CPU_OPERATOR(AveragedLoss, AveragedLossOp);

}  // namespace
}  // namespace dp
