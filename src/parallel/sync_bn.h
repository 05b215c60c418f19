// Synchronised BN as a rewrite of one replica's training net: every
// training-mode SpatialBN and its gradient become the sync ops of
// ops/cpu/sync_bn_op.cc around an Allreduce of their statistics. The
// Allreduce ops refer to this replica's tensors only; replication merges each
// of them with its counterparts in the other replicas into one collective.
#pragma once

#include <string>

#include "graph/net_def.h"

namespace dp {

// `net`: one replica's forward and backward ops (unscoped). Returns it with
// SpatialBN (is_test=0) -> SpatialBNStats, Allreduce(comm, stats), SyncSpatialBN
// and SpatialBNGradient -> SpatialBNGradStats, Allreduce(comm, gstats),
// SyncSpatialBNGradient. `count`: where the number of rewritten SpatialBN
// ops is stored (may be null).
NetDef SynchronizeBatchNorm(const NetDef& net, const std::string& comm, int* count = nullptr);

}  // namespace dp
