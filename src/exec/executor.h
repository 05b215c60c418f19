// Executors decide when and where the ops of a net run. The simple executor
// runs them in list order on the calling thread; the async DAG executor
// (its own issue) schedules chains on per-device pools and streams.
#pragma once

#include <memory>
#include <vector>

#include "core/context.h"
#include "ops/operator.h"

namespace dp {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs all ops once; throws the first error.
  virtual void Run() = 0;
};

// ops outlive the executor (both belong to the Net).
std::unique_ptr<Executor> MakeSimpleExecutor(const std::vector<std::unique_ptr<Operator>>& ops);

}  // namespace dp
