// Batch normalisation's layout and per-channel / per-element formulas,
// shared by the CPU kernels (ops/cpu/batchnorm_kernels.h) and the CUDA
// kernels (ops/cuda/batchnorm_kernels.cu), so that the CPU tests cover the
// arithmetic every CUDA thread runs. Everything is in double, as the CPU
// computes it: statistics, normalisation and gradients round to the data's
// type only when stored. The per-channel sums are reductions each kernel
// does its own way (loops on the CPU, block reductions on CUDA).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace dp::bn {

// X viewed as [N, C, S]: element (n, c, s) at (n * C + c) * S + s.
struct BnDims {
  int64_t n, c, s;
  DP_HD double count() const { return static_cast<double>(n) * static_cast<double>(s); }  // values per channel
  DP_HD int64_t values_per_channel() const { return n * s; }
  // The channel of element i of X.
  DP_HD int64_t channel_of(int64_t i) const { return (i / s) % c; }
  // The element of X holding value j (in [0, n * s)) of channel ch.
  DP_HD int64_t element(int64_t ch, int64_t j) const { return ((j / s) * c + ch) * s + j % s; }
};

// Where the count of values per channel lives: on the device (the count of
// allreduced statistics, read by the kernel) or known to the host.
struct BnCount {
  const double* device;  // null: `host`
  double host;
  DP_HD double value() const { return device ? *device : host; }
};

// The per-channel sums the batch statistics come from: sums of (x - shift)
// and of its square, where shift = BnShift(shift_sum, count) (shift_sum
// null: shift 0).
struct BnSums {
  const double* sum;
  const double* sumsq;
  const double* shift_sum;
};

struct BnMoments {
  double mean, var;  // the variance biased (divided by the count)
};

// The shift the second pass of the statistics centres on: a first pass's
// mean (0 for no values).
DP_HD inline double BnShift(double sum, double count) { return count > 0 ? sum / count : 0.0; }

// Mean and biased variance of `count` values from their sums about `shift`
// (the shifted-data formula; exact when shift is the mean).
DP_HD inline BnMoments BnMomentsFromSums(double sum, double sumsq, double shift, double count) {
  const double m = sum / count;
  return {shift + m, std::max(0.0, sumsq / count - m * m)};
}

DP_HD inline double BnInvStd(double var, double epsilon) { return 1.0 / std::sqrt(var + epsilon); }

// The running statistics: momentum * running + (1 - momentum) * batch, the
// variance folded in being the unbiased one (as PyTorch does).
DP_HD inline double BnRunningMean(double momentum, double running, double mean) {
  return momentum * running + (1 - momentum) * mean;
}
DP_HD inline double BnRunningVar(double momentum, double running, double var, double count) {
  const double unbias = count / (count - 1);
  return momentum * running + (1 - momentum) * var * unbias;
}

// y = (x - mean) * a + b with a = BnScaleFactor(inv_std, scale), b the bias.
DP_HD inline double BnScaleFactor(double inv_std, double scale) { return inv_std * scale; }
DP_HD inline double BnNormalize(double x, double mean, double a, double b) { return (x - mean) * a + b; }

// One value's term of the scale gradient's sum (before the factor inv_std).
DP_HD inline double BnGradTerm(double dy, double x, double mean) { return dy * (x - mean); }

// Training-mode input gradient of one value, with k = BnScaleFactor(inv_std,
// scale) and the channel's means of dy and of dy * xhat:
// dx = k * (dy - mean_dy - xhat * mean_dy_xhat).
DP_HD inline double BnBackwardInput(double x, double dy, double mean, double inv_std, double k, double mean_dy,
                                    double mean_dy_xhat) {
  const double xhat = (x - mean) * inv_std;
  return k * (dy - mean_dy - xhat * mean_dy_xhat);
}

// SpatialBNStats' sums of x and of x^2 over `count` values from their sums
// about the replica's own mean (sum ~ 0 and m2): the spread within the
// replica loses nothing to cancellation.
DP_HD inline double BnStatsSum(double count, double mean, double sum) { return count * mean + sum; }
DP_HD inline double BnStatsSumSq(double count, double mean, double sum, double m2) {
  return m2 + 2 * mean * sum + count * mean * mean;
}

// How many partial sums the CUDA kernels split each channel's values into
// (then summed per channel): a fixed function of the shape, so that the
// order of the additions, and so the result, repeats run to run.
DP_HD inline int64_t BnPartialsPerChannel(const BnDims& d) {
  const int64_t per_block = 16384;
  const int64_t p = (d.values_per_channel() + per_block - 1) / per_block;
  return std::min<int64_t>(std::max<int64_t>(p, 1), 64);
}

// Doubles of scratch the CUDA kernels' partial sums take: two per part.
DP_HD inline int64_t BnPartialsSize(const BnDims& d) { return 2 * d.c * BnPartialsPerChannel(d); }

}  // namespace dp::bn
