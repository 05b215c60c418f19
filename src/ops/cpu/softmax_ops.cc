// Softmax and LogSoftmax over the inner dims from `axis`, and SoftmaxWithLoss:
// softmax plus the mean cross-entropy against int32 class labels, computed
// together for numerical stability (log-sum-exp with the row maximum
// subtracted).
#include <cmath>
#include <vector>

#include "core/parallel_for.h"
#include "ops/cpu/loss_checks.h"
#include "ops/gradient_registry.h"
#include "ops/math/losses.h"
#include "ops/math/softmax.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

SoftmaxRows SoftmaxRowsAt(const Dims& dims, int64_t axis, const std::string& what) {
  const int ndim = static_cast<int>(dims.size());
  const int a = CanonicalAxis(axis, ndim, what);
  return {DimProduct(dims, 0, a), DimProduct(dims, a, ndim)};
}

void CheckSoftmaxGradInputs(const Tensor& y, const std::string& yd, const Tensor& dy, const std::string& dyd) {
  DP_ENFORCE_CODE(dy.dtype() == y.dtype() && dy.dims() == y.dims(), Code::kShape, dyd, " ", dy.DebugString(),
                  " must match ", yd, " ", y.DebugString());
}

void CheckLogitsAndLabels(const OperatorDef& op, const Dims& x, DType xt, const Dims& label, DType lt, int64_t* rows,
                          int64_t* cols) {
  const std::string xn = StrCat("logits '", op.inputs[0], "'"), ln = StrCat("labels '", op.inputs[1], "'");
  DP_ENFORCE_CODE(x.size() == 2, Code::kShape, xn, " must be 2-D [N, D], got ", DimsString(x));
  DP_ENFORCE_CODE(lt == DType::kInt32, Code::kDType, ln, " must be int32, got ", DTypeName(lt));
  (void)xt;
  bool ok = (label.size() == 1 && label[0] == x[0]) || (label.size() == 2 && label[0] == x[0] && label[1] == 1);
  DP_ENFORCE_CODE(ok, Code::kShape, ln, " ", DimsString(label), " must be [N] or [N, 1] with N = ", x[0], " to match ",
                  xn, " ", DimsString(x));
  *rows = x[0];
  *cols = x[1];
}

void CheckLabelsInRange(const std::string& what, const int32_t* labels, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    if (!math::LabelInRange(labels[i], cols))
      DP_THROW(Code::kOutOfRange, what, ": label ", labels[i], " of sample ", i, " is outside [0, ", cols, ")");
}

void CheckLossWeights(const OperatorDef& op, int index, const Dims& w, DType wt, int64_t rows, DType xt) {
  const std::string wn = StrCat("weights '", op.inputs[static_cast<size_t>(index)], "'");
  DP_ENFORCE_CODE(wt == xt, Code::kDType, wn, " must be ", DTypeName(xt), " like the logits, got ", DTypeName(wt));
  DP_ENFORCE_CODE(NumElements(w) == rows, Code::kShape, wn, " ", DimsString(w), " must hold N = ", rows, " weights");
}

void CheckFusedGradient(const OperatorDef& op, int inputs, int outputs) {
  DP_ENFORCE_CODE(outputs < 3 || inputs < 3, Code::kInvalidArgument, "output 2 '", op.outputs.back(),
                  "' (the fused gradient) takes no weights; weights '", op.inputs.back(),
                  "' need SoftmaxWithLossGradient");
}

