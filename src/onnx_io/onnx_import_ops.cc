// One converter per ONNX op that maps onto dp's ops (onnx_import.h says
// what a converter may do). Each also works out what it can of its outputs'
// dims, which later converters need (the rank under a Softmax's axis, the
// height and width under SAME padding or ceil_mode).
#include <algorithm>
#include <optional>
#include <tuple>

#include "onnx_io/onnx_import.h"
#include "onnx_io/onnx_tensor.h"

namespace dp::onnx_import {
namespace {

// Window sizes, strides, dilations and pads dp accepts from a model; beyond
// them a value is surely wrong, and the arithmetic on them stays in int64.
constexpr int64_t kMaxWindow = int64_t{1} << 31;
// Dims larger than this are treated as unknown (no arithmetic on them).
constexpr int64_t kMaxKnownDim = int64_t{1} << 40;

int64_t Rank(const Value& v) { return v.shape ? static_cast<int64_t>(v.shape->size()) : -1; }

// Dim i of v (negative counts from the back), kUnknownDim when not known.
int64_t DimOf(const Value& v, int64_t i) {
  const int64_t r = Rank(v);
  if (r < 0) return kUnknownDim;
  if (i < 0) i += r;
  if (i < 0 || i >= r) return kUnknownDim;
  const int64_t d = (*v.shape)[static_cast<size_t>(i)];
  return d >= 0 && d <= kMaxKnownDim ? d : kUnknownDim;
}

// NumPy broadcasting, as far as the dims are known.
Shape Broadcast(const Shape& a, const Shape& b) {
  if (!a || !b) return std::nullopt;
  const size_t r = std::max(a->size(), b->size());
  Dims out(r, kUnknownDim);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < a->size() ? (*a)[a->size() - 1 - i] : 1;
    const int64_t db = i < b->size() ? (*b)[b->size() - 1 - i] : 1;
    int64_t d = kUnknownDim;
    if (da == 1) d = db;
    else if (db == 1) d = da;
    else if (da == db) d = da;
    else if (da < 0 || db < 0) d = da < 0 ? db : da;
    out[r - 1 - i] = d;
  }
  return out;
}

// prod(dims[begin:end]), kUnknownDim when any of them is unknown.
int64_t KnownProduct(const Dims& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i] < 0 || dims[i] > kMaxKnownDim || __builtin_mul_overflow(p, dims[i], &p) || p > kMaxKnownDim)
      return kUnknownDim;
  }
  return p;
}

// An ONNX axis in [0, rank) (negative counts from the back); `end_ok`
// allows rank itself (Flatten).
int64_t CanonicalOnnxAxis(int64_t axis, int64_t rank, bool end_ok, const char* what) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  DP_ENFORCE_CODE(a >= 0 && (a < rank || (end_ok && a == rank)), Code::kInvalidNet, what, " ", axis,
                  " is out of range for rank ", rank);
  return a;
}

// A 1- or 0-D tensor's only element, as a double.
double ScalarOf(const Node& n, const Tensor& t, const char* role) {
  if (t.numel() != 1) n.Fail(role, " has ", t.numel(), " elements; dp needs one");
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[0];
    case DType::kFloat64: return t.data<double>()[0];
    case DType::kInt32: return t.data<int32_t>()[0];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[0]);
    case DType::kBool: return t.data<bool>()[0] ? 1 : 0;
    case DType::kUInt8: return t.data<uint8_t>()[0];
    default: n.Fail(role, " is ", DTypeName(t.dtype()));
  }
}

// A float tensor times s (a Gemm's alpha or beta folded into its constant),
// with dims `dims`.
Tensor ScaledCopy(const Node& n, const Tensor& t, double s, Dims dims) {
  Tensor out(std::move(dims), t.dtype());
  if (t.dtype() == DType::kFloat32) {
    for (int64_t i = 0; i < t.numel(); ++i) out.mutable_data<float>()[i] = static_cast<float>(s * t.data<float>()[i]);
  } else if (t.dtype() == DType::kFloat64) {
    for (int64_t i = 0; i < t.numel(); ++i) out.mutable_data<double>()[i] = s * t.data<double>()[i];
  } else {
    n.Fail("a ", DTypeName(t.dtype()), " Gemm operand");
  }
  return out;
}

