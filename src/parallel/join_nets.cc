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

NetDef BuildJoinCollectivesNet(const ParallelPlan& p) {
  const Replicas& b = p.replicas;
  NetDef net;
  net.name = p.name + "_parallel_join_collectives";
  net.executor = ExecutorKind::kAsync;
  AddExternalInput(net, kCommBlob);
  // No data, no gradient: zeros shaped like the params.
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& param : p.model.params) {
      const std::string w = b.BlobName(r, param);
      net.ops.push_back(b.On(r, MakeOperatorDef("ConstantFill", {w}, {p.Grad(r, param)}, {MakeArg("value", 0.0)})));
      AddExternalInput(net, w);
    }
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& x : p.model.computed_params) AddExternalInput(net, b.BlobName(r, x));
  AddComputedParamsSync(p, net);
  AddGradientAllreduce(p, net, false);
  ValidateNet(net);
  return net;
}

NetDef BuildJoinUpdateNet(const ParallelPlan& p) {
  NetDef net;
  net.name = p.name + "_parallel_join_update";
  net.ops = IterAndLearningRateOps(p.opt, p.counter_device);  // the counter and the rate advance with the others'
  AddExternalInput(net, kIterBlob);
  AddLossScaleCopies(p, net);  // the scale now (the last step may have changed it), on each GPU
  for (const auto& u : p.Updates()) {
    AddExternalInput(net, p.replicas.BlobName(u.replica, u.param));
    AddExternalInput(net, p.Grad(u.replica, u.param));
  }
  AddOptimizerUpdates(p, net);
  ValidateNet(net);
  return net;
}

}  // namespace dp
