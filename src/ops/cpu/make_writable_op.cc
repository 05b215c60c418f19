// MakeWritable(x_1, ..., x_n) -> (x_1, ..., x_n), in place: afterwards each
// tensor is library memory that only its blob holds, so ops may write it
// where it is (a copy-on-write copy is made now for a tensor that the caller
// owns or that another holder shares, e.g. a fetched param). The ops of one
// partial write (graph/task_graph.h: a shared model's update in parts) run
// at once on one tensor and must not copy it then: parallelize puts a
// MakeWritable before each such group. Device-generic: the copy goes
// through CopyBytes on the op's context (asynchronously on a CUDA stream),
// so one class serves the CPU and CUDA registries.
#include <limits>

#include "ops/gradient_registry.h"
#include "ops/operator.h"

namespace dp {
namespace {

class MakeWritableOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    for (int i = 0; i < OutputSize(); ++i) {
      Tensor* t = Output(i);
      if (t->writable_in_place()) continue;
      Input(i);  // checks that this op's context can address the tensor
      // Copy-on-write now: fresh storage (the held copy keeps the shared
      // one from being reused) filled on the op's context.
      const Tensor shared = *t;
      t->Resize(shared.dims(), shared.dtype(), shared.device());
      CopyBytes(shared.nbytes(), shared.raw_data(), shared.device(), t->raw_mutable_data(), shared.device(),
                &context());
    }
  }
};

DP_OPERATOR_SCHEMA(MakeWritable)
    .NumInputs(1, std::numeric_limits<int>::max())
    .NumOutputs(1, std::numeric_limits<int>::max())
    .EnforceInplaceAll(0)
    .ShapeInference([](const OperatorDef&, const ArgReader&, const std::vector<TensorInfo>& in) { return in; })
    .Doc("In place: each tensor becomes library memory held by its blob alone (copied if the caller owns it or "
         "another holder shares it), so that later ops write it where it is.");

DP_REGISTER_CPU_OPERATOR(MakeWritable, MakeWritableOp);
#if DP_WITH_CUDA
DP_REGISTER_CUDA_OPERATOR(MakeWritable, MakeWritableOp);
#endif
DP_NO_GRADIENT(MakeWritable);

}  // namespace
}  // namespace dp
