// The async DAG executor. Tasks are the chains of the net's TaskGraph. Each
// device has a worker pool: one for the CPU, one per GPU whose workers each
// own a CUDA context (stream). A task becomes ready when its last parent task
// is done; the thread that finishes a task continues into one ready child of
// the same pool (a loop, so a 1,000,000-op graph cannot overflow the stack)
// and queues the others. A CUDA task is "done" once its ops are issued and its
// tail event recorded: a CUDA child makes its stream wait on that event (the
// host does not block), a CPU child waits on the host. A synchronous Run lets
// the calling thread execute CPU tasks itself, so a small net runs without a
// thread handoff: it runs a root, then takes queued CPU tasks until none is
// left, then waits, taking only tasks that stay queued (the workers are busy)
// and spinning briefly before it sleeps.
//
// Per-run cost is kept independent of the number of tasks where possible: a
// task's ready count is re-armed by the thread that found it ready (nobody
// else touches it again in that run; a task with one parent has no count to
// touch), only CUDA events are reset, and a thread counts the tasks it
// finished locally and publishes them once per batch of jobs it took.
//
// Errors: the first error (or cancellation) is kept; every task that starts
// afterwards is skipped, so the run always drains and the net stays usable.
// Nothing may escape a worker thread (std::terminate): whatever an op throws
// (std::bad_alloc included) is caught as the run's error, and queueing never
// allocates on a worker, since each pool's ring is reserved for all of its
// tasks when the executor is created.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <string>
#include <thread>

#include "core/compute_team.h"
#include "core/cpu_budget.h"
#include "core/cpu_relax.h"
#include "core/cpu_topology.h"
#include "core/parallel_for.h"
#include "exec/executor.h"
#include "exec/worker_pool.h"

