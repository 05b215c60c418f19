// CUDA kernels of the multi-tensor optimizer updates (schemas, layout and
// semantics in ops/cpu/multi_tensor_update_ops.cc), float32: every param of
// the op in ceil(N / 24) launches of ops/math/multi_tensor.h's plan, each
// element with the formula the one-param CUDA kernel applies to it, so a
// fused step computes the bits of the unfused one. lr and iter are read on
// the device, as by the one-param kernels (ops/cuda/optimizer_ops.cc).
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/math/multi_tensor.h"
#include "ops/optimizer_op_utils.h"

namespace dp {
namespace {

// Checks the inputs as the CPU does (then float32 and on this device),
// points a MultiTensorList at each launch's tensors (this op's part of each),
// and hands Derived::Launch the lists.
template <class Derived>
class CudaMultiTensorUpdateOp : public CudaOperator {
 public:
  CudaMultiTensorUpdateOp(const OpInit& init, std::string one_param_type, UpdateLayout one)
      : CudaOperator(init),
        one_param_type_(std::move(one_param_type)),
        parts_(ReadUpdateParts(args())),
        layout_(ReadMultiUpdateLayout(one, InputSize(), OutputSize())) {}

 private:
  void RunOnDevice() final {
    CheckMultiUpdateInputs(
        layout_,
        [&](int k) {
          const Tensor& t = Input(k);
          return TensorInfo{t.dims(), t.dtype()};
        },
        [&](int j, int i) {
          return StrCat(MultiInputRole(one_param_type_, layout_, j, i), " '",
                        def().inputs.at(static_cast<size_t>(layout_.Input(j, i))), "'");
        },
        parts_);
    for (int k = 0; k < InputSize(); ++k) {
      if (layout_.one.has_iter && k == layout_.iter())
        DeviceInput(k);
      else
        FloatInput(k);
    }
    const int n = layout_.tensors;
    begins_.resize(static_cast<size_t>(n));
    sizes_.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const ElementRange r = PartOfElements(Input(i).numel(), parts_.part, parts_.parts);
      begins_[static_cast<size_t>(i)] = r.begin;
      sizes_[static_cast<size_t>(i)] = r.end - r.begin;
    }
    if (sizes_ != planned_sizes_) {  // the plan holds while the params keep their sizes
      launches_ = PlanMultiTensorLaunches(sizes_);
      planned_sizes_ = sizes_;
    }
    if (parts_.parts > 1 && !parts_.sharded_state)
      for (int o = 0; o < OutputSize(); ++o) CheckWritableForParts(*Output(o), OutputDesc(o), parts_);
    const float* lr = Input(layout_.lr()).data<float>();
    const int64_t* iter = layout_.one.has_iter ? Input(layout_.iter()).data<int64_t>() : nullptr;
    for (const MultiTensorLaunch& launch : launches_) {
      DP_ENFORCE_CODE(launch.blocks <= INT_MAX, Code::kOutOfRange, "a launch of ", launch.blocks,
                      " chunks exceeds CUDA's grid");
      const MultiTensorList list = LaunchList(launch, sizes_, [&](MultiTensorList& l, int k, int i) {
        const int64_t begin = begins_[static_cast<size_t>(i)];
        // A sharded state holds the part alone.
        const int64_t state_begin = parts_.sharded_state ? 0 : begin;
        l.param[k] = Output(i)->mutable_data<float>() + begin;
        l.grad[k] = Input(layout_.grad(i)).data<float>() + begin;
        if (layout_.one.num_states > 0) l.state0[k] = Output(layout_.state(0, i))->mutable_data<float>() + state_begin;
        if (layout_.one.num_states > 1) l.state1[k] = Output(layout_.state(1, i))->mutable_data<float>() + state_begin;
      });
      static_cast<Derived*>(this)->Launch(list, launch.blocks, lr, iter);
    }
  }

  const std::string one_param_type_;
  const UpdateParts parts_;
  const MultiUpdateLayout layout_;
  std::vector<int64_t> begins_, sizes_, planned_sizes_;
  std::vector<MultiTensorLaunch> launches_;
};

class MultiTensorSgdOp final : public CudaMultiTensorUpdateOp<MultiTensorSgdOp> {
 public:
  explicit MultiTensorSgdOp(const OpInit& init)
      : CudaMultiTensorUpdateOp(init, "SGD", kSgdLayout), wd_(static_cast<float>(args().Float("weight_decay", 0.0))) {}

  void Launch(const MultiTensorList& list, int64_t blocks, const float* lr, const int64_t*) {
    DP_CUDA_CHECK(cuda::LaunchMultiTensorSgd(list, blocks, lr, wd_, stream()));
  }

 private:
  const float wd_;
};

class MultiTensorMomentumSgdOp final : public CudaMultiTensorUpdateOp<MultiTensorMomentumSgdOp> {
 public:
  explicit MultiTensorMomentumSgdOp(const OpInit& init)
      : CudaMultiTensorUpdateOp(init, "MomentumSGD", kMomentumLayout), args_(ReadMomentumArgs(args())) {}

  void Launch(const MultiTensorList& list, int64_t blocks, const float* lr, const int64_t*) {
    DP_CUDA_CHECK(cuda::LaunchMultiTensorMomentumSgd(list, blocks, lr, static_cast<float>(args_.momentum),
                                                     static_cast<float>(args_.weight_decay), args_.nesterov,
                                                     stream()));
  }

 private:
  const MomentumArgs args_;
};

class MultiTensorAdamOp final : public CudaMultiTensorUpdateOp<MultiTensorAdamOp> {
 public:
  explicit MultiTensorAdamOp(const OpInit& init)
      : CudaMultiTensorUpdateOp(init, "Adam", kAdamLayout), hyper_(ReadAdamArgs(args())) {}

  void Launch(const MultiTensorList& list, int64_t blocks, const float* lr, const int64_t* iter) {
    DP_CUDA_CHECK(cuda::LaunchMultiTensorAdam(list, blocks, lr, iter, hyper_, stream()));
  }

 private:
  const AdamHyper hyper_;
};

class MultiTensorAdagradOp final : public CudaMultiTensorUpdateOp<MultiTensorAdagradOp> {
 public:
  explicit MultiTensorAdagradOp(const OpInit& init)
      : CudaMultiTensorUpdateOp(init, "Adagrad", kAdagradLayout), args_(ReadAdagradArgs(args())) {}

  void Launch(const MultiTensorList& list, int64_t blocks, const float* lr, const int64_t*) {
    DP_CUDA_CHECK(cuda::LaunchMultiTensorAdagrad(list, blocks, lr, static_cast<float>(args_.epsilon),
                                                 static_cast<float>(args_.decay),
                                                 static_cast<float>(args_.weight_decay), stream()));
  }

 private:
  const AdagradArgs args_;
};

DP_REGISTER_CUDA_OPERATOR(MultiTensorSGD, MultiTensorSgdOp);
DP_REGISTER_CUDA_OPERATOR(MultiTensorMomentumSGD, MultiTensorMomentumSgdOp);
DP_REGISTER_CUDA_OPERATOR(MultiTensorAdam, MultiTensorAdamOp);
DP_REGISTER_CUDA_OPERATOR(MultiTensorAdagrad, MultiTensorAdagradOp);

}  // namespace
}  // namespace dp
