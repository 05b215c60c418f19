// Whole-net CUDA graph capture, its host half (exec/graph_capture.h): which
// nets qualify, and when a captured graph may replay. The bindings and the
// policy are device-independent, so they are driven here with CPU nets run
// op by op in place of a capture or a replay: what a replay would have read
// is what these runs read, after CopyRefedInputs.
#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "exec/graph_capture.h"
#include "exec/net.h"
#include "graph/net_format.h"

using namespace dp;

namespace {

// An op that does nothing, on any device, with the obstacle it is given.
class FakeOp final : public Operator {
 public:
  FakeOp(const OpInit& init, const char* obstacle) : Operator(init), obstacle_(obstacle) {}
  const char* GraphCaptureObstacle() const override { return obstacle_; }

 private:
  void RunOnDevice() override {}
  const char* obstacle_;
};

constexpr DeviceOption kGpu0{DeviceType::kCUDA, 0};
constexpr DeviceOption kGpu1{DeviceType::kCUDA, 1};
constexpr DeviceOption kCpu{DeviceType::kCPU, 0};

// A net of one op per chain, chain i on devices[i], with the given edges
// (parent chain, child chain).
struct FakeNet {
  Workspace ws;
  std::vector<OperatorDef> defs;
  std::vector<std::unique_ptr<Operator>> ops;
  TaskGraph graph;

  // Ops in `copies` are Copy ops, which say they copy between devices.
  FakeNet(const std::vector<DeviceOption>& devices, const std::vector<std::pair<int, int>>& edges,
          const char* obstacle = nullptr, std::set<size_t> copies = {}) {
    const size_t n = devices.size();
    defs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const bool copy = copies.count(i) != 0;
      defs.push_back(MakeOperatorDef(copy ? "Copy" : "Relu", {"x" + std::to_string(i)}, {"y" + std::to_string(i)}));
      defs.back().name = "op" + std::to_string(i);
      ops.push_back(std::make_unique<FakeOp>(OpInit{defs.back(), i, devices[i], &ws},
                                             copy ? "it copies between devices" : obstacle));
      graph.chains.push_back({static_cast<int>(i)});
      graph.chain_of.push_back(static_cast<int>(i));
      graph.chain_device.push_back(devices[i]);
    }
    graph.parents.resize(n);
    graph.children.resize(n);
    graph.chain_parents.resize(n);
    graph.chain_children.resize(n);
    for (auto [p, c] : edges) {
      graph.chain_children[static_cast<size_t>(p)].push_back(c);
      graph.chain_parents[static_cast<size_t>(c)].push_back(p);
      graph.children[static_cast<size_t>(p)].push_back(c);
      graph.parents[static_cast<size_t>(c)].push_back(p);
    }
  }
  CapturePlan Plan(MemoryMode memory = MemoryMode::kKeep) const { return PlanCapture(ops, graph, memory); }
};

