// Graph fusions that are free: they remove a pass over memory (or a kernel
// launch) without changing results. FuseFcRelu is applied to forward nets
// before gradients are added, so the fused ops' gradient makers see the
// fused form; FuseSoftmaxLossGradient to training nets after.
#pragma once

#include <set>
#include <string>

#include "graph/net_def.h"

namespace dp {

// FC followed by a Relu that is the only reader of the FC's output becomes
// one FC with activation "relu" (the relu runs in the GEMM's epilogue; its
// gradient is folded into FCGradient). CPU and CUDA (the relu in the bias
// kernel after the GEMM, or with the engine CUBLASLT in the GEMM's
// epilogue; its gradient in the bias-gradient kernel); no other engine.
// Blobs in `keep` stay
// observable: a not-in-place Relu whose input is kept is left alone.
// Returns the number of fusions.
int FuseFcRelu(NetDef& net, const std::set<std::string>& keep);

// SoftmaxWithLoss (no weights), the constant seed of its loss's gradient
// (ConstantFill of the loss's shape, read only by the gradient) and
// SoftmaxWithLossGradient on the same P and labels become one SoftmaxWithLoss
// with dX as a third output and the seed as its grad_seed argument: the
// rows write dX while they hold P, bit for bit what the gradient op wrote,
// and two kernels (the fill, the gradient) go from a GPU step. Any device;
// the three ops on one. Returns the number of fusions.
int FuseSoftmaxLossGradient(NetDef& net);

}  // namespace dp
