// Fill operators: create a tensor of a given shape from constants or seeded
// random numbers. Seeds default to a hash of the output name, so an init net
// gives the same parameters every time and different parameters per blob.
// Element i of a random fill is a function of (seed, i) alone (Philox,
// core/philox.h), computed in double and rounded to the output's dtype: the
// CUDA kernels (ops/cuda/random_optimizer_kernels.cu) give the same bits.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <variant>

#include "ops/gradient_registry.h"
#include "core/parallel_for.h"
#include "core/philox.h"
#include "ops/op_utils.h"
#include "ops/random_op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

// Shape from the `shape` argument, or from input 0 (its shape, or with
// input_as_shape=1 its int64 values).
Dims FillShape(const OperatorDef& op, const ArgReader& args, const Tensor* input) {
  if (input == nullptr) {
    Dims d = args.Ints("shape", std::vector<int64_t>{});
    NumElements(d);  // rejects negative dims
    return d;
  }
  if (args.Int("input_as_shape", 0) == 0) return input->dims();
  DP_ENFORCE_CODE(input->dtype() == DType::kInt64 && input->ndim() == 1, Code::kShape,
                  "with input_as_shape=1 the input must be a 1-D int64 tensor, got ", input->DebugString());
  DP_ENFORCE(input->device().type == DeviceType::kCPU, "with input_as_shape=1 the CPU kernel reads the input's "
             "values: it must be a cpu tensor, got ", input->DebugString());
  const int64_t* v = input->data<int64_t>();
  Dims d(v, v + input->numel());
  NumElements(d);
  (void)op;
  return d;
}

class FillOp : public Operator {
 public:
  using Operator::Operator;

 protected:
  void RunOnDevice() final {
    const Tensor* like = InputSize() > 0 ? &Input(0) : nullptr;
    Dims dims = FillShape(def(), args(), like);
    DType dtype = FillDType(args(), like ? like->dtype() : DType::kUndefined);
    Fill(Output(0, std::move(dims), dtype));
  }
  virtual void Fill(Tensor* out) = 0;
};

class ConstantFillOp final : public FillOp {
 public:
  using FillOp::FillOp;

 private:
  void Fill(Tensor* out) override {
    double value = args().Float("value", 0.0);
    // An int `value` fills integer outputs exactly (a double has 53 bits).
    const Argument* arg = def().FindArg("value");
    const bool int_value = arg != nullptr && std::holds_alternative<int64_t>(arg->value);
    const int64_t ivalue = int_value ? args().Int("value") : 0;
    auto fill = [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // Casting an unrepresentable value to an integer is undefined: refuse it.
        using L = std::numeric_limits<T>;
        bool fits = int_value ? ivalue >= static_cast<int64_t>(L::lowest()) &&
                                    (ivalue < 0 || static_cast<uint64_t>(ivalue) <= static_cast<uint64_t>(L::max()))
                              : value >= static_cast<double>(L::lowest()) && value < std::ldexp(1.0, L::digits);
        DP_ENFORCE_CODE(fits, Code::kOutOfRange, "argument 'value' ", int_value ? StrCat(ivalue) : StrCat(value),
                        " does not fit in ",
                        DTypeName(out->dtype()));
      }
      T* p = out->mutable_data<T>();
      const T v = std::is_integral_v<T> && int_value ? static_cast<T>(ivalue) : static_cast<T>(value);
      std::fill(p, p + out->numel(), v);
    };
    switch (out->dtype()) {
      case DType::kUInt8: fill(uint8_t{}); break;
      case DType::kBool: fill(bool{}); break;
      default: DispatchNumeric(out->dtype(), "ConstantFill output", fill);
    }
  }
};

// p[i] = value(i), the double rounded to the output's float dtype. Each
// element depends on its index alone, so pieces of the tensor fill on the
// op's threads with the same result.
template <typename Value>
void FillRandom(Tensor* out, const std::string& what, Value value) {
  constexpr int64_t kGrain = int64_t{1} << 14;  // ~0.5-2 ms of one core's draws
  DispatchFloat(out->dtype(), what, [&](auto zero) {
    using T = decltype(zero);
    T* p = out->mutable_data<T>();
    ParallelFor(out->numel(), kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) p[i] = static_cast<T>(value(static_cast<uint64_t>(i)));
    });
  });
}

class UniformFillOp final : public FillOp {
 public:
  using FillOp::FillOp;

 private:
  void Fill(Tensor* out) override {
    // Plain locals, not structured bindings: clang before 16 cannot capture those in a lambda.
    const UniformBounds bounds = UniformFillBounds(args());
    const double lo = bounds.lo, hi = bounds.hi;
    const uint64_t seed = RandomOpSeed(def(), args());
    FillRandom(out, "UniformFill output", [&](uint64_t i) { return philox::UniformValue(seed, i, lo, hi); });
  }
};