namespace {

// Elements per part when these row-wise ops split their rows across the op's
// threads: a few microseconds of one core (an exp and a double add each).
// Results do not depend on the split: each row is computed alone, and the
// loss is summed over the rows in row order afterwards.
constexpr int64_t kRowGrainElements = 512;

int64_t RowGrain(int64_t cols) { return std::max<int64_t>(1, kRowGrainElements / std::max<int64_t>(1, cols)); }

// The maximum of a row x[0, cols), cols > 0.
template <typename T>
T RowMax(const T* x, int64_t cols) {
  T mx = x[0];
  for (int64_t c = 1; c < cols; ++c) mx = std::max(mx, x[c]);
  return mx;
}

// Softmax of one row x[0, cols) into p (which may be x), cols > 0: exp(x -
// max) summed in double, each element times the float inverse of the sum.
// Returns the sum and the row's max (SoftmaxWithLoss's loss needs both). One
// routine for Softmax and SoftmaxWithLoss, so that a Softmax gives the
// softmax of a SoftmaxWithLoss bit for bit (inference nets compute it without
// the loss and its labels: model/inference.cc).
template <typename T>
double SoftmaxRow(const T* x, T* p, int64_t cols, T* max_out) {
  const T mx = RowMax(x, cols);
  double sum = 0;
  for (int64_t c = 0; c < cols; ++c) {
    p[c] = math::SoftmaxExp(x[c], mx);
    sum += static_cast<double>(p[c]);
  }
  const T inv = math::SoftmaxInverse<T>(sum);
  for (int64_t c = 0; c < cols; ++c) p[c] *= inv;
  *max_out = mx;
  return sum;
}

// log(softmax(x)) of one row into y (which may be x), cols > 0: exp(x - max)
// summed in double, then each element shifted by max + log(sum). X is read
// whole before any of y is written.
template <typename T>
void LogSoftmaxRow(const T* x, T* y, int64_t cols) {
  const T mx = RowMax(x, cols);
  double sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += static_cast<double>(math::SoftmaxExp(x[c], mx));
  const T log_sum = math::LogSoftmaxLogSum<T>(sum);
  for (int64_t c = 0; c < cols; ++c) y[c] = math::LogSoftmax(x[c], mx, log_sum);
}

// Softmax and LogSoftmax over the rows of X flattened at `axis`: `Row` is
// the rule for one row of X and Y (which may be X).
template <typename Row>
class RowForwardOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const SoftmaxRows shape = SoftmaxRowsAt(x.dims(), args().Int("axis", 1), InputDesc(0));
    const int64_t rows = shape.rows, cols = shape.cols;
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();  // before Output: Y may be X
      T* yp = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      if (cols > 0)
        ParallelFor(rows, RowGrain(cols), [&](int64_t lo, int64_t hi) {
          for (int64_t r = lo; r < hi; ++r) Row{}(xp + r * cols, yp + r * cols, cols);
        });
    });
  }
};

struct SoftmaxForwardRow {
  template <typename T>
  void operator()(const T* x, T* y, int64_t cols) const {
    T mx;
    SoftmaxRow(x, y, cols, &mx);
  }
};

struct LogSoftmaxForwardRow {
  template <typename T>
  void operator()(const T* x, T* y, int64_t cols) const {
    LogSoftmaxRow(x, y, cols);
  }
};

