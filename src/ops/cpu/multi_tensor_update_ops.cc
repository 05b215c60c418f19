// Multi-tensor optimizer updates: MultiTensorSGD, MultiTensorMomentumSGD,
// MultiTensorAdam and MultiTensorAdagrad update N params in one op, each
// param exactly as its one-param op would (the same rule and kernels,
// ops/cpu/optimizer_kernels.h: the same bits). Layout (MultiUpdateLayout in
// ops/optimizer_op_utils.h):
//   inputs:  param_0..param_{N-1}, state 0 of each param, state 1 of each,
//            grad_0..grad_{N-1}, lr, iter (Adam)
//   outputs: the params and states, output o in place of input o.
// The arguments are the one-param op's, applied to every param (part/parts
// and sharded_state too). They exist for the step's launch count on a GPU:
// the update-fusion pass (ops/update_fusion.h) turns a step's one-param
// updates into one of these, which the CUDA kernel runs in
// ceil(N / 24) launches (ops/math/multi_tensor.h). There are no extra
// gradients (a shared model's updates are not fused).
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

OpSchema::InferenceFn InferMultiUpdate(const std::string& one_param_type, UpdateLayout one) {
  return [one_param_type, one](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
    const MultiUpdateLayout layout =
        ReadMultiUpdateLayout(one, static_cast<int>(in.size()), static_cast<int>(op.outputs.size()));
    CheckMultiUpdateInputs(
        layout, [&](int k) { return in.at(static_cast<size_t>(k)); },
        [&](int j, int i) {
          return StrCat(MultiInputRole(one_param_type, layout, j, i), " '",
                        op.inputs.at(static_cast<size_t>(layout.Input(j, i))), "'");
        },
        ReadUpdateParts(args));
    return std::vector<TensorInfo>(in.begin(), in.begin() + layout.num_outputs());
  };
}

template <class Rule>
class MultiTensorUpdateOp : public Operator {
 public:
  MultiTensorUpdateOp(const OpInit& init, std::string one_param_type)
      : Operator(init),
        one_param_type_(std::move(one_param_type)),
        rule_(args()),
        parts_(ReadUpdateParts(args())),
        layout_(ReadMultiUpdateLayout(Rule::kLayout, InputSize(), OutputSize())) {}

 private:
  void RunOnDevice() final {
    CheckMultiUpdateInputs(
        layout_,
        [&](int k) {
          const Tensor& t = Input(k);
          return TensorInfo{t.dims(), t.dtype()};
        },
        [&](int j, int i) { return Desc(j, i); }, parts_);
    const double lr = cpu_update::ReadLearningRate(Input(layout_.lr()));
    int64_t iter = 0;
    if (layout_.one.has_iter) {
      iter = Input(layout_.iter()).template data<int64_t>()[0];
      DP_ENFORCE_CODE(iter >= 1, Code::kOutOfRange, Desc(layout_.one.iter(), 0), " is ", iter,
                      " but must be >= 1 (run Iter before the update)");
    }
    if (SkipsUpdate(lr)) return;  // a skipped step (ops/math/optimizer_updates.h)
    for (int i = 0; i < layout_.tensors; ++i) {
      const cpu_update::Step step{Input(i).numel(), lr, iter};
      const ElementRange part = PartOfElements(step.n, parts_.part, parts_.parts);
      // The dtypes were checked above (float32 or float64): no message to
      // build per param and step.
      auto update = [&](auto zero) {
        using T = decltype(zero);
        const void* grad = Input(layout_.grad(i)).template data<T>();
        // Other parts' ops may be running (see optimizer_ops.cc).
        if (parts_.parts > 1 && !parts_.sharded_state)
          for (int k = 0; k <= layout_.one.num_states; ++k) {
            const int o = k == 0 ? i : layout_.state(k - 1, i);
            CheckWritableForParts(*Output(o), OutputDesc(o), parts_);
          }
        T* p = Output(i)->template mutable_data<T>();
        T* s[cpu_update::kMaxStates] = {};
        for (int k = 0; k < layout_.one.num_states; ++k) s[k] = Output(layout_.state(k, i))->template mutable_data<T>();
        const int64_t state_begin = parts_.sharded_state ? part.begin : 0;
        cpu_update::UpdateElements<T>(rule_, step, part.begin, part.end, p, &grad, 1, s, state_begin);
      };
      if (Input(i).dtype() == DType::kFloat32)
        update(float{});
      else
        update(double{});
    }
  }

  std::string Desc(int j, int i) const {
    return StrCat(MultiInputRole(one_param_type_, layout_, j, i), " '",
                  def().inputs.at(static_cast<size_t>(layout_.Input(j, i))), "'");
  }

