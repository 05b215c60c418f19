// BmufUpdate(W, Wg, Delta) -> (W, Wg, Delta), in place: the block update of
// blockwise model-update filtering (Chen & Huo, ICASSP 2016). W holds the
// replicas' average after a block of local steps (an Allreduce with scale
// 1/N runs first), Wg the global model after the previous block, Delta the
// block momentum:
//   G = W - Wg;  Delta = block_momentum * Delta + block_lr * G;  Wg += Delta;
//   W = Wg (plain) or Wg + block_momentum * Delta (nesterov: the next block
//   starts from the look-ahead point).
// Every replica runs the same update on the same values, so replicas stay
// identical without another broadcast.
#include "ops/gradient_registry.h"
#include "ops/math/optimizer_updates.h"
#include "ops/op_utils.h"
#include "ops/operator.h"
#include "ops/optimizer_op_utils.h"

namespace dp {
namespace {

class BmufUpdateOp final : public Operator {
 public:
  explicit BmufUpdateOp(const OpInit& init) : Operator(init), args_(ReadBmufArgs(args())) {}

  void RunOnDevice() final {
    const Tensor& w = Input(0);
    for (int i = 1; i < 3; ++i) CheckBmufInput(w, InputDesc(0), Input(i), InputDesc(i));
    DispatchFloat(w.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = w.numel();
      T* pw = Output(0)->template mutable_data<T>();
      T* pg = Output(1)->template mutable_data<T>();
      T* pd = Output(2)->template mutable_data<T>();
      const T lr = static_cast<T>(args_.block_lr), mu = static_cast<T>(args_.block_momentum);
      for (int64_t i = 0; i < n; ++i) BmufStep(pw + i, pg + i, pd + i, lr, mu, args_.nesterov);
    });
  }

 private:
  const BmufArgs args_;
};

}  // namespace

DP_OPERATOR_SCHEMA(BmufUpdate)
    .NumInputs(3)
    .NumOutputs(3)
    .EnforceInplace({{0, 0}, {1, 1}, {2, 2}})
    .Inputs({"W", "Wg", "Delta"})
    .Outputs({"W", "Wg", "Delta"})
    .Arg("block_lr", ArgKind::kFloat, 1.0, "zeta, the block learning rate")
    .Arg("block_momentum", ArgKind::kFloat, 0.0, "mu, the block momentum in [0, 1)")
    .Arg("nesterov", ArgKind::kInt, 0, "1: the next block starts from Wg + mu * Delta")
    .IdenticalTypeAndShape()
    .Doc("The BMUF block update: G = W - Wg; Delta = mu Delta + zeta G; Wg += Delta; W = Wg (+ mu Delta).");

DP_REGISTER_CPU_OPERATOR(BmufUpdate, BmufUpdateOp);
DP_NO_GRADIENT(BmufUpdate);

}  // namespace dp
