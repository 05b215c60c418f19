// SpatialBN's kernels and shape rules, shared by SpatialBN (batch statistics
// of one device) and the synchronised BN ops (statistics over every replica's
// batch, sync_bn_op.cc); the shape rules also by their CUDA kernels (ops/cuda).
// The formulas are ops/math/batchnorm.h's, which the CUDA kernels share.
// Header-only: the kernels are templates and the rest is small.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/math/batchnorm.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp::bn {

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
inline void MomentsFromSums(const double* sum, const double* sumsq, const double* shift, int64_t channels, double count,
                     double* mean, double* var) {
  for (int64_t c = 0; c < channels; ++c) {
    const BnMoments m = BnMomentsFromSums(sum[c], sumsq[c], shift ? shift[c] : 0.0, count);
    mean[c] = m.mean;
    var[c] = m.var;
  }
}

// y = (x - mean[c]) * inv_std[c] * scale[c] + bias[c]; y may be x.
template <typename T>
void NormalizeChannels(const T* x, BnDims d, const double* mean, const double* inv_std, const T* scale, const T* bias,
                       T* y) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c) {
      const double m = mean[c], a = BnScaleFactor(inv_std[c], static_cast<double>(scale[c]));
      const double b = static_cast<double>(bias[c]);
      const int64_t off = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i)
        y[off + i] = static_cast<T>(BnNormalize(static_cast<double>(x[off + i]), m, a, b));
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
        sx += BnGradTerm(g, static_cast<double>(x[off + i]), mean[c]);
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
      const double k = BnScaleFactor(inv_std[c], static_cast<double>(scale[c])), m = mean[c], is = inv_std[c];
      const double mdy = sum_dy[c] / count, mdyx = sum_dy_xhat[c] / count;
      const int64_t off = (n * d.c + c) * d.s;
      for (int64_t i = 0; i < d.s; ++i)
        dx[off + i] = static_cast<T>(
            BnBackwardInput(static_cast<double>(x[off + i]), static_cast<double>(dy[off + i]), m, is, k, mdy, mdyx));
    }
}

// ---- Shape rules shared by the kernels and shape inference --------------------

inline BnDims BnLayout(const std::string& xn, const Dims& x, DType xt) {
  DispatchFloat(xt, xn, [](auto) {});
  DP_ENFORCE_CODE(x.size() >= 2, Code::kShape, xn, " must be [N, C] or [N, C, spatial...], got ", DimsString(x));
  return {x[0], x[1], DimProduct(x, 2, static_cast<int>(x.size()))};
}

// A per-channel input: [C] of X's dtype.
inline void CheckChannelInput(const std::string& name, const Dims& dims, DType dtype, const std::string& xn, const Dims& x,
                       DType xt) {
  DP_ENFORCE_CODE(dtype == xt, Code::kDType, name, " is ", DTypeName(dtype), " but ", xn, " is ", DTypeName(xt));
  DP_ENFORCE_CODE(dims.size() == 1 && dims[0] == x[1], Code::kShape, name, " ", DimsString(dims),
                  " must be [C] with C = ", x[1], " (dim 1 of ", xn, " ", DimsString(x), ")");
}

using InputInfos = Operator::InputInfos;

// Inputs [first, last] are per-channel: [C] of X's (input 0's) dtype.
inline void CheckChannels(const InputInfos& in, size_t first, size_t last) {
  for (size_t i = first; i <= last; ++i)
    CheckChannelInput(in.names[i], *in.dims[i], in.dtypes[i], in.names[0], *in.dims[0], in.dtypes[0]);
}

// Input i has X's (input 0's) shape.
inline void CheckShapeOfX(const InputInfos& in, size_t i) {
  DP_ENFORCE_CODE(*in.dims[i] == *in.dims[0], Code::kShape, in.names[i], " has shape ", DimsString(*in.dims[i]),
                  " but ", in.names[0], " has ", DimsString(*in.dims[0]));
}

// The synchronised ops' statistics (SpatialBNStats, SpatialBNGradStats):
// float64 [2C + 1], per-channel sums then the count of values per channel.
inline void CheckStatsLayout(const Tensor& t, const std::string& desc, int64_t channels) {
  DP_ENFORCE_CODE(t.dtype() == DType::kFloat64, Code::kDType, desc, " is ", t.DebugString(),
                  "; the statistics are float64");
  DP_ENFORCE_CODE(t.dims() == Dims{2 * channels + 1}, Code::kShape, desc, " has shape ", DimsString(t.dims()),
                  ", expected [", 2 * channels + 1, "] (2C + 1 with C = ", channels, ")");
}

struct BnMode {
  bool is_test;
  double epsilon, momentum;
};

inline BnMode ReadMode(const ArgReader& args, size_t num_outputs) {
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
inline BnDims CheckForward(const std::vector<std::string>& names, const std::vector<const Dims*>& dims,
                    const std::vector<DType>& dtypes, bool is_test) {
  BnDims d = BnLayout(names[0], *dims[0], dtypes[0]);
  for (size_t i = 1; i < 5; ++i) CheckChannelInput(names[i], *dims[i], dtypes[i], names[0], *dims[0], dtypes[0]);
  DP_ENFORCE_CODE(is_test || d.count() > 1, Code::kShape, "training needs more than one value per channel, but ",
                  names[0], " ", DimsString(*dims[0]), " has ", d.count());
  return d;
}

// names / dims / dtypes of X, scale, dY, saved_mean, saved_inv_std.
inline BnDims CheckGradient(const std::vector<std::string>& names, const std::vector<const Dims*>& dims,
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
void StoreStats(const std::vector<double>& v, T* out) {
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(v[i]);
}

// The forward of SpatialBN and SyncSpatialBN (inputs X, scale, bias,
// running_mean, running_var; outputs Y and, in training, running_mean,
// running_var in place, saved_mean, saved_inv_std). They differ only in
// where the statistics come from: moments(x, running_mean, running_var,
// mean, var) fills the per-channel mean and biased variance (of the batch,
// of every replica's batch, or the running ones), over `count` values.
class BnForwardOp : public Operator {
 public:
  using Operator::Operator;

 protected:
  template <typename Moments>
  void Forward(const BnMode& mode, const BnDims& d, double count, Moments&& moments) {
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
      moments(xp, running_mean, running_var, mean, var);
      for (size_t c = 0; c < channels; ++c) inv_std[c] = BnInvStd(var[c], mode.epsilon);
      NormalizeChannels(xp, d, mean.data(), inv_std.data(), scale, bias,
                        Output(0, xdims, x.dtype())->template mutable_data<T>());
      if (mode.is_test) return;
      std::vector<double> new_mean(channels), new_var(channels);
      for (size_t c = 0; c < channels; ++c) {
        new_mean[c] = BnRunningMean(mode.momentum, running_mean[c], mean[c]);
        new_var[c] = BnRunningVar(mode.momentum, running_var[c], var[c], count);
      }
      const DType dt = x.dtype();
      StoreStats(new_mean, Output(1, {d.c}, dt)->template mutable_data<T>());
      StoreStats(new_var, Output(2, {d.c}, dt)->template mutable_data<T>());
      StoreStats(mean, Output(3, {d.c}, dt)->template mutable_data<T>());
      StoreStats(inv_std, Output(4, {d.c}, dt)->template mutable_data<T>());
    });
  }
};

}  // namespace dp::bn
