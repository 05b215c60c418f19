#include "exec/worker_pool.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <system_error>

#include "core/cpu_budget.h"
#include "core/cpu_relax.h"
#include "core/error.h"

namespace dp {
namespace {

// How long an idle worker spins before sleeping: long enough to bridge the
// gaps of a running net (a sleeping thread on a VM can take milliseconds to
// get its CPU back once woken) and the step between runs of a net run in a
// loop, short enough that an idle process soon sleeps. By time, since a pause
// instruction lasts from a few to ~40 ns depending on the CPU.
constexpr auto kSpinTime = std::chrono::microseconds(1000);
constexpr int kPausesPerClockCheck = 16;
// A spin-lock waiter yields its CPU after this many pauses (the holder may
// have been preempted on an oversubscribed machine).
constexpr int kLockPausesBeforeYield = 64;

}  // namespace

void WorkerPool::SpinLock::lock() {
  for (int spins = 0;;) {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    while (locked_.load(std::memory_order_relaxed)) {
      if (++spins < kLockPausesBeforeYield)
        CpuRelax();
      else
        std::this_thread::yield();
    }
  }
}

WorkerPool::WorkerPool(int num_workers, std::function<void(int)> on_start, int max_spinners)
    : max_spinners_(max_spinners >= 0 ? max_spinners : UsableCpus() - 1), on_start_(std::move(on_start)) {
  ring_.resize(64);
  num_threads_ = static_cast<size_t>(std::max(0, num_workers));
  threads_.reserve(num_threads_);
  try {
    for (int w = 0; w < num_workers; ++w) threads_.emplace_back([this, w] { Loop(w); });
  } catch (const std::system_error& e) {
    Stop();
    DP_THROW(Code::kUnavailable, "cannot start worker thread ", threads_.size() + 1, " of ", num_workers, ": ",
             e.what());
  } catch (...) {
    Stop();
    throw;
  }
}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::AddWorker() {
  const int w = static_cast<int>(threads_.size());
  {
    std::lock_guard<SpinLock> lock(qlock_);
    ++num_threads_;
  }
  try {
    threads_.emplace_back([this, w] { Loop(w); });
  } catch (...) {
    {
      std::lock_guard<SpinLock> lock(qlock_);
      --num_threads_;
    }
    try {
      throw;
    } catch (const std::system_error& e) {
      DP_THROW(Code::kUnavailable, "cannot start worker thread ", w + 1, ": ", e.what());
    }
  }
}

void WorkerPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void WorkerPool::Grow(size_t capacity) {
  std::vector<Job> bigger(capacity);
  for (size_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
  ring_.swap(bigger);
  head_ = 0;
}

void WorkerPool::Reserve(size_t jobs) {
  std::lock_guard<SpinLock> lock(qlock_);
  if (jobs > ring_.size()) Grow(std::bit_ceil(jobs));
}

size_t WorkerPool::capacity() {
  std::lock_guard<SpinLock> lock(qlock_);
  return ring_.size();
}

void WorkerPool::Enqueue(const Job& job) {
  if (count_ == ring_.size()) Grow(ring_.size() * 2);
  ring_[(head_ + count_) & (ring_.size() - 1)] = job;
  ++count_;
}

void WorkerPool::Push(TaskRunner* runner, int task) { Push(runner, &task, 1); }

void WorkerPool::Push(TaskRunner* runner, const int* tasks, size_t n) {
  if (n == 0) return;
  {
    std::lock_guard<SpinLock> lock(qlock_);
    const bool was_empty = count_ == 0;
    for (size_t i = 0; i < n; ++i) Enqueue({runner, tasks[i]});
    // seq_cst: pairs with an idle worker's (spinner's or sleeper's) update of
    // its count followed by a look at queued_: either it sees these jobs or
    // this sees it below. (If the queue was not empty, it sees the flag set.)
    if (was_empty) queued_.store(1, std::memory_order_seq_cst);
  }
  // A spinning worker takes jobs and wakes the next sleeper if more remain.
  if (spinning_.load(std::memory_order_seq_cst) > 0) return;
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
  Wake(static_cast<int>(std::min<size_t>(n, 1 << 20)));
}

void WorkerPool::Wake(int n) {
  int wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake = std::min(n, sleepers_.load(std::memory_order_relaxed) - wakes_pending_);
    if (wake <= 0) return;
    wakes_pending_ += wake;
  }
  for (int i = 0; i < wake; ++i) cv_.notify_one();
}

size_t WorkerPool::TryPop(Job* jobs) {
  std::lock_guard<SpinLock> lock(qlock_);
  if (count_ == 0) return 0;
  // Many queued: take a share, leaving most to the other threads (workers and
  // a helping caller); few: take one.
  size_t share = count_ / (2 * (num_threads_ + 1));
  size_t n = std::clamp<size_t>(share, 1, kMaxBatch);
  for (size_t i = 0; i < n; ++i) jobs[i] = ring_[(head_ + i) & (ring_.size() - 1)];
  head_ = (head_ + n) & (ring_.size() - 1);
  count_ -= n;
  if (count_ == 0) queued_.store(0, std::memory_order_relaxed);
  return n;
}

void WorkerPool::RunJobs(const Job* jobs, size_t n, int worker) {
  int tasks[kMaxBatch];
  for (size_t i = 0; i < n;) {
    size_t k = 0;
    TaskRunner* runner = jobs[i].runner;
    for (; i < n && jobs[i].runner == runner; ++i) tasks[k++] = jobs[i].task;
    runner->RunTasks(tasks, k, worker);
  }
}

bool WorkerPool::RunOne(int worker) {
  if (queued_.load(std::memory_order_acquire) == 0) return false;
  Job jobs[kMaxBatch];
  size_t n = TryPop(jobs);
  if (n == 0) return false;
  RunJobs(jobs, n, worker);
  return true;
}

void WorkerPool::Loop(int worker) {
  if (on_start_) on_start_(worker);
  Job jobs[kMaxBatch];
  for (;;) {
    if (queued_.load(std::memory_order_acquire) > 0) {
      size_t n = TryPop(jobs);
      if (n > 0) {
        // More work and nobody looking for it: hand it to a sleeper.
        if (queued_.load(std::memory_order_relaxed) > 0 && spinning_.load(std::memory_order_seq_cst) == 0 &&
            sleepers_.load(std::memory_order_seq_cst) > 0)
          Wake(1);
        RunJobs(jobs, n, worker);
        continue;
      }
    }
    // Spin if fewer than max_spinners_ do, so that spinning never takes the
    // CPU of the thread that produces the work.
    int s = spinning_.load(std::memory_order_relaxed);
    bool spin = false;
    while (s < max_spinners_.load(std::memory_order_relaxed))
      if (spinning_.compare_exchange_weak(s, s + 1, std::memory_order_seq_cst)) {
        spin = true;
        break;
      }
    if (spin) {
      // Jobs queued while this worker idles are taken only once they have
      // waited kIdleTakeDelay: the thread that queued them usually runs them
      // itself by then (a tiny task costs less where its inputs are hot than a
      // hand-over between cores), while a longer task leaves them waiting and
      // they get a second thread about a microsecond later.
      using Clock = std::chrono::steady_clock;
      const auto deadline = Clock::now() + kSpinTime;
      Clock::time_point first_seen;
      bool seen = false, found = false;
      while (!found) {
        int i = 0;
        for (; i < kPausesPerClockCheck && queued_.load(std::memory_order_acquire) == 0; ++i) CpuRelax();
        const auto now = Clock::now();
        if (i < kPausesPerClockCheck) {
          if (!seen) {
            seen = true;
            first_seen = now;
          } else if (now - first_seen >= kIdleTakeDelay) {
            found = true;
          }
          CpuRelax();
        } else {
          seen = false;
          if (now >= deadline) break;
        }
      }
      spinning_.fetch_sub(1, std::memory_order_seq_cst);
      if (found || queued_.load(std::memory_order_seq_cst) > 0) continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    while (!stop_ && queued_.load(std::memory_order_seq_cst) == 0) {
      cv_.wait(lock);
      // Every wake-up (even a spurious one) consumes a pending wake: the count
      // may fall short, which only costs an extra notify, never a lost one.
      if (wakes_pending_ > 0) --wakes_pending_;
    }
    int left = sleepers_.fetch_sub(1, std::memory_order_relaxed) - 1;
    if (wakes_pending_ > left) wakes_pending_ = left;
    if (stop_ && queued_.load(std::memory_order_acquire) == 0) return;
  }
}

}  // namespace dp
