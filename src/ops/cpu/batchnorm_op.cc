// SpatialBN: batch normalisation over NCHW data (or [N, C], or any
// [N, C, spatial...]) with per-channel scale and bias.
//
// Training (is_test=0, 5 outputs): the batch mean and biased variance of each
// channel normalise X; Y = (X - mean) / sqrt(var + epsilon) * scale + bias.
// The running statistics are updated in place (outputs 1, 2 are inputs 3, 4):
// running = momentum * running + (1 - momentum) * batch, where the variance
// folded in is the unbiased one (as PyTorch does). saved_mean and
// saved_inv_std keep the batch statistics for the gradient.
// Inference (is_test=1, 1 output): Y normalised with the running statistics.
//
// Statistics are accumulated in double with two passes (a mean, then sums
// about it), so channels with a large mean and a small spread keep their
// precision.
#include <cmath>
#include <vector>

#include "ops/gradient_registry.h"
#include "ops/cpu/batchnorm_kernels.h"

namespace dp {
namespace {

using namespace bn;  // NOLINT: the kernels of this op

// ---- Operators ------------------------------------------------------------------

class SpatialBNOp final : public BnForwardOp {
 public:
  using BnForwardOp::BnForwardOp;

 private:
  void RunOnDevice() override {
    const BnMode mode = ReadMode(args(), static_cast<size_t>(OutputSize()));
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = CheckForward(in.names, in.dims, in.dtypes, mode.is_test);
    Forward(mode, d, d.count(),
            [&](const auto* xp, const std::vector<double>& running_mean, const std::vector<double>& running_var,
                std::vector<double>& mean, std::vector<double>& var) {
              if (mode.is_test) {
                mean = running_mean;
                var = running_var;
                return;
              }
              const auto channels = static_cast<size_t>(d.c);
              std::vector<double> sum(channels), sumsq(channels), shift(channels);
              ChannelSums(xp, d, nullptr, sum.data(), nullptr);
              for (size_t c = 0; c < channels; ++c) shift[c] = BnShift(sum[c], d.count());
              ChannelSums(xp, d, shift.data(), sum.data(), sumsq.data());
              MomentsFromSums(sum.data(), sumsq.data(), shift.data(), d.c, d.count(), mean.data(), var.data());
            });
  }
};

class SpatialBNGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = CheckGradient(in.names, in.dims, in.dtypes);
    const Tensor& x = Input(0);
    const Dims xdims = x.dims();
    const auto channels = static_cast<size_t>(d.c);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.template data<T>();
      const T* scale = Input(1).template data<T>();
      const T* dyp = Input(2).template data<T>();  // before Output: dX may be dY
      const std::vector<double> mean = ToDouble(Input(3).template data<T>(), d.c);
      const std::vector<double> inv_std = ToDouble(Input(4).template data<T>(), d.c);
      std::vector<double> sum_dy(channels), sum_dy_xhat(channels);
      ChannelGradSums(xp, dyp, d, mean.data(), inv_std.data(), sum_dy.data(), sum_dy_xhat.data());
      const DType dt = x.dtype();
      T* dxp = Output(0, xdims, dt)->template mutable_data<T>();
      BackwardInput(xp, dyp, d, mean.data(), inv_std.data(), scale, sum_dy.data(), sum_dy_xhat.data(),
                    d.count(), dxp);
      StoreStats(sum_dy_xhat, Output(1, {d.c}, dt)->template mutable_data<T>());
      StoreStats(sum_dy, Output(2, {d.c}, dt)->template mutable_data<T>());
    });
  }
};

std::vector<TensorInfo> InferSpatialBN(const OperatorDef& op, const ArgReader& args,
                                       const std::vector<TensorInfo>& in) {
  const BnMode mode = ReadMode(args, op.outputs.size());
  static const char* const kNames[] = {"X", "scale", "bias", "running_mean", "running_var"};
  std::vector<std::string> names;
  std::vector<const Dims*> dims;
  std::vector<DType> dtypes;
  for (size_t i = 0; i < 5; ++i) {
    names.push_back(StrCat(kNames[i], " '", op.inputs[i], "'"));
    dims.push_back(&in[i].dims);
    dtypes.push_back(in[i].dtype);
  }
  const BnDims d = CheckForward(names, dims, dtypes, mode.is_test);
  std::vector<TensorInfo> out{in[0]};
  if (!mode.is_test) out.resize(5, TensorInfo{{d.c}, in[0].dtype});
  return out;
}

