// Elementwise activations and their gradients: Sigmoid, Tanh and Clip (all
// may run in place; their gradients read the forward output Y, not X), plus
// StopGradient, an identity whose output shares the input's storage and
// through which the autodiff transform lets no gradient flow. Large tensors
// are split across the op's threads.
#include <limits>

#include "core/parallel_for.h"
#include "ops/cpu/activation_checks.h"
#include "ops/gradient_registry.h"
#include "ops/math/activation.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

void CheckYAndGrad(const std::string& y, const Dims& yd, DType yt, const std::string& dy, const Dims& dyd,
                   DType dyt) {
  DP_ENFORCE_CODE(yt == dyt, Code::kDType, dy, " is ", DTypeName(dyt), " but ", y, " is ", DTypeName(yt));
  DP_ENFORCE_CODE(yd == dyd, Code::kShape, dy, " has shape ", DimsString(dyd), " but ", y, " has ", DimsString(yd));
}

ClipBounds ReadClipBounds(const ArgReader& args) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double lo = args.Float("min", -kInf), hi = args.Float("max", kInf);
  DP_ENFORCE(lo <= hi, "arguments 'min' (", lo, ") and 'max' (", hi, ") must satisfy min <= max");
  return {lo, hi};
}

namespace {

// Elements per part: tens of microseconds of one core (an exp each).
constexpr int64_t kGrain = int64_t{1} << 14;

// The formulas are ops/math/activation.h's, which the CUDA kernels run too.
struct SigmoidFn {
  template <typename T> T operator()(T x) const { return math::Sigmoid(x); }
};
struct TanhFn {
  template <typename T> T operator()(T x) const { return math::Tanh(x); }
};
// dX from the forward output y and the output gradient dy.
struct SigmoidGradFn {
  template <typename T> T operator()(T y, T dy) const { return math::SigmoidGradient(y, dy); }
};
struct TanhGradFn {
  template <typename T> T operator()(T y, T dy) const { return math::TanhGradient(y, dy); }
};
// Clip's functors read their bounds once, when the op is made.
struct ClipFn {
  explicit ClipFn(const ArgReader& args) : bounds(ReadClipBounds(args)) {}
  template <typename T> T operator()(T x) const {
    return math::Clip(x, static_cast<T>(bounds.lo), static_cast<T>(bounds.hi));
  }
  ClipBounds bounds;
};
struct ClipGradFn {
  explicit ClipGradFn(const ArgReader& args) : bounds(ReadClipBounds(args)) {}
  template <typename T> T operator()(T y, T dy) const {
    return math::ClipGradient(y, dy, static_cast<T>(bounds.lo), static_cast<T>(bounds.hi));
  }
  ClipBounds bounds;
};

template <typename F>
class UnaryOp final : public Operator {
 public:
  explicit UnaryOp(const OpInit& init) : Operator(init), f_(MakeFromArgs<F>(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();  // before Output: Y may be X (in place)
      const int64_t n = x.numel();
      T* yp = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      ParallelForChunks(n, ParallelChunks(n, kGrain), 16, [&](int, int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) yp[i] = f_(xp[i]);
      });
    });
  }
  const F f_;
};

template <typename F>
class UnaryGradientOp final : public Operator {
 public:
  explicit UnaryGradientOp(const OpInit& init) : Operator(init), f_(MakeFromArgs<F>(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& y = Input(0);
    const Tensor& dy = Input(1);
    CheckYAndGrad(InputDesc(0), y.dims(), y.dtype(), InputDesc(1), dy.dims(), dy.dtype());
    DispatchFloat(y.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* yp = y.data<T>();
      const T* dyp = dy.data<T>();  // before Output: dX may be dY (in place)
      const int64_t n = y.numel();
      T* dxp = Output(0, y.dims(), y.dtype())->template mutable_data<T>();
      ParallelForChunks(n, ParallelChunks(n, kGrain), 16, [&](int, int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) dxp[i] = f_(yp[i], dyp[i]);
      });
    });
  }
  const F f_;
};

std::vector<TensorInfo> InferUnaryGradient(const OperatorDef& op, const ArgReader&,
                                           const std::vector<TensorInfo>& in) {
  CheckYAndGrad(StrCat("Y '", op.inputs[0], "'"), in[0].dims, in[0].dtype, StrCat("dY '", op.inputs[1], "'"),
                in[1].dims, in[1].dtype);
  return {in[0]};
}

