// The async DAG executor and its parts: the dependency graph and its chains,
// the worker pool, results against the simple executor on seeded random DAGs
// (all conflicting accesses ordered, WAR and WAW included), error injection,
// cancellation, a 1,000,000-op chain, concurrent and overlapping runs,
// profiling and traces, multi-device CPU nets.
//
// No test synchronises by sleeping: ops that must be "in progress" signal
// that they started (TestBlock) and every wait is bounded; a wait that runs
// out aborts the process with a message instead of hanging CI.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/compute_team.h"
#include "core/cpu_budget.h"
#include "core/cpu_topology.h"
#include "core/parallel_for.h"
#include "exec/net.h"
#include "graph/task_graph.h"
#include "exec/worker_pool.h"
#include "ops/gradient_registry.h"  // MakeArg
#include "ops/operator.h"

using namespace dp;
using namespace std::chrono_literals;

#if defined(__SANITIZE_THREAD__)
#define DP_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DP_TEST_TSAN 1
#endif
#endif
#ifndef DP_TEST_TSAN
#define DP_TEST_TSAN 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DP_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DP_TEST_ASAN 1
#endif
#endif
#ifndef DP_TEST_ASAN
#define DP_TEST_ASAN 0
#endif

namespace {

// Generous: sanitizer builds on a loaded 2-core CI machine are slow.
constexpr auto kLongWait = std::chrono::seconds(120);

// ---- test-only operators ----------------------------------------------------

// TestFailIf: Y = 0.5 * X (may run in place), but fails with kDataLoss when
// its own index is g_fail_op. The test flips the flag to fail and to recover.
std::atomic<int> g_fail_op{-1};

class TestFailIfOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    if (g_fail_op.load() == static_cast<int>(index())) DP_THROW(Code::kDataLoss, "injected failure");
    const Tensor& x = Input(0);
    const float* xp = x.data<float>();
    const int64_t n = x.numel();
    float* y = Output(0, x.dims(), x.dtype())->mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) y[i] = xp[i] * 0.5f;
  }
};

DP_OPERATOR_SCHEMA(TestFailIf).NumInputs(1).NumOutputs(1).AllowInplace({{0, 0}}).Doc("test only");
DP_REGISTER_CPU_OPERATOR(TestFailIf, TestFailIfOp);

// A gate that TestBlock ops stop at while it is armed: each signals that it
// started and waits (bounded) for Release. Lets a test know that a run is in
// progress, and hold it there, without sleeping.
class Gate {
 public:
  void Arm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    released_ = false;
    started_ = 0;
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
    released_ = true;
    cv_.notify_all();
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool WaitStarted(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return started_ >= n; });
  }
  int started() {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }
  // The op side.
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!armed_) return;
    ++started_;
    cv_.notify_all();
    if (!cv_.wait_for(lock, kLongWait, [&] { return released_; }))
      DP_THROW(Code::kTimeout, "TestBlock: the gate was never released");
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool released_ = true;
  int started_ = 0;
};
Gate g_gate;

class TestBlockOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override { g_gate.Pass(); }
};

DP_OPERATOR_SCHEMA(TestBlock)
    .NumInputs(0, std::numeric_limits<int>::max())
    .NumOutputs(0, std::numeric_limits<int>::max())
    .Doc("test only: stops at the test's gate while it is armed");
DP_REGISTER_CPU_OPERATOR(TestBlock, TestBlockOp);

// TestCount: counts its runs (ordering only, like NoOp).
std::atomic<int64_t> g_count{0};

class TestCountOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override { g_count.fetch_add(1, std::memory_order_relaxed); }
};

DP_OPERATOR_SCHEMA(TestCount)
    .NumInputs(0, std::numeric_limits<int>::max())
    .NumOutputs(0, std::numeric_limits<int>::max())
    .AllowInplace({{0, 0}})
    .Doc("test only: counts its runs");
DP_REGISTER_CPU_OPERATOR(TestCount, TestCountOp);

// TestWhere: records where it ran: its device, thread, the thread's CPUs,
// IntraOpThreads() and the CPUs of the threads its chunks ran on.
struct Where {
  int device;
  std::thread::id thread;
  std::vector<int> cpus;
  int intra;
  std::vector<std::vector<int>> chunk_cpus;
};
std::mutex g_where_mu;
std::vector<Where> g_where;

class TestWhereOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    Where w{device().id, std::this_thread::get_id(), CurrentThreadAffinity(), IntraOpThreads(), {}};
    const int chunks = IntraOpThreads();
    w.chunk_cpus.resize(static_cast<size_t>(chunks));
    ParallelForChunks(chunks, chunks, 1, [&](int c, int64_t, int64_t) {
      w.chunk_cpus[static_cast<size_t>(c)] = CurrentThreadAffinity();
    });
    std::lock_guard<std::mutex> lock(g_where_mu);
    g_where.push_back(std::move(w));
  }
};

DP_OPERATOR_SCHEMA(TestWhere)
    .NumInputs(0, std::numeric_limits<int>::max())
    .NumOutputs(0, std::numeric_limits<int>::max())
    .Doc("test only: records the thread, CPUs and intra-op threads it ran with");
DP_REGISTER_CPU_OPERATOR(TestWhere, TestWhereOp);

// ---- helpers ------------------------------------------------------------------

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "FATAL: test_async: timed out waiting for %s; aborting instead of hanging\n", what);
  std::fflush(stderr);
  std::abort();
}

template <typename F>
void WaitReady(F& future, const char* what, std::chrono::seconds timeout = kLongWait) {
  if (future.wait_for(timeout) != std::future_status::ready) Die(what);
}

OperatorDef Op(std::string type, std::vector<std::string> in, std::vector<std::string> out,
               std::vector<std::string> control = {}, std::optional<DeviceOption> device = std::nullopt) {
  OperatorDef op;
  op.type = std::move(type);
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  op.control_inputs = std::move(control);
  op.device = device;
  return op;
}

OperatorDef ScaleOp(const std::string& in, const std::string& out, double scale,
                    std::optional<DeviceOption> device = std::nullopt) {
  OperatorDef op = Op("Scale", {in}, {out}, {}, device);
  op.args.push_back(Argument{"scale", scale});
  return op;
}

std::vector<DeviceOption> Devices(const NetDef& net) {
  std::vector<DeviceOption> d;
  for (const auto& op : net.ops) d.push_back(net.OpDevice(op));
  return d;
}

constexpr DeviceOption kCpu0{DeviceType::kCPU, 0};
constexpr DeviceOption kCpu1{DeviceType::kCPU, 1};

Tensor RandomFloats(std::mt19937& rng, int64_t n) {
  Tensor t({n}, DType::kFloat32);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = u(rng);
  return t;
}

// Every tensor blob of a workspace: shape, dtype and bytes.
struct BlobValue {
  Dims dims;
  DType dtype;
  std::vector<unsigned char> bytes;
  bool operator==(const BlobValue&) const = default;
};
using Snapshot = std::map<std::string, BlobValue>;

Snapshot Snap(const Workspace& ws) {
  Snapshot s;
  for (const auto& name : ws.Blobs()) {
    const Blob* b = ws.GetBlob(name);
    if (b == nullptr || b->empty() || !b->IsType<Tensor>()) continue;
    const Tensor& t = b->Get<Tensor>();
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    s[name] = BlobValue{t.dims(), t.dtype(), std::vector<unsigned char>(p, p + t.nbytes())};
  }
  return s;
}

// Compares bit for bit; reports the first difference.
void CheckSame(const Snapshot& want, const Snapshot& got, const std::string& what) {
  CHECK_MESSAGE(want.size() == got.size(), what, ": ", want.size(), " blobs vs ", got.size());
  int bad = 0;
  std::string first;
  for (const auto& [name, v] : want) {
    auto it = got.find(name);
    if (it == got.end() || !(it->second == v)) {
      if (bad++ == 0) first = name;
    }
  }
  CHECK_MESSAGE(bad == 0, what, ": ", bad, " blobs differ, first '", first, "'");
}

// Waits (bounded) for the run that RunAsync started; Wait's error propagates.
void WaitWithBound(Net& net) {
  auto deadline = std::chrono::steady_clock::now() + kLongWait;
  while (!net.Wait(std::chrono::milliseconds(200)))
    if (std::chrono::steady_clock::now() > deadline) Die("Net::Wait");
}

void RunAsyncAndWait(Net& net) {
  net.RunAsync();
  WaitWithBound(net);
}

// ---- seeded random DAGs -------------------------------------------------------

// Ops over float blobs of one shape: Scale, Add, Sum and TestFailIf, reading
// earlier-written blobs (or the fed inputs), writing a new blob, in place, or
// over an existing blob (WAW, WAR). Some ops carry control inputs. Each op is
// deterministic, so any executor that orders all conflicting accesses gives
// bit-identical blobs.
struct RandomNet {
  std::shared_ptr<NetDef> def;
  std::map<std::string, Tensor> inputs;
  int fail_op = -1;  // index of the TestFailIf op, if any
};

