#include "comm/thread_team.h"

#include <chrono>
#include <utility>

#include "core/cpu_relax.h"
#include "core/error.h"

namespace dp {
namespace {

// How long an idle helper (or the caller waiting for helpers) spins before
// sleeping: the collectives of one training step follow each other within
// microseconds, and a futex wake-up costs more than that. By time, since a
// pause lasts from a few to ~40 ns depending on the CPU.
constexpr auto kSpinTime = std::chrono::microseconds(20);
constexpr int kPausesPerClockCheck = 16;

// The team whose member the current thread is running (helpers: always their
// team; the caller: during its own Run), to refuse reentrant runs.
thread_local const ThreadTeam* t_member_of = nullptr;

// Marks the current thread as a member of `team` for a scope, restoring the
// previous mark (a member of one team may run another team).
class MemberScope {
 public:
  explicit MemberScope(const ThreadTeam* team) : outer_(t_member_of) { t_member_of = team; }
  ~MemberScope() { t_member_of = outer_; }
  MemberScope(const MemberScope&) = delete;
  MemberScope& operator=(const MemberScope&) = delete;

 private:
  const ThreadTeam* outer_;
};

// Spins until pred() holds or kSpinTime has passed; returns pred().
template <typename Pred>
bool SpinFor(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < kPausesPerClockCheck; ++i) {
      if (pred()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return pred();
  }
}

}  // namespace

ThreadTeam::ThreadTeam(int n) : n_(n) {
  DP_ENFORCE(n >= 1, "a thread team needs at least 1 member, got ", n);
  threads_.reserve(static_cast<size_t>(n - 1));
  try {
    for (int i = 1; i < n; ++i) threads_.emplace_back([this, i] { Loop(i); });
  } catch (...) {
    // Thread creation failed part way: stop and join the ones that started.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : threads_) t.join();
    throw;
  }
}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadTeam::RecordError(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_) error_ = std::move(error);
}

bool ThreadTeam::WaitForWork(uint64_t seen, uint64_t* next) {
  // acquire: pairs with Run's release bump, publishing fn_ and pending_.
  if (SpinFor([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
    *next = generation_.load(std::memory_order_acquire);
    return true;
  }
  std::unique_lock<std::mutex> lock(mu_);
  // Run bumps the generation under mu_, so this check-then-sleep cannot miss it.
  start_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
  const uint64_t g = generation_.load(std::memory_order_acquire);
  if (g == seen) return false;  // stopping, and no run is waiting for this helper
  *next = g;
  return true;
}

void ThreadTeam::Loop(int index) {
  t_member_of = this;
  uint64_t seen = 0;
  for (;;) {
    uint64_t g;
    if (!WaitForWork(seen, &g)) return;
    seen = g;
    try {
      (*fn_)(index, n_);
    } catch (...) {
      RecordError(std::current_exception());
    }
    // The last helper wakes the caller. Notifying under mu_ pairs with the
    // caller's predicate check under mu_ (no lost wake-up).
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadTeam::WaitForHelpers() {
  if (SpinFor([&] { return pending_.load(std::memory_order_acquire) == 0; })) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadTeam::Run(const std::function<void(int index, int n)>& fn) {
  DP_ENFORCE_CODE(t_member_of != this, Code::kFailedPrecondition,
                  "ThreadTeam::Run called by a member of the same team (runs are not reentrant)");
  std::lock_guard<std::mutex> run_lock(run_mu_);
  if (n_ == 1) {
    MemberScope member(this);
    fn(0, 1);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    pending_.store(n_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  {
    MemberScope member(this);
    try {
      fn(0, n_);
    } catch (...) {
      RecordError(std::current_exception());
    }
  }
  WaitForHelpers();
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = nullptr;
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace dp
