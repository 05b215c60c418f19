// FC (fully connected): Y = X W^T + b, with X flattened to [M, K] at `axis`,
// W of shape [N, K] (flattened at axis_w) and b of shape [N]. The bias and
// the relu are fused into the GEMM's blocks (GemmEpilogue): each seeds its
// part of Y with b, adds the product (beta = 1), then applies the relu.
// FCGradient: dW = dY^T X, db = column sums of dY, dX = dY W (only when
// wanted: the first layer's dX would be a wasted GEMM).
#include <algorithm>
#include <string>
#include <vector>

#include "core/parallel_for.h"
#include "ops/cpu/gemm.h"
#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

// Y [m, n] = X [m, k] W^T + b, then max(Y, 0) with `relu`: each GEMM block
// seeds its part of Y with the bias and applies the relu while it is hot.
template <typename T>
void GemmXWtBias(int64_t m, int64_t n, int64_t k, const T* x, const T* w, const T* b, bool relu, T* y) {
  const GemmEpilogue<T> epilogue{b, relu};
  Gemm(CblasNoTrans, CblasTrans, m, n, k, T(1), x, k, w, k, T(1), y, n, &epilogue);
}

class FcOp final : public Operator {
 public:
  explicit FcOp(const OpInit& init) : Operator(init) { PrepareGemmKernels(); }

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& w = Input(1);
    const Tensor& b = Input(2);
    DP_ENFORCE_CODE(w.dtype() == x.dtype() && b.dtype() == x.dtype(), Code::kDType,
                    "X, W and b must share a dtype, got ", InputDesc(0), " ", x.DebugString(), ", ", InputDesc(1), " ",
                    w.DebugString(), ", ", InputDesc(2), " ", b.DebugString());
    FcDims d = ComputeFcDims(def(), x.dims(), w.dims(), b.dims(), args().Int("axis", 1), args().Int("axis_w", 1));
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* wp = w.data<T>();
      const T* bp = b.data<T>();
      T* yp = Output(0, d.out, x.dtype())->template mutable_data<T>();
      GemmXWtBias(d.m, d.n, d.k, xp, wp, bp, relu_, yp);
    });
  }
  const bool relu_ = FcActivationIsRelu(args());
};

// Elements per part of FCGradient's element-wise pass (relu mask and bias
// sums): tens of microseconds of one core.
constexpr int64_t kElementGrain = int64_t{1} << 16;

// Inputs X, W, dY (and Y when the forward op had a fused relu); outputs dW,
// db and, with three outputs, dX.
class FcGradientOp final : public Operator {
 public:
  explicit FcGradientOp(const OpInit& init) : Operator(init) { PrepareGemmKernels(); }

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& w = Input(1);
    const Tensor& dy = Input(2);
    DP_ENFORCE_CODE(w.dtype() == x.dtype() && dy.dtype() == x.dtype(), Code::kDType, "X, W and dY must share a dtype, got ",
                    x.DebugString(), ", ", w.DebugString(), ", ", dy.DebugString());
    const FcGradientDims checked = CheckFcGradientInputs(def(), args(), x.dims(), w.dims(), dy,
                                                         InputSize() == 4 ? &Input(3) : nullptr, InputDesc(2),
                                                         InputSize() == 4 ? InputDesc(3) : std::string());
    const FcDims& d = checked.d;
    const bool relu = checked.relu;
    const int m = BlasInt(d.m, "M"), n = BlasInt(d.n, "N"), k = BlasInt(d.k, "K");
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* wp = w.data<T>();
      const T* dyp = dy.data<T>();
      T* dw = Output(0, w.dims(), w.dtype())->template mutable_data<T>();
      T* db = Output(1, {d.n}, w.dtype())->template mutable_data<T>();
      T* dx = OutputSize() > 2 ? Output(2, x.dims(), x.dtype())->template mutable_data<T>() : nullptr;
      // One pass over dY by parts of its columns: with a fused relu, dZ = dY
      // where Y > 0 into scratch (both loads unconditional so the select
      // vectorises); and db = dZ's column sums, row by row, so each column
      // is summed in row order whatever the split.
      const T* yp = relu ? Input(3).data<T>() : nullptr;
      T* dz = nullptr;
      if (relu) {
        scratch_.resize(static_cast<size_t>(d.m * d.n) * sizeof(T) / sizeof(double) + 1);
        dz = reinterpret_cast<T*>(scratch_.data());
      }
      const int64_t cells = static_cast<int64_t>(m) * n;
      ParallelForChunks(n, std::min<int>(ParallelChunks(cells, kElementGrain), std::max(1, n / 32)), 16,
                        [db, dz, yp, dyp, m, n](int, int64_t lo, int64_t hi) {
                          T* __restrict sum = db;
                          std::fill(sum + lo, sum + hi, T(0));
                          for (int i = 0; i < m; ++i) {
                            const int64_t row = static_cast<int64_t>(i) * n;
                            const T* __restrict g = dyp + row;
                            if (dz != nullptr) {
                              T* __restrict z = dz + row;
                              const T* __restrict yr = yp + row;
                              for (int64_t j = lo; j < hi; ++j) {
                                const T v = g[j];
                                z[j] = yr[j] > T(0) ? v : T(0);
                                sum[j] += z[j];
                              }
                            } else {
                              for (int64_t j = lo; j < hi; ++j) sum[j] += g[j];
                            }
                          }
                        });
      if (relu) dyp = dz;
      if (m == 0 || n == 0 || k == 0) {
        std::fill(dw, dw + static_cast<int64_t>(n) * k, T(0));
        if (dx) std::fill(dx, dx + static_cast<int64_t>(m) * k, T(0));
      } else {
        // dW = dZ^T X and dX = dZ W: both GEMMs' blocks in one parallel region.
        const GemmCall<T> calls[2] = {{CblasTrans, CblasNoTrans, n, k, m, T(1), dyp, n, xp, k, T(0), dw, k},
                                      {CblasNoTrans, CblasNoTrans, m, k, n, T(1), dyp, n, wp, k, T(0), dx, k}};
        GemmBatch(calls, dx ? 2 : 1);
      }
    });
  }
  std::vector<double> scratch_;  // dZ of a fused relu; doubles keep any T aligned
};

