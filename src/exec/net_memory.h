// NetMemory: a net's memory plan (graph/memory_plan.h) at run time. Each run
// it counts down every temporary's accesses as their ops finish; the op that
// takes a count to zero (the temporary's last access in this run, whatever
// order the executor chose) empties the blob: its storage goes back to the
// allocator (kFree) or is parked in the blob's slot (kShare), where the next
// blob of the slot, which the plan made sure is written only after this one
// is dead, takes it on its first Resize. Storage that anybody else still
// holds (a view another blob shares, a tensor the caller fetched) is never
// parked: the blob only lets go of it.
//
// The release runs in Operator::Run's stream scope, so a CUDA block freed
// there is ordered on the op's stream (core/caching_allocator.h), and a
// parked block is taken only by an op that the graph, hence the executor's
// events, orders after every access of the blob that left it.
//
// In kFree, every op's scratch is freed too when its kernel returns.
//
// Between runs (BeginRun), the plan is made again when a net created since
// reads one of the temporaries (it is then kept whole), and once, in kShare,
// after the first complete run, with the sizes that run saw (best fit) and
// each op's scratch planned as a temporary of its own: lent from a slot
// while the op runs, given back when its kernel returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/workspace.h"
#include "graph/memory_plan.h"
#include "ops/operator.h"

namespace dp {

class NetMemory final : public OpObserver {
 public:
  // `ops` (the net's) outlive this; `def`, `graph` and `devices` too. The
  // blobs in `keep` are never temporaries (a CUDA graph's inputs written on
  // the host before it: a replay reads them where the capture did).
  NetMemory(const NetDef& def, const TaskGraph& graph, const std::vector<DeviceOption>& devices, Workspace& ws,
            const std::vector<std::unique_ptr<Operator>>& ops, std::set<std::string> keep = {});
  ~NetMemory();
  NetMemory(const NetMemory&) = delete;
  NetMemory& operator=(const NetMemory&) = delete;

  // Before each run (no op of the net running).
  void BeginRun();
  void OpFinished(size_t op_index) noexcept override;

  const MemoryPlan& plan() const { return plan_; }
  // Bytes parked in the slots (between runs: what the slots hold).
  uint64_t slot_bytes() const;
  // The plan's slots of `device`'s memory (between runs): a CUDA graph
  // captured with this plan baked in the blocks they hold, and replays only
  // while they hold them; and the plan's generation, which each new plan
  // (and its new slots) bumps.
  std::vector<const StorageSlot*> slots(DeviceOption device) const;
  uint64_t generation() const { return generation_; }
  // The accesses of these ops count again in this run (their work is issued
  // again: a CUDA graph's capture that was not kept). Between their issues.
  void CountAgain(const std::vector<size_t>& op_indices) noexcept;

 private:
  // A plan keeping `keep` whole; with `scratch_sizes` (per op), sized by the
  // last run (the temporaries' sizes_, each op's scratch).
  void Replan(const std::set<std::string>& keep, const std::vector<size_t>* scratch_sizes);
  void Apply(MemoryPlan plan);
  void Release(int temporary) noexcept;

  const NetDef& def_;
  const TaskGraph& graph_;
  const std::vector<DeviceOption>& devices_;
  Workspace& ws_;
  const std::vector<std::unique_ptr<Operator>>& ops_;
  MemoryPlan plan_;
  std::vector<Blob*> blobs_;                          // per temporary
  std::vector<std::shared_ptr<StorageSlot>> slots_;   // per slot
  std::unique_ptr<std::atomic<int32_t>[]> remaining_; // per temporary: accesses left this run
  std::vector<size_t> sizes_;                         // per temporary: bytes it needed at its last release
  std::vector<size_t> scratch_sizes_;                 // per op: its scratch in the run that sized the plan
  std::vector<bool> scratch_lent_;                    // per op: its scratch comes from a slot
  const std::shared_ptr<StorageSlot> free_slot_ = std::make_shared<StorageSlot>(false);  // kFree's scratch
  std::set<std::string> kept_;                        // temporaries that other nets read
  uint64_t readers_seen_ = 0;
  bool sized_ = false;                                // re-planned with a run's sizes
  bool ran_ = false;                                  // a run began since the last plan
  uint64_t generation_ = 0;                           // plans applied
};

}  // namespace dp