RandomNet MakeRandomNet(uint32_t seed, int num_ops, int num_devices = 1, bool with_fail_op = false,
                        int64_t numel = 128) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomNet r;
  r.def = std::make_shared<NetDef>();
  r.def->name = StrCat("random", seed);
  std::vector<std::string> avail;
  for (int i = 0; i < 4; ++i) {
    std::string name = StrCat("in", i);
    r.def->external_inputs.push_back(name);
    r.inputs[name] = RandomFloats(rng, numel);
    avail.push_back(name);
  }
  if (with_fail_op) r.fail_op = pick(0, num_ops - 1);
  int fresh = 0;
  // Reads favour recent blobs, for long dependency paths.
  auto read = [&] {
    if (pick(0, 1) == 0) return avail[static_cast<size_t>(pick(std::max(0, static_cast<int>(avail.size()) - 6),
                                                                  static_cast<int>(avail.size()) - 1))];
    return avail[static_cast<size_t>(pick(0, static_cast<int>(avail.size()) - 1))];
  };
  for (int i = 0; i < num_ops; ++i) {
    OperatorDef op;
    int kind = i == r.fail_op ? 3 : pick(0, 9) < 4 ? 0 : pick(0, 1) == 0 ? 1 : 2;
    int nin = kind == 0 || kind == 3 ? 1 : kind == 1 ? 2 : pick(1, 3);
    op.type = kind == 0 ? "Scale" : kind == 1 ? "Add" : kind == 2 ? "Sum" : "TestFailIf";
    for (int k = 0; k < nin; ++k) op.inputs.push_back(read());
    // Output: new (40%), in place of input 0 (35%), over another blob (25%).
    int how = pick(0, 19);
    std::string out;
    if (how < 7) {
      out = op.inputs[0];
    } else if (how < 12) {
      out = avail[static_cast<size_t>(pick(0, static_cast<int>(avail.size()) - 1))];
    }
    if (!out.empty()) {
      // Respect the schemas: Add may alias either input; Scale, Sum and
      // TestFailIf only input 0.
      for (size_t k = 0; k < op.inputs.size(); ++k)
        if (op.inputs[k] == out && !(k == 0 || (kind == 1 && k == 1))) out.clear();
    }
    if (out.empty()) out = StrCat("b", fresh++);
    op.outputs = {out};
    if (kind == 0) {
      double s = std::uniform_real_distribution<double>(0.3, 0.8)(rng);
      op.args.push_back(Argument{"scale", pick(0, 1) ? s : -s});
    }
    if (pick(0, 9) == 0) op.control_inputs.push_back(read());
    if (num_devices > 1) op.device = DeviceOption{DeviceType::kCPU, pick(0, num_devices - 1)};
    op.name = StrCat("o", i);
    if (std::find(avail.begin(), avail.end(), out) == avail.end()) avail.push_back(out);
    r.def->ops.push_back(std::move(op));
  }
  return r;
}

void Feed(Workspace& ws, const RandomNet& r) {
  for (const auto& [name, t] : r.inputs) ws.Feed(name, t);
}

// ---- graph checks -------------------------------------------------------------

bool Has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Structural invariants, and: every pair of ops with conflicting accesses
// (RAW, WAW, WAR, control) is ordered by a path of the graph.
void CheckGraph(const NetDef& net, const TaskGraph& g, const std::vector<DeviceOption>& devices) {
  const int n = static_cast<int>(net.ops.size());
  REQUIRE(g.parents.size() == static_cast<size_t>(n));
  REQUIRE(g.children.size() == static_cast<size_t>(n));
  int bad = 0;
  size_t edges = 0;
  for (int i = 0; i < n; ++i) {
    const auto& ps = g.parents[static_cast<size_t>(i)];
    if (!std::is_sorted(ps.begin(), ps.end()) || std::adjacent_find(ps.begin(), ps.end()) != ps.end()) ++bad;
    for (int p : ps) {
      if (p >= i || p < 0) ++bad;  // list order is a topological order
      if (!Has(g.children[static_cast<size_t>(p)], i)) ++bad;
    }
    const auto& cs = g.children[static_cast<size_t>(i)];
    if (!std::is_sorted(cs.begin(), cs.end()) || std::adjacent_find(cs.begin(), cs.end()) != cs.end()) ++bad;
    for (int c : cs)
      if (!Has(g.parents[static_cast<size_t>(c)], i)) ++bad;
    edges += cs.size();
  }
  CHECK(bad == 0);
  CHECK(g.num_edges() == edges);

  // Reachability by bitsets (ancestors of each op).
  const size_t words = (static_cast<size_t>(n) + 63) / 64;
  std::vector<std::vector<uint64_t>> anc(static_cast<size_t>(n), std::vector<uint64_t>(words, 0));
  for (int i = 0; i < n; ++i)
    for (int p : g.parents[static_cast<size_t>(i)]) {
      auto& a = anc[static_cast<size_t>(i)];
      const auto& b = anc[static_cast<size_t>(p)];
      for (size_t w = 0; w < words; ++w) a[w] |= b[w];
      a[static_cast<size_t>(p) / 64] |= uint64_t{1} << (p % 64);
    }
  auto before = [&](int i, int j) { return (anc[static_cast<size_t>(j)][static_cast<size_t>(i) / 64] >> (i % 64)) & 1; };
  int unordered = 0;
  std::string example;
  for (int j = 0; j < n; ++j) {
    const OperatorDef& oj = net.ops[static_cast<size_t>(j)];
    for (int i = 0; i < j; ++i) {
      const OperatorDef& oi = net.ops[static_cast<size_t>(i)];
      bool conflict = false;
      for (const auto& w : oi.outputs) {
        if (std::find(oj.inputs.begin(), oj.inputs.end(), w) != oj.inputs.end()) conflict = true;          // RAW
        if (std::find(oj.outputs.begin(), oj.outputs.end(), w) != oj.outputs.end()) conflict = true;        // WAW
        if (std::find(oj.control_inputs.begin(), oj.control_inputs.end(), w) != oj.control_inputs.end())
          conflict = true;                                                                                  // control
      }
      for (const auto& rd : oi.inputs)
        if (std::find(oj.outputs.begin(), oj.outputs.end(), rd) != oj.outputs.end()) conflict = true;       // WAR
      // Disjoint parts of one write (graph/task_graph.h) do not conflict.
      const PartialWrite pi = PartialWriteOf(oi), pj = PartialWriteOf(oj);
      if (pi.parts > 1 && pi.parts == pj.parts && pi.part != pj.part) conflict = false;
      if (conflict && !before(i, j)) {
        if (unordered++ == 0) example = StrCat("ops ", i, " and ", j);
      }
    }
  }
  CHECK_MESSAGE(unordered == 0, unordered, " conflicting pairs unordered, e.g. ", example);

  // Chains: a partition of the ops into paths on one device, each maximal.
  REQUIRE(g.chain_of.size() == static_cast<size_t>(n));
  REQUIRE(g.chain_parents.size() == g.chains.size());
  REQUIRE(g.chain_children.size() == g.chains.size());
  REQUIRE(g.chain_device.size() == g.chains.size());
  std::vector<int> seen(static_cast<size_t>(n), 0);
  int chain_bad = 0;
  for (size_t c = 0; c < g.chains.size(); ++c) {
    const auto& ops = g.chains[c];
    if (ops.empty()) {
      ++chain_bad;
      continue;
    }
    std::set<int> cp, cc;
    for (size_t k = 0; k < ops.size(); ++k) {
      int i = ops[k];
      ++seen[static_cast<size_t>(i)];
      if (g.chain_of[static_cast<size_t>(i)] != static_cast<int>(c)) ++chain_bad;
      if (!(devices[static_cast<size_t>(i)] == g.chain_device[c])) ++chain_bad;
      if (k > 0) {
        int p = ops[k - 1];
        if (g.parents[static_cast<size_t>(i)] != std::vector<int>{p}) ++chain_bad;
        if (g.children[static_cast<size_t>(p)] != std::vector<int>{i}) ++chain_bad;
      }
      for (int p : g.parents[static_cast<size_t>(i)])
        if (g.chain_of[static_cast<size_t>(p)] != static_cast<int>(c)) cp.insert(g.chain_of[static_cast<size_t>(p)]);
      for (int ch : g.children[static_cast<size_t>(i)])
        if (g.chain_of[static_cast<size_t>(ch)] != static_cast<int>(c)) cc.insert(g.chain_of[static_cast<size_t>(ch)]);
    }
    if (std::vector<int>(cp.begin(), cp.end()) != g.chain_parents[c]) ++chain_bad;
    if (std::vector<int>(cc.begin(), cc.end()) != g.chain_children[c]) ++chain_bad;
    // Maximal: the head could not have joined its parent's chain.
    int h = ops.front();
    const auto& hp = g.parents[static_cast<size_t>(h)];
    if (hp.size() == 1 && g.children[static_cast<size_t>(hp[0])].size() == 1 &&
        devices[static_cast<size_t>(hp[0])] == devices[static_cast<size_t>(h)])
      ++chain_bad;
  }
  CHECK(chain_bad == 0);
  CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
}

// ---- a minimal strict JSON syntax checker (for traces) ------------------------

class JsonChecker {
 public:
  explicit JsonChecker(const std::string& s) : s_(s) {}
  bool Valid() {
    bool ok = Value();
    return ok && i_ == s_.size();
  }

