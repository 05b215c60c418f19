// Executors decide when and where the ops of a net run. The simple executor
// runs them in list order on the calling thread; the async executor
// (async_executor.cc) runs chains of the dependency graph on per-device
// worker pools and CUDA streams, synchronised by events.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/context.h"
#include "graph/task_graph.h"
#include "ops/operator.h"

namespace dp {

// When and where one op ran in the last profiled run (ns since run start).
struct OpTiming {
  int64_t start_ns = -1;  // -1: did not run
  int64_t end_ns = -1;
  int32_t thread = -1;    // worker id; executor-specific, for traces
  uint64_t bytes = 0;     // the workspace's bytes in use (all devices) when it ended
};

// Shared between a run's caller and the executor.
struct RunControl {
  std::atomic<bool> cancel{false};
  std::vector<OpTiming>* timings = nullptr;  // per op when profiling, else nullptr
  const MemoryBudget* budget = nullptr;      // the workspace's, for the timings' bytes
  std::chrono::steady_clock::time_point start;
  // When profiling a run that replayed (or captured) a CUDA graph: the
  // graph's span, from its launch until the host saw it done, in place of
  // the timings of its ops (exec/captured_executor.h).
  OpTiming graph;
  uint64_t graph_ops = 0;
  uint64_t graph_kernels = 0;       // its kernel nodes (DeviceGraph::kernel_nodes)
  double graph_device_us = -1;      // the device's time for it (-1: unknown)
};

// The first error of a run (first by time); later ones are dropped.
class FirstError {
 public:
  void Record(std::exception_ptr e);
  bool has() const { return has_.load(std::memory_order_acquire); }
  void Reset();
  void RethrowIfAny();

 private:
  std::mutex mu_;
  std::atomic<bool> has_{false};
  std::exception_ptr error_;
};

// Runs one op under rc: throws kCancelled instead if cancellation was asked
// for, and records its timing when profiling.
void RunOp(Operator& op, DeviceContext& ctx, const RunControl& rc, int32_t thread);

class Executor {
 public:
  virtual ~Executor() = default;
  // Begins a run (the simple executor completes it before returning).
  virtual void Start(RunControl* rc) = 0;
  // True once the run has finished; false on timeout.
  virtual bool WaitFor(std::chrono::milliseconds timeout) = 0;
  // After WaitFor returned true: throws the run's first error, if any.
  virtual void Finish() = 0;
  // A whole run on the calling thread's behalf.
  virtual void Run(RunControl* rc) {
    Start(rc);
    WaitFor(std::chrono::milliseconds::max());
    Finish();
  }
};

struct AsyncOptions {
  // Past this a count is a mistake (or hostile input), not a plan: each
  // worker is a thread with its own stack.
  static constexpr int kMaxWorkers = 1024;
  int cpu_workers = 0;       // 0: one per CPU replica of the net, at most CpuBudget(); at most kMaxWorkers
  int streams_per_gpu = 1;   // CUDA workers (each with its own stream) per device; at most kMaxWorkers
};

// ops outlive the executor (both belong to the Net).
std::unique_ptr<Executor> MakeSimpleExecutor(const std::vector<std::unique_ptr<Operator>>& ops);
std::unique_ptr<Executor> MakeAsyncExecutor(const std::vector<std::unique_ptr<Operator>>& ops,
                                            const TaskGraph& graph, AsyncOptions options);

}  // namespace dp
