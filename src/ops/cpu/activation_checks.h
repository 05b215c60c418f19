// The input check of the activations' gradient kernels (ReluGradient,
// SigmoidGradient, TanhGradient on every device) and their shape inference
// (ops/cpu/activation_ops.cc).
#pragma once

#include <string>

#include "core/tensor.h"

namespace dp {

// Y and dY must agree in dtype (kDType) and shape (kShape). `y` / `dy` name
// the blobs in messages.
void CheckYAndGrad(const std::string& y, const Dims& yd, DType yt, const std::string& dy, const Dims& dyd,
                   DType dyt);

}  // namespace dp
