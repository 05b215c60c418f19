// Window geometry shared by Conv and the pooling operators (NCHW, 2-D): the
// argument rules (kernel / stride / pad / dilation, each as one value or per
// side) and the output-size rule. Kernels and shape inference call the same
// functions, so they cannot disagree.
//
// Output extent along one axis (floor, as Caffe2 and PyTorch's default):
//   out = (in + pad_begin + pad_end - (dilation * (kernel - 1) + 1)) / stride + 1
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "graph/net_def.h"
#include "ops/math/conv_geometry.h"
#include "ops/math/pool_geometry.h"
#include "ops/op_schema.h"
#include "ops/op_utils.h"

// Schema documentation of the window arguments common to Conv and pooling,
// as a chain of OpSchema calls: DP_OPERATOR_SCHEMA(X).NumInputs(1) DP_CONV_WINDOW_SCHEMA_ARGS ...
// ("kernel" itself is documented per op).
#define DP_CONV_WINDOW_SCHEMA_ARGS                                                                                    \
  .Arg("kernel_h", ::dp::ArgKind::kInt, ::dp::ArgDefault::Described("kernel"),                                      \
       "kernel height (with kernel_w, instead of kernel)")                                                            \
      .Arg("kernel_w", ::dp::ArgKind::kInt, ::dp::ArgDefault::Described("kernel"),                                    \
           "kernel width (with kernel_h, instead of kernel)")                                                         \
      .Arg("stride", ::dp::ArgKind::kInt, 1, "stride (both axes), or stride_h / stride_w")                            \
      .Arg("stride_h", ::dp::ArgKind::kInt, ::dp::ArgDefault::Described("stride, else 1"), "vertical stride")         \
      .Arg("stride_w", ::dp::ArgKind::kInt, ::dp::ArgDefault::Described("stride, else 1"), "horizontal stride")       \
      .Arg("pad", ::dp::ArgKind::kInt, 0, "zero padding on every side, or pad_t / pad_l / pad_b / pad_r")             \
      .Arg("pad_t", ::dp::ArgKind::kInt, ::dp::ArgDefault::Described("pad, else 0"), "top padding")                   \
      .Arg("pad_l", ::dp::ArgKind::kInt, ::dp::ArgDefault::Described("pad, else 0"), "left padding")                  \
      .Arg("pad_b", ::dp::ArgKind::kInt, ::dp::ArgDefault::Described("pad, else 0"), "bottom padding")                \
      .Arg("pad_r", ::dp::ArgKind::kInt, ::dp::ArgDefault::Described("pad, else 0"), "right padding")                 \
      .Arg("order", ::dp::ArgKind::kString, "NCHW", "layout; only \"NCHW\"")

namespace dp::conv {

struct Window {
  int64_t kh = 0, kw = 0;                  // kernel
  int64_t sh = 1, sw = 1;                  // stride
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right
  int64_t dh = 1, dw = 1;                  // dilation
};

// Sizes from arguments and dims (a zero-element tensor may have any other
// dim) are checked: their sums and products must not overflow.
inline int64_t DilatedExtent(int64_t k, int64_t d) {
  int64_t e;
  if (__builtin_mul_overflow(d, k - 1, &e) || __builtin_add_overflow(e, 1, &e))
    DP_THROW(Code::kShape, "kernel ", k, " with dilation ", d, " spans more than int64 can count");
  return e;
}

inline int64_t Padded(int64_t in, int64_t p0, int64_t p1) {
  int64_t out;
  if (__builtin_add_overflow(in, p0, &out) || __builtin_add_overflow(out, p1, &out))
    DP_THROW(Code::kShape, "size ", in, " padded by ", p0, " and ", p1, " is more than int64 can count");
  return out;
}

// a * b * ...; kShape naming `what` when it does not fit in int64.
inline int64_t CheckedProduct(std::initializer_list<int64_t> factors, const char* what) {
  int64_t p = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(p, f, &p)) DP_THROW(Code::kShape, what, " is more than int64 can count");
  return p;
}

// The one output-size rule; the caller has checked that the dilated kernel
// fits in the padded input (so the result is >= 1).
inline int64_t OutSize(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) {
  return math::ConvOutputExtent(Padded(in, p0, p1), DilatedExtent(k, d), s);
}

