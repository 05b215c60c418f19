// The executor of nets that run as one CUDA graph (exec/captured_executor.h),
// on a fake GPU: its contexts run work at once, or record it while a capture
// is open, and hold CUDA's rules (a stream joins a capture by waiting on an
// event recorded in it and must be joined back before the capture ends; a
// host wait on captured work invalidates it). A graph replays its records,
// each checking that the blobs it touches still hold the memory they held
// when it was recorded: the addresses a CUDA graph bakes in. The ops are the
// CPU kernels, wrapped so that they queue their work on the fake stream, and
// every run is compared with the same net run on the CPU.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "exec/captured_executor.h"
#include "exec/net.h"
#include "exec/net_memory.h"
#include "graph/net_format.h"
#include "graph/task_graph.h"

using namespace dp;

namespace {

class FakeContext;

// The fake GPU's state: one capture at a time, as the executor makes them.
struct FakeGpu {
  std::vector<std::function<void()>>* recording = nullptr;  // the open capture's work
  FakeContext* origin = nullptr;
  std::set<const FakeContext*> capturing;  // contexts whose work is recorded
  std::set<const DeviceContext*> declared;  // the origin and the contexts it said would join
  std::map<const FakeContext*, bool> joined;
  int captures = 0, launches = 0, timed_launches = 0, stale_addresses = 0;
};
FakeGpu g_gpu;

constexpr DeviceOption kFakeGpu{DeviceType::kCUDA, 0};

class FakeEvent final : public Event {
 public:
  DeviceOption device() const override { return kFakeGpu; }
  void Record(DeviceContext& ctx) override;
  void Wait(DeviceContext& waiter) override;
  bool Finish(std::chrono::milliseconds) override {
    if (in_capture_ && g_gpu.recording != nullptr)
      DP_THROW(Code::kInternal, "the host waited on work being captured (operation not permitted when stream is capturing)");
    return true;
  }
  EventStatus Query() override { return EventStatus::kSuccess; }
  void SetFinished(const std::string&) override {}
  std::string ErrorMessage() override { return {}; }
  void Reset() override {
    recorder_ = nullptr;
    in_capture_ = false;
  }

 private:
  const FakeContext* recorder_ = nullptr;
  bool in_capture_ = false;
};

class FakeContext final : public DeviceContext {
 public:
  DeviceOption device() const override { return kFakeGpu; }
  bool IsAsync() const override { return true; }
  std::unique_ptr<Event> CreateEvent() override { return std::make_unique<FakeEvent>(); }
  std::unique_ptr<GraphRecording> BeginGraphCapture(const std::vector<DeviceContext*>& joining) override;
  bool capturing() const { return g_gpu.capturing.count(this) != 0; }
  // Queues work: recorded during a capture, else done now.
  void Enqueue(std::function<void()> work) {
    if (!capturing()) {
      work();
      return;
    }
    g_gpu.recording->push_back(std::move(work));
    g_gpu.joined[this] = false;
  }
};

void FakeEvent::Record(DeviceContext& ctx) {
  auto& fake = dynamic_cast<FakeContext&>(ctx);
  REQUIRE(recorder_ == nullptr);  // recorded twice without Reset
  recorder_ = &fake;
  in_capture_ = fake.capturing();
  if (in_capture_) g_gpu.joined[&fake] = false;
}

void FakeEvent::Wait(DeviceContext& waiter) {
  auto& fake = dynamic_cast<FakeContext&>(waiter);
  if (!in_capture_) return;
  if (!fake.capturing()) {  // the waiter joins the capture, as the capture was told it would
    REQUIRE(g_gpu.declared.count(&fake) != 0);
    g_gpu.capturing.insert(&fake);
  }
  if (&fake == g_gpu.origin && recorder_ != g_gpu.origin) g_gpu.joined[recorder_] = true;
}

class FakeGraph final : public DeviceGraph {
 public:
  explicit FakeGraph(std::vector<std::function<void()>> work) : work_(std::move(work)) {}
  void Launch(DeviceContext& ctx) override {
    REQUIRE(dynamic_cast<FakeContext*>(&ctx) != nullptr);
    ++g_gpu.launches;
    for (auto& w : work_) w();
  }
  size_t nodes() const override { return work_.size(); }
  size_t kernel_nodes() const override { return work_.size(); }  // each fake node a kernel
  void LaunchTimed(DeviceContext& ctx) override {
    Launch(ctx);
    ++g_gpu.timed_launches;
    timed_ = true;
  }
  // The device's time for a timed launch: 10 us a node.
  double LastLaunchDeviceMicros() override { return timed_ ? 10.0 * static_cast<double>(work_.size()) : -1; }

