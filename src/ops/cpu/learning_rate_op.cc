// LearningRate(iter) -> lr: the learning rate of the current step as a
// one-element tensor, from the int64 step counter that Iter maintains. Iter
// runs first in each step, so the first step sees iter = 1; schedules are
// functions of it = iter - 1 (0 on the first step):
//   fixed   base_lr
//   step    base_lr * gamma^floor(it / stepsize)
//   exp     base_lr * gamma^it
//   inv     base_lr * (1 + gamma * it)^(-power)
//   cosine  0.5 * base_lr * (1 + cos(pi * min(it, max_iter) / max_iter))
// times, during the first warmup_iters steps, a factor rising linearly from
// warmup_start_factor (it = 0) to 1 (it = warmup_iters).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

enum class Policy { kFixed, kStep, kExp, kInv, kCosine };

struct LrConfig {
  double base_lr;
  Policy policy;
  double gamma, power, warmup_start_factor;
  int64_t stepsize, max_iter, warmup_iters;
  DType dtype;
};

// Reads and checks the arguments; shared by the kernel (at construction)
// and shape inference. Failures are kInvalidArgument naming the argument
// (kDType for `dtype`).
LrConfig ParseLrConfig(const ArgReader& args) {
  LrConfig c;
  c.base_lr = args.Float("base_lr");
  DP_ENFORCE(std::isfinite(c.base_lr), "argument 'base_lr' must be finite, got ", c.base_lr);
  const std::string policy = args.String("policy", std::string("fixed"));
  if (policy == "fixed")
    c.policy = Policy::kFixed;
  else if (policy == "step")
    c.policy = Policy::kStep;
  else if (policy == "exp")
    c.policy = Policy::kExp;
  else if (policy == "inv")
    c.policy = Policy::kInv;
  else if (policy == "cosine")
    c.policy = Policy::kCosine;
  else
    DP_THROW(Code::kInvalidArgument, "argument 'policy' must be fixed, step, exp, inv or cosine, got '", policy, "'");
  c.gamma = args.Float("gamma", 0.1);
  c.power = args.Float("power", 1.0);
  c.stepsize = args.Int("stepsize", 1);
  c.max_iter = args.Int("max_iter", 1);
  c.warmup_iters = args.Int("warmup_iters", 0);
  c.warmup_start_factor = args.Float("warmup_start_factor", 0.1);
  DP_ENFORCE(std::isfinite(c.gamma), "argument 'gamma' must be finite, got ", c.gamma);
  DP_ENFORCE(std::isfinite(c.power), "argument 'power' must be finite, got ", c.power);
  DP_ENFORCE(c.stepsize > 0, "argument 'stepsize' must be > 0, got ", c.stepsize);
  DP_ENFORCE(c.max_iter > 0, "argument 'max_iter' must be > 0, got ", c.max_iter);
  DP_ENFORCE(c.warmup_iters >= 0, "argument 'warmup_iters' must be >= 0, got ", c.warmup_iters);
  DP_ENFORCE(std::isfinite(c.warmup_start_factor) && c.warmup_start_factor >= 0,
             "argument 'warmup_start_factor' must be >= 0, got ", c.warmup_start_factor);
  const int64_t dt = args.Int("dtype", static_cast<int64_t>(DType::kFloat32));
  DP_ENFORCE_CODE(dt == static_cast<int64_t>(DType::kFloat32) || dt == static_cast<int64_t>(DType::kFloat64),
                  Code::kDType, "argument 'dtype' must be 1 (float32) or 4 (float64), got ", dt);
  c.dtype = static_cast<DType>(dt);
  return c;
}

double LearningRateAt(const LrConfig& c, int64_t it) {
  const double x = static_cast<double>(it);
  double lr = c.base_lr;
  switch (c.policy) {
    case Policy::kFixed: break;
    case Policy::kStep: lr *= std::pow(c.gamma, static_cast<double>(it / c.stepsize)); break;
    case Policy::kExp: lr *= std::pow(c.gamma, x); break;
    case Policy::kInv: lr *= std::pow(1.0 + c.gamma * x, -c.power); break;
    case Policy::kCosine: {
      const double frac = static_cast<double>(std::min(it, c.max_iter)) / static_cast<double>(c.max_iter);
      lr *= 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
      break;
    }
  }
  if (it < c.warmup_iters) {
    const double s = c.warmup_start_factor;
    lr *= s + (1.0 - s) * x / static_cast<double>(c.warmup_iters);
  }
  return lr;
}

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
    const double lr = LearningRateAt(config_, value - 1);
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
    .HostOp("one scalar from the host iteration counter; device optimizers read a copy")
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
