// Copy: Y becomes a deep copy of X (across devices when they differ). The
// kernel is device-generic: CopyBytes picks the route, asynchronously on the
// op's stream for CUDA, so one class serves the CPU and CUDA registries.
#include "ops/operator.h"

namespace dp {
namespace {

class CopyOp final : public Operator {
 public:
  using Operator::Operator;

  // Feeds and fetches cross between the host and a GPU outside a graph: a
  // captured copy would read or write pageable host memory.
  const char* GraphCaptureObstacle() const override {
    return "it copies between devices; a CUDA graph takes copies only from the host ops before it";
  }

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    Tensor* y = Output(0);
    if (y == &x && x.device() == device()) return;
    // In place from another device, Resize gives the tensor fresh storage on
    // this one: keep the source alive (and its shape) through the copy.
    const Tensor keep = x;
    y->Resize(keep.dims(), keep.dtype(), device());
    CopyBytes(keep.nbytes(), keep.raw_data(), keep.device(), y->raw_mutable_data(), device(), &context());
  }
};

DP_OPERATOR_SCHEMA(Copy)
    .NumInputs(1)
    .NumOutputs(1)
    .AllowInplace({{0, 0}})
    .Inputs({"X"})
    .Outputs({"Y"})
    .InputsCanCrossDevices()
    .IdenticalTypeAndShape()
    .Doc("Deep copy of X on this op's device.");

DP_REGISTER_CPU_OPERATOR(Copy, CopyOp);
#if DP_WITH_CUDA
DP_REGISTER_CUDA_OPERATOR(Copy, CopyOp);
#endif

}  // namespace
}  // namespace dp
