// Helpers shared by kernels and shape inference: dtype dispatch, axis
// handling, broadcasting. Shape rules live here once so that a kernel and
// its schema's inference can never disagree.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/tensor.h"
#include "graph/net_def.h"
#include "ops/math/loss_scaling.h"

namespace dp {

// Calls fn(T{}) with T the C++ type of dtype, among float and double.
template <typename Fn>
auto DispatchFloat(DType dtype, const std::string& what, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    default: DP_THROW(Code::kDType, what, " must be float32 or float64, got ", DTypeName(dtype));
  }
}

// As DispatchFloat, plus int32 and int64.
template <typename Fn>
auto DispatchNumeric(DType dtype, const std::string& what, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    default: DP_THROW(Code::kDType, what, " must be float32, float64, int32 or int64, got ", DTypeName(dtype));
  }
}

// kDType naming both tensors unless `other` (described by od) has x's dtype.
void CheckSameDtype(const Tensor& x, const std::string& xd, const Tensor& other, const std::string& od);

// Elements per part when an elementwise CPU op splits its elements across
// the op's threads: ~20 microseconds of one core's memory traffic.
inline constexpr int64_t kElementwiseGrain = int64_t{1} << 16;

// An iteration counter (Iter's blob, read by LearningRate and the optimizers):
// int64 holding one value, else kDType / kShape naming it as `what`.
void CheckIterationCounter(const Dims& dims, DType dtype, const std::string& what);
// Loss scaling's scalars (the scale, found_inf, good_steps): one float32
// value; `what` names the blob. And its update's arguments, checked
// (ops/cpu/loss_scaling_ops.cc).
void CheckLossScaleScalar(const Dims& dims, DType dtype, const std::string& what);
// The loss scale's blob (model/training.h's dynamic loss scaling): the
// step's gradient seeds read it, and a net computing gradients in fp16 must
// (exec/net.cc checks).
inline const char* kLossScaleBlob = "optimizer/loss_scale";  // float32 []
math::LossScaleArgs ReadLossScaleArgs(const ArgReader& args);
// UnscaleGradients' part of each gradient: a replica of a sharded optimizer
// state unscales and checks its shard alone (PartOfElements of
// ops/math/optimizer_updates.h); 0 of 1 is the whole.
struct UnscaleParts {
  int64_t part = 0, parts = 1;
};
UnscaleParts ReadUnscaleParts(const ArgReader& args);

// Normalises a possibly negative axis for a tensor of rank `ndim`;
// `allow_end` admits axis == ndim (as for "flatten from here").
int CanonicalAxis(int64_t axis, int ndim, const std::string& what, bool allow_end = false);

// Product of dims[begin, end).
int64_t DimProduct(const Dims& dims, int begin, int end);

// NumPy broadcasting of two shapes; throws kShape naming what.
Dims BroadcastDims(const Dims& a, const Dims& b, const std::string& what);

// Output dims of Reshape: `shape` may hold one -1 (inferred) and 0s (copy
// the input's dim at that position).
Dims ReshapeDims(const Dims& in, const std::vector<int64_t>& shape, const std::string& what);

// BLAS and cuBLAS take int sizes and leading dimensions: a tensor's int64
// size passed to them goes through BlasInt, which returns it as an int or
// throws kShape when it does not fit, naming it by `what` (streamed, built
// only on failure: BlasInt(k, "K of X '", name, "'")) and the limit. Never a
// silent wrap.
inline constexpr int64_t kBlasIntMax = std::numeric_limits<int>::max();
template <typename... What>
int BlasInt(int64_t v, const What&... what) {
  if (v < 0 || v > kBlasIntMax) [[unlikely]]
    DP_THROW(Code::kShape, what..., " = ", v, " does not fit BLAS's int (at most ", kBlasIntMax, ")");
  return static_cast<int>(v);
}

// FC: X flattened to [M, K] at `axis`, W [N, K] flattened at `axis_w`, b [N];
// Y has X's dims before axis, then N. Shared by every FC kernel and the
// schema's shape inference; `op` names the blobs in messages. M, N and K
// must fit BLAS's int (BlasInt).
struct FcDims {
  int64_t m, k, n;
  Dims out;
};
FcDims ComputeFcDims(const OperatorDef& op, const Dims& x, const Dims& w, const Dims& b, int64_t axis,
                     int64_t axis_w);

// The bias dims FC expects for W [N, K] flattened at axis_w: [N].
Dims FcBiasDims(const Dims& w, int64_t axis_w);

// FCGradient's inputs X, W, dY and, with a fused relu (activation "relu"),
// the forward output Y (`y`, null when the op has three inputs): checks dY
// against the forward output and Y against dY, and that Y is there exactly
// with the relu. Shared by the CPU and CUDA kernels; `dy_desc` and `y_desc`
// name inputs 2 and 3 in messages.
struct FcGradientDims {
  FcDims d;
  bool relu;
};
FcGradientDims CheckFcGradientInputs(const OperatorDef& op, const ArgReader& args, const Dims& x, const Dims& w,
                                     const Tensor& dy, const Tensor* y, const std::string& dy_desc,
                                     const std::string& y_desc);

// FC's `activation` argument, read by the CPU and CUDA kernels alike: "none"
// (default) or "relu" (fused by graph/fusion.cc from FC followed by Relu);
// kInvalidArgument otherwise. True for "relu".
bool FcActivationIsRelu(const ArgReader& args);

// A kernel's functor, made once when its op is: from the op's arguments
// when it takes them (Clip's bounds), else default-constructed.
template <typename F>
F MakeFromArgs(const ArgReader& args) {
  if constexpr (std::is_constructible_v<F, const ArgReader&>)
    return F(args);
  else
    return F{};
}

}  // namespace dp