namespace dp {
namespace {

// How long a waiting caller spins for the end of a run before sleeping: the
// tail of a small net takes microseconds, a futex wake-up on a VM about as long.
constexpr auto kWaitSpinTime = std::chrono::microseconds(20);
// The same when the CPU workers leave a core for the caller (fewer workers
// than CPUs): the caller is one of the run's compute threads and keeps
// looking for queued tasks through the run's gaps (a sleeping thread on a VM
// can take milliseconds to get its CPU back), sleeping only after this long
// without one.
constexpr auto kHelperSpinTime = std::chrono::microseconds(2000);

const std::string& SkippedMessage() {
  static const std::string* m = new std::string("skipped after an earlier error");
  return *m;
}

class AsyncExecutor final : public Executor, public TaskRunner {
 public:
  AsyncExecutor(const std::vector<std::unique_ptr<Operator>>& ops, const TaskGraph& graph, AsyncOptions options) {
    DP_ENFORCE_CODE(options.cpu_workers <= AsyncOptions::kMaxWorkers, Code::kInvalidArgument, "num_workers ",
                    options.cpu_workers, " is more than the ", AsyncOptions::kMaxWorkers, " a net may start");
    DP_ENFORCE_CODE(options.streams_per_gpu <= AsyncOptions::kMaxWorkers, Code::kInvalidArgument, "streams_per_gpu ",
                    options.streams_per_gpu, " is more than the ", AsyncOptions::kMaxWorkers, " a net may start");
    // The CPU budget is split between the net's CPU replicas. With CPUs
    // enough for each to have its own (core/cpu_plan.h), every replica gets
    // a pool of one worker pinned to its CPUs (replica 0's is the caller of
    // a synchronous run, pinned for the run) and a compute team of its own
    // there, so replicas split their ops at once and never compete for a
    // core. Otherwise one pool serves them all: one worker each (at most one
    // per CPU), each op getting budget / replicas threads of the process's
    // team. Either way workers x threads never exceeds the budget.
    const int budget = CpuBudget();
    cpu_ids_ = CpuDeviceIds(graph);
    const int replicas = static_cast<int>(cpu_ids_.size());
    const int groups = std::clamp(replicas, 1, budget);
    intra_threads_ = std::max(1, budget / groups);
    const ReplicaCpuPlan* plan =
        options.cpu_workers == 0 && replicas > 1 ? &ReplicaCpusFor(replicas) : nullptr;
    per_replica_ = plan != nullptr && plan->plan.pinned;
    // A synchronous run's caller is one of the replicas' threads (it runs
    // tasks too), so a pool of groups - 1 workers serves it; the first
    // asynchronous run, whose caller leaves, adds the missing worker.
    cpu_workers_wanted_ = options.cpu_workers > 0 ? options.cpu_workers : per_replica_ ? 1 : groups;
    const int cpu_workers = options.cpu_workers > 0 ? options.cpu_workers : std::max(1, groups - 1);
    int streams = std::max(1, options.streams_per_gpu);
    if (per_replica_) {
      for (const ReplicaCpus& r : plan->replicas)
        pools_.push_back({DeviceType::kCPU, -1, {}, nullptr, {}, r.threads, r.team, r.cpus});
    } else {
      pools_.push_back({DeviceType::kCPU, -1, {}, nullptr, {}, intra_threads_, nullptr, {}});  // every CPU device
    }
    cpu_pools_ = pools_.size();
    const size_t n = graph.chains.size();
    tasks_ = std::vector<Task>(n);  // Task holds atomics: built in place
    for (size_t t = 0; t < n; ++t) {
      Task& task = tasks_[t];
      task.ops_begin = static_cast<uint32_t>(ops_.size());
      for (int i : graph.chains[t]) ops_.push_back(ops[static_cast<size_t>(i)].get());
      task.ops_end = static_cast<uint32_t>(ops_.size());
      task.children_begin = static_cast<uint32_t>(children_.size());
      children_.insert(children_.end(), graph.chain_children[t].begin(), graph.chain_children[t].end());
      task.children_end = static_cast<uint32_t>(children_.size());
      task.num_parents = static_cast<int>(graph.chain_parents[t].size());
      task.pending.store(task.num_parents, std::memory_order_relaxed);
      task.device = graph.chain_device[t];
      task.pool = PoolFor(task.device);
      if (task.num_parents == 0) pools_[static_cast<size_t>(task.pool)].roots.push_back(static_cast<int>(t));
    }
    for (auto& p : pools_) {
      if (p.type == DeviceType::kCUDA)
        for (int w = 0; w < streams; ++w) p.contexts.push_back(CreateContext({DeviceType::kCUDA, p.id}));
    }
    // CUDA tails record an event; CPU tasks are complete when they return.
    for (size_t t = 0; t < n; ++t) {
      Task& task = tasks_[t];
      if (task.device.type == DeviceType::kCUDA) {
        task.event = pools_[static_cast<size_t>(task.pool)].contexts[0]->CreateEvent();
        event_tasks_.push_back(static_cast<int>(t));
      }
    }
    // The events a task waits for, so that an all-CPU task looks at no parent.
    for (size_t t = 0; t < n; ++t) {
      tasks_[t].waits_begin = static_cast<uint32_t>(wait_events_.size());
      for (int p : graph.chain_parents[t])
        if (Event* ev = tasks_[static_cast<size_t>(p)].event.get()) wait_events_.push_back(ev);
      tasks_[t].waits_end = static_cast<uint32_t>(wait_events_.size());
    }
    // Threads last: everything they read is built. Each task is queued at
    // most once per run and a run ends with the queues empty, so a pool's
    // ring never needs more room than its tasks: reserved here, on the
    // creating thread (where std::bad_alloc becomes the creation's error),
    // so that queueing on a worker never allocates and cannot fail.
    std::vector<size_t> pool_tasks(pools_.size(), 0);
    for (const Task& task : tasks_) ++pool_tasks[static_cast<size_t>(task.pool)];
    for (size_t i = 0; i < pools_.size(); ++i) {
      Pool& p = pools_[i];
      if (per_replica_ && i < cpu_pools_) {
        // One pinned worker per replica; it may spin: it spins on its own
        // replica's CPUs. Replica 0's worker stands in for the caller of a
        // synchronous run, who runs its tasks: it never spins then, and a
        // push wakes it only while the caller is asleep (EnterHelper).
        std::vector<int> cpus = p.cpus;
        p.workers = std::make_unique<WorkerPool>(1, [cpus](int) { SetThreadAffinity(cpus); }, 1);
        p.workers->Reserve(pool_tasks[i]);
        continue;
      }
      int workers = p.type == DeviceType::kCPU ? cpu_workers : streams;
      // Idle CPU workers spin only while other replicas' work may come: with
      // one replica the caller runs its chain, and a spinning worker would
      // take the core its ops' helpers need.
      p.workers = std::make_unique<WorkerPool>(workers, nullptr, p.type == DeviceType::kCPU ? groups - 1 : -1);
      p.workers->Reserve(pool_tasks[i]);
    }
    caller_id_ = pools_[0].workers->size();
    caller_spin_ = per_replica_ || cpu_workers < budget ? kHelperSpinTime : kWaitSpinTime;
  }

