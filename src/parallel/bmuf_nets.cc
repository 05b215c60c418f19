// Blockwise model-update filtering (BmufOptions in parallelize.h): each
// replica's global model and block momentum, and the block net.
#include <string>
#include <vector>

#include "core/scope.h"
#include "model/training.h"
#include "ops/gradient_registry.h"  // MakeArg
#include "ops/net_validate.h"
#include "parallel/parallel_plan.h"

namespace dp {

std::vector<std::string> BmufStateBlobs(const std::string& param) {
  return {BmufGlobalName(param), BmufDeltaName(param)};
}

void AddBmufInit(const ParallelPlan& p, NetDef& init) {
  const Replicas& b = p.replicas;
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& param : p.model.params) {
      const std::string w = b.BlobName(r, param);
      init.ops.push_back(b.On(r, MakeOperatorDef("Copy", {w}, {BmufGlobalName(w)})));
      init.ops.push_back(
          b.On(r, MakeOperatorDef("ConstantFill", {w}, {BmufDeltaName(w)}, {MakeArg("value", 0.0)})));
    }
}

// Averages every replica's params and computed params, then runs the block
// update on each replica (identical values, identical results).
NetDef BuildBlockNet(const ParallelPlan& p) {
  const Replicas& b = p.replicas;
  const BmufOptions& bmuf = p.options.bmuf;
  const double n = static_cast<double>(p.total_replicas());
  NetDef block;
  block.name = p.name + "_parallel_block";
  const double mu = bmuf.block_momentum < 0 ? 1.0 - 1.0 / n : bmuf.block_momentum;
  block.ops.push_back(b.Collective("Allreduce", b.PerReplica(p.replicated), {MakeArg("scale", 1.0 / n)}));
  for (const auto& x : block.ops.back().inputs) AddExternalInput(block, x);
  for (size_t r = 0; r < p.n; ++r)
    for (const auto& param : p.model.params) {
      const std::string w = b.BlobName(r, param);
      const std::string global = BmufGlobalName(w), delta = BmufDeltaName(w);
      block.ops.push_back(b.On(r, MakeOperatorDef("BmufUpdate", {w, global, delta}, {w, global, delta},
                                                  {MakeArg("block_lr", bmuf.block_lr), MakeArg("block_momentum", mu),
                                                   MakeArg("nesterov", int64_t{bmuf.nesterov})})));
      AddExternalInput(block, global);
      AddExternalInput(block, delta);
    }
  ValidateNet(block);
  return block;
}

}  // namespace dp
