#include "ops/op_utils.h"

#include <cstdint>

namespace dp {

int CanonicalAxis(int64_t axis, int ndim, const std::string& what, bool allow_end) {
  int64_t limit = allow_end ? ndim + 1 : ndim;
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= limit)
    DP_THROW(Code::kOutOfRange, what, ": axis ", axis, " is out of range for a tensor of rank ", ndim);
  return static_cast<int>(a);
}

void CheckSameDtype(const Tensor& x, const std::string& xd, const Tensor& other, const std::string& od) {
  DP_ENFORCE_CODE(other.dtype() == x.dtype(), Code::kDType, od, " is ", DTypeName(other.dtype()), " but ", xd, " is ",
                  DTypeName(x.dtype()), "; they must share a dtype");
}

void CheckIterationCounter(const Dims& dims, DType dtype, const std::string& what) {
  DP_ENFORCE_CODE(dtype == DType::kInt64, Code::kDType, what, " must be int64, got ", DTypeName(dtype));
  DP_ENFORCE_CODE(NumElements(dims) == 1, Code::kShape, what, " must hold one value, got shape ", DimsString(dims));
}

int64_t DimProduct(const Dims& dims, int begin, int end) {
  int64_t p = 1;
  // Checked: a shape with a zero dim is valid however large its other dims,
  // so a product of some of them may not fit.
  for (int i = begin; i < end; ++i)
    if (__builtin_mul_overflow(p, dims[static_cast<size_t>(i)], &p))
      DP_THROW(Code::kShape, "dims ", begin, "..", end - 1, " of ", DimsString(dims),
               " hold more elements than int64 can count");
  return p;
}

Dims BroadcastDims(const Dims& a, const Dims& b, const std::string& what) {
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      DP_THROW(Code::kShape, what, ": shapes ", DimsString(a), " and ", DimsString(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Dims ReshapeDims(const Dims& in, const std::vector<int64_t>& shape, const std::string& what) {
  Dims out(shape.begin(), shape.end());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      if (i >= in.size())
        DP_THROW(Code::kShape, what, ": shape entry ", i, " is 0 (copy) but the input ", DimsString(in),
                 " has no dimension ", i);
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) DP_THROW(Code::kShape, what, ": shape ", DimsString(shape), " has more than one -1");
      infer = static_cast<int>(i);
      continue;
    }
    if (out[i] < 0) DP_THROW(Code::kShape, what, ": shape ", DimsString(shape), " has a negative entry");
    if (__builtin_mul_overflow(known, out[i], &known))
      DP_THROW(Code::kShape, what, ": shape ", DimsString(shape), " has more elements than int64 can count");
  }
  int64_t total = NumElements(in);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      DP_THROW(Code::kShape, what, ": cannot reshape ", DimsString(in), " to ", DimsString(shape));
    out[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    DP_THROW(Code::kShape, what, ": cannot reshape ", DimsString(in), " (", total, " elements) to ",
             DimsString(shape), " (", known, " elements)");
  }
  return out;
}

FcDims ComputeFcDims(const OperatorDef& op, const Dims& x, const Dims& w, const Dims& b, int64_t axis_arg,
                     int64_t axis_w_arg) {
  const std::string xn = StrCat("X '", op.inputs[0], "' "), wn = StrCat("W '", op.inputs[1], "' "),
                    bn = StrCat("b '", op.inputs[2], "' ");
  int axis = CanonicalAxis(axis_arg, static_cast<int>(x.size()), xn + DimsString(x), true);
  int axis_w = CanonicalAxis(axis_w_arg, static_cast<int>(w.size()), wn + DimsString(w), true);
  FcDims d;
  d.m = DimProduct(x, 0, axis);
  d.k = DimProduct(x, axis, static_cast<int>(x.size()));
  d.n = DimProduct(w, 0, axis_w);
  int64_t wk = DimProduct(w, axis_w, static_cast<int>(w.size()));
  if (wk != d.k)
    DP_THROW(Code::kShape, xn, DimsString(x), " has ", d.k, " features per row but ", wn, DimsString(w),
             " expects ", wk, " (W is [N, K])");
  if (NumElements(b) != d.n)
    DP_THROW(Code::kShape, bn, DimsString(b), " must have N = ", d.n, " elements to match ", wn, DimsString(w));
  BlasInt(d.m, "M (rows of ", xn, DimsString(x), " flattened at axis ", axis, ")");
  BlasInt(d.k, "K (features per row of ", xn, DimsString(x), ")");
  BlasInt(d.n, "N (rows of ", wn, DimsString(w), ")");
  d.out.assign(x.begin(), x.begin() + axis);
  d.out.push_back(d.n);
  return d;
}

Dims FcBiasDims(const Dims& w, int64_t axis_w) {
  int a = CanonicalAxis(axis_w, static_cast<int>(w.size()), "W", true);
  return {DimProduct(w, 0, a)};
}

FcGradientDims CheckFcGradientInputs(const OperatorDef& op, const ArgReader& args, const Dims& x, const Dims& w,
                                     const Tensor& dy, const Tensor* y, const std::string& dy_desc,
                                     const std::string& y_desc) {
  const int64_t axis_w = args.Int("axis_w", 1);
  FcGradientDims g{ComputeFcDims(op, x, w, FcBiasDims(w, axis_w), args.Int("axis", 1), axis_w),
                   FcActivationIsRelu(args)};
  DP_ENFORCE_CODE(dy.dims() == g.d.out, Code::kShape, dy_desc, " has shape ", DimsString(dy.dims()),
                  " but the forward output has ", DimsString(g.d.out));
  DP_ENFORCE_CODE(g.relu == (y != nullptr), Code::kInvalidArgument,
                  g.relu ? "with activation \"relu\" the forward output Y is input 3"
                         : "input 3 (Y) is only taken with activation \"relu\"");
  if (y != nullptr)
    DP_ENFORCE_CODE(y->dims() == dy.dims() && y->dtype() == dy.dtype(), Code::kShape, y_desc, " ",
                    y->DebugString(), " must match ", dy_desc, " ", dy.DebugString());
  return g;
}

bool FcActivationIsRelu(const ArgReader& args) {
  std::string a = args.String("activation", std::string("none"));
  DP_ENFORCE_CODE(a == "none" || a == "relu", Code::kInvalidArgument, "argument 'activation' must be \"none\" or "
                  "\"relu\", got \"", a, "\"");
  return a == "relu";
}

}  // namespace dp
