// Per-element formulas of Softmax, LogSoftmax, SoftmaxWithLoss and their
// gradients, shared by the CPU kernels (ops/cpu/softmax_ops.cc) and the CUDA
// kernels (ops/cuda), so that the CPU tests cover the arithmetic every CUDA
// thread runs. A row's maximum and sums are reductions each kernel does its
// own way (a loop on the CPU, a block reduction on CUDA); the sums are in
// double.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace dp::math {

// exp(x - max): an element's unnormalised softmax, its row's maximum
// subtracted so that no exp overflows.
template <typename T>
DP_HD inline T SoftmaxExp(T x, T row_max) {
  return std::exp(x - row_max);
}

// The factor that normalises a row whose SoftmaxExp values sum to `sum`:
// rounded to T once, then one multiply per element.
template <typename T>
DP_HD inline T SoftmaxInverse(double sum) {
  return static_cast<T>(1.0 / sum);
}

// -log softmax[label] = log(sum) - (x[label] - max), from the row's sum of
// SoftmaxExp: stays accurate when the label's probability underflows.
template <typename T>
DP_HD inline double SoftmaxCrossEntropy(double sum, T x_label, T row_max) {
  return std::log(sum) - static_cast<double>(x_label - row_max);
}

// SoftmaxWithLoss's loss: scale times the weighted mean of the samples'
// losses (total = sum of weight * loss), 0 when the weights sum to 0.
DP_HD inline double SoftmaxLossMean(double total, double weight_sum, double scale) {
  return weight_sum > 0 ? scale * total / weight_sum : 0.0;
}

// SoftmaxWithLossGradient's factor of every sample: scale * dloss / sum(w).
DP_HD inline double SoftmaxLossGradientFactor(double scale, double dloss, double weight_sum) {
  return weight_sum > 0 ? scale * dloss / weight_sum : 0.0;
}

// The factor of sample i: g times its weight (weights may be null: all 1).
template <typename T>
DP_HD inline T SampleLossGradient(double g, const T* weights, int64_t i) {
  return static_cast<T>(weights ? g * static_cast<double>(weights[i]) : g);
}

// dlogits of one element: g * (p - onehot(label)).
template <typename T>
DP_HD inline T SoftmaxWithLossGradient(T g, T p, bool is_label) {
  T d = g * p;
  if (is_label) d -= g;
  return d;
}

// Softmax's input gradient from its output y, the output gradient dy and
// the row's dot(y, dy).
template <typename T>
DP_HD inline T SoftmaxGradient(T y, T dy, T dot) {
  return y * (dy - dot);
}

// The log of a row's sum of SoftmaxExp values (>= 1: the maximum's term is
// 1), rounded to T once per row.
template <typename T>
DP_HD inline T LogSoftmaxLogSum(double sum) {
  return static_cast<T>(std::log(sum));
}

// An element's log-softmax, (x - max) - log(sum): no exp of it is taken, so
// it stays finite (and exact in the shift) where its softmax underflows.
template <typename T>
DP_HD inline T LogSoftmax(T x, T row_max, T log_sum) {
  return (x - row_max) - log_sum;
}

// LogSoftmax's input gradient from its output y, the output gradient dy and
// the row's sum of dy: dy - softmax * sum(dy), the softmax being exp(y).
template <typename T>
DP_HD inline T LogSoftmaxGradient(T y, T dy, T dy_sum) {
  return dy - std::exp(y) * dy_sum;
}

}  // namespace dp::math