 private:
  char Peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool Lit(const char* w) {
    size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool Digits() {
    size_t st = i_;
    while (std::isdigit(static_cast<unsigned char>(Peek()))) ++i_;
    return i_ > st;
  }
  bool Number() {
    if (Peek() == '-') ++i_;
    if (Peek() == '0') {
      ++i_;
    } else if (!Digits()) {
      return false;
    }
    if (Peek() == '.') {
      ++i_;
      if (!Digits()) return false;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++i_;
      if (Peek() == '+' || Peek() == '-') ++i_;
      if (!Digits()) return false;
    }
    return true;
  }
  bool String() {
    if (Peek() != '"') return false;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      if (s_[i_] == '\\') {
        ++i_;
        if (Peek() == 'u') {
          for (int k = 0; k < 4; ++k) {
            ++i_;
            if (!std::isxdigit(static_cast<unsigned char>(Peek()))) return false;
          }
        } else if (Peek() == '\0' || std::strchr("\"\\/bfnrt", Peek()) == nullptr) {
          return false;
        }
      }
      ++i_;
    }
    if (Peek() != '"') return false;
    ++i_;
    return true;
  }
  bool Value() {
    Ws();
    bool ok;
    switch (Peek()) {
      case '{': ok = Object(); break;
      case '[': ok = Array(); break;
      case '"': ok = String(); break;
      case 't': ok = Lit("true"); break;
      case 'f': ok = Lit("false"); break;
      case 'n': ok = Lit("null"); break;
      default: ok = Number();
    }
    Ws();
    return ok;
  }
  bool Object() {
    ++i_;
    Ws();
    if (Peek() == '}') return ++i_, true;
    for (;;) {
      Ws();
      if (!String()) return false;
      Ws();
      if (Peek() != ':') return false;
      ++i_;
      if (!Value()) return false;
      if (Peek() == ',') {
        ++i_;
        continue;
      }
      if (Peek() == '}') return ++i_, true;
      return false;
    }
  }
  bool Array() {
    ++i_;
    Ws();
    if (Peek() == ']') return ++i_, true;
    for (;;) {
      if (!Value()) return false;
      if (Peek() == ',') {
        ++i_;
        continue;
      }
      if (Peek() == ']') return ++i_, true;
      return false;
    }
  }
  const std::string& s_;
  size_t i_ = 0;
};

size_t Count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size())) ++n;
  return n;
}

}  // namespace

// ---- 1. TaskGraph ------------------------------------------------------------

TEST_CASE("task graph: RAW, WAW, WAR and control edges; in-place ops; no duplicate edges") {
  NetDef net;
  net.external_inputs = {"x"};
  net.ops = {
      Op("NoOp", {"x"}, {"a"}),            // 0: reads x
      Op("NoOp", {"a"}, {"b"}),            // 1: RAW on a (0)
      Op("NoOp", {"a"}, {"c"}),            // 2: RAW on a (0)
      Op("NoOp", {}, {"a"}),               // 3: WAW on a (0), WAR on a (1, 2)
      Op("NoOp", {}, {"x"}),               // 4: WAR on external input x (0)
      Op("NoOp", {}, {"d"}, {"b"}),        // 5: control input b (1)
      Op("Add", {"a", "a"}, {"e"}),        // 6: reads a twice: one edge to 3
      Op("Scale", {"e"}, {"e"}),           // 7: in place: RAW and WAW on 6, one edge
      Op("Scale", {"e"}, {"e"}),           // 8: in place again: only 7
      Op("Sum", {"e", "b", "e"}, {"b"}),   // 9: RAW e (8), RAW+WAW b (1), WAR b (5 is control only: no edge)
  };
  TaskGraph g = BuildTaskGraph(net, Devices(net));
  using V = std::vector<int>;
  CHECK(g.parents[0] == V{});
  CHECK(g.parents[1] == V{0});
  CHECK(g.parents[2] == V{0});
  CHECK(g.parents[3] == V{0, 1, 2});
  CHECK(g.parents[4] == V{0});
  CHECK(g.parents[5] == V{1});
  CHECK(g.parents[6] == V{3});
  CHECK(g.parents[7] == V{6});
  CHECK(g.parents[8] == V{7});
  CHECK(g.parents[9] == V{1, 8});
  CHECK(g.children[0] == V{1, 2, 3, 4});
  CHECK(g.children[1] == V{3, 5, 9});
  CHECK(g.children[3] == V{6});
  CHECK(g.num_edges() == 12);
  CheckGraph(net, g, Devices(net));
  // 3 (three parents) starts a chain that 6, 7 and 8 continue (one parent
  // with one child each); 9 has two parents.
  CHECK(g.chains[static_cast<size_t>(g.chain_of[6])] == V{3, 6, 7, 8});
  CHECK(g.chain_of[9] != g.chain_of[8]);
  CHECK(g.chain_parents[static_cast<size_t>(g.chain_of[9])].size() == 2);
}

TEST_CASE("task graph: a write after several reads waits for all of them, and later reads wait for it") {
  NetDef net;
  net.ops = {Op("NoOp", {}, {"a"}), Op("NoOp", {"a"}, {"r1"}), Op("NoOp", {"a"}, {"r2"}),
             Op("NoOp", {"a"}, {"r3"}), Op("NoOp", {"r1"}, {"a"}), Op("NoOp", {"a"}, {"r4"}),
             Op("NoOp", {}, {"a"})};
  TaskGraph g = BuildTaskGraph(net, Devices(net));
  using V = std::vector<int>;
  CHECK(g.parents[4] == V{0, 1, 2, 3});  // RAW r1 (1), WAW a (0), WAR a (1, 2, 3)
  CHECK(g.parents[5] == V{4});
  CHECK(g.parents[6] == V{4, 5});  // readers before the previous write are ordered through it
  CheckGraph(net, g, Devices(net));
}

TEST_CASE("task graph: partial writes of one blob run at once, later accesses wait for every part") {
  auto part = [](OperatorDef op, int64_t k, int64_t parts) {
    op.args.push_back(MakeArg("part", k));
    op.args.push_back(MakeArg("parts", parts));
    return op;
  };
  NetDef net;
  net.ops = {Op("NoOp", {}, {"w"}),                         // 0
             Op("NoOp", {"w"}, {"r"}),                      // 1: reads w
             part(Op("NoOp", {"w", "g0"}, {"w"}), 0, 3),    // 2: part 0 of 3
             part(Op("NoOp", {"w", "g1"}, {"w"}), 1, 3),    // 3: part 1: not after 2
             part(Op("NoOp", {"w", "g2"}, {"w"}), 2, 3),    // 4: part 2
             Op("NoOp", {"w"}, {"x"}),                      // 5: reads the whole: after 2, 3, 4
             part(Op("NoOp", {"w"}, {"w"}), 0, 2),          // 6: a new group (a reader came between)
             part(Op("NoOp", {"w"}, {"w"}), 0, 2),          // 7: the same part again: after 6
             part(Op("NoOp", {"w"}, {"w"}), 1, 3),          // 8: other part count: a new write
             Op("NoOp", {}, {"w"})};                        // 9: a whole write after 8
  TaskGraph g = BuildTaskGraph(net, Devices(net));
  using V = std::vector<int>;
  CHECK(g.parents[2] == V{0, 1});
  CHECK(g.parents[3] == V{0, 1});
  CHECK(g.parents[4] == V{0, 1});
  CHECK(g.parents[5] == V{2, 3, 4});
  CHECK(g.parents[6] == V{2, 3, 4, 5});
  CHECK(g.parents[7] == V{6});
  CHECK(g.parents[8] == V{7});
  CHECK(g.parents[9] == V{8});
  CHECK(PartialWriteOf(net.ops[3]).part == 1);
  CHECK(PartialWriteOf(net.ops[3]).parts == 3);
  CHECK(PartialWriteOf(net.ops[0]).parts == 1);
  CheckGraph(net, g, Devices(net));
}