// `name` (both axes) or `name_h` / `name_w`. Giving both forms is an error;
// without a default (kernel), `name_h` and `name_w` go together. nullopt when
// nothing is given and there is no default.
inline std::optional<std::pair<int64_t, int64_t>> ReadHW(const ArgReader& a, const std::string& name,
                                                           std::optional<int64_t> fallback) {
  const bool one = a.Has(name), h = a.Has(name + "_h"), w = a.Has(name + "_w");
  DP_ENFORCE_CODE(!(one && (h || w)), Code::kInvalidArgument, "give either '", name, "' or '", name, "_h'/'", name,
                  "_w', not both");
  if (one) {
    int64_t v = a.Int(name);
    return std::make_pair(v, v);
  }
  if (!h && !w) {
    if (!fallback) return std::nullopt;
    return std::make_pair(*fallback, *fallback);
  }
  DP_ENFORCE_CODE(fallback || (h && w), Code::kInvalidArgument, "'", name, "_h' and '", name,
                  "_w' must be given together");
  return std::make_pair(a.Int(name + "_h", fallback), a.Int(name + "_w", fallback));
}

// Reads the window arguments except the kernel, which is returned separately
// (nullopt when absent: Conv then takes it from W). Checks signs.
inline Window ReadWindow(const ArgReader& a, std::optional<std::pair<int64_t, int64_t>>* kernel, bool dilation) {
  if (a.Has("order")) {
    std::string order = a.String("order");
    DP_ENFORCE_CODE(order == "NCHW", Code::kInvalidArgument, "only order 'NCHW' is supported, got '", order, "'");
  }
  Window win;
  *kernel = ReadHW(a, "kernel", std::nullopt);
  if (*kernel) {
    win.kh = (*kernel)->first;
    win.kw = (*kernel)->second;
    DP_ENFORCE_CODE(win.kh > 0 && win.kw > 0, Code::kInvalidArgument, "kernel must be positive, got ", win.kh, "x",
                    win.kw);
  }
  auto s = *ReadHW(a, "stride", 1);
  win.sh = s.first;
  win.sw = s.second;
  DP_ENFORCE_CODE(win.sh > 0 && win.sw > 0, Code::kInvalidArgument, "stride must be positive, got ", win.sh, "x",
                  win.sw);
  if (dilation) {
    auto d = *ReadHW(a, "dilation", 1);
    win.dh = d.first;
    win.dw = d.second;
    DP_ENFORCE_CODE(win.dh > 0 && win.dw > 0, Code::kInvalidArgument, "dilation must be positive, got ", win.dh, "x",
                    win.dw);
  } else {
    DP_ENFORCE_CODE(!a.Has("dilation") && !a.Has("dilation_h") && !a.Has("dilation_w"), Code::kInvalidArgument,
                    "pooling takes no dilation");
  }
  const bool one = a.Has("pad");
  const bool sides = a.Has("pad_t") || a.Has("pad_l") || a.Has("pad_b") || a.Has("pad_r");
  DP_ENFORCE_CODE(!(one && sides), Code::kInvalidArgument,
                  "give either 'pad' or 'pad_t'/'pad_l'/'pad_b'/'pad_r', not both");
  if (one) {
    win.pt = win.pl = win.pb = win.pr = a.Int("pad");
  } else {
    win.pt = a.Int("pad_t", 0);
    win.pl = a.Int("pad_l", 0);
    win.pb = a.Int("pad_b", 0);
    win.pr = a.Int("pad_r", 0);
  }
  DP_ENFORCE_CODE(win.pt >= 0 && win.pl >= 0 && win.pb >= 0 && win.pr >= 0, Code::kInvalidArgument,
                  "pads must not be negative, got top ", win.pt, ", left ", win.pl, ", bottom ", win.pb, ", right ",
                  win.pr);
  return win;
}

inline std::string BlobDesc(const char* role, const OperatorDef& op, size_t i, const Dims& dims) {
  return StrCat(role, " '", op.inputs[i], "' ", DimsString(dims));
}

// Conv: X [N, C, H, W], W [M, C/group, kh, kw], optional b [M] -> Y [N, M, OH, OW].
struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // X
  int64_t m = 0, group = 1;            // filters, groups
  int64_t cg = 0, mg = 0;              // channels and filters per group
  Window win;
  int64_t oh = 0, ow = 0;
  Dims y;
  int64_t k() const { return cg * win.kh * win.kw; }  // im2col rows per group
  int64_t in_hw() const { return h * w; }
  int64_t out_hw() const { return oh * ow; }
  // One image's geometry, for the shared im2col math (ops/math/conv_geometry.h).
  math::ConvGeometry Geometry() const {
    math::ConvGeometry g;
    g.channels = c;
    g.height = h;
    g.width = w;
    g.kernel_h = win.kh;
    g.kernel_w = win.kw;
    g.stride_h = win.sh;
    g.stride_w = win.sw;
    g.pad_t = win.pt;
    g.pad_l = win.pl;
    g.dilation_h = win.dh;
    g.dilation_w = win.dw;
    g.out_h = oh;
    g.out_w = ow;
    return g;
  }
};

