// Dynamic loss scaling (ops/math/loss_scaling.h), as ops of the step:
//   UnscaleGradients(scale, found_inf, g_0, ..., g_{n-1}) -> found_inf, g_0, ..., g_{n-1}
//       every g_i divided by the scale in place (times its float inverse:
//       exact for the powers of two the scaler uses); found_inf = 1 when any
//       element of any g_i was not finite, else 0; with arguments part and
//       parts (a sharded optimizer state: the replica's shard of each
//       gradient, comm/shards.h) the elements PartOfElements(n, part, parts)
//       of each g_i alone, the only ones its update reads;
//   GateLearningRate(lr, found_inf) -> lr_step
//       lr, or NaN when found_inf is set: every update reading it then skips
//       the step (ops/math/optimizer_updates.h, SkipsUpdate);
//   UpdateLossScale(scale, good_steps, found_inf) -> scale, good_steps
//       in place: a cut after an overflow, a growth after `growth_interval`
//       steps in a row without one.
// scale, found_inf and good_steps are float32 scalars ([] or [1]); the
// gradients float32 or float64. The training builders add them when asked
// for loss scaling (model/training.h, LossScaling), which fp16 products need.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/gradient_registry.h"
#include "ops/math/loss_scaling.h"
#include "ops/math/optimizer_updates.h"  // PartOfElements
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

void CheckLossScaleScalar(const Dims& dims, DType dtype, const std::string& what) {
  DP_ENFORCE_CODE(dtype == DType::kFloat32, Code::kDType, what, " must be float32, got ", DTypeName(dtype));
  DP_ENFORCE_CODE(NumElements(dims) == 1, Code::kShape, what, " ", DimsString(dims), " must hold one value");
}

UnscaleParts ReadUnscaleParts(const ArgReader& args) {
  const int64_t part = args.Int("part", 0), parts = args.Int("parts", 1);
  DP_ENFORCE(parts >= 1 && part >= 0 && part < parts, "arguments 'part' and 'parts' must satisfy 0 <= part < ",
             "parts, got part ", part, " of ", parts);
  return {part, parts};
}

math::LossScaleArgs ReadLossScaleArgs(const ArgReader& args) {
  math::LossScaleArgs a;
  a.growth = static_cast<float>(args.Float("growth_factor", 2.0));
  a.backoff = static_cast<float>(args.Float("backoff_factor", 0.5));
  a.interval = args.Int("growth_interval", 2000);
  DP_ENFORCE(a.growth >= 1.0f && std::isfinite(a.growth), "argument 'growth_factor' must be >= 1, got ", a.growth);
  DP_ENFORCE(a.backoff > 0.0f && a.backoff <= 1.0f, "argument 'backoff_factor' must be in (0, 1], got ", a.backoff);
  DP_ENFORCE(a.interval > 0, "argument 'growth_interval' must be > 0, got ", a.interval);
  return a;
}

namespace {

class UnscaleGradientsOp final : public Operator {
 public:
  explicit UnscaleGradientsOp(const OpInit& init) : Operator(init), parts_(ReadUnscaleParts(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& scale = Input(0);
    CheckLossScaleScalar(scale.dims(), scale.dtype(), InputDesc(0));
    CheckLossScaleScalar(Input(1).dims(), Input(1).dtype(), InputDesc(1));
    const float inv = 1.0f / scale.data<float>()[0];
    bool found = false;
    for (int i = 2; i < InputSize(); ++i) {
      DispatchFloat(Input(i).dtype(), InputDesc(i), [&](auto zero) {
        using T = decltype(zero);
        const ElementRange part = PartOfElements(Input(i).numel(), parts_.part, parts_.parts);
        T* g = Output(i - 1)->template mutable_data<T>();  // in place
        bool any = false;
        for (int64_t k = part.begin; k < part.end; ++k) {
          any = any || !math::IsFinite(g[k]);
          g[k] *= static_cast<T>(inv);
        }
        found = found || any;
      });
    }
    Output(0)->mutable_data<float>()[0] = found ? 1.0f : 0.0f;
  }

  const UnscaleParts parts_;
};

class GateLearningRateOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& lr = Input(0);
    CheckLossScaleScalar(Input(1).dims(), Input(1).dtype(), InputDesc(1));
    const bool found = Input(1).data<float>()[0] != 0.0f;
    DispatchFloat(lr.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      DP_ENFORCE_CODE(lr.numel() == 1, Code::kShape, InputDesc(0), " ", DimsString(lr.dims()),
                      " must hold one value");
      const T value = lr.data<T>()[0];
      Output(0, lr.dims(), lr.dtype())->template mutable_data<T>()[0] =
          found ? std::numeric_limits<T>::quiet_NaN() : value;
    });
  }
};

