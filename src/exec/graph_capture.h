// Whole-net CUDA graph capture, its host half: which nets may be captured,
// what a captured graph is bound to, and the choice before every run: run
// on the streams, capture this run, or replay the graph. A graph bakes in
// every address its kernels touch, so it may be replayed only while each of
// them still holds what it held at capture; this file decides that. The
// CUDA half (recording the streams into one graph, launching it) belongs to
// the executor and the CUDA context; nothing here calls CUDA, so every rule
// below is tested on the host (tests/unit/test_graph_capture.cc).
//
// The run after a capture replays it when nothing moved:
//   - a blob that the net only reads (data, labels, an inference net's
//     params) may be fed again with a tensor of the same shape, dtype and
//     device: it is copied into the buffer the graph reads (the graph keeps
//     that buffer alive), and the blob holds that buffer again;
//   - a blob fed with another shape, a blob the net writes that now holds
//     other memory (replaced by a caller, a checkpoint load), any output or
//     scratch that was reallocated: the graph is stale. It is dropped, the
//     run goes on the streams (where ops resize what they must) and the next
//     run captures again. After kMaxInvalidations of those the net keeps to
//     the streams: its bindings change too often for a graph to pay;
//   - a block of the net's memory plan ('share') that moved: the plan was
//     made again (another net now reads a temporary; the first run's sizes),
//     so the graph is stale;
//   - a blob the net writes that somebody else shares (a fetch that kept its
//     storage): writing it in place, as a replay would, would change their
//     copy; the op copies it first (copy-on-write), so that run goes on the
//     streams. Likewise a read-only blob fed again while a tensor outside the
//     net still holds the graph's buffer for it (a fetch of the last batch, on
//     another thread): the replay's refill would change that tensor.
// A capture follows a run on the streams that succeeded with the same
// bindings (the warm-up: outputs are sized, lazy handles made), and its own
// bindings must come out as they went in: an allocation during the capture
// would have recorded memory that the graph does not own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/blob.h"
#include "core/context.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "graph/net_def.h"
#include "graph/task_graph.h"
#include "ops/operator.h"

namespace dp {

// How a net's chains split around one captured graph: host chains that
// run before it (no CUDA op before them), the CUDA chains it holds, and
// host chains after it (no CUDA op after them). `refusal` says why the net
// cannot be captured (then the lists are empty); empty when it can.
struct CapturePlan {
  std::string refusal;
  std::vector<int> before, graph, after;  // chain indices, ascending
  // Copy ops into the GPU that run before the graph on its first stream,
  // every run, outside it (op indices, ascending): each starts its chain
  // (after other transfers only) and waits only for host ops and transfers.
  // Feeds and the learning rate reach the device this way; a captured copy
  // would read pageable host memory the graph does not own. A chain of
  // transfers alone is in none of the lists above.
  std::vector<int> transfers;
};

// `ops[i]` runs on `graph.chain_device[graph.chain_of[i]]`. A net qualifies
// when some op runs on CUDA, all of them on one GPU (replicas sharing it
// included), each CUDA op's kernel but the transfers is safe to capture
// (Operator::GraphCaptureObstacle), no host op sits between two CUDA ops,
// and the memory plan keeps its blocks: `keep`, or `share`, whose
// temporaries take turns in blocks that stay in the plan's slots between
// runs (a replay writes the blocks the capture saw, and leaves the blobs as
// the capture did: temporaries empty); `free` returns them to the allocator.
CapturePlan PlanCapture(const std::vector<std::unique_ptr<Operator>>& ops, const TaskGraph& graph, MemoryMode memory);

// What a set of ops is bound to: every tensor blob they read or write, and
// their scratch, as addresses, shapes and dtypes.
class CaptureBindings {
 public:
  struct Entry {
    Blob* blob = nullptr;        // nullptr: an op's scratch, or a slot
    const Operator* op = nullptr;  // whose scratch (or the first op to use the blob)
    bool written = false;        // some op writes the blob
    const void* data = nullptr;  // nullptr: no memory (an empty blob)
    std::weak_ptr<Storage> storage;  // not owned: the blob's (COW counts owners)
    size_t nbytes = 0;
    Dims dims;
    DType dtype = DType::kUndefined;
    DeviceOption device;
    bool shared = false;  // written, and not writable in place (another owner)
    int slot = -1;        // >= 0: the block parked in slot `slot` of the net's memory plan
    uint64_t plan = 0;    // that plan's generation (NetMemory::generation)
  };

