// ThreadTeam: a fixed team of n threads, the caller counting as member 0 and
// n - 1 persistent helpers, that runs one function on every member at once
// (fork-join). The CPU collectives split a reduction across it: the work is
// a few microseconds to milliseconds of memory-bound loops, so the helpers
// are kept alive between runs, spin briefly for the next run (collectives of
// one step come in quick succession) and then sleep on a condition variable.
//
// Run is safe from any thread; runs from several threads are serialised
// (one team, one run at a time). It is not reentrant: a member that calls Run
// on its own team gets kFailedPrecondition instead of a deadlock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dp {

class ThreadTeam {
 public:
  // n >= 1 members (n - 1 helper threads); kInvalidArgument otherwise.
  explicit ThreadTeam(int n);
  ~ThreadTeam();  // joins the helpers; must not race with a Run
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return n_; }

  // Runs fn(index, n) for index 0..n-1 concurrently, index 0 on the calling
  // thread, and returns when all have finished. If members throw, the first
  // exception recorded is rethrown here once every member has finished.
  void Run(const std::function<void(int index, int n)>& fn);

 private:
  void Loop(int index);
  // Waits for a generation other than `seen`; false when the team stops.
  bool WaitForWork(uint64_t seen, uint64_t* next);
  void WaitForHelpers();
  void RecordError(std::exception_ptr error);

  const int n_;
  std::mutex run_mu_;  // held for a whole Run: runs never overlap
  std::mutex mu_;      // sleeping, waking, errors, stopping
  std::condition_variable start_cv_;  // helpers wait for a new generation
  std::condition_variable done_cv_;   // the caller waits for pending_ == 0
  // Polled by spinning helpers and the waiting caller; separate cache lines so
  // that the helpers' decrements do not disturb the pollers of the other.
  alignas(64) std::atomic<uint64_t> generation_{0};  // bumped once per Run (release)
  alignas(64) std::atomic<int> pending_{0};          // helpers still running this generation
  // The current run's function: written before generation_ is bumped, read by
  // helpers after they see the new generation, cleared after all finished.
  alignas(64) const std::function<void(int, int)>* fn_ = nullptr;
  std::exception_ptr error_;  // mu_: first exception of the current run
  bool stop_ = false;         // mu_
  std::vector<std::thread> threads_;
};

}  // namespace dp
