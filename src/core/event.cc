#include "core/event.h"

#include "core/context.h"
#include "core/error.h"

namespace dp {

// CPU work is finished when the op returns, so recording means "scheduled";
// the executor calls SetFinished when the producing task is done.
void CpuEvent::Record(DeviceContext& ctx) {
  DP_ENFORCE_CODE(ctx.device().type == DeviceType::kCPU, Code::kInternal,
                  "a CPU event cannot be recorded on ", DeviceName(ctx.device()));
  std::lock_guard<std::mutex> lock(mu_);
  DP_ENFORCE_CODE(status_ == EventStatus::kInitialized, Code::kInternal,
                  "event recorded twice without Reset");
  status_ = EventStatus::kScheduled;
}

void CpuEvent::Wait(DeviceContext& /*waiter*/) {
  // Any waiter (CPU thread, or a CUDA stream's issuing thread) blocks on the host.
  Finish();
}

bool CpuEvent::Finish(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [this] { return status_ == EventStatus::kSuccess || status_ == EventStatus::kFailed; };
  if (timeout == std::chrono::milliseconds::max()) {
    cv_.wait(lock, done);
  } else if (!cv_.wait_for(lock, timeout, done)) {
    return false;
  }
  if (status_ == EventStatus::kFailed) DP_THROW(Code::kFailedPrecondition, "waited on a failed event: ", error_);
  return true;
}

EventStatus CpuEvent::Query() {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void CpuEvent::SetFinished(const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_ == EventStatus::kSuccess || status_ == EventStatus::kFailed) return;  // first wins
    status_ = error.empty() ? EventStatus::kSuccess : EventStatus::kFailed;
    try {
      error_ = error;
    } catch (...) {
      // Out of memory for the message: waiters still wake (and see the failure).
    }
  }
  cv_.notify_all();
}

std::string CpuEvent::ErrorMessage() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void CpuEvent::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  status_ = EventStatus::kInitialized;
  error_.clear();
}

}  // namespace dp