// ---- elementwise ------------------------------------------------------------

void Unary(Node& n, const char* type) {
  const Value& x = n.In(0);
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef(type, {in}, {n.Out(0, x.dtype, x.shape)}));
}

void Binary(Node& n, const char* type) {
  const Value& a = n.In(0);
  const Value& b = n.In(1);
  const std::string x = n.Data(0), y = n.Data(1);
  n.Emit(MakeOperatorDef(type, {x, y}, {n.Out(0, a.dtype, Broadcast(a.shape, b.shape))}));
}

// Sum of any number of inputs, broadcast: a chain of Adds (dp's Sum wants
// equal shapes), in input order.
void ConvertSum(Node& n) {
  const int k = n.proto().input_size();
  DP_ENFORCE_CODE(k >= 1, Code::kInvalidNet, "Sum has no inputs");
  std::string acc = n.Data(0);
  DType dtype = n.In(0).dtype;
  Shape shape = n.In(0).shape;
  if (k == 1) {
    n.Emit(MakeOperatorDef("Alias", {acc}, {n.Out(0, dtype, shape)}));
    return;
  }
  for (int i = 1; i < k; ++i) {
    shape = Broadcast(shape, n.In(i).shape);
    const std::string term = n.Data(i);
    const std::string out = i == k - 1 ? n.Out(0, dtype, shape) : n.Temp(StrCat("partial", i));
    n.Emit(MakeOperatorDef("Add", {acc, term}, {out}));
    acc = out;
  }
}

void ConvertClip(Node& n) {
  std::optional<double> lo, hi;
  if (n.opset() < 11) {
    if (n.HasAttr("min")) lo = n.Float("min");
    if (n.HasAttr("max")) hi = n.Float("max");
  } else {
    if (n.Has(1)) lo = ScalarOf(n, n.RequireConst(1, "min"), "min");
    if (n.Has(2)) hi = ScalarOf(n, n.RequireConst(2, "max"), "max");
  }
  std::vector<Argument> args;
  if (lo) args.push_back({"min", *lo});
  if (hi) args.push_back({"max", *hi});
  const Value& x = n.In(0);
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef("Clip", {in}, {n.Out(0, x.dtype, x.shape)}, std::move(args)));
}

// Softmax and LogSoftmax. Before opset 13 ONNX's are dp's (over the dims
// from `axis` on, flattened); from 13 they work along one axis, which dp's
// does when it is the last: another one is moved there and back.
void SoftmaxLike(Node& n, const char* type) {
  const Value& x = n.In(0);
  const std::string in = n.Data(0);
  if (n.opset() < 13) {
    n.Emit(MakeOperatorDef(type, {in}, {n.Out(0, x.dtype, x.shape)}, {{"axis", n.Int("axis", 1)}}));
    return;
  }
  const int64_t axis = n.Int("axis", -1), rank = Rank(x);
  if (axis == -1 || (rank >= 0 && axis == rank - 1)) {
    n.Emit(MakeOperatorDef(type, {in}, {n.Out(0, x.dtype, x.shape)}, {{"axis", int64_t{-1}}}));
    return;
  }
  if (rank < 0) n.Fail("axis ", axis, " of an input whose rank the graph does not give");
  const int64_t a = CanonicalOnnxAxis(axis, rank, false, "axis");
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(a)], perm.back());  // a swap is its own inverse
  const std::string moved = n.Temp("moved"), result = n.Temp("last_axis");
  n.Emit(MakeOperatorDef("Transpose", {in}, {moved}, {{"axes", perm}}));
  n.Emit(MakeOperatorDef(type, {moved}, {result}, {{"axis", int64_t{-1}}}));
  n.Emit(MakeOperatorDef("Transpose", {result}, {n.Out(0, x.dtype, x.shape)}, {{"axes", perm}}));
}

// ---- windows: Conv and pooling ----------------------------------------------

struct Window {
  int64_t kh = kUnknownDim, kw = kUnknownDim;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
};

// What a kernel of k spans with dilation d ((k - 1) d + 1), kUnknownDim when
// k is not known or it is past what dims may be.
int64_t Span(int64_t k, int64_t d) {
  int64_t span;
  if (k < 1 || k > kMaxKnownDim || __builtin_mul_overflow(k - 1, d, &span) || span >= kMaxKnownDim)
    return kUnknownDim;
  return span + 1;
}