// Identity without a copy: Y shares X's storage (copy-on-write keeps that safe).
class StopGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    Tensor* y = Output(0);
    if (y != &x) y->ShareData(x);
  }
};

DP_OPERATOR_SCHEMA(Sigmoid)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .IdenticalTypeAndShape()
    .Doc("Y = 1 / (1 + exp(-X)), elementwise.");

DP_OPERATOR_SCHEMA(SigmoidGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{1, 0}})
    .Inputs({"Y", "dY"})
    .Outputs({"dX"})
    .ShapeInference(InferUnaryGradient)
    .Doc("dX = dY * Y * (1 - Y), with Y the Sigmoid's output.");

DP_OPERATOR_SCHEMA(Tanh)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .IdenticalTypeAndShape()
    .Doc("Y = tanh(X), elementwise.");

DP_OPERATOR_SCHEMA(TanhGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{1, 0}})
    .Inputs({"Y", "dY"})
    .Outputs({"dX"})
    .ShapeInference(InferUnaryGradient)
    .Doc("dX = dY * (1 - Y^2), with Y the Tanh's output.");

// Clip's and ClipGradient's bounds (ReadClipBounds).
#define DP_CLIP_BOUND_ARGS                                                                              \
  .Arg("min", ArgKind::kFloat, ArgDefault::Described("-infinity (no lower bound)"), "lower bound")     \
  .Arg("max", ArgKind::kFloat, ArgDefault::Described("+infinity (no upper bound)"), "upper bound, >= min")

DP_OPERATOR_SCHEMA(Clip)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    DP_CLIP_BOUND_ARGS
    .ShapeInference([](const OperatorDef&, const ArgReader& args, const std::vector<TensorInfo>& in) {
      ReadClipBounds(args);
      return std::vector<TensorInfo>{in[0]};
    })
    .Doc("Y = min(max(X, min), max), elementwise; NaN stays NaN (ReLU6: min 0, max 6).");

DP_OPERATOR_SCHEMA(ClipGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{1, 0}})
    .Inputs({"Y", "dY"})
    .Outputs({"dX"})
    DP_CLIP_BOUND_ARGS
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      ReadClipBounds(args);
      return InferUnaryGradient(op, args, in);
    })
    .Doc("dX = dY where min < Y < max, else 0, with Y the Clip's output.");

#undef DP_CLIP_BOUND_ARGS

DP_OPERATOR_SCHEMA(StopGradient)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .IdenticalTypeAndShape()
    .Doc("Y = X (no copy: Y shares X's storage); no gradient flows through it.");

DP_REGISTER_CPU_OPERATOR(Sigmoid, UnaryOp<SigmoidFn>);
DP_REGISTER_CPU_OPERATOR(SigmoidGradient, UnaryGradientOp<SigmoidGradFn>);
DP_REGISTER_CPU_OPERATOR(Tanh, UnaryOp<TanhFn>);
DP_REGISTER_CPU_OPERATOR(TanhGradient, UnaryGradientOp<TanhGradFn>);
DP_REGISTER_CPU_OPERATOR(Clip, UnaryOp<ClipFn>);
DP_REGISTER_CPU_OPERATOR(ClipGradient, UnaryGradientOp<ClipGradFn>);
DP_REGISTER_CPU_OPERATOR(StopGradient, StopGradientOp);
#if DP_WITH_CUDA
DP_REGISTER_CUDA_OPERATOR(StopGradient, StopGradientOp);  // metadata only: any device
#endif

}  // namespace

DP_SIMPLE_GRADIENT(Sigmoid, { return {MakeOp("SigmoidGradient", {O(0), GO(0)}, {GI(0)})}; });
DP_SIMPLE_GRADIENT(Tanh, { return {MakeOp("TanhGradient", {O(0), GO(0)}, {GI(0)})}; });
DP_SIMPLE_GRADIENT(Clip, { return {MakeOp("ClipGradient", {O(0), GO(0)}, {GI(0)}, Args())}; });
DP_STOP_GRADIENT(StopGradient);

}  // namespace dp