 private:
  std::vector<std::function<void()>> work_;
  bool timed_ = false;
};

class FakeRecording final : public GraphRecording {
 public:
  ~FakeRecording() override { End(); }
  std::unique_ptr<DeviceGraph> Finish() override {
    for (const FakeContext* c : g_gpu.capturing)
      if (c != g_gpu.origin && !g_gpu.joined[c]) {
        End();
        DP_THROW(Code::kInternal, "a stream was not joined back into the capture (capture unjoined)");
      }
    auto graph = std::make_unique<FakeGraph>(std::move(work_));
    End();
    ++g_gpu.captures;
    return graph;
  }
  std::vector<std::function<void()>> work_;

 private:
  void End() {
    if (g_gpu.recording != &work_) return;
    g_gpu.recording = nullptr;
    g_gpu.origin = nullptr;
    g_gpu.capturing.clear();
    g_gpu.declared.clear();
    g_gpu.joined.clear();
  }
};

std::unique_ptr<GraphRecording> FakeContext::BeginGraphCapture(const std::vector<DeviceContext*>& joining) {
  REQUIRE(g_gpu.recording == nullptr);
  auto r = std::make_unique<FakeRecording>();
  g_gpu.recording = &r->work_;
  g_gpu.origin = this;
  g_gpu.capturing.insert(this);
  g_gpu.declared = {joining.begin(), joining.end()};
  g_gpu.declared.insert(this);
  return r;
}

std::unique_ptr<DeviceContext> MakeFakeContext(DeviceOption) { return std::make_unique<FakeContext>(); }

const void* DataOf(const Blob* b) {
  return b->empty() || !b->IsType<Tensor>() ? nullptr : b->Share<Tensor>()->raw_data();
}

// A CPU kernel as a "GPU" op: its run is queued on the fake stream. A
// recorded run checks, when replayed, that its blobs hold the memory they
// held when it was recorded (and still do after it ran).
class OnFakeGpu final : public Operator {
 public:
  OnFakeGpu(const OpInit& init, bool syncs, const char* obstacle = nullptr)
      : Operator(OpInit{init.def, init.index, kFakeGpu, init.ws}), syncs_(syncs), obstacle_(obstacle) {
    inner_ = OperatorRegistry::Create(OpInit{init.def, init.index, DeviceOption{}, init.ws});
  }
  const char* GraphCaptureObstacle() const override { return obstacle_; }

 private:
  void RunOnDevice() override {
    auto& stream = dynamic_cast<FakeContext&>(context());
    if (syncs_ && stream.capturing())  // as a kernel that reads a value on the host would
      DP_THROW(Code::kInternal, label(), " synchronised while captured (operation not permitted when stream is capturing)");
    std::vector<const void*> bound;
    const bool recorded = stream.capturing();
    if (recorded)
      for (const Blob* b : Blobs()) bound.push_back(DataOf(b));
    stream.Enqueue([this, bound, recorded] {
      auto check = [&] {
        if (!recorded) return;
        std::vector<const Blob*> blobs = Blobs();
        for (size_t i = 0; i < blobs.size(); ++i)
          if (DataOf(blobs[i]) != bound[i]) ++g_gpu.stale_addresses;
      };
      check();
      CpuContext cpu;
      inner_->Run(cpu);
      check();
    });
  }
  std::vector<const Blob*> Blobs() const {
    std::vector<const Blob*> all(input_blobs().begin(), input_blobs().end());
    all.insert(all.end(), output_blobs().begin(), output_blobs().end());
    return all;
  }