TEST_CASE("task graph: chains") {
  using V = std::vector<int>;
  SUBCASE("a linear chain is one chain") {
    NetDef net;
    net.ops.push_back(Op("NoOp", {}, {"b0"}));
    for (int i = 0; i < 10; ++i) net.ops.push_back(Op("NoOp", {StrCat("b", i)}, {StrCat("b", i + 1)}));
    TaskGraph g = BuildTaskGraph(net, Devices(net));
    REQUIRE(g.chains.size() == 1);
    CHECK(g.chains[0] == V{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
    CHECK(g.chain_parents[0].empty());
    CHECK(g.chain_children[0].empty());
    CHECK(g.chain_device[0] == kCpu0);
    CheckGraph(net, g, Devices(net));
  }
  SUBCASE("in-place ops chain too") {
    NetDef net;
    net.ops = {Op("NoOp", {}, {"a"}), Op("Scale", {"a"}, {"a"}), Op("Scale", {"a"}, {"a"}), Op("Relu", {"a"}, {"a"})};
    TaskGraph g = BuildTaskGraph(net, Devices(net));
    REQUIRE(g.chains.size() == 1);
    CHECK(g.chains[0] == V{0, 1, 2, 3});
  }
  SUBCASE("fan-out and fan-in") {
    // 0 -> 1 -> {2 -> 3, 4 -> 5} -> 6 -> 7
    NetDef net;
    net.ops = {Op("NoOp", {}, {"a"}),       Op("NoOp", {"a"}, {"b"}),      Op("NoOp", {"b"}, {"c"}),
               Op("NoOp", {"c"}, {"d"}),    Op("NoOp", {"b"}, {"e"}),      Op("NoOp", {"e"}, {"f"}),
               Op("NoOp", {"d", "f"}, {"g"}), Op("NoOp", {"g"}, {"h"})};
    TaskGraph g = BuildTaskGraph(net, Devices(net));
    CheckGraph(net, g, Devices(net));
    REQUIRE(g.chains.size() == 4);
    CHECK(g.chains[static_cast<size_t>(g.chain_of[0])] == V{0, 1});
    CHECK(g.chains[static_cast<size_t>(g.chain_of[2])] == V{2, 3});
    CHECK(g.chains[static_cast<size_t>(g.chain_of[4])] == V{4, 5});
    CHECK(g.chains[static_cast<size_t>(g.chain_of[6])] == V{6, 7});
    int top = g.chain_of[0], left = g.chain_of[2], right = g.chain_of[4], bottom = g.chain_of[6];
    V mid{std::min(left, right), std::max(left, right)};
    CHECK(g.chain_children[static_cast<size_t>(top)] == mid);
    CHECK(g.chain_parents[static_cast<size_t>(bottom)] == mid);
    CHECK(g.chain_parents[static_cast<size_t>(left)] == V{top});
    CHECK(g.chain_children[static_cast<size_t>(right)] == V{bottom});
    CHECK(g.chain_parents[static_cast<size_t>(top)].empty());
    CHECK(g.chain_children[static_cast<size_t>(bottom)].empty());
  }
  SUBCASE("a join: an op with two parents starts a chain") {
    // 0 -> 1 (a), 0 -> 2 (b) and 1 -> 2 (c): three chains
    NetDef net;
    net.ops = {Op("NoOp", {}, {"a", "b"}), Op("NoOp", {"a"}, {"c"}), Op("NoOp", {"b", "c"}, {"d"})};
    TaskGraph g = BuildTaskGraph(net, Devices(net));
    CheckGraph(net, g, Devices(net));
    CHECK(g.parents[2] == V{0, 1});
    CHECK(g.chains.size() == 3);
    CHECK(g.chain_parents[static_cast<size_t>(g.chain_of[2])] == V{g.chain_of[0], g.chain_of[1]});
  }
  SUBCASE("a device change splits a chain (cpu:0 and cpu:1 are different devices)") {
    NetDef net;
    std::vector<DeviceOption> devs = {kCpu0, kCpu0, kCpu1, kCpu1, kCpu0};
    net.ops.push_back(Op("NoOp", {}, {"b0"}, {}, devs[0]));
    for (int i = 1; i < 5; ++i)
      net.ops.push_back(Op("NoOp", {StrCat("b", i - 1)}, {StrCat("b", i)}, {}, devs[static_cast<size_t>(i)]));
    TaskGraph g = BuildTaskGraph(net, Devices(net));
    CheckGraph(net, g, Devices(net));
    REQUIRE(g.chains.size() == 3);
    CHECK(g.chains[0] == V{0, 1});
    CHECK(g.chains[1] == V{2, 3});
    CHECK(g.chains[2] == V{4});
    CHECK(g.chain_device[1] == kCpu1);
    CHECK(g.chain_children[0] == V{1});
    CHECK(g.chain_parents[2] == V{1});
  }
}

TEST_CASE("task graph: seeded random DAGs order every conflicting pair; chains are maximal paths") {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    RandomNet r = MakeRandomNet(seed, 50 + static_cast<int>(seed * 37 % 250), seed % 2 ? 1 : 3, seed % 3 == 0);
    CheckGraph(*r.def, BuildTaskGraph(*r.def, Devices(*r.def)), Devices(*r.def));
  }
}

TEST_CASE("task graph DOT lists every op and every edge, chains as clusters") {
  RandomNet r = MakeRandomNet(7, 80, 2);
  r.def->ops[3].name = "has \"quotes\"";
  auto ws = std::make_shared<Workspace>();
  Net net(r.def, ws, NetOptions{ExecutorKind::kAsync, 2});
  std::string dot = net.Dot();
  CHECK(dot.rfind("digraph \"random7\" {", 0) == 0);
  CHECK(dot.find("has \\\"quotes\\\"") != std::string::npos);
  const TaskGraph& g = net.graph();
  for (size_t i = 0; i < r.def->ops.size(); ++i) {
    std::string node = StrCat("    op", i, " [label=\"", i, ": ", r.def->ops[i].type);
    CHECK_MESSAGE(Count(dot, node) == 1, node);
  }
  for (size_t i = 0; i < g.children.size(); ++i)
    for (int c : g.children[i]) CHECK(dot.find(StrCat("  op", i, " -> op", c, ";\n")) != std::string::npos);
  CHECK(Count(dot, " -> ") == g.num_edges());
  CHECK(Count(dot, "subgraph cluster_") == g.chains.size());
  CHECK(dot.find("on cpu:1") != std::string::npos);
}

// ---- 2. WorkerPool -------------------------------------------------------------

namespace {

// Counts the runs of each task; signals when `expected` runs happened.
class CountingRunner final : public TaskRunner {
 public:
  CountingRunner(int tasks, int workers) : runs_(static_cast<size_t>(tasks)), workers_(workers) {}
  // Checks, per job, that on_start already ran on its worker.
  void ExpectStarted(const std::vector<std::atomic<int>>* started) { started_ = started; }
  void RunTask(int task, int worker) override {
    if (worker < 0 || worker >= workers_) {
      bad_worker_.fetch_add(1);
    } else if (started_ != nullptr && (*started_)[static_cast<size_t>(worker)].load() != 1) {
      bad_worker_.fetch_add(1);
    }
    runs_[static_cast<size_t>(task)].fetch_add(1);
    std::lock_guard<std::mutex> lock(mu_);
    ++total_;
    cv_.notify_all();
  }
  bool WaitTotal(int64_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return total_ >= n; });
  }
  int Runs(int task) const { return runs_[static_cast<size_t>(task)].load(); }
  int bad_worker() const { return bad_worker_.load(); }
  int64_t total() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }

 private:
  std::vector<std::atomic<int>> runs_;
  int workers_;
  const std::vector<std::atomic<int>>* started_ = nullptr;
  std::atomic<int> bad_worker_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t total_ = 0;
};

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

TEST_CASE("worker pool: jobs pushed from several threads each run exactly once, on valid workers") {
  for (int workers : {1, 3, 8}) {
    CAPTURE(workers);
    constexpr int kJobs = 20000, kPushers = 4;
    CountingRunner runner(kJobs, workers);
    std::atomic<int> started{0};
    std::vector<std::atomic<int>> on_start(static_cast<size_t>(workers));
    runner.ExpectStarted(&on_start);
    {
      WorkerPool pool(workers, [&](int w) {
        if (w >= 0 && w < workers) on_start[static_cast<size_t>(w)].fetch_add(1);
        started.fetch_add(1);
      });
      CHECK(pool.size() == workers);
      std::vector<std::thread> pushers;
      for (int t = 0; t < kPushers; ++t)
        pushers.emplace_back([&, t] {
          for (int j = t; j < kJobs; j += kPushers) pool.Push(&runner, j);
        });
      for (auto& t : pushers) t.join();
      if (!runner.WaitTotal(kJobs, kLongWait)) Die("worker pool jobs");
      // A second wave after the workers went idle (some may sleep by now).
      CountingRunner second(100, workers);
      for (int j = 0; j < 100; ++j) pool.Push(&second, j);
      if (!second.WaitTotal(100, kLongWait)) Die("second wave of worker pool jobs");
      CHECK(second.total() == 100);
    }
    // on_start ran once on every worker (each before its worker's first job:
    // see ExpectStarted), by the time the destructor joined them.
    CHECK(started.load() == workers);
    CHECK(std::all_of(on_start.begin(), on_start.end(), [](const std::atomic<int>& n) { return n.load() == 1; }));
    int wrong = 0;
    for (int j = 0; j < kJobs; ++j) wrong += runner.Runs(j) != 1;
    CHECK(wrong == 0);
    CHECK(runner.total() == kJobs);
    CHECK(runner.bad_worker() == 0);
  }
}

TEST_CASE("worker pool: the destructor runs every queued job, then joins") {
  for (int workers : {1, 4}) {
    CAPTURE(workers);
    constexpr int kJobs = 50000;
    CountingRunner runner(kJobs, workers);
    {
      WorkerPool pool(workers);
      for (int j = 0; j < kJobs; ++j) pool.Push(&runner, j);
    }  // most jobs are still queued here
    int wrong = 0;
    for (int j = 0; j < kJobs; ++j) wrong += runner.Runs(j) != 1;
    CHECK(wrong == 0);
    CHECK(runner.total() == kJobs);
  }
  // Jobs that queue more jobs while the pool drains.
  struct Spawner final : TaskRunner {
    WorkerPool* pool = nullptr;
    std::atomic<int> runs{0};
    void RunTask(int task, int) override {
      runs.fetch_add(1);
      if (task > 0) pool->Push(this, task - 1);
    }
  } spawner;
  {
    WorkerPool pool(3);
    spawner.pool = &pool;
    for (int j = 0; j < 10; ++j) pool.Push(&spawner, 100);
  }
  CHECK(spawner.runs.load() == 10 * 101);
}