class GaussianFillOp final : public FillOp {
 public:
  using FillOp::FillOp;

 private:
  void Fill(Tensor* out) override {
    const GaussianParams params = GaussianFillParams(args());  // plain locals for the lambda, as above
    const double mean = params.mean, stdev = params.stdev;
    const uint64_t seed = RandomOpSeed(def(), args());
    FillRandom(out, "GaussianFill output", [&](uint64_t i) { return philox::NormalValue(seed, i, mean, stdev); });
  }
};

// Uniform in [-s, s] with s = sqrt(3 / fan_in), fan_in = numel / dim 0 (the
// input width of an FC weight [N, K], or C*kh*kw of a conv filter).
class XavierFillOp final : public FillOp {
 public:
  using FillOp::FillOp;

 private:
  void Fill(Tensor* out) override {
    const double scale = XavierScale(out->dims());
    const uint64_t seed = RandomOpSeed(def(), args());
    FillRandom(out, "XavierFill output", [&](uint64_t i) { return philox::UniformValue(seed, i, -scale, scale); });
  }
};

std::vector<TensorInfo> InferFill(const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
  DType dtype = FillDType(args, in.empty() ? DType::kUndefined : in[0].dtype);
  if (in.empty()) {
    Dims d = args.Ints("shape", std::vector<int64_t>{});
    NumElements(d);  // rejects negative dims
    return {TensorInfo{d, dtype}};
  }
  if (args.Int("input_as_shape", 0) != 0) return {TensorInfo{}};  // values unknown statically
  (void)op;
  return {TensorInfo{in[0].dims, dtype}};
}

#define DP_FILL_SCHEMA(Type, doc)                                                                   \
  DP_OPERATOR_SCHEMA(Type)                                                                          \
      .NumInputs(0, 1)                                                                              \
      .NumOutputs(1)                                                                                \
      .AllowInplace({{0, 0}})                                                                       \
      .Inputs({"like"})                                                                             \
      .Outputs({"Y"})                                                                               \
      .Arg("shape", ArgKind::kInts, std::vector<int64_t>{}, "output dims (without input; [] is a scalar)")    \
      .Arg("dtype", ArgKind::kInt,                                                                            \
           ArgDefault::Described("the input's dtype when Y is shaped like the input, else 1 (float32)"),      \
           "DP_DTYPE_* of the output")                                                                        \
      .Arg("input_as_shape", ArgKind::kInt, 0, "1: input 0 is a 1-D int64 tensor of dims")                    \
      /* "like" gives only its dims (and dtype): a replica's param shaped like replica 0's, on another */     \
      /* device; the values of input_as_shape are read through a copy (CUDA) or on the host (CPU). */         \
      .InputsCanCrossDevices()                                                                      \
      .ShapeInference(InferFill)                                                                    \
      .Doc(doc)

// The seed of the random fills; by default a hash of the output name.
#define DP_FILL_SEED_ARG \
  .Arg("seed", ArgKind::kInt, ArgDefault::Described("a hash of the output's name"), "seed of the random stream")

DP_FILL_SCHEMA(ConstantFill, "Fills with `value`.")
    .Arg("value", ArgKind::kFloat, 0.0, "the constant; an int fills integer outputs exactly");
DP_FILL_SCHEMA(UniformFill, "Uniform in [min, max), seeded.")
    .Arg("min", ArgKind::kFloat, 0.0, "lower bound")
    .Arg("max", ArgKind::kFloat, 1.0, "upper bound")
    DP_FILL_SEED_ARG;
DP_FILL_SCHEMA(GaussianFill, "Normal(mean, std), seeded.")
    .Arg("mean", ArgKind::kFloat, 0.0, "the mean")
    .Arg("std", ArgKind::kFloat, 1.0, "standard deviation, >= 0")
    DP_FILL_SEED_ARG;
DP_FILL_SCHEMA(XavierFill, "Uniform in +-sqrt(3/fan_in), seeded.") DP_FILL_SEED_ARG;

#undef DP_FILL_SEED_ARG

DP_REGISTER_CPU_OPERATOR(ConstantFill, ConstantFillOp);
DP_REGISTER_CPU_OPERATOR(UniformFill, UniformFillOp);
DP_REGISTER_CPU_OPERATOR(GaussianFill, GaussianFillOp);
DP_REGISTER_CPU_OPERATOR(XavierFill, XavierFillOp);
// A fill's output does not depend on its input's values: gradients stop here.
DP_STOP_GRADIENT(ConstantFill);
DP_STOP_GRADIENT(UniformFill);
DP_STOP_GRADIENT(GaussianFill);
DP_STOP_GRADIENT(XavierFill);

}  // namespace
}  // namespace dp
