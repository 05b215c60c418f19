// dp-bench executor: the scheduling cost of the simple and the async
// executor. Every net is made of NoOp operators chained through blobs and runs
// through the real Net / Operator / executor machinery, so the time per op is
// the executors' own overhead (plus Operator::Run around an empty kernel).
//
// Shapes (see bench/README.md): linear chain, fan-out/fan-in 1 -> N -> 1,
// binary reduction tree, seeded random leveled DAG, and the re-run latency of
// a 32-op net. Net construction and runs are timed separately; measurements of
// the executors are interleaved (round-robin, rotating the order) so that the
// noise of a shared VM falls on all of them alike.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/error.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"

namespace dpbench {
namespace {

using dp::ExecutorKind;
using dp::Net;
using dp::NetDef;
using dp::NetOptions;
using dp::OperatorDef;
using dp::Workspace;
using Clock = std::chrono::steady_clock;

int64_t Ns(Clock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }

// ---- shapes -----------------------------------------------------------------

OperatorDef NoOp(std::vector<std::string> inputs, std::vector<std::string> outputs) {
  OperatorDef op;
  op.type = "NoOp";
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  return op;
}

std::string Name(const char* prefix, int64_t i) { return prefix + std::to_string(i); }
std::string Name(const char* prefix, int64_t level, int64_t i) {
  return prefix + std::to_string(level) + "_" + std::to_string(i);
}

// op 0 writes c0; op i reads c(i-1) and writes ci. One chain: one async task.
NetDef Chain(int64_t n) {
  NetDef net;
  net.name = "chain";
  net.ops.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    net.ops.push_back(NoOp(i == 0 ? std::vector<std::string>{} : std::vector<std::string>{Name("c", i - 1)},
                           {Name("c", i)}));
  return net;
}

// A chain that the executor cannot fuse: op i reads the outputs of ops i-1
// and i-2, so every op has two parents and is its own task, yet the ops still
// run strictly one after another. Measures the async executor's per-task cost
// on a serial path (ready-count, continuation), with no parallelism to gain.
NetDef Ladder(int64_t n) {
  NetDef net;
  net.name = "ladder";
  net.ops.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<std::string> inputs;
    if (i >= 1) inputs.push_back(Name("c", i - 1));
    if (i >= 2) inputs.push_back(Name("c", i - 2));
    net.ops.push_back(NoOp(std::move(inputs), {Name("c", i)}));
  }
  return net;
}

// src -> N independent ops -> sink: N + 2 ops, N + 2 tasks.
NetDef FanOut(int64_t n) {
  NetDef net;
  net.name = "fanout";
  net.ops.push_back(NoOp({}, {"src"}));
  std::vector<std::string> mids;
  for (int64_t i = 0; i < n; ++i) {
    mids.push_back(Name("f", i));
    net.ops.push_back(NoOp({"src"}, {mids.back()}));
  }
  net.ops.push_back(NoOp(mids, {"sink"}));
  return net;
}

// A reduction tree: 2^depth leaves (no inputs), then level by level each node
// reads its two children. 2^(depth+1) - 1 ops, each its own task.
NetDef Tree(int depth) {
  NetDef net;
  net.name = "tree";
  int64_t leaves = int64_t{1} << depth;
  for (int64_t i = 0; i < leaves; ++i) net.ops.push_back(NoOp({}, {Name("t", depth, i)}));
  for (int level = depth - 1; level >= 0; --level) {
    int64_t width = int64_t{1} << level;
    for (int64_t i = 0; i < width; ++i)
      net.ops.push_back(NoOp({Name("t", level + 1, 2 * i), Name("t", level + 1, 2 * i + 1)}, {Name("t", level, i)}));
  }
  return net;
}

// splitmix64: the same DAG from the same seed on every platform.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }
};

