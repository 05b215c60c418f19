// Synchronised batch normalisation: SpatialBN whose statistics cover the
// batches of every data-parallel replica, so that N replicas normalise
// exactly as one device would over the combined batch. Each replica runs
//
//   forward:  SpatialBNStats(X) -> stats                      local sums
//             Allreduce(comm, stats of every replica)          global sums
//             SyncSpatialBN(X, scale, bias, rm, rv, stats) -> (Y, rm, rv, saved_mean, saved_inv_std)
//   backward: SpatialBNGradStats(X, dY, saved_mean, saved_inv_std) -> (dscale, dbias, gstats)
//             Allreduce(comm, gstats of every replica)
//             SyncSpatialBNGradient(X, scale, dY, saved_mean, saved_inv_std, gstats) -> dX
//
// (parallel/sync_bn.h rewrites a replica's SpatialBN ops into these). The
// statistics travel as float64 [2C + 1]: per channel sums, then the count of
// values per channel, so uneven batches weigh exactly. dscale and dbias are
// this replica's own sums, like any param gradient: the gradient allreduce
// adds them up.
#include <cmath>
#include <vector>

#include "ops/gradient_registry.h"
#include "ops/cpu/batchnorm_kernels.h"

namespace dp {
namespace {

using namespace bn;  // NOLINT: the kernels shared with SpatialBN

// A statistics input: float64 [2C + 1] with a positive count.
const double* CheckStats(const Tensor& t, const std::string& desc, int64_t channels) {
  CheckStatsLayout(t, desc, channels);
  const double* p = t.data<double>();
  DP_ENFORCE_CODE(p[2 * channels] >= 1, Code::kInvalidArgument, desc, " counts ", p[2 * channels],
                  " values per channel: it must be allreduced statistics of a non-empty batch");
  return p;
}

// SpatialBNStats(X) -> stats: sum of x, sum of x^2 per channel and the count.
// The squares are this replica's sums about its own mean plus count * mean^2,
// in double: the spread within the replica loses nothing to cancellation.
class SpatialBNStatsOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const BnDims d = BnLayout(InputDesc(0), x.dims(), x.dtype());
    const auto c = static_cast<size_t>(d.c);
    std::vector<double> sum(c), m2(c), mean(c);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.template data<T>();
      ChannelSums(xp, d, nullptr, sum.data(), nullptr);
      const double count = d.count();
      for (size_t k = 0; k < c; ++k) mean[k] = BnShift(sum[k], count);
      ChannelSums(xp, d, mean.data(), sum.data(), m2.data());
    });
    double* out = Output(0, {2 * d.c + 1}, DType::kFloat64)->mutable_data<double>();
    for (size_t k = 0; k < c; ++k) {
      out[k] = BnStatsSum(d.count(), mean[k], sum[k]);  // sum[k]: the (tiny) sum about the mean
      out[c + k] = BnStatsSumSq(d.count(), mean[k], sum[k], m2[k]);
    }
    out[2 * c] = d.count();
  }
};

// SyncSpatialBN(X, scale, bias, running_mean, running_var, stats): SpatialBN in
// training mode with the mean and variance of the allreduced statistics.
class SyncSpatialBNOp final : public BnForwardOp {
 public:
  using BnForwardOp::BnForwardOp;

 private:
  void RunOnDevice() override {
    const BnMode mode = ReadMode(args(), static_cast<size_t>(OutputSize()));
    DP_ENFORCE(!mode.is_test, "SyncSpatialBN is for training; use SpatialBN with is_test=1 for inference");
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = BnLayout(in.names[0], *in.dims[0], in.dtypes[0]);
    CheckChannels(in, 1, 4);
    const auto channels = static_cast<size_t>(d.c);
    const double* stats = CheckStats(Input(5), InputDesc(5), d.c);
    const double count = stats[2 * channels];
    DP_ENFORCE_CODE(count > 1, Code::kShape, "training needs more than one value per channel over all replicas, ",
                    "but ", InputDesc(5), " counts ", count);
    Forward(mode, d, count,
            [&](const auto*, const std::vector<double>&, const std::vector<double>&, std::vector<double>& mean,
                std::vector<double>& var) {
              MomentsFromSums(stats, stats + channels, nullptr, d.c, count, mean.data(), var.data());
            });
  }
};

