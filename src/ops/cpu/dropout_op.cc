// Dropout (inverted): in training, each element is kept with probability
// 1 - ratio and scaled by 1 / (1 - ratio), else zeroed; output 1 `mask`
// (uint8, X's dims) records the kept elements for the gradient. With
// is_test=1, Y = X (sharing X's storage, no copy) and the optional mask is
// all ones.
//
// Determinism: the op's seed (argument `seed`, default a hash of the output
// name as for the fill ops) and, with the optional input 1 `counter` (an
// int64 [1], the training nets wire the iteration counter in), the counter's
// value pick the mask: run k's mask depends on (seed, k) only, so the random
// state is the counter, which a checkpoint holds, and resumed training draws
// the masks it would have drawn. Without a counter the op's own generator
// advances with every run: a fresh net with the same seed reproduces the same
// sequence of masks, and successive runs of one net draw different masks.
#include <algorithm>
#include <functional>

#include "ops/gradient_registry.h"
#include "core/random.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

uint64_t DropoutSeed(const OperatorDef& op, const ArgReader& args) {
  if (args.Has("seed")) return static_cast<uint64_t>(args.Int("seed"));
  return std::hash<std::string>{}(op.outputs.at(0)) ^ 0x5eedULL;
}

// The checked `ratio` argument; shared by the kernels and shape inference.
double DropoutRatio(const ArgReader& args) {
  const double ratio = args.Float("ratio", 0.5);
  DP_ENFORCE(ratio >= 0.0 && ratio < 1.0, "argument 'ratio' must be in [0, 1), got ", ratio);
  return ratio;
}

bool IsTest(const ArgReader& args) { return args.Int("is_test", 0) != 0; }

// Training needs somewhere to put the mask; shared by kernel and inference.
void CheckDropoutOutputs(bool is_test, size_t num_outputs, const std::string& y) {
  DP_ENFORCE(is_test || num_outputs > 1, "in training (is_test=0) Dropout needs output 1 'mask' besides ", y,
             " (the gradient reads it)");
}

class DropoutOp final : public Operator {
 public:
  explicit DropoutOp(const OpInit& init)
      : Operator(init),
        seed_(DropoutSeed(init.def, ArgReader(init.def, OpLabel(init.def, init.index)))),
        rng_(seed_) {}

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const double ratio = DropoutRatio(args());
    const bool is_test = IsTest(args());
    CheckDropoutOutputs(is_test, static_cast<size_t>(OutputSize()), OutputDesc(0));
    const Dims dims = x.dims();
    if (is_test) {
      DispatchFloat(x.dtype(), InputDesc(0), [](auto) {});  // same dtypes as training
      if (OutputSize() > 1) {
        uint8_t* m = Output(1, dims, DType::kUInt8)->mutable_data<uint8_t>();
        std::fill(m, m + NumElements(dims), uint8_t{1});
      }
      Tensor* y = Output(0);
      if (y != &x) y->ShareData(x);
      return;
    }
    // With a counter, a generator of this run's own; else the op's.
    Rng counted(InputSize() > 1 ? CountedSeed() : 0);
    Rng& rng = InputSize() > 1 ? counted : rng_;
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();  // before Output: Y may be X (in place)
      const int64_t n = x.numel();
      T* yp = Output(0, dims, x.dtype())->template mutable_data<T>();
      uint8_t* mp = Output(1, dims, DType::kUInt8)->mutable_data<uint8_t>();
      const T scale = static_cast<T>(1.0 / (1.0 - ratio));
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = rng.Uniform() >= ratio;
        mp[i] = keep ? 1 : 0;
        yp[i] = keep ? xp[i] * scale : T(0);
      }
    });
  }

  // The seed of this run's mask with a counter: seed and counter mixed
  // (Rng's SplitMix spreads it over the generator's state).
  uint64_t CountedSeed() const {
    const Tensor& c = Input(1);
    DP_ENFORCE_CODE(c.dtype() == DType::kInt64 && c.numel() == 1, Code::kDType, InputDesc(1),
                    " must be an int64 counter of one element, got ", c.DebugString());
    return seed_ ^ (static_cast<uint64_t>(c.data<int64_t>()[0]) * 0x9E3779B97F4A7C15ULL);
  }

  const uint64_t seed_;
  Rng rng_;  // without a counter: advances every run; runs of one net never overlap
};