// `levels` x `width` ops; each op of level l > 0 reads 1-3 distinct blobs of
// level l - 1 (uniformly chosen), level 0 reads nothing.
NetDef RandomDag(int levels, int width, uint64_t seed) {
  NetDef net;
  net.name = "random";
  Rng rng{seed};
  for (int l = 0; l < levels; ++l)
    for (int i = 0; i < width; ++i) {
      std::vector<std::string> inputs;
      if (l > 0) {
        int64_t k = std::min<int64_t>(1 + rng.Below(3), width);
        std::vector<int64_t> picked;
        while (static_cast<int64_t>(picked.size()) < k) {
          int64_t p = rng.Below(width);
          if (std::find(picked.begin(), picked.end(), p) == picked.end()) picked.push_back(p);
        }
        std::sort(picked.begin(), picked.end());
        for (int64_t p : picked) inputs.push_back(Name("r", l - 1, p));
      }
      net.ops.push_back(NoOp(std::move(inputs), {Name("r", l, i)}));
    }
  return net;
}

// ---- configuration and results ---------------------------------------------

struct Config {
  ExecutorKind kind;
  int workers;  // async CPU workers; 0 for simple
  std::string Label() const { return kind == ExecutorKind::kSimple ? "simple" : "async"; }
};

NetOptions OptionsFor(const Config& c) {
  NetOptions o;
  o.executor = c.kind;
  o.num_workers = c.workers;
  return o;
}

struct Result {
  std::string shape;
  int64_t size = 0;
  int64_t ops = 0;
  int64_t tasks = 0;
  Config config;
  Stats build;   // ns per op
  Stats run;     // ns per op (shapes) or us per run (re-run)
  int runs = 0;  // samples
  int64_t inner = 0;  // net runs per sample
  double ratio = 0;   // run median / simple's run median
  bool rerun = false;
};

struct Options {
  bool json = false;
  bool quick = false;
  int repeats = 7;
  std::vector<int> threads = {1, 2};
  std::vector<std::string> only;
  int cpus = 0;
};

bool Selected(const Options& o, const std::string& group) {
  return o.only.empty() || std::find(o.only.begin(), o.only.end(), group) != o.only.end();
}

