// Memory planning (graph/memory_plan.h, exec/net_memory.h): which blobs are
// temporaries, which may share a block in every order the executor may pick,
// the verifier that refuses a plan where two live blobs share one, and
// training that is bit for bit the same with the plan as without it (the
// sample's MLP and CNN, both executors, CPU replicas with copies and with a
// shared model) while the step's peak memory drops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/workspace.h"
#include "exec/net.h"
#include "expect_error.h"
#include "ops/gradient_registry.h"
#include "graph/memory_plan.h"
#include "model/model_format.h"
#include "model/training.h"
#include "parallel/parallelize.h"
#include "sample_batches.h"

using namespace dp;
using dp::testing::ExpectError;

namespace {

std::vector<DeviceOption> Cpu0(const NetDef& net) { return std::vector<DeviceOption>(net.ops.size()); }

MemoryPlan Plan(const NetDef& net, MemoryMode mode, const std::set<std::string>& keep = {}) {
  const TaskGraph g = BuildTaskGraph(net, Cpu0(net));
  MemoryPlan plan = PlanMemory(net, g, Cpu0(net), mode, keep);
  VerifyMemoryPlan(net, g, Cpu0(net), plan);
  return plan;
}

const MemoryPlan::Temporary* Find(const MemoryPlan& plan, const std::string& blob) {
  for (const auto& t : plan.temporaries)
    if (t.blob == blob) return &t;
  return nullptr;
}

std::vector<std::string> Names(const MemoryPlan& plan) {
  std::vector<std::string> names;
  for (const auto& t : plan.temporaries) names.push_back(t.blob);
  std::sort(names.begin(), names.end());
  return names;
}

// x -> a -> b -> c -> y, each read once by the next: a chain.
NetDef Chain() {
  NetDef n;
  n.name = "chain";
  n.ops = {MakeOperatorDef("Relu", {"x"}, {"a"}), MakeOperatorDef("Relu", {"a"}, {"b"}),
           MakeOperatorDef("Relu", {"b"}, {"c"}), MakeOperatorDef("Relu", {"c"}, {"y"})};
  n.external_inputs = {"x"};
  n.external_outputs = {"y"};
  return n;
}

}  // namespace

TEST_CASE("memory plan: temporaries are what the run makes and consumes itself") {
  NetDef n;
  n.name = "step";
  n.ops = {
      MakeOperatorDef("FC", {"x", "w", "b"}, {"h"}),                 // 0: h temporary
      MakeOperatorDef("Relu", {"h"}, {"h"}),                         // 1: in place
      MakeOperatorDef("Softmax", {"h"}, {"p"}),                      // 2: p read by 3 and 4
      MakeOperatorDef("Accuracy", {"p", "label"}, {"acc"}),          // 3: acc never read: an output
      MakeOperatorDef("Scale", {"p"}, {"dp"}),                       // 4
      MakeOperatorDef("MomentumSGD", {"dp", "m", "lr"}, {"dp2", "m"}),  // 5: m read first: state
      MakeOperatorDef("Sum", {"dp2", "counter"}, {"counter"}),       // 6: counter read first
      MakeOperatorDef("Scale", {"dp2"}, {"loss"}),                   // 7: loss an external output
  };
  n.external_inputs = {"x", "w", "b", "label", "lr"};
  n.external_outputs = {"loss"};
  CHECK(Names(Plan(n, MemoryMode::kKeep)).empty());
  CHECK(Names(Plan(n, MemoryMode::kDefault)).empty());
  const MemoryPlan share = Plan(n, MemoryMode::kShare);
  CHECK(Names(share) == std::vector<std::string>{"dp", "dp2", "h", "p"});
  const auto* h = Find(share, "h");
  REQUIRE(h != nullptr);
  CHECK(h->first_write == 0);
  CHECK(h->accessors == std::vector<int>{0, 1, 2});
  CHECK(share.op_temporaries[1] == std::vector<int>{static_cast<int>(h - share.temporaries.data())});
  // Kept by the caller (another net reads it): not a temporary.
  CHECK(Names(Plan(n, MemoryMode::kShare, {"p"})) == std::vector<std::string>{"dp", "dp2", "h"});
  // Free: the same temporaries, no slots.
  const MemoryPlan free = Plan(n, MemoryMode::kFree);
  CHECK(Names(free) == Names(share));
  CHECK(free.num_slots == 0);
  for (const auto& t : free.temporaries) CHECK(t.slot == -1);

  // Written in parts (a shared model's update): never a temporary.
  NetDef parts;
  parts.ops = {MakeOperatorDef("Relu", {"x"}, {"a"}, {MakeArg("parts", int64_t{2}), MakeArg("part", int64_t{0})}),
               MakeOperatorDef("Relu", {"x"}, {"a"}, {MakeArg("parts", int64_t{2}), MakeArg("part", int64_t{1})}),
               MakeOperatorDef("Relu", {"a"}, {"y"})};
  parts.external_inputs = {"x"};
  parts.external_outputs = {"y"};
  CHECK(Names(Plan(parts, MemoryMode::kShare)).empty());
}

