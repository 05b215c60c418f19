// Elementwise arithmetic: Add, Sub, Mul and Div (NumPy broadcasting), Sum of
// N inputs of one shape, Scale by a constant. All may write in place of
// input 0; large tensors are split across the op's threads (each element is
// computed alone, so the split changes no bit). SumReduceLike sums a
// broadcast gradient back to an input's shape.
#include <algorithm>
#include <limits>

#include "core/parallel_for.h"
#include "ops/gradient_registry.h"
#include "ops/math/binary.h"
#include "ops/math/broadcast.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

// fn(lo, hi) over parts of [0, n) on the op's threads; parts start at
// multiples of 16 elements (whole cache lines of floats).
template <typename F>
void ForElements(int64_t n, F&& fn) {
  ParallelForChunks(n, ParallelChunks(n, kElementwiseGrain), 16, [&](int, int64_t lo, int64_t hi) { fn(lo, hi); });
}

template <typename T, typename F>
void BinaryBroadcast(const T* a, const Dims& ad, const T* b, const Dims& bd, T* y, const Dims& yd, F f) {
  const int64_t n = NumElements(yd);
  // Y may alias A or B (in place), always at the same index.
  if (ad == yd && bd == yd) {
    ForElements(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) y[i] = f(a[i], b[i]);
    });
    return;
  }
  if (ad == yd && NumElements(bd) == 1) {
    const T bv = b[0];
    ForElements(n, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) y[i] = f(a[i], bv);
    });
    return;
  }
  // General case: walk the output with a multi-index over the collapsed
  // dims (the CUDA kernel's, ops/math/broadcast.h); the innermost dim is a
  // tight loop with per-operand strides.
  const math::CollapsedLayout layout = math::CollapseBroadcast(ad, bd, yd);
  const Dims& dims = layout.dims;
  const std::vector<int64_t>& sa = layout.strides[0];
  const std::vector<int64_t>& sb = layout.strides[1];
  const size_t r = dims.size();
  if (r == 0) {  // every dim has size 1
    y[0] = f(a[0], b[0]);
    return;
  }
  const int64_t inner = dims[r - 1];
  const int64_t ia = sa[r - 1], ib = sb[r - 1];
  const int64_t rows = inner > 0 ? n / inner : 0;
  // Parts of whole inner rows, each starting its multi-index at its first row.
  const int parts = ParallelChunks(n, kElementwiseGrain);
  ParallelForChunks(rows, parts, 1, [&](int, int64_t lo, int64_t hi) {
    std::vector<int64_t> idx(r, 0);
    int64_t oa = 0, ob = 0;
    for (int64_t rest = lo, d = static_cast<int64_t>(r) - 2; d >= 0; --d) {
      idx[static_cast<size_t>(d)] = rest % dims[static_cast<size_t>(d)];
      rest /= dims[static_cast<size_t>(d)];
      oa += idx[static_cast<size_t>(d)] * sa[static_cast<size_t>(d)];
      ob += idx[static_cast<size_t>(d)] * sb[static_cast<size_t>(d)];
    }
    for (int64_t row = lo; row < hi; ++row) {
      T* yr = y + row * inner;
      for (int64_t j = 0; j < inner; ++j) yr[j] = f(a[oa + j * ia], b[ob + j * ib]);
      for (size_t d = r - 1; d-- > 0;) {  // advance outer dims
        ++idx[d];
        oa += sa[d];
        ob += sb[d];
        if (idx[d] < dims[d]) break;
        oa -= sa[d] * dims[d];
        ob -= sb[d] * dims[d];
        idx[d] = 0;
      }
    }
  });
}