  const std::string one_param_type_;
  const Rule rule_;
  const UpdateParts parts_;
  const MultiUpdateLayout layout_;
};

class MultiTensorSgdOp final : public MultiTensorUpdateOp<cpu_update::SgdRule> {
 public:
  explicit MultiTensorSgdOp(const OpInit& init) : MultiTensorUpdateOp(init, "SGD") {}
};
class MultiTensorMomentumSgdOp final : public MultiTensorUpdateOp<cpu_update::MomentumRule> {
 public:
  explicit MultiTensorMomentumSgdOp(const OpInit& init) : MultiTensorUpdateOp(init, "MomentumSGD") {}
};
class MultiTensorAdamOp final : public MultiTensorUpdateOp<cpu_update::AdamRule> {
 public:
  explicit MultiTensorAdamOp(const OpInit& init) : MultiTensorUpdateOp(init, "Adam") {}
};
class MultiTensorAdagradOp final : public MultiTensorUpdateOp<cpu_update::AdagradRule> {
 public:
  explicit MultiTensorAdagradOp(const OpInit& init) : MultiTensorUpdateOp(init, "Adagrad") {}
};

// ---- schemas and registration --------------------------------------------------

// The counts for N params (MultiUpdateLayout); the kernel checks that they agree.
OpSchema& MultiTensorCounts(OpSchema& s, UpdateLayout one) {
  const int per_tensor = 1 + one.num_states;
  const int extra = one.has_iter ? 2 : 1;
  return s.NumInputs(per_tensor + 1 + extra, (per_tensor + 1) * kMaxMultiTensors + extra)
      .NumOutputs(per_tensor, per_tensor * kMaxMultiTensors)
      .EnforceInplaceAll(0);
}

DP_OPERATOR_SCHEMA(MultiTensorSGD)
    .With([](OpSchema& s) -> OpSchema& { return MultiTensorCounts(s, kSgdLayout); })
    .With(DeclareSgdArgs)
    .ShapeInference(InferMultiUpdate("SGD", kSgdLayout))
    .Doc("SGD on N params in one op: inputs param_0..param_{N-1}, grad_0..grad_{N-1}, lr; outputs the params, "
         "in place. Each param as SGD updates it (the same bits).");

DP_OPERATOR_SCHEMA(MultiTensorMomentumSGD)
    .With([](OpSchema& s) -> OpSchema& { return MultiTensorCounts(s, kMomentumLayout); })
    .With(DeclareMomentumSgdArgs)
    .ShapeInference(InferMultiUpdate("MomentumSGD", kMomentumLayout))
    .Doc("MomentumSGD on N params in one op: inputs the N params, their N momentum buffers, the N gradients, lr; "
         "outputs the params and buffers, in place. Each param as MomentumSGD updates it (the same bits).");

DP_OPERATOR_SCHEMA(MultiTensorAdam)
    .With([](OpSchema& s) -> OpSchema& { return MultiTensorCounts(s, kAdamLayout); })
    .With(DeclareAdamArgs)
    .ShapeInference(InferMultiUpdate("Adam", kAdamLayout))
    .Doc("Adam on N params in one op: inputs the N params, their N m, their N v, the N gradients, lr, iter; "
         "outputs the params, m and v, in place. Each param as Adam updates it (the same bits).");

DP_OPERATOR_SCHEMA(MultiTensorAdagrad)
    .With([](OpSchema& s) -> OpSchema& { return MultiTensorCounts(s, kAdagradLayout); })
    .With(DeclareAdagradArgs)
    .ShapeInference(InferMultiUpdate("Adagrad", kAdagradLayout))
    .Doc("Adagrad on N params in one op: inputs the N params, their N h, the N gradients, lr; outputs the params "
         "and h, in place. Each param as Adagrad updates it (the same bits).");

DP_REGISTER_CPU_OPERATOR(MultiTensorSGD, MultiTensorSgdOp);
DP_REGISTER_CPU_OPERATOR(MultiTensorMomentumSGD, MultiTensorMomentumSgdOp);
DP_REGISTER_CPU_OPERATOR(MultiTensorAdam, MultiTensorAdamOp);
DP_REGISTER_CPU_OPERATOR(MultiTensorAdagrad, MultiTensorAdagradOp);
DP_NO_GRADIENT(MultiTensorSGD);
DP_NO_GRADIENT(MultiTensorMomentumSGD);
DP_NO_GRADIENT(MultiTensorAdam);
DP_NO_GRADIENT(MultiTensorAdagrad);

}  // namespace
}  // namespace dp
