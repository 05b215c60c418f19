// What the GPU tests of dynamic loss scaling over several replicas share
// (test_train_parity_gpu: one GPU named twice; test_cuda_multi_gpu: two
// GPUs): a model trained data-parallel on CUDA replicas with the scale
// starting at 2^127, so that large inputs overflow the first steps.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "model/model_def.h"
#include "model/training.h"
#include "parallel/parallelize.h"

namespace dp::testing {

struct ScaledRun {
  std::vector<float> scales;                // the scale after each step
  std::vector<std::vector<float>> params;   // every replica's params, replica then model order
};

// `steps` steps of `m` on CUDA replicas `ids` (NCCL between distinct GPUs,
// the copy-and-sum tree for one GPU named twice), ZeRO-1 when `zero`, each
// step fed by feed(ws, step).
inline ScaledRun TrainScaledOnGpus(const ModelDef& m, const std::vector<int32_t>& ids, bool zero, int steps,
                                   const std::function<void(Workspace&, int)>& feed) {
  ParallelizeOptions o;
  o.device_type = DeviceType::kCUDA;
  o.device_ids = ids;
  o.nccl = ids.size() < 2 || ids[0] != ids[1];
  o.shard_optimizer_state = zero;
  o.loss_scaling.dynamic = true;
  o.loss_scaling.initial = std::ldexp(1.0, 127);
  const ParallelNets nets = Parallelize(m, o);
  auto ws = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(nets.init), ws).Run();
  Net net(std::make_shared<const NetDef>(nets.train), ws);
  auto host = [&](const std::string& blob) {
    Tensor t;
    t.CopyFrom(ws->GetTensor(blob));
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  ScaledRun run;
  for (int s = 0; s < steps; ++s) {
    feed(*ws, s);
    net.Run();
    run.scales.push_back(host(kLossScaleBlob).at(0));
  }
  for (const auto& scope : nets.scopes)
    for (const auto& p : m.params) run.params.push_back(host(scope + p));
  return run;
}

}  // namespace dp::testing
