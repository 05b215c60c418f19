// NoOp: does nothing. Its inputs and outputs only order it in the dependency
// graph: a join point, a placeholder, and the op of executor benchmarks (which
// measure the scheduling machinery, not kernels). Device-generic.
#include <limits>

#include "ops/gradient_registry.h"
#include "ops/operator.h"

namespace dp {
namespace {

class NoOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {}
};

DP_OPERATOR_SCHEMA(NoOp)
    .NumInputs(0, std::numeric_limits<int>::max())
    .NumOutputs(0, std::numeric_limits<int>::max())
    .InputsCanCrossDevices()
    .Doc("Does nothing; orders ops through its inputs and outputs. Its outputs stay as they were.");

DP_REGISTER_CPU_OPERATOR(NoOp, NoOp);
DP_NO_GRADIENT(NoOp);
#if DP_WITH_CUDA
DP_REGISTER_CUDA_OPERATOR(NoOp, NoOp);
#endif

}  // namespace
}  // namespace dp
