#include "core/compute_team.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include "core/cpu_budget.h"
#include "core/cpu_relax.h"

namespace dp {
namespace {

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

}  // namespace

ComputeTeam::ComputeTeam(int helpers, std::vector<int> cpus) : cpus_(std::move(cpus)) {
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

void ComputeTeam::Run(int64_t n, int chunks, int64_t align, FunctionRef<void(int, int64_t, int64_t)> fn) {
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

// Claims and runs chunks until none is left.
void ComputeTeam::Work() {
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

void ComputeTeam::Loop() {
  // A pinned team keeps its helpers on its replica's CPUs (best effort: a
  // mask the kernel refuses leaves the helper where it is).
  SetThreadAffinity(cpus_);
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

ComputeTeam& ProcessComputeTeam() {
  static ComputeTeam* team = new ComputeTeam(UsableCpus() - 1, {});
  return *team;
}

const ReplicaCpuPlan& ReplicaCpusFor(int count) {
  static std::mutex mu;
  static auto* plans = new std::map<std::pair<int, int>, std::unique_ptr<ReplicaCpuPlan>>();
  count = std::max(1, count);
  const int budget = CpuBudget();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*plans)[{count, budget}];
  if (!slot) {
    auto p = std::make_unique<ReplicaCpuPlan>();
    p->plan = DivideCpus(ProcessCpuTopology(), budget, count);
    for (const CpuPart& part : p->plan.parts) {
      ReplicaCpus r;
      r.threads = part.threads;
      r.cpus = part.cpus;
      // One replica has the process's team; several get their own.
      r.team = count == 1 ? &ProcessComputeTeam() : new ComputeTeam(part.threads - 1, part.cpus);
      p->replicas.push_back(std::move(r));
    }
    slot = std::move(p);
  }
  return *slot;
}

}  // namespace dp