// Outputs: P (softmax, [N, D]) and loss (scalar) = scale * mean_i(-log P[i, label_i]),
// or a weighted mean with the optional per-sample weights (input 2). With a
// third output (graph/fusion.h: FuseSoftmaxLossGradient) also dX, what
// SoftmaxWithLossGradient computes from P for a constant loss gradient
// grad_seed, each row while it holds P (no weights then).
class SoftmaxWithLossOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& label = Input(1);
    int64_t rows, cols;
    CheckLogitsAndLabels(def(), x.dims(), x.dtype(), label.dims(), label.dtype(), &rows, &cols);
    const Tensor* weight = InputSize() > 2 ? &Input(2) : nullptr;
    if (weight != nullptr) CheckLossWeights(def(), 2, weight->dims(), weight->dtype(), rows, x.dtype());
    CheckFusedGradient(def(), InputSize(), OutputSize());
    double scale = args().Float("scale", 1.0);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const int32_t* lp = label.data<int32_t>();
      const T* wp = weight ? weight->data<T>() : nullptr;
      T* pp = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      // The fused gradient: the factor SoftmaxWithLossGradient takes from a
      // loss gradient holding grad_seed (as T) over `rows` unit weights.
      T* dx = OutputSize() > 2 ? Output(2, x.dims(), x.dtype())->template mutable_data<T>() : nullptr;
      const T g = dx ? static_cast<T>(math::SoftmaxLossGradientFactor(
                           scale, static_cast<double>(static_cast<T>(args().Float("grad_seed", 1.0))),
                           static_cast<double>(rows)))
                     : T(0);
      // One exp per element: the row's sum of exp(x - max) gives both the
      // softmax and -log P[label] = log(sum) - (x[label] - max), which stays
      // accurate when P[label] underflows.
      CheckLabelsInRange(InputDesc(1), lp, rows, cols);
      row_loss_.resize(static_cast<size_t>(rows));
      double* row_loss = row_loss_.data();
      ParallelFor(rows, RowGrain(cols), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const T* xr = xp + i * cols;
          T mx;
          const double sum = SoftmaxRow(xr, pp + i * cols, cols, &mx);
          const double w = wp ? static_cast<double>(wp[i]) : 1.0;
          row_loss[i] = w * math::SoftmaxCrossEntropy(sum, xr[lp[i]], mx);
          if (dx != nullptr) {
            const T* pr = pp + i * cols;
            T* xr_grad = dx + i * cols;
            for (int64_t c = 0; c < cols; ++c) xr_grad[c] = math::SoftmaxWithLossGradient(g, pr[c], c == lp[i]);
          }
        }
      });
      double total = 0, wsum = 0;
      for (int64_t i = 0; i < rows; ++i) {
        total += row_loss[i];
        wsum += wp ? static_cast<double>(wp[i]) : 1.0;
      }
      T* loss = Output(1, {}, x.dtype())->template mutable_data<T>();
      loss[0] = static_cast<T>(math::SoftmaxLossMean(total, wsum, scale));
    });
  }
  std::vector<double> row_loss_;  // each row's weighted loss, summed in row order
};

// The gradients of Softmax and LogSoftmax from their output, row by row:
// `Row` is the rule for one row of Y, dY and dX (dX may be dY).
template <typename Row>
class RowGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& y = Input(0);
    const Tensor& dy = Input(1);
    CheckSoftmaxGradInputs(y, InputDesc(0), dy, InputDesc(1));
    const SoftmaxRows shape = SoftmaxRowsAt(y.dims(), args().Int("axis", 1), InputDesc(0));
    const int64_t rows = shape.rows, cols = shape.cols;
    DispatchFloat(y.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* yp = y.data<T>();
      const T* dyp = dy.data<T>();  // before Output: dX may be dY
      T* dx = Output(0, y.dims(), y.dtype())->template mutable_data<T>();
      ParallelFor(rows, RowGrain(cols), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) Row{}(yp + r * cols, dyp + r * cols, dx + r * cols, cols);
      });
    });
  }
};

// dX = Y * (dY - sum_c(dY * Y)).
struct SoftmaxGradientRow {
  template <typename T>
  void operator()(const T* y, const T* dy, T* dx, int64_t cols) const {
    T dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += y[c] * dy[c];
    for (int64_t c = 0; c < cols; ++c) dx[c] = math::SoftmaxGradient(y[c], dy[c], dot);
  }
};

// dX = dY - exp(Y) * sum_c(dY), the sum in double.
struct LogSoftmaxGradientRow {
  template <typename T>
  void operator()(const T* y, const T* dy, T* dx, int64_t cols) const {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += static_cast<double>(dy[c]);
    const T sumt = static_cast<T>(sum);
    for (int64_t c = 0; c < cols; ++c) dx[c] = math::LogSoftmaxGradient(y[c], dy[c], sumt);
  }
};