  bool syncs_;
  const char* obstacle_;
  std::unique_ptr<Operator> inner_;
};

// A CPU kernel as a "GPU" op whose recorded work holds raw addresses, as a
// CUDA graph's kernels do, rather than blobs: for nets whose memory plan
// shares blocks ('share'), where a temporary's blob is empty between runs
// and only the block in its slot holds its memory. While captured it runs at
// once (sizing its outputs on the host, as a CUDA op does when issued) and
// records the address, size, shape and dtype of each blob it touches; a
// replay runs the kernel on views of the recorded inputs and copies its
// outputs into the recorded addresses, leaving the blobs as it found them.
// Reading a block that the plan gave back would be a use after free, which
// the sanitizer builds catch.
class OnFakeGpuBaked final : public Operator {
 public:
  explicit OnFakeGpuBaked(const OpInit& init) : Operator(OpInit{init.def, init.index, kFakeGpu, init.ws}) {
    inner_ = OperatorRegistry::Create(OpInit{init.def, init.index, DeviceOption{}, init.ws});
  }
  const char* GraphCaptureObstacle() const override { return nullptr; }

 private:
  struct Baked {
    void* data;
    size_t nbytes;
    Dims dims;
    DType dtype;
  };

  void RunOnDevice() override {
    auto& stream = dynamic_cast<FakeContext&>(context());
    CpuContext cpu;
    // The kernel's outputs take the memory plan's blocks, as this op's would.
    for (int i = 0; i < OutputSize(); ++i) inner_->set_output_slot(i, output_slot(i));
    if (!stream.capturing()) {
      stream.Enqueue([this] {
        CpuContext now;
        inner_->Run(now);
      });
      return;
    }
    inner_->Run(cpu);
    std::vector<Baked> inputs, outputs;
    for (const Blob* b : input_blobs()) inputs.push_back(Bake(b));
    for (const Blob* b : output_blobs()) outputs.push_back(Bake(b));
    stream.Enqueue([this, inputs, outputs] { Replay(inputs, outputs); });
  }

  static Baked Bake(const Blob* b) {
    const std::shared_ptr<const Tensor> t = b->Share<Tensor>();
    return {const_cast<void*>(t->raw_data()), t->nbytes(), t->dims(), t->dtype()};
  }

  void Replay(const std::vector<Baked>& inputs, const std::vector<Baked>& outputs) {
    std::vector<std::shared_ptr<Tensor>> held;  // the blobs' contents, put back after
    for (Blob* b : input_blobs()) held.push_back(b->Release<Tensor>());
    for (size_t i = 0; i < inputs.size(); ++i)
      input_blobs()[i]->Publish(std::make_shared<Tensor>(Tensor::FromStorage(
          inputs[i].dims, inputs[i].dtype, Storage::Borrow(DeviceOption{}, inputs[i].data, inputs[i].nbytes))));
    std::vector<std::shared_ptr<Tensor>> held_out;
    for (Blob* b : output_blobs()) held_out.push_back(b->Release<Tensor>());
    // A replay does nothing on the host: the kernel computes into memory of
    // its own (not the plan's blocks), copied to the recorded addresses.
    for (int i = 0; i < OutputSize(); ++i) inner_->set_output_slot(i, nullptr);
    CpuContext cpu;
    inner_->Run(cpu);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::shared_ptr<const Tensor> t = output_blobs()[i]->Share<Tensor>();
      REQUIRE(t->nbytes() == outputs[i].nbytes);
      std::memcpy(outputs[i].data, t->raw_data(), outputs[i].nbytes);
    }
    for (size_t i = 0; i < output_blobs().size(); ++i) {
      output_blobs()[i]->Release<Tensor>();
      if (held_out[i]) output_blobs()[i]->Publish(held_out[i]);
    }
    for (size_t i = 0; i < input_blobs().size(); ++i) {
      input_blobs()[i]->Release<Tensor>();
      if (held[i]) input_blobs()[i]->Publish(held[i]);
    }
  }

