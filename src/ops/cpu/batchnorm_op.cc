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

#include "autodiff/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

// X viewed as [N, C, S]: element (n, c, s) at (n * C + c) * S + s.
struct BnDims {
  int64_t n, c, s;
  double count() const { return static_cast<double>(n) * static_cast<double>(s); }  // values per channel
};

// ---- Building blocks ---------------------------------------------------------
// Kept small and free of operator state so that a synchronised BN (statistics
// over every replica's batch) can reuse them: each replica computes its
// per-channel sums with ChannelSums (about a shift common to all replicas,
// e.g. a first all-reduced mean), all-reduces the sums and counts, derives the
// moments with MomentsFromSums and normalises with NormalizeChannels; the
// gradient all-reduces the ChannelGradSums results before BackwardInput.

// Per channel, the sums over N and S of (x - shift[c]) and of its square, in
// double; shift == nullptr means 0, sumsq == nullptr skips the squares.
template <typename T>
void ChannelSums(const T* x, BnDims d, const double* shift, double* sum, double* sumsq) {
  for (int64_t c = 0; c < d.c; ++c) {
    const double k = shift ? shift[c] : 0.0;
    double s1 = 0, s2 = 0;
    for (int64_t n = 0; n < d.n; ++n) {
      const T* p = x + (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) {
        const double v = static_cast<double>(p[i]) - k;
        s1 += v;
        s2 += v * v;
      }
    }
    sum[c] = s1;
    if (sumsq) sumsq[c] = s2;
  }
}

// Mean and biased variance of `count` values per channel from their sums
// about `shift` (the shifted-data formula; exact when shift is the mean).
void MomentsFromSums(const double* sum, const double* sumsq, const double* shift, int64_t channels, double count,
                     double* mean, double* var) {
  for (int64_t c = 0; c < channels; ++c) {
    const double m = sum[c] / count;
    mean[c] = (shift ? shift[c] : 0.0) + m;
    var[c] = std::max(0.0, sumsq[c] / count - m * m);
  }
}

// y = (x - mean[c]) * inv_std[c] * scale[c] + bias[c]; y may be x.
template <typename T>
void NormalizeChannels(const T* x, BnDims d, const double* mean, const double* inv_std, const T* scale, const T* bias,
                       T* y) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c) {
      const double m = mean[c], a = inv_std[c] * static_cast<double>(scale[c]), b = static_cast<double>(bias[c]);
      const int64_t off = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) y[off + i] = static_cast<T>((static_cast<double>(x[off + i]) - m) * a + b);
    }
}

// Per channel: sum_dy = sum of dy (the bias gradient) and sum_dy_xhat = sum of
// dy * (x - mean) * inv_std (the scale gradient).
template <typename T>
void ChannelGradSums(const T* x, const T* dy, BnDims d, const double* mean, const double* inv_std, double* sum_dy,
                     double* sum_dy_xhat) {
  for (int64_t c = 0; c < d.c; ++c) {
    double s = 0, sx = 0;
    for (int64_t n = 0; n < d.n; ++n) {
      const int64_t off = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) {
        const double g = static_cast<double>(dy[off + i]);
        s += g;
        sx += g * (static_cast<double>(x[off + i]) - mean[c]);
      }
    }
    sum_dy[c] = s;
    sum_dy_xhat[c] = sx * inv_std[c];
  }
}

// Training-mode input gradient over `count` values per channel:
// dx = scale * inv_std * (dy - sum_dy / count - xhat * sum_dy_xhat / count); dx may be dy.
template <typename T>
void BackwardInput(const T* x, const T* dy, BnDims d, const double* mean, const double* inv_std, const T* scale,
                   const double* sum_dy, const double* sum_dy_xhat, double count, T* dx) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c) {
      const double k = static_cast<double>(scale[c]) * inv_std[c], m = mean[c], is = inv_std[c];
      const double mdy = sum_dy[c] / count, mdyx = sum_dy_xhat[c] / count;
      const int64_t off = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i) {
        const double xhat = (static_cast<double>(x[off + i]) - m) * is;
        dx[off + i] = static_cast<T>(k * (static_cast<double>(dy[off + i]) - mdy - xhat * mdyx));
      }
    }
}

// ---- Shape rules shared by the kernels and shape inference --------------------

BnDims BnLayout(const std::string& xn, const Dims& x, DType xt) {
  DispatchFloat(xt, xn, [](auto) {});
  DP_ENFORCE_CODE(x.size() >= 2, Code::kShape, xn, " must be [N, C] or [N, C, spatial...], got ", DimsString(x));
  return {x[0], x[1], DimProduct(x, 2, static_cast<int>(x.size()))};
}

// A per-channel input: [C] of X's dtype.
void CheckChannelInput(const std::string& name, const Dims& dims, DType dtype, const std::string& xn, const Dims& x,
                       DType xt) {
  DP_ENFORCE_CODE(dtype == xt, Code::kDType, name, " is ", DTypeName(dtype), " but ", xn, " is ", DTypeName(xt));
  DP_ENFORCE_CODE(dims.size() == 1 && dims[0] == x[1], Code::kShape, name, " ", DimsString(dims),
                  " must be [C] with C = ", x[1], " (dim 1 of ", xn, " ", DimsString(x), ")");
}

struct BnMode {
  bool is_test;
  double epsilon, momentum;
};

