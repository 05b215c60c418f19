#include "core/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/cpu_budget.h"
#include "core/cpu_relax.h"

namespace dp {
namespace {

thread_local int t_intra_threads = 0;  // 0: no scope, the whole budget

// [begin, end) of chunk c of `chunks` over [0, n), cut at multiples of `align`.
std::pair<int64_t, int64_t> ChunkRange(int64_t n, int chunks, int64_t align, int c) {
  const int64_t units = (n + align - 1) / align;
  return {std::min(n, units * c / chunks * align), std::min(n, units * (c + 1) / chunks * align)};
}

// How long an idle helper looks for the next op's chunks before sleeping.
// Long enough to bridge a training loop's gaps (the ops between GEMMs, the
// optimizer, feeding the next batch): a helper that sleeps there is woken by
// the caller's futex wake, and the kernel then often places it on the
// caller's own CPU (wake-affine), where the two share one core until the
// load balancer moves one of them. Measured on a 2-vCPU VM with the MLP at
// batch 64: with 0.3 ms the helper ran 3 to 50% of the chunks (1.0 to 1.7x
// one core, bimodal); with 5 ms it runs half of them in every run (1.6x).
// An idle process still sleeps within 5 ms.
constexpr auto kHelperSpin = std::chrono::milliseconds(5);

// The process's compute team: helpers that join the op running on another
// thread. One job at a time; its state lives here (not on the caller's
// stack), and the caller does not return before every helper that entered
// the job has left it.
class ComputeTeam {
 public:
  static ComputeTeam& Get() {
    // Never destroyed: helpers sleep through exit.
    static ComputeTeam* team = new ComputeTeam(UsableCpus() - 1);
    return *team;
  }

  int helpers() const { return static_cast<int>(threads_.size()); }

  // False when another op holds the team (the caller then runs alone).
  bool TryAcquire() { return !busy_.exchange(true, std::memory_order_acquire); }

  void Run(int64_t n, int chunks, int64_t align, FunctionRef<void(int, int64_t, int64_t)> fn) {
    n_ = n;
    chunks_ = chunks;
    align_ = align;
    fn_ = &fn;
    next_.store(0, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    // Opens the job: a helper that sees closed_ false sees the fields above.
    closed_.store(false, std::memory_order_seq_cst);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    Work();
    // Chunks taken by helpers are running: they end soon.
    for (int spins = 0; done_.load(std::memory_order_acquire) < chunks; ++spins) {
      if (spins < 4096) CpuRelax();
      else std::this_thread::yield();
    }
    closed_.store(true, std::memory_order_seq_cst);
    while (active_.load(std::memory_order_seq_cst) != 0) CpuRelax();
    std::exception_ptr error = std::move(error_);
    busy_.store(false, std::memory_order_release);
    if (error) std::rethrow_exception(error);
  }

 private:
  explicit ComputeTeam(int helpers) {
    threads_.reserve(static_cast<size_t>(std::max(0, helpers)));
    for (int i = 0; i < helpers; ++i) {
      try {
        threads_.emplace_back([this] { Loop(); });
      } catch (...) {
        break;  // fewer helpers: the callers run more chunks themselves
      }
    }
    for (auto& t : threads_) t.detach();
  }

  // Claims and runs chunks until none is left.
  void Work() {
    for (;;) {
      const int c = next_.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks_) return;
      if (!failed_.load(std::memory_order_relaxed)) {
        const auto [begin, end] = ChunkRange(n_, chunks_, align_, c);
        try {
          (*fn_)(c, begin, end);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu_);
          if (!error_) error_ = std::current_exception();
          failed_.store(true, std::memory_order_relaxed);
        }
      }
      done_.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  void Loop() {
    uint64_t seen = generation_.load(std::memory_order_acquire);
    for (;;) {
      const auto deadline = std::chrono::steady_clock::now() + kHelperSpin;
      uint64_t g;
      for (int i = 0;; ++i) {
        g = generation_.load(std::memory_order_acquire);
        if (g != seen) break;
        CpuRelax();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline) {
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          // Rechecked after announcing the sleep: a Run that bumped the
          // generation before it read sleepers_ is seen here.
          if (generation_.load(std::memory_order_seq_cst) == seen) generation_.wait(seen, std::memory_order_seq_cst);
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          i = 0;
        }
      }
      seen = g;
      active_.fetch_add(1, std::memory_order_seq_cst);
      if (!closed_.load(std::memory_order_seq_cst)) Work();
      active_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  std::vector<std::thread> threads_;
  alignas(64) std::atomic<bool> busy_{false};
  // The job (written by the caller while closed_ is true).
  int64_t n_ = 0;
  int chunks_ = 0;
  int64_t align_ = 1;
  const FunctionRef<void(int, int64_t, int64_t)>* fn_ = nullptr;
  std::mutex error_mu_;
  std::exception_ptr error_;
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> next_{0};
  alignas(64) std::atomic<int> done_{0};
  alignas(64) std::atomic<bool> closed_{true};
  std::atomic<bool> failed_{false};
  alignas(64) std::atomic<int> active_{0};
  std::atomic<int> sleepers_{0};
};

}  // namespace

int IntraOpThreads() {
  const int budget = CpuBudget();
  return t_intra_threads > 0 ? std::min(t_intra_threads, budget) : budget;
}

IntraOpThreadsScope::IntraOpThreadsScope(int n) : saved_(t_intra_threads) { t_intra_threads = std::max(1, n); }

IntraOpThreadsScope::~IntraOpThreadsScope() { t_intra_threads = saved_; }

int ParallelChunks(int64_t n, int64_t grain) {
  if (n <= 0) return 1;
  const int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  return static_cast<int>(std::min<int64_t>(IntraOpThreads(), by_grain));
}

void ParallelForChunks(int64_t n, int chunks, int64_t align, FunctionRef<void(int, int64_t, int64_t)> fn) {
  align = std::max<int64_t>(1, align);
  chunks = std::max(1, chunks);
  if (n <= 0) return;
  if (chunks > 1) {
    ComputeTeam& team = ComputeTeam::Get();
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

int ComputeTeamHelpers() { return ComputeTeam::Get().helpers(); }

}  // namespace dp