// dX = dY * mask / (1 - ratio); with is_test=1, dX = dY (no mask needed).
class DropoutGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& dy = Input(0);
    const double ratio = DropoutRatio(args());
    if (IsTest(args())) {
      DispatchFloat(dy.dtype(), InputDesc(0), [](auto) {});
      Tensor* dx = Output(0);
      if (dx != &dy) dx->ShareData(dy);
      return;
    }
    DP_ENFORCE(InputSize() > 1, "in training (is_test=0) DropoutGradient needs input 1, the forward op's mask");
    const Tensor& mask = Input(1);
    DP_ENFORCE_CODE(mask.dtype() == DType::kUInt8, Code::kDType, InputDesc(1), " must be uint8, got ",
                    DTypeName(mask.dtype()));
    DP_ENFORCE_CODE(mask.dims() == dy.dims(), Code::kShape, InputDesc(1), " has shape ", DimsString(mask.dims()),
                    " but ", InputDesc(0), " has ", DimsString(dy.dims()));
    DispatchFloat(dy.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* dyp = dy.data<T>();  // before Output: dX may be dY (in place)
      const uint8_t* mp = mask.data<uint8_t>();
      const int64_t n = dy.numel();
      T* dxp = Output(0, dy.dims(), dy.dtype())->template mutable_data<T>();
      const T scale = static_cast<T>(1.0 / (1.0 - ratio));
      for (int64_t i = 0; i < n; ++i) dxp[i] = mp[i] ? dyp[i] * scale : T(0);
    });
  }
};

DP_OPERATOR_SCHEMA(Dropout)
    .NumInputs(1, 2)
    .NumOutputs(1, 2)
    .AllowInplace({{0, 0}})
    .Inputs({"X", "counter"})
    .Outputs({"Y", "mask"})
    .Arg("ratio", ArgKind::kFloat, 0.5, "probability of dropping an element, in [0, 1)")
    .Arg("is_test", ArgKind::kInt, 0, "1: Y = X and the optional mask is all ones")
    .Arg("seed", ArgKind::kInt, ArgDefault::Described("a hash of output 0's name"), "seed of the op's random stream")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      DropoutRatio(args);
      CheckDropoutOutputs(IsTest(args), op.outputs.size(), StrCat("Y '", op.outputs[0], "'"));
      std::vector<TensorInfo> out{in[0]};
      if (op.outputs.size() > 1) out.push_back({in[0].dims, DType::kUInt8});
      return out;
    })
    .Doc("Inverted dropout: kept elements scaled by 1 / (1 - ratio); mask (uint8) marks them. With input 1, an "
         "int64 [1] counter (the iteration), the mask is a function of the seed and the counter.");

DP_OPERATOR_SCHEMA(DropoutGradient)
    .NumInputs(1, 2)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"dY", "mask"})
    .Outputs({"dX"})
    .Arg("ratio", ArgKind::kFloat, 0.5, "the forward op's ratio")
    .Arg("is_test", ArgKind::kInt, 0, "1: dX = dY (the mask is not read)")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      DropoutRatio(args);
      if (!IsTest(args)) {
        DP_ENFORCE(in.size() > 1, "in training (is_test=0) DropoutGradient needs input 1, the forward op's mask");
        DP_ENFORCE_CODE(in[1].dtype == DType::kUInt8, Code::kDType, "mask '", op.inputs[1], "' must be uint8, got ",
                        DTypeName(in[1].dtype));
        DP_ENFORCE_CODE(in[1].dims == in[0].dims, Code::kShape, "mask '", op.inputs[1], "' has shape ",
                        DimsString(in[1].dims), " but dY '", op.inputs[0], "' has ", DimsString(in[0].dims));
      }
      return std::vector<TensorInfo>{in[0]};
    })
    .Doc("dX = dY * mask / (1 - ratio).");

DP_REGISTER_CPU_OPERATOR(Dropout, DropoutOp);
DP_REGISTER_CPU_OPERATOR(DropoutGradient, DropoutGradientOp);

struct DropoutGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    const ArgReader args = Reader();
    std::vector<Argument> gargs{MakeArg("ratio", args.Float("ratio", 0.5)), MakeArg("is_test", args.Int("is_test", 0))};
    if (IsTest(args)) return {MakeOp("DropoutGradient", {GO(0)}, {GI(0)}, std::move(gargs))};
    DP_ENFORCE_CODE(NumOutputs() > 1, Code::kInvalidNet, label(),
                    ": in training Dropout needs output 1 'mask' for its gradient");
    return {MakeOp("DropoutGradient", {GO(0), O(1)}, {GI(0)}, std::move(gargs))};
  }
};

}  // namespace

DP_REGISTER_GRADIENT(Dropout, DropoutGradientMaker);

}  // namespace dp
