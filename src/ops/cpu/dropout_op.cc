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
// the masks it would have drawn. Without a counter the op counts its own
// runs and run r draws the mask of (seed, r): a fresh net with the same seed
// reproduces the same sequence of masks, and successive runs of one net draw
// different masks.
//
// The mask is Philox's (core/philox.h, ops/math/dropout.h): element i is
// kept when word i of the stream (seed, k) is at least the ratio as a 24-bit
// uniform, so the CUDA kernel draws the same mask.
#include <algorithm>

#include "ops/gradient_registry.h"
#include "ops/math/dropout.h"
#include "ops/op_utils.h"
#include "ops/operator.h"
#include "ops/random_op_utils.h"

namespace dp {
namespace {

class DropoutOp final : public Operator {
 public:
  explicit DropoutOp(const OpInit& init)
      : Operator(init), seed_(RandomOpSeed(init.def, ArgReader(init.def, OpLabel(init.def, init.index)))) {}

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const double ratio = DropoutRatio(args());
    const bool is_test = DropoutIsTest(args());
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
    // The stream: the counter's value, else this op's run count.
    uint64_t stream = runs_++;
    if (InputSize() > 1) {
      CheckDropoutCounter(Input(1), InputDesc(1));
      stream = static_cast<uint64_t>(Input(1).data<int64_t>()[0]);
    }
    const uint32_t threshold = philox::UniformThreshold(ratio);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();  // before Output: Y may be X (in place)
      const int64_t n = x.numel();
      T* yp = Output(0, dims, x.dtype())->template mutable_data<T>();
      uint8_t* mp = Output(1, dims, DType::kUInt8)->mutable_data<uint8_t>();
      const T scale = static_cast<T>(1.0 / (1.0 - ratio));
      // A Philox block gives the words of four elements.
      for (int64_t b = 0; b * 4 < n; ++b) {
        const philox::Block words = philox::StreamBlock(seed_, stream, static_cast<uint64_t>(b));
        for (int64_t i = b * 4, k = 0; k < 4 && i < n; ++i, ++k)
          DropoutElement(xp[i], words.w[k], threshold, scale, &yp[i], &mp[i]);
      }
    });
  }

  const uint64_t seed_;
  uint64_t runs_ = 0;  // without a counter: the stream; runs of one net never overlap
};

// dX = dY * mask / (1 - ratio); with is_test=1, dX = dY (no mask needed).
class DropoutGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& dy = Input(0);
    const double ratio = DropoutRatio(args());
    if (DropoutIsTest(args())) {
      DispatchFloat(dy.dtype(), InputDesc(0), [](auto) {});
      Tensor* dx = Output(0);
      if (dx != &dy) dx->ShareData(dy);
      return;
    }
    CheckDropoutGradientHasMask(static_cast<size_t>(InputSize()));
    const Tensor& mask = Input(1);
    CheckDropoutMask({mask.dims(), mask.dtype()}, InputDesc(1), {dy.dims(), dy.dtype()}, InputDesc(0));
    DispatchFloat(dy.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* dyp = dy.data<T>();  // before Output: dX may be dY (in place)
      const uint8_t* mp = mask.data<uint8_t>();
      const int64_t n = dy.numel();
      T* dxp = Output(0, dy.dims(), dy.dtype())->template mutable_data<T>();
      const T scale = static_cast<T>(1.0 / (1.0 - ratio));
      for (int64_t i = 0; i < n; ++i) dxp[i] = DropoutGradElement(dyp[i], mp[i], scale);
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
      CheckDropoutOutputs(DropoutIsTest(args), op.outputs.size(), StrCat("Y '", op.outputs[0], "'"));
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
      if (!DropoutIsTest(args)) {
        CheckDropoutGradientHasMask(in.size());
        CheckDropoutMask(in[1], StrCat("mask '", op.inputs[1], "'"), in[0], StrCat("dY '", op.inputs[0], "'"));
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
    if (DropoutIsTest(args)) return {MakeOp("DropoutGradient", {GO(0)}, {GI(0)}, std::move(gargs))};
    DP_ENFORCE_CODE(NumOutputs() > 1, Code::kInvalidNet, label(),
                    ": in training Dropout needs output 1 'mask' for its gradient");
    return {MakeOp("DropoutGradient", {GO(0), O(1)}, {GI(0)}, std::move(gargs))};
  }
};

}  // namespace

DP_REGISTER_GRADIENT(Dropout, DropoutGradientMaker);

}  // namespace dp
