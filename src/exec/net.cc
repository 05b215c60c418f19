#include "exec/net.h"

#include "core/logging.h"
#include "graph/net_validate.h"

namespace dp {

Net::Net(std::shared_ptr<const NetDef> def, std::shared_ptr<Workspace> ws, NetOptions options)
    : def_(std::move(def)), ws_(std::move(ws)) {
  label_ = def_->name.empty() ? "net" : StrCat("net '", def_->name, "'");
  ValidateNet(*def_);
  for (size_t i = 0; i < def_->ops.size(); ++i) {
    const OperatorDef& op = def_->ops[i];
    DeviceOption device = def_->OpDevice(op);
    int count = DeviceCount(device.type);
    if (device.type != DeviceType::kCPU && device.id >= count)
      DP_THROW(Code::kUnavailable, label_, " ", OpLabel(op, i), ": device ", DeviceName(device),
               " is not available (", count, " ", DeviceTypeName(device.type), " devices)");
    try {
      ops_.push_back(OperatorRegistry::Create(OpInit{op, i, device, ws_.get()}));
    } catch (Error& e) {
      if (e.code() == Code::kInvalidNet) throw e.Prepend(label_);
      throw e.Prepend(StrCat(label_, " ", OpLabel(op, i)));
    }
  }
  for (const auto& name : def_->external_inputs) external_inputs_.push_back(ws_->CreateBlob(name));
  kind_ = options.executor != ExecutorKind::kDefault ? options.executor : def_->executor;
  if (kind_ == ExecutorKind::kDefault) kind_ = ExecutorKind::kSimple;
  if (kind_ == ExecutorKind::kAsync)
    DP_THROW(Code::kUnimplemented, label_, ": the async executor is not available yet; use the simple executor");
  executor_ = MakeSimpleExecutor(ops_);
  DP_LOG(kInfo, label_, ": created with ", ops_.size(), " ops on the simple executor");
}

Net::~Net() = default;

void Net::Run() {
  bool expected = false;
  if (!running_.compare_exchange_strong(expected, true))
    DP_THROW(Code::kFailedPrecondition, label_, " is already running; runs of one net cannot overlap");
  struct Done {
    std::atomic<bool>& flag;
    ~Done() { flag.store(false); }
  } done{running_};
  for (const Blob* b : external_inputs_)
    if (b->empty()) DP_THROW(Code::kNotFound, label_, ": external input '", b->name(), "' was never fed");
  try {
    executor_->Run();
  } catch (Error& e) {
    throw e.Prepend(label_);
  }
}

}  // namespace dp