// A 2-D window attribute (kernel_shape, strides, dilations): two values in
// [1, kMaxWindow].
std::pair<int64_t, int64_t> Pair(const Node& n, const std::string& name, std::optional<int64_t> fallback) {
  std::vector<int64_t> v =
      fallback ? n.Ints(name, std::vector<int64_t>{*fallback, *fallback}) : n.Ints(name);
  if (v.size() != 2) n.Fail(name, " has ", v.size(), " values: a ", v.size(), "-D window (dp's are 2-D)");
  for (int64_t x : v)
    DP_ENFORCE_CODE(x >= 1 && x <= kMaxWindow, Code::kInvalidNet, name, " holds ", x, ", not in [1, 2^31]");
  return {v[0], v[1]};
}

// The window's pads, from `pads` or auto_pad (SAME_* needs the input's
// height and width, and the kernel).
void ReadPads(const Node& n, const Value& x, Window& w) {
  const std::string auto_pad = n.String("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<int64_t> p = n.Ints("pads", std::vector<int64_t>{0, 0, 0, 0});
    DP_ENFORCE_CODE(p.size() == 4, Code::kInvalidNet, "pads has ", p.size(), " values; a 2-D window takes 4");
    for (int64_t v : p)
      DP_ENFORCE_CODE(v >= 0 && v <= kMaxWindow, Code::kInvalidNet, "pads holds ", v, ", not in [0, 2^31]");
    w.pt = p[0];
    w.pl = p[1];
    w.pb = p[2];
    w.pr = p[3];
    return;
  }
  DP_ENFORCE_CODE(!n.HasAttr("pads"), Code::kInvalidNet, "auto_pad ", PrintableText(auto_pad), " comes with pads");
  if (auto_pad == "VALID") return;
  DP_ENFORCE_CODE(auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER", Code::kInvalidNet, "auto_pad '",
                  PrintableText(auto_pad),
                  "' is none of NOTSET, SAME_UPPER, SAME_LOWER and VALID");
  const int64_t h = DimOf(x, 2), wd = DimOf(x, 3);
  if (Rank(x) != 4 || h < 0 || wd < 0)
    n.Fail("auto_pad ", auto_pad, " on an input whose height and width the graph does not give");
  if (Span(w.kh, w.dh) < 0 || Span(w.kw, w.dw) < 0)
    n.Fail("auto_pad ", auto_pad, " with a kernel whose size the graph does not give");
  auto same = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t* begin, int64_t* end) {
    const int64_t out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>((out - 1) * s + Span(k, d) - in, 0);
    *begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    *end = total - *begin;
  };
  same(h, w.kh, w.sh, w.dh, &w.pt, &w.pb);
  same(wd, w.kw, w.sw, w.dw, &w.pl, &w.pr);
}

// Output extent along one axis (floor), kUnknownDim when `in` is not known.
int64_t OutExtent(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) {
  const int64_t span = Span(k, d), padded = in + p0 + p1;
  if (in < 0 || span < 0) return kUnknownDim;
  return padded < span ? kUnknownDim : (padded - span) / s + 1;
}

// ceil_mode: the pad to add at the end so that the floor rule gives the
// ceil rule's extent, where a last window must still start inside the input
// or its leading pad (PyTorch's rule, which exporters follow).
int64_t CeilModeExtra(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1) {
  const int64_t padded = in + p0 + p1;
  if (padded < k) return 0;
  int64_t out = (padded - k + s - 1) / s + 1;
  if ((out - 1) * s >= in + p0) --out;
  return std::max<int64_t>(0, (out - 1) * s + k - padded);
}

std::vector<Argument> WindowArgs(const Window& w, bool kernel, bool dilation) {
  std::vector<Argument> args;
  if (kernel) {
    args.push_back({"kernel_h", w.kh});
    args.push_back({"kernel_w", w.kw});
  }
  args.push_back({"stride_h", w.sh});
  args.push_back({"stride_w", w.sw});
  args.push_back({"pad_t", w.pt});
  args.push_back({"pad_l", w.pl});
  args.push_back({"pad_b", w.pb});
  args.push_back({"pad_r", w.pr});
  if (dilation) {
    args.push_back({"dilation_h", w.dh});
    args.push_back({"dilation_w", w.dw});
  }
  return args;
}