TEST_CASE("PlanCapture: CUDA ops with host ops at the edges qualify; the reasons of the others") {
  SUBCASE("host feeds before, a host fetch after, a fork and join on the GPU") {
    // 0 (cpu) -> 1 (gpu) -> {2, 3} (gpu) -> 4 (gpu) -> 5 (cpu); 6 (cpu) on its own.
    FakeNet net({kCpu, kGpu0, kGpu0, kGpu0, kGpu0, kCpu, kCpu}, {{0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 4}, {4, 5}});
    CapturePlan plan = net.Plan();
    CHECK(plan.refusal.empty());
    CHECK(plan.before == std::vector<int>{0, 6});
    CHECK(plan.graph == std::vector<int>{1, 2, 3, 4});
    CHECK(plan.after == std::vector<int>{5});
  }
  SUBCASE("copies into the GPU before the graph are transfers; a copy after a CUDA op is not") {
    // 0 (cpu) -> 1 (gpu copy) -> 2 (gpu) -> 3 (gpu copy) -> 4 (cpu)
    FakeNet net({kCpu, kGpu0, kGpu0, kGpu0, kCpu}, {{0, 1}, {1, 2}, {2, 3}, {3, 4}}, nullptr, {1, 3});
    CapturePlan plan = net.Plan();
    CHECK(plan.refusal == "op 3 (Copy 'op3'): it copies between devices");
    FakeNet in({kCpu, kGpu0, kGpu0, kCpu}, {{0, 1}, {1, 2}, {2, 3}}, nullptr, {1});
    plan = in.Plan();
    CHECK(plan.refusal.empty());
    CHECK(plan.transfers == std::vector<int>{1});
    CHECK(plan.before == std::vector<int>{0});
    CHECK(plan.graph == std::vector<int>{2});  // the copy's chain holds the copy alone
    CHECK(plan.after == std::vector<int>{3});
    FakeNet only({kCpu, kGpu0}, {{0, 1}}, nullptr, {1});
    CHECK(only.Plan().refusal.find("only CUDA ops copy into the GPU") != std::string::npos);
  }
  SUBCASE("a host op between two CUDA ops") {
    FakeNet net({kGpu0, kCpu, kGpu0}, {{0, 1}, {1, 2}});
    CapturePlan plan = net.Plan();
    CHECK(plan.refusal.find("op1") != std::string::npos);
    CHECK(plan.refusal.find("between CUDA ops") != std::string::npos);
    CHECK(plan.graph.empty());
  }
  SUBCASE("a host op between CUDA ops through a longer path") {
    FakeNet net({kGpu0, kCpu, kCpu, kGpu0}, {{0, 1}, {1, 2}, {2, 3}});
    CHECK(net.Plan().refusal.find("op1") != std::string::npos);
  }
  SUBCASE("two GPUs") {
    FakeNet net({kGpu0, kGpu1}, {});
    CHECK(net.Plan().refusal.find("cuda:0 and cuda:1") != std::string::npos);
  }
  SUBCASE("replicas sharing one GPU") {
    FakeNet net({kGpu0, kGpu0, kGpu0}, {{0, 2}, {1, 2}});
    CHECK(net.Plan().refusal.empty());
  }
  SUBCASE("no CUDA op") {
    FakeNet net({kCpu, kCpu}, {{0, 1}});
    CHECK(net.Plan().refusal == "no op of it runs on a CUDA device");
  }
  SUBCASE("a memory plan that returns memory to the allocator; one that keeps its blocks qualifies") {
    FakeNet net({kGpu0}, {});
    CHECK(net.Plan(MemoryMode::kFree).refusal.find("'free'") != std::string::npos);
    CHECK(net.Plan(MemoryMode::kShare).refusal.empty());
    CHECK(net.Plan(MemoryMode::kKeep).refusal.empty());
    CHECK(net.Plan(MemoryMode::kDefault).refusal.empty());
  }
  SUBCASE("a CUDA kernel that acts on the host") {
    FakeNet net({kCpu, kGpu0}, {{0, 1}}, "it reads a value on the host");
    CapturePlan plan = net.Plan();
    CHECK(plan.refusal.find("op1") != std::string::npos);
    CHECK(plan.refusal.find("it reads a value on the host") != std::string::npos);
  }
  SUBCASE("an op whose kernel says nothing (the base class) is not captured") {
    Workspace ws;
    OperatorDef def = MakeOperatorDef("Relu", {"a"}, {"b"});
    struct Plain final : Operator {
      using Operator::Operator;
      void RunOnDevice() override {}
    };
    std::vector<std::unique_ptr<Operator>> ops;
    ops.push_back(std::make_unique<Plain>(OpInit{def, 0, kGpu0, &ws}));
    TaskGraph graph;
    graph.chains = {{0}};
    graph.chain_of = {0};
    graph.chain_device = {kGpu0};
    graph.parents = graph.children = graph.chain_parents = graph.chain_children = {{}};
    CHECK(PlanCapture(ops, graph, MemoryMode::kKeep).refusal.find("not known to be safe") != std::string::npos);
  }
}

Tensor Floats(Dims dims, float first) {
  Tensor t(std::move(dims), DType::kFloat32);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = first + 0.25f * static_cast<float>(i);
  return t;
}

// Nets on the CPU, run op by op: inference (FC, then Relu in place),
// training (w updated in place), and inference with a view of the FC's
// output (Flatten shares y's memory).
enum class Kind { kInference, kTraining, kView };

struct CpuNet {
  std::shared_ptr<Workspace> ws = std::make_shared<Workspace>();
  std::unique_ptr<Net> net;
  std::vector<Operator*> ops;

