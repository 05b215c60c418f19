// The simple executor: ops in list order on the calling thread, one context
// per device. The reference that the async executor is tested against.
#include <map>

#include "exec/executor.h"

namespace dp {
namespace {

class SimpleExecutor final : public Executor {
 public:
  explicit SimpleExecutor(const std::vector<std::unique_ptr<Operator>>& ops) {
    // One context per device, made once: contexts own streams and handles.
    for (const auto& op : ops) {
      DeviceOption d = op->device();
      auto key = std::make_pair(static_cast<int>(d.type), d.id);
      auto it = contexts_.find(key);
      if (it == contexts_.end()) it = contexts_.emplace(key, CreateContext(d)).first;
      steps_.push_back({op.get(), it->second.get()});
    }
  }

  void Start(RunControl* rc) override {
    error_ = nullptr;
    try {
      for (const auto& s : steps_) {
        s.ctx->SwitchToDevice();
        RunOp(*s.op, *s.ctx, *rc, 0);
      }
    } catch (...) {
      error_ = std::current_exception();
    }
    // Even after an error: nothing may still be running when the run ends.
    for (auto& [key, ctx] : contexts_) {
      if (!ctx->IsAsync()) continue;
      try {
        ctx->FinishDeviceComputation();
      } catch (...) {
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  bool WaitFor(std::chrono::milliseconds) override { return true; }

  void Finish() override {
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  struct Step {
    Operator* op;
    DeviceContext* ctx;
  };
  std::map<std::pair<int, int>, std::unique_ptr<DeviceContext>> contexts_;
  std::vector<Step> steps_;
  std::exception_ptr error_;
};

}  // namespace

std::unique_ptr<Executor> MakeSimpleExecutor(const std::vector<std::unique_ptr<Operator>>& ops) {
  return std::make_unique<SimpleExecutor>(ops);
}

}  // namespace dp