BnMode ReadMode(const ArgReader& args, size_t num_outputs) {
  BnMode m{args.Int("is_test", 0) != 0, args.Float("epsilon", 1e-5), args.Float("momentum", 0.9)};
  DP_ENFORCE(m.epsilon >= 0, "argument 'epsilon' must be >= 0, got ", m.epsilon);
  DP_ENFORCE(m.momentum >= 0 && m.momentum <= 1, "argument 'momentum' must be in [0, 1], got ", m.momentum);
  if (m.is_test)
    DP_ENFORCE(num_outputs == 1, "with is_test=1 SpatialBN has 1 output (Y), got ", num_outputs);
  else
    DP_ENFORCE(num_outputs == 5, "in training (is_test=0) SpatialBN has 5 outputs (Y, running_mean, running_var, ",
               "saved_mean, saved_inv_std), got ", num_outputs);
  return m;
}

// names / dims / dtypes of X, scale, bias, running_mean, running_var.
BnDims CheckForward(const std::vector<std::string>& names, const std::vector<const Dims*>& dims,
                    const std::vector<DType>& dtypes, bool is_test) {
  BnDims d = BnLayout(names[0], *dims[0], dtypes[0]);
  for (size_t i = 1; i < 5; ++i) CheckChannelInput(names[i], *dims[i], dtypes[i], names[0], *dims[0], dtypes[0]);
  DP_ENFORCE_CODE(is_test || d.count() > 1, Code::kShape, "training needs more than one value per channel, but ",
                  names[0], " ", DimsString(*dims[0]), " has ", d.count());
  return d;
}

// names / dims / dtypes of X, scale, dY, saved_mean, saved_inv_std.
BnDims CheckGradient(const std::vector<std::string>& names, const std::vector<const Dims*>& dims,
                     const std::vector<DType>& dtypes) {
  BnDims d = BnLayout(names[0], *dims[0], dtypes[0]);
  DP_ENFORCE_CODE(dtypes[2] == dtypes[0], Code::kDType, names[2], " is ", DTypeName(dtypes[2]), " but ", names[0],
                  " is ", DTypeName(dtypes[0]));
  DP_ENFORCE_CODE(*dims[2] == *dims[0], Code::kShape, names[2], " has shape ", DimsString(*dims[2]), " but ", names[0],
                  " has ", DimsString(*dims[0]));
  for (size_t i : {size_t{1}, size_t{3}, size_t{4}})
    CheckChannelInput(names[i], *dims[i], dtypes[i], names[0], *dims[0], dtypes[0]);
  return d;
}

template <typename T>
std::vector<double> ToDouble(const T* p, int64_t n) {
  return std::vector<double>(p, p + n);
}

template <typename T>
void Store(const std::vector<double>& v, T* out) {
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(v[i]);
}

// ---- Operators ------------------------------------------------------------------

class SpatialBNOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const BnMode mode = ReadMode(args(), static_cast<size_t>(OutputSize()));
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = CheckForward(in.names, in.dims, in.dtypes, mode.is_test);
    const Tensor& x = Input(0);
    const Dims xdims = x.dims();
    const auto channels = static_cast<size_t>(d.c);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      // Every input pointer before any Output: Y may be X, and the running
      // statistics are written in place.
      const T* xp = x.template data<T>();
      const T* scale = Input(1).template data<T>();
      const T* bias = Input(2).template data<T>();
      const std::vector<double> running_mean = ToDouble(Input(3).template data<T>(), d.c);
      const std::vector<double> running_var = ToDouble(Input(4).template data<T>(), d.c);
      std::vector<double> mean(channels), var(channels), inv_std(channels);
      if (mode.is_test) {
        mean = running_mean;
        var = running_var;
      } else {
        std::vector<double> sum(channels), sumsq(channels), shift(channels);
        ChannelSums(xp, d, nullptr, sum.data(), nullptr);
        for (size_t c = 0; c < channels; ++c) shift[c] = sum[c] / d.count();
        ChannelSums(xp, d, shift.data(), sum.data(), sumsq.data());
        MomentsFromSums(sum.data(), sumsq.data(), shift.data(), d.c, d.count(), mean.data(), var.data());
      }
      for (size_t c = 0; c < channels; ++c) inv_std[c] = 1.0 / std::sqrt(var[c] + mode.epsilon);
      T* yp = Output(0, xdims, x.dtype())->template mutable_data<T>();
      NormalizeChannels(xp, d, mean.data(), inv_std.data(), scale, bias, yp);
      if (mode.is_test) return;
      const double unbias = d.count() / (d.count() - 1);
      std::vector<double> new_mean(channels), new_var(channels);
      for (size_t c = 0; c < channels; ++c) {
        new_mean[c] = mode.momentum * running_mean[c] + (1 - mode.momentum) * mean[c];
        new_var[c] = mode.momentum * running_var[c] + (1 - mode.momentum) * var[c] * unbias;
      }
      const DType dt = x.dtype();
      Store(new_mean, Output(1, {d.c}, dt)->template mutable_data<T>());
      Store(new_var, Output(2, {d.c}, dt)->template mutable_data<T>());
      Store(mean, Output(3, {d.c}, dt)->template mutable_data<T>());
      Store(inv_std, Output(4, {d.c}, dt)->template mutable_data<T>());
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
      Store(sum_dy_xhat, Output(1, {d.c}, dt)->template mutable_data<T>());
      Store(sum_dy, Output(2, {d.c}, dt)->template mutable_data<T>());
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
    .Arg("epsilon", "added to the variance; default 1e-5")
    .Arg("momentum", "running = momentum * running + (1 - momentum) * batch statistic; default 0.9")
    .Arg("is_test", "1: normalise with the running statistics, 1 output; 0 (default): training, 5 outputs")
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