  explicit CpuNet(Kind kind) {
    ws->Feed("x", Floats({2, 4}, -1.0f));
    ws->Feed("w", Floats({3, 4}, -0.5f));
    ws->Feed("b", Floats({3}, 0.1f));
    std::string ops_json = R"({"type":"FC","inputs":["x","w","b"],"outputs":["y"]})";
    if (kind == Kind::kTraining)
      ops_json += R"(,{"type":"Scale","inputs":["w"],"outputs":["w"],"args":[{"name":"scale","f":0.5}]})";
    else
      ops_json += R"(,{"type":"Relu","inputs":["y"],"outputs":["y"]})";
    if (kind == Kind::kView) ops_json += R"(,{"type":"Flatten","inputs":["y"],"outputs":["flat"]})";
    const std::string json = R"({"name":"net","external_inputs":["x","w","b"],"ops":[)" + ops_json + "]}";
    NetOptions options;
    options.executor = ExecutorKind::kSimple;
    net = std::make_unique<Net>(std::make_shared<const NetDef>(NetDefFromJson(json)), ws, options);
    for (const auto& op : net->ops()) ops.push_back(op.get());
  }
  CaptureBindings Bindings() const { return CaptureBindings::Of(ops); }
  const void* Data(const std::string& blob) const { return ws->GetTensor(blob).raw_data(); }

  // One run as `policy` decides, op by op in place of the graph.
  CapturePolicy::Action Step(CapturePolicy& policy, bool uncaptured = false) {
    CapturePolicy::Decision d = policy.BeforeRun(Bindings(), uncaptured);
    if (d.action == CapturePolicy::Action::kReplay) {
      CpuContext ctx;
      CopyRefedInputs(policy.graph(), d.check, ctx);
    }
    net->Run();
    policy.AfterRun(d, true, Bindings());
    return d.action;
  }
};

using Action = CapturePolicy::Action;

// The warm-up run and the captured one.
void WarmUpAndCapture(CpuNet& n, CapturePolicy& policy) {
  REQUIRE(n.Step(policy) == Action::kStreams);
  REQUIRE(n.Step(policy) == Action::kCapture);
  REQUIRE(policy.has_graph());
}

size_t EntryOf(const CaptureBindings& b, const std::string& blob) {
  for (size_t i = 0; i < b.entries().size(); ++i)
    if (b.entries()[i].blob != nullptr && b.entries()[i].blob->name() == blob) return i;
  FAIL("no entry for blob ", blob);
  return 0;
}

TEST_CASE("CaptureBindings: every blob once, what writes it, views of the net's own memory are not shared") {
  CpuNet n(Kind::kView);
  n.net->Run();
  CaptureBindings b = n.Bindings();
  REQUIRE(b.entries().size() == 5);  // x, w, b, y, flat
  const auto& y = b.entries()[EntryOf(b, "y")];
  CHECK(y.written);
  CHECK(y.data == n.Data("y"));
  CHECK(y.dims == Dims{2, 3});
  CHECK_FALSE(b.entries()[EntryOf(b, "x")].written);
  // Flatten's output is a view of y: both are the net's, neither is shared.
  CHECK(b.entries()[EntryOf(b, "flat")].data == y.data);
  CHECK_FALSE(y.shared);
  CHECK_FALSE(b.entries()[EntryOf(b, "flat")].shared);
  {
    Tensor fetched = n.ws->GetTensor("y");  // a caller holds y's memory now
    CHECK(n.Bindings().entries()[EntryOf(b, "y")].shared);
  }
  CHECK_FALSE(n.Bindings().entries()[EntryOf(b, "y")].shared);
}

