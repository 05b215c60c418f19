// Input layout, input checks and arguments of the optimizer update ops
// (SGD, MomentumSGD, Adam, Adagrad, BmufUpdate) and of their multi-tensor
// twins (MultiTensorSGD, ...), shared by their CPU kernels
// (ops/cpu/optimizer_ops.cc, multi_tensor_update_ops.cc, bmuf_op.cc), their
// CUDA kernels (ops/cuda/optimizer_ops.cc, bmuf_op.cc), shape inference and
// the pass that fuses updates (ops/update_fusion.h), so that every device
// accepts the same nets with the same messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "graph/net_def.h"
#include "ops/math/optimizer_updates.h"
#include "ops/op_schema.h"
#include "ops/op_utils.h"

namespace dp {

// Inputs are param, grad, num_states state tensors, lr, then iter if the
// optimizer reads one; outputs are param and the states, each in place.
// Extra gradients (replicas sharing a param) follow the last input.
struct UpdateLayout {
  int num_states;
  bool has_iter;
  int lr() const { return 2 + num_states; }
  int iter() const { return 3 + num_states; }
  int num_inputs() const { return has_iter ? 4 + num_states : 3 + num_states; }  // without extra gradients
};

inline constexpr UpdateLayout kSgdLayout{0, false};
inline constexpr UpdateLayout kMomentumLayout{1, false};
inline constexpr UpdateLayout kAdamLayout{2, true};
inline constexpr UpdateLayout kAdagradLayout{1, false};

// The one-param update types and their layouts; nullptr for another type.
inline const UpdateLayout* FindUpdateLayout(const std::string& type) {
  if (type == "SGD") return &kSgdLayout;
  if (type == "MomentumSGD") return &kMomentumLayout;
  if (type == "Adam") return &kAdamLayout;
  if (type == "Adagrad") return &kAdagradLayout;
  return nullptr;
}

// A multi-tensor update (MultiTensorSGD, MultiTensorMomentumSGD,
// MultiTensorAdam, MultiTensorAdagrad: "MultiTensor" + the one-param type)
// updates `tensors` params with one op. Inputs: the params, then each state
// (state k of param i at (1 + k) * tensors + i), then the gradients, lr and
// iter; outputs: the params and states, output o in place of input o (so
// the schema's EnforceInplaceAll(0) holds the in-place rule for any count).
inline constexpr int kMaxMultiTensors = 4096;
struct MultiUpdateLayout {
  UpdateLayout one;
  int tensors;
  int state(int k, int i) const { return (1 + k) * tensors + i; }
  int grad(int i) const { return (1 + one.num_states) * tensors + i; }
  int lr() const { return (2 + one.num_states) * tensors; }
  int iter() const { return lr() + 1; }
  int num_inputs() const { return lr() + (one.has_iter ? 2 : 1); }
  int num_outputs() const { return (1 + one.num_states) * tensors; }
  // The input of tensor i that is input j of the one-param layout.
  int Input(int j, int i) const {
    if (j == 0) return i;
    if (j == 1) return grad(i);
    if (j < 2 + one.num_states) return state(j - 2, i);
    return j == one.lr() ? lr() : iter();
  }
};
inline std::string MultiTensorUpdateType(const std::string& one_param_type) { return "MultiTensor" + one_param_type; }

// The layout of a multi-tensor op with these counts (kInvalidArgument when
// they fit no number of tensors).
inline MultiUpdateLayout ReadMultiUpdateLayout(UpdateLayout one, int inputs, int outputs) {
  const int per_tensor = 1 + one.num_states;
  const MultiUpdateLayout layout{one, outputs / per_tensor};
  DP_ENFORCE(outputs % per_tensor == 0 && layout.tensors >= 1 && inputs == layout.num_inputs(),
             "a multi-tensor update of N params has ", per_tensor, " N outputs (the params",
             one.num_states > 0 ? " and their states" : "", ") and ", per_tensor + 1, " N + ",
             one.has_iter ? 2 : 1, " inputs (those, the gradients, lr", one.has_iter ? ", iter" : "", "), got ",
             outputs, " outputs and ", inputs, " inputs");
  return layout;
}

inline bool IsFloatDType(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

// The checked part/parts arguments: 0 <= part < parts. With sharded_state
// (ZeRO-1: each replica keeps the state of its part alone) the state tensors
// are 1-D and hold the part's elements only; no other op updates the param.
struct UpdateParts {
  int64_t part, parts;
  bool sharded_state;
};
inline UpdateParts ReadUpdateParts(const ArgReader& args) {
  const int64_t part = args.Int("part", 0), parts = args.Int("parts", 1);
  DP_ENFORCE(parts >= 1 && part >= 0 && part < parts, "arguments 'part' and 'parts' must satisfy 0 <= part < ",
             "parts, got part ", part, " of ", parts);
  return {part, parts, args.Int("sharded_state", 0) != 0};
}

// info(i) -> TensorInfo of input i; name(i) -> "grad 'w_grad'".
// `inputs` counts the extra gradients too.
// With parts.sharded_state the states are [the part's length].
template <typename Info, typename Name>
void CheckUpdateInputs(const UpdateLayout& layout, int inputs, Info info, Name name, const UpdateParts& parts) {
  const TensorInfo p = info(0);
  DP_ENFORCE_CODE(IsFloatDType(p.dtype), Code::kDType, name(0), " must be float32 or float64, got ",
                  DTypeName(p.dtype));
  std::vector<int> like_param;  // grads and states
  for (int i = 1; i < 2 + layout.num_states; ++i) like_param.push_back(i);
  for (int i = layout.num_inputs(); i < inputs; ++i) like_param.push_back(i);
  const ElementRange part = PartOfElements(NumElements(p.dims), parts.part, parts.parts);
  const Dims shard{part.end - part.begin};
  for (int i : like_param) {
    const TensorInfo t = info(i);
    DP_ENFORCE_CODE(t.dtype == p.dtype, Code::kDType, name(i), " is ", DTypeName(t.dtype), " but ", name(0), " is ",
                    DTypeName(p.dtype));
    const bool state = i >= 2 && i < 2 + layout.num_states;
    if (state && parts.sharded_state) {
      DP_ENFORCE_CODE(t.dims == shard, Code::kShape, name(i), " has shape ", DimsString(t.dims), " but the ",
                      "sharded state of part ", parts.part, " of ", parts.parts, " of ", name(0), " ",
                      DimsString(p.dims), " is ", DimsString(shard));
      continue;
    }
    DP_ENFORCE_CODE(t.dims == p.dims, Code::kShape, name(i), " has shape ", DimsString(t.dims), " but ", name(0),
                    " has ", DimsString(p.dims));
  }
  const TensorInfo lr = info(layout.lr());
  DP_ENFORCE_CODE(IsFloatDType(lr.dtype), Code::kDType, name(layout.lr()), " must be float32 or float64, got ",
                  DTypeName(lr.dtype));
  DP_ENFORCE_CODE(NumElements(lr.dims) == 1, Code::kShape, name(layout.lr()), " must hold one value, got shape ",
                  DimsString(lr.dims));
  if (layout.has_iter) {
    const TensorInfo it = info(layout.iter());
    CheckIterationCounter(it.dims, it.dtype, name(layout.iter()));
  }
}

// "param 2", "lr": the one-param op's role of input j for tensor i (lr and
// iter, which every tensor shares, without a number).
inline std::string MultiInputRole(const std::string& one_param_type, const MultiUpdateLayout& layout, int j, int i) {
  const OpSchema* schema = OpSchemaRegistry::Find(one_param_type);
  const std::string role = schema != nullptr ? schema->InputName(static_cast<size_t>(j)) : StrCat("input ", j);
  return j == layout.one.lr() || (layout.one.has_iter && j == layout.one.iter()) ? role : StrCat(role, " ", i);
}

// Every tensor's inputs checked as its one-param op checks them; name(j, i)
// describes input j of the one-param layout for tensor i.
template <typename Info, typename Name>
void CheckMultiUpdateInputs(const MultiUpdateLayout& layout, Info info, Name name, const UpdateParts& parts) {
  for (int i = 0; i < layout.tensors; ++i)
    CheckUpdateInputs(
        layout.one, layout.one.num_inputs(), [&](int j) { return info(layout.Input(j, i)); },
        [&](int j) { return name(j, i); }, parts);
}

// With parts > 1 the ops updating the other parts may be running: none of
// them may replace an output's storage (copy-on-write), so each must be
// writable where it is (MakeWritable before the group).
inline void CheckWritableForParts(const Tensor& out, const std::string& what, const UpdateParts& parts) {
  DP_ENFORCE_CODE(out.writable_in_place(), Code::kFailedPrecondition, what,
                  " is caller memory or shared with another holder, so part ", parts.part, " of ", parts.parts,
                  " cannot update it in place: run MakeWritable on it before the update's parts");
}

struct MomentumArgs {
  double momentum, weight_decay;
  bool nesterov;
};
inline MomentumArgs ReadMomentumArgs(const ArgReader& args) {
  return {args.Float("momentum", 0.9), args.Float("weight_decay", 0.0), args.Int("nesterov", 0) != 0};
}

inline AdamHyper ReadAdamArgs(const ArgReader& args) {
  const AdamHyper h{args.Float("beta1", 0.9), args.Float("beta2", 0.999), args.Float("epsilon", 1e-8),
                    args.Float("weight_decay", 0.0)};
  DP_ENFORCE(h.beta1 >= 0 && h.beta1 < 1, "argument 'beta1' must be in [0, 1), got ", h.beta1);
  DP_ENFORCE(h.beta2 >= 0 && h.beta2 < 1, "argument 'beta2' must be in [0, 1), got ", h.beta2);
  DP_ENFORCE(h.epsilon >= 0, "argument 'epsilon' must be >= 0, got ", h.epsilon);
  return h;
}

struct AdagradArgs {
  double epsilon, decay, weight_decay;
};
inline AdagradArgs ReadAdagradArgs(const ArgReader& args) {
  const AdagradArgs a{args.Float("epsilon", 1e-10), args.Float("decay", 1.0), args.Float("weight_decay", 0.0)};
  DP_ENFORCE(a.epsilon >= 0, "argument 'epsilon' must be >= 0, got ", a.epsilon);
  DP_ENFORCE(a.decay >= 0, "argument 'decay' must be >= 0, got ", a.decay);
  return a;
}

struct BmufArgs {
  double block_lr, block_momentum;
  bool nesterov;
};
// The arguments each update's schema declares, for the one-param ops and
// their multi-tensor twins alike.
inline OpSchema& DeclareUpdatePartArgs(OpSchema& s) {
  return s.Arg("part", ArgKind::kInt, 0, "which of the parts this op updates")
      .Arg("parts", ArgKind::kInt, 1, "contiguous parts of the elements, one updated here (1: all)")
      .Arg("sharded_state", ArgKind::kInt, 0,
           "1: the state tensors hold this part's elements alone, 1-D (a sharded optimizer state, ZeRO-1)");
}
inline OpSchema& DeclareSgdArgs(OpSchema& s) {
  return DeclareUpdatePartArgs(s.Arg("weight_decay", ArgKind::kFloat, 0.0, "L2 penalty added to the gradient"));
}
inline OpSchema& DeclareMomentumSgdArgs(OpSchema& s) {
  return DeclareUpdatePartArgs(s.Arg("momentum", ArgKind::kFloat, 0.9, "mu")
                                   .Arg("nesterov", ArgKind::kInt, 0, "1: Nesterov momentum")
                                   .Arg("weight_decay", ArgKind::kFloat, 0.0, "L2 penalty added to the gradient"));
}
inline OpSchema& DeclareAdamArgs(OpSchema& s) {
  return DeclareUpdatePartArgs(
      s.Arg("beta1", ArgKind::kFloat, 0.9, "decay of the first moment m")
          .Arg("beta2", ArgKind::kFloat, 0.999, "decay of the second moment v")
          .Arg("epsilon", ArgKind::kFloat, 1e-8, "added after the bias-corrected square root")
          .Arg("weight_decay", ArgKind::kFloat, 0.0, "L2 penalty added to the gradient"));
}
inline OpSchema& DeclareAdagradArgs(OpSchema& s) {
  return DeclareUpdatePartArgs(s.Arg("epsilon", ArgKind::kFloat, 1e-10, "added after the square root")
                                   .Arg("decay", ArgKind::kFloat, 1.0, "factor on the accumulated squares")
                                   .Arg("weight_decay", ArgKind::kFloat, 0.0, "L2 penalty added to the gradient"));
}

inline BmufArgs ReadBmufArgs(const ArgReader& args) {
  const BmufArgs a{args.Float("block_lr", 1.0), args.Float("block_momentum", 0.0), args.Int("nesterov", 0) != 0};
  DP_ENFORCE(a.block_lr > 0, "argument 'block_lr' must be > 0, got ", a.block_lr);
  DP_ENFORCE(a.block_momentum >= 0 && a.block_momentum < 1, "argument 'block_momentum' must be in [0, 1), got ",
             a.block_momentum);
  return a;
}

// BmufUpdate's Wg and Delta (t, described by td) have W's dtype and dims.
inline void CheckBmufInput(const Tensor& w, const std::string& wd, const Tensor& t, const std::string& td) {
  CheckSameDtype(w, wd, t, td);
  DP_ENFORCE_CODE(t.dims() == w.dims(), Code::kShape, td, " ", DimsString(t.dims()), " does not match ", wd, " ",
                  DimsString(w.dims()));
}

}  // namespace dp