  std::unique_ptr<Operator> inner_;
};

// The ordinary executor of a fake-GPU net once its graphs are given up: ops
// in list order, at once.
class FakeStreams final : public Executor {
 public:
  FakeStreams(const std::vector<std::unique_ptr<Operator>>& ops, int* runs) : ops_(ops), runs_(runs) {}
  void Start(RunControl* rc) override {
    ++*runs_;
    FakeContext gpu;
    for (const auto& op : ops_) {
      if (op->device().type == DeviceType::kCUDA) {
        RunOp(*op, gpu, *rc, 1);
      } else {
        CpuContext cpu;
        RunOp(*op, cpu, *rc, 0);
      }
    }
  }
  bool WaitFor(std::chrono::milliseconds) override { return true; }
  void Finish() override {}

 private:
  const std::vector<std::unique_ptr<Operator>>& ops_;
  int* runs_;
};

Tensor CyclingFloats(Dims dims, float first) {
  Tensor t(std::move(dims), DType::kFloat32);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = first + 0.125f * static_cast<float>(i % 13);
  return t;
}

// x0 -(host Scale)-> xs -FC-> h, then Relu(h) and Sigmoid(h) (a fork), Add
// (their join) -> y, then -(host Scale)-> out. The CPU twin runs the same net
// with every op on the CPU.
constexpr const char* kNetJson = R"({"name":"graph_net","external_inputs":["x0","w","b"],"ops":[
  {"type":"Scale","inputs":["x0"],"outputs":["xs"],"args":[{"name":"scale","f":2.0}]},
  {"type":"FC","inputs":["xs","w","b"],"outputs":["h"]},
  {"type":"Relu","inputs":["h"],"outputs":["r1"]},
  {"type":"Sigmoid","inputs":["h"],"outputs":["r2"]},
  {"type":"Add","inputs":["r1","r2"],"outputs":["y"]},
  {"type":"Scale","inputs":["y"],"outputs":["out"],"args":[{"name":"scale","f":0.5}]}]})";

// kNetJson with the FC reading a copy of xs made on the GPU: a transfer
// (CapturePlan::transfers), run before the graph every run, not recorded.
constexpr const char* kTransferNetJson = R"({"name":"graph_net","external_inputs":["x0","w","b"],"ops":[
  {"type":"Scale","inputs":["x0"],"outputs":["xs"],"args":[{"name":"scale","f":2.0}]},
  {"type":"Copy","inputs":["xs"],"outputs":["xd"]},
  {"type":"FC","inputs":["xd","w","b"],"outputs":["h"]},
  {"type":"Relu","inputs":["h"],"outputs":["r1"]},
  {"type":"Sigmoid","inputs":["h"],"outputs":["r2"]},
  {"type":"Add","inputs":["r1","r2"],"outputs":["y"]},
  {"type":"Scale","inputs":["y"],"outputs":["out"],"args":[{"name":"scale","f":0.5}]}]})";

struct GraphNet {
  std::shared_ptr<Workspace> ws = std::make_shared<Workspace>();
  NetDef def;
  std::vector<std::unique_ptr<Operator>> ops;
  TaskGraph graph;
  CapturePlan plan;
  std::unique_ptr<CapturingExecutor> exec;
  int fallback_runs = 0;
  uint64_t run_allocations = 0;  // host storage the last run allocated (the fake GPU's memory is the host's)
  std::vector<OpTiming> timings;
  RunControl rc;

