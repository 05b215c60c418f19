// How dp divides a machine's CPUs between parts that run at once: the CPU
// replicas of one net (`--devices cpu:N`), or the processes of one host
// under dp-run. Every part gets the same number of threads (a data-parallel
// step waits for its slowest replica) and, when there are CPUs enough, a
// disjoint set of CPUs that its threads are pinned to, so that replicas
// never compete for a core: its runner (the executor worker that runs the
// replica's ops), the helpers of its compute team, and the single-threaded
// BLAS and oneDNN calls inside their chunks. What is left over (the budget
// modulo the parts) is pinned to nobody: the loader, the communicators'
// threads and the application's own run there.
//
// Placement follows the topology (core/cpu_topology.h): a part is kept
// inside one last-level-cache domain whenever its share fits in what a
// domain has left, hardware threads of one core stay in one part, and only
// the parts that fit no domain span several (taking leftovers node by node).
// Whether all parts sit behind one cache decides the replicas' layout: a
// shared model (one copy of the params that every replica reads, each part
// of it updated by one replica) moves every updated line to the other
// replicas' cores through that cache, which is cheap within one domain and a
// cross-domain fetch per line otherwise; copies per replica with a reduce
// keep each replica's params in its own domain.
#pragma once

#include <vector>

#include "core/cpu_topology.h"

namespace dp {

struct CpuPart {
  std::vector<int> cpus;  // what its threads are pinned to; empty: not pinned
  int threads = 1;        // its runner and compute-team helpers together
  bool spans_domains = false;
};

struct CpuPlan {
  std::vector<CpuPart> parts;
  bool pinned = false;  // every part has its own CPUs
  // Every CPU the parts use (all of the process's when not pinned) is in one
  // last-level-cache domain.
  bool one_cache = true;
};

// Divides min(budget, CPUs of `topology`) threads between `parts` (>= 1).
// With fewer threads than parts every part gets one thread and nobody is
// pinned (the kernel balances them). One part is never pinned either: it
// has the whole process.
CpuPlan DivideCpus(const CpuTopology& topology, int budget, int parts);

// Whether CPU replicas of one process should share one model: when they sit
// behind one last-level cache. `replicas` > 1.
bool SharedModelPays(const CpuPlan& plan);

}  // namespace dp