TEST_CASE("worker pool: idle workers sleep instead of spinning") {
  // Measures the process's CPU time over idle windows. Spinning workers would
  // burn about one core each (at least 2 cores' worth of the window here);
  // sleeping ones use next to nothing. Preemption only lowers the reading,
  // so the check cannot fail spuriously on a loaded machine; the best of
  // three windows absorbs a stray wakeup.
  constexpr int kWorkers = 4;
  WorkerPool pool(kWorkers);
  CountingRunner runner(1000, kWorkers);
  for (int j = 0; j < 1000; ++j) pool.Push(&runner, j);
  if (!runner.WaitTotal(1000, kLongWait)) Die("worker pool jobs");
  // The spin phase lasts tens of microseconds (milliseconds under a
  // sanitizer); this delay only lets it end, it synchronises nothing.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  constexpr double kWindow = 0.2;
  double best = 1e9;
  for (int attempt = 0; attempt < 3 && best >= 0.05 * kWorkers; ++attempt) {
    double c0 = ProcessCpuSeconds();
    auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(kWindow));
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double used = ProcessCpuSeconds() - c0;
    best = std::min(best, used / wall);
  }
  MESSAGE("idle pool of " << kWorkers << " workers used " << best * 100 << "% of one core");
  CHECK(best < 0.05 * kWorkers);  // spinning workers: ~100% per available core
  // Sleeping workers wake up for new jobs.
  CountingRunner again(kWorkers * 4, kWorkers);
  for (int j = 0; j < kWorkers * 4; ++j) pool.Push(&again, j);
  if (!again.WaitTotal(kWorkers * 4, kLongWait)) Die("jobs after idle");
  CHECK(again.total() == kWorkers * 4);
}

// ---- 3. seeded random DAGs: async == simple, bit for bit ---------------------

namespace {

Snapshot RunSimple(const RandomNet& r) {
  auto ws = std::make_shared<Workspace>();
  Feed(*ws, r);
  Net net(r.def, ws, NetOptions{ExecutorKind::kSimple});
  net.Run();
  return Snap(*ws);
}

}  // namespace

TEST_CASE("async executor matches the simple executor on seeded random DAGs (1, 2, 4, 8 workers)") {
  const int seeds = 30;
  int64_t finite = 0, values = 0;
  for (uint32_t seed = 100; seed < 100 + static_cast<uint32_t>(seeds); ++seed) {
    CAPTURE(seed);
    const int num_ops = 50 + static_cast<int>((seed * 7919) % 251);
    RandomNet r = MakeRandomNet(seed, num_ops);
    const Snapshot want = RunSimple(r);
    for (const auto& [name, v] : want) {
      const float* p = reinterpret_cast<const float*>(v.bytes.data());
      for (size_t k = 0; k < v.bytes.size() / 4; ++k, ++values) finite += std::isfinite(p[k]) && p[k] != 0;
    }
    for (int workers : {1, 2, 4, 8}) {
      CAPTURE(workers);
      auto ws = std::make_shared<Workspace>();
      Feed(*ws, r);
      Net net(r.def, ws, NetOptions{ExecutorKind::kAsync, workers});
      REQUIRE(net.executor_kind() == ExecutorKind::kAsync);
      net.Run();
      CheckSame(want, Snap(*ws), "Run");
      Feed(*ws, r);  // the net may overwrite its inputs
      net.Run();
      CheckSame(want, Snap(*ws), "second Run");
      Feed(*ws, r);
      RunAsyncAndWait(net);
      CheckSame(want, Snap(*ws), "RunAsync + Wait");
    }
  }
  // The values stay meaningful (not all overflowed or flushed to zero), so
  // a misordered access would show.
  CHECK(finite > values * 9 / 10);
}

TEST_CASE("async executor: many reruns of one net stay deterministic") {
  RandomNet r = MakeRandomNet(4242, 300, 1, false, 1024);
  const Snapshot want = RunSimple(r);
  auto ws = std::make_shared<Workspace>();
  Net net(r.def, ws, NetOptions{ExecutorKind::kAsync, 4});
  for (int run = 0; run < 50; ++run) {
    Feed(*ws, r);
    if (run % 2) {
      net.Run();
    } else {
      RunAsyncAndWait(net);
    }
    CheckSame(want, Snap(*ws), StrCat("run ", run));
  }
}

TEST_CASE("async executor: empty nets and nets of one op") {
  auto ws = std::make_shared<Workspace>();
  auto empty = std::make_shared<NetDef>();
  Net e(empty, ws, NetOptions{ExecutorKind::kAsync, 2});
  e.Run();
  e.RunAsync();
  CHECK(e.Wait(std::chrono::milliseconds(0)));
  auto one = std::make_shared<NetDef>();
  one->ops.push_back(Op("ConstantFill", {}, {"y"}));
  one->ops[0].args = {Argument{"shape", std::vector<int64_t>{3}}, Argument{"value", 2.5}};
  Net o(one, ws, NetOptions{ExecutorKind::kAsync, 1});
  o.Run();
  CHECK(ws->GetTensor("y").data<float>()[2] == 2.5f);
  RunAsyncAndWait(o);
  CHECK(ws->GetTensor("y").data<float>()[0] == 2.5f);
}

// ---- 9. multi-device CPU nets ---------------------------------------------------

TEST_CASE("multi-device CPU nets default to the async executor and match the simple executor") {
  for (uint32_t seed = 500; seed < 510; ++seed) {
    CAPTURE(seed);
    RandomNet r = MakeRandomNet(seed, 120 + static_cast<int>(seed % 7) * 20, 2);
    const Snapshot want = RunSimple(r);
    auto ws = std::make_shared<Workspace>();
    Feed(*ws, r);
    Net net(r.def, ws, NetOptions{ExecutorKind::kDefault, static_cast<int32_t>(seed % 4 + 1)});
    CHECK(net.executor_kind() == ExecutorKind::kAsync);
    int mixed = 0;
    for (size_t c = 0; c < net.graph().chains.size(); ++c)
      for (int i : net.graph().chains[c]) mixed += !(net.ops()[static_cast<size_t>(i)]->device() == net.graph().chain_device[c]);
    CHECK(mixed == 0);
    net.Run();
    CheckSame(want, Snap(*ws), "multi-device Run");
    Feed(*ws, r);
    RunAsyncAndWait(net);
    CheckSame(want, Snap(*ws), "multi-device RunAsync");
    // Output tensors carry their op's device.
    const OperatorDef& last = r.def->ops.back();
    CHECK(ws->GetTensor(last.outputs[0]).device() == r.def->OpDevice(last));
  }
  // An in-place op on another (logical) CPU device than its input's tensor:
  // the output gets fresh storage on the op's device, while the kernel still
  // reads the input through its old storage, which must stay alive.
  for (int run = 0; run < 3; ++run) {
    auto ws = std::make_shared<Workspace>();
    std::mt19937 rng(17);
    std::vector<float> x(1000);
    for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    auto def = std::make_shared<NetDef>();
    def->ops.push_back(Op("ConstantFill", {}, {"a"}));
    def->ops[0].args = {Argument{"shape", std::vector<int64_t>{1000}}, Argument{"value", 1.0}};
    def->ops.push_back(ScaleOp("a", "a", 3.0, kCpu1));  // a on cpu:0, written in place on cpu:1
    def->ops.push_back(ScaleOp("a", "a", 0.5, kCpu0));  // and back
    Net net(def, ws, NetOptions{run == 0 ? ExecutorKind::kSimple : ExecutorKind::kAsync, 2});
    net.Run();
    const Tensor& a = ws->GetTensor("a");
    CHECK(a.device() == kCpu0);
    int wrong = 0;
    for (int k = 0; k < 1000; ++k) wrong += a.data<float>()[k] != 1.5f;
    CHECK_MESSAGE(wrong == 0, wrong, " of 1000 elements wrong after in-place ops across CPU devices");
  }
  // The same net on one device goes to the simple executor by default.
  RandomNet single = MakeRandomNet(77, 50, 1);
  auto ws = std::make_shared<Workspace>();
  CHECK(Net(single.def, ws).executor_kind() == ExecutorKind::kSimple);
}

TEST_CASE("CPU replicas with CPUs of their own: one runner each, pinned, on its own team") {
  // Replicas 1..budget (each a chain of ops, joined at the end), run
  // synchronously and asynchronously. Where the plan pins replicas, every op
  // of replica k runs on its own thread pinned to the plan's CPUs for k, with
  // its share of threads, its chunks on those CPUs too; the caller's mask
  // is restored after a run. Otherwise (one replica, or more than CPUs) ops
  // keep the process's mask.
  const std::vector<int> caller_mask = CurrentThreadAffinity();
  for (int replicas = 1; replicas <= std::min(CpuBudget(), 8) + 1; ++replicas) {
    CAPTURE(replicas);
    const ReplicaCpuPlan& plan = ReplicaCpusFor(replicas);
    auto def = std::make_shared<NetDef>();
    std::vector<std::string> tails;
    for (int r = 0; r < replicas; ++r) {
      const DeviceOption d{DeviceType::kCPU, 2 * r + 1};  // ids need not be 0..R-1
      const std::string b = "r" + std::to_string(r) + "_";
      def->ops.push_back(Op("TestWhere", {}, {b + "0"}, {}, d));
      for (int k = 1; k < 6; ++k) def->ops.push_back(Op("TestWhere", {b + std::to_string(k - 1)}, {b + std::to_string(k)}, {}, d));
      tails.push_back(b + "5");
    }
    def->ops.push_back(Op("TestWhere", tails, {"end"}, {}, DeviceOption{DeviceType::kCPU, 1}));
    auto ws = std::make_shared<Workspace>();
    Net net(def, ws, NetOptions{ExecutorKind::kAsync});
    for (int mode = 0; mode < 2; ++mode) {
      CAPTURE(mode);
      {
        std::lock_guard<std::mutex> lock(g_where_mu);
        g_where.clear();
      }
      if (mode == 0) net.Run();
      else RunAsyncAndWait(net);
      CHECK(CurrentThreadAffinity() == caller_mask);
      std::lock_guard<std::mutex> lock(g_where_mu);
      REQUIRE(g_where.size() == static_cast<size_t>(6 * replicas + 1));
      std::map<int, std::set<std::thread::id>> threads;
      for (const Where& w : g_where) {
        const int r = (w.device - 1) / 2;
        threads[r].insert(w.thread);
        if (plan.plan.pinned) {
          const ReplicaCpus& mine = plan.replicas[static_cast<size_t>(r)];
          CHECK(w.cpus == mine.cpus);
          CHECK(w.intra == mine.threads);
          for (const auto& c : w.chunk_cpus) CHECK(c == mine.cpus);
        } else {
          CHECK(w.cpus == ProcessAffinity());
        }
      }
      if (plan.plan.pinned) {
        // Replica 0 of a synchronous run: the caller, and its worker while
        // the caller sleeps.
        std::set<std::thread::id> distinct;
        size_t total = 0;
        for (const auto& [r, ids] : threads) {
          CHECK(ids.size() <= (r == 0 && mode == 0 ? 2u : 1u));
          distinct.insert(ids.begin(), ids.end());
          total += ids.size();
        }
        CHECK(distinct.size() == total);  // no thread ran two replicas' ops
      }
    }
  }
}