std::string Fmt(double v, int prec = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

std::string WorkersLabel(const Config& c) { return c.kind == ExecutorKind::kSimple ? "-" : std::to_string(c.workers); }

void PrintHeader(const Options& o) {
  if (o.json) return;
  std::printf("%-8s %8s %8s %7s  %-6s %2s %12s %12s %12s %9s %7s\n", "shape", "size", "ops", "tasks", "exec", "w",
              "build ns/op", "run ns/op", "min ns/op", "x simple", "runs");
}

void PrintRerunHeader(const Options& o) {
  if (o.json) return;
  std::printf("\n%-10s %4s %6s  %-6s %2s %11s %11s %11s %9s %7s\n", "re-run", "ops", "tasks", "exec", "w",
              "median us", "min us", "p90 us", "x simple", "runs");
}

void Print(const Options& o, const Result& r) {
  if (o.json) {
    std::printf(
        "{\"bench\":\"executor\",\"shape\":\"%s\",\"size\":%lld,\"ops\":%lld,\"tasks\":%lld,\"executor\":\"%s\","
        "\"workers\":%d,\"cpus\":%d,",
        r.shape.c_str(), static_cast<long long>(r.size), static_cast<long long>(r.ops),
        static_cast<long long>(r.tasks), r.config.Label().c_str(), r.config.workers, o.cpus);
    if (r.rerun) {
      std::printf("\"run_us_median\":%.3f,\"run_us_min\":%.3f,\"run_us_p90\":%.3f,\"run_ns_per_op\":%.1f,", r.run.median,
                  r.run.min, r.run.p90, r.run.median * 1000.0 / static_cast<double>(r.ops));
    } else {
      std::printf(
          "\"build_ns_per_op\":%.1f,\"build_ns_per_op_min\":%.1f,\"run_ns_per_op\":%.2f,\"run_ns_per_op_min\":%.2f,"
          "\"runs_per_sample\":%lld,",
          r.build.median, r.build.min, r.run.median, r.run.min, static_cast<long long>(r.inner));
    }
    std::printf("\"runs\":%d,\"stat\":\"median\",\"ratio_vs_simple\":%.3f}\n", r.runs, r.ratio);
  } else if (r.rerun) {
    std::printf("%-10s %4lld %6lld  %-6s %2s %11.2f %11.2f %11.2f %9s %7d\n", r.shape.c_str(),
                static_cast<long long>(r.ops), static_cast<long long>(r.tasks), r.config.Label().c_str(),
                WorkersLabel(r.config).c_str(), r.run.median, r.run.min, r.run.p90,
                r.config.kind == ExecutorKind::kSimple ? "" : Fmt(r.ratio, 2).c_str(), r.runs);
  } else {
    std::printf("%-8s %8lld %8lld %7lld  %-6s %2s %12.1f %12.1f %12.1f %9s %7d\n", r.shape.c_str(),
                static_cast<long long>(r.size), static_cast<long long>(r.ops), static_cast<long long>(r.tasks),
                r.config.Label().c_str(), WorkersLabel(r.config).c_str(), r.build.median, r.run.median, r.run.min,
                r.config.kind == ExecutorKind::kSimple ? "" : Fmt(r.ratio, 2).c_str(), r.runs);
  }
  std::fflush(stdout);
}

std::vector<Config> Configs(const Options& o) {
  std::vector<Config> c{{ExecutorKind::kSimple, 0}};
  for (int w : o.threads) c.push_back({ExecutorKind::kAsync, w});
  return c;
}

void SetRatios(std::vector<Result>& rs) {
  double simple = 0;
  for (const auto& r : rs)
    if (r.config.kind == ExecutorKind::kSimple) simple = r.run.median;
  for (auto& r : rs) r.ratio = simple > 0 ? r.run.median / simple : 0;
}

// ---- measurements -------------------------------------------------------------

// Per repeat and executor (order rotated every repeat): a fresh workspace and
// Net (constructor timed), two warm-up runs, then `inner` runs timed together
// so that one sample lasts about `target_ns`. One extra untimed repeat first.
std::vector<Result> MeasureShape(const Options& o, const std::string& shape, int64_t size,
                                 std::shared_ptr<const NetDef> def) {
  const std::vector<Config> configs = Configs(o);
  const size_t nc = configs.size();
  const int64_t ops = static_cast<int64_t>(def->ops.size());
  const double target_ns = o.quick ? 2e6 : 20e6;
  std::vector<std::vector<double>> build(nc), run(nc);
  std::vector<int64_t> tasks(nc, 0), inner(nc, 0);
  for (int rep = -1; rep < o.repeats; ++rep) {
    for (size_t k = 0; k < nc; ++k) {
      size_t c = (static_cast<size_t>(rep + 1) + k) % nc;
      auto ws = std::make_shared<Workspace>();
      auto t0 = Clock::now();
      auto net = std::make_unique<Net>(def, ws, OptionsFor(configs[c]));
      auto t1 = Clock::now();
      tasks[c] = static_cast<int64_t>(net->graph().chains.size());
      net->Run();
      auto w0 = Clock::now();
      net->Run();
      auto w1 = Clock::now();
      if (inner[c] == 0)
        inner[c] = std::clamp<int64_t>(static_cast<int64_t>(target_ns / std::max<double>(1.0, Ns(w1 - w0))), 1,
                                       int64_t{1} << 20);
      auto r0 = Clock::now();
      for (int64_t i = 0; i < inner[c]; ++i) net->Run();
      auto r1 = Clock::now();
      net.reset();
      if (rep < 0) continue;
      build[c].push_back(static_cast<double>(Ns(t1 - t0)) / static_cast<double>(ops));
      run[c].push_back(static_cast<double>(Ns(r1 - r0)) / static_cast<double>(inner[c]) / static_cast<double>(ops));
    }
  }
  std::vector<Result> rs;
  for (size_t c = 0; c < nc; ++c) {
    Result r;
    r.shape = shape;
    r.size = size;
    r.ops = ops;
    r.tasks = tasks[c];
    r.config = configs[c];
    r.build = Summarise(build[c]);
    r.run = Summarise(run[c]);
    r.runs = static_cast<int>(run[c].size());
    r.inner = inner[c];
    rs.push_back(r);
  }
  SetRatios(rs);
  for (const auto& r : rs) Print(o, r);
  return rs;
}

// One Net per executor, built once; `runs` single runs each timed on its own,
// in blocks of 500 rotated between the executors. Reports us per run.
std::vector<Result> MeasureRerun(const Options& o, const std::string& shape, std::shared_ptr<const NetDef> def,
                                 int runs) {
  const std::vector<Config> configs = Configs(o);
  const size_t nc = configs.size();
  auto ws = std::make_shared<Workspace>();
  std::vector<std::unique_ptr<Net>> nets;
  for (const auto& c : configs) nets.push_back(std::make_unique<Net>(def, ws, OptionsFor(c)));
  const int warmup = std::max(100, runs / 10);
  for (auto& n : nets)
    for (int i = 0; i < warmup; ++i) n->Run();
  const int block = std::min(500, runs);
  std::vector<std::vector<double>> us(nc);
  for (auto& v : us) v.reserve(static_cast<size_t>(runs));
  for (int b = 0; static_cast<int>(us[0].size()) < runs; ++b) {
    for (size_t k = 0; k < nc; ++k) {
      size_t c = (static_cast<size_t>(b) + k) % nc;
      Net& net = *nets[c];
      int todo = std::min(block, runs - static_cast<int>(us[c].size()));
      for (int i = 0; i < todo; ++i) {
        auto t0 = Clock::now();
        net.Run();
        auto t1 = Clock::now();
        us[c].push_back(static_cast<double>(Ns(t1 - t0)) / 1000.0);
      }
    }
  }
  std::vector<Result> rs;
  for (size_t c = 0; c < nc; ++c) {
    Result r;
    r.shape = shape;
    r.size = static_cast<int64_t>(def->ops.size());
    r.ops = r.size;
    r.tasks = static_cast<int64_t>(nets[c]->graph().chains.size());
    r.config = configs[c];
    r.run = Summarise(us[c]);
    r.runs = static_cast<int>(us[c].size());
    r.rerun = true;
    rs.push_back(r);
  }
  SetRatios(rs);
  for (const auto& r : rs) Print(o, r);
  return rs;
}

int UsageError(const std::string& msg) {
  std::fprintf(stderr,
               "dp-bench executor: %s\n"
               "usage: dp-bench executor [--json] [--quick] [--repeats N] [--threads N|N,M,...] "
               "[--only chain,ladder,fanout,tree,random,rerun]\n",
               msg.c_str());
  return 2;
}

}  // namespace