template <typename F>
class BinaryOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& a = Input(0);
    const Tensor& b = Input(1);
    DP_ENFORCE_CODE(a.dtype() == b.dtype(), Code::kDType, InputDesc(0), " is ", a.DebugString(), " but ",
                    InputDesc(1), " is ", b.DebugString());
    Dims yd = BroadcastDims(a.dims(), b.dims(), StrCat(InputDesc(0), " and ", InputDesc(1)));
    // In place with broadcasting, Y may alias A or B yet be larger, so that
    // Resize would free the input; hold the inputs then (not otherwise: a
    // held copy would force fresh storage for every in-place run).
    Tensor ka, kb;
    if (yd != a.dims() || yd != b.dims()) ka = a, kb = b;
    const Tensor& ra = ka.defined() ? ka : a;
    const Tensor& rb = kb.defined() ? kb : b;
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* ap = ra.data<T>();
      const T* bp = rb.data<T>();
      Dims ad = ra.dims(), bd = rb.dims();
      T* y = Output(0, yd, a.dtype())->template mutable_data<T>();
      BinaryBroadcast(ap, ad, bp, bd, y, yd, F{});
    };
    if constexpr (F::kIntegers)
      DispatchNumeric(a.dtype(), InputDesc(0), run);
    else
      DispatchFloat(a.dtype(), InputDesc(0), run);
  }
};

// kIntegers: whether int32 and int64 tensors are accepted besides floats;
// the arithmetic is ops/math/binary.h's, as on CUDA.
template <math::BinaryOp kOp, bool kInts>
struct BinaryFn {
  static constexpr bool kIntegers = kInts;
  template <typename T> T operator()(T x, T y) const { return math::ApplyBinary<kOp>(x, y); }
};
using AddFn = BinaryFn<math::BinaryOp::kAdd, true>;
using SubFn = BinaryFn<math::BinaryOp::kSub, true>;
using MulFn = BinaryFn<math::BinaryOp::kMul, true>;
// Floats only: IEEE division, where integer division by zero would be undefined.
using DivFn = BinaryFn<math::BinaryOp::kDiv, false>;

class SumOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& first = Input(0);
    std::vector<const Tensor*> in;  // same shape, so in-place (Y = input 0) is safe
    for (int i = 0; i < InputSize(); ++i) {
      const Tensor& t = Input(i);
      DP_ENFORCE_CODE(t.dtype() == first.dtype(), Code::kDType, InputDesc(i), " is ", t.DebugString(), " but ",
                      InputDesc(0), " is ", first.DebugString());
      DP_ENFORCE_CODE(t.dims() == first.dims(), Code::kShape, InputDesc(i), " has shape ", DimsString(t.dims()),
                      " but ", InputDesc(0), " has ", DimsString(first.dims()));
      in.push_back(&t);
    }
    DispatchNumeric(first.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      std::vector<const T*> x;
      for (const Tensor* t : in) x.push_back(t->data<T>());
      const int64_t n = first.numel();
      T* y = Output(0, first.dims(), first.dtype())->template mutable_data<T>();
      const T* x0 = x[0];
      // Each part sums its elements input by input, in input order.
      ForElements(n, [&](int64_t lo, int64_t hi) {
        if (x.size() == 1) {
          if (y != x0) std::copy(x0 + lo, x0 + hi, y + lo);
          return;
        }
        const T* x1 = x[1];
        for (int64_t k = lo; k < hi; ++k) y[k] = x0[k] + x1[k];
        for (size_t i = 2; i < x.size(); ++i) {
          const T* xi = x[i];
          for (int64_t k = lo; k < hi; ++k) y[k] += xi[k];
        }
      });
    });
  }
};

class ScaleOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    double scale = args().Float("scale", 1.0);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      T* yp = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      const T s = static_cast<T>(scale);
      ForElements(x.numel(), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) yp[i] = xp[i] * s;
      });
    });
  }
};