void RequireFourD(const Node& n, const Value& x, const char* what) {
  const int64_t r = Rank(x);
  if (r >= 0 && r != 4) n.Fail("a ", what, " over a rank-", r, " input (dp's are 2-D, over NCHW)");
}

Shape WindowOutShape(const Value& x, int64_t channels, const Window& w) {
  return Dims{DimOf(x, 0), channels, OutExtent(DimOf(x, 2), w.kh, w.sh, w.pt, w.pb, w.dh),
              OutExtent(DimOf(x, 3), w.kw, w.sw, w.pl, w.pr, w.dw)};
}

void ConvertConv(Node& n) {
  const Value& x = n.In(0);
  const Value& wt = n.In(1);
  RequireFourD(n, x, "convolution");
  if (Rank(wt) >= 0 && Rank(wt) != 4) n.Fail("a ", Rank(wt) - 2, "-D convolution (dp's Conv is 2-D)");
  Window w;
  const bool kernel_given = n.HasAttr("kernel_shape");
  if (kernel_given) {
    std::tie(w.kh, w.kw) = Pair(n, "kernel_shape", std::nullopt);
  } else {
    w.kh = DimOf(wt, 2);
    w.kw = DimOf(wt, 3);
  }
  std::tie(w.sh, w.sw) = Pair(n, "strides", 1);
  std::tie(w.dh, w.dw) = Pair(n, "dilations", 1);
  const int64_t group = n.Int("group", 1);
  DP_ENFORCE_CODE(group >= 1 && group <= kMaxWindow, Code::kInvalidNet, "group ", group, " is not positive");
  ReadPads(n, x, w);
  std::vector<Argument> args = WindowArgs(w, kernel_given, true);
  if (group != 1) args.push_back({"group", group});
  std::vector<std::string> inputs{n.Data(0), n.Weight(1)};
  if (n.Has(2)) inputs.push_back(n.Weight(2));
  n.Emit(MakeOperatorDef("Conv", inputs, {n.Out(0, x.dtype, WindowOutShape(x, DimOf(wt, 0), w))}, std::move(args)));
}

void Pool(Node& n, const char* type, bool average) {
  const Value& x = n.In(0);
  RequireFourD(n, x, "pooling");
  Window w;
  std::tie(w.kh, w.kw) = Pair(n, "kernel_shape", std::nullopt);
  std::tie(w.sh, w.sw) = Pair(n, "strides", 1);
  if (!average) {
    const auto [dh, dw] = Pair(n, "dilations", 1);
    if (dh != 1 || dw != 1) n.Fail("dilations ", dh, "x", dw, " (dp's MaxPool has none)");
    if (n.OutputUsed(1)) n.Fail("its Indices output, which dp's MaxPool does not give");
  }
  ReadPads(n, x, w);
  const int64_t count_include_pad = average ? n.Int("count_include_pad", 0) : 0;
  if (n.Int("ceil_mode", 0) != 0) {
    const int64_t h = DimOf(x, 2), wd = DimOf(x, 3);
    if (h < 0 || wd < 0) n.Fail("ceil_mode on an input whose height and width the graph does not give");
    const int64_t eh = CeilModeExtra(h, w.kh, w.sh, w.pt, w.pb), ew = CeilModeExtra(wd, w.kw, w.sw, w.pl, w.pr);
    // PyTorch divides a partial last window by what it covers of the padded
    // input; dp's count_include_pad would count the extra pad too.
    if ((eh > 0 || ew > 0) && count_include_pad != 0)
      n.Fail("ceil_mode with count_include_pad where a window reaches past the padded input");
    w.pb += eh;
    w.pr += ew;
  }
  std::vector<Argument> args = WindowArgs(w, true, false);
  if (count_include_pad != 0) args.push_back({"count_include_pad", int64_t{1}});
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef(type, {in}, {n.Out(0, x.dtype, WindowOutShape(x, DimOf(x, 1), w))}, std::move(args)));
}

