// The dependency graph of a net and its grouping into chains, computed once
// when a net is created. Dependencies come from blob accesses in list order
// (read-after-write, write-after-write, write-after-read) and control inputs.
// A chain is a maximal run of ops on one device where each op has exactly one
// parent and that parent has exactly one child: it executes as one task, and
// only its tail needs an event (Caffe2's computeChains).
//
// Partial writes: an op with int arguments parts = P > 1 and part = k writes
// only part k of P disjoint parts of each of its outputs (and reads only that
// part of them; the optimizer updates of a shared model, one op per replica).
// Consecutive such writers of a blob, with the same P and distinct k and no
// other reader between them, form one write: each depends on what came before
// the group, not on the others, so they run at once; a later access depends
// on every member.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "graph/net_def.h"

namespace dp {

struct TaskGraph {
  // Per op: the ops it must wait for and the ops that wait for it (sorted, unique).
  std::vector<std::vector<int>> parents, children;
  // Chains: ops in execution order; per op, its chain.
  std::vector<std::vector<int>> chains;
  std::vector<int> chain_of;
  // Per chain: parent and child chains (sorted, unique) and its device.
  std::vector<std::vector<int>> chain_parents, chain_children;
  std::vector<DeviceOption> chain_device;

  size_t num_edges() const;
};

// The op's partial write (parts = 1: it writes its outputs whole).
struct PartialWrite {
  int64_t parts = 1;
  int64_t part = 0;
};
PartialWrite PartialWriteOf(const OperatorDef& op);

// `devices[i]` is op i's resolved device.
TaskGraph BuildTaskGraph(const NetDef& net, const std::vector<DeviceOption>& devices);

// Graphviz DOT of the ops and their dependencies, chains as clusters.
std::string TaskGraphToDot(const NetDef& net, const TaskGraph& graph, const std::vector<DeviceOption>& devices);

// The same for a net definition alone (ops on their own or the net's device).
std::string NetDefToDot(const NetDef& net);

}  // namespace dp
