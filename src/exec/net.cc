#include "exec/net.h"

#include <algorithm>
#include <iomanip>
#include <new>
#include <set>
#include <sstream>

#include "core/logging.h"
#include "cuda/cuda_runtime.h"
#include "ops/host_placement.h"
#include "ops/net_validate.h"
#include "ops/op_utils.h"  // kLossScaleBlob

namespace dp {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += StrCat("\\u00", "0123456789abcdef"[(c >> 4) & 0xf], "0123456789abcdef"[c & 0xf]);
    } else {
      out += c;
    }
  }
  return out;
}

// Marks the net idle when a run ends, however it ends.
struct ClearOnExit {
  std::atomic<bool>& flag;
  ~ClearOnExit() { flag.store(false); }
};

const char* KindName(ExecutorKind k) { return k == ExecutorKind::kAsync ? "async" : "simple"; }

// Half products underflow small gradients: a net that computes gradients
// in fp16 must scale its loss's (model/training.h, LossScaling): hold the
// unscaling, or read the scale (an accumulate net's seeds; its train net
// unscales the sums).
void CheckFp16Training(const NetDef& def, const std::string& label) {
  const OperatorDef* gradient = nullptr;
  size_t at = 0;
  for (size_t i = 0; i < def.ops.size(); ++i) {
    const std::string& type = def.ops[i].type;
    const auto& in = def.ops[i].inputs;
    if (type == "UnscaleGradients" || std::find(in.begin(), in.end(), kLossScaleBlob) != in.end()) return;
    if (gradient == nullptr && type.size() > 8 && type.compare(type.size() - 8, 8, "Gradient") == 0) {
      gradient = &def.ops[i];
      at = i;
    }
  }
  if (gradient != nullptr)
    DP_THROW(Code::kInvalidArgument, label, ": math mode fp16 (NetOptions::math, dp_net_options.math_mode) trains ",
             "only with dynamic loss scaling: ", OpLabel(*gradient, at), " computes a gradient but the net holds no ",
             "UnscaleGradients op; build it with loss scaling (dp_training_options / dp_parallel_options "
             ".loss_scaling)");
}

}  // namespace