  // The GPU ops are all but the first and the last; `syncing` of them
  // synchronise when captured. A Copy says, as the CUDA one does, that it
  // copies between devices.
  explicit GraphNet(int streams, std::set<int> syncing = {}, const char* json = kNetJson) : def(NetDefFromJson(json)) {
    g_gpu = FakeGpu{};
    std::vector<DeviceOption> devices;
    for (size_t i = 0; i < def.ops.size(); ++i) {
      const bool gpu = i >= 1 && i + 1 < def.ops.size();
      OpInit init{def.ops[i], i, DeviceOption{}, ws.get()};
      if (gpu)
        ops.push_back(std::make_unique<OnFakeGpu>(init, syncing.count(static_cast<int>(i)) != 0,
                                                  def.ops[i].type == "Copy" ? "it copies between devices" : nullptr));
      else
        ops.push_back(OperatorRegistry::Create(init));
      devices.push_back(gpu ? kFakeGpu : DeviceOption{});
    }
    graph = BuildTaskGraph(def, devices);
    plan = PlanCapture(ops, graph, MemoryMode::kKeep);
    REQUIRE(plan.refusal.empty());
    CaptureOptions options;
    options.streams_per_gpu = streams;
    options.make_context = &MakeFakeContext;
    exec = std::make_unique<CapturingExecutor>(
        ops, graph, plan, [this] { return std::make_unique<FakeStreams>(ops, &fallback_runs); }, options);
  }

  void Feed(int batch, float first) {
    ws->Feed("x0", CyclingFloats({batch, 4}, first));
    ws->Feed("w", CyclingFloats({3, 4}, -0.5f));
    ws->Feed("b", CyclingFloats({3}, first / 4));  // a new tensor every run: copied into the graph's buffer
  }

  // One run; `out` must equal the CPU twin's on the same feeds.
  void Run(int batch, float first, bool profile = false) {
    Feed(batch, first);
    timings.assign(ops.size(), OpTiming{});
    rc.timings = profile ? &timings : nullptr;
    rc.start = std::chrono::steady_clock::now();
    const uint64_t made = LibraryAllocations(DeviceOption{});
    exec->Run(&rc);
    run_allocations = LibraryAllocations(DeviceOption{}) - made;
    auto cpu = std::make_shared<Workspace>();
    cpu->Feed("x0", CyclingFloats({batch, 4}, first));
    cpu->Feed("w", CyclingFloats({3, 4}, -0.5f));
    cpu->Feed("b", CyclingFloats({3}, first / 4));
    NetOptions o;
    o.executor = ExecutorKind::kSimple;
    Net twin(std::make_shared<const NetDef>(def), cpu, o);
    twin.Run();
    Tensor got = ws->GetTensor("out"), want = cpu->GetTensor("out");
    REQUIRE(got.dims() == want.dims());
    for (int64_t i = 0; i < want.numel(); ++i) REQUIRE(got.data<float>()[i] == want.data<float>()[i]);
  }
  CaptureStats Stats() const { return exec->stats(); }
};

}  // namespace

TEST_CASE("CapturingExecutor: streams, then a capture, then replays, each run equal to the CPU's") {
  for (int streams : {1, 2}) {
    CAPTURE(streams);
    GraphNet n(streams);
    n.Run(2, 1.0f);  // the warm-up: on the streams
    CHECK(n.Stats().runs.captures == 0);
    CHECK(g_gpu.launches == 0);
    n.Run(2, -1.0f);  // captured, then launched for its results
    CHECK(n.Stats().runs.captures == 1);
    CHECK(g_gpu.captures == 1);  // the fork to a second stream was joined back
    CHECK(g_gpu.launches == 1);
    CHECK(n.Stats().graph_nodes == 4);  // the four GPU ops; the host ones run around it
    for (int run = 0; run < 3; ++run) n.Run(2, 0.5f * static_cast<float>(run));
    CHECK(n.Stats().runs.replays == 3);
    CHECK(g_gpu.launches == 4);
    CHECK(g_gpu.timed_launches == 0);  // not profiled: no timing marks, no device time
    CHECK(n.rc.graph_device_us == -1);
    CHECK(n.rc.graph_kernels == 4);
    CHECK(g_gpu.stale_addresses == 0);
    CHECK(n.Stats().reason.empty());
    CHECK(n.fallback_runs == 0);
  }
}

