// Fill operators: create a tensor of a given shape from constants, seeded
// random numbers or the elements the op carries (GivenTensorFill). Seeds
// default to a hash of the output name, so an init net gives the same
// parameters every time and different parameters per blob. Element i of a
// random fill is a function of (seed, i) alone (Philox, core/philox.h),
// computed in double and rounded to the output's dtype: the CUDA kernels
// (ops/cuda/random_optimizer_kernels.cu) give the same bits.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <variant>
#include <vector>

#include "ops/gradient_registry.h"
#include "core/parallel_for.h"
#include "core/philox.h"
#include "core/storage.h"
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

// The elements of GivenTensorFill: argument `values` for a float dtype,
// `int_values` for an int one, one element per element of `dims`; else
// kInvalidArgument (kDType for another dtype). Checked before anything of
// the shape's size is allocated, and read in place: an imported model's
// weights are millions of values.
const Argument& GivenElements(const OperatorDef& op, const Dims& dims, DType dtype) {
  const bool floats = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  DP_ENFORCE_CODE(floats || dtype == DType::kInt32 || dtype == DType::kInt64, Code::kDType,
                  "the output must be float32, float64, int32 or int64, got ", DTypeName(dtype));
  const char* name = floats ? "values" : "int_values";
  const char* other = floats ? "int_values" : "values";
  DP_ENFORCE(op.FindArg(other) == nullptr, "a ", DTypeName(dtype), " output takes its elements from '", name,
             "', not '", other, "'");
  const Argument* arg = op.FindArg(name);
  DP_ENFORCE(arg != nullptr, "a ", DTypeName(dtype), " output needs argument '", name, "'");
  // A floats argument may hold ints (ArgReader::Floats takes them too).
  const auto* as_doubles = std::get_if<std::vector<double>>(&arg->value);
  const auto* as_ints = std::get_if<std::vector<int64_t>>(&arg->value);
  DP_ENFORCE(as_doubles != nullptr || as_ints != nullptr, "argument '", name, "' must be a list of numbers, got ",
             arg->KindName());
  const size_t count = as_doubles != nullptr ? as_doubles->size() : as_ints->size();
  const int64_t n = NumElements(dims);
  DP_ENFORCE(count == static_cast<uint64_t>(n), "argument '", name, "' holds ", count, " elements but shape ",
             DimsString(dims), " has ", n);
  return *arg;
}

// GivenTensorFill's output as a host tensor: the elements converted to the
// dtype (kOutOfRange for an int that does not fit it).
Tensor GivenTensor(const OperatorDef& op, const ArgReader& args) {
  Dims dims = args.Ints("shape");
  const DType dtype = FillDType(args);
  const Argument& arg = GivenElements(op, dims, dtype);
  Tensor t(std::move(dims), dtype);
  DispatchNumeric(dtype, "GivenTensorFill output", [&](auto zero) {
    using T = decltype(zero);
    T* p = t.mutable_data<T>();
    if (const auto* v = std::get_if<std::vector<double>>(&arg.value)) {
      for (size_t i = 0; i < v->size(); ++i) p[i] = static_cast<T>((*v)[i]);
      return;
    }
    const auto& v = std::get<std::vector<int64_t>>(arg.value);
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, int32_t>)
        DP_ENFORCE_CODE(v[i] >= std::numeric_limits<int32_t>::min() && v[i] <= std::numeric_limits<int32_t>::max(),
                        Code::kOutOfRange, "argument 'int_values': element ", i, " (", v[i],
                        ") does not fit in int32");
      p[i] = static_cast<T>(v[i]);
    }
  });
  return t;
}

// Converts its elements once, when the op is made; each run copies them into
// Y with CopyBytes (a memcpy on the CPU, one asynchronous copy on the op's
// stream on CUDA), so one class serves both devices' registries.
class GivenTensorFillOp final : public Operator {
 public:
  explicit GivenTensorFillOp(const OpInit& init) : Operator(init), values_(GivenTensor(def(), args())) {}

  const char* GraphCaptureObstacle() const override {
    return "it copies its elements from pageable host memory, which a CUDA graph cannot capture";
  }

 private:
  void RunOnDevice() override {
    Tensor* y = Output(0, values_.dims(), values_.dtype());
    CopyBytes(values_.nbytes(), values_.raw_data(), values_.device(), y->raw_mutable_data(), device(), &context());
  }

  const Tensor values_;  // on the host, alive as long as the op: CUDA copies from it asynchronously
};

std::vector<TensorInfo> InferGivenTensorFill(const OperatorDef& op, const ArgReader& args,
                                             const std::vector<TensorInfo>&) {
  Dims dims = args.Ints("shape");
  const DType dtype = FillDType(args);
  GivenElements(op, dims, dtype);
  return {TensorInfo{std::move(dims), dtype}};
}

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

DP_OPERATOR_SCHEMA(GivenTensorFill)
    .NumInputs(0)
    .NumOutputs(1)
    .Outputs({"Y"})
    .RequiredArg("shape", ArgKind::kInts, "output dims ([] is a scalar)")
    .Arg("dtype", ArgKind::kInt, static_cast<int64_t>(DType::kFloat32),
         "DP_DTYPE_* of the output: float32, float64, int32 or int64")
    .Arg("values", ArgKind::kFloats, ArgDefault::Described("none: float32 and float64 outputs need it"),
         "the elements in row-major order, for a float output")
    .Arg("int_values", ArgKind::kInts, ArgDefault::Described("none: int32 and int64 outputs need it"),
         "the elements in row-major order, for an int output; each must fit the dtype")
    .ShapeInference(InferGivenTensorFill)
    .Doc("Fills with the elements the op carries (an imported model's weights), converted to the dtype once.");

DP_REGISTER_CPU_OPERATOR(ConstantFill, ConstantFillOp);
DP_REGISTER_CPU_OPERATOR(UniformFill, UniformFillOp);
DP_REGISTER_CPU_OPERATOR(GaussianFill, GaussianFillOp);
DP_REGISTER_CPU_OPERATOR(XavierFill, XavierFillOp);
DP_REGISTER_CPU_OPERATOR(GivenTensorFill, GivenTensorFillOp);
#if DP_WITH_CUDA
DP_REGISTER_CUDA_OPERATOR(GivenTensorFill, GivenTensorFillOp);  // device-generic: CopyBytes
#endif
// A fill's output does not depend on its input's values: gradients stop here.
DP_STOP_GRADIENT(ConstantFill);
DP_STOP_GRADIENT(UniformFill);
DP_STOP_GRADIENT(GaussianFill);
DP_STOP_GRADIENT(XavierFill);
DP_STOP_GRADIENT(GivenTensorFill);

}  // namespace
}  // namespace dp
