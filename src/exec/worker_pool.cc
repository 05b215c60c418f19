#include "exec/worker_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DP_CPU_RELAX() _mm_pause()
#else
#define DP_CPU_RELAX() std::this_thread::yield()
#endif

namespace dp {
namespace {

// About 10-50 us of spinning before sleeping: long enough to catch the next
// task of a running net, short enough not to burn a core between runs.
constexpr int kSpinIterations = 20000;

}  // namespace

WorkerPool::WorkerPool(int num_workers, std::function<void(int)> on_start) : on_start_(std::move(on_start)) {
  threads_.reserve(static_cast<size_t>(num_workers));
  for (int w = 0; w < num_workers; ++w) threads_.emplace_back([this, w] { Loop(w); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::Push(TaskRunner* runner, int task) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({runner, task});
    queued_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) cv_.notify_one();
}

bool WorkerPool::TryPop(Job* job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return false;
  *job = queue_.front();
  queue_.pop_front();
  queued_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void WorkerPool::Loop(int worker) {
  if (on_start_) on_start_(worker);
  Job job;
  for (;;) {
    if (TryPop(&job)) {
      job.runner->RunTask(job.task, worker);
      continue;
    }
    for (int i = 0; i < kSpinIterations && queued_.load(std::memory_order_acquire) == 0; ++i) DP_CPU_RELAX();
    if (queued_.load(std::memory_order_acquire) > 0) continue;
    std::unique_lock<std::mutex> lock(mu_);
    ++sleepers_;
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    --sleepers_;
    if (queue_.empty() && stop_) return;
  }
}

}  // namespace dp