// Y (like's shape) = X summed over the dims along which like was broadcast
// to X's shape. Same shapes: Y shares X's storage (no copy).
class SumReduceLikeOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor x = Input(0);  // held: Y may be the same blob
    const Dims yd = Input(1).dims();
    DP_ENFORCE_CODE(BroadcastDims(yd, x.dims(), StrCat(InputDesc(1), " and ", InputDesc(0))) == x.dims(), Code::kShape,
                    InputDesc(1), " ", DimsString(yd), " does not broadcast to ", InputDesc(0), " ",
                    DimsString(x.dims()));
    if (yd == x.dims()) {
      Output(0)->ShareData(x);
      return;
    }
    DispatchNumeric(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      T* y = Output(0, yd, x.dtype())->template mutable_data<T>();
      std::fill(y, y + NumElements(yd), T(0));
      const Dims& xd = x.dims();
      const std::vector<int64_t> sy = math::BroadcastStrides(yd, xd);
      const size_t r = xd.size();
      const int64_t n = x.numel(), inner = r ? xd[r - 1] : 1, iy = r ? sy[r - 1] : 0;
      std::vector<int64_t> idx(r, 0);
      int64_t oy = 0;
      for (int64_t base = 0; base < n; base += inner) {
        if (iy == 0) {
          T acc = 0;
          for (int64_t j = 0; j < inner; ++j) acc += xp[base + j];
          y[oy] += acc;
        } else {
          for (int64_t j = 0; j < inner; ++j) y[oy + j * iy] += xp[base + j];
        }
        for (size_t d = r - 1; d-- > 0;) {
          ++idx[d];
          oy += sy[d];
          if (idx[d] < xd[d]) break;
          oy -= sy[d] * xd[d];
          idx[d] = 0;
        }
      }
    });
  }
};

std::vector<TensorInfo> InferBroadcast(const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
  DP_ENFORCE_CODE(in[0].dtype == in[1].dtype, Code::kDType, "inputs '", op.inputs[0], "' (", DTypeName(in[0].dtype),
                  ") and '", op.inputs[1], "' (", DTypeName(in[1].dtype), ") differ in dtype");
  return {{BroadcastDims(in[0].dims, in[1].dims, StrCat("inputs '", op.inputs[0], "' and '", op.inputs[1], "'")),
           in[0].dtype}};
}

DP_OPERATOR_SCHEMA(Add)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{0, 0}, {1, 0}})
    .Inputs({"A", "B"})
    .Outputs({"C"})
    .ShapeInference(InferBroadcast)
    .Doc("C = A + B with NumPy broadcasting.");

DP_OPERATOR_SCHEMA(Sub)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{0, 0}, {1, 0}})
    .Inputs({"A", "B"})
    .Outputs({"C"})
    .ShapeInference(InferBroadcast)
    .Doc("C = A - B with NumPy broadcasting.");

DP_OPERATOR_SCHEMA(Mul)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{0, 0}, {1, 0}})
    .Inputs({"A", "B"})
    .Outputs({"C"})
    .ShapeInference(InferBroadcast)
    .Doc("C = A * B with NumPy broadcasting.");

DP_OPERATOR_SCHEMA(Div)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{0, 0}, {1, 0}})
    .Inputs({"A", "B"})
    .Outputs({"C"})
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      DispatchFloat(in[0].dtype, StrCat("A '", op.inputs[0], "'"), [](auto) {});
      return InferBroadcast(op, args, in);
    })
    .Doc("C = A / B with NumPy broadcasting; float32 or float64, IEEE division (x / 0 is +-inf, 0 / 0 NaN).");

DP_OPERATOR_SCHEMA(Sum)
    .NumInputs(1, std::numeric_limits<int>::max())
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Outputs({"Y"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      for (size_t i = 1; i < in.size(); ++i) {
        DP_ENFORCE_CODE(in[i].dtype == in[0].dtype, Code::kDType, "input '", op.inputs[i], "' is ",
                        DTypeName(in[i].dtype), " but input '", op.inputs[0], "' is ", DTypeName(in[0].dtype));
        DP_ENFORCE_CODE(in[i].dims == in[0].dims, Code::kShape, "input '", op.inputs[i], "' has shape ",
                        DimsString(in[i].dims), " but input '", op.inputs[0], "' has ", DimsString(in[0].dims));
      }
      return std::vector<TensorInfo>{in[0]};
    })
    .Doc("Y = sum of all inputs (same shape and dtype).");

DP_OPERATOR_SCHEMA(Scale)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .Arg("scale", ArgKind::kFloat, 1.0, "the factor")
    .IdenticalTypeAndShape()
    .Doc("Y = scale * X.");

DP_OPERATOR_SCHEMA(SumReduceLike)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X", "like"})
    .Outputs({"Y"})
    .ShapeInference([](const OperatorDef&, const ArgReader&, const std::vector<TensorInfo>& in) {
      return std::vector<TensorInfo>{{in[1].dims, in[0].dtype}};
    })
    .Doc("Sums X over the dims along which `like` broadcasts to X's shape (gradients of broadcasting ops).");