int ExecutorMain(int argc, char** argv) {
  Options o;
  bool repeats_set = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)name;
      return argv[++i];
    };
    if (a == "--json") {
      o.json = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--repeats") {
      const char* v = value("--repeats");
      if (v == nullptr || !ParseInt(v, 1, 100000, &o.repeats)) return UsageError("--repeats needs a count >= 1");
      repeats_set = true;
    } else if (a == "--threads") {
      const char* v = value("--threads");
      if (v == nullptr) return UsageError("--threads needs a worker count");
      std::vector<std::string> parts = Split(v);
      std::vector<int> ts;
      for (const auto& p : parts) {
        int t = 0;
        if (!ParseInt(p.c_str(), 1, 1024, &t)) return UsageError("--threads needs worker counts >= 1");
        ts.push_back(t);
      }
      if (ts.empty()) return UsageError("--threads needs a worker count");
      if (ts.size() == 1 && ts[0] > 1) ts.insert(ts.begin(), 1);  // N: measure 1 and N
      o.threads = ts;
    } else if (a == "--only") {
      const char* v = value("--only");
      if (v == nullptr) return UsageError("--only needs shape names");
      o.only = Split(v);
      for (const auto& s : o.only)
        if (s != "chain" && s != "ladder" && s != "fanout" && s != "tree" && s != "random" && s != "rerun")
          return UsageError("unknown shape '" + s + "'");
    } else {
      return UsageError("unknown option '" + a + "'");
    }
  }
  if (o.quick && !repeats_set) o.repeats = 3;
  o.cpus = PinToAllowedCpus();

  if (!o.json) {
    std::printf("dp-bench executor: %d allowed CPUs (process pinned to them), async CPU workers:", o.cpus);
    for (int t : o.threads) std::printf(" %d", t);
    std::printf(", %d repeats%s\n", o.repeats, o.quick ? " (quick)" : "");
    std::printf(
        "NoOp nets through dp::Net. ns/op: median over repeats of (time of one run / ops); build: Net constructor.\n"
        "Async runs on the calling thread plus its workers. Shared VMs are noisy: compare within one run.\n\n");
  }

  std::vector<Result> all;
  auto add = [&](std::vector<Result> rs) { all.insert(all.end(), rs.begin(), rs.end()); };
  try {
    if (Selected(o, "chain") || Selected(o, "ladder") || Selected(o, "fanout") || Selected(o, "tree") || Selected(o, "random"))
      PrintHeader(o);
    if (Selected(o, "chain")) {
      std::vector<int64_t> sizes = o.quick ? std::vector<int64_t>{1000, 10000}
                                           : std::vector<int64_t>{1000, 10000, 100000, 1000000};
      for (int64_t n : sizes) add(MeasureShape(o, "chain", n, std::make_shared<const NetDef>(Chain(n))));
    }
    if (Selected(o, "ladder")) {
      std::vector<int64_t> sizes = o.quick ? std::vector<int64_t>{1000, 10000}
                                           : std::vector<int64_t>{1000, 10000, 100000};
      for (int64_t n : sizes) add(MeasureShape(o, "ladder", n, std::make_shared<const NetDef>(Ladder(n))));
    }
    if (Selected(o, "fanout")) {
      std::vector<int64_t> sizes = o.quick ? std::vector<int64_t>{16, 256} : std::vector<int64_t>{16, 256, 4096};
      for (int64_t n : sizes) add(MeasureShape(o, "fanout", n, std::make_shared<const NetDef>(FanOut(n))));
    }
    if (Selected(o, "tree")) {
      std::vector<int> depths = o.quick ? std::vector<int>{6, 10} : std::vector<int>{10, 14};
      for (int d : depths) add(MeasureShape(o, "tree", d, std::make_shared<const NetDef>(Tree(d))));
    }
    if (Selected(o, "random")) {
      std::vector<std::pair<int, int>> dims = o.quick ? std::vector<std::pair<int, int>>{{10, 20}, {20, 50}}
                                                      : std::vector<std::pair<int, int>>{{20, 50}, {100, 100}};
      for (auto [levels, width] : dims)
        add(MeasureShape(o, "random", int64_t{levels} * width,
                         std::make_shared<const NetDef>(RandomDag(levels, width, 42))));
    }
    if (Selected(o, "rerun")) {
      const int runs = o.quick ? 1000 : 10000;
      PrintRerunHeader(o);
      add(MeasureRerun(o, "chain32", std::make_shared<const NetDef>(Chain(32)), runs));
      add(MeasureRerun(o, "random32", std::make_shared<const NetDef>(RandomDag(4, 8, 7)), runs));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dp-bench executor: %s\n", e.what());
    return 1;
  }

  // Targets (for a 2-CPU machine): async <= 200 ns per op on the linear chain
  // (NoOps: all of it is overhead) and <= 5 us to re-run a 32-op net.
  FILE* out = o.json ? stderr : stdout;
  double worst_chain = -1, worst_delta = 0, worst_rerun = -1;
  std::string worst_chain_at, worst_rerun_at;
  for (const auto& r : all) {
    if (r.config.kind != ExecutorKind::kAsync) continue;
    if (!r.rerun && r.shape == "chain" && r.run.median > worst_chain) {
      worst_chain = r.run.median;
      worst_chain_at = dp::StrCat(r.size, " ops, ", r.config.workers, " workers");
      for (const auto& s : all)
        if (!s.rerun && s.shape == "chain" && s.size == r.size && s.config.kind == ExecutorKind::kSimple)
          worst_delta = r.run.median - s.run.median;
    }
    if (r.rerun && r.run.median > worst_rerun) {
      worst_rerun = r.run.median;
      worst_rerun_at = dp::StrCat(r.shape, ", ", r.config.workers, " workers");
    }
  }
  std::fprintf(out, "\ntargets:\n");
  if (worst_chain >= 0)
    std::fprintf(out, "  async chain <= 200 ns/op: worst median %.1f ns/op (%+.1f vs simple) at %s: %s\n", worst_chain,
                 worst_delta, worst_chain_at.c_str(), worst_chain <= 200 ? "met" : "MISSED");
  if (worst_rerun >= 0)
    std::fprintf(out, "  async 32-op re-run <= 5 us: worst median %.2f us (%s): %s\n", worst_rerun,
                 worst_rerun_at.c_str(), worst_rerun <= 5.0 ? "met" : "MISSED");
  return 0;
}

}  // namespace dpbench
