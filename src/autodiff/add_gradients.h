// AddGradients: the reverse-mode autodiff transform on a net definition.
//
// From the loss blobs it walks the forward ops in reverse and asks each op on
// a path from the wrt blobs (the params) to the losses for its gradient ops
// (gradient_registry.h). Blobs are tracked by version, so in-place ops are
// handled: a gradient op that needs a value a later op overwrote is refused.
// A blob read by several ops receives one contribution per read
// ("X_grad_autosplit_k"), summed into "X_grad" as soon as the last one exists,
// so that a param's gradient is final as early as possible (data parallelism
// starts its allreduce there).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/scope.h"  // GradientName: the gradient blob of "X" is "X_grad"
#include "graph/net_def.h"

namespace dp {

struct GradientOptions {
  std::vector<std::string> losses;  // at least one; each must be written by an op
  std::vector<std::string> wrt;     // external inputs to differentiate; empty: all of them
  std::vector<std::string> stop;    // no gradient flows through these blobs
  double loss_scale = 1.0;          // seed of every loss gradient
  // If set, a blob (e.g. a scalar) every seed is multiplied by at run time
  // (Mul, broadcasting): a loss weight known only when the net runs, such as
  // a replica's share of an unevenly split batch.
  std::string loss_weight;
};

struct GradientResult {
  NetDef net;  // the forward ops followed by the gradient ops
  // (wrt blob, its gradient blob) in the order of options.wrt (or of the
  // net's external inputs), only those the losses depend on when wrt was empty.
  std::vector<std::pair<std::string, std::string>> grads;
  // For each entry of grads: index in net.ops of the op after which the
  // gradient is final.
  std::vector<size_t> ready_after;
  // Index in net.ops of the first gradient op.
  size_t first_gradient_op = 0;
};

// Throws kInvalidNet naming the op / blob on any problem (see dp.h,
// dp_netdef_add_gradients). `forward` must pass ValidateNet.
GradientResult AddGradients(const NetDef& forward, const GradientOptions& options);

}  // namespace dp
