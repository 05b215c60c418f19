// Optimizer updates as operators, all in place:
//   SGD(param, grad, lr) -> param
//   MomentumSGD(param, grad, momentum, lr) -> param, momentum
//   Adam(param, grad, m, v, lr, iter) -> param, m, v
//   Adagrad(param, grad, h, lr) -> param, h
// param, grad and the state tensors share one float dtype and one shape; lr is
// a one-element float32/float64 tensor (LearningRate's output) and iter the
// one-element int64 step counter (Iter's output, 1 on the first step). A NaN
// lr skips the update (GateLearningRate's mark of a step whose loss-scaled
// gradients overflowed): param and state stay as they are.
//
// Two options serve replicas that share one param (a shared model):
//   - more gradients after the last input: the update uses grad + grad_1 +
//     ... (summed in input order), so the replicas' gradients need no
//     allreduce within a process;
//   - args part = k and parts = P: the update touches only part k of P
//     contiguous parts of the elements, so P ops (one per replica) update
//     one param together. The task graph lets such ops run at once
//     (graph/task_graph.h); their outputs must be writable in place when
//     they start (MakeWritable before them). With sharded_state = 1 the
//     state tensors hold that part alone (1-D): each replica keeps the
//     state of the part it updates (ZeRO-1, comm/shards.h).
//
// The kernels and the per-op rules are ops/cpu/optimizer_kernels.h's, shared
// with the multi-tensor ops (multi_tensor_update_ops.cc).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/cpu/optimizer_kernels.h"
#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"
#include "ops/optimizer_op_utils.h"

namespace dp {
namespace {

// ---- checks shared by kernels and shape inference ----------------------------

OpSchema::InferenceFn InferUpdate(UpdateLayout layout) {
  return [layout](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
    const OpSchema* schema = OpSchemaRegistry::Find(op.type);
    CheckUpdateInputs(
        layout, static_cast<int>(in.size()), [&](int i) { return in.at(static_cast<size_t>(i)); },
        [&](int i) {
          const std::string role = i < layout.num_inputs() ? schema->InputName(static_cast<size_t>(i)) : "grad";
          return StrCat(role, " '", op.inputs.at(static_cast<size_t>(i)), "'");
        },
        ReadUpdateParts(args));
    std::vector<TensorInfo> out;
    out.push_back(in[0]);
    for (int s = 0; s < layout.num_states; ++s) out.push_back(in[static_cast<size_t>(2 + s)]);
    return out;
  };
}

// ---- operators -----------------------------------------------------------------

// Validates the inputs, reads lr (and iter), and applies Rule to this op's
// part of the param and state buffers in place. Output(i) is the same tensor
// as its in-place input, so mutable_data keeps its values and copies only
// when the storage is shared (copy-on-write).
template <class Rule>
class UpdateOp final : public Operator {
 public:
  explicit UpdateOp(const OpInit& init)
      : Operator(init),
        rule_(args()),
        parts_(ReadUpdateParts(args())),
        grads_(static_cast<size_t>(1 + std::max(0, InputSize() - kLayout.num_inputs()))) {}

 private:
  static constexpr UpdateLayout kLayout = Rule::kLayout;

  void RunOnDevice() override {
    CheckUpdateInputs(
        kLayout, InputSize(),
        [&](int i) {
          const Tensor& t = Input(i);
          return TensorInfo{t.dims(), t.dtype()};
        },
        [&](int i) { return InputDesc(i); }, parts_);
    cpu_update::Step step{Input(0).numel(), cpu_update::ReadLearningRate(Input(kLayout.lr())), 0};
    if (kLayout.has_iter) {
      step.iter = Input(kLayout.iter()).template data<int64_t>()[0];
      DP_ENFORCE_CODE(step.iter >= 1, Code::kOutOfRange, InputDesc(kLayout.iter()), " is ", step.iter,
                      " but must be >= 1 (run Iter before the update)");
    }
    if (SkipsUpdate(step.lr)) return;  // a skipped step (ops/math/optimizer_updates.h)
    // This op's part of the elements: parts of 64 elements, the last short.
    const ElementRange part = PartOfElements(step.n, parts_.part, parts_.parts);
    DispatchFloat(Input(0).dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      // grad, then the extra gradients (in the op's own array: no allocation per run)
      grads_[0] = Input(1).template data<T>();
      for (int i = kLayout.num_inputs(); i < InputSize(); ++i)
        grads_[static_cast<size_t>(1 + i - kLayout.num_inputs())] = Input(i).template data<T>();
      // The ops updating the other parts may be running now: none of them
      // may replace the tensors' storage (copy-on-write), so they must find
      // them writable where they are (MakeWritable before the group).
      if (parts_.parts > 1 && !parts_.sharded_state)
        for (int k = 0; k <= kLayout.num_states; ++k) CheckWritableForParts(*Output(k), OutputDesc(k), parts_);
      T* p = Output(0)->template mutable_data<T>();
      T* s[cpu_update::kMaxStates] = {};
      for (int k = 0; k < kLayout.num_states; ++k) s[k] = Output(1 + k)->template mutable_data<T>();
      // A sharded state holds the part alone: its element i is the param's begin + i.
      const int64_t state_begin = parts_.sharded_state ? part.begin : 0;
      cpu_update::UpdateElements<T>(rule_, step, part.begin, part.end, p,
                                    grads_.data(), grads_.size(), s, state_begin);
    });
  }

