// The nets of a process that ran out of data while the others go on (DDP's
// Join): it shadows their train steps, taking part in every collective with
// zero gradients and counting itself out of the average, and applies the
// same optimizer updates, so that its state stays every process's state.
// The step equals one device's step on the active processes' batches.
#include <string>
#include <vector>

#include "model/training.h"
#include "ops/gradient_registry.h"  // MakeArg
#include "ops/net_validate.h"
#include "parallel/parallel_plan.h"

namespace dp {

NetDef BuildJoinProbeNet(const ParallelPlan& p) {
  NetDef probe;
  probe.name = p.name + "_parallel_join_probe";
  AddExternalInput(probe, kCommBlob);
  AddActiveProbe(p, probe, false);
  ValidateNet(probe);
  return probe;
}

NetDef BuildJoinStepNet(const ParallelPlan& p) {
  const Replicas& b = p.replicas;
  NetDef step;
  step.name = p.name + "_parallel_join_step";
  step.executor = ExecutorKind::kAsync;
  step.ops = IterAndLearningRateOps(p.opt);  // the counter and the rate advance with the others'
  AddExternalInput(step, kIterBlob);
  AddExternalInput(step, kCommBlob);
  // No data, no gradient: zeros shaped like the params.
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& param : p.model.params) {
      const std::string w = b.BlobName(r, param);
      step.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {w}, {p.Grad(r, param)}, {MakeArg("value", 0.0)})));
      AddExternalInput(step, w);
    }
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& x : p.model.computed_params) AddExternalInput(step, b.BlobName(r, x));
  AddComputedParamsSync(p, step);
  AddGradientAllreduce(p, step, false);
  AddOptimizerUpdates(p, step);
  ValidateNet(step);
  return step;
}

}  // namespace dp