TEST_CASE("CapturingExecutor: a batch of another size runs on the streams, and the next run captures again") {
  GraphNet n(2);
  n.Run(2, 1.0f);
  n.Run(2, 2.0f);
  n.Run(2, 3.0f);
  REQUIRE(n.Stats().runs.replays == 1);
  n.Run(5, 4.0f);  // xs (written by the host op before the graph) moves: the graph is stale
  CHECK(n.Stats().runs.invalidations == 1);
  CHECK(n.Stats().reason.find("stale") != std::string::npos);
  CHECK(g_gpu.launches == 2);  // that run went on the streams
  n.Run(5, 5.0f);              // captured again
  n.Run(5, 6.0f);              // replayed
  CHECK(n.Stats().runs.captures == 2);
  CHECK(n.Stats().runs.replays == 2);
  CHECK(g_gpu.launches == 4);
  CHECK(g_gpu.stale_addresses == 0);
}

TEST_CASE("CapturingExecutor: a blob fed again while a fetch still holds the graph's buffer runs on the streams") {
  GraphNet n(2);
  n.Run(2, 1.0f);
  n.Run(2, 2.0f);  // captured
  n.Run(2, 3.0f);  // replayed: b's new tensor copied into the graph's buffer, which b holds again
  REQUIRE(n.Stats().runs.replays == 1);
  Tensor fetched = n.ws->GetTensor("b");  // a fetch that keeps that buffer
  const std::vector<float> was(fetched.data<float>(), fetched.data<float>() + fetched.numel());
  n.Run(2, 4.0f);  // b fed again: refilling the buffer would change the fetch
  CHECK(n.Stats().runs.replays == 1);
  CHECK(n.Stats().reason.find("still held by a tensor outside the net") != std::string::npos);
  CHECK(g_gpu.launches == 2);
  CHECK(std::vector<float>(fetched.data<float>(), fetched.data<float>() + fetched.numel()) == was);
  fetched = Tensor();
  n.Run(2, 5.0f);  // nobody else holds it: replayed again, the graph kept
  CHECK(n.Stats().runs.replays == 2);
  CHECK(n.Stats().runs.captures == 1);
  CHECK(g_gpu.launches == 3);
  CHECK(g_gpu.stale_addresses == 0);
}

TEST_CASE("CapturingExecutor: a capture that fails runs that run on the streams; after two, the ordinary executor") {
  GraphNet n(1, {3});  // Sigmoid synchronises while captured
  n.Run(2, 1.0f);
  n.Run(2, 2.0f);  // the capture fails: the run's results come from the streams
  CHECK(n.Stats().runs.capture_failures == 1);
  CHECK(n.Stats().reason.find("synchronised while captured") != std::string::npos);
  CHECK(g_gpu.launches == 0);
  n.Run(2, 3.0f);  // the warm-up again
  n.Run(2, 4.0f);  // the second failure: the policy gives up
  CHECK(n.Stats().runs.capture_failures == 2);
  CHECK(n.Stats().given_up);
  CHECK(n.fallback_runs == 0);
  n.Run(2, 5.0f);
  n.Run(3, 6.0f);
  CHECK(n.fallback_runs == 2);
  CHECK(g_gpu.launches == 0);
  CHECK(n.Stats().graph_nodes == 0);
}

TEST_CASE("CapturingExecutor: a profiled replay shows the graph as one span, the host ops as their own") {
  GraphNet n(2);
  n.Run(2, 1.0f, true);
  for (size_t i = 0; i < n.ops.size(); ++i) CHECK(n.timings[i].start_ns >= 0);  // on the streams: every op
  CHECK(n.rc.graph.start_ns < 0);
  n.Run(2, 2.0f, true);
  n.Run(2, 3.0f, true);
  REQUIRE(n.Stats().runs.replays == 1);
  CHECK(n.rc.graph.start_ns >= 0);
  CHECK(n.rc.graph.end_ns >= n.rc.graph.start_ns);
  CHECK(n.rc.graph_ops == 4);
  // Timed on the device too (the capture's launch and the replay): its
  // kernels, and the device's time for them.
  CHECK(g_gpu.timed_launches == 2);
  CHECK(n.rc.graph_kernels == n.Stats().graph_nodes);
  CHECK(n.rc.graph_device_us == doctest::Approx(10.0 * static_cast<double>(n.Stats().graph_nodes)));
  CHECK(n.timings[0].start_ns >= 0);
  CHECK(n.timings[5].start_ns >= n.rc.graph.end_ns);  // the host op after the graph waited for it
  for (size_t i = 1; i <= 4; ++i) CHECK(n.timings[i].start_ns < 0);
}