void GlobalPool(Node& n, const char* type) {
  const Value& x = n.In(0);
  RequireFourD(n, x, "global pooling");
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef(type, {in}, {n.Out(0, x.dtype, Dims{DimOf(x, 0), DimOf(x, 1), 1, 1})},
                         {{"global_pooling", int64_t{1}}}));
}

// ---- normalisation ----------------------------------------------------------

// dp's SpatialBN in training mode (the forward net trains; inference nets
// switch it to the running statistics, which is ONNX's inference). The
// running mean and variance are computed params it updates in place.
void ConvertBatchNorm(Node& n) {
  for (int i : {3, 4})
    if (n.ConstIn(i) == nullptr)
      n.Fail("its running ", i == 3 ? "mean" : "variance",
             " is computed by the graph; dp keeps it as state, from an initializer");
  for (int i = 1; i < n.NumOutputs(); ++i)
    if (n.OutputUsed(i)) n.Fail("output ", i, " (a training statistic), which dp keeps to itself");
  const std::string& mean_name = n.In(3).name;
  const std::string& var_name = n.In(4).name;
  if (mean_name == var_name) n.Fail("one initializer as both running mean and variance");
  const Value& x = n.In(0);
  const std::string in = n.Data(0), scale = n.Weight(1), bias = n.Weight(2), mean = n.Data(3), var = n.Data(4);
  const double epsilon = n.Float("epsilon", 1e-5f), momentum = n.Float("momentum", 0.9f);
  n.Emit(MakeOperatorDef("SpatialBN", {in, scale, bias, mean, var},
                         {n.Out(0, x.dtype, x.shape), mean, var, n.Temp("saved_mean"), n.Temp("saved_inv_std")},
                         {{"epsilon", epsilon}, {"momentum", momentum}}));
}

// ---- GEMMs: dp's FC is Y = X W^T + b, W [N, K] ------------------------------

void ConvertGemm(Node& n) {
  const double alpha = n.Float("alpha", 1.f), beta = n.Float("beta", 1.f);
  const bool trans_a = n.Int("transA", 0) != 0, trans_b = n.Int("transB", 0) != 0;
  const Value& a = n.In(0);
  const Value& b = n.In(1);
  if (Rank(a) >= 0 && Rank(a) != 2) n.Fail("A of rank ", Rank(a), " (Gemm's A is 2-D)");
  std::string x = n.Data(0);
  if (trans_a) {
    const std::string t = n.Temp("A_T");
    n.Emit(MakeOperatorDef("Transpose", {x}, {t}, {{"axes", std::vector<int64_t>{1, 0}}}));
    x = t;
  }
  const int64_t m = DimOf(a, trans_a ? 1 : 0);
  int64_t cols = kUnknownDim;  // N
  std::string w;
  if (const Tensor* bv = n.ConstIn(1)) {
    DP_ENFORCE_CODE(bv->ndim() == 2, Code::kInvalidNet, "B is ", DimsString(bv->dims()), ", not 2-D");
    cols = bv->dims()[trans_b ? 0 : 1];
    if (trans_b && alpha == 1) {
      w = n.Weight(1);
    } else {  // alpha folded into the weight: FC has no factor of its own
      const Tensor t = trans_b ? *bv : Transposed2D(*bv);
      w = n.WeightAs(1, StrCat(trans_b ? "" : "T", alpha != 1 ? StrCat("*", alpha) : ""),
                     alpha != 1 ? ScaledCopy(n, t, alpha, t.dims()) : t);
    }
  } else {
    if (alpha != 1) n.Fail("alpha ", alpha, " with a B computed by the graph");
    w = n.Data(1);
    if (!trans_b) {
      const std::string t = n.Temp("B_T");
      n.Emit(MakeOperatorDef("Transpose", {w}, {t}, {{"axes", std::vector<int64_t>{1, 0}}}));
      w = t;
    }
    cols = DimOf(b, trans_b ? 0 : 1);
  }
  // The bias: C when it is a constant vector of N values (scaled by beta),
  // else zeros, with C (times beta) added after.
  std::string bias, add;
  if (n.Has(2)) {
    const Tensor* c = n.ConstIn(2);
    const bool vector = c != nullptr && cols >= 0 && c->numel() == cols &&
                        (c->ndim() == 1 || (c->ndim() == 2 && c->dims()[0] == 1));
    if (vector && c->ndim() == 1 && beta == 1) {
      bias = n.Weight(2);
    } else if (vector) {
      bias = n.WeightAs(2, StrCat("N", beta != 1 ? StrCat("*", beta) : ""), ScaledCopy(n, *c, beta, Dims{cols}));
    } else {
      add = n.Data(2);
      if (beta != 1) {
        const std::string t = n.Temp("beta_C");
        n.Emit(MakeOperatorDef("Scale", {add}, {t}, {{"scale", beta}}));
        add = t;
      }
    }
  }
  if (bias.empty()) {
    if (cols < 0) n.Fail("no C and a B whose shape the graph does not give");
    const DType dtype = a.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    bias = n.NewConstant("zero_bias", Tensor::Zeros({cols}, dtype), false);
  }
  const Shape shape = Dims{m, cols};
  if (add.empty()) {
    n.Emit(MakeOperatorDef("FC", {x, w, bias}, {n.Out(0, a.dtype, shape)}));
    return;
  }
  const std::string ab = n.Temp("AB");
  n.Emit(MakeOperatorDef("FC", {x, w, bias}, {ab}));
  n.Emit(MakeOperatorDef("Add", {ab, add}, {n.Out(0, a.dtype, Broadcast(shape, n.In(2).shape))}));
}