TEST_CASE("a thread's affinity scope pins it and restores its mask") {
  const std::vector<int> before = CurrentThreadAffinity();
  {
    ThreadAffinityScope pin({before.front()});
    CHECK(CurrentThreadAffinity() == std::vector<int>{before.front()});
  }
  CHECK(CurrentThreadAffinity() == before);
  { ThreadAffinityScope none({}); }
  CHECK(CurrentThreadAffinity() == before);
}

// ---- 4. error injection ----------------------------------------------------------

namespace {

// Ancestors/descendants of op k by the graph.
std::vector<char> Descendants(const TaskGraph& g, int k) {
  std::vector<char> d(g.children.size(), 0);
  std::vector<int> stack{k};
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    for (int c : g.children[static_cast<size_t>(i)])
      if (!d[static_cast<size_t>(c)]) d[static_cast<size_t>(c)] = 1, stack.push_back(c);
  }
  return d;
}

// After a failed run: the failing op and everything after it in the graph
// did not run; every op that ran had all its parents run, and finish first.
void CheckFailedRunTimings(const Net& net, int fail_op) {
  const auto& t = net.timings();
  const TaskGraph& g = net.graph();
  REQUIRE(t.size() == net.ops().size());
  auto desc = Descendants(g, fail_op);
  int ran = 0, bad = 0;
  CHECK(t[static_cast<size_t>(fail_op)].start_ns == -1);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].start_ns < 0) continue;
    ++ran;
    if (desc[i]) ++bad;
    if (t[i].end_ns < t[i].start_ns) ++bad;
    for (int p : g.parents[i]) {
      const OpTiming& pt = t[static_cast<size_t>(p)];
      if (pt.start_ns < 0 || pt.end_ns > t[i].start_ns) ++bad;
    }
  }
  CHECK(bad == 0);
  CHECK(ran < static_cast<int>(t.size()));
}

}  // namespace

TEST_CASE("an op's error fails the run with that error; the net runs again once the cause is gone") {
  int checked = 0;
  for (uint32_t seed = 900; seed < 915u; ++seed) {
    CAPTURE(seed);
    RandomNet r = MakeRandomNet(seed, 60 + static_cast<int>(seed % 5) * 40, seed % 3 == 0 ? 2 : 1, true);
    REQUIRE(r.fail_op >= 0);
    g_fail_op = -1;
    const Snapshot want = RunSimple(r);
    for (int workers : {0, 1, 2, 4, 8}) {  // 0: the simple executor
      CAPTURE(workers);
      auto ws = std::make_shared<Workspace>();
      NetOptions opt{workers ? ExecutorKind::kAsync : ExecutorKind::kSimple, workers};
      opt.profile = true;
      Net net(r.def, ws, opt);
      for (bool async_api : {false, true}) {
        CAPTURE(async_api);
        Feed(*ws, r);
        g_fail_op = r.fail_op;
        try {
          if (async_api) {
            RunAsyncAndWait(net);
          } else {
            net.Run();
          }
          FAIL("the injected failure did not fail the run");
        } catch (const Error& e) {
          CHECK(e.code() == Code::kDataLoss);
          for (const std::string& needle : {StrCat("net 'random", seed, "'"),
                                             StrCat("op ", r.fail_op, " (TestFailIf 'o", r.fail_op, "')"),
                                             std::string("injected failure")})
            CHECK_MESSAGE(e.message().find(needle) != std::string::npos, e.message());
        }
        CHECK_FALSE(net.running());
        CheckFailedRunTimings(net, r.fail_op);
        if (workers == 0) {  // list order: exactly the ops before it ran
          int wrong = 0;
          for (size_t i = 0; i < net.timings().size(); ++i)
            wrong += (net.timings()[i].start_ns >= 0) != (static_cast<int>(i) < r.fail_op);
          CHECK(wrong == 0);
        }
        g_fail_op = -1;
        Feed(*ws, r);
        net.Run();
        CheckSame(want, Snap(*ws), "after recovery");
        ++checked;
      }
    }
  }
  g_fail_op = -1;
  CHECK(checked > 0);
}

TEST_CASE("a real kernel error on the async executor names the op; other chains finish or skip") {
  // Two independent chains; one hits a shape mismatch in Sum.
  auto def = std::make_shared<NetDef>();
  def->name = "shapes";
  def->external_inputs = {"x", "y"};
  def->ops.push_back(ScaleOp("x", "a", 2.0));
  for (int i = 0; i < 100; ++i) def->ops.push_back(ScaleOp("a", "a", 1.0));
  def->ops.push_back(Op("Sum", {"a", "y"}, {"s"}));  // x and y differ in shape
  for (int i = 0; i < 100; ++i) def->ops.push_back(ScaleOp("s", "s", 1.0));
  for (int i = 0; i < 100; ++i) def->ops.push_back(ScaleOp("y", "c", 1.0));
  auto ws = std::make_shared<Workspace>();
  std::mt19937 rng(1);
  ws->Feed("x", RandomFloats(rng, 8));
  ws->Feed("y", RandomFloats(rng, 9));
  NetOptions opt{ExecutorKind::kAsync, 3};
  opt.profile = true;
  Net net(def, ws, opt);
  for (int run = 0; run < 3; ++run) {
    try {
      net.Run();
      FAIL("ran with mismatched shapes");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kShape);
      CHECK_MESSAGE(e.message().find("net 'shapes': op 101 (Sum) on cpu:0") != std::string::npos, e.message());
    }
    CheckFailedRunTimings(net, 101);
  }
  ws->Feed("y", RandomFloats(rng, 8));
  net.Run();
  CHECK(ws->GetTensor("s").dims() == Dims{8});
}

// ---- 5. cancellation ----------------------------------------------------------------

namespace {

// A gate op, then `chains` parallel chains of Scale(-1) in place; chain 0
// waits for the gate (control input), the others run at once.
struct GatedNet {
  std::shared_ptr<NetDef> def;
  std::vector<std::vector<int>> chain_ops;  // op indices per chain
  int chain_len;
};

GatedNet MakeGatedNet(int chains, int chain_len) {
  GatedNet n;
  n.def = std::make_shared<NetDef>();
  n.def->name = "gated";
  n.def->external_inputs = {"x"};
  n.def->ops.push_back(Op("TestBlock", {"x"}, {"gate"}));
  n.chain_len = chain_len;
  n.chain_ops.resize(static_cast<size_t>(chains));
  for (int c = 0; c < chains; ++c) {
    std::string b = StrCat("c", c);
    OperatorDef head = ScaleOp("x", b, -1.0);
    if (c == 0) head.control_inputs = {"gate"};
    n.chain_ops[static_cast<size_t>(c)].push_back(static_cast<int>(n.def->ops.size()));
    n.def->ops.push_back(head);
    for (int i = 1; i < chain_len; ++i) {
      n.chain_ops[static_cast<size_t>(c)].push_back(static_cast<int>(n.def->ops.size()));
      n.def->ops.push_back(ScaleOp(b, b, -1.0));
    }
  }
  return n;
}

// chain_len flips of the sign.
void CheckGatedResult(Workspace& ws, const GatedNet& n, int chains) {
  const Tensor& x = ws.GetTensor("x");
  float sign = n.chain_len % 2 ? -1.0f : 1.0f;
  int wrong = 0;
  for (int c = 0; c < chains; ++c) {
    const Tensor& y = ws.GetTensor(StrCat("c", c));
    for (int64_t k = 0; k < x.numel(); ++k) wrong += y.data<float>()[k] != sign * x.data<float>()[k];
  }
  CHECK(wrong == 0);
}

void CheckCancelled(const Error& e) {
  CHECK(e.code() == Code::kCancelled);
  CHECK_MESSAGE(e.message().find("net 'gated'") != std::string::npos, e.message());
  CHECK_MESSAGE(e.message().find("cancelled") != std::string::npos, e.message());
}

}  // namespace

