// Losses: AveragedLoss, the mean of all elements of X as a scalar;
// SquaredL2Distance, half the squared distance between the rows of X and Y.
#include <algorithm>

#include "ops/cpu/loss_checks.h"
#include "ops/gradient_registry.h"
#include "ops/math/losses.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

void CheckLossGradScalar(const Tensor& dl, const std::string& dld, DType dtype, const char* of) {
  DP_ENFORCE_CODE(dl.numel() == 1 && dl.dtype() == dtype, Code::kShape, dld, " must be one value of ", of,
                  "'s dtype, got ", dl.DebugString());
}

void CheckAveragedLossInput(const Dims& x, const std::string& xd) {
  DP_ENFORCE_CODE(NumElements(x) > 0, Code::kShape, xd, " is empty: the mean of nothing is undefined");
}

std::pair<int64_t, int64_t> L2Rows(const Dims& xd, DType xt, const std::string& x, const Dims& yd, DType yt,
                                   const std::string& y) {
  DP_ENFORCE_CODE(xt == yt, Code::kDType, x, " is ", DTypeName(xt), " but ", y, " is ", DTypeName(yt));
  DispatchFloat(xt, x, [](auto) {});
  DP_ENFORCE_CODE(xd == yd, Code::kShape, x, " has shape ", DimsString(xd), " but ", y, " has ", DimsString(yd),
                  ": they must match");
  DP_ENFORCE_CODE(!xd.empty(), Code::kShape, x, " must have at least one dim (the rows), got a scalar");
  const int64_t n = xd[0];
  Dims row(xd.begin() + 1, xd.end());
  return {n, NumElements(row)};
}

void CheckL2DistanceGrad(const Tensor& dz, const std::string& dzd, int64_t n, DType xt, const std::string& xd) {
  DP_ENFORCE_CODE(dz.dtype() == xt && dz.dims() == Dims{n}, Code::kShape, dzd, " must be [", n, "] of ", xd,
                  "'s dtype, got ", dz.DebugString());
}

namespace {

class AveragedLossOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    CheckAveragedLossInput(x.dims(), InputDesc(0));
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      double sum = 0;  // accumulate in double: losses over large batches
      for (int64_t i = 0; i < x.numel(); ++i) sum += xp[i];
      Output(0, {}, x.dtype())->template mutable_data<T>()[0] = math::MeanOfSum<T>(sum, x.numel());
    });
  }
};

// dX = dLoss / numel(X) everywhere.
class AveragedLossGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& dl = Input(1);
    CheckLossGradScalar(dl, InputDesc(1), x.dtype(), "X");
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T g = math::AveragedLossGradient(dl.data<T>()[0], x.numel());
      T* dx = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      std::fill(dx, dx + x.numel(), g);
    });
  }
};

// Z[i] = 0.5 * sum_j (X[i, j] - Y[i, j])^2 over the flattened rows, summed in
// double (Caffe2's SquaredL2Distance).
class SquaredL2DistanceOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& y = Input(1);
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::pair<int64_t, int64_t> rows =
        L2Rows(x.dims(), x.dtype(), InputDesc(0), y.dims(), y.dtype(), InputDesc(1));
    const int64_t n = rows.first, d = rows.second;
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* yp = y.data<T>();
      T* z = Output(0, {n}, x.dtype())->template mutable_data<T>();
      for (int64_t i = 0; i < n; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < d; ++j) sum += math::SquaredDifference(xp[i * d + j], yp[i * d + j]);
        z[i] = math::HalfOfSum<T>(sum);
      }
    });
  }
};

// dX[i, j] = (X[i, j] - Y[i, j]) * dZ[i]. The gradient of Y is this op with
// X and Y swapped.
class SquaredL2DistanceGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& y = Input(1);
    const Tensor& dz = Input(2);
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::pair<int64_t, int64_t> rows =
        L2Rows(x.dims(), x.dtype(), InputDesc(0), y.dims(), y.dtype(), InputDesc(1));
    const int64_t n = rows.first, d = rows.second;
    CheckL2DistanceGrad(dz, InputDesc(2), n, x.dtype(), InputDesc(0));
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* yp = y.data<T>();
      const T* g = dz.data<T>();
      T* dx = Output(0, x.dims(), x.dtype())->template mutable_data<T>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) dx[i * d + j] = math::L2DistanceGradient(xp[i * d + j], yp[i * d + j], g[i]);
    });
  }
};

