#include "parallel/sync_bn.h"

#include <utility>

namespace dp {

NetDef SynchronizeBatchNorm(const NetDef& net, const std::string& comm, int* count) {
  NetDef out = net;
  out.ops.clear();
  int rewritten = 0;
  // Appends `op` on the original op's device.
  auto add = [&](const OperatorDef& like, OperatorDef op) {
    op.device = like.device;
    out.ops.push_back(std::move(op));
  };
  for (size_t i = 0; i < net.ops.size(); ++i) {
    const OperatorDef& op = net.ops[i];
    const bool training = op.type == "SpatialBN" && ArgReader(op, OpLabel(op, i)).Int("is_test", 0) == 0;
    if (training && op.outputs.size() == 5 && op.inputs.size() == 5) {
      // Named after saved_mean, which is unique to this BN.
      const std::string stats = op.outputs[3] + "/sync_stats";
      add(op, MakeOperatorDef("SpatialBNStats", {op.inputs[0]}, {stats}));
      add(op, MakeOperatorDef("Allreduce", {comm, stats}, {stats}));
      OperatorDef bn = op;
      bn.type = "SyncSpatialBN";
      bn.inputs.push_back(stats);
      bn.args.clear();
      for (const auto& a : op.args)
        if (a.name != "is_test") bn.args.push_back(a);
      add(op, std::move(bn));
      ++rewritten;
    } else if (op.type == "SpatialBNGradient" && op.inputs.size() == 5 && op.outputs.size() == 3) {
      // X, scale, dY, saved_mean, saved_inv_std -> dX, dscale, dbias
      const std::string gstats = op.inputs[3] + "/sync_grad_stats";
      const auto& in = op.inputs;
      add(op, MakeOperatorDef("SpatialBNGradStats", {in[0], in[2], in[3], in[4]},
                              {op.outputs[1], op.outputs[2], gstats}));
      add(op, MakeOperatorDef("Allreduce", {comm, gstats}, {gstats}));
      add(op, MakeOperatorDef("SyncSpatialBNGradient", {in[0], in[1], in[2], in[3], in[4], gstats},
                              {op.outputs[0]}));
    } else {
      out.ops.push_back(op);
    }
  }
  if (count) *count = rewritten;
  return out;
}

}  // namespace dp