TEST_CASE("Cancel from another thread stops a run; the net stays usable; Cancel before a run does nothing") {
  const int kChains = 4, kLen = DP_TEST_TSAN ? 2000 : 10000;
  GatedNet n = MakeGatedNet(kChains, kLen);
  for (int workers : {0, 1, 4}) {  // 0: the simple executor
    CAPTURE(workers);
    auto ws = std::make_shared<Workspace>();
    std::mt19937 rng(3);
    ws->Feed("x", RandomFloats(rng, 16));
    NetOptions opt{workers ? ExecutorKind::kAsync : ExecutorKind::kSimple, workers};
    opt.profile = true;
    Net net(n.def, ws, opt);
    for (bool async_api : {false, true}) {
      CAPTURE(async_api);
      g_gate.Arm();
      // From another thread: Run blocks, and so does RunAsync on the simple
      // executor (it completes the run before returning).
      auto run = std::async(std::launch::async, [&] {
        if (async_api) {
          net.RunAsync();
        } else {
          net.Run();
        }
      });
      if (!g_gate.WaitStarted(1, kLongWait)) Die("the gate op to start");
      CHECK(net.running());
      if (async_api && workers) {
        WaitReady(run, "RunAsync to return");
        run.get();
        CHECK_FALSE(net.Wait(std::chrono::milliseconds(1)));  // held at the gate
      }
      net.Cancel();
      g_gate.Release();
      try {
        if (async_api) {
          if (!workers) {
            WaitReady(run, "RunAsync on the simple executor");
            run.get();  // the error comes from Wait
          }
          WaitWithBound(net);
        } else {
          WaitReady(run, "a cancelled Run");
          run.get();
        }
        FAIL("a cancelled run succeeded");
      } catch (const Error& e) {
        CheckCancelled(e);
      }
      CHECK_FALSE(net.running());
      // Chain 0 waited for the gate, so none of it ran.
      int chain0_ran = 0;
      for (int i : n.chain_ops[0]) chain0_ran += net.timings()[static_cast<size_t>(i)].start_ns >= 0;
      CHECK(chain0_ran == 0);
      // Usable afterwards.
      g_gate.Disarm();
      net.Run();
      CheckGatedResult(*ws, n, kChains);
    }
    // Cancel before a run: cleared when the run begins.
    net.Cancel();
    net.Run();
    CheckGatedResult(*ws, n, kChains);
    net.Cancel();
    RunAsyncAndWait(net);
    CheckGatedResult(*ws, n, kChains);
  }
}

TEST_CASE("a net waiting at a gate can be cancelled from a thread other than the one that waits") {
  // Three threads: one runs, one cancels, this one releases.
  GatedNet n = MakeGatedNet(2, 100);
  auto ws = std::make_shared<Workspace>();
  std::mt19937 rng(5);
  ws->Feed("x", RandomFloats(rng, 4));
  Net net(n.def, ws, NetOptions{ExecutorKind::kAsync, 2});
  g_gate.Arm();
  auto run = std::async(std::launch::async, [&] { net.Run(); });
  if (!g_gate.WaitStarted(1, kLongWait)) Die("the gate op to start");
  std::thread([&] { net.Cancel(); }).join();
  g_gate.Release();
  WaitReady(run, "a cancelled Run");
  try {
    run.get();
    FAIL("a cancelled run succeeded");
  } catch (const Error& e) {
    CheckCancelled(e);
  }
  g_gate.Disarm();
  net.Run();
  CheckGatedResult(*ws, n, 2);
}

// ---- 6. a 1,000,000-op chain -----------------------------------------------------

TEST_CASE("a 1,000,000-op chain runs without deep recursion (one chain, and one task per op)") {
  for (bool alternate : {false, true}) {
    CAPTURE(alternate);
    // The one-task-per-op case is the one that exercises the executor's
    // continuation loop; the single chain is kept smaller to save CI time
    // (creating a 1,000,000-op net takes ~20 s, ~150 s under ASan). The
    // plain builds run the whole million, the deep-recursion check; the
    // sanitizer builds look for memory errors and races, which a tenth of it
    // exercises as well.
    const int kOps = (DP_TEST_TSAN ? 50000 : DP_TEST_ASAN ? 100000 : 1000000) / (alternate ? 1 : 5);
    // b_i -> NoOp -> b_{i+1}. On one device that is a single chain; with
    // devices alternating cpu:0, cpu:1 every op is its own task, and each
    // task's thread continues into the next one.
    auto def = std::make_shared<NetDef>();
    def->external_inputs = {"b0"};
    def->ops.reserve(static_cast<size_t>(kOps));
    for (int i = 0; i < kOps; ++i)
      def->ops.push_back(Op("NoOp", {StrCat("b", i)}, {StrCat("b", i + 1)}, {},
                            alternate ? std::optional<DeviceOption>(DeviceOption{DeviceType::kCPU, i % 2})
                                      : std::nullopt));
    // The last op counts, so the run demonstrably reached the end.
    def->ops.back().type = "TestCount";
    auto ws = std::make_shared<Workspace>();
    ws->Feed("b0", Tensor({1}, DType::kFloat32));
    auto t0 = std::chrono::steady_clock::now();
    Net net(def, ws, NetOptions{ExecutorKind::kAsync, 2});
    auto t1 = std::chrono::steady_clock::now();
    CHECK(net.graph().chains.size() == (alternate ? static_cast<size_t>(kOps) : 1));
    g_count = 0;
    net.Run();
    auto t2 = std::chrono::steady_clock::now();
    RunAsyncAndWait(net);
    auto t3 = std::chrono::steady_clock::now();
    CHECK(g_count.load() == 2);
    MESSAGE(kOps << "-op chain" << std::string(alternate ? " (one task per op)" : "") << ": created in "
                 << std::chrono::duration<double>(t1 - t0).count() << " s, Run "
                 << std::chrono::duration<double>(t2 - t1).count() << " s, RunAsync+Wait "
                 << std::chrono::duration<double>(t3 - t2).count() << " s");
  }
}

// ---- 7. concurrency ----------------------------------------------------------------

TEST_CASE("runs of one net cannot overlap: RunAsync or Run during a run fail with kFailedPrecondition") {
  GatedNet n = MakeGatedNet(2, 10);
  auto ws = std::make_shared<Workspace>();
  std::mt19937 rng(9);
  ws->Feed("x", RandomFloats(rng, 4));
  NetOptions opt{ExecutorKind::kAsync, 2};
  opt.profile = true;
  Net net(n.def, ws, opt);
  try {
    net.Wait(std::chrono::milliseconds(0));
    FAIL("Wait without a run");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kFailedPrecondition);
    CHECK(e.message().find("no run in progress") != std::string::npos);
  }
  g_gate.Arm();
  net.RunAsync();
  if (!g_gate.WaitStarted(1, kLongWait)) Die("the gate op to start");
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (attempt == 0) {
        net.RunAsync();
      } else {
        net.Run();
      }
      FAIL("a second run started during the first");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kFailedPrecondition);
      CHECK(e.message().find("already running") != std::string::npos);
    }
  }
  // ---- 8 (part): no trace while a run is in flight.
  try {
    (void)net.TraceJson();
    FAIL("a trace during a run");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kFailedPrecondition);
  }
  CHECK(net.running());
  CHECK_FALSE(net.Wait(std::chrono::milliseconds(0)));
  CHECK_FALSE(net.Wait(std::chrono::milliseconds(5)));
  g_gate.Release();
  WaitWithBound(net);  // the first run is unaffected and succeeds
  g_gate.Disarm();
  CHECK_FALSE(net.running());
  CheckGatedResult(*ws, n, 2);
  CHECK(Count(net.TraceJson(), "\"ph\":\"X\"") == n.def->ops.size());
  try {
    net.Wait();
    FAIL("Wait twice for one run");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kFailedPrecondition);
  }
}

TEST_CASE("destroying a net while its async run is in flight cancels and drains the run") {
  SUBCASE("held at a gate") {
    GatedNet n = MakeGatedNet(3, 1000);
    for (auto& op : n.def->ops)
      if (op.type == "Scale" && op.control_inputs.empty() && op.outputs[0] == "c0") op.type = "TestCount", op.args.clear();
    auto ws = std::make_shared<Workspace>();
    std::mt19937 rng(11);
    ws->Feed("x", RandomFloats(rng, 4));
    auto net = std::make_unique<Net>(n.def, ws, NetOptions{ExecutorKind::kAsync, 2});
    g_count = 0;
    g_gate.Arm();
    net->RunAsync();
    if (!g_gate.WaitStarted(1, kLongWait)) Die("the gate op to start");
    auto destroy = std::async(std::launch::async, [&] { net.reset(); });
    // Give the destructor time to cancel before the gate opens. Only the
    // count below depends on it, and it is reported, not checked.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g_gate.Release();
    WaitReady(destroy, "the net's destructor");
    destroy.get();
    CHECK(net == nullptr);
    MESSAGE("ops of the gated chain that ran before the destructor's cancel: " << g_count.load() << " of 999");
    CHECK(g_count.load() <= 999);
    g_gate.Disarm();
  }
  SUBCASE("at arbitrary points of a long run") {
    RandomNet r = MakeRandomNet(31337, 300);
    auto ws = std::make_shared<Workspace>();
    for (int i = 0; i < 40; ++i) {
      Feed(*ws, r);
      auto net = std::make_unique<Net>(r.def, ws, NetOptions{ExecutorKind::kAsync, 1 + i % 4});
      net->RunAsync();
      auto destroy = std::async(std::launch::async, [&] { net.reset(); });
      WaitReady(destroy, "the net's destructor");
      destroy.get();
    }
    // The workspace is still fine for a new net.
    Feed(*ws, r);
    Net net(r.def, ws, NetOptions{ExecutorKind::kAsync, 2});
    net.Run();
    CheckSame(RunSimple(r), Snap(*ws), "after destroyed runs");
  }
}