  // The bindings of `ops` now, entries in the order the ops list them, then
  // the blocks parked in the `slots` of the net's memory plan ('share').
  // Blobs that `transfers` (CapturePlan::transfers) write count as written:
  // the transfer writes them in place every run, so the graph holds no
  // buffer of its own for them.
  static CaptureBindings Of(const std::vector<Operator*>& ops, const std::vector<const StorageSlot*>& slots = {},
                            uint64_t plan = 0, const std::vector<Operator*>& transfers = {});
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

// A captured graph's bindings and the memory it holds: the buffers of the
// blobs fed again between replays.
struct CapturedBindings {
  CaptureBindings bindings;
  std::vector<std::shared_ptr<Storage>> inputs;  // per entry: held for a read-only blob, else null
};

// How `now` stands against a graph's bindings.
struct BindingCheck {
  enum class Result {
    kSame,    // replay as it is
    kRefed,   // replay after copying the `refed` entries' new tensors in
    kShared,  // run on the streams: a written blob has another owner (`reason`)
    kStale,   // the graph may never replay again (`reason`)
  };
  Result result = Result::kSame;
  std::vector<size_t> refed;
  std::string reason;
};
BindingCheck CheckBindings(const CapturedBindings& graph, const CaptureBindings& now);

// Copies each refed entry's new tensor into the buffer the graph reads (on
// ctx, asynchronous on a CUDA stream) and makes the blob hold that buffer
// again. Call between runs. Returns the fed tensors, which the copies read:
// hold them until ctx's work is done.
std::vector<std::shared_ptr<const Tensor>> CopyRefedInputs(const CapturedBindings& graph, const BindingCheck& check,
                                                          DeviceContext& ctx);

// The choice before every run of a net, and what it learns from each run.
class CapturePolicy {
 public:
  static constexpr int kMaxInvalidations = 8;
  static constexpr int kMaxCaptureFailures = 2;

  enum class Action { kStreams, kCapture, kReplay };
  struct Decision {
    Action action = Action::kStreams;
    BindingCheck check;  // kReplay: what to copy in first (CopyRefedInputs)
  };
  struct Stats {
    uint64_t captures = 0, replays = 0, invalidations = 0, capture_failures = 0;
  };

  // `refusal` non-empty: the net never captures (PlanCapture's reason, or
  // that capture is turned off).
  explicit CapturePolicy(std::string refusal = {});

  // Before a run, with the bindings of the graph's ops now. `uncaptured`:
  // this run must run op by op (profiling its ops).
  Decision BeforeRun(const CaptureBindings& now, bool uncaptured = false);
  // After the run that `decision` chose: whether it succeeded, the bindings
  // of the graph's ops now, and its error message if not.
  void AfterRun(const Decision& decision, bool ok, CaptureBindings after, const std::string& error = {});

  // Drops the graph after a run that launched it failed on the device.
  void Discard(const std::string& error);

  bool has_graph() const { return has_graph_; }
  const CapturedBindings& graph() const { return graph_; }
  // Why the last run did not replay a graph (empty when it did).
  const std::string& reason() const { return reason_; }
  // True once the net keeps to the streams for good.
  bool given_up() const { return !refusal_.empty(); }
  const Stats& stats() const { return stats_; }

 private:
  void Drop(std::string reason);

  std::string refusal_;  // non-empty: never capture again
  std::string reason_;
  bool has_graph_ = false;
  CapturedBindings graph_;
  bool warm_ = false;          // the last run went on the streams and succeeded
  CaptureBindings last_;       // the bindings after it
  CaptureBindings capturing_;  // the bindings a capture started from
  Stats stats_;
};

}  // namespace dp
