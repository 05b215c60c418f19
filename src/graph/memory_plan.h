// Memory planning of a net (Caffe2's memonger and dynamic memory management,
// in the library): which blobs are temporaries of a run, when each is dead,
// and which of them may take turns in one block of memory.
//
// A temporary is a blob that a run makes before it reads it and does not
// leave behind: its first access in the net is a whole write by an op that
// does not read it (so nothing from an earlier run is read), some op of the
// net reads it after its last write (so the net itself consumes what it
// wrote), and it is none of the net's external inputs or outputs, nor a blob
// the caller keeps (other nets' inputs, `keep`). Parameters, optimizer state
// and counters are read before they are written; fed inputs are external
// inputs; losses, metrics and gradients handed to other nets are external
// outputs or never read again: none of them is a temporary.
//
// Its accesses are the ops that read or write it. The async executor may run
// the ops in any order the dependency graph (graph/task_graph.h) allows (the
// simple one runs them in list order: ListOrderGraph), so a
// temporary is dead only once all its accessors have run: the net counts them
// down each run and the last one to finish frees it (kFree) or parks its
// storage in its slot (kShare). Two temporaries may share a slot only when
// every accessor of one is a strict ancestor in the graph of the first
// writer of the other: in every order the executor may choose, the second is
// made only after the first is dead. All accesses of a temporary descend from
// its first write (read-after-write and write-after-read edges), so a slot's
// blobs form a chain in which each is dead before the next is born.
// VerifyMemoryPlan checks exactly that, for every pair in every slot.
//
// An op's scratch (Operator::Scratch: im2col columns, partial sums) is a
// temporary too, alive while the op runs: accessed by that op alone, it takes
// turns in the slots like the blobs do. Sizes decide which ops have scratch,
// so it is planned once a run has shown them (the sized plan).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device.h"
#include "graph/net_def.h"
#include "graph/task_graph.h"

namespace dp {

struct MemoryPlan {
  struct Temporary {
    std::string blob;            // empty for an op's scratch
    bool scratch = false;        // the scratch of op first_write
    int first_write = -1;        // op index
    std::vector<int> accessors;  // ops that read or write it, ascending
    DeviceOption device;         // its first writer's device
    int slot = -1;               // kShare: its slot; kFree: -1
  };
  MemoryMode mode = MemoryMode::kKeep;
  std::vector<Temporary> temporaries;  // by first write
  int num_slots = 0;
  // Per op: the blob temporaries (indices into `temporaries`) it reads or writes.
  std::vector<std::vector<int>> op_temporaries;
  // Per op: the slot of its scratch (kShare, sized plans), -1 for none.
  std::vector<int> op_scratch_slot;
};

// The order the simple executor runs a net's ops in (list order) as a
// graph: op i's parent is op i - 1. Planned against it, a temporary may take
// the block of any blob whose last use comes earlier in the list; planned
// against the dependency graph, only of one that every order the async
// executor may choose retires first.
TaskGraph ListOrderGraph(size_t num_ops);

// Past this many ops a net is not planned (the ancestor sets take
// ops^2 / 8 bytes): it runs as kKeep.
inline constexpr size_t kMaxPlannedOps = 16384;
// Past this many temporaries a sized plan tries one order of placing them
// (the largest first), not three.
inline constexpr int kMaxTriedTemporaries = 8192;

// The plan of `net` in `mode` (kDefault is kKeep; kKeep plans nothing). `keep`
// names blobs that stay whole (read by other nets). With `sizes` (bytes of
// each temporary in an earlier run), slots are chosen best fit: a blob goes
// to the smallest free slot that holds it, else to the largest (which grows),
// so that the slots' sizes add up to little (three orders of placing them
// are tried, the plan of least bytes kept); without, to the first free slot.
// With `scratch_sizes` (bytes of each op's scratch in an earlier run; kShare
// only), ops that had scratch get a scratch temporary.
MemoryPlan PlanMemory(const NetDef& net, const TaskGraph& graph, const std::vector<DeviceOption>& devices,
                      MemoryMode mode, const std::set<std::string>& keep = {},
                      const std::unordered_map<std::string, size_t>* sizes = nullptr,
                      const std::vector<size_t>* scratch_sizes = nullptr);

// Throws kInternal naming the two blobs and the ops when two temporaries of
// one slot could be alive at once in some order the graph allows, when a
// slot's blobs live on different memories, or when the plan's bookkeeping
// (op_temporaries, accessors) disagrees with the net.
void VerifyMemoryPlan(const NetDef& net, const TaskGraph& graph, const std::vector<DeviceOption>& devices,
                      const MemoryPlan& plan);

}  // namespace dp
