// LearningRate(iter) -> lr: the learning rate of the current step as a
// one-element tensor, from the int64 step counter that Iter maintains. Iter
// runs first in each step, so the first step sees iter = 1; the schedules
// (ops/math/learning_rate.h, which the CUDA kernel shares) are functions of
// it = iter - 1 (0 on the first step).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/gradient_registry.h"
#include "ops/learning_rate_args.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

class LearningRateOp final : public Operator {
 public:
  explicit LearningRateOp(const OpInit& init) : Operator(init), config_(ParseLrConfig(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& iter = Input(0);
    CheckIterationCounter(iter.dims(), iter.dtype(), InputDesc(0));
    const int64_t value = iter.data<int64_t>()[0];
    DP_ENFORCE_CODE(value >= 1, Code::kOutOfRange, InputDesc(0), " is ", value,
                    " but must be >= 1 (run Iter before LearningRate)");
    const double lr = math::LearningRateAt(config_.schedule, value - 1);
    Tensor* out = Output(0, Dims{1}, config_.dtype);
    if (config_.dtype == DType::kFloat32)
      out->mutable_data<float>()[0] = static_cast<float>(lr);
    else
      out->mutable_data<double>()[0] = lr;
  }

  const LrConfig config_;
};

DP_OPERATOR_SCHEMA(LearningRate)
    .NumInputs(1)
    .NumOutputs(1)
    .Inputs({"iter"})
    .Outputs({"lr"})
    .HostOpUnlessPlaced("one scalar from the host iteration counter; device optimizers read a copy")
    .RequiredArg("base_lr", ArgKind::kFloat, "the rate before any schedule")
    .Arg("policy", ArgKind::kString, "fixed", "fixed, step, exp, inv or cosine")
    .Arg("gamma", ArgKind::kFloat, 0.1, "decay factor of step, exp and inv")
    .Arg("stepsize", ArgKind::kInt, 1, "iterations per step of the step policy")
    .Arg("power", ArgKind::kFloat, 1.0, "exponent of the inv policy")
    .Arg("max_iter", ArgKind::kInt, 1, "length of the cosine schedule")
    .Arg("warmup_iters", ArgKind::kInt, 0, "iterations of linear warmup")
    .Arg("warmup_start_factor", ArgKind::kFloat, 0.1, "warmup factor at the first iteration")
    .Arg("dtype", ArgKind::kInt, 1, "1 (float32) or 4 (float64)")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      CheckIterationCounter(in[0].dims, in[0].dtype, StrCat("iter '", op.inputs[0], "'"));
      return std::vector<TensorInfo>{{Dims{1}, ParseLrConfig(args).dtype}};
    })
    .Doc("The learning rate for the current step (iter = 1 on the first step) as a [1] tensor.");

DP_REGISTER_CPU_OPERATOR(LearningRate, LearningRateOp);
DP_NO_GRADIENT(LearningRate);

}  // namespace
}  // namespace dp
