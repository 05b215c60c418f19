// MaxPool and AveragePool (2-D, NCHW) and their gradients on the CPU.
//
//   MaxPool:              X [N, C, H, W] -> Y [N, C, OH, OW], the maximum of each window
//   AveragePool:          X -> Y, the mean of each window
//   MaxPoolGradient:      X, Y, dY -> dX
//   AveragePoolGradient:  X, dY -> dX
//
// Windows are clipped to X: pads never win a max, and AveragePool divides by
// the number of elements of X in the window (count_include_pad = 0, the
// default) or by kh * kw (1; the window always lies within the padded input).
// Pads must be smaller than the kernel, so every window holds an element of X.
//
// MaxPool ties: the first maximum in the window's scan order (rows top to
// bottom, each left to right) wins, and MaxPoolGradient routes dY to that same
// element (PoolWindowArgMax on X; its value is the forward's PoolWindowMax). A NaN in
// a window makes Y NaN, and the first NaN takes the gradient.
#include <algorithm>
#include <vector>

#include "core/parallel_for.h"
#include "ops/gradient_registry.h"
#include "ops/cpu/conv_utils.h"
#include "ops/math/pool_geometry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

using conv::PoolShape;

using math::PoolWindow;

// Window bounds per output row and column, clipped to X (ops/math/pool_geometry.h):
// output (oh, ow) reads rows [h0[oh], h1[oh]) and columns [w0[ow], w1[ow]).
// Kept in the op between runs.
struct Spans {
  std::vector<int64_t> h0, h1, w0, w1;
  int64_t full = 1;  // kh * kw

  // Call once Y (forward) or dY (gradient) exists: the spans are then no
  // larger than a tensor already in memory. An empty Y needs none (its other
  // dims may be huge).
  void Build(const PoolShape& s) {
    const bool empty = NumElements(s.y) == 0;
    Axis(empty ? 0 : s.oh, s.win.kh, s.win.sh, s.win.pt, s.h, h0, h1);
    Axis(empty ? 0 : s.ow, s.win.kw, s.win.sw, s.win.pl, s.w, w0, w1);
    if (__builtin_mul_overflow(s.win.kh, s.win.kw, &full))
      DP_THROW(Code::kShape, "a ", s.win.kh, "x", s.win.kw, " pooling window holds more elements than int64 can count");
  }
  // Values an average divides by: the whole window, or its part inside the plane.
  int64_t Count(const PoolWindow& w, bool include_pad) const { return math::PoolDivisor(w, include_pad, full); }
  // f(p, o, window) for every plane p (of N * C) and output o (of oh * ow) in
  // that plane, in memory order within a plane. Planes are split across the
  // op's threads (core/parallel_for.h): f may only write plane p's outputs.
  template <typename F>
  void ForEachWindow(const PoolShape& s, F&& f) const {
    if (h0.empty() || w0.empty()) return;
    // At least ~32k window elements per part: less costs more to hand out.
    const int64_t per_plane = std::max<int64_t>(1, s.oh * s.ow * full);
    ParallelFor(s.n * s.c, std::max<int64_t>(1, (int64_t{1} << 15) / per_plane), [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p)
        for (int64_t oh = 0; oh < s.oh; ++oh)
          for (int64_t ow = 0; ow < s.ow; ++ow) f(p, oh * s.ow + ow, PoolWindow{h0[oh], h1[oh], w0[ow], w1[ow]});
    });
  }

 private:
  static void Axis(int64_t out, int64_t k, int64_t stride, int64_t pad, int64_t in, std::vector<int64_t>& lo,
                   std::vector<int64_t>& hi) {
    lo.resize(static_cast<size_t>(out));
    hi.resize(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) math::PoolAxisBounds(o, k, stride, pad, in, &lo[o], &hi[o]);
  }
};

class MaxPoolOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const PoolShape s = conv::ComputePoolShape(def(), args(), x.dims());
    const Spans& sp = spans_;
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      T* yp = Output(0, s.y, x.dtype())->template mutable_data<T>();
      spans_.Build(s);
      sp.ForEachWindow(s, [&](int64_t p, int64_t o, const PoolWindow& w) {
        yp[p * s.oh * s.ow + o] = math::PoolWindowMax(xp + p * s.h * s.w, s.w, w);
      });
    });
  }

  Spans spans_;
};

class MaxPoolGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& y = Input(1);
    const Tensor& dy = Input(2);
    CheckSameDtype(x, InputDesc(0), y, InputDesc(1));
    CheckSameDtype(x, InputDesc(0), dy, InputDesc(2));
    const PoolShape s = conv::ComputePoolShape(def(), args(), x.dims());
    conv::CheckLikeY(def(), 1, "Y", y.dims(), s, x.dims());
    conv::CheckLikeY(def(), 2, "dY", dy.dims(), s, x.dims());
    spans_.Build(s);
    const Spans& sp = spans_;
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* dyp = dy.data<T>();
      T* dxp = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      std::fill(dxp, dxp + x.numel(), T(0));
      sp.ForEachWindow(s, [&](int64_t p, int64_t o, const PoolWindow& w) {
        const int64_t plane = p * s.h * s.w;
        dxp[plane + math::PoolWindowArgMax(xp + plane, s.w, w)] += dyp[p * s.oh * s.ow + o];
      });
    });
  }

  Spans spans_;
};

class AveragePoolOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const PoolShape s = conv::ComputePoolShape(def(), args(), x.dims());
    const bool include_pad = args().Int("count_include_pad", 0) != 0;
    const Spans& sp = spans_;
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      T* yp = Output(0, s.y, x.dtype())->template mutable_data<T>();
      spans_.Build(s);
      sp.ForEachWindow(s, [&](int64_t p, int64_t o, const PoolWindow& w) {
        const T acc = math::PoolWindowSum(xp + p * s.h * s.w, s.w, w);
        yp[p * s.oh * s.ow + o] = acc / static_cast<T>(sp.Count(w, include_pad));
      });
    });
  }

  Spans spans_;
};

class AveragePoolGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& dy = Input(1);
    CheckSameDtype(x, InputDesc(0), dy, InputDesc(1));
    const PoolShape s = conv::ComputePoolShape(def(), args(), x.dims());
    conv::CheckLikeY(def(), 1, "dY", dy.dims(), s, x.dims());
    const bool include_pad = args().Int("count_include_pad", 0) != 0;
    spans_.Build(s);
    const Spans& sp = spans_;
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* dyp = dy.data<T>();
      T* dxp = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      std::fill(dxp, dxp + x.numel(), T(0));
      sp.ForEachWindow(s, [&](int64_t p, int64_t o, const PoolWindow& w) {
        T* dplane = dxp + p * s.h * s.w;
        const T g = dyp[p * s.oh * s.ow + o] / static_cast<T>(sp.Count(w, include_pad));
        for (int64_t ih = w.h0; ih < w.h1; ++ih)
          for (int64_t iw = w.w0; iw < w.w1; ++iw) dplane[ih * s.w + iw] += g;
      });
    });
  }

  Spans spans_;
};

// Shape inference: every input shares X's dtype; Y / dY inputs have the pooled dims.
std::vector<TensorInfo> InferPool(const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
  conv::CheckInferDtypes(op, in);
  PoolShape s = conv::ComputePoolShape(op, args, in[0].dims);
  return {{s.y, in[0].dtype}};
}

// Gradient ops: inputs after X are Y-shaped (Y, dY); dX is X-shaped.
std::vector<TensorInfo> InferPoolGrad(const OperatorDef& op, const ArgReader& args,
                                      const std::vector<TensorInfo>& in) {
  conv::CheckInferDtypes(op, in);
  PoolShape s = conv::ComputePoolShape(op, args, in[0].dims);
  for (size_t i = 1; i < in.size(); ++i)
    conv::CheckLikeY(op, i, i + 1 == in.size() ? "dY" : "Y", in[i].dims, s, in[0].dims);
  return {in[0]};
}

#define DP_POOL_ARGS                                                                                \
  DP_CONV_WINDOW_SCHEMA_ARGS                                                                        \
      .Arg("kernel", ArgKind::kInt, ArgDefault::Described("none: required unless global_pooling is 1"), \
           "window size (both axes), or kernel_h and kernel_w")                                         \
      .Arg("global_pooling", ArgKind::kInt, 0,                                                          \
           "1: the window is the whole plane [H, W] (no kernel, stride or pad)")

DP_OPERATOR_SCHEMA(MaxPool)
    .NumInputs(1)
    .NumOutputs(1)
    .Inputs({"X"})
    .Outputs({"Y"})
    DP_POOL_ARGS
    .ShapeInference(InferPool)
    .Doc("Max pooling, NCHW; ties go to the first maximum in scan order.");

DP_OPERATOR_SCHEMA(MaxPoolGradient)
    .NumInputs(3)
    .NumOutputs(1)
    .Inputs({"X", "Y", "dY"})
    .Outputs({"dX"})
    DP_POOL_ARGS
    .ShapeInference(InferPoolGrad)
    .Doc("Gradient of MaxPool: dY goes to the element that won each window (first maximum in scan order).");

DP_OPERATOR_SCHEMA(AveragePool)
    .NumInputs(1)
    .NumOutputs(1)
    .Inputs({"X"})
    .Outputs({"Y"})
    DP_POOL_ARGS
    .Arg("count_include_pad", ArgKind::kInt, 0,
         "1: divide by kh * kw, pads included; 0: by the number of elements of X in the window")
    .ShapeInference(InferPool)
    .Doc("Average pooling, NCHW.");

DP_OPERATOR_SCHEMA(AveragePoolGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .Inputs({"X", "dY"})
    .Outputs({"dX"})
    DP_POOL_ARGS
    .Arg("count_include_pad", ArgKind::kInt, 0, "as AveragePool")
    .ShapeInference(InferPoolGrad)
    .Doc("Gradient of AveragePool: each dY spread evenly over its window (divided as the forward op).");

#undef DP_POOL_ARGS

DP_REGISTER_CPU_OPERATOR(MaxPool, MaxPoolOp);
DP_REGISTER_CPU_OPERATOR(MaxPoolGradient, MaxPoolGradientOp);
DP_REGISTER_CPU_OPERATOR(AveragePool, AveragePoolOp);
DP_REGISTER_CPU_OPERATOR(AveragePoolGradient, AveragePoolGradientOp);

}  // namespace

DP_SIMPLE_GRADIENT(MaxPool, {
  if (!NeedsGI(0)) return {};
  return {MakeOp("MaxPoolGradient", {I(0), O(0), GO(0)}, {GI(0)}, Args())};
});
DP_SIMPLE_GRADIENT(AveragePool, {
  if (!NeedsGI(0)) return {};
  return {MakeOp("AveragePoolGradient", {I(0), GO(0)}, {GI(0)}, Args())};
});

}  // namespace dp
