// Whether two CPUs share a last-level cache, measured rather than read: a
// cloud VM's vCPUs may share one according to sysfs and still sit on cores
// of different cache domains of the host (the 2-vCPU development VMs move
// between such placements; bench/core_pair_probe.c). A thread on CPU `b`
// reads 1.6 MB that a thread on CPU `a` has just written, against the same
// read of data it wrote itself: with a shared cache the two cost about the
// same, without one the first costs 2-3x. A few milliseconds.
#pragma once

#include <optional>

#include "core/cpu_plan.h"

namespace dp {

// nullopt when the threads cannot be pinned or do not get their CPUs within
// a bounded wait (a loaded machine): no answer rather than a wrong one.
std::optional<bool> CpusShareCache(int a, int b);

// Whether a plan's parts share a last-level cache: the topology's answer
// (SharedModelPays), confirmed by measuring part 0's first CPU against each
// other part's (up to 3; the majority of three probes each) when the parts
// are pinned and sysfs says they share one; unanswered probes keep the
// topology's answer.
bool PartsShareCache(const CpuPlan& plan);

}  // namespace dp
