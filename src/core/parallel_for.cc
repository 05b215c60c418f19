#include "core/parallel_for.h"

#include <algorithm>

#include "core/compute_team.h"
#include "core/cpu_budget.h"

namespace dp {
namespace {

thread_local int t_intra_threads = 0;  // 0: no scope, the whole budget
thread_local ComputeTeam* t_team = nullptr;  // nullptr: the process's team

}  // namespace

int IntraOpThreads() {
  const int budget = CpuBudget();
  return t_intra_threads > 0 ? std::min(t_intra_threads, budget) : budget;
}

IntraOpThreadsScope::IntraOpThreadsScope(int n, ComputeTeam* team) : saved_(t_intra_threads), saved_team_(t_team) {
  t_intra_threads = std::max(1, n);
  t_team = team;
}

IntraOpThreadsScope::~IntraOpThreadsScope() {
  t_intra_threads = saved_;
  t_team = saved_team_;
}

std::pair<int64_t, int64_t> ChunkRange(int64_t n, int chunks, int64_t align, int c) {
  const int64_t units = (n + align - 1) / align;
  return {std::min(n, units * c / chunks * align), std::min(n, units * (c + 1) / chunks * align)};
}

int ParallelChunks(int64_t n, int64_t grain) {
  if (n <= 0) return 1;
  const int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  return static_cast<int>(std::min<int64_t>(IntraOpThreads(), by_grain));
}

void ParallelForChunks(int64_t n, int chunks, int64_t align, FunctionRef<void(int, int64_t, int64_t)> fn) {
  align = std::max<int64_t>(1, align);
  chunks = std::max(1, chunks);
  if (n <= 0) return;
  // An op given one thread runs its chunks alone even when it cut more of
  // them (a batch of GEMMs' blocks): a team's helper would spin on a CPU that
  // the executor gave to another replica.
  if (chunks > 1 && IntraOpThreads() > 1) {
    ComputeTeam& team = t_team != nullptr ? *t_team : ProcessComputeTeam();
    if (team.helpers() > 0 && team.TryAcquire()) {
      team.Run(n, chunks, align, fn);
      return;
    }
  }
  // Alone: the same chunks, in order, on this thread.
  for (int c = 0; c < chunks; ++c) {
    const auto [begin, end] = ChunkRange(n, chunks, align, c);
    fn(c, begin, end);
  }
}

int ComputeTeamHelpers() { return ProcessComputeTeam().helpers(); }

}  // namespace dp
