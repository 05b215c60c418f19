// Graph fusions that are free: they remove a pass over memory without
// changing results. Applied to forward nets before gradients are added, so
// the fused ops' gradient makers see the fused form.
#pragma once

#include <set>
#include <string>

#include "graph/net_def.h"

namespace dp {

// FC followed by a Relu that is the only reader of the FC's output becomes
// one FC with activation "relu" (the relu runs in the GEMM's epilogue; its
// gradient is folded into FCGradient). CPU ops only. Blobs in `keep` stay
// observable: a not-in-place Relu whose input is kept is left alone.
// Returns the number of fusions.
int FuseFcRelu(NetDef& net, const std::set<std::string>& keep);

}  // namespace dp
