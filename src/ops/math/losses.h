// Per-element formulas of the label losses, AveragedLoss and Accuracy,
// shared by their CPU kernels (ops/cpu) and CUDA kernels (ops/cuda), so that
// the CPU tests cover the arithmetic every CUDA thread runs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace dp::math {

// A class label indexes one of `classes` scores.
DP_HD inline bool LabelInRange(int32_t label, int64_t classes) { return label >= 0 && label < classes; }

// The smallest probability LabelCrossEntropy takes the log of (Caffe2's
// convention): the loss stays finite and the gradient bounded.
template <typename T>
DP_HD inline T CrossEntropyFloor() {
  return static_cast<T>(1e-20);
}

// -log(max(p, floor)): the loss of a sample whose label has probability p.
template <typename T>
DP_HD inline T LabelCrossEntropy(T p) {
  return -std::log(std::max(p, CrossEntropyFloor<T>()));
}

// d/dp of LabelCrossEntropy times dy, with the same floor: a probability that
// has collapsed to zero is still pushed up.
template <typename T>
DP_HD inline T LabelCrossEntropyGradient(T p, T dy) {
  return -dy / std::max(p, CrossEntropyFloor<T>());
}

// Accuracy's ranking: class c ranks above the label when its score is
// higher, or equal at a lower index (ties count against the sample, so the
// result does not depend on sort stability).
template <typename T>
DP_HD inline bool RanksAboveLabel(T score, T label_score, int64_t c, int64_t label) {
  return score > label_score || (score == label_score && c < label);
}

// AveragedLoss: the mean of n values from their sum (accumulated in double).
template <typename T>
DP_HD inline T MeanOfSum(double sum, int64_t n) {
  return static_cast<T>(sum / static_cast<double>(n));
}

// AveragedLossGradient: every element's share of the loss gradient.
template <typename T>
DP_HD inline T AveragedLossGradient(T dloss, int64_t n) {
  return static_cast<T>(static_cast<double>(dloss) / static_cast<double>(n));
}

// SquaredL2Distance: one term (x - y)^2 of a row's sum, in double, and half
// the row's sum; its gradient (x - y) * dz.
template <typename T>
DP_HD inline double SquaredDifference(T x, T y) {
  const double diff = static_cast<double>(x) - static_cast<double>(y);
  return diff * diff;
}
template <typename T>
DP_HD inline T HalfOfSum(double sum) {
  return static_cast<T>(0.5 * sum);
}
template <typename T>
DP_HD inline T L2DistanceGradient(T x, T y, T dz) {
  return (x - y) * dz;
}

// Accuracy: the fraction of n samples counted correct (0 for no samples).
DP_HD inline float AccuracyFraction(int64_t correct, int64_t n) {
  return n > 0 ? static_cast<float>(static_cast<double>(correct) / static_cast<double>(n)) : 0.0f;
}

// How many partial sums the CUDA kernels split a sum of n values into (then
// summed by one block): a fixed function of n, so that the order of the
// additions, and so the result, repeats run to run.
DP_HD inline int64_t SumPartials(int64_t n) {
  const int64_t per_block = 16384;
  return std::min<int64_t>(std::max<int64_t>((n + per_block - 1) / per_block, 1), 256);
}

}  // namespace dp::math
