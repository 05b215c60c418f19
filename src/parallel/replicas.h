// Replicas: where Parallelize puts each replica's blobs and ops (internal to
// parallel/). Replica r runs on options.device_ids[r] under the name scope
// ReplicaScope(device) of core/scope.h ("cpu_0/", "cuda_1/"); the nets'
// builders name and place everything through this class.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "model/model_def.h"
#include "parallel/parallelize.h"

namespace dp {

class Replicas {
 public:
  // `options` must outlive the object.
  Replicas(const ModelDef& model, const ParallelizeOptions& options);

  size_t size() const { return n_; }
  const std::vector<std::string>& scopes() const { return scopes_; }  // per replica: "cpu_0/", ...
  const DeviceOption& device(size_t r) const { return devices_[r]; }
  bool cuda() const { return options_.device_type == DeviceType::kCUDA; }

  // Replica r's name of a template blob: the communicator is global, shared
  // params (ParallelizeOptions::shared_model) are replica 0's, everything
  // else is in r's scope.
  std::string BlobName(size_t r, const std::string& blob) const;

  // Template blobs `list` of every replica, by replica.
  std::vector<std::vector<std::string>> PerReplica(const std::vector<std::string>& list) const;

  // `op` of the template for replica r: blobs renamed (BlobName), op name
  // scoped, placed on r's device.
  OperatorDef ScopedOp(const OperatorDef& op, size_t r) const;

  // An op placed on replica r's device (its blob names as they are).
  OperatorDef On(size_t r, OperatorDef op) const;

  // A collective over `per_replica` tensors of each replica (device-major),
  // written in place; placed on replica 0's device.
  OperatorDef Collective(const std::string& type, const std::vector<std::vector<std::string>>& per_replica,
                         std::vector<Argument> args) const;

  // Appends the replicas' copies of `tmpl`, op by op (op i of every replica,
  // then op i + 1), so that a template collective becomes one op over every
  // replica's tensors, after all their producers and before all consumers.
  void AppendReplicated(NetDef& net, const NetDef& tmpl) const;

  // The op creating the communicator kCommBlob.
  OperatorDef CreateComm() const;

 private:
  Argument NumDevicesArg() const;

  const ParallelizeOptions& options_;
  const size_t n_;
  std::vector<DeviceOption> devices_;
  std::vector<std::string> scopes_;
  std::set<std::string> shared_;  // blobs every replica reads from replica 0
};

}  // namespace dp