class UpdateLossScaleOp final : public Operator {
 public:
  explicit UpdateLossScaleOp(const OpInit& init) : Operator(init), args_(ReadLossScaleArgs(args())) {}

 private:
  void RunOnDevice() override {
    for (int i = 0; i < 3; ++i) CheckLossScaleScalar(Input(i).dims(), Input(i).dtype(), InputDesc(i));
    const bool found = Input(2).data<float>()[0] != 0.0f;
    float* scale = Output(0)->mutable_data<float>();  // in place
    float* good = Output(1)->mutable_data<float>();
    math::NextLossScale(scale, good, found, args_);
  }

  const math::LossScaleArgs args_;
};

std::vector<TensorInfo> InferUnscale(const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
  DP_ENFORCE(op.outputs.size() + 1 == op.inputs.size(), "takes the scale, found_inf and N gradients and gives ",
             "found_inf and the N gradients (in place), got ", op.inputs.size(), " inputs and ", op.outputs.size(),
             " outputs");
  CheckLossScaleScalar(in[0].dims, in[0].dtype, StrCat("scale '", op.inputs[0], "'"));
  CheckLossScaleScalar(in[1].dims, in[1].dtype, StrCat("found_inf '", op.inputs[1], "'"));
  ReadUnscaleParts(args);
  return std::vector<TensorInfo>(in.begin() + 1, in.end());
}

}  // namespace

DP_OPERATOR_SCHEMA(UnscaleGradients)
    .NumInputs(3, std::numeric_limits<int>::max())
    .NumOutputs(2, std::numeric_limits<int>::max())
    .EnforceInplaceAll(1)
    .Inputs({"scale", "found_inf"})
    .Outputs({"found_inf"})
    .Arg("part", ArgKind::kInt, 0, "with parts: the part of each gradient to unscale and check (0 <= part < parts)")
    .Arg("parts", ArgKind::kInt, 1, "the parts each gradient is cut into (a sharded optimizer state's shards)")
    .ShapeInference(InferUnscale)
    .Doc("Divides the gradients (inputs 2..) by the loss scale in place; found_inf = 1 if any element was not "
         "finite, else 0. With part/parts: that part of each gradient alone (the rest is left as it is).");

DP_OPERATOR_SCHEMA(GateLearningRate)
    .NumInputs(2)
    .NumOutputs(1)
    .Inputs({"lr", "found_inf"})
    .Outputs({"lr_step"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      CheckLossScaleScalar(in[1].dims, in[1].dtype, StrCat("found_inf '", op.inputs[1], "'"));
      return std::vector<TensorInfo>{in[0]};
    })
    .Doc("lr, or NaN when found_inf is set: the step's updates skip it (a NaN rate leaves param and state).");

DP_OPERATOR_SCHEMA(UpdateLossScale)
    .NumInputs(3)
    .NumOutputs(2)
    .EnforceInplace({{0, 0}, {1, 1}})
    .Inputs({"scale", "good_steps", "found_inf"})
    .Outputs({"scale", "good_steps"})
    .Arg("growth_factor", ArgKind::kFloat, 2.0, "the scale's growth after growth_interval steps without overflow")
    .Arg("backoff_factor", ArgKind::kFloat, 0.5, "the scale's cut after a step that overflowed")
    .Arg("growth_interval", ArgKind::kInt, 2000, "steps in a row without overflow before the scale grows")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      ReadLossScaleArgs(args);
      for (size_t i = 0; i < 3; ++i)
        CheckLossScaleScalar(in[i].dims, in[i].dtype, StrCat("input ", i, " '", op.inputs[i], "'"));
      return std::vector<TensorInfo>{in[0], in[1]};
    })
    .Doc("Dynamic loss scaling's step: scale *= backoff_factor after an overflow (good_steps = 0), else "
         "good_steps += 1 and, every growth_interval of them, scale *= growth_factor.");

DP_REGISTER_CPU_OPERATOR(UnscaleGradients, UnscaleGradientsOp);
DP_REGISTER_CPU_OPERATOR(GateLearningRate, GateLearningRateOp);
DP_REGISTER_CPU_OPERATOR(UpdateLossScale, UpdateLossScaleOp);
DP_NO_GRADIENT(UnscaleGradients);
DP_NO_GRADIENT(GateLearningRate);
DP_NO_GRADIENT(UpdateLossScale);

}  // namespace dp