TEST_CASE("two nets on one workspace, writing disjoint blobs, run concurrently from two threads") {
  // Both read the shared input x; each writes only its own blobs.
  auto make = [](const std::string& prefix, uint32_t seed) {
    auto def = std::make_shared<NetDef>();
    def->name = prefix;
    def->external_inputs = {"x"};
    std::mt19937 rng(seed);
    for (int c = 0; c < 4; ++c) {
      std::string b = StrCat(prefix, c);
      def->ops.push_back(ScaleOp("x", b, 1.0));
      for (int i = 0; i < 2000; ++i) {
        if (i % 3 == 2) {
          def->ops.push_back(Op("Add", {b, "x"}, {b}));
        } else {
          def->ops.push_back(ScaleOp(b, b, std::uniform_real_distribution<double>(-1.2, 1.2)(rng)));
        }
      }
    }
    def->ops.push_back(Op("Sum", {prefix + "0", prefix + "1", prefix + "2"}, {prefix + "sum"}));
    return def;
  };
  auto da = make("a", 1), db = make("b", 2);
  std::mt19937 rng(13);
  Tensor x = RandomFloats(rng, 64);
  Snapshot want;
  {
    auto ws = std::make_shared<Workspace>();
    ws->Feed("x", x);
    Net(da, ws, NetOptions{ExecutorKind::kSimple}).Run();
    Net(db, ws, NetOptions{ExecutorKind::kSimple}).Run();
    want = Snap(*ws);
  }
  auto ws = std::make_shared<Workspace>();
  ws->Feed("x", x);
  std::unique_ptr<Net> na, nb;
  std::atomic<int> ready{0};
  std::atomic<int> errors{0};
  auto body = [&](std::shared_ptr<NetDef> def, std::unique_ptr<Net>& net, int workers) {
    try {
      net = std::make_unique<Net>(def, ws, NetOptions{ExecutorKind::kAsync, workers});  // concurrent creation too
      ready.fetch_add(1);
      while (ready.load() < 2) std::this_thread::yield();  // start together
      for (int r = 0; r < 5; ++r) {
        if (r % 2) {
          net->Run();
        } else {
          net->RunAsync();
          auto deadline = std::chrono::steady_clock::now() + kLongWait;
          while (!net->Wait(std::chrono::milliseconds(100)))
            if (std::chrono::steady_clock::now() > deadline) Die("Net::Wait in a thread");
        }
      }
    } catch (...) {
      ready.fetch_add(1);
      errors.fetch_add(1);
    }
  };
  auto fa = std::async(std::launch::async, body, da, std::ref(na), 2);
  auto fb = std::async(std::launch::async, body, db, std::ref(nb), 3);
  WaitReady(fa, "net a's runs");
  WaitReady(fb, "net b's runs");
  CHECK(errors.load() == 0);
  CheckSame(want, Snap(*ws), "two concurrent nets");
}

// ---- 8. profiling --------------------------------------------------------------------

TEST_CASE("profiling: per-op timings respect dependencies; the trace is JSON with one event per op") {
  RandomNet r = MakeRandomNet(2024, 200, 2);
  r.def->ops[5].name = "quote\" backslash\\ tab\t";
  for (int workers : {0, 1, 3}) {  // 0: the simple executor
    CAPTURE(workers);
    auto ws = std::make_shared<Workspace>();
    NetOptions opt{workers ? ExecutorKind::kAsync : ExecutorKind::kSimple, workers};
    opt.profile = true;
    Net net(r.def, ws, opt);
    CHECK(net.timings().empty());  // no run yet
    for (bool async_api : {false, true}) {
      CAPTURE(async_api);
      Feed(*ws, r);
      if (async_api) {
        RunAsyncAndWait(net);
      } else {
        net.Run();
      }
      const auto& t = net.timings();
      REQUIRE(t.size() == r.def->ops.size());
      // Threads: workers 0..n-1; a synchronous Run's caller is worker n.
      const int max_thread = workers == 0 ? 0 : async_api ? workers - 1 : workers;
      int bad = 0, order = 0;
      std::set<int> threads;
      for (size_t i = 0; i < t.size(); ++i) {
        if (t[i].start_ns < 0 || t[i].end_ns < t[i].start_ns) ++bad;
        if (t[i].thread < 0 || t[i].thread > max_thread) ++bad;
        threads.insert(t[i].thread);
        for (int p : net.graph().parents[i])
          if (t[static_cast<size_t>(p)].end_ns > t[i].start_ns) ++order;
      }
      CHECK(bad == 0);
      CHECK(order == 0);  // a child starts after its parents end
      MESSAGE("ops ran on " << threads.size() << " threads");
      std::string trace = net.TraceJson();
      CHECK(JsonChecker(trace).Valid());
      CHECK(trace.find("\"traceEvents\":[") != std::string::npos);
      CHECK(Count(trace, "\"ph\":\"X\"") == r.def->ops.size());
      CHECK(trace.find(workers ? "\"executor\":\"async\"" : "\"executor\":\"simple\"") != std::string::npos);
      for (size_t i = 0; i < t.size(); i += 37) CHECK(trace.find(StrCat("\"args\":{\"op\":", i, ",")) != std::string::npos);
    }
  }
  // Without profiling: no timings, and an empty (valid) trace.
  auto ws = std::make_shared<Workspace>();
  Feed(*ws, r);
  Net plain(r.def, ws, NetOptions{ExecutorKind::kAsync, 2});
  plain.Run();
  CHECK(plain.timings().empty());
  std::string trace = plain.TraceJson();
  CHECK(JsonChecker(trace).Valid());
  CHECK(Count(trace, "\"ph\"") == 0);
}

TEST_CASE("the JSON checker used for traces rejects malformed JSON") {
  for (const char* good : {"{}", "[]", R"({"a":[1,-2.5e+3,true,null,"x\"y\u00e9"]})", " {\"t\" : 0.125 } "})
    CHECK_MESSAGE(JsonChecker(good).Valid(), good);
  for (const char* bad : {"{", "{\"a\":}", "[1,]", "{\"a\":1,}", "{\"a\":\"tab\there\"}", "01", "[1 2]", "{}x", "\"\\q\""})
    CHECK_MESSAGE(!JsonChecker(bad).Valid(), bad);
}

TEST_CASE("trace timestamps keep sub-microsecond digits in runs longer than a second") {
  // Holds a profiled run at the gate for a bit over a second (a delay, not a
  // synchronisation: the test is only less telling if the run is shorter),
  // then checks that every event's ts and dur equal the timings to the ns.
  GatedNet n = MakeGatedNet(2, 20);
  auto ws = std::make_shared<Workspace>();
  std::mt19937 rng(21);
  ws->Feed("x", RandomFloats(rng, 4));
  NetOptions opt{ExecutorKind::kAsync, 2};
  opt.profile = true;
  Net net(n.def, ws, opt);
  g_gate.Arm();
  net.RunAsync();
  if (!g_gate.WaitStarted(1, kLongWait)) Die("the gate op to start");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  g_gate.Release();
  WaitWithBound(net);
  g_gate.Disarm();
  const auto& t = net.timings();
  int64_t latest = 0;
  for (const auto& ti : t) latest = std::max(latest, ti.start_ns);
  CHECK(latest > 1000000000);
  const std::string trace = net.TraceJson();
  CHECK(JsonChecker(trace).Valid());
  int events = 0, wrong = 0;
  std::string example;
  // Op spans ("ph":"X"); the memory counter's samples ("ph":"C") carry no duration.
  const std::string span = "\"ph\":\"X\",\"ts\":";
  for (size_t p = trace.find(span); p != std::string::npos; p = trace.find(span, p + 1)) {
    double ts = std::strtod(trace.c_str() + p + span.size(), nullptr);
    size_t d = trace.find("\"dur\":", p);
    size_t o = trace.find("\"args\":{\"op\":", p);
    REQUIRE(d != std::string::npos);
    REQUIRE(o != std::string::npos);
    double dur = std::strtod(trace.c_str() + d + 6, nullptr);
    size_t op = std::strtoul(trace.c_str() + o + 13, nullptr, 10);
    REQUIRE(op < t.size());
    ++events;
    double want_ts = static_cast<double>(t[op].start_ns) / 1000.0;
    double want_dur = static_cast<double>(t[op].end_ns - t[op].start_ns) / 1000.0;
    if (std::abs(ts - want_ts) > 0.0015 || std::abs(dur - want_dur) > 0.0015) {
      if (wrong++ == 0) example = StrCat("op ", op, ": ts ", trace.substr(p + 5, 16), " for ", t[op].start_ns, " ns");
    }
  }
  CHECK(events == static_cast<int>(n.def->ops.size()));
  CHECK_MESSAGE(wrong == 0, wrong, " events lost precision, e.g. ", example);
}
