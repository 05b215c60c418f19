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

  void Run() override {
    for (const auto& s : steps_) {
      s.ctx->SwitchToDevice();
      s.op->Run(*s.ctx);
    }
    for (auto& [key, ctx] : contexts_)
      if (ctx->IsAsync()) ctx->FinishDeviceComputation();
  }

 private:
  struct Step {
    Operator* op;
    DeviceContext* ctx;
  };
  std::map<std::pair<int, int>, std::unique_ptr<DeviceContext>> contexts_;
  std::vector<Step> steps_;
};

}  // namespace

std::unique_ptr<Executor> MakeSimpleExecutor(const std::vector<std::unique_ptr<Operator>>& ops) {
  return std::make_unique<SimpleExecutor>(ops);
}

}  // namespace dp