// `b` is null when the op has no bias. `op` names the blobs in messages.
inline ConvShape ComputeConvShape(const OperatorDef& op, const ArgReader& a, const Dims& x, const Dims& w,
                                  const Dims* b) {
  const std::string xn = BlobDesc("X", op, 0, x), wn = BlobDesc("W", op, 1, w);
  DP_ENFORCE_CODE(x.size() == 4, Code::kShape, xn, " must be 4-D [N, C, H, W]");
  DP_ENFORCE_CODE(w.size() == 4, Code::kShape, wn, " must be 4-D [M, C/group, kh, kw]");
  ConvShape s;
  std::optional<std::pair<int64_t, int64_t>> kernel;
  s.win = ReadWindow(a, &kernel, true);
  s.group = a.Int("group", 1);
  DP_ENFORCE_CODE(s.group >= 1, Code::kInvalidArgument, "group must be positive, got ", s.group);
  s.n = x[0];
  s.c = x[1];
  s.h = x[2];
  s.w = x[3];
  s.m = w[0];
  s.cg = w[1];
  DP_ENFORCE_CODE(s.cg * s.group == s.c, Code::kShape, xn, " has C = ", s.c, " channels but ", wn, " with group ",
                  s.group, " expects C = ", s.cg * s.group, " (W is [M, C/group, kh, kw])");
  DP_ENFORCE_CODE(s.m % s.group == 0, Code::kShape, wn, ": M = ", s.m, " filters are not divisible by group ",
                  s.group);
  s.mg = s.m / s.group;
  if (kernel) {
    DP_ENFORCE_CODE(s.win.kh == w[2] && s.win.kw == w[3], Code::kShape, "kernel ", s.win.kh, "x", s.win.kw,
                    " does not match ", wn);
  } else {
    s.win.kh = w[2];
    s.win.kw = w[3];
    DP_ENFORCE_CODE(s.win.kh > 0 && s.win.kw > 0, Code::kShape, wn, " has an empty kernel");
  }
  const Window& k = s.win;
  const int64_t eh = DilatedExtent(k.kh, k.dh), ew = DilatedExtent(k.kw, k.dw);
  DP_ENFORCE_CODE(eh <= Padded(s.h, k.pt, k.pb) && ew <= Padded(s.w, k.pl, k.pr), Code::kShape, "kernel ", k.kh,
                  "x", k.kw,
                  " (dilated extent ", eh, "x", ew, ") of ", wn, " is larger than ", xn, " padded to ",
                  Padded(s.h, k.pt, k.pb), "x", Padded(s.w, k.pl, k.pr));
  if (b != nullptr) {
    const std::string bn = BlobDesc("b", op, 2, *b);
    DP_ENFORCE_CODE(b->size() == 1 && (*b)[0] == s.m, Code::kShape, bn, " must be [M] with M = ", s.m,
                    " to match ", wn);
  }
  s.oh = OutSize(s.h, k.kh, k.sh, k.pt, k.pb, k.dh);
  s.ow = OutSize(s.w, k.kw, k.sw, k.pl, k.pr, k.dw);
  s.y = Dims{s.n, s.m, s.oh, s.ow};
  // Checked once here (with an empty X, W or Y the other dims may be
  // anything), so that k(), in_hw() and out_hw() cannot overflow later.
  CheckedProduct({s.c, s.h, s.w}, "C * H * W of X");
  // The GEMMs' sizes (BLAS takes ints), checked here so that inference rejects them too.
  BlasInt(CheckedProduct({s.cg, k.kh, k.kw}, "C/group * kh * kw"), "C/group * kh * kw");
  BlasInt(CheckedProduct({s.oh, s.ow}, "OH * OW"), "OH * OW");
  BlasInt(s.mg, "M/group");
  return s;
}

// MaxPool / AveragePool: X [N, C, H, W] -> Y [N, C, OH, OW].
struct PoolShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  Window win;
  int64_t oh = 0, ow = 0;
  Dims y;
  // The planes' geometry, for the shared pooling math (ops/math/pool_geometry.h).
  math::PoolGeometry Geometry(bool count_include_pad) const {
    math::PoolGeometry g;
    g.planes = n * c;
    g.height = h;
    g.width = w;
    g.out_h = oh;
    g.out_w = ow;
    g.kernel_h = win.kh;
    g.kernel_w = win.kw;
    g.stride_h = win.sh;
    g.stride_w = win.sw;
    g.pad_t = win.pt;
    g.pad_l = win.pl;
    g.count_include_pad = count_include_pad ? 1 : 0;
    return g;
  }
};