TEST_CASE("CapturingExecutor: a cancelled run fails as cancelled; the next one replays") {
  GraphNet n(1);
  n.Run(2, 1.0f);
  n.Run(2, 2.0f);
  n.rc.cancel.store(true);
  n.Feed(2, 3.0f);
  CHECK_THROWS_WITH_AS(n.exec->Run(&n.rc), doctest::Contains("cancelled"), Error);
  n.rc.cancel.store(false);
  n.Run(2, 4.0f);
  CHECK(n.Stats().runs.replays == 1);
  CHECK(g_gpu.stale_addresses == 0);
}

TEST_CASE("CapturingExecutor: a copy into the GPU at the graph's start runs before it every run, unrecorded") {
  GraphNet n(2, {}, kTransferNetJson);
  CHECK(n.plan.transfers == std::vector<int>{1});
  n.Run(2, 1.0f);
  n.Run(2, 2.0f);  // captured
  CHECK(n.Stats().runs.captures == 1);
  CHECK(n.Stats().graph_nodes == 4);  // FC, Relu, Sigmoid, Add; not the copy
  for (int run = 0; run < 3; ++run) {
    n.Run(2, 3.0f + static_cast<float>(run));  // each a new x0, copied first
    CHECK(n.run_allocations == 0);  // the copy writes where the graph reads, in place
  }
  CHECK(n.Stats().runs.replays == 3);
  CHECK(g_gpu.stale_addresses == 0);
  CHECK(n.fallback_runs == 0);
  n.Run(3, 7.0f);  // another batch size: xd moves, the graph is stale
  CHECK(n.Stats().runs.invalidations == 1);
  n.Run(3, 8.0f);
  n.Run(3, 9.0f);
  CHECK(n.Stats().runs.replays == 4);
}

TEST_CASE("Net: a CPU net, or one with cuda_graphs off, has no graph and says why") {
  auto ws = std::make_shared<Workspace>();
  auto def = std::make_shared<const NetDef>(NetDefFromJson(kNetJson));
  Net cpu(def, ws);
  CHECK_FALSE(cpu.capture_stats().has_value());
  CHECK(cpu.capture_refusal() == "no op of it runs on a CUDA device");
  NetOptions off;
  off.cuda_graphs = CudaGraphs::kOff;
  Net no_graphs(def, ws, off);
  CHECK(no_graphs.capture_refusal() == "NetOptions::cuda_graphs is off");
}

namespace {

// kNetJson with a memory plan that shares blocks ('share'), on the fake GPU
// whose graphs bake in addresses: the graph's temporaries (h, r1, r2) take
// turns in the plan's blocks, their blobs empty between runs.
struct SharedGraphNet {
  std::shared_ptr<Workspace> ws = std::make_shared<Workspace>();
  NetDef def;
  std::vector<std::unique_ptr<Operator>> ops;
  std::vector<DeviceOption> devices;
  TaskGraph graph;
  std::unique_ptr<NetMemory> memory;
  std::unique_ptr<CapturingExecutor> exec;
  int fallback_runs = 0;
  RunControl rc;

