// Iter(iter) -> iter: the training step counter, an int64 [1] tensor updated
// in place. The init net creates it (ConstantFill shape=[1] dtype=6 value=0);
// Iter runs first in every step, so the first step sees 1. On the host by
// default; placed on a GPU (a training net for one GPU), it runs there
// (ops/cuda/schedule_ops.cc) and the counter lives in device memory.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

class IterOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& iter = Input(0);  // kNotFound when the init net did not create it
    CheckIterationCounter(iter.dims(), iter.dtype(), InputDesc(0));
    const int64_t value = iter.data<int64_t>()[0];
    DP_ENFORCE_CODE(value < std::numeric_limits<int64_t>::max(), Code::kOutOfRange, InputDesc(0), " is ", value,
                    " and cannot be incremented");
    // Same tensor as the input (in place): mutable_data copies only if the
    // storage is shared, so a fetched counter keeps its value.
    Output(0)->mutable_data<int64_t>()[0] = value + 1;
  }
};

DP_OPERATOR_SCHEMA(Iter)
    .NumInputs(1)
    .NumOutputs(1)
    .EnforceInplace({{0, 0}})
    .HostOpUnlessPlaced("a host counter that schedules and checkpoints read; device readers get a copy")
    .Inputs({"iter"})
    .Outputs({"iter"})
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      CheckIterationCounter(in[0].dims, in[0].dtype, StrCat("iter '", op.inputs[0], "'"));
      return std::vector<TensorInfo>{in[0]};
    })
    .Doc("Adds 1 to the int64 [1] step counter, in place.");

DP_REGISTER_CPU_OPERATOR(Iter, IterOp);
DP_NO_GRADIENT(Iter);

}  // namespace
}  // namespace dp