TEST_CASE("CapturePolicy: warm up, capture, replay; a blob fed again is copied into the graph's buffer") {
  CpuNet n(Kind::kInference);
  CapturePolicy policy;
  CHECK(n.Step(policy) == Action::kStreams);  // warm-up: outputs get their sizes
  CHECK(policy.reason().find("warms up") != std::string::npos);
  CHECK(n.Step(policy) == Action::kCapture);
  REQUIRE(policy.has_graph());
  CHECK(policy.stats().captures == 1);
  const void* x_buffer = n.Data("x");
  CHECK(n.Step(policy) == Action::kReplay);
  CHECK(policy.reason().empty());

  // A new batch of the same shape: copied into the buffer the graph reads.
  Tensor next = Floats({2, 4}, 3.0f);
  n.ws->Feed("x", next);
  CHECK(n.Data("x") == next.raw_data());
  CapturePolicy::Decision d = policy.BeforeRun(n.Bindings());
  REQUIRE(d.action == Action::kReplay);
  REQUIRE(d.check.result == BindingCheck::Result::kRefed);
  REQUIRE(d.check.refed.size() == 1);
  CpuContext ctx;
  CopyRefedInputs(policy.graph(), d.check, ctx);
  CHECK(n.Data("x") == x_buffer);
  Tensor x = n.ws->GetTensor("x");
  for (int64_t i = 0; i < 8; ++i) CHECK(x.data<float>()[i] == next.data<float>()[i]);
  n.net->Run();
  policy.AfterRun(d, true, n.Bindings());
  // What the replay computed is what a plain run on the new batch computes.
  // (A copy of the values: a fetch that kept y's memory would make the next
  // run go on the streams, as a test case below shows.)
  std::vector<float> got;
  {
    Tensor replayed = n.ws->GetTensor("y");
    got.assign(replayed.data<float>(), replayed.data<float>() + 6);
  }
  CpuNet fresh(Kind::kInference);
  fresh.ws->Feed("x", next);
  fresh.net->Run();
  Tensor want = fresh.ws->GetTensor("y");
  for (int i = 0; i < 6; ++i) CHECK(got[static_cast<size_t>(i)] == want.data<float>()[i]);
  CHECK(n.Step(policy) == Action::kReplay);
  CHECK(policy.stats().replays == 3);
  CHECK(policy.stats().invalidations == 0);
}

TEST_CASE("CapturePolicy: what makes a graph stale") {
  SUBCASE("a blob fed with another shape") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy;
    WarmUpAndCapture(n, policy);
    n.ws->Feed("x", Floats({5, 4}, 0.0f));
    CHECK(n.Step(policy) == Action::kStreams);  // the ops resize y on the streams
    CHECK_FALSE(policy.has_graph());
    CHECK(policy.reason().find("blob 'x' is now float32[5, 4]") != std::string::npos);
    CHECK(policy.stats().invalidations == 1);
    CHECK(n.Step(policy) == Action::kCapture);  // captured again at the new shape
    CHECK(n.Step(policy) == Action::kReplay);
  }
  SUBCASE("a blob the net writes, replaced (a checkpoint load)") {
    CpuNet n(Kind::kTraining);
    CapturePolicy policy;
    n.Step(policy);
    CHECK(n.Step(policy) == Action::kCapture);
    CHECK(n.Step(policy) == Action::kReplay);
    n.ws->Feed("w", Floats({3, 4}, 1.0f));
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(policy.reason().find("blob 'w' holds other memory") != std::string::npos);
  }
  SUBCASE("an output reallocated (device memory moved)") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy;
    WarmUpAndCapture(n, policy);
    Blob* y = n.ws->GetBlob("y");
    y->Publish(std::make_shared<Tensor>(Dims{2, 3}, DType::kFloat32));
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(policy.reason().find("blob 'y' holds other memory") != std::string::npos);
  }
  SUBCASE("too many invalidations: the streams for good") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy;
    for (int i = 0; i < CapturePolicy::kMaxInvalidations; ++i) {
      n.Step(policy);
      CHECK(n.Step(policy) == Action::kCapture);
      n.ws->Feed("x", Floats({static_cast<int64_t>(i % 2 == 0 ? 3 : 2), 4}, 0.0f));
    }
    n.Step(policy);
    CHECK(policy.given_up());
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(policy.reason().find("changed 8 times") != std::string::npos);
  }
}