TEST_CASE("memory plan: a chain shares two blocks; parallel branches never share") {
  const MemoryPlan chain = Plan(Chain(), MemoryMode::kShare);
  REQUIRE(Names(chain) == std::vector<std::string>{"a", "b", "c"});
  // a dies when op 1 has read it; c is written by op 2, after op 1: a's block.
  CHECK(chain.num_slots == 2);
  CHECK(Find(chain, "a")->slot == Find(chain, "c")->slot);
  CHECK(Find(chain, "a")->slot != Find(chain, "b")->slot);

  // x -> {l1 -> l2, r1 -> r2} -> y: the branches run in either order, or at
  // once, on the async executor; l1 and r1 may both be alive then.
  NetDef d;
  d.name = "diamond";
  d.ops = {MakeOperatorDef("Relu", {"x"}, {"l1"}), MakeOperatorDef("Relu", {"l1"}, {"l2"}),
           MakeOperatorDef("Relu", {"x"}, {"r1"}), MakeOperatorDef("Relu", {"r1"}, {"r2"}),
           MakeOperatorDef("Add", {"l2", "r2"}, {"s"}), MakeOperatorDef("Relu", {"s"}, {"y"})};
  d.external_inputs = {"x"};
  d.external_outputs = {"y"};
  const MemoryPlan dp = Plan(d, MemoryMode::kShare);
  REQUIRE(Names(dp) == std::vector<std::string>{"l1", "l2", "r1", "r2", "s"});
  for (const char* l : {"l1", "l2"})
    for (const char* r : {"r1", "r2"}) CHECK_MESSAGE(Find(dp, l)->slot != Find(dp, r)->slot, l, " and ", r);
  // s is written after both branches are done: it may take l1's block.
  CHECK(Find(dp, "s")->slot == Find(dp, "l1")->slot);

  // With sizes, best fit: d may take a's block or b's (both dead by op 3);
  // first fit takes a's, best fit the one that holds it.
  NetDef two;
  two.name = "two";
  two.ops = {MakeOperatorDef("Relu", {"x"}, {"a"}), MakeOperatorDef("Relu", {"x"}, {"b"}),
             MakeOperatorDef("Add", {"a", "b"}, {"c"}), MakeOperatorDef("Relu", {"c"}, {"d"}),
             MakeOperatorDef("Relu", {"d"}, {"y"})};
  two.external_inputs = {"x"};
  two.external_outputs = {"y"};
  const TaskGraph g = BuildTaskGraph(two, Cpu0(two));
  const MemoryPlan first = Plan(two, MemoryMode::kShare);
  CHECK(Find(first, "d")->slot == Find(first, "a")->slot);
  const std::unordered_map<std::string, size_t> sizes{{"a", 10}, {"b", 1000}, {"c", 5}, {"d", 900}};
  const MemoryPlan fit = PlanMemory(two, g, Cpu0(two), MemoryMode::kShare, {}, &sizes);
  VerifyMemoryPlan(two, g, Cpu0(two), fit);
  CHECK(Find(fit, "d")->slot == Find(fit, "b")->slot);
  CHECK(fit.num_slots == 3);
}

