// Blob naming rules, in one place: the name scopes of replicas and the names
// derived from a blob's name (its gradient, its host copy, ...). Net builders
// (autodiff/, model/, parallel/) make names only through these helpers, so a
// name a test or a user looks up is spelled here and nowhere else.
//
// A replica's blobs live under its device's scope: "cpu_0/" + "w" = "cpu_0/w".
// Derived names append a suffix to the (scoped) blob name:
//   GradientName("cpu_0/w")              "cpu_0/w_grad"
//   AccumulatedGradientName("w_grad")    "w_grad_acc"
//   HostCopyName("cpu_1/data")           "cpu_1/data/host"
//   WeightedName("cpu_1/loss")           "cpu_1/loss/weighted"
//   GlobalShareName("cpu_1/loss")        "cpu_1/loss/global"
//   EvalInputName("cuda_0/data")         "cuda_0/data/eval"
//   BmufGlobalName / BmufDeltaName("w")  "w/bmuf_global", "w/bmuf_delta"
//   FullStateName("w/momentum")          "parallel/full/w/momentum"
#pragma once

#include <string>
#include <string_view>

#include "core/device.h"

namespace dp {

// ---- name scopes ----------------------------------------------------------

// The name scope of the replica on device `d`: "cpu_0/", "cuda_1/".
inline std::string ReplicaScope(DeviceOption d) {
  return std::string(DeviceTypeName(d.type)) + "_" + std::to_string(d.id) + "/";
}

// `name` inside `scope` ("cpu_1/", "w" -> "cpu_1/w"). An empty scope leaves
// the name as it is.
inline std::string ScopedName(std::string_view scope, std::string_view name) {
  std::string s(scope);
  s += name;
  return s;
}

// ---- names derived from a blob's name -------------------------------------

// The gradient of `blob` written by autodiff ("w" -> "w_grad").
inline std::string GradientName(const std::string& blob) { return blob + "_grad"; }

// Gradient accumulation (parallelize's accumulate_steps): where a replica
// sums a gradient over the accumulating steps ("w_grad" -> "w_grad_acc").
inline std::string AccumulatedGradientName(const std::string& grad) { return grad + "_acc"; }

// A copy of a device blob on the host, e.g. the host-side part of a split
// batch before it is copied to its CUDA replica ("cpu_1/data" -> ".../host").
inline std::string HostCopyName(const std::string& blob) { return blob + "/host"; }

// A model input of the eval net on a CUDA replica: the fed host batch copied
// there ("cuda_0/data" -> "cuda_0/data/eval"; the train net's split part
// keeps "cuda_0/data", so neither reallocates the other's buffer).
inline std::string EvalInputName(const std::string& blob) { return blob + "/eval"; }

// A replica's loss or metric multiplied by its share of an uneven batch.
inline std::string WeightedName(const std::string& blob) { return blob + "/weighted"; }

// Several processes: a replica's loss or metric as it rides the gradient
// allreduce, which leaves the global batch's value in it.
inline std::string GlobalShareName(const std::string& blob) { return blob + "/global"; }

// BMUF (parallelize's BmufOptions) per param: the global model Wg at the start
// of the block, and the block-level momentum Delta.
inline std::string BmufGlobalName(const std::string& param) { return param + "/bmuf_global"; }
inline std::string BmufDeltaName(const std::string& param) { return param + "/bmuf_delta"; }

// A sharded optimizer state's tensor whole (unscoped `state`, gathered from
// every replica's shard), as a checkpoint saves and loads it.
inline std::string FullStateName(const std::string& state) { return "parallel/full/" + state; }

}  // namespace dp