TEST_CASE("CapturePolicy: runs that go on the streams without dropping the graph") {
  SUBCASE("a written blob shared with a caller's tensor") {
    CpuNet n(Kind::kTraining);
    CapturePolicy policy;
    WarmUpAndCapture(n, policy);
    Tensor held = n.ws->GetTensor("w");  // a fetch that keeps w's memory
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(policy.reason().find("blob 'w' is shared") != std::string::npos);
    // The op copied w before writing it (copy-on-write): the fetch kept its values.
    CHECK(held.raw_data() != n.Data("w"));
  }
  SUBCASE("a blob fed again while a caller still holds the graph's buffer for it") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy;
    WarmUpAndCapture(n, policy);
    Tensor held = n.ws->GetTensor("x");  // the batch the graph read, kept (a fetch still copying it)
    const std::vector<float> was(held.data<float>(), held.data<float>() + 8);
    n.ws->Feed("x", Floats({2, 4}, 5.0f));
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(policy.reason().find("still held by a tensor outside the net") != std::string::npos);
    CHECK(policy.has_graph());
    for (size_t i = 0; i < was.size(); ++i) CHECK(held.data<float>()[i] == was[i]);
    held = Tensor();
    n.ws->Feed("x", Floats({2, 4}, 6.0f));
    CHECK(n.Step(policy) == Action::kReplay);  // nobody else holds it now
  }
  SUBCASE("profiling op by op") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy;
    WarmUpAndCapture(n, policy);
    CHECK(n.Step(policy, /*uncaptured=*/true) == Action::kStreams);
    CHECK(policy.has_graph());
    CHECK(n.Step(policy) == Action::kReplay);
  }
  SUBCASE("memory borrowed from the caller is never captured") {
    CpuNet n(Kind::kInference);
    std::vector<float> mine(8, 1.0f);
    n.ws->Feed("x", Tensor::FromStorage({2, 4}, DType::kFloat32,
                                        Storage::Borrow(DeviceOption{}, mine.data(), mine.size() * sizeof(float))));
    CapturePolicy policy;
    n.Step(policy);
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(policy.reason().find("borrowed") != std::string::npos);
    n.ws->Feed("x", Floats({2, 4}, 0.0f));
    CHECK(n.Step(policy) == Action::kCapture);
  }
}

TEST_CASE("CapturePolicy: failed captures and replays") {
  SUBCASE("a capture that allocated") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy;
    for (int attempt = 1; attempt <= CapturePolicy::kMaxCaptureFailures; ++attempt) {
      n.Step(policy);
      CapturePolicy::Decision d = policy.BeforeRun(n.Bindings());
      REQUIRE(d.action == Action::kCapture);
      n.net->Run();
      n.ws->GetBlob("y")->Publish(std::make_shared<Tensor>(Dims{2, 3}, DType::kFloat32));
      policy.AfterRun(d, true, n.Bindings());
      CHECK_FALSE(policy.has_graph());
      CHECK(policy.stats().capture_failures == static_cast<uint64_t>(attempt));
    }
    CHECK(policy.given_up());
    CHECK(policy.reason().find("allocated while it was recorded") != std::string::npos);
    CHECK(n.Step(policy) == Action::kStreams);
  }
  SUBCASE("a capture that failed") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy;
    n.Step(policy);
    CapturePolicy::Decision d = policy.BeforeRun(n.Bindings());
    REQUIRE(d.action == Action::kCapture);
    policy.AfterRun(d, false, n.Bindings(), "operation not permitted when stream is capturing");
    CHECK(policy.reason().find("operation not permitted") != std::string::npos);
    CHECK_FALSE(policy.given_up());
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(n.Step(policy) == Action::kCapture);
  }
  SUBCASE("a replay that failed drops the graph") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy;
    WarmUpAndCapture(n, policy);
    CapturePolicy::Decision d = policy.BeforeRun(n.Bindings());
    REQUIRE(d.action == Action::kReplay);
    policy.AfterRun(d, false, n.Bindings(), "an illegal memory access was encountered");
    CHECK_FALSE(policy.has_graph());
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(n.Step(policy) == Action::kCapture);
  }
  SUBCASE("capture turned off") {
    CpuNet n(Kind::kInference);
    CapturePolicy policy("capture is turned off (NetOptions::cuda_graphs)");
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(n.Step(policy) == Action::kStreams);
    CHECK(policy.reason() == "capture is turned off (NetOptions::cuda_graphs)");
  }
}

TEST_CASE("CapturePolicy: a view of an output moves that output every run, so the net stays on the streams") {
  // Flatten's output keeps y's memory from the last run, so FC cannot write
  // y in place (someone else sees it) and allocates anew: no two runs bind
  // y to the same memory, and both captures fail.
  CpuNet n(Kind::kView);
  CapturePolicy policy;
  for (int run = 0; run < 6; ++run) n.Step(policy);
  CHECK_FALSE(policy.has_graph());
  CHECK(policy.stats().capture_failures == static_cast<uint64_t>(CapturePolicy::kMaxCaptureFailures));
  CHECK(policy.given_up());
  CHECK(policy.reason().find("blob 'y' holds other memory") != std::string::npos);
}

}  // namespace
