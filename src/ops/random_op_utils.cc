#include "ops/random_op_utils.h"

#include <cmath>
#include <functional>

#include "core/error.h"

namespace dp {

uint64_t RandomOpSeed(const OperatorDef& op, const ArgReader& args) {
  if (args.Has("seed")) return static_cast<uint64_t>(args.Int("seed"));
  return std::hash<std::string>{}(op.outputs.at(0)) ^ 0x5eedULL;
}

DType FillDType(const ArgReader& args, DType like) {
  if (!args.Has("dtype") && like != DType::kUndefined && args.Int("input_as_shape", 0) == 0) return like;
  const int64_t v = args.Int("dtype", static_cast<int64_t>(DType::kFloat32));
  DType dtype;
  DP_ENFORCE_CODE(v >= INT32_MIN && v <= INT32_MAX && DTypeFromInt(static_cast<int32_t>(v), &dtype), Code::kDType,
                  "argument 'dtype' ", v, " is not a dtype");
  return dtype;
}

UniformBounds UniformFillBounds(const ArgReader& args) {
  const double lo = args.Float("min", 0.0), hi = args.Float("max", 1.0);
  DP_ENFORCE(lo <= hi, "argument 'min' (", lo, ") exceeds 'max' (", hi, ")");
  return {lo, hi};
}

GaussianParams GaussianFillParams(const ArgReader& args) {
  const double mean = args.Float("mean", 0.0), stdev = args.Float("std", 1.0);
  DP_ENFORCE(stdev >= 0, "argument 'std' must be >= 0, got ", stdev);
  return {mean, stdev};
}

double XavierScale(const Dims& dims) {
  const int64_t n = NumElements(dims);
  DP_ENFORCE_CODE(!dims.empty() && dims[0] > 0 && n > 0, Code::kShape, "XavierFill needs a non-empty shape, got ",
                  DimsString(dims));
  const double fan_in = static_cast<double>(n) / static_cast<double>(dims[0]);
  return std::sqrt(3.0 / fan_in);
}

double DropoutRatio(const ArgReader& args) {
  const double ratio = args.Float("ratio", 0.5);
  DP_ENFORCE(ratio >= 0.0 && ratio < 1.0, "argument 'ratio' must be in [0, 1), got ", ratio);
  return ratio;
}

bool DropoutIsTest(const ArgReader& args) { return args.Int("is_test", 0) != 0; }

void CheckDropoutOutputs(bool is_test, size_t num_outputs, const std::string& y) {
  DP_ENFORCE(is_test || num_outputs > 1, "in training (is_test=0) Dropout needs output 1 'mask' besides ", y,
             " (the gradient reads it)");
}

void CheckDropoutCounter(const Tensor& counter, const std::string& what) {
  DP_ENFORCE_CODE(counter.dtype() == DType::kInt64 && counter.numel() == 1, Code::kDType, what,
                  " must be an int64 counter of one element, got ", counter.DebugString());
}

void CheckDropoutGradientHasMask(size_t num_inputs) {
  DP_ENFORCE(num_inputs > 1, "in training (is_test=0) DropoutGradient needs input 1, the forward op's mask");
}

void CheckDropoutMask(const TensorInfo& mask, const std::string& mask_what, const TensorInfo& dy,
                      const std::string& dy_what) {
  DP_ENFORCE_CODE(mask.dtype == DType::kUInt8, Code::kDType, mask_what, " must be uint8, got ",
                  DTypeName(mask.dtype));
  DP_ENFORCE_CODE(mask.dims == dy.dims, Code::kShape, mask_what, " has shape ", DimsString(mask.dims), " but ",
                  dy_what, " has ", DimsString(dy.dims));
}

}  // namespace dp