Net::Net(std::shared_ptr<const NetDef> def, std::shared_ptr<Workspace> ws, NetOptions options)
    : def_(std::move(def)), ws_(std::move(ws)), profile_(options.profile),
      unread_feed_error_(options.unread_feed_error) {
  label_ = def_->name.empty() ? "net" : StrCat("net '", def_->name, "'");
  ValidateNet(*def_);
  if (options.math == MathMode::kFp16) CheckFp16Training(*def_, label_);
  // Host ops of a CUDA net run on the host, their outputs copied to their readers.
  if (auto placed = PlaceHostOps(*def_)) def_ = std::move(placed);
  std::set<std::pair<int, int>> distinct_devices;
  for (size_t i = 0; i < def_->ops.size(); ++i) {
    const OperatorDef& op = def_->ops[i];
    DeviceOption device = def_->OpDevice(op);
    int count = DeviceCount(device.type);
    if (device.type != DeviceType::kCPU && device.id >= count)
      DP_THROW(Code::kUnavailable, label_, " ", OpLabel(op, i), ": device ", DeviceName(device),
               " is not available (", count, " ", DeviceTypeName(device.type), " devices",
               device.type == DeviceType::kCUDA ? ": " + cuda::Probe().detail : std::string(), ")");
    try {
      ops_.push_back(OperatorRegistry::Create(OpInit{op, i, device, ws_.get(), options.math}));
    } catch (Error& e) {
      if (e.code() == Code::kInvalidNet) throw e.Prepend(label_);
      throw e.Prepend(StrCat(label_, " ", OpLabel(op, i)));
    }
    devices_.push_back(device);
    distinct_devices.emplace(static_cast<int>(device.type), device.id);
  }
  for (const auto& name : def_->external_inputs) external_inputs_.push_back(ws_->CreateBlob(name));
  graph_ = BuildTaskGraph(*def_, devices_);
  if (options.memory != MemoryMode::kDefault && options.memory != def_->memory) {
    auto with_mode = std::make_shared<NetDef>(*def_);
    with_mode->memory = options.memory;
    def_ = std::move(with_mode);
  }

  kind_ = options.executor != ExecutorKind::kDefault ? options.executor : def_->executor;
  if (kind_ == ExecutorKind::kDefault)  // multi-device nets need overlap; single-device ones rarely gain
    kind_ = distinct_devices.size() > 1 ? ExecutorKind::kAsync : ExecutorKind::kSimple;
  AsyncOptions ao;
  ao.cpu_workers = options.num_workers > 0 ? options.num_workers : def_->num_workers;
  ao.streams_per_gpu = options.streams_per_gpu;
  auto make_executor = [this, ao]() -> std::unique_ptr<Executor> {
    if (kind_ == ExecutorKind::kAsync) return MakeAsyncExecutor(ops_, graph_, ao);
    return MakeSimpleExecutor(ops_);
  };
  CapturePlan capture = options.cuda_graphs == CudaGraphs::kOff
                            ? CapturePlan{"NetOptions::cuda_graphs is off", {}, {}, {}, {}}
                            : PlanCapture(ops_, graph_, def_->memory);
  const bool captured = capture.refusal.empty();
  if (def_->memory == MemoryMode::kShare || def_->memory == MemoryMode::kFree) {
    // Planned against the orders this net's executor may run the ops in:
    // list order for the simple executor alone; a graph's chains are issued
    // in another order and run on several streams, as the async executor's.
    const bool list_order = kind_ == ExecutorKind::kSimple && !captured;
    if (list_order) memory_order_ = ListOrderGraph(ops_.size());
    // Blobs that cross a graph's edge keep their memory: what host ops and
    // the copies into the GPU write before it and it reads (a replay reads
    // them where the capture did; a capture that fails issues the graph's
    // ops again from them), and what it writes and host ops read after it.
    // The temporaries left live and die inside the graph: between runs they
    // are empty and their blocks wait in the plan's slots, which the graph's
    // bindings check.
    std::set<std::string> keep;
    if (captured) {
      auto blobs_of = [&](const std::vector<int>& chains, bool outputs) {
        std::set<std::string> blobs;
        for (int c : chains)
          for (int i : graph_.chains[static_cast<size_t>(c)]) {
            const OperatorDef& op = def_->ops[static_cast<size_t>(i)];
            blobs.insert((outputs ? op.outputs : op.inputs).begin(), (outputs ? op.outputs : op.inputs).end());
          }
        return blobs;
      };
      const std::set<std::string> graph_reads = blobs_of(capture.graph, false),
                                  graph_writes = blobs_of(capture.graph, true);
      std::set<std::string> written_before = blobs_of(capture.before, true);
      for (int i : capture.transfers)
        for (const auto& out : def_->ops[static_cast<size_t>(i)].outputs) written_before.insert(out);
      for (const auto& b : written_before)
        if (graph_reads.count(b)) keep.insert(b);
      for (const auto& b : blobs_of(capture.after, false))
        if (graph_writes.count(b)) keep.insert(b);
    }
    try {
      memory_ = std::make_unique<NetMemory>(*def_, list_order ? memory_order_ : graph_, devices_, *ws_, ops_,
                                            std::move(keep));
    } catch (Error& e) {
      throw e.Prepend(label_);
    }
  }
  if (captured) {
    // The ordinary executor is made if the graph's policy gives up on it.
    CaptureOptions co;
    co.streams_per_gpu = options.streams_per_gpu;
    co.memory = memory_.get();
    auto graphs = std::make_unique<CapturingExecutor>(ops_, graph_, capture, make_executor, std::move(co));
    capturing_ = graphs.get();
    executor_ = std::move(graphs);
  } else {
    capture_refusal_ = std::move(capture.refusal);
    executor_ = make_executor();
  }
  DP_LOG(kInfo, label_, ": created with ", ops_.size(), " ops in ", graph_.chains.size(), " chains on the ",
         KindName(kind_), " executor", capturing_ != nullptr ? ", captured as a CUDA graph from its second run" : "");
  // Last: nothing below throws, so the destructor always unregisters. A
  // validated net reads nothing but its external inputs from the workspace
  // (every other input is written by an earlier op).
  reads_ = def_->external_inputs;
  ws_->feeds().AddReaders(reads_);
}

