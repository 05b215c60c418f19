// Pieces shared by the executors: first-error capture and running one op
// under cancellation and profiling.
#include "exec/executor.h"

namespace dp {

void FirstError::Record(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) return;
  error_ = std::move(e);
  has_.store(true, std::memory_order_release);
}

// Reset and RethrowIfAny run between runs (no Record can race with them), so
// an error-free run takes no lock: has_ is set after error_, under mu_.
void FirstError::Reset() {
  if (!has_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  error_ = nullptr;
  has_.store(false, std::memory_order_release);
}

void FirstError::RethrowIfAny() {
  if (!has_.load(std::memory_order_acquire)) return;
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = error_;
  }
  if (e) std::rethrow_exception(e);
}

void RunOp(Operator& op, DeviceContext& ctx, const RunControl& rc, int32_t thread) {
  if (rc.cancel.load(std::memory_order_relaxed))
    DP_THROW(Code::kCancelled, "run cancelled before ", op.label());
  if (rc.timings == nullptr) {
    op.Run(ctx);
    return;
  }
  auto t0 = std::chrono::steady_clock::now();
  op.Run(ctx);
  auto t1 = std::chrono::steady_clock::now();
  OpTiming& t = (*rc.timings)[op.index()];
  t.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0 - rc.start).count();
  t.end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - rc.start).count();
  t.thread = thread;
  t.bytes = rc.budget != nullptr ? rc.budget->used() : 0;
}

}  // namespace dp