  ~AsyncExecutor() override {
    // A run in flight still uses the tasks: let it drain before the pools go.
    if (running_) {
      rc_->cancel.store(true);
      WaitFor(std::chrono::milliseconds::max());
    }
    for (auto& p : pools_) p.workers.reset();
  }

  void Start(RunControl* rc) override {
    WorkerPool& cpu = *pools_[0].workers;
    if (per_replica_) cpu.set_max_spinners(1);  // its worker is replica 0's runner now
    while (cpu.size() < cpu_workers_wanted_) {
      cpu.AddWorker();
      caller_id_ = cpu.size();
    }
    Begin(rc, /*caller_runs=*/false);
  }

  void Run(RunControl* rc) override {
    const Pool& own = pools_[0];
    WorkerPool& cpu = *own.workers;
    // With a pool per replica the caller is replica 0's runner, pinned to
    // its CPUs for the run; its worker sleeps and is woken by a push only
    // while the caller sleeps (before Begin: the roots are the caller's).
    bool helping = per_replica_;
    if (helping) {
      cpu.set_max_spinners(0);
      cpu.EnterHelper();
    }
    ThreadAffinityScope pin(own.cpus);
    IntraOpThreadsScope threads(own.threads, own.team);
    int first = Begin(rc, /*caller_runs=*/true);
    if (first >= 0) {
      CpuContext ctx(tasks_[static_cast<size_t>(first)].device);
      Publish(Execute(first, caller_id_, &ctx));
    }
    // Take the queued CPU tasks (the roots just queued, their children) rather
    // than wait for a worker to take them; then wait, helping only with tasks
    // that the workers leave queued (they are busy).
    for (;;) {
      while (remaining_.load(std::memory_order_acquire) != 0 && cpu.RunOne(caller_id_)) {
      }
      if (SpinUntilDone(&cpu)) break;
      if (helping) {
        // Hand replica 0's tasks to its worker before sleeping; take any
        // that a push left to this thread meanwhile.
        helping = false;
        if (cpu.LeaveHelper()) {
          cpu.EnterHelper();
          helping = true;
          continue;
        }
      }
      Sleep(std::chrono::milliseconds::max());
      break;
    }
    if (helping) cpu.LeaveHelper();
    Finish();
  }

  bool WaitFor(std::chrono::milliseconds timeout) override {
    if (remaining_.load(std::memory_order_acquire) == 0) return true;
    // The end of a run is often microseconds away: spin before sleeping.
    if (timeout >= std::chrono::milliseconds(1) && SpinUntilDone(nullptr)) return true;
    return Sleep(timeout);
  }

  void Finish() override {
    // Streams may still hold issued work; a run ends when the devices are done.
    for (auto& p : pools_)
      for (auto& ctx : p.contexts) {
        try {
          ctx->FinishDeviceComputation();
        } catch (...) {
          error_.Record(std::current_exception());
        }
      }
    running_ = false;
    error_.RethrowIfAny();
  }

  void RunTask(int task, int worker) override { RunTasks(&task, 1, worker); }

  // Tasks taken from a pool together: their completions are published at once.
  void RunTasks(const int* tasks, size_t n, int worker) override {
    if (n == 0) return;
    // Tasks taken together come from one pool.
    const Pool& pool = pools_[static_cast<size_t>(tasks_[static_cast<size_t>(tasks[0])].pool)];
    IntraOpThreadsScope threads(pool.threads, pool.team);
    int finished = 0;
    for (size_t i = 0; i < n; ++i) {
      const Task& t = tasks_[static_cast<size_t>(tasks[i])];
      if (t.device.type == DeviceType::kCPU) {
        CpuContext ctx(t.device);
        finished += Execute(tasks[i], worker, &ctx);
      } else {
        finished += Execute(tasks[i], worker,
                            pools_[static_cast<size_t>(t.pool)].contexts[static_cast<size_t>(worker)].get());
      }
    }
    Publish(finished);
  }

 private:
  // Compact (about one cache line), with its ops, children and the events it
  // waits for in shared arrays laid out task after task: a large net's run
  // walks memory mostly in order.
  struct Task {
    uint32_t ops_begin = 0, ops_end = 0;            // in ops_
    uint32_t children_begin = 0, children_end = 0;  // in children_
    uint32_t waits_begin = 0, waits_end = 0;        // in wait_events_ (CUDA parents' events)
    int num_parents = 0;
    // Parents not yet done in this run; back to num_parents once it reaches 0.
    std::atomic<int> pending{0};
    DeviceOption device;
    int pool = 0;
    std::unique_ptr<Event> event;  // CUDA tails only
  };
  struct Pool {
    DeviceType type;
    int id;  // GPU id; -1 for the CPU pool
    std::vector<std::unique_ptr<DeviceContext>> contexts;  // per CUDA worker
    std::unique_ptr<WorkerPool> workers;
    std::vector<int> roots;  // tasks of this pool without parents
    int threads = 1;               // IntraOpThreads() of its tasks
    ComputeTeam* team = nullptr;   // the team its tasks split on (nullptr: the process's)
    std::vector<int> cpus;         // a replica's pool: its workers' CPUs
  };