DP_OPERATOR_SCHEMA(SquaredL2Distance)
    .NumInputs(2)
    .NumOutputs(1)
    .Inputs({"X", "Y"})
    .Outputs({"Z"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      const int64_t n = L2Rows(in[0].dims, in[0].dtype, StrCat("X '", op.inputs[0], "'"), in[1].dims, in[1].dtype,
                               StrCat("Y '", op.inputs[1], "'"))
                            .first;
      return std::vector<TensorInfo>{{{n}, in[0].dtype}};
    })
    .Doc("Half the squared Euclidean distance between the rows of X and Y (same shape [N, ...], float32 or "
         "float64): Z [N] with Z[i] = 0.5 * sum((X[i] - Y[i])^2). With AveragedLoss: half the mean squared error.");

DP_OPERATOR_SCHEMA(SquaredL2DistanceGradient)
    .NumInputs(3)
    .NumOutputs(1)
    .Inputs({"X", "Y", "dZ"})
    .Outputs({"dX"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      const int64_t n = L2Rows(in[0].dims, in[0].dtype, StrCat("X '", op.inputs[0], "'"), in[1].dims, in[1].dtype,
                               StrCat("Y '", op.inputs[1], "'"))
                            .first;
      DP_ENFORCE_CODE(in[2].dtype == in[0].dtype && in[2].dims == Dims{n}, Code::kShape, "dZ '", op.inputs[2],
                      "' must be [", n, "] ", DTypeName(in[0].dtype), ", got ", DimsString(in[2].dims), " ",
                      DTypeName(in[2].dtype));
      return std::vector<TensorInfo>{in[0]};
    })
    .Doc("Gradient of SquaredL2Distance with respect to X: dX[i] = (X[i] - Y[i]) * dZ[i] (swap X and Y for dY).");

DP_OPERATOR_SCHEMA(AveragedLoss)
    .NumInputs(1)
    .NumOutputs(1)
    .Inputs({"X"})
    .Outputs({"loss"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      CheckAveragedLossInput(in[0].dims, StrCat("X '", op.inputs[0], "'"));
      return std::vector<TensorInfo>{{{}, in[0].dtype}};
    })
    .Doc("Mean of all elements of X (a scalar).");

DP_OPERATOR_SCHEMA(AveragedLossGradient)
    .NumInputs(2)
    .NumOutputs(1)
    .Inputs({"X", "dloss"})
    .Outputs({"dX"})
    .IdenticalTypeAndShape()
    .Doc("dX = dloss / numel(X).");

DP_REGISTER_CPU_OPERATOR(AveragedLoss, AveragedLossOp);
DP_REGISTER_CPU_OPERATOR(AveragedLossGradient, AveragedLossGradientOp);
DP_SIMPLE_GRADIENT(AveragedLoss, { return {MakeOp("AveragedLossGradient", {I(0), GO(0)}, {GI(0)})}; });

DP_REGISTER_CPU_OPERATOR(SquaredL2Distance, SquaredL2DistanceOp);
DP_REGISTER_CPU_OPERATOR(SquaredL2DistanceGradient, SquaredL2DistanceGradientOp);

struct SquaredL2DistanceGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    std::vector<OperatorDef> ops;
    if (NeedsGI(0)) ops.push_back(MakeOp("SquaredL2DistanceGradient", {I(0), I(1), GO(0)}, {GI(0)}));
    if (NeedsGI(1)) ops.push_back(MakeOp("SquaredL2DistanceGradient", {I(1), I(0), GO(0)}, {GI(1)}));
    return ops;
  }
};
DP_REGISTER_GRADIENT(SquaredL2Distance, SquaredL2DistanceGradientMaker);

}  // namespace
}  // namespace dp