// A [..., K] @ B [K, N] with B a 2-D initializer: an FC over A's last axis.
void ConvertMatMul(Node& n) {
  const Tensor* bv = n.ConstIn(1);
  if (bv == nullptr) n.Fail("B is computed by the graph; dp imports MatMul with a 2-D initializer as B");
  if (bv->ndim() != 2) n.Fail("B is ", DimsString(bv->dims()), "; dp imports MatMul with a 2-D initializer as B");
  const Value& a = n.In(0);
  if (Rank(a) == 0) DP_THROW(Code::kInvalidNet, "A is a scalar");
  const int64_t cols = bv->dims()[1];
  const std::string x = n.Data(0);
  const std::string w = n.WeightAs(1, "T", Transposed2D(*bv));
  const DType dtype = bv->dtype();
  const std::string bias = n.NewConstant("zero_bias", Tensor::Zeros({cols}, dtype), false);
  Shape shape;
  if (a.shape) {
    shape = Dims(a.shape->begin(), a.shape->end() - 1);
    shape->push_back(cols);
  }
  n.Emit(MakeOperatorDef("FC", {x, w, bias}, {n.Out(0, a.dtype, shape)}, {{"axis", int64_t{-1}}}));
}

// ---- shapes -------------------------------------------------------------------

void ConvertFlatten(Node& n) {
  const Value& x = n.In(0);
  const int64_t axis = n.Int("axis", 1);
  DP_ENFORCE_CODE(axis >= 0 || n.opset() >= 11, Code::kInvalidNet, "axis ", axis, " is negative (allowed from opset 11)");
  Shape shape;
  if (x.shape) {
    const int64_t a = CanonicalOnnxAxis(axis, Rank(x), true, "axis");
    shape = Dims{KnownProduct(*x.shape, 0, static_cast<size_t>(a)),
                 KnownProduct(*x.shape, static_cast<size_t>(a), x.shape->size())};
  }
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef("Flatten", {in}, {n.Out(0, x.dtype, shape)}, {{"axis", axis}}));
}

