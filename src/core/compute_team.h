// Compute teams: helper threads that join the op running on another thread
// (core/parallel_for.h splits an op into chunks; the caller and the helpers
// claim them). The process has one team of UsableCpus() - 1 helpers for nets
// with one CPU replica; nets with several get a team per replica, its
// helpers pinned to the replica's CPUs (core/cpu_plan.h), so that replicas
// split their ops at once without competing for cores.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cpu_plan.h"
#include "core/function_ref.h"
#include "core/parallel_for.h"

namespace dp {

// One job at a time; its state lives here (not on the caller's stack), and
// the caller does not return before every helper that entered the job has
// left it. Teams are never destroyed: their helpers sleep through exit.
class ComputeTeam {
 public:
  // Starts up to `helpers` threads (fewer if the system refuses), each
  // pinned to `cpus` when it is not empty.
  ComputeTeam(int helpers, std::vector<int> cpus);
  ComputeTeam(const ComputeTeam&) = delete;
  ComputeTeam& operator=(const ComputeTeam&) = delete;

  int helpers() const { return static_cast<int>(threads_.size()); }

  // False when another op holds the team (the caller then runs alone).
  bool TryAcquire() { return !busy_.exchange(true, std::memory_order_acquire); }

  // Runs fn over the chunks with the helpers; the team must be acquired,
  // and is released on return. Rethrows the first chunk's exception.
  void Run(int64_t n, int chunks, int64_t align, FunctionRef<void(int, int64_t, int64_t)> fn);

 private:
  void Work();
  void Loop();

  std::vector<int> cpus_;
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

// The team of nets with one CPU replica: UsableCpus() - 1 helpers, not
// pinned; started at the first call.
ComputeTeam& ProcessComputeTeam();

// What CPU replica `index` of `count` runs on: its threads, the CPUs its
// runner and helpers are pinned to (empty: not pinned), and its team
// (threads - 1 helpers). From DivideCpus(ProcessCpuTopology(), CpuBudget(),
// count), made at the first call for that count and budget and kept (its
// helpers sleep while no net of that many replicas runs).
struct ReplicaCpus {
  int threads = 1;
  std::vector<int> cpus;
  ComputeTeam* team = nullptr;
};
struct ReplicaCpuPlan {
  CpuPlan plan;
  std::vector<ReplicaCpus> replicas;
};
const ReplicaCpuPlan& ReplicaCpusFor(int count);

}  // namespace dp