// Pads must be smaller than the kernel, so that every window holds at least
// one element of X. With global_pooling = 1 the kernel is [H, W] (stride 1,
// no pads; kernel, stride and pad arguments are then errors).
inline PoolShape ComputePoolShape(const OperatorDef& op, const ArgReader& a, const Dims& x) {
  const std::string xn = BlobDesc("X", op, 0, x);
  DP_ENFORCE_CODE(x.size() == 4, Code::kShape, xn, " must be 4-D [N, C, H, W]");
  PoolShape s;
  s.n = x[0];
  s.c = x[1];
  s.h = x[2];
  s.w = x[3];
  std::optional<std::pair<int64_t, int64_t>> kernel;
  s.win = ReadWindow(a, &kernel, false);
  if (a.Int("global_pooling", 0) != 0) {
    for (const char* n : {"kernel", "kernel_h", "kernel_w", "stride", "stride_h", "stride_w", "pad", "pad_t", "pad_l",
                          "pad_b", "pad_r"})
      DP_ENFORCE_CODE(!a.Has(n), Code::kInvalidArgument, "global_pooling takes no '", n, "' argument");
    s.win.kh = s.h;
    s.win.kw = s.w;
  } else {
    DP_ENFORCE_CODE(kernel.has_value(), Code::kInvalidArgument,
                    "pooling needs 'kernel' (or 'kernel_h' and 'kernel_w', or global_pooling = 1)");
  }
  // With H or W = 0 every padded window would hold no element: no max, no mean.
  DP_ENFORCE_CODE(s.h > 0 && s.w > 0, Code::kShape, xn, ": pooling needs H and W > 0");
  const Window& k = s.win;
  DP_ENFORCE_CODE(k.pt < k.kh && k.pb < k.kh && k.pl < k.kw && k.pr < k.kw, Code::kInvalidArgument,
                  "pads (top ", k.pt, ", left ", k.pl, ", bottom ", k.pb, ", right ", k.pr,
                  ") must be smaller than the kernel ", k.kh, "x", k.kw);
  DP_ENFORCE_CODE(k.kh <= Padded(s.h, k.pt, k.pb) && k.kw <= Padded(s.w, k.pl, k.pr), Code::kShape, "kernel ", k.kh,
                  "x", k.kw,
                  " is larger than ", xn, " padded to ", Padded(s.h, k.pt, k.pb), "x", Padded(s.w, k.pl, k.pr));
  s.oh = OutSize(s.h, k.kh, k.sh, k.pt, k.pb, 1);
  s.ow = OutSize(s.w, k.kw, k.sw, k.pl, k.pr, 1);
  s.y = Dims{s.n, s.c, s.oh, s.ow};
  return s;
}

// no_bias and the output count of a ConvGradient op: whether it writes db and dX.
struct ConvGradOutputs {
  bool db, dx;
};
inline ConvGradOutputs GradOutputs(const OperatorDef& op, const ArgReader& a) {
  const bool no_bias = a.Int("no_bias", 0) != 0;
  const int base = no_bias ? 1 : 2, n = static_cast<int>(op.outputs.size());
  DP_ENFORCE_CODE(n == base || n == base + 1, Code::kInvalidArgument, "with no_bias = ", no_bias ? 1 : 0,
                  " the outputs are dW", no_bias ? "" : ", db", " and optionally dX (", base, " or ", base + 1,
                  "), got ", n);
  return {!no_bias, n == base + 1};
}

// ConvGradient's shape: Conv's, with dY checked against Y.
inline ConvShape GradShape(const OperatorDef& op, const ArgReader& a, const Dims& x, const Dims& w, const Dims& dy) {
  ConvShape s = ComputeConvShape(op, a, x, w, nullptr);
  DP_ENFORCE_CODE(dy == s.y, Code::kShape, BlobDesc("dY", op, 2, dy), " must be ", DimsString(s.y),
                  ", the output of this convolution of X '", op.inputs[0], "' ", DimsString(x), " and W '",
                  op.inputs[1], "' ", DimsString(w));
  return s;
}

inline std::string PoolXDesc(const OperatorDef& op, const Dims& x) { return BlobDesc("X", op, 0, x); }

// A gradient op's input i (Y or dY) must have the forward output's dims.
inline void CheckLikeY(const OperatorDef& op, size_t i, const char* role, const Dims& d, const PoolShape& s,
                       const Dims& x) {
  DP_ENFORCE_CODE(d == s.y, Code::kShape, BlobDesc(role, op, i, d), " must be ", DimsString(s.y),
                  ", the pooled shape of ", PoolXDesc(op, x));
}

// Shape inference of Conv and the pools: every input has X's dtype, a float.
inline void CheckInferDtypes(const OperatorDef& op, const std::vector<TensorInfo>& in) {
  for (size_t i = 1; i < in.size(); ++i)
    DP_ENFORCE_CODE(in[i].dtype == in[0].dtype, Code::kDType, "input '", op.inputs[i], "' is ",
                    DTypeName(in[i].dtype), " but X '", op.inputs[0], "' is ", DTypeName(in[0].dtype),
                    "; they must share a dtype");
  DispatchFloat(in[0].dtype, StrCat("X '", op.inputs[0], "'"), [](auto) {});
}

}  // namespace dp::conv
