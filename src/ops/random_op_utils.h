// Argument rules of the random ops (fills and Dropout), shared by their CPU
// kernels (ops/cpu), their CUDA kernels (ops/cuda) and shape inference, so
// that every device accepts the same arguments with the same messages.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "graph/net_def.h"
#include "ops/op_schema.h"

namespace dp {

// The seed of a random op: argument `seed`, else a hash of output 0's name
// (an init net gives the same values every time, different ones per blob).
uint64_t RandomOpSeed(const OperatorDef& op, const ArgReader& args);

// A fill's output dtype: argument `dtype`, checked; without it the input's
// dtype `like` when the output is shaped like an input (gradient seeds,
// zeroed state), else float32.
DType FillDType(const ArgReader& args, DType like = DType::kUndefined);

// UniformFill's checked [min, max).
struct UniformBounds {
  double lo, hi;
};
UniformBounds UniformFillBounds(const ArgReader& args);

// GaussianFill's checked mean and std.
struct GaussianParams {
  double mean, stdev;
};
GaussianParams GaussianFillParams(const ArgReader& args);

// XavierFill's half-width sqrt(3 / fan_in), fan_in = numel / dim 0; the
// shape must be non-empty.
double XavierScale(const Dims& dims);

// Dropout's checked `ratio` in [0, 1), and whether it runs in test mode.
double DropoutRatio(const ArgReader& args);
bool DropoutIsTest(const ArgReader& args);
// Training needs output 1, the mask, besides Y (described by y).
void CheckDropoutOutputs(bool is_test, size_t num_outputs, const std::string& y);
// Dropout's optional input 1: an int64 counter of one element.
void CheckDropoutCounter(const Tensor& counter, const std::string& what);
// DropoutGradient in training reads input 1, the forward op's mask.
void CheckDropoutGradientHasMask(size_t num_inputs);
// DropoutGradient's mask: uint8 with dY's dims (kernels and inference).
void CheckDropoutMask(const TensorInfo& mask, const std::string& mask_what, const TensorInfo& dy,
                      const std::string& dy_what);

}  // namespace dp