void ConvertReshape(Node& n) {
  const Tensor& s = n.RequireConst(1, "shape");
  DP_ENFORCE_CODE(s.dtype() == DType::kInt64 && s.ndim() == 1, Code::kInvalidNet, "the shape is ", s.DebugString(),
                  ", not a 1-D int64 tensor");
  const std::vector<int64_t> dims(s.data<int64_t>(), s.data<int64_t>() + s.numel());
  DP_ENFORCE_CODE(std::count(dims.begin(), dims.end(), -1) <= 1 &&
                      std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= -1; }),
                  Code::kInvalidNet, "the shape ", DimsString(dims), " has a dim below -1 or more than one -1");
  if (n.opset() >= 14 && n.Int("allowzero", 0) != 0 && std::count(dims.begin(), dims.end(), 0) > 0)
    n.Fail("allowzero with a 0 in the shape (dp's Reshape copies the input's dim for a 0)");
  const Value& x = n.In(0);
  Dims out = dims;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] == 0) out[i] = i < (x.shape ? x.shape->size() : 0) ? DimOf(x, static_cast<int64_t>(i)) : kUnknownDim;
  const auto minus = std::find(dims.begin(), dims.end(), -1);
  if (minus != dims.end()) {  // inferred from the element count, where the dims say it
    const size_t m = static_cast<size_t>(minus - dims.begin());
    int64_t rest = 1;
    bool known = true;
    for (size_t i = 0; i < out.size(); ++i)
      if (i != m && (out[i] < 0 || __builtin_mul_overflow(rest, out[i], &rest))) known = false;
    const int64_t total = x.shape ? KnownProduct(*x.shape, 0, x.shape->size()) : kUnknownDim;
    out[m] = known && total >= 0 && rest > 0 && total % rest == 0 ? total / rest : kUnknownDim;
  }
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef("Reshape", {in}, {n.Out(0, x.dtype, out)}, {{"shape", dims}}));
}

void ConvertTranspose(Node& n) {
  const Value& x = n.In(0);
  const std::vector<int64_t> perm = n.Ints("perm", std::vector<int64_t>{});
  Shape shape;
  if (x.shape) {
    const int64_t r = Rank(x);
    if (!perm.empty()) {
      DP_ENFORCE_CODE(static_cast<int64_t>(perm.size()) == r, Code::kInvalidNet, "perm has ", perm.size(),
                      " values for an input of rank ", r);
      Dims d;
      for (int64_t p : perm) d.push_back(DimOf(x, CanonicalOnnxAxis(p, r, false, "perm value")));
      shape = d;
    } else {
      shape = Dims(x.shape->rbegin(), x.shape->rend());
    }
  }
  std::vector<Argument> args;
  if (!perm.empty()) args.push_back({"axes", perm});
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef("Transpose", {in}, {n.Out(0, x.dtype, shape)}, std::move(args)));
}

void ConvertConcat(Node& n) {
  const int64_t axis = n.Int("axis");
  const int k = n.proto().input_size();
  DP_ENFORCE_CODE(k >= 1, Code::kInvalidNet, "Concat has no inputs");
  std::vector<std::string> inputs;
  Shape shape = n.In(0).shape;
  for (int i = 0; i < k; ++i) {
    const Value& v = n.In(i);
    inputs.push_back(n.Data(i));
    if (i == 0 || !shape) continue;
    if (!v.shape || v.shape->size() != shape->size()) {
      shape.reset();
      continue;
    }
    const int64_t a = CanonicalOnnxAxis(axis, Rank(v), false, "axis");
    int64_t& d = (*shape)[static_cast<size_t>(a)];
    const int64_t add = (*v.shape)[static_cast<size_t>(a)];
    d = d < 0 || add < 0 ? kUnknownDim : d + add;
  }
  n.Emit(MakeOperatorDef("Concat", inputs, {n.Out(0, n.In(0).dtype, shape)}, {{"axis", axis}}));
}

// ---- the rest -----------------------------------------------------------------

// dp's Dropout: dropping in training nets, the identity in inference ones
// (ONNX's training_mode input is for a runtime that trains with the graph).
void ConvertDropout(Node& n) {
  double ratio = 0.5;
  if (n.opset() < 12) {
    ratio = n.Float("ratio", 0.5f);
  } else {
    if (n.Has(1)) ratio = ScalarOf(n, n.RequireConst(1, "ratio"), "ratio");
    if (n.Has(2)) (void)ScalarOf(n, n.RequireConst(2, "training_mode"), "training_mode");
  }
  DP_ENFORCE_CODE(ratio >= 0 && ratio < 1, Code::kInvalidNet, "ratio ", ratio, " is not in [0, 1)");
  if (n.OutputUsed(1)) n.Fail("its mask output");
  std::vector<Argument> args{{"ratio", ratio}};
  if (n.HasAttr("seed")) args.push_back({"seed", n.Int("seed")});
  const Value& x = n.In(0);
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef("Dropout", {in}, {n.Out(0, x.dtype, x.shape)}, std::move(args)));
}

