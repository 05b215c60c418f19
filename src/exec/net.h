// Net: a validated NetDef instantiated in a workspace (operators bound to
// blobs), its dependency graph, and the executor that runs it. Build once,
// run many times.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/math_mode.h"
#include "core/workspace.h"
#include "exec/captured_executor.h"
#include "exec/executor.h"
#include "exec/net_memory.h"
#include "graph/task_graph.h"
#include "graph/net_def.h"
#include "ops/operator.h"

namespace dp {

// Whether a net on one GPU runs as a CUDA graph (exec/captured_executor.h).
enum class CudaGraphs : int32_t { kDefault = 0, kOn = 1, kOff = 2 };  // kDefault: on

struct NetOptions {
  ExecutorKind executor = ExecutorKind::kDefault;  // kDefault: the NetDef's choice, else by devices
  int32_t num_workers = 0;                          // CPU workers of the async executor; 0: NetDef / cores
  int32_t streams_per_gpu = 1;
  bool profile = false;                             // record per-op timings of every run
  // A blob fed since the last run that no net of the workspace reads fails
  // the run (kNotFound) instead of a warning.
  bool unread_feed_error = false;
  // kDefault: the NetDef's memory mode (graph/memory_plan.h); else this one.
  MemoryMode memory = MemoryMode::kDefault;
  // kOff: run op by op on the streams even where the net could be captured
  // (a profiled run then times every op rather than the graph as one span).
  CudaGraphs cuda_graphs = CudaGraphs::kDefault;
  // How the net's CUDA GEMMs compute (core/math_mode.h); CPU ops ignore it.
  MathMode math = MathMode::kDefault;
};

// What a net's last run held (Net::memory_stats).
struct NetMemoryStats {
  MemoryMode mode = MemoryMode::kKeep;
  uint64_t temporaries = 0;  // blobs the plan frees after their last use
  uint64_t slots = 0;        // blocks they take turns in (kShare)
  uint64_t slot_bytes = 0;   // bytes the slots hold between runs
};

class Net {
 public:
  // Validates the definition, checks devices and kernels, creates operators.
  Net(std::shared_ptr<const NetDef> def, std::shared_ptr<Workspace> ws, NetOptions options = {});
  ~Net();  // cancels and drains a run in flight
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // Runs every op once. Throws dp::Error naming the net and the failing op;
  // kCancelled if Cancel() was called. Runs of one net never overlap: a
  // second Run/RunAsync while one is in progress fails with kFailedPrecondition.
  // First, blobs fed since the last run of a net in the workspace that no
  // net of it reads are reported (FeedWatch): a warning, once per blob, or
  // with NetOptions::unread_feed_error kNotFound before any op runs.
  void Run();
  // Starts a run and returns (the simple executor completes it first); Wait
  // collects it.
  void RunAsync();
  // Waits for the run started by RunAsync; throws its error. Returns false on
  // timeout (the run goes on; call Wait again). kFailedPrecondition if no run
  // was started.
  bool Wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  // Asks the current run to stop at the next op boundary (any thread).
  void Cancel() { control_.cancel.store(true, std::memory_order_relaxed); }

  const NetDef& def() const { return *def_; }
  const std::string& label() const { return label_; }
  Workspace& workspace() const { return *ws_; }
  const std::vector<std::unique_ptr<Operator>>& ops() const { return ops_; }
  ExecutorKind executor_kind() const { return kind_; }
  const TaskGraph& graph() const { return graph_; }

  // Timings of the last completed run (empty unless profiling is on).
  const std::vector<OpTiming>& timings() const { return timings_; }
  bool running() const { return running_.load(); }
  // The last run as Chrome trace JSON (chrome://tracing, Perfetto);
  // kFailedPrecondition while a run is in progress.
  std::string TraceJson() const;
  // The ops and their dependencies as Graphviz DOT, chains as clusters.
  std::string Dot() const;
  // The memory plan's figures (between runs). The workspace's peak bytes
  // during the last run are workspace().budget()->peak(device): a run
  // resets them when it begins.
  NetMemoryStats memory_stats() const;
  // Whether the net runs as a CUDA graph, and how that went (between runs);
  // nullopt when it does not (a CPU net, a net PlanCapture refuses, or
  // NetOptions::cuda_graphs kOff): capture_refusal() says why.
  std::optional<CaptureStats> capture_stats() const;
  const std::string& capture_refusal() const { return capture_refusal_; }

 private:
  void BeginRun();
  void EndRun();  // rethrows the run's error with the net's label
  void ReportUnreadFeeds();

  std::shared_ptr<const NetDef> def_;
  std::shared_ptr<Workspace> ws_;
  std::string label_;
  std::vector<std::unique_ptr<Operator>> ops_;
  std::vector<DeviceOption> devices_;
  std::vector<Blob*> external_inputs_;
  TaskGraph graph_;
  ExecutorKind kind_;
  bool profile_;
  bool unread_feed_error_;
  std::vector<std::string> reads_;  // registered with the workspace's FeedWatch
  std::vector<OpTiming> timings_;
  TaskGraph memory_order_;             // the simple executor's list order (memory_ plans against it)
  std::unique_ptr<NetMemory> memory_;  // after ops_: it detaches from them first
  RunControl control_;  // declared before executor_: it outlives the executor
  std::unique_ptr<Executor> executor_;
  CapturingExecutor* capturing_ = nullptr;  // executor_, when the net runs as a CUDA graph
  std::string capture_refusal_;
  std::atomic<bool> running_{false};
};

}  // namespace dp
