// Transpose: permutes the dims of X (argument `axes`, default reversed):
// Y.dims[i] = X.dims[axes[i]]. Works for every dtype (elements are moved by
// size). Its gradient is a Transpose by the inverse permutation.
#include <cstring>
#include <numeric>

#include "ops/cpu/transpose_plan.h"
#include "ops/gradient_registry.h"
#include "ops/math/transpose.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

TransposePlan PlanTranspose(const Dims& in, const ArgReader& args, const std::string& what) {
  const int ndim = static_cast<int>(in.size());
  TransposePlan p;
  if (!args.Has("axes")) {
    p.axes.resize(static_cast<size_t>(ndim));
    for (int i = 0; i < ndim; ++i) p.axes[static_cast<size_t>(i)] = ndim - 1 - i;
  } else {
    std::vector<int64_t> axes = args.Ints("axes");
    DP_ENFORCE_CODE(static_cast<int>(axes.size()) == ndim, Code::kShape, "argument 'axes' has ", axes.size(),
                    " entries but ", what, " ", DimsString(in), " has ", ndim, " dims");
    std::vector<bool> seen(static_cast<size_t>(ndim), false);
    for (int64_t a : axes) {
      int c = CanonicalAxis(a, ndim, what);
      DP_ENFORCE(!seen[static_cast<size_t>(c)], "argument 'axes' names axis ", c, " of ", what,
                 " twice: it must be a permutation");
      seen[static_cast<size_t>(c)] = true;
      p.axes.push_back(c);
    }
  }
  for (int a : p.axes) p.out.push_back(in[static_cast<size_t>(a)]);
  return p;
}

namespace {

// y[j0, .., jr] = x[i] with i[axes[k]] = j[k]: walks Y in order with an
// odometer over X's strides (collapsed, as the CUDA kernel walks them:
// ops/math/transpose.h); the innermost output dim is a strided loop.
template <typename E>
void TransposeKernel(const E* x, const Dims& in, const std::vector<int>& axes, E* y) {
  const math::CollapsedLayout layout = math::CollapseTranspose(in, axes);
  const Dims& out = layout.dims;
  const std::vector<int64_t>& stride = layout.strides[0];  // X stride of each output dim
  const size_t r = out.size();
  const int64_t n = NumElements(out);
  if (n == 0) return;
  if (r == 0) {
    y[0] = x[0];
    return;
  }
  const int64_t inner = out[r - 1], is = stride[r - 1];
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t base = 0; base < n; base += inner) {
    for (int64_t j = 0; j < inner; ++j) y[base + j] = x[off + j * is];
    for (size_t d = r - 1; d-- > 0;) {
      ++idx[d];
      off += stride[d];
      if (idx[d] < out[d]) break;
      off -= stride[d] * out[d];
      idx[d] = 0;
    }
  }
}

class TransposeOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    TransposePlan p = PlanTranspose(x.dims(), args(), InputDesc(0));
    const Dims in = x.dims();
    const void* xp = x.raw_data();
    void* yp = Output(0, p.out, x.dtype())->raw_mutable_data();
    switch (x.itemsize()) {
      case 1: TransposeKernel(static_cast<const uint8_t*>(xp), in, p.axes, static_cast<uint8_t*>(yp)); break;
      case 2: TransposeKernel(static_cast<const uint16_t*>(xp), in, p.axes, static_cast<uint16_t*>(yp)); break;
      case 4: TransposeKernel(static_cast<const uint32_t*>(xp), in, p.axes, static_cast<uint32_t*>(yp)); break;
      case 8: TransposeKernel(static_cast<const uint64_t*>(xp), in, p.axes, static_cast<uint64_t*>(yp)); break;
      default: DP_THROW(Code::kDType, InputDesc(0), ": cannot transpose ", DTypeName(x.dtype()));
    }
  }
};

DP_OPERATOR_SCHEMA(Transpose)
    .NumInputs(1)
    .NumOutputs(1)
    .Inputs({"X"})
    .Outputs({"Y"})
    .Arg("axes", ArgKind::kInts, ArgDefault::Described("the dims reversed: [n-1, ..., 1, 0]"),
         "permutation of X's dims (negative counts from the back): Y.dims[i] = X.dims[axes[i]]")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      return std::vector<TensorInfo>{
          {PlanTranspose(in[0].dims, args, StrCat("X '", op.inputs[0], "'")).out, in[0].dtype}};
    })
    .Doc("Permutes the dims of X (any dtype).");

DP_REGISTER_CPU_OPERATOR(Transpose, TransposeOp);

// dX = Transpose(dY) by the inverse permutation; reversing is its own inverse.
struct TransposeGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    if (!Reader().Has("axes")) return {MakeOp("Transpose", {GO(0)}, {GI(0)})};
    std::vector<int64_t> axes = Reader().Ints("axes");
    const int64_t n = static_cast<int64_t>(axes.size());
    std::vector<int64_t> inv(axes.size(), -1);
    for (int64_t i = 0; i < n; ++i) {
      int64_t a = axes[static_cast<size_t>(i)] < 0 ? axes[static_cast<size_t>(i)] + n : axes[static_cast<size_t>(i)];
      DP_ENFORCE_CODE(a >= 0 && a < n && inv[static_cast<size_t>(a)] < 0, Code::kInvalidNet, label(),
                      ": argument 'axes' is not a permutation of ", n, " dims");
      inv[static_cast<size_t>(a)] = i;
    }
    return {MakeOp("Transpose", {GO(0)}, {GI(0)}, {MakeArg("axes", inv)})};
  }
};

}  // namespace

DP_REGISTER_GRADIENT(Transpose, TransposeGradientMaker);

}  // namespace dp