  SharedGraphNet() {
    g_gpu = FakeGpu{};
    def = NetDefFromJson(kNetJson);
    def.memory = MemoryMode::kShare;
    def.external_outputs = {"out"};
    for (size_t i = 0; i < def.ops.size(); ++i) {
      const bool gpu = i >= 1 && i <= 4;
      OpInit init{def.ops[i], i, DeviceOption{}, ws.get()};
      if (gpu)
        ops.push_back(std::make_unique<OnFakeGpuBaked>(init));
      else
        ops.push_back(OperatorRegistry::Create(init));
      devices.push_back(gpu ? kFakeGpu : DeviceOption{});
    }
    graph = BuildTaskGraph(def, devices);
    // As Net does: xs (written on the host before the graph and read by it)
    // and y (written by the graph, read on the host after it) keep their
    // memory; h, r1 and r2 live and die in the graph.
    memory = std::make_unique<NetMemory>(def, graph, devices, *ws, ops, std::set<std::string>{"xs", "y"});
    CapturePlan plan = PlanCapture(ops, graph, MemoryMode::kShare);
    REQUIRE(plan.refusal.empty());
    CaptureOptions options;
    options.streams_per_gpu = 2;
    options.make_context = &MakeFakeContext;
    options.memory = memory.get();
    options.allocations = [] { return LibraryAllocations(DeviceOption{}); };  // the fake GPU's memory is the host's
    exec = std::make_unique<CapturingExecutor>(
        ops, graph, plan, [this] { return std::make_unique<FakeStreams>(ops, &fallback_runs); }, options);
  }

  // One run, as Net::Run does it (the plan's BeginRun first); `out` must
  // equal the CPU twin's, and the `temporaries` be empty after it.
  void Run(float first, std::vector<std::string> temporaries = {"h", "r1", "r2"}) {
    ws->Feed("x0", CyclingFloats({2, 4}, first));
    ws->Feed("w", CyclingFloats({3, 4}, -0.5f));
    ws->Feed("b", CyclingFloats({3}, first / 4));
    memory->BeginRun();
    rc.start = std::chrono::steady_clock::now();
    exec->Run(&rc);
    auto cpu = std::make_shared<Workspace>();
    cpu->Feed("x0", CyclingFloats({2, 4}, first));
    cpu->Feed("w", CyclingFloats({3, 4}, -0.5f));
    cpu->Feed("b", CyclingFloats({3}, first / 4));
    NetDef keep = NetDefFromJson(kNetJson);
    Net twin(std::make_shared<const NetDef>(keep), cpu);
    twin.Run();
    Tensor got = ws->GetTensor("out"), want = cpu->GetTensor("out");
    REQUIRE(got.dims() == want.dims());
    for (int64_t i = 0; i < want.numel(); ++i) REQUIRE(got.data<float>()[i] == want.data<float>()[i]);
    for (const std::string& t : temporaries) {
      CAPTURE(t);
      CHECK(ws->GetBlob(t)->empty());
    }
  }
  CaptureStats Stats() const { return exec->stats(); }
};

}  // namespace

TEST_CASE("CapturingExecutor: a net whose memory plan shares blocks replays into the blocks its capture used") {
  SharedGraphNet n;
  REQUIRE(n.memory->plan().num_slots > 0);
  n.Run(1.0f);  // the warm-up
  n.Run(2.0f);  // the plan is made again with the first run's sizes: its blocks moved, a warm-up again
  CHECK(n.Stats().runs.captures == 0);
  CHECK(n.Stats().reason.find("memory plan") != std::string::npos);
  n.Run(3.0f);  // captured
  CHECK(n.Stats().runs.captures == 1);
  CHECK(n.Stats().runs.capture_failures == 0);
  for (int run = 0; run < 4; ++run) n.Run(0.25f * static_cast<float>(run));
  CHECK(n.Stats().runs.replays == 4);
  CHECK(n.Stats().reason.empty());
  CHECK(g_gpu.launches == 5);
  CHECK(n.fallback_runs == 0);

  // Another net reads a temporary: the plan keeps it whole and is made again,
  // so the blocks the graph baked in are gone: stale, a warm-up, a capture.
  n.ws->feeds().AddReaders({"h"});
  n.Run(5.0f, {"r1", "r2"});  // h is kept whole from now on
  CHECK(n.Stats().runs.invalidations == 1);
  CHECK(n.Stats().reason.find("stale: the net's memory plan was made again") != std::string::npos);
  n.ws->feeds().RemoveReaders({"h"});
  n.Run(6.0f, {"r1", "r2"});
  n.Run(7.0f, {"r1", "r2"});
  CHECK(n.Stats().runs.captures == 2);
  CHECK(n.Stats().runs.replays == 5);
}
