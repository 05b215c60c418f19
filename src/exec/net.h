// Net: a validated NetDef instantiated in a workspace (operators bound to
// blobs) plus the executor that runs it. Build once, run many times.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "core/workspace.h"
#include "exec/executor.h"
#include "graph/net_def.h"
#include "ops/operator.h"

namespace dp {

struct NetOptions {
  ExecutorKind executor = ExecutorKind::kDefault;  // kDefault: the NetDef's choice
  int32_t num_workers = 0;                          // 0: the NetDef's choice
};

class Net {
 public:
  // Validates the definition, checks devices and kernels, creates operators.
  Net(std::shared_ptr<const NetDef> def, std::shared_ptr<Workspace> ws, NetOptions options = {});
  ~Net();
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // Runs every op once. Throws dp::Error naming the net and the failing op.
  // A second Run while one is in progress fails with kFailedPrecondition.
  void Run();

  const NetDef& def() const { return *def_; }
  const std::string& label() const { return label_; }
  Workspace& workspace() const { return *ws_; }
  const std::vector<std::unique_ptr<Operator>>& ops() const { return ops_; }
  ExecutorKind executor_kind() const { return kind_; }

 private:
  std::shared_ptr<const NetDef> def_;
  std::shared_ptr<Workspace> ws_;
  std::string label_;
  std::vector<std::unique_ptr<Operator>> ops_;
  std::vector<Blob*> external_inputs_;
  ExecutorKind kind_;
  std::unique_ptr<Executor> executor_;
  std::atomic<bool> running_{false};
};

}  // namespace dp