TEST_CASE("memory plan: of the orders it tries, the plan of least bytes wins") {
  // In list order each temporary lives from its first write to its last
  // read: b [1, 2], c [2, 3], a [3, 4], d [4, 6]. Largest first (b, c, d,
  // then a) puts d after b, and a, alive with c and d, needs a slot of its
  // own: 6 + 6 + 2 bytes. Placing first what is alive with the most (c)
  // puts d after c and a after b: 6 + 6.
  NetDef n;
  n.name = "orders";
  n.ops = {MakeOperatorDef("Relu", {"x"}, {"o0"}), MakeOperatorDef("Relu", {"x"}, {"b"}),
           MakeOperatorDef("Add", {"b", "x"}, {"c"}), MakeOperatorDef("Relu", {"c"}, {"a"}),
           MakeOperatorDef("Relu", {"a"}, {"d"}), MakeOperatorDef("Relu", {"x"}, {"o5"}),
           MakeOperatorDef("Relu", {"d"}, {"y"})};
  n.external_inputs = {"x"};
  n.external_outputs = {"o0", "o5", "y"};
  const TaskGraph list = ListOrderGraph(n.ops.size());
  const std::unordered_map<std::string, size_t> sizes{{"a", 2}, {"b", 6}, {"c", 6}, {"d", 6}};
  const MemoryPlan plan = PlanMemory(n, list, Cpu0(n), MemoryMode::kShare, {}, &sizes);
  VerifyMemoryPlan(n, list, Cpu0(n), plan);
  REQUIRE(Names(plan) == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK(plan.num_slots == 2);
  CHECK(Find(plan, "a")->slot == Find(plan, "b")->slot);
  CHECK(Find(plan, "c")->slot == Find(plan, "d")->slot);
}

TEST_CASE("memory plan: the verifier refuses two live blobs in one block") {
  NetDef d;
  d.name = "diamond";
  d.ops = {MakeOperatorDef("Relu", {"x"}, {"l"}), MakeOperatorDef("Relu", {"x"}, {"r"}),
           MakeOperatorDef("Add", {"l", "r"}, {"y"})};
  d.external_inputs = {"x"};
  d.external_outputs = {"y"};
  const TaskGraph g = BuildTaskGraph(d, Cpu0(d));
  MemoryPlan plan = PlanMemory(d, g, Cpu0(d), MemoryMode::kShare);
  VerifyMemoryPlan(d, g, Cpu0(d), plan);
  REQUIRE(plan.temporaries.size() == 2);
  CHECK(plan.temporaries[0].slot != plan.temporaries[1].slot);
  MemoryPlan bad = plan;
  bad.temporaries[1].slot = bad.temporaries[0].slot;
  ExpectError([&] { VerifyMemoryPlan(d, g, Cpu0(d), bad); }, Code::kInternal,
              {"blob 'l' and blob 'r' share slot", "may use blob 'l' after op 1 (Relu) writes blob 'r'"});
  // In a chain, a blob sharing with the one its writer reads is refused too
  // (the kernel reads one while it writes the other).
  NetDef c = Chain();
  const TaskGraph cg = BuildTaskGraph(c, Cpu0(c));
  MemoryPlan chain = PlanMemory(c, cg, Cpu0(c), MemoryMode::kShare);
  chain.temporaries[1].slot = chain.temporaries[0].slot;  // b with a: op 1 reads a, writes b
  ExpectError([&] { VerifyMemoryPlan(c, cg, Cpu0(c), chain); }, Code::kInternal, {"blob 'a' and blob 'b' share slot"});
  // Bookkeeping that disagrees with the net.
  MemoryPlan lost = plan;
  lost.op_temporaries[2].clear();
  ExpectError([&] { VerifyMemoryPlan(d, g, Cpu0(d), lost); }, Code::kInternal, {"would not count it down"});
  MemoryPlan kept = plan;
  kept.temporaries[0].blob = "x";
  ExpectError([&] { VerifyMemoryPlan(d, g, Cpu0(d), kept); }, Code::kInternal, {"'x' is not a temporary"});
}

TEST_CASE("memory plan at run time: temporaries are emptied, fetches say why, other nets' inputs stay") {
  auto ws = std::make_shared<Workspace>();
  Tensor x({64, 256}, DType::kFloat32);
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  ws->Feed("x", x);
  NetDef chain = Chain();
  chain.memory = MemoryMode::kShare;
  Net keep(std::make_shared<const NetDef>(Chain()), ws);
  keep.Run();
  const std::vector<float> want(ws->GetTensor("y").data<float>(), ws->GetTensor("y").data<float>() + x.numel());
  const uint64_t keep_peak = ws->budget()->peak({});

  auto ws2 = std::make_shared<Workspace>();
  ws2->Feed("x", x);
  Net share(std::make_shared<const NetDef>(chain), ws2);
  for (int run = 0; run < 3; ++run) {
    share.Run();
    const Tensor y = ws2->GetTensor("y");
    CHECK(std::vector<float>(y.data<float>(), y.data<float>() + y.numel()) == want);
    ExpectError([&] { ws2->GetTensor("b"); }, Code::kNotFound, {"'b' is empty", "memory plan"});
  }
  const NetMemoryStats stats = share.memory_stats();
  CHECK(stats.mode == MemoryMode::kShare);
  CHECK(stats.temporaries == 3);
  CHECK(stats.slots == 2);
  CHECK(stats.slot_bytes == 2 * x.nbytes());  // two blocks held between runs
  // Keep: y and three temporaries at the end; share: y and at most two at once.
  CHECK(keep_peak == 4 * x.nbytes());
  CHECK(ws2->budget()->peak({}) == 3 * x.nbytes());

  // A net created later reads b: the plan keeps b whole from the next run on.
  NetDef reader;
  reader.name = "reader";
  reader.ops = {MakeOperatorDef("Relu", {"b"}, {"z"})};
  reader.external_inputs = {"b"};
  Net read_b(std::make_shared<const NetDef>(reader), ws2);
  share.Run();
  CHECK(share.memory_stats().temporaries == 2);
  read_b.Run();
  CHECK(ws2->GetTensor("z").numel() == x.numel());

  // A profiled run's trace has the workspace's memory as a counter track.
  NetOptions profiled;
  profiled.profile = true;
  auto ws4 = std::make_shared<Workspace>();
  ws4->Feed("x", x);
  Net traced(std::make_shared<const NetDef>(chain), ws4, profiled);
  traced.Run();
  const std::string trace = traced.TraceJson();
  CHECK(trace.find("{\"name\":\"memory\",\"cat\":\"memory\",\"ph\":\"C\"") != std::string::npos);
  // After op 1 (b written, a parked): two blocks.
  CHECK(traced.timings()[1].bytes == 2 * x.nbytes());

  // Free: nothing parked between runs.
  auto ws3 = std::make_shared<Workspace>();
  ws3->Feed("x", x);
  NetOptions free_opts;
  free_opts.memory = MemoryMode::kFree;
  Net free(std::make_shared<const NetDef>(Chain()), ws3, free_opts);
  free.Run();
  free.Run();
  CHECK(free.memory_stats().mode == MemoryMode::kFree);
  CHECK(free.memory_stats().slot_bytes == 0);
  CHECK(ws3->budget()->used({}) == x.nbytes());  // y only (x is the caller's)
  const Tensor y3 = ws3->GetTensor("y");
  CHECK(std::vector<float>(y3.data<float>(), y3.data<float>() + y3.numel()) == want);
}

TEST_CASE("memory plan at run time: the plan is sized by what each blob needs, not the block it was lent") {
  // a [0, 1] and e [3, 5] are large; m [1, 2] and c [2, 4] are scalars. The
  // first run's plan (sizes unknown, first fit) lends c the block a left.
  // Sized by what c needs, e takes a's block and the scalars one each: the
  // slots hold one large block. Sized by the block c held, c would look as
  // large as a and e would need a block of its own.
  NetDef n;
  n.name = "lent";
  n.ops = {MakeOperatorDef("Relu", {"x"}, {"a"}), MakeOperatorDef("AveragedLoss", {"a"}, {"m"}),
           MakeOperatorDef("Scale", {"m"}, {"c"}), MakeOperatorDef("Relu", {"x"}, {"e"}),
           MakeOperatorDef("Relu", {"c"}, {"y1"}), MakeOperatorDef("Relu", {"e"}, {"y2"})};
  n.external_inputs = {"x"};
  n.external_outputs = {"y1", "y2"};
  n.memory = MemoryMode::kShare;
  auto ws = std::make_shared<Workspace>();
  Tensor x({64, 256}, DType::kFloat32);
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_data<float>()[i] = static_cast<float>(i % 5) - 2.0f;
  ws->Feed("x", x);
  Net net(std::make_shared<const NetDef>(n), ws);
  for (int run = 0; run < 3; ++run) net.Run();
  const NetMemoryStats stats = net.memory_stats();
  CHECK(stats.temporaries == 4);
  CHECK(stats.slot_bytes >= x.nbytes());
  CHECK(stats.slot_bytes < x.nbytes() + 1024);
  CHECK(ws->GetTensor("y1").numel() == 1);
}

namespace {

constexpr int kBatch = 32;

void FeedBatch(Workspace& ws, int step) { dp::testing::FeedSyntheticBatch(ws, kBatch, static_cast<uint32_t>(77 + step)); }

struct Trained {
  std::map<std::string, std::vector<float>> blobs;  // params, optimizer state, losses, metrics
  // The last step's peak on the host less the training state (params,
  // computed params, optimizer state of every replica): what activations,
  // gradients and scratch took at most.
  uint64_t step_bytes = 0;
};

std::vector<float> Floats(const Workspace& ws, const std::string& name) {
  const Tensor t = ws.GetTensor(name);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// Three steps; `replicas` 0: one device (BuildTraining), else Parallelize over
// that many CPU replicas.
Trained Train(const ModelDef& m, MemoryMode mode, ExecutorKind executor, int replicas, bool shared_model = false) {
  auto ws = std::make_shared<Workspace>();
  NetDef init, train;
  std::string scope;
  if (replicas == 0) {
    TrainingOptions o;
    o.memory = mode;
    TrainingNets nets = BuildTraining(m, o);
    init = nets.init;
    train = nets.train;
  } else {
    ParallelizeOptions o;
    for (int r = 0; r < replicas; ++r) o.device_ids.push_back(r);
    o.shared_model = shared_model;
    o.memory = mode;
    ParallelNets nets = Parallelize(m, o);
    init = nets.init;
    train = nets.train;
    scope = nets.scopes.at(0);
  }
  Net(std::make_shared<const NetDef>(init), ws).Run();
  NetOptions no;
  no.executor = executor;
  Net step(std::make_shared<const NetDef>(train), ws, no);
  Trained out;
  for (int s = 0; s < 3; ++s) {
    FeedBatch(*ws, s);
    step.Run();
    for (const auto& l : m.losses) out.blobs["step" + std::to_string(s) + "/" + l] = Floats(*ws, l);
  }
  uint64_t state = 0;
  for (const std::string& blob : ws->Blobs())
    for (const auto& name : TrainingStateBlobs(m))
      if (blob.size() >= name.size() && blob.compare(blob.size() - name.size(), name.size(), name) == 0 &&
          (blob.size() == name.size() || blob[blob.size() - name.size() - 1] == '/'))
        state += ws->GetTensor(blob).nbytes();
  out.step_bytes = ws->budget()->peak({}) - state;
  for (const auto& name : TrainingStateBlobs(m))
    if (name != kIterBlob) out.blobs[name] = Floats(*ws, scope + name);
  for (const auto& name : m.metrics) out.blobs[name] = Floats(*ws, name);
  return out;
}

}  // namespace

TEST_CASE("memory plan: the sample models train bit for bit alike with it, in less memory") {
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"}) {
    CAPTURE(file);
    const bool cnn = file == "fashion_cnn.json";
    const ModelDef m = ModelFromFile(dp::testing::SampleNetsDir() + file);
    for (ExecutorKind executor : {ExecutorKind::kSimple, ExecutorKind::kAsync}) {
      CAPTURE(static_cast<int>(executor));
      const Trained keep = Train(m, MemoryMode::kKeep, executor, 0);
      for (MemoryMode mode : {MemoryMode::kShare, MemoryMode::kFree}) {
        CAPTURE(std::string(MemoryModeName(mode)));
        const Trained planned = Train(m, mode, executor, 0);
        CHECK(planned.blobs == keep.blobs);
        MESSAGE(file, " ", std::string(MemoryModeName(mode)), std::string(executor == ExecutorKind::kSimple ? " simple" : " async"),
                ": step memory ", planned.step_bytes, " bytes, keep ", keep.step_bytes);
        // Activations, gradients and scratch. In list order (the simple
        // executor, a one-device net's default) the CNN's drop by half, the
        // MLP's (mostly weight gradients) by a third. On the async executor
        // an update may run as late as the end of backward, so a weight
        // gradient may be alive with every later one: less to share (the
        // CNN's share plan placed largest first alone: 0.60 of keep; the
        // best of the planner's three orders: 0.50).
        if (executor == ExecutorKind::kSimple)
          CHECK(planned.step_bytes * 10 <= keep.step_bytes * (cnn ? 6 : 7));
        else
          CHECK(planned.step_bytes * 100 <= keep.step_bytes * (cnn ? 55 : 100));
      }
    }
    for (bool shared : {false, true}) {
      CAPTURE(shared);
      const Trained keep = Train(m, MemoryMode::kKeep, ExecutorKind::kDefault, 2, shared);
      const Trained share = Train(m, MemoryMode::kShare, ExecutorKind::kDefault, 2, shared);
      const Trained free = Train(m, MemoryMode::kFree, ExecutorKind::kDefault, 2, shared);
      CHECK(share.blobs == keep.blobs);
      CHECK(free.blobs == keep.blobs);
      CHECK(share.step_bytes < keep.step_bytes);
      CHECK(free.step_bytes < keep.step_bytes);
      // The CNN's: 0.54 of keep (0.59 with the largest placed first alone).
      if (cnn) CHECK(share.step_bytes * 100 <= keep.step_bytes * 57);
      MESSAGE(file, " cpu:2 shared ", shared, ": step memory share ", share.step_bytes, " free ", free.step_bytes,
              " keep ", keep.step_bytes);
    }
  }
}