void ConvertIdentity(Node& n) {
  if (const Tensor* c = n.ConstIn(0)) {
    n.OutConst(0, *c);
    return;
  }
  const Value& x = n.In(0);
  const std::string in = n.Data(0);
  n.Emit(MakeOperatorDef("Alias", {in}, {n.Out(0, x.dtype, x.shape)}));
}

void ConvertConstant(Node& n) {
  if (n.HasAttr("value")) {
    n.OutConst(0, n.TensorAttr("value"));
  } else if (n.HasAttr("value_float")) {
    Tensor t({}, DType::kFloat32);
    t.mutable_data<float>()[0] = n.Float("value_float");
    n.OutConst(0, std::move(t));
  } else if (n.HasAttr("value_int")) {
    Tensor t({}, DType::kInt64);
    t.mutable_data<int64_t>()[0] = n.Int("value_int");
    n.OutConst(0, std::move(t));
  } else if (n.HasAttr("value_floats")) {
    const auto& a = *n.Attr("value_floats");
    Tensor t({a.floats_size()}, DType::kFloat32);
    std::copy(a.floats().begin(), a.floats().end(), t.mutable_data<float>());
    n.OutConst(0, std::move(t));
  } else if (n.HasAttr("value_ints")) {
    const std::vector<int64_t> v = n.Ints("value_ints");
    Tensor t({static_cast<int64_t>(v.size())}, DType::kInt64);
    std::copy(v.begin(), v.end(), t.mutable_data<int64_t>());
    n.OutConst(0, std::move(t));
  } else {
    n.Fail("a sparse or string constant");
  }
}

#define DP_ONNX_UNARY(Type) {#Type, {[](Node& n) { Unary(n, #Type); }, {}}}
#define DP_ONNX_BINARY(Type) {#Type, {[](Node& n) { Binary(n, #Type); }, {}}}

}  // namespace

const std::map<std::string, OpConverter>& Converters() {
  static const std::map<std::string, OpConverter> table{
      DP_ONNX_UNARY(Relu),
      DP_ONNX_UNARY(Sigmoid),
      DP_ONNX_UNARY(Tanh),
      DP_ONNX_BINARY(Add),
      DP_ONNX_BINARY(Sub),
      DP_ONNX_BINARY(Mul),
      DP_ONNX_BINARY(Div),
      {"Sum", {ConvertSum, {}}},
      {"Clip", {ConvertClip, {"min", "max"}}},
      {"Softmax", {[](Node& n) { SoftmaxLike(n, "Softmax"); }, {"axis"}}},
      {"LogSoftmax", {[](Node& n) { SoftmaxLike(n, "LogSoftmax"); }, {"axis"}}},
      {"Conv", {ConvertConv, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}}},
      {"MaxPool",
       {[](Node& n) { Pool(n, "MaxPool", false); },
        {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}}},
      {"AveragePool",
       {[](Node& n) { Pool(n, "AveragePool", true); },
        {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}}},
      {"GlobalAveragePool", {[](Node& n) { GlobalPool(n, "AveragePool"); }, {}}},
      {"GlobalMaxPool", {[](Node& n) { GlobalPool(n, "MaxPool"); }, {}}},
      {"BatchNormalization", {ConvertBatchNorm, {"epsilon", "momentum", "training_mode"}}},
      {"Gemm", {ConvertGemm, {"alpha", "beta", "transA", "transB"}}},
      {"MatMul", {ConvertMatMul, {}}},
      {"Flatten", {ConvertFlatten, {"axis"}}},
      {"Reshape", {ConvertReshape, {"allowzero"}}},
      {"Transpose", {ConvertTranspose, {"perm"}}},
      {"Concat", {ConvertConcat, {"axis"}}},
      {"Dropout", {ConvertDropout, {"ratio", "seed"}}},
      {"Identity", {ConvertIdentity, {}}},
      {"Constant",
       {ConvertConstant,
        {"value", "value_float", "value_floats", "value_int", "value_ints", "sparse_value", "value_string",
         "value_strings"}}},
  };
  return table;
}

#undef DP_ONNX_UNARY
#undef DP_ONNX_BINARY

}  // namespace dp::onnx_import