std::vector<TensorInfo> InferSpatialBNGradient(const OperatorDef& op, const ArgReader&,
                                               const std::vector<TensorInfo>& in) {
  static const char* const kNames[] = {"X", "scale", "dY", "saved_mean", "saved_inv_std"};
  std::vector<std::string> names;
  std::vector<const Dims*> dims;
  std::vector<DType> dtypes;
  for (size_t i = 0; i < 5; ++i) {
    names.push_back(StrCat(kNames[i], " '", op.inputs[i], "'"));
    dims.push_back(&in[i].dims);
    dtypes.push_back(in[i].dtype);
  }
  const BnDims d = CheckGradient(names, dims, dtypes);
  return {in[0], {{d.c}, in[0].dtype}, {{d.c}, in[0].dtype}};
}

DP_OPERATOR_SCHEMA(SpatialBN)
    .NumInputs(5)
    .NumOutputs(1, 5)
    .AllowInplace({{0, 0}})
    .EnforceInplace({{3, 1}, {4, 2}})
    .Inputs({"X", "scale", "bias", "running_mean", "running_var"})
    .Outputs({"Y", "running_mean", "running_var", "saved_mean", "saved_inv_std"})
    .Arg("epsilon", ArgKind::kFloat, 1e-5, "added to the variance")
    .Arg("momentum", ArgKind::kFloat, 0.9, "running = momentum * running + (1 - momentum) * batch statistic")
    .Arg("is_test", ArgKind::kInt, 0, "1: normalise with the running statistics, 1 output; 0: training, 5 outputs")
    .ShapeInference(InferSpatialBN)
    .Doc("Batch normalisation of X [N, C, spatial...] per channel C; running statistics updated in place.");

DP_OPERATOR_SCHEMA(SpatialBNGradient)
    .NumInputs(5)
    .NumOutputs(3)
    .AllowInplace({{2, 0}})
    .Inputs({"X", "scale", "dY", "saved_mean", "saved_inv_std"})
    .Outputs({"dX", "dscale", "dbias"})
    .ShapeInference(InferSpatialBNGradient)
    .Doc("Training-mode gradient of SpatialBN from the saved batch statistics.");

DP_REGISTER_CPU_OPERATOR(SpatialBN, SpatialBNOp);
DP_REGISTER_CPU_OPERATOR(SpatialBNGradient, SpatialBNGradientOp);

// Gradients of X, scale and bias; the running statistics get none. The
// gradient op always writes all three: those not wanted go to scratch blobs
// named after the output gradient ("<dY>_dscale_unused").
struct SpatialBNGradientMaker final : GradientMaker {
  using GradientMaker::GradientMaker;
  std::vector<OperatorDef> Get() override {
    DP_ENFORCE_CODE(Reader().Int("is_test", 0) == 0 && NumOutputs() == 5, Code::kInvalidNet, label(),
                    ": the gradient of SpatialBN needs training mode (is_test=0, 5 outputs)");
    if (!NeedsGI(0) && !NeedsGI(1) && !NeedsGI(2)) return {};
    auto out = [&](int i, const char* what) { return NeedsGI(i) ? GI(i) : StrCat(GO(0), "_", what, "_unused"); };
    std::vector<std::string> outputs{out(0, "dX"), out(1, "dscale"), out(2, "dbias")};
    return {MakeOp("SpatialBNGradient", {I(0), I(1), GO(0), O(3), O(4)}, std::move(outputs))};
  }
};

}  // namespace

DP_REGISTER_GRADIENT(SpatialBN, SpatialBNGradientMaker);

}  // namespace dp