DP_OPERATOR_SCHEMA(FC)
    .NumInputs(3)
    .NumOutputs(1)
    .Inputs({"X", "W", "b"})
    .Outputs({"Y"})
    .Arg("axis", ArgKind::kInt, 1, "X is flattened to [prod(dims[:axis]), prod(dims[axis:])]")
    .Arg("axis_w", ArgKind::kInt, 1, "W is flattened likewise")
    .Arg("activation", ArgKind::kString, "none", "\"none\" or \"relu\", applied to Y in the GEMM's epilogue")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      FcDims d = ComputeFcDims(op, in[0].dims, in[1].dims, in[2].dims, args.Int("axis", 1), args.Int("axis_w", 1));
      return std::vector<TensorInfo>{{d.out, in[0].dtype}};
    })
    .Doc("Y = X W^T + b (bias fused into the GEMM), optionally followed by a fused relu. On CUDA the engine "
         "CUBLASLT (the op's engine field) runs it as one cuBLASLt GEMM with the bias and relu as its epilogue; "
         "elsewhere an engine falls back to the plain kernel.");

DP_OPERATOR_SCHEMA(FCGradient)
    .NumInputs(3, 4)
    .NumOutputs(2, 3)
    .Inputs({"X", "W", "dY", "Y"})
    .Outputs({"dW", "db", "dX"})
    .Arg("axis", ArgKind::kInt, 1, "as the forward FC")
    .Arg("axis_w", ArgKind::kInt, 1, "as the forward FC")
    .Arg("activation", ArgKind::kString, "none", "as the forward FC; with \"relu\", input 3 is the forward output Y")
    .ShapeInference([](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
      const Dims& w = in[1].dims;
      const int64_t axis_w = args.Int("axis_w", 1);
      FcDims d = ComputeFcDims(op, in[0].dims, w, FcBiasDims(w, axis_w), args.Int("axis", 1), axis_w);
      std::vector<TensorInfo> out{{w, in[1].dtype}, {{d.n}, in[1].dtype}};
      if (op.outputs.size() > 2) out.push_back(in[0]);
      return out;
    })
    .Doc("Gradient of FC: dW = dY^T X, db = sum of dY's rows, dX = dY W (when there are three outputs).");

DP_REGISTER_CPU_OPERATOR(FC, FcOp);
DP_REGISTER_CPU_OPERATOR(FCGradient, FcGradientOp);

struct FcGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    // dW and db are always computed together (one pass each); unwanted ones
    // go to scratch blobs named after the op's output.
    std::string dw = NeedsGI(1) ? GI(1) : def().outputs[0] + "_fc_dW_unused";
    std::string db = NeedsGI(2) ? GI(2) : def().outputs[0] + "_fc_db_unused";
    std::vector<std::string> outs{dw, db};
    if (NeedsGI(0)) outs.push_back(GI(0));
    std::vector<std::string> ins{I(0), I(1), GO(0)};
    if (FcActivationIsRelu(Reader())) ins.push_back(O(0));
    return {MakeOp("FCGradient", ins, outs, Args())};
  }
};
DP_REGISTER_GRADIENT(FC, FcGradientMaker);

}  // namespace
}  // namespace dp