// SpatialBNGradStats(X, dY, saved_mean, saved_inv_std) -> (dscale, dbias, gstats):
// this replica's scale and bias gradients, and gstats = [sum dy * xhat (C),
// sum dy (C), count] for the allreduce.
class SpatialBNGradStatsOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const InputInfos in = DescribeInputs(0, 4);
    const BnDims d = BnLayout(in.names[0], *in.dims[0], in.dtypes[0]);
    CheckSameDtype(Input(1), InputDesc(1), Input(0), InputDesc(0));
    CheckShapeOfX(in, 1);
    CheckChannels(in, 2, 3);
    const auto channels = static_cast<size_t>(d.c);
    std::vector<double> sum_dy(channels), sum_dy_xhat(channels);
    const Tensor& x = Input(0);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const std::vector<double> mean = ToDouble(Input(2).template data<T>(), d.c);
      const std::vector<double> inv_std = ToDouble(Input(3).template data<T>(), d.c);
      ChannelGradSums(x.template data<T>(), Input(1).template data<T>(), d, mean.data(), inv_std.data(),
                      sum_dy.data(), sum_dy_xhat.data());
      StoreStats(sum_dy_xhat, Output(0, {d.c}, x.dtype())->template mutable_data<T>());
      StoreStats(sum_dy, Output(1, {d.c}, x.dtype())->template mutable_data<T>());
    });
    double* g = Output(2, {2 * d.c + 1}, DType::kFloat64)->mutable_data<double>();
    for (size_t c = 0; c < channels; ++c) {
      g[c] = sum_dy_xhat[c];
      g[channels + c] = sum_dy[c];
    }
    g[2 * channels] = d.count();
  }
};

// SyncSpatialBNGradient(X, scale, dY, saved_mean, saved_inv_std, gstats) -> dX:
// the training-mode input gradient with the sums of every replica.
class SyncSpatialBNGradientOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = CheckGradient(in.names, in.dims, in.dtypes);
    const auto channels = static_cast<size_t>(d.c);
    const double* g = CheckStats(Input(5), InputDesc(5), d.c);
    const Tensor& x = Input(0);
    const Dims xdims = x.dims();
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.template data<T>();
      const T* dyp = Input(2).template data<T>();  // before Output: dX may be dY
      const std::vector<double> mean = ToDouble(Input(3).template data<T>(), d.c);
      const std::vector<double> inv_std = ToDouble(Input(4).template data<T>(), d.c);
      BackwardInput(xp, dyp, d, mean.data(), inv_std.data(), Input(1).template data<T>(), g + channels, g,
                    g[2 * channels], Output(0, xdims, x.dtype())->template mutable_data<T>());
    });
  }
};

// ---- Shape inference --------------------------------------------------------------

// names / dims / dtypes of the first k inputs of a shape-inference call.
InputInfos Describe(const OperatorDef& op, const std::vector<TensorInfo>& in, size_t k,
                    std::initializer_list<const char*> roles) {
  InputInfos r;
  auto role = roles.begin();
  for (size_t i = 0; i < k; ++i, ++role) {
    r.names.push_back(StrCat(*role, " '", op.inputs[i], "'"));
    r.dims.push_back(&in[i].dims);
    r.dtypes.push_back(in[i].dtype);
  }
  return r;
}

TensorInfo StatsInfo(int64_t channels) { return {{2 * channels + 1}, DType::kFloat64}; }

std::vector<TensorInfo> InferStats(const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
  const BnDims d = BnLayout(StrCat("X '", op.inputs[0], "'"), in[0].dims, in[0].dtype);
  return {StatsInfo(d.c)};
}