  const Rule rule_;
  const UpdateParts parts_;
  std::vector<const void*> grads_;
};

using SgdOp = UpdateOp<cpu_update::SgdRule>;
using MomentumSgdOp = UpdateOp<cpu_update::MomentumRule>;
using AdamOp = UpdateOp<cpu_update::AdamRule>;
using AdagradOp = UpdateOp<cpu_update::AdagradRule>;

// ---- schemas and registration --------------------------------------------------

// Extra gradients an update sums (replicas of one process sharing a param).
constexpr int kMaxExtraGrads = 1023;

DP_OPERATOR_SCHEMA(SGD)
    .NumInputs(3, 3 + kMaxExtraGrads)
    .NumOutputs(1)
    .EnforceInplace({{0, 0}})
    .Inputs({"param", "grad", "lr"})
    .Outputs({"param"})
    .With(DeclareSgdArgs)
    .ShapeInference(InferUpdate(kSgdLayout))
    .Doc("param -= lr * (grad + weight_decay * param), in place.");

DP_OPERATOR_SCHEMA(MomentumSGD)
    .NumInputs(4, 4 + kMaxExtraGrads)
    .NumOutputs(2)
    .EnforceInplace({{0, 0}, {2, 1}})
    .Inputs({"param", "grad", "momentum", "lr"})
    .Outputs({"param", "momentum"})
    .With(DeclareMomentumSgdArgs)
    .ShapeInference(InferUpdate(kMomentumLayout))
    .Doc("PyTorch SGD with momentum, in place: d = grad + wd * param; buf = mu * buf + d; "
         "param -= lr * (nesterov ? d + mu * buf : buf). The buffer starts at zero.");

DP_OPERATOR_SCHEMA(Adam)
    .NumInputs(6, 6 + kMaxExtraGrads)
    .NumOutputs(3)
    .EnforceInplace({{0, 0}, {2, 1}, {3, 2}})
    .Inputs({"param", "grad", "m", "v", "lr", "iter"})
    .Outputs({"param", "m", "v"})
    .With(DeclareAdamArgs)
    .ShapeInference(InferUpdate(kAdamLayout))
    .Doc("torch.optim.Adam, in place: d = grad + wd * param; m = b1 m + (1-b1) d; v = b2 v + (1-b2) d^2; "
         "param -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) with t = iter (>= 1).");

DP_OPERATOR_SCHEMA(Adagrad)
    .NumInputs(4, 4 + kMaxExtraGrads)
    .NumOutputs(2)
    .EnforceInplace({{0, 0}, {2, 1}})
    .Inputs({"param", "grad", "h", "lr"})
    .Outputs({"param", "h"})
    .With(DeclareAdagradArgs)
    .ShapeInference(InferUpdate(kAdagradLayout))
    .Doc("Adagrad, in place: d = grad + wd * param; h = decay * h + d^2; param -= lr * d / (sqrt(h) + eps).");

DP_REGISTER_CPU_OPERATOR(SGD, SgdOp);
DP_REGISTER_CPU_OPERATOR(MomentumSGD, MomentumSgdOp);
DP_REGISTER_CPU_OPERATOR(Adam, AdamOp);
DP_REGISTER_CPU_OPERATOR(Adagrad, AdagradOp);
DP_NO_GRADIENT(SGD);
DP_NO_GRADIENT(MomentumSGD);
DP_NO_GRADIENT(Adam);
DP_NO_GRADIENT(Adagrad);

}  // namespace
}  // namespace dp
