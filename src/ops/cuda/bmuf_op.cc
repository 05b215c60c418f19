// CUDA kernel of BmufUpdate (schema and the update in ops/cpu/bmuf_op.cc),
// float32, in place, on the formula the CPU runs (ops/math/optimizer_updates.h).
#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/optimizer_op_utils.h"

namespace dp {
namespace {

class BmufUpdateOp final : public CudaOperator {
 public:
  explicit BmufUpdateOp(const OpInit& init) : CudaOperator(init), args_(ReadBmufArgs(args())) {}

 private:
  void RunOnDevice() override {
    const Tensor& w = FloatInput(0);
    for (int i = 1; i < 3; ++i) CheckBmufInput(w, InputDesc(0), FloatInput(i), InputDesc(i));
    DP_CUDA_CHECK(cuda::LaunchBmufUpdate(Output(0)->mutable_data<float>(), Output(1)->mutable_data<float>(),
                                         Output(2)->mutable_data<float>(), w.numel(),
                                         static_cast<float>(args_.block_lr), static_cast<float>(args_.block_momentum),
                                         args_.nesterov, stream()));
  }

  const BmufArgs args_;
};

DP_REGISTER_CUDA_OPERATOR(BmufUpdate, BmufUpdateOp);

}  // namespace
}  // namespace dp
