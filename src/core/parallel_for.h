// Intra-op parallelism: an op splits its work (a GEMM's rows, a convolution's
// images) into chunks that the calling thread and the process's compute team
// run together. dp owns these threads instead of letting BLAS start its own
// (OpenBLAS's threads spin-yield between small calls and, with several CPU
// replicas each calling it, oversubscribe the cores): BLAS runs
// single-threaded inside each chunk.
//
// How many threads an op may use is a property of the thread it runs on,
// set by the executor for each task (IntraOpThreadsScope): the CPU budget
// split between the net's CPU replicas, so that cpu:N replicas never
// oversubscribe. Outside any scope it is the whole budget.
//
// Chunks are claimed, not assigned: the caller runs every chunk that no
// helper has taken by the time it is free, so an op never waits for a helper
// to wake up; it only waits for chunks already running elsewhere. One op at a
// time uses the team; an op that finds it busy runs its chunks itself.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace dp {

// Threads the op running on this thread may use (>= 1).
int IntraOpThreads();

// Sets IntraOpThreads() for the calling thread until destroyed (n < 1: 1).
class IntraOpThreadsScope {
 public:
  explicit IntraOpThreadsScope(int n);
  ~IntraOpThreadsScope();
  IntraOpThreadsScope(const IntraOpThreadsScope&) = delete;
  IntraOpThreadsScope& operator=(const IntraOpThreadsScope&) = delete;

 private:
  int saved_;
};

// A borrowed callable (no allocation): valid while the callable lives.
template <typename Sig>
class FunctionRef;
template <typename R, typename... A>
class FunctionRef<R(A...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): a parameter type
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...); }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

// How many chunks ParallelFor splits [0, n) into: at most IntraOpThreads(),
// each of at least `grain` items (>= 1).
int ParallelChunks(int64_t n, int64_t grain);

// Runs fn(chunk, begin, end) for the `chunks` contiguous parts of [0, n),
// each a multiple of `align` items long but the last, on the caller and the
// compute team; returns when all are done. The first exception a chunk
// throws is rethrown here, after every chunk taken has finished (chunks not
// yet taken then are skipped).
void ParallelForChunks(int64_t n, int chunks, int64_t align, FunctionRef<void(int, int64_t, int64_t)> fn);

// ParallelChunks(n, grain) chunks of [0, n): fn(begin, end).
inline void ParallelFor(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  ParallelForChunks(n, ParallelChunks(n, grain), 1, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

// Threads of the compute team (UsableCpus() - 1 helpers, started when first
// needed), for tests and diagnostics.
int ComputeTeamHelpers();

}  // namespace dp
