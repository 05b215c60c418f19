// Relu: Y = max(X, 0), elementwise; may run in place.
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

class ReluOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      T* yp = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      const int64_t n = x.numel();
      for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] > T(0) ? xp[i] : T(0);
    });
  }
};

DP_OPERATOR_SCHEMA(Relu)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .IdenticalTypeAndShape()
    .Doc("Y = max(X, 0).");

DP_REGISTER_CPU_OPERATOR(Relu, ReluOp);

}  // namespace
}  // namespace dp
