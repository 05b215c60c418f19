// The input check of the activations' gradient kernels (ReluGradient,
// SigmoidGradient, TanhGradient, ClipGradient on every device) and their
// shape inference (ops/cpu/activation_ops.cc), and Clip's bounds.
#pragma once

#include <string>

#include "core/tensor.h"
#include "graph/net_def.h"

namespace dp {

// Clip(Gradient)'s bounds: arguments `min` (absent: -infinity) and `max`
// (absent: +infinity), kInvalidArgument unless min <= max (a NaN bound
// fails too).
struct ClipBounds {
  double lo, hi;
};
ClipBounds ReadClipBounds(const ArgReader& args);

// Y and dY must agree in dtype (kDType) and shape (kShape). `y` / `dy` name
// the blobs in messages.
void CheckYAndGrad(const std::string& y, const Dims& yd, DType yt, const std::string& dy, const Dims& dyd,
                   DType dyt);

}  // namespace dp