DP_REGISTER_CPU_OPERATOR(Add, BinaryOp<AddFn>);
DP_REGISTER_CPU_OPERATOR(SumReduceLike, SumReduceLikeOp);
DP_REGISTER_CPU_OPERATOR(Sub, BinaryOp<SubFn>);
DP_REGISTER_CPU_OPERATOR(Mul, BinaryOp<MulFn>);
DP_REGISTER_CPU_OPERATOR(Div, BinaryOp<DivFn>);
DP_REGISTER_CPU_OPERATOR(Sum, SumOp);
DP_REGISTER_CPU_OPERATOR(Scale, ScaleOp);

// Gradients. Broadcast inputs get their gradient summed back to their shape
// (SumReduceLike reads the forward input only for its shape).
struct AddGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    std::vector<OperatorDef> ops;
    for (int i = 0; i < 2; ++i)
      if (NeedsGI(i)) ops.push_back(MakeOp("SumReduceLike", {GO(0), I(i)}, {GI(i)}));
    return ops;
  }
};
DP_REGISTER_GRADIENT(Add, AddGradientMaker);

struct MulGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    std::vector<OperatorDef> ops;
    for (int i = 0; i < 2; ++i) {
      if (!NeedsGI(i)) continue;
      std::string full = GI(i) + "_unreduced";
      ops.push_back(MakeOp("Mul", {GO(0), I(1 - i)}, {full}));
      ops.push_back(MakeOp("SumReduceLike", {full, I(i)}, {GI(i)}));
    }
    return ops;
  }
};
DP_REGISTER_GRADIENT(Mul, MulGradientMaker);

// dA = dC, dB = -dC, each summed back to its input's shape.
struct SubGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    std::vector<OperatorDef> ops;
    if (NeedsGI(0)) ops.push_back(MakeOp("SumReduceLike", {GO(0), I(0)}, {GI(0)}));
    if (NeedsGI(1)) {
      std::string negated = GI(1) + "_unreduced";
      ops.push_back(MakeOp("Scale", {GO(0)}, {negated}, {MakeArg("scale", -1.0)}));
      ops.push_back(MakeOp("SumReduceLike", {negated, I(1)}, {GI(1)}));
    }
    return ops;
  }
};
DP_REGISTER_GRADIENT(Sub, SubGradientMaker);

// C = A / B: dA = dC / B and dB = -(dC / B) * C, each summed back to its
// input's shape. Reads B and the output C, not A's values (only its shape).
struct DivGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    std::vector<OperatorDef> ops;
    std::string quotient;  // dC / B, in the broadcast shape
    if (NeedsGI(0)) {
      quotient = GI(0) + "_unreduced";
      ops.push_back(MakeOp("Div", {GO(0), I(1)}, {quotient}));
      ops.push_back(MakeOp("SumReduceLike", {quotient, I(0)}, {GI(0)}));
    }
    if (NeedsGI(1)) {
      if (quotient.empty()) {
        quotient = GI(1) + "_quotient";
        ops.push_back(MakeOp("Div", {GO(0), I(1)}, {quotient}));
      }
      std::string product = GI(1) + "_product", full = GI(1) + "_unreduced";
      ops.push_back(MakeOp("Mul", {quotient, O(0)}, {product}));
      ops.push_back(MakeOp("Scale", {product}, {full}, {MakeArg("scale", -1.0)}));
      ops.push_back(MakeOp("SumReduceLike", {full, I(1)}, {GI(1)}));
    }
    return ops;
  }
};
DP_REGISTER_GRADIENT(Div, DivGradientMaker);

struct SumGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    std::vector<OperatorDef> ops;
    for (int i = 0; i < NumInputs(); ++i)
      if (NeedsGI(i)) ops.push_back(MakeOp("Alias", {GO(0)}, {GI(i)}));
    return ops;
  }
};
DP_REGISTER_GRADIENT(Sum, SumGradientMaker);

DP_SIMPLE_GRADIENT(Scale, { return {MakeOp("Scale", {GO(0)}, {GI(0)}, Args())}; });

}  // namespace
}  // namespace dp
