// A fixed set of threads serving one device. Jobs are (runner, task) pairs in
// a ring buffer that only grows, so queueing allocates nothing once warm (or
// once Reserve made room for every job that can be queued at once: then a
// push never allocates, so it cannot fail on a worker thread); the
// ring is guarded by a spin lock (its critical sections are a few stores, and a
// contended std::mutex would put threads to sleep in the kernel). A thread
// takes a batch of jobs at a time when many are queued (at most 1/(2 x threads)
// of them, so the others still find work) and only one when few are.
//
// An idle worker spins briefly (a ready task often arrives within microseconds
// in a net) and then sleeps on a condition variable. A spinning worker leaves
// newly queued jobs to the thread that queued them for kIdleTakeDelay (a
// microsecond) before taking them: tiny tasks stay on one core, longer ones
// still spread. At most `max_spinners` workers spin at once (by default one
// fewer than the CPUs the process may use, leaving a CPU to the thread that
// produces the work), and a push wakes a sleeper only when no worker is
// spinning; a worker that takes jobs while more are queued and nobody spins
// wakes the next one, so the producer seldom pays for a wake-up. A chain of
// ops runs without touching the pool, and a finishing task continues into one
// ready successor on the same thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dp {

class TaskRunner {
 public:
  virtual ~TaskRunner() = default;
  // Runs `task` on pool worker `worker` (0-based within its pool; a helping
  // caller passes its own id).
  virtual void RunTask(int task, int worker) = 0;
  // Runs several tasks taken together, in order; a runner may override it to
  // share per-job bookkeeping between them.
  virtual void RunTasks(const int* tasks, size_t n, int worker) {
    for (size_t i = 0; i < n; ++i) RunTask(tasks[i], worker);
  }
};

class WorkerPool {
 public:
  // `on_start(worker)` runs first on each worker thread (to bind a device).
  // `max_spinners` < 0: one fewer than the usable CPUs. A thread that cannot
  // be started gives kUnavailable (the threads already started are joined).
  WorkerPool(int num_workers, std::function<void(int)> on_start = {}, int max_spinners = -1);
  ~WorkerPool();  // finishes queued jobs, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts one more worker (id size()). Not concurrent with itself, size()
  // or the destructor; jobs may be queued and running meanwhile.
  void AddWorker();
  // Makes room for `jobs` queued jobs, so that pushes allocate nothing while
  // at most that many are queued (std::bad_alloc here, on the calling thread).
  void Reserve(size_t jobs);
  // Beyond the reserved room a push grows the ring (may throw std::bad_alloc).
  void Push(TaskRunner* runner, int task);
  // Queues several jobs of one runner under one lock.
  void Push(TaskRunner* runner, const int* tasks, size_t n);
  // Takes queued jobs, if any, and runs them on the calling thread as
  // `worker`: lets a thread that waits for the pool's work help with it.
  bool RunOne(int worker);
  // A thread outside the pool that takes its jobs (RunOne) between its own
  // work counts as a spinning worker while it is a helper: pushes then wake
  // no sleeper, leaving the jobs to it. LeaveHelper returns whether jobs are
  // queued (seq_cst, after leaving): if so the caller must take them, since
  // a push may have counted on it.
  void EnterHelper() { spinning_.fetch_add(1, std::memory_order_seq_cst); }
  bool LeaveHelper() {
    spinning_.fetch_sub(1, std::memory_order_seq_cst);
    return queued_.load(std::memory_order_seq_cst) > 0;
  }
  // How many workers may spin at once (any thread, any time).
  void set_max_spinners(int n) { max_spinners_.store(n, std::memory_order_relaxed); }
  // Whether jobs are queued (a hint: no lock).
  bool HasQueued() const { return queued_.load(std::memory_order_acquire) > 0; }
  int size() const { return static_cast<int>(threads_.size()); }
  // Jobs the ring holds before a push must grow it.
  size_t capacity();

  // How long an idle (spinning) thread leaves queued jobs to the busy thread
  // that queued them before it takes them itself.
  static constexpr std::chrono::nanoseconds kIdleTakeDelay{1000};

 private:
  struct Job {
    TaskRunner* runner;
    int task;
  };
  static constexpr size_t kMaxBatch = 16;

  class SpinLock {
   public:
    void lock();
    void unlock() { locked_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> locked_{false};
  };

  void Stop();  // stops and joins the threads
  void Loop(int worker);
  size_t TryPop(Job* jobs);  // up to kMaxBatch jobs
  void RunJobs(const Job* jobs, size_t n, int worker);
  void Enqueue(const Job& job);  // qlock_ held
  void Grow(size_t capacity);    // qlock_ held; capacity a power of two > ring_.size()
  void Wake(int n);              // up to n sleepers not already woken

  // Three cache lines: the queue (taken by threads that push and pop), the
  // flag that idle threads poll, and the idle-thread counts (read by every
  // push). Polling a line that the queue's lock shares would pull it away
  // from the threads that push and pop on every look.
  alignas(64) SpinLock qlock_;
  std::vector<Job> ring_;  // qlock_; capacity a power of two
  size_t head_ = 0;        // qlock_: index of the oldest job
  size_t count_ = 0;       // qlock_
  // count_ > 0, written (under qlock_) only when that changes, so that idle
  // threads polling it do not slow down every push and pop.
  alignas(64) std::atomic<int> queued_{0};
  alignas(64) std::atomic<int> spinning_{0};  // workers spinning (or about to look at the queue)
  std::atomic<int> sleepers_{0};               // workers waiting on cv_ (changed under mu_)
  std::atomic<int> max_spinners_{1};
  size_t num_threads_ = 0;        // qlock_: threads_.size() (AddWorker changes both)
  std::mutex mu_;                 // sleeping and waking only
  std::condition_variable cv_;
  int wakes_pending_ = 0;         // mu_: sleepers notified and not yet awake
  bool stop_ = false;             // mu_
  std::function<void(int)> on_start_;
  std::vector<std::thread> threads_;
};

}  // namespace dp