std::vector<TensorInfo> InferSyncBN(const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
  ReadMode(args, op.outputs.size());
  const InputInfos info = Describe(op, in, 5, {"X", "scale", "bias", "running_mean", "running_var"});
  const BnDims d = CheckForward(info.names, info.dims, info.dtypes, /*is_test=*/true);
  DP_ENFORCE_CODE(in[5].dtype == DType::kFloat64 && in[5].dims == StatsInfo(d.c).dims, Code::kShape, "stats '",
                  op.inputs[5], "' must be float64 [", 2 * d.c + 1, "]");
  std::vector<TensorInfo> out{in[0]};
  out.resize(5, TensorInfo{{d.c}, in[0].dtype});
  return out;
}

std::vector<TensorInfo> InferGradStats(const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
  const BnDims d = BnLayout(StrCat("X '", op.inputs[0], "'"), in[0].dims, in[0].dtype);
  return {{{d.c}, in[0].dtype}, {{d.c}, in[0].dtype}, StatsInfo(d.c)};
}

std::vector<TensorInfo> InferSyncBNGradient(const OperatorDef& op, const ArgReader&,
                                            const std::vector<TensorInfo>& in) {
  const InputInfos info = Describe(op, in, 5, {"X", "scale", "dY", "saved_mean", "saved_inv_std"});
  CheckGradient(info.names, info.dims, info.dtypes);
  return {in[0]};
}

}  // namespace

DP_OPERATOR_SCHEMA(SpatialBNStats)
    .NumInputs(1)
    .NumOutputs(1)
    .Inputs({"X"})
    .Outputs({"stats"})
    .ShapeInference(InferStats)
    .Doc("Per-channel sums of X [N, C, spatial...] and of its squares, and the count: float64 [2C + 1].");

DP_OPERATOR_SCHEMA(SyncSpatialBN)
    .NumInputs(6)
    .NumOutputs(5)
    .AllowInplace({{0, 0}})
    .EnforceInplace({{3, 1}, {4, 2}})
    .Inputs({"X", "scale", "bias", "running_mean", "running_var", "stats"})
    .Outputs({"Y", "running_mean", "running_var", "saved_mean", "saved_inv_std"})
    .Arg("epsilon", ArgKind::kFloat, 1e-5, "added to the variance")
    .Arg("momentum", ArgKind::kFloat, 0.9, "running = momentum * running + (1 - momentum) * batch statistic")
    .Arg("is_test", ArgKind::kInt, 0, "SpatialBN's mode, read as SpatialBN reads it: only 0 (training) is valid here")
    .ShapeInference(InferSyncBN)
    .Doc("SpatialBN (training) normalising with the statistics of every replica (allreduced SpatialBNStats).");

DP_OPERATOR_SCHEMA(SpatialBNGradStats)
    .NumInputs(4)
    .NumOutputs(3)
    .Inputs({"X", "dY", "saved_mean", "saved_inv_std"})
    .Outputs({"dscale", "dbias", "gstats"})
    .ShapeInference(InferGradStats)
    .Doc("This replica's SpatialBN scale and bias gradients, and their sums with the count for the allreduce.");

DP_OPERATOR_SCHEMA(SyncSpatialBNGradient)
    .NumInputs(6)
    .NumOutputs(1)
    .AllowInplace({{2, 0}})
    .Inputs({"X", "scale", "dY", "saved_mean", "saved_inv_std", "gstats"})
    .Outputs({"dX"})
    .ShapeInference(InferSyncBNGradient)
    .Doc("SyncSpatialBN's input gradient from the allreduced SpatialBNGradStats.");

DP_REGISTER_CPU_OPERATOR(SpatialBNStats, SpatialBNStatsOp);
DP_REGISTER_CPU_OPERATOR(SyncSpatialBN, SyncSpatialBNOp);
DP_REGISTER_CPU_OPERATOR(SpatialBNGradStats, SpatialBNGradStatsOp);
DP_REGISTER_CPU_OPERATOR(SyncSpatialBNGradient, SyncSpatialBNGradientOp);
// Built by data parallelism after autodiff; their gradients are the sync
// ops themselves.
DP_NO_GRADIENT(SpatialBNStats);
DP_NO_GRADIENT(SpatialBNGradStats);

}  // namespace dp
