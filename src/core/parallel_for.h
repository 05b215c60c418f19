// Intra-op parallelism: an op splits its work (a GEMM's rows, a convolution's
// images) into chunks that the calling thread and a compute team
// (core/compute_team.h: the process's, or the running replica's) run
// together. dp owns these threads instead of letting BLAS start its own
// (OpenBLAS's threads spin-yield between small calls and, with several CPU
// replicas each calling it, oversubscribe the cores): BLAS runs
// single-threaded inside each chunk.
//
// How many threads an op may use is a property of the thread it runs on,
// set by the executor for each task (IntraOpThreadsScope): the CPU budget
// split between the net's CPU replicas, so that cpu:N replicas never
// oversubscribe, each on its own team. Outside any scope it is the whole budget.
//
// Chunks are claimed, not assigned: the caller runs every chunk that no
// helper has taken by the time it is free, so an op never waits for a helper
// to wake up; it only waits for chunks already running elsewhere. One op at a
// time uses the team; an op that finds it busy runs its chunks itself.
#pragma once

#include <cstdint>
#include <utility>

#include "core/function_ref.h"

namespace dp {

// Threads the op running on this thread may use (>= 1).
int IntraOpThreads();

class ComputeTeam;

// Sets IntraOpThreads() for the calling thread until destroyed (n < 1: 1),
// and the team its ops split on (nullptr: the process's; core/compute_team.h).
class IntraOpThreadsScope {
 public:
  explicit IntraOpThreadsScope(int n, ComputeTeam* team = nullptr);
  ~IntraOpThreadsScope();
  IntraOpThreadsScope(const IntraOpThreadsScope&) = delete;
  IntraOpThreadsScope& operator=(const IntraOpThreadsScope&) = delete;

 private:
  int saved_;
  ComputeTeam* saved_team_;
};

// How many chunks ParallelFor splits [0, n) into: at most IntraOpThreads(),
// each of at least `grain` items (>= 1).
int ParallelChunks(int64_t n, int64_t grain);

// Runs fn(chunk, begin, end) for the `chunks` contiguous parts of [0, n),
// each a multiple of `align` items long but the last, on the caller and the
// compute team (on the caller alone when IntraOpThreads() is 1, however many
// chunks); returns when all are done. The first exception a chunk
// throws is rethrown here, after every chunk taken has finished (chunks not
// yet taken then are skipped).
void ParallelForChunks(int64_t n, int chunks, int64_t align, FunctionRef<void(int, int64_t, int64_t)> fn);

// [begin, end) of chunk c of `chunks` over [0, n), cut at multiples of
// `align`: how ParallelForChunks cuts [0, n).
std::pair<int64_t, int64_t> ChunkRange(int64_t n, int chunks, int64_t align, int c);

// ParallelChunks(n, grain) chunks of [0, n): fn(begin, end).
inline void ParallelFor(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  ParallelForChunks(n, ParallelChunks(n, grain), 1, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

// Threads of the compute team (UsableCpus() - 1 helpers, started when first
// needed), for tests and diagnostics.
int ComputeTeamHelpers();

}  // namespace dp
