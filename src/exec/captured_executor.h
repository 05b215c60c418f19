// The executor of a net that runs as one CUDA graph (exec/graph_capture.h
// decides when). Every run of it goes: the host chains before the graph on
// the calling thread, the copies into the GPU on its first stream
// (CapturePlan::transfers), then the graph's chains, then the host chains
// after it. The graph's chains are issued from the calling thread, in dependency
// order, onto its own streams (a chain continues on its parent's stream, a
// fork takes the next one; events order chains across streams), on three
// occasions, as the CapturePolicy decides:
//   - on the streams (the warm-up run, a run the graph cannot take): issued
//     and run as they are;
//   - captured: the same issue recorded into a graph (the first stream forks
//     to the others and joins them back, so the event waits become graph
//     edges), which is then launched for this run's results. A capture that
//     fails (an op that synchronises or allocates while recorded) is
//     discarded and the run issues its chains on the streams instead;
//   - replayed: blobs fed again are copied into the buffers the graph reads,
//     then one launch.
// Once the policy gives up on graphs, runs go to the net's ordinary
// executor (made then). A profiled run that launches a graph reports it as
// one span (RunControl::graph) in place of its ops' timings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "exec/executor.h"
#include "exec/graph_capture.h"
#include "exec/net_memory.h"
#include "graph/task_graph.h"
#include "ops/operator.h"

namespace dp {

struct CaptureOptions {
  int streams_per_gpu = 1;  // streams the graph's chains are issued on
  // Makes the GPU's contexts (a test passes contexts of a fake device).
  ContextFactory make_context = &CreateContext;
  // The net's memory plan ('share'; null: none), which outlives the
  // executor: its slots' blocks are part of the graph's bindings.
  NetMemory* memory = nullptr;
  // Storage allocated so far on the graph's device (empty:
  // LibraryAllocations of it): a capture that allocated is not kept.
  std::function<uint64_t()> allocations;
};

// A graph net's figures (Net::capture_stats).
struct CaptureStats {
  CapturePolicy::Stats runs;  // captures, replays, invalidations, failed captures
  uint64_t graph_nodes = 0;   // the current graph's (0: none)
  bool given_up = false;      // runs go to the ordinary executor for good
  std::string reason;         // why the last run did not replay a graph (empty when it did)
};

class CapturingExecutor final : public Executor {
 public:
  using StreamsExecutorFactory = std::function<std::unique_ptr<Executor>()>;

  // `plan` is PlanCapture's for these ops and graph (accepted); ops and
  // graph outlive the executor. `make_streams` makes the ordinary executor
  // once the policy gives up.
  CapturingExecutor(const std::vector<std::unique_ptr<Operator>>& ops, const TaskGraph& graph,
                    const CapturePlan& plan, StreamsExecutorFactory make_streams, CaptureOptions options = {});
  ~CapturingExecutor() override;

  // A run on this executor's own streams is issued by Start on the calling
  // thread (host chains included: RunAsync returns once the device work is
  // queued); Finish waits for the device.
  void Start(RunControl* rc) override;
  bool WaitFor(std::chrono::milliseconds timeout) override;
  void Finish() override;
  void Run(RunControl* rc) override;

  // Between runs.
  CaptureStats stats() const;

 private:
  struct Step {
    int chain = 0;
    int stream = 0;
    std::vector<Event*> waits;  // parents' events on other streams
    Event* record = nullptr;    // recorded after its ops when a child runs on another stream
  };

  void RunOwn(RunControl& rc);
  void RunHost(const std::vector<int>& chains, RunControl& rc);
  void Issue(RunControl& rc);
  void Capture(RunControl& rc);
  void Launch(RunControl& rc);
  void ResetEvents();
  int64_t Since(const RunControl& rc) const;
  CaptureBindings Bindings() const;  // of the graph's ops and the memory plan's slots, now

  StreamsExecutorFactory make_streams_;
  NetMemory* memory_ = nullptr;
  DeviceOption gpu_;  // the graph's
  std::function<uint64_t()> allocations_;
  std::unique_ptr<Executor> streams_;  // once the policy gave up
  bool delegated_ = false;             // this run went to streams_
  std::vector<std::vector<Operator*>> chain_ops_;
  std::vector<DeviceOption> chain_device_;
  std::vector<int> before_, after_;  // host chains, in dependency order
  std::vector<Operator*> transfers_;  // CapturePlan::transfers, before the graph on the first stream
  std::vector<Step> steps_;          // the graph's chains, in dependency order
  std::vector<Operator*> graph_ops_;
  std::vector<size_t> graph_op_indices_;  // their indices in the net
  std::vector<std::unique_ptr<DeviceContext>> contexts_;  // per stream; [0] begins and ends captures
  std::vector<std::unique_ptr<Event>> events_;            // every event below, reset each run
  Event* fork_ = nullptr;
  Event* done_ = nullptr;
  std::vector<std::pair<int, Event*>> joins_;  // per stream other than 0 that a chain uses
  CapturePolicy policy_;
  std::unique_ptr<DeviceGraph> graph_;
  CapturePolicy::Decision decision_;
  bool policy_told_ = false;  // AfterRun already called for this run (a capture)
  std::vector<std::shared_ptr<const Tensor>> fed_;  // what this run's copies into the graph read
  std::exception_ptr error_;
};

}  // namespace dp