Net::~Net() {
  ws_->feeds().RemoveReaders(reads_);
  if (running_.load()) {
    Cancel();
    executor_->WaitFor(std::chrono::milliseconds::max());
    try {
      executor_->Finish();
    } catch (...) {
      // The run was abandoned with its net; nobody is left to hear its error.
    }
  }
}

void Net::ReportUnreadFeeds() {
  if (!ws_->feeds().pending()) return;  // the common case: one atomic load
  std::string error;
  for (const FeedWatch::Unread& u : ws_->feeds().TakeUnread(!unread_feed_error_)) {
    const std::string what =
        StrCat("fed blob '", u.blob, "' is read by no net of the workspace",
               u.nearest.empty() ? std::string() : StrCat(" (did you mean '", u.nearest, "'?)"));
    if (unread_feed_error_)
      error += (error.empty() ? "" : "; ") + what;
    else if (u.first_report)
      DP_LOG(kWarning, label_, ": ", what, "; the run goes on without it (reported once per blob)");
  }
  if (!error.empty()) DP_THROW(Code::kNotFound, label_, ": ", error);
}

void Net::BeginRun() {
  bool expected = false;
  if (!running_.compare_exchange_strong(expected, true))
    DP_THROW(Code::kFailedPrecondition, label_, " is already running; runs of one net cannot overlap");
  try {
    ReportUnreadFeeds();
  } catch (...) {
    running_.store(false);
    throw;
  }
  for (const Blob* b : external_inputs_)
    if (b->empty()) {
      running_.store(false);
      DP_THROW(Code::kNotFound, label_, ": external input '", b->name(), "' was never fed");
    }
  try {
    if (memory_) memory_->BeginRun();
  } catch (...) {
    running_.store(false);
    throw;
  }
  ws_->budget()->ResetPeak();
  control_.budget = ws_->budget().get();
  control_.cancel.store(false, std::memory_order_relaxed);
  if (profile_) {
    try {
      timings_.assign(ops_.size(), OpTiming{});
    } catch (...) {
      running_.store(false);
      throw;
    }
    control_.timings = &timings_;
  } else {
    control_.timings = nullptr;
  }
  control_.graph = OpTiming{};
  control_.graph_ops = 0;
  control_.start = std::chrono::steady_clock::now();
}

void Net::EndRun() {
  ClearOnExit clear{running_};
  try {
    executor_->Finish();
  } catch (Error& e) {
    throw e.Prepend(label_);
  } catch (const std::bad_alloc&) {
    DP_THROW(Code::kOutOfMemory, label_, ": out of memory");
  }
}

void Net::Run() {
  BeginRun();
  ClearOnExit clear{running_};
  try {
    executor_->Run(&control_);
  } catch (Error& e) {
    throw e.Prepend(label_);
  } catch (const std::bad_alloc&) {
    DP_THROW(Code::kOutOfMemory, label_, ": out of memory");
  }
}

void Net::RunAsync() {
  BeginRun();
  try {
    executor_->Start(&control_);
  } catch (...) {
    running_.store(false);
    throw;
  }
}

bool Net::Wait(std::chrono::milliseconds timeout) {
  if (!running_.load())
    DP_THROW(Code::kFailedPrecondition, label_, ": no run in progress (RunAsync starts one)");
  if (!executor_->WaitFor(timeout)) return false;
  EndRun();
  return true;
}

