// The async DAG executor. Tasks are the chains of the net's TaskGraph. Each
// device has a worker pool: one for the CPU, one per GPU whose workers each
// own a CUDA context (stream). A task becomes ready when its last parent task
// is done; the thread that finishes a task continues into one ready child of
// the same pool (a loop, so a 1,000,000-op graph cannot overflow the stack)
// and queues the others. A CUDA task is "done" once its ops are issued and its
// tail event recorded: a CUDA child makes its stream wait on that event (the
// host does not block), a CPU child waits on the host. A synchronous Run lets
// the calling thread execute CPU tasks itself, so a small net runs without a
// thread handoff.
//
// Errors: the first error (or cancellation) is kept; every task that starts
// afterwards is skipped, so the run always drains and the net stays usable.
#include <condition_variable>
#include <thread>

#include "exec/executor.h"
#include "exec/worker_pool.h"

namespace dp {
namespace {

class AsyncExecutor final : public Executor, public TaskRunner {
 public:
  AsyncExecutor(const std::vector<std::unique_ptr<Operator>>& ops, const TaskGraph& graph, AsyncOptions options) {
    int cpu_workers = options.cpu_workers > 0 ? options.cpu_workers
                                              : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    int streams = std::max(1, options.streams_per_gpu);
    pools_.push_back({DeviceType::kCPU, -1, {}, nullptr});  // pool 0: every CPU device
    const size_t n = graph.chains.size();
    tasks_ = std::vector<Task>(n);  // Task holds atomics: built in place
    for (size_t t = 0; t < n; ++t) {
      Task& task = tasks_[t];
      for (int i : graph.chains[t]) task.ops.push_back(ops[static_cast<size_t>(i)].get());
      task.children = graph.chain_children[t];
      task.parents = graph.chain_parents[t];
      task.num_parents = static_cast<int>(task.parents.size());
      task.device = graph.chain_device[t];
      task.pool = PoolFor(task.device);
      if (task.num_parents == 0) roots_.push_back(static_cast<int>(t));
    }
    for (auto& p : pools_) {
      if (p.type == DeviceType::kCUDA)
        for (int w = 0; w < streams; ++w) p.contexts.push_back(CreateContext({DeviceType::kCUDA, p.id}));
    }
    // CUDA tails record an event; CPU tasks are complete when they return.
    for (auto& task : tasks_)
      if (task.device.type == DeviceType::kCUDA) task.event = pools_[task.pool].contexts[0]->CreateEvent();
    // Threads last: everything they read is built.
    for (auto& p : pools_) {
      int workers = p.type == DeviceType::kCPU ? cpu_workers : streams;
      p.workers = std::make_unique<WorkerPool>(workers);
    }
    caller_id_ = pools_[0].workers->size();
  }

  ~AsyncExecutor() override {
    // A run in flight still uses the tasks: let it drain before the pools go.
    if (running_) {
      rc_->cancel.store(true);
      WaitFor(std::chrono::milliseconds::max());
    }
    for (auto& p : pools_) p.workers.reset();
  }

  void Start(RunControl* rc) override { Begin(rc, /*caller_runs=*/false); }

  void Run(RunControl* rc) override {
    int first = Begin(rc, /*caller_runs=*/true);
    if (first >= 0) {
      CpuContext ctx;
      Execute(first, caller_id_, &ctx);
    }
    WaitFor(std::chrono::milliseconds::max());
    Finish();
  }

  bool WaitFor(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(done_mu_);
    auto done = [this] { return remaining_.load(std::memory_order_acquire) == 0; };
    if (timeout == std::chrono::milliseconds::max()) {
      done_cv_.wait(lock, done);
      return true;
    }
    return done_cv_.wait_for(lock, timeout, done);
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

  void RunTask(int task, int worker) override {
    const Task& t = tasks_[static_cast<size_t>(task)];
    if (t.device.type == DeviceType::kCPU) {
      CpuContext ctx(t.device);
      Execute(task, worker, &ctx);
    } else {
      Execute(task, worker, pools_[t.pool].contexts[static_cast<size_t>(worker)].get());
    }
  }

 private:
  struct Task {
    std::vector<Operator*> ops;
    std::vector<int> parents, children;
    int num_parents = 0;
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
  };

  int PoolFor(DeviceOption d) {
    if (d.type == DeviceType::kCPU) return 0;
    for (size_t p = 1; p < pools_.size(); ++p)
      if (pools_[p].id == d.id) return static_cast<int>(p);
    pools_.push_back({DeviceType::kCUDA, d.id, {}, nullptr});
    return static_cast<int>(pools_.size() - 1);
  }

  // Resets per-run state and queues the roots; with caller_runs, returns one
  // CPU root for the caller to execute (or -1).
  int Begin(RunControl* rc, bool caller_runs) {
    rc_ = rc;
    running_ = true;
    error_.Reset();
    for (auto& t : tasks_) {
      t.pending.store(t.num_parents, std::memory_order_relaxed);
      if (t.event) t.event->Reset();
    }
    if (tasks_.empty()) {
      remaining_.store(0, std::memory_order_release);
      return -1;
    }
    remaining_.store(static_cast<int>(tasks_.size()), std::memory_order_release);
    int mine = -1;
    for (int r : roots_) {
      if (caller_runs && mine < 0 && tasks_[static_cast<size_t>(r)].pool == 0) {
        mine = r;
        continue;
      }
      pools_[static_cast<size_t>(tasks_[static_cast<size_t>(r)].pool)].workers->Push(this, r);
    }
    return mine;
  }

  void Execute(int task, int worker, DeviceContext* ctx) {
    for (;;) {
      Task& t = tasks_[static_cast<size_t>(task)];
      bool recorded = false;
      if (!error_.has()) {
        try {
          ctx->SwitchToDevice();
          for (int p : t.parents) {
            Event* ev = tasks_[static_cast<size_t>(p)].event.get();
            if (ev != nullptr) ev->Wait(*ctx);  // stream wait on CUDA, host wait on the CPU
          }
          for (Operator* op : t.ops) RunOp(*op, *ctx, *rc_, worker);
          if (t.event) {
            t.event->Record(*ctx);
            recorded = true;
          }
        } catch (...) {
          error_.Record(std::current_exception());
        }
      }
      if (t.event && !recorded) t.event->SetFinished("skipped after an earlier error");
      // Schedule ready children: keep one of this pool for this thread.
      int next = -1;
      for (int c : t.children) {
        Task& child = tasks_[static_cast<size_t>(c)];
        if (child.pending.fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        if (next < 0 && child.pool == t.pool) {
          next = c;
        } else {
          pools_[static_cast<size_t>(child.pool)].workers->Push(this, c);
        }
      }
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(done_mu_);  // pairs with WaitFor's predicate check
        done_cv_.notify_all();
      }
      if (next < 0) return;
      task = next;  // same pool, so ctx serves it (CPU ids are logical replicas)
    }
  }

  std::vector<Task> tasks_;
  std::vector<int> roots_;
  std::vector<Pool> pools_;
  int caller_id_ = 0;
  RunControl* rc_ = nullptr;
  bool running_ = false;
  FirstError error_;
  std::atomic<int> remaining_{0};
  std::mutex done_mu_;
  std::condition_variable done_cv_;
};

}  // namespace

std::unique_ptr<Executor> MakeAsyncExecutor(const std::vector<std::unique_ptr<Operator>>& ops,
                                            const TaskGraph& graph, AsyncOptions options) {
  return std::make_unique<AsyncExecutor>(ops, graph, options);
}

}  // namespace dp
