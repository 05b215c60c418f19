// A fixed set of threads serving one device. Jobs are (runner, task) pairs, so
// queueing allocates nothing. An idle worker spins briefly (a ready task often
// arrives within microseconds in a net) and then sleeps on a condition
// variable; a push wakes one sleeper. The pool's mutex is only taken to queue
// and take jobs; a chain of ops runs without touching it, and a finishing task
// continues into one ready successor on the same thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dp {

class TaskRunner {
 public:
  virtual ~TaskRunner() = default;
  // Runs `task` on pool worker `worker` (0-based within its pool).
  virtual void RunTask(int task, int worker) = 0;
};

class WorkerPool {
 public:
  // `on_start(worker)` runs first on each worker thread (to bind a device).
  WorkerPool(int num_workers, std::function<void(int)> on_start = {});
  ~WorkerPool();  // finishes queued jobs, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Push(TaskRunner* runner, int task);
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  struct Job {
    TaskRunner* runner;
    int task;
  };
  void Loop(int worker);
  bool TryPop(Job* job);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::atomic<int> queued_{0};  // lets spinning workers look without the lock
  int sleepers_ = 0;
  bool stop_ = false;
  std::function<void(int)> on_start_;
  std::vector<std::thread> threads_;
};

}  // namespace dp