std::string Net::TraceJson() const {
  if (running_.load())
    DP_THROW(Code::kFailedPrecondition, label_, ": the trace is available once the run in progress ends");
  std::ostringstream os;
  // Microseconds with ns digits: the default 6 significant digits would
  // round timestamps to 10 us once a run passes 1 s (found by test_async).
  os << std::fixed << std::setprecision(3);
  os << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  for (size_t i = 0; i < timings_.size(); ++i) {
    const OpTiming& t = timings_[i];
    if (t.start_ns < 0) continue;
    const OperatorDef& op = def_->ops[i];
    std::string name = op.name.empty() ? op.type : StrCat(op.type, " ", op.name);
    os << (first ? "" : ",") << "\n{\"name\":\"" << JsonEscape(name) << "\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":"
       << static_cast<double>(t.start_ns) / 1000.0 << ",\"dur\":" << static_cast<double>(t.end_ns - t.start_ns) / 1000.0
       << ",\"pid\":0,\"tid\":" << t.thread << ",\"args\":{\"op\":" << i << ",\"device\":\""
       << DeviceName(devices_[i]) << "\",\"chain\":" << graph_.chain_of[i] << "}}";
    first = false;
  }
  // The workspace's memory over the run as a counter track: bytes in use as
  // each op ended (the memory plan's frees included), in the order they ended.
  std::vector<size_t> ended;
  for (size_t i = 0; i < timings_.size(); ++i)
    if (timings_[i].start_ns >= 0) ended.push_back(i);
  std::sort(ended.begin(), ended.end(), [&](size_t a, size_t b) { return timings_[a].end_ns < timings_[b].end_ns; });
  for (size_t i : ended)
    os << ",\n{\"name\":\"memory\",\"cat\":\"memory\",\"ph\":\"C\",\"ts\":"
       << static_cast<double>(timings_[i].end_ns) / 1000.0 << ",\"pid\":0,\"args\":{\"MiB\":"
       << static_cast<double>(timings_[i].bytes) / (1024.0 * 1024.0) << "}}";
  // A launched graph: one span on its first stream's track, from its launch
  // until the host saw it done; its args hold the device's own time for it
  // (device_us, from timing events around it: the GPU busy time of the
  // graph, -1 when unknown) and its kernel nodes (the launches it replaces).
  if (control_.graph.start_ns >= 0) {
    const OpTiming& g = control_.graph;
    os << (first ? "" : ",") << "\n{\"name\":\"CUDA graph (" << control_.graph_ops << " ops, "
       << control_.graph_kernels << " kernels)\",\"cat\":\"graph\",\"ph\":\"X\",\"ts\":"
       << static_cast<double>(g.start_ns) / 1000.0 << ",\"dur\":" << static_cast<double>(g.end_ns - g.start_ns) / 1000.0
       << ",\"pid\":0,\"tid\":" << g.thread << ",\"args\":{\"ops\":" << control_.graph_ops
       << ",\"kernels\":" << control_.graph_kernels << ",\"device_us\":" << control_.graph_device_us << "}}";
    first = false;
  }
  os << "\n],\"otherData\":{\"net\":\"" << JsonEscape(def_->name) << "\",\"executor\":\"" << KindName(kind_)
     << "\"}}\n";
  return os.str();
}

std::optional<CaptureStats> Net::capture_stats() const {
  if (capturing_ == nullptr) return std::nullopt;
  if (running_.load())
    DP_THROW(Code::kFailedPrecondition, label_, ": graph statistics are available once the run in progress ends");
  return capturing_->stats();
}

std::string Net::Dot() const { return TaskGraphToDot(*def_, graph_, devices_); }

NetMemoryStats Net::memory_stats() const {
  if (running_.load())
    DP_THROW(Code::kFailedPrecondition, label_, ": memory statistics are available once the run in progress ends");
  NetMemoryStats stats;
  if (!memory_) return stats;
  const MemoryPlan& plan = memory_->plan();
  stats.mode = plan.mode;
  stats.temporaries = plan.temporaries.size();
  stats.slots = static_cast<uint64_t>(plan.num_slots);
  stats.slot_bytes = memory_->slot_bytes();
  return stats;
}

}  // namespace dp
