// CUDA kernels of the optimizer updates SGD, MomentumSGD, Adam and Adagrad
// (schemas, arguments and semantics in ops/cpu/optimizer_ops.cc), float32:
// every argument, the in-place outputs, extra gradients (summed in input
// order, as on the CPU) and the part/parts partial updates.
//
// lr (float32 [1]) and Adam's iter (int64 [1]) are device tensors that the
// kernels read on the device: no host sync per step. The iteration is
// therefore not checked on the host: where the CPU refuses iter < 1
// (kOutOfRange), the CUDA Adam computes with a zero bias correction and
// writes non-finite params. Training nets run Iter first, so iter >= 1.
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/optimizer_op_utils.h"

namespace dp {
namespace {

// Checks the inputs as the CPU does (then float32 and on this device),
// selects this op's part of the elements, sums three or more gradients, and
// hands Derived::Launch the buffers to update in place.
template <class Derived>
class CudaUpdateOp : public CudaOperator {
 public:
  CudaUpdateOp(const OpInit& init, UpdateLayout layout)
      : CudaOperator(init), layout_(layout), parts_(ReadUpdateParts(args())) {}

 protected:
  struct Buffers {
    int64_t n;
    float* param;
    float* state[2];
    const float* grad;
    const float* grad2;  // null, or a second gradient the kernel adds to grad
    const float* lr;
    const int64_t* iter;  // null unless the optimizer reads one
  };

 private:
  void RunOnDevice() final {
    CheckUpdateInputs(
        layout_, InputSize(),
        [&](int i) {
          const Tensor& t = Input(i);
          return TensorInfo{t.dims(), t.dtype()};
        },
        [&](int i) { return InputDesc(i); }, parts_);
    for (int i = 0; i < InputSize(); ++i) {
      if (layout_.has_iter && i == layout_.iter())
        DeviceInput(i);
      else
        FloatInput(i);
    }
    const auto [begin, end] = PartOfElements(Input(0).numel(), parts_.part, parts_.parts);
    Buffers b{};
    b.n = end - begin;
    b.lr = Input(layout_.lr()).data<float>();
    if (layout_.has_iter) b.iter = Input(layout_.iter()).data<int64_t>();
    std::vector<const float*> grads{Input(1).data<float>() + begin};
    for (int i = layout_.num_inputs(); i < InputSize(); ++i) grads.push_back(Input(i).data<float>() + begin);
    if (parts_.parts > 1 && !parts_.sharded_state)
      for (int k = 0; k <= layout_.num_states; ++k) CheckWritableForParts(*Output(k), OutputDesc(k), parts_);
    b.param = Output(0)->mutable_data<float>() + begin;
    // A sharded state holds the part alone.
    const int64_t state_begin = parts_.sharded_state ? 0 : begin;
    for (int k = 0; k < layout_.num_states; ++k) b.state[k] = Output(1 + k)->mutable_data<float>() + state_begin;
    b.grad = grads[0];
    if (grads.size() == 2) b.grad2 = grads[1];
    if (grads.size() > 2 && b.n > 0) {  // ((g0 + g1) + g2) + ...: the CPU's order
      float* sum = Scratch<float>(b.n);
      DP_CUDA_CHECK(cuda::LaunchAdd(grads[0], grads[1], sum, b.n, stream()));
      for (size_t k = 2; k < grads.size(); ++k) DP_CUDA_CHECK(cuda::LaunchAdd(sum, grads[k], sum, b.n, stream()));
      b.grad = sum;
    }
    static_cast<Derived*>(this)->Launch(b);
  }

  const UpdateLayout layout_;
  const UpdateParts parts_;
};

class SgdOp final : public CudaUpdateOp<SgdOp> {
 public:
  explicit SgdOp(const OpInit& init)
      : CudaUpdateOp(init, kSgdLayout), wd_(static_cast<float>(args().Float("weight_decay", 0.0))) {}

  void Launch(const Buffers& b) {
    DP_CUDA_CHECK(cuda::LaunchSgd(b.param, b.grad, b.grad2, b.n, b.lr, wd_, stream()));
  }

 private:
  const float wd_;
};

class MomentumSgdOp final : public CudaUpdateOp<MomentumSgdOp> {
 public:
  explicit MomentumSgdOp(const OpInit& init)
      : CudaUpdateOp(init, kMomentumLayout), args_(ReadMomentumArgs(args())) {}

  void Launch(const Buffers& b) {
    DP_CUDA_CHECK(cuda::LaunchMomentumSgd(b.param, b.grad, b.grad2, b.state[0], b.n, b.lr,
                                          static_cast<float>(args_.momentum), static_cast<float>(args_.weight_decay),
                                          args_.nesterov, stream()));
  }

 private:
  const MomentumArgs args_;
};

class AdamOp final : public CudaUpdateOp<AdamOp> {
 public:
  explicit AdamOp(const OpInit& init) : CudaUpdateOp(init, kAdamLayout), hyper_(ReadAdamArgs(args())) {}

  void Launch(const Buffers& b) {
    DP_CUDA_CHECK(
        cuda::LaunchAdam(b.param, b.grad, b.grad2, b.state[0], b.state[1], b.n, b.lr, b.iter, hyper_, stream()));
  }

 private:
  const AdamHyper hyper_;
};

class AdagradOp final : public CudaUpdateOp<AdagradOp> {
 public:
  explicit AdagradOp(const OpInit& init) : CudaUpdateOp(init, kAdagradLayout), args_(ReadAdagradArgs(args())) {}

  void Launch(const Buffers& b) {
    DP_CUDA_CHECK(cuda::LaunchAdagrad(b.param, b.grad, b.grad2, b.state[0], b.n, b.lr,
                                      static_cast<float>(args_.epsilon), static_cast<float>(args_.decay),
                                      static_cast<float>(args_.weight_decay), stream()));
  }

 private:
  const AdagradArgs args_;
};

DP_REGISTER_CUDA_OPERATOR(SGD, SgdOp);
DP_REGISTER_CUDA_OPERATOR(MomentumSGD, MomentumSgdOp);
DP_REGISTER_CUDA_OPERATOR(Adam, AdamOp);
DP_REGISTER_CUDA_OPERATOR(Adagrad, AdagradOp);

}  // namespace
}  // namespace dp