// Inputs P (the forward softmax), labels, dloss, optional weights; output
// dX = scale * dloss * w_i / sum(w) * (P - onehot(label)) (w = 1 without weights).
class SoftmaxWithLossGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& p = Input(0);
    const Tensor& label = Input(1);
    const Tensor& dl = Input(2);
    int64_t rows, cols;
    CheckLogitsAndLabels(def(), p.dims(), p.dtype(), label.dims(), label.dtype(), &rows, &cols);
    CheckLossGradScalar(dl, InputDesc(2), p.dtype(), "P");
    const Tensor* weight = InputSize() > 3 ? &Input(3) : nullptr;
    if (weight != nullptr) CheckLossWeights(def(), 3, weight->dims(), weight->dtype(), rows, p.dtype());
    const double scale = args().Float("scale", 1.0);
    DispatchFloat(p.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* pp = p.data<T>();
      const int32_t* lp = label.data<int32_t>();
      const T* wp = weight ? weight->data<T>() : nullptr;
      double wsum = 0;
      for (int64_t i = 0; i < rows; ++i) wsum += wp ? static_cast<double>(wp[i]) : 1.0;
      const double g = math::SoftmaxLossGradientFactor(scale, static_cast<double>(dl.data<T>()[0]), wsum);
      CheckLabelsInRange(InputDesc(1), lp, rows, cols);
      T* dx = Output(0, p.dims(), p.dtype())->template mutable_data<T>();
      // (Twice the rows of the forward per part: no exp here.)
      ParallelFor(rows, 2 * RowGrain(cols), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const int32_t l = lp[i];
          const T gi = math::SampleLossGradient(g, wp, i);
          const T* pr = pp + i * cols;
          T* xr = dx + i * cols;
          for (int64_t c = 0; c < cols; ++c) xr[c] = math::SoftmaxWithLossGradient(gi, pr[c], c == l);
        }
      });
    });
  }
};

// Softmax and LogSoftmax: Y is shaped as X, whose dims must include `axis`.
std::vector<TensorInfo> InferSoftmaxRows(const OperatorDef& op, const ArgReader& args,
                                         const std::vector<TensorInfo>& in) {
  CanonicalAxis(args.Int("axis", 1), static_cast<int>(in[0].dims.size()), StrCat("X '", op.inputs[0], "'"));
  return {in[0]};
}

DP_OPERATOR_SCHEMA(Softmax)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .Arg("axis", ArgKind::kInt, 1, "softmax over dims [axis:] flattened (negative counts from the back)")
    .ShapeInference(InferSoftmaxRows)
    .Doc("Softmax along the flattened inner dims.");

DP_OPERATOR_SCHEMA(LogSoftmax)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .Arg("axis", ArgKind::kInt, 1, "log-softmax over dims [axis:] flattened (negative counts from the back)")
    .ShapeInference(InferSoftmaxRows)
    .Doc("log(Softmax) along the flattened inner dims, computed stably: x - max - log(sum(exp(x - max))).");

DP_OPERATOR_SCHEMA(SoftmaxWithLoss)
    .NumInputs(2, 3)
    .NumOutputs(2, 3)
    .Inputs({"logits", "labels", "weights"})
    .Outputs({"softmax", "loss", "dlogits"})
    .Arg("scale", ArgKind::kFloat, 1.0, "multiplies the loss (data-parallel loss scaling)")
    .Arg("grad_seed", ArgKind::kFloat, 1.0,
         "with output 2: the loss's gradient, a constant, from which dlogits is computed (no weights)")
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      int64_t rows, cols;
      CheckLogitsAndLabels(op, in[0].dims, in[0].dtype, in[1].dims, in[1].dtype, &rows, &cols);
      if (in.size() > 2) CheckLossWeights(op, 2, in[2].dims, in[2].dtype, rows, in[0].dtype);
      CheckFusedGradient(op, static_cast<int>(in.size()), static_cast<int>(op.outputs.size()));
      std::vector<TensorInfo> out{in[0], {{}, in[0].dtype}};
      if (op.outputs.size() > 2) out.push_back(in[0]);
      return out;
    })
    .Doc("Softmax of logits [N, D] and mean cross-entropy against int32 labels [N]; with a third output also "
         "the gradient of the logits for the constant loss gradient grad_seed (the training nets fuse it).");