  // The CPU replicas (distinct CPU device ids) that the net's chains run
  // on, ascending: replica k is the k-th.
  static std::vector<int> CpuDeviceIds(const TaskGraph& graph) {
    std::vector<int> ids;
    for (const DeviceOption& d : graph.chain_device)
      if (d.type == DeviceType::kCPU) ids.push_back(d.id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
  }

  int PoolFor(DeviceOption d) {
    if (d.type == DeviceType::kCPU)
      return per_replica_ ? static_cast<int>(std::lower_bound(cpu_ids_.begin(), cpu_ids_.end(), d.id) - cpu_ids_.begin())
                          : 0;
    for (size_t p = cpu_pools_; p < pools_.size(); ++p)
      if (pools_[p].id == d.id) return static_cast<int>(p);
    pools_.push_back({DeviceType::kCUDA, d.id, {}, nullptr, {}, intra_threads_, nullptr, {}});
    return static_cast<int>(pools_.size() - 1);
  }

  // Spins until the run is done, for up to caller_spin_ after the last task
  // it ran. With `help`, runs that pool's queued tasks (as the caller) once
  // they have stayed queued for WorkerPool::kIdleTakeDelay, like an idle
  // worker: the busy thread that queued them usually runs them sooner, and an
  // idle thread that competes with it for tiny tasks only adds cache-line
  // transfers. False if the run is still going.
  bool SpinUntilDone(WorkerPool* help) {
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + caller_spin_;
    Clock::time_point first_seen;
    bool seen = false;
    for (;;) {
      for (int i = 0; i < 16; ++i) {
        if (remaining_.load(std::memory_order_acquire) == 0) return true;
        if (help != nullptr && help->HasQueued()) break;
        CpuRelax();
      }
      const auto now = Clock::now();
      if (help != nullptr && help->HasQueued()) {
        if (!seen) {
          seen = true;
          first_seen = now;
        } else if (now - first_seen >= WorkerPool::kIdleTakeDelay) {
          seen = false;
          if (help->RunOne(caller_id_)) deadline = Clock::now() + caller_spin_;
        }
        CpuRelax();
        continue;
      }
      seen = false;
      if (now >= deadline) return false;
    }
  }

  // Sleeps until the run is done or `timeout` passes.
  bool Sleep(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(done_mu_);
    // seq_cst: pairs with the finisher's decrement of remaining_ and read of
    // waiters_, so either the finisher sees this waiter or the check below
    // sees the run done.
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    auto done = [this] { return remaining_.load(std::memory_order_seq_cst) == 0; };
    bool finished = true;
    if (timeout == std::chrono::milliseconds::max())
      done_cv_.wait(lock, done);
    else
      finished = done_cv_.wait_for(lock, timeout, done);
    waiters_.fetch_sub(1, std::memory_order_relaxed);
    return finished;
  }

  // Resets per-run state and queues the roots; with caller_runs, returns one
  // CPU root for the caller to execute (or -1). Ready counts were re-armed by
  // the previous run, so only the events need a reset.
  int Begin(RunControl* rc, bool caller_runs) {
    rc_ = rc;
    running_ = true;
    error_.Reset();
    for (int t : event_tasks_) tasks_[static_cast<size_t>(t)].event->Reset();
    if (tasks_.empty()) {
      remaining_.store(0, std::memory_order_release);
      return -1;
    }
    remaining_.store(static_cast<int>(tasks_.size()), std::memory_order_release);
    int mine = -1;
    for (size_t p = 0; p < pools_.size(); ++p) {
      const std::vector<int>& roots = pools_[p].roots;
      size_t skip = 0;
      if (p == 0 && caller_runs && !roots.empty()) {
        mine = roots[0];
        skip = 1;
      }
      pools_[p].workers->Push(this, roots.data() + skip, roots.size() - skip);
    }
    return mine;
  }

  // Runs `task` and then, in a loop, one ready child of the same pool after
  // another; queues the other ready children. Returns how many tasks it
  // finished, for the caller to Publish.
  int Execute(int task, int worker, DeviceContext* ctx) {
    int finished = 0;
    int ready[kPushBatch];  // ready tasks of this pool, queued in batches
    for (;;) {
      Task& t = tasks_[static_cast<size_t>(task)];
      bool recorded = false;
      if (!error_.has()) {
        try {
          ctx->SwitchToDevice();
          for (uint32_t k = t.waits_begin; k < t.waits_end; ++k)
            wait_events_[k]->Wait(*ctx);  // stream wait on CUDA, host wait on the CPU
          // A replica's pool has one runner: the trace names it by replica.
          const int runner = per_replica_ && static_cast<size_t>(t.pool) < cpu_pools_ ? t.pool : worker;
          for (uint32_t k = t.ops_begin; k < t.ops_end; ++k) RunOp(*ops_[k], *ctx, *rc_, runner);
          if (t.event) {
            t.event->Record(*ctx);
            recorded = true;
          }
        } catch (...) {
          error_.Record(std::current_exception());
        }
      }
      if (t.event && !recorded) {
        // Nothing may escape a worker thread (it would terminate the process).
        try {
          t.event->SetFinished(SkippedMessage());
        } catch (...) {
          error_.Record(std::current_exception());
        }
      }
      // Schedule ready children: keep one of this pool for this thread.
      int next = -1;
      size_t num_ready = 0;
      WorkerPool& own = *pools_[static_cast<size_t>(t.pool)].workers;
      for (uint32_t k = t.children_begin; k < t.children_end; ++k) {
        const int c = children_[k];
        Task& child = tasks_[static_cast<size_t>(c)];
        // A child with one parent is ready now (its count is never touched);
        // otherwise the last parent to finish makes it ready and re-arms the
        // count: nobody touches it again in this run.
        if (child.num_parents > 1) {
          if (child.pending.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
          child.pending.store(child.num_parents, std::memory_order_relaxed);
        }
        if (child.pool != t.pool) {
          pools_[static_cast<size_t>(child.pool)].workers->Push(this, c);
        } else if (next < 0) {
          next = c;
        } else {
          ready[num_ready++] = c;
          if (num_ready == kPushBatch) {
            own.Push(this, ready, num_ready);
            num_ready = 0;
          }
        }
      }
      if (num_ready > 0) own.Push(this, ready, num_ready);
      ++finished;
      if (next < 0) break;
      task = next;  // same pool, so ctx serves it (CPU ids are logical replicas)
    }
    return finished;
  }

  // Counts finished tasks off the run, once per batch of them: fewer writes
  // to a line that every thread shares. The thread that finishes the run
  // wakes sleeping waiters. seq_cst: pairs with WaitFor's increment of
  // waiters_ and its check of remaining_.
  void Publish(int finished) {
    if (finished == 0) return;
    if (remaining_.fetch_sub(finished, std::memory_order_seq_cst) == finished &&
        waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(done_mu_);
      done_cv_.notify_all();
    }
  }

  static constexpr size_t kPushBatch = 32;

  std::vector<Task> tasks_;
  std::vector<Operator*> ops_;        // Task::ops_begin/end
  std::vector<int> children_;         // Task::children_begin/end
  std::vector<Event*> wait_events_;   // Task::waits_begin/end
  std::vector<int> event_tasks_;  // tasks with an event (reset every run)
  std::vector<Pool> pools_;
  int caller_id_ = 0;
  int intra_threads_ = 1;  // IntraOpThreads() of a task when one pool serves every replica
  std::vector<int> cpu_ids_;   // the net's CPU device ids, ascending
  bool per_replica_ = false;   // a pool (and team, and CPUs) per CPU replica
  size_t cpu_pools_ = 1;       // pools_[0, cpu_pools_) are the CPU pools
  int cpu_workers_wanted_ = 1;  // CPU workers an asynchronous run needs
  std::chrono::microseconds caller_spin_ = kWaitSpinTime;
  RunControl* rc_ = nullptr;
  bool running_ = false;
  FirstError error_;
  // Own cache line: polled by a waiting caller, written once per batch of
  // finished tasks; the line of error_ (read before every task) stays clean.
  alignas(64) std::atomic<int> remaining_{0};  // tasks of this run not yet finished
  std::atomic<int> waiters_{0};                // threads asleep (or about to be) in WaitFor
  std::mutex done_mu_;
  std::condition_variable done_cv_;
};

}  // namespace

std::unique_ptr<Executor> MakeAsyncExecutor(const std::vector<std::unique_ptr<Operator>>& ops,
                                            const TaskGraph& graph, AsyncOptions options) {
  return std::make_unique<AsyncExecutor>(ops, graph, options);
}

}  // namespace dp
