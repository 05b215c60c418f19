// Concat: joins N inputs along `axis` (default 1); they must agree in rank,
// dtype and every other dim. Optional output 1 `split_info` holds each
// input's size along the axis (int64 [N]). Works for every dtype (rows are
// copied as bytes).
//
// ConcatGradient(dY, X0, .., Xn-1) -> the wanted dXi. The Xi are read only for
// their dims (the split sizes). Output k is the gradient of input
// X_{grad_indices[k]}; without `grad_indices` there is one output per Xi, in
// order. The gradient maker passes every Xi and lists the wanted ones, so no
// unwanted gradient is ever computed or stored.
#include <cstring>
#include <limits>

#include "ops/cpu/concat_plan.h"
#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

ConcatPlan PlanConcat(const std::vector<std::string>& names, const std::vector<const Dims*>& dims,
                      const std::vector<DType>& dtypes, int64_t axis_arg) {
  const Dims& d0 = *dims[0];
  const int ndim = static_cast<int>(d0.size());
  ConcatPlan p;
  p.axis = CanonicalAxis(axis_arg, ndim, StrCat(names[0], " ", DimsString(d0)));
  p.out = d0;
  p.out[static_cast<size_t>(p.axis)] = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dims& d = *dims[i];
    DP_ENFORCE_CODE(dtypes[i] == dtypes[0], Code::kDType, names[i], " is ", DTypeName(dtypes[i]), " but ", names[0],
                    " is ", DTypeName(dtypes[0]));
    bool ok = d.size() == d0.size();
    for (size_t k = 0; ok && k < d.size(); ++k) ok = static_cast<int>(k) == p.axis || d[k] == d0[k];
    DP_ENFORCE_CODE(ok, Code::kShape, names[i], " ", DimsString(d), " does not fit ", names[0], " ", DimsString(d0),
                    " for concatenation along axis ", p.axis, " (all other dims must agree)");
    const int64_t s = d[static_cast<size_t>(p.axis)];
    DP_ENFORCE_CODE(p.out[static_cast<size_t>(p.axis)] <= std::numeric_limits<int64_t>::max() - s, Code::kShape,
                    "concatenated size along axis ", p.axis, " overflows");
    p.out[static_cast<size_t>(p.axis)] += s;
    p.sizes.push_back(s);
  }
  NumElements(p.out);  // rejects overflow
  p.outer = DimProduct(p.out, 0, p.axis);
  p.inner = DimProduct(p.out, p.axis + 1, ndim);
  return p;
}

ConcatPlan PlanConcatGradient(const std::string& dy_name, const Dims& dy, const std::vector<std::string>& names,
                              const std::vector<const Dims*>& dims, int64_t axis_arg) {
  // Only the Xi's dims matter, not their dtypes.
  ConcatPlan p = PlanConcat(names, dims, std::vector<DType>(dims.size(), DType::kFloat32), axis_arg);
  DP_ENFORCE_CODE(p.out == dy, Code::kShape, dy_name, " has shape ", DimsString(dy),
                  " but the inputs X joined along axis ", p.axis, " give ", DimsString(p.out));
  return p;
}

std::vector<int64_t> RowStarts(const ConcatPlan& p) {
  std::vector<int64_t> start(p.sizes.size() + 1, 0);
  for (size_t i = 0; i < p.sizes.size(); ++i) start[i + 1] = start[i] + p.sizes[i] * p.inner;
  return start;
}

std::vector<int64_t> GradIndices(const ArgReader& args, size_t num_pieces, size_t num_outputs) {
  std::vector<int64_t> which;
  if (args.Has("grad_indices")) {
    which = args.Ints("grad_indices");
  } else {
    for (size_t i = 0; i < num_pieces; ++i) which.push_back(static_cast<int64_t>(i));
  }
  DP_ENFORCE(which.size() == num_outputs, "argument 'grad_indices' must list one input per output: ", num_outputs,
             " outputs but ", which.size(), " indices", args.Has("grad_indices") ? "" : " (one per input X)");
  std::vector<bool> seen(num_pieces, false);
  for (int64_t w : which) {
    DP_ENFORCE_CODE(w >= 0 && static_cast<size_t>(w) < num_pieces, Code::kOutOfRange, "argument 'grad_indices' entry ",
                    w, " is outside [0, ", num_pieces, ")");
    DP_ENFORCE(!seen[static_cast<size_t>(w)], "argument 'grad_indices' lists input ", w, " twice");
    seen[static_cast<size_t>(w)] = true;
  }
  return which;
}

namespace {

// pieces (all of them, in order) -> joined.
void JoinRows(const ConcatPlan& p, size_t itemsize, const std::vector<const char*>& pieces, char* joined) {
  const std::vector<int64_t> start = RowStarts(p);
  const int64_t row = start.back();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t bytes = static_cast<size_t>(p.sizes[i] * p.inner) * itemsize;
    if (bytes == 0) continue;
    for (int64_t o = 0; o < p.outer; ++o)
      std::memcpy(joined + static_cast<size_t>(o * row + start[i]) * itemsize,
                  pieces[i] + static_cast<size_t>(o) * bytes, bytes);
  }
}

// joined -> pieces[k], the piece of input which[k].
void SplitRows(const ConcatPlan& p, size_t itemsize, const char* joined, const std::vector<char*>& pieces,
               const std::vector<int64_t>& which) {
  const std::vector<int64_t> start = RowStarts(p);
  const int64_t row = start.back();
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = static_cast<size_t>(which[k]);
    const size_t bytes = static_cast<size_t>(p.sizes[i] * p.inner) * itemsize;
    if (bytes == 0) continue;
    for (int64_t o = 0; o < p.outer; ++o)
      std::memcpy(pieces[k] + static_cast<size_t>(o) * bytes,
                  joined + static_cast<size_t>(o * row + start[i]) * itemsize, bytes);
  }
}

class ConcatOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const InputInfos in = DescribeInputs(0, InputSize());
    std::vector<const char*> src;
    for (int i = 0; i < InputSize(); ++i) src.push_back(static_cast<const char*>(Input(i).raw_data()));
    ConcatPlan p = PlanConcat(in.names, in.dims, in.dtypes, args().Int("axis", 1));
    const DType dtype = in.dtypes[0];
    Tensor* y = Output(0, p.out, dtype);
    JoinRows(p, DTypeSize(dtype), src, static_cast<char*>(y->raw_mutable_data()));
    if (OutputSize() > 1) {
      int64_t* s = Output(1, {static_cast<int64_t>(p.sizes.size())}, DType::kInt64)->mutable_data<int64_t>();
      std::copy(p.sizes.begin(), p.sizes.end(), s);
    }
  }
};

class ConcatGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& dy = Input(0);
    const size_t pieces = static_cast<size_t>(InputSize() - 1);
    std::vector<int64_t> which = GradIndices(args(), pieces, static_cast<size_t>(OutputSize()));
    const InputInfos xs = DescribeInputs(1, InputSize());
    ConcatPlan p = PlanConcatGradient(InputDesc(0), dy.dims(), xs.names, xs.dims, args().Int("axis", 1));
    const DType dtype = dy.dtype();
    const char* src = static_cast<const char*>(dy.raw_data());
    std::vector<char*> dst;  // dst[k] is the gradient of X_{which[k]}
    for (size_t k = 0; k < which.size(); ++k)
      dst.push_back(static_cast<char*>(
          Output(static_cast<int>(k), *xs.dims[static_cast<size_t>(which[k])], dtype)->raw_mutable_data()));
    SplitRows(p, DTypeSize(dtype), src, dst, which);
  }
};

std::vector<TensorInfo> InferConcat(const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
  std::vector<std::string> names;
  std::vector<const Dims*> dims;
  std::vector<DType> dtypes;
  for (size_t i = 0; i < in.size(); ++i) {
    names.push_back(StrCat("input ", i, " '", op.inputs[i], "'"));
    dims.push_back(&in[i].dims);
    dtypes.push_back(in[i].dtype);
  }
  ConcatPlan p = PlanConcat(names, dims, dtypes, args.Int("axis", 1));
  std::vector<TensorInfo> out{{p.out, in[0].dtype}};
  if (op.outputs.size() > 1) out.push_back({{static_cast<int64_t>(in.size())}, DType::kInt64});
  return out;
}

std::vector<TensorInfo> InferConcatGradient(const OperatorDef& op, const ArgReader& args,
                                            const std::vector<TensorInfo>& in) {
  const size_t pieces = in.size() - 1;
  std::vector<int64_t> which = GradIndices(args, pieces, op.outputs.size());
  std::vector<std::string> names;
  std::vector<const Dims*> dims;
  for (size_t i = 1; i < in.size(); ++i) {
    names.push_back(StrCat("input ", i, " '", op.inputs[i], "'"));
    dims.push_back(&in[i].dims);
  }
  PlanConcatGradient(StrCat("dY '", op.inputs[0], "'"), in[0].dims, names, dims, args.Int("axis", 1));
  std::vector<TensorInfo> out;
  for (int64_t w : which) out.push_back({in[static_cast<size_t>(w) + 1].dims, in[0].dtype});
  return out;
}

DP_OPERATOR_SCHEMA(Concat)
    .NumInputs(1, std::numeric_limits<int>::max())
    .NumOutputs(1, 2)
    .Outputs({"Y", "split_info"})
    .Arg("axis", ArgKind::kInt, 1, "the axis to join along (negative counts from the back)")
    .ShapeInference(InferConcat)
    .Doc("Joins the inputs along `axis`; optional output split_info: int64 [N] sizes along the axis.");

DP_OPERATOR_SCHEMA(ConcatGradient)
    .NumInputs(2, std::numeric_limits<int>::max())
    .NumOutputs(1, std::numeric_limits<int>::max())
    .Inputs({"dY"})
    .Arg("axis", ArgKind::kInt, 1, "the forward Concat's axis")
    .Arg("grad_indices", ArgKind::kInts, ArgDefault::Described("one output per X, in order: [0, 1, ..., n-1]"),
         "output k is the gradient of X_{grad_indices[k]} (input 1 + grad_indices[k])")
    .ShapeInference(InferConcatGradient)
    .Doc("Splits dY along `axis` into the gradients of the wanted forward inputs X0..Xn-1 (read for their dims).");

DP_REGISTER_CPU_OPERATOR(Concat, ConcatOp);
DP_REGISTER_CPU_OPERATOR(ConcatGradient, ConcatGradientOp);

struct ConcatGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    std::vector<std::string> inputs{GO(0)};
    for (int i = 0; i < NumInputs(); ++i) inputs.push_back(I(i));
    std::vector<std::string> outputs;
    std::vector<int64_t> which;
    for (int i = 0; i < NumInputs(); ++i)
      if (NeedsGI(i)) {
        which.push_back(i);
        outputs.push_back(GI(i));
      }
    if (outputs.empty()) return {};
    return {MakeOp("ConcatGradient", std::move(inputs), std::move(outputs),
                   {MakeArg("axis", Reader().Int("axis", 1)), MakeArg("grad_indices", which)})};
  }
};

}  // namespace

DP_REGISTER_GRADIENT(Concat, ConcatGradientMaker);

}  // namespace dp