DP_OPERATOR_SCHEMA(SoftmaxGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{1, 0}})
    .Inputs({"Y", "dY"})
    .Outputs({"dX"})
    .Arg("axis", ArgKind::kInt, 1, "as the forward Softmax")
    .IdenticalTypeAndShape()
    .Doc("Gradient of Softmax from its output: dX = Y * (dY - sum(dY * Y)).");

DP_OPERATOR_SCHEMA(LogSoftmaxGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .AllowInplace({{1, 0}})
    .Inputs({"Y", "dY"})
    .Outputs({"dX"})
    .Arg("axis", ArgKind::kInt, 1, "as the forward LogSoftmax")
    .IdenticalTypeAndShape()
    .Doc("Gradient of LogSoftmax from its output: dX = dY - exp(Y) * sum(dY).");

DP_OPERATOR_SCHEMA(SoftmaxWithLossGradient)
    .NumInputs(3, 4)
    .NumOutputs(1)
    .Inputs({"softmax", "labels", "dloss", "weights"})
    .Outputs({"dlogits"})
    .Arg("scale", ArgKind::kFloat, 1.0, "as the forward op")
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      int64_t rows, cols;
      CheckLogitsAndLabels(op, in[0].dims, in[0].dtype, in[1].dims, in[1].dtype, &rows, &cols);
      return std::vector<TensorInfo>{in[0]};
    })
    .Doc("Gradient of SoftmaxWithLoss with respect to the logits.");

DP_REGISTER_CPU_OPERATOR(Softmax, RowForwardOp<SoftmaxForwardRow>);
DP_REGISTER_CPU_OPERATOR(SoftmaxWithLoss, SoftmaxWithLossOp);
DP_REGISTER_CPU_OPERATOR(SoftmaxGradient, RowGradientOp<SoftmaxGradientRow>);
DP_REGISTER_CPU_OPERATOR(SoftmaxWithLossGradient, SoftmaxWithLossGradientOp);
DP_REGISTER_CPU_OPERATOR(LogSoftmax, RowForwardOp<LogSoftmaxForwardRow>);
DP_REGISTER_CPU_OPERATOR(LogSoftmaxGradient, RowGradientOp<LogSoftmaxGradientRow>);

DP_SIMPLE_GRADIENT(Softmax, { return {MakeOp("SoftmaxGradient", {O(0), GO(0)}, {GI(0)}, Args())}; });
DP_SIMPLE_GRADIENT(LogSoftmax, { return {MakeOp("LogSoftmaxGradient", {O(0), GO(0)}, {GI(0)}, Args())}; });

struct SoftmaxWithLossGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    DP_ENFORCE_CODE(def().outputs.size() == 2, Code::kInvalidNet, label(),
                    ": computes its own gradient (output 2, fused); gradients of it are not supported");
    DP_ENFORCE_CODE(!HasGO(0), Code::kInvalidNet, label(), ": a gradient through its softmax output '",
                    def().outputs[0], "' is not supported; use Softmax and LabelCrossEntropy for that");
    std::vector<std::string> in{O(0), I(1), GO(1)};
    if (NumInputs() > 2) in.push_back(I(2));
    return {MakeOp("SoftmaxWithLossGradient", in, {GI(0)}, Args())};
  }
};
DP_REGISTER_GRADIENT(SoftmaxWithLoss, SoftmaxWithLossGradientMaker);

}  // namespace
}  // namespace dp
