// Nets and the simple executor: instantiation, repeated runs, error reports,
// overlapping runs, workspace sharing between an init net and a main net.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "exec/net.h"
#include "exec/worker_pool.h"
#include "expect_error.h"
#include "graph/net_format.h"

using namespace dp;
using dp::testing::ExpectError;

namespace {

std::shared_ptr<const NetDef> Parse(const char* json) { return std::make_shared<const NetDef>(NetDefFromJson(json)); }

Tensor Floats(Dims dims, std::vector<float> values) {
  Tensor t(std::move(dims), DType::kFloat32);
  REQUIRE(static_cast<size_t>(t.numel()) == values.size());
  std::copy(values.begin(), values.end(), t.mutable_data<float>());
  return t;
}

const char* kInit = R"({"name":"init","ops":[
  {"type":"XavierFill","outputs":["w"],"args":[{"name":"shape","ints":[3,4]},{"name":"seed","i":1}]},
  {"type":"ConstantFill","outputs":["b"],"args":[{"name":"shape","ints":[3]},{"name":"value","f":0.5}]}]})";

const char* kMain = R"({"name":"main","external_inputs":["x","w","b"],"ops":[
  {"type":"FC","name":"fc","inputs":["x","w","b"],"outputs":["y"]},
  {"type":"Relu","inputs":["y"],"outputs":["y"]},
  {"type":"Softmax","inputs":["y"],"outputs":["p"]}]})";

}  // namespace

TEST_CASE("init net then main net share a workspace; runs repeat") {
  auto ws = std::make_shared<Workspace>();
  Net init(Parse(kInit), ws);
  init.Run();
  CHECK(ws->GetTensor("w").dims() == Dims{3, 4});
  Net main(Parse(kMain), ws);
  CHECK(main.executor_kind() == ExecutorKind::kSimple);
  ws->Feed("x", Floats({2, 4}, {1, 2, 3, 4, -1, -2, -3, -4}));
  main.Run();
  Tensor first = ws->GetTensor("p");  // a fetched copy keeps its values
  std::vector<float> before(first.data<float>(), first.data<float>() + 6);
  const float* w = ws->GetTensor("w").data<float>();
  for (int r = 0; r < 2; ++r) {
    float sum = 0;
    for (int c = 0; c < 3; ++c) sum += first.data<float>()[r * 3 + c];
    CHECK(sum == doctest::Approx(1.0f).epsilon(1e-6));
  }
  // Reference for row 0.
  float y[3];
  const float* x = ws->GetTensor("x").data<float>();
  for (int o = 0; o < 3; ++o) {
    float acc = 0.5f;
    for (int k = 0; k < 4; ++k) acc += x[k] * w[o * 4 + k];
    y[o] = std::max(acc, 0.0f);
  }
  float mx = std::max({y[0], y[1], y[2]}), z = 0;
  for (float v : y) z += std::exp(v - mx);
  for (int o = 0; o < 3; ++o) CHECK(first.data<float>()[o] == doctest::Approx(std::exp(y[o] - mx) / z).epsilon(1e-5));

  ws->Feed("x", Floats({2, 4}, {4, 3, 2, 1, 0, 0, 0, 0}));
  main.Run();
  for (int i = 0; i < 6; ++i) CHECK(first.data<float>()[i] == before[static_cast<size_t>(i)]);
  CHECK(ws->GetTensor("p").data<float>()[0] != before[0]);
}

TEST_CASE("errors name the net, the op, its device and the blob; the net stays usable") {
  auto ws = std::make_shared<Workspace>();
  Net init(Parse(kInit), ws);
  init.Run();
  Net main(Parse(kMain), ws);
  ExpectError([&] { main.Run(); }, Code::kNotFound, {"net 'main'", "'x'"});  // without x
  ws->Feed("x", Floats({2, 5}, std::vector<float>(10, 1.0f)));
  ExpectError([&] { main.Run(); }, Code::kShape, {"net 'main'", "op 0 (FC 'fc')", "cpu:0", "[2, 5]"});
  Tensor ints({2, 4}, DType::kInt32);
  std::fill(ints.mutable_data<int32_t>(), ints.mutable_data<int32_t>() + 8, 1);
  ws->Feed("x", ints);
  ExpectError([&] { main.Run(); }, Code::kDType, {"op 0 (FC 'fc')"});
  ws->Feed("x", Floats({1, 4}, {1, 1, 1, 1}));
  main.Run();  // usable after errors
  CHECK(ws->GetTensor("p").dims() == Dims{1, 3});
}

TEST_CASE("net creation checks kernels, devices and executor choice") {
  auto ws = std::make_shared<Workspace>();
  ExpectError(  // a net on a missing GPU
      [&] {
        Net n(Parse(R"({"name":"g","ops":[{"type":"ConstantFill","outputs":["y"],"device":{"type":"CUDA","id":7},
                       "args":[{"name":"shape","ints":[1]}]}]})"),
              ws);
      },
      Code::kUnavailable, {"cuda:7", "op 0 (ConstantFill)"});
  // Executor choice: the caller's option, else the definition's, else async
  // only for nets that span several devices.
  CHECK(Net(Parse(kInit), ws, NetOptions{ExecutorKind::kAsync, 2}).executor_kind() == ExecutorKind::kAsync);
  CHECK(Net(Parse(kInit), ws).executor_kind() == ExecutorKind::kSimple);
  CHECK(Net(Parse(R"({"executor":"Async","ops":[]})"), ws).executor_kind() == ExecutorKind::kAsync);
  CHECK(Net(Parse(R"({"ops":[{"type":"ConstantFill","outputs":["a"]},
                   {"type":"ConstantFill","outputs":["b"],"device":{"type":"CPU","id":1}}]})"),
            ws)
            .executor_kind() == ExecutorKind::kAsync);
  ExpectError([&] { Net n(Parse(R"({"ops":[{"type":"Relu","inputs":["nothing"],"outputs":["y"]}]})"), ws); },
              Code::kInvalidNet);
  // Logical CPU devices: any id is a replica of the host.
  Net cpu3(Parse(R"({"ops":[{"type":"ConstantFill","outputs":["y"],"device":{"type":"CPU","id":3},
                    "args":[{"name":"shape","ints":[2]},{"name":"value","f":3}]}]})"),
           ws);
  cpu3.Run();
  CHECK(ws->GetTensor("y").device() == DeviceOption{DeviceType::kCPU, 3});
  CHECK(ws->GetTensor("y").data<float>()[1] == 3.0f);
}

TEST_CASE("overlapping runs of one net are rejected, not raced") {
  auto ws = std::make_shared<Workspace>();
  // A net long enough that two threads starting together overlap.
  std::string json = R"({"name":"long","ops":[{"type":"ConstantFill","outputs":["a"],"args":[{"name":"shape","ints":[64]}]})";
  for (int i = 0; i < 20000; ++i) json += R"(,{"type":"Scale","inputs":["a"],"outputs":["a"],"args":[{"name":"scale","f":1}]})";
  json += "]}";
  Net net(Parse(json.c_str()), ws);
  std::atomic<int> rejected{0}, ok{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t)
    ts.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int r = 0; r < 5; ++r) {
        try {
          net.Run();
          ++ok;
        } catch (const Error& e) {
          CHECK(e.code() == Code::kFailedPrecondition);
          CHECK(e.message().find("already running") != std::string::npos);
          ++rejected;
        }
      }
    });
  go = true;
  for (auto& t : ts) t.join();
  CHECK(ok + rejected == 10);
  CHECK(ok >= 1);
  MESSAGE("overlapping runs: " << ok.load() << " ran, " << rejected.load() << " rejected");
  net.Run();  // not left in the running state
}

TEST_CASE("shapes whose byte size overflows fail cleanly instead of allocating 0 bytes") {
  auto ws = std::make_shared<Workspace>();
  for (const char* json :
       {R"({"ops":[{"type":"ConstantFill","outputs":["y"],"args":[{"name":"shape","ints":[2305843009213693952]},{"name":"dtype","i":4}]},
                  {"type":"Relu","inputs":["y"],"outputs":["z"]}]})",
        R"({"ops":[{"type":"UniformFill","outputs":["y"],"args":[{"name":"shape","ints":[4611686018427387904]}]}]})"}) {
    Net net(Parse(json), ws);
    ExpectError([&] { net.Run(); }, Code::kShape, {"op 0", "does not fit"});  // an impossible tensor
  }
}

TEST_CASE("kernels only receive tensors they can address; Copy may cross devices") {
  auto ws = std::make_shared<Workspace>();
  // A tensor that claims to live on cuda:0. It is never dereferenced: the
  // device check rejects it before any kernel runs.
  float host[2] = {1, 2};
  ws->Feed("x", Tensor::FromStorage({2}, DType::kFloat32, Storage::Borrow({DeviceType::kCUDA, 0}, host, sizeof host)));
  Net relu(Parse(R"({"name":"r","external_inputs":["x"],"ops":[{"type":"Relu","inputs":["x"],"outputs":["y"]}]})"), ws);
  ExpectError([&] { relu.Run(); }, Code::kInvalidArgument, {"op 0 (Relu)", "'x'", "cuda:0", "cpu:0", "Copy"});
  // CPU device ids are logical replicas of the host: cpu:1 reads cpu:0 data.
  ws->Feed("z", Floats({2}, {-1, 3}));
  Net replica(Parse(R"({"external_inputs":["z"],"ops":[{"type":"Relu","inputs":["z"],"outputs":["r"],
                        "device":{"type":"CPU","id":1}}]})"),
              ws);
  replica.Run();
  CHECK(ws->GetTensor("r").data<float>()[1] == 3.0f);
  CHECK(OpSchemaRegistry::Find("Copy")->inputs_can_cross_devices());
  CHECK_FALSE(OpSchemaRegistry::Find("FC")->inputs_can_cross_devices());
}

TEST_CASE("ConstantFill refuses values its integer dtype cannot hold") {
  auto ws = std::make_shared<Workspace>();
  auto fill = [&](const char* value_arg, int dtype) {
    std::string json = std::string(R"({"ops":[{"type":"ConstantFill","outputs":["y"],"args":[{"name":"shape","ints":[2]},)") +
                       value_arg + R"(,{"name":"dtype","i":)" + std::to_string(dtype) + "}]}]}";
    Net(Parse(json.c_str()), ws).Run();
  };
  // Not structured bindings: clang 14 cannot capture them (INFO's lambda).
  for (const auto& value_dtype : std::vector<std::pair<const char*, int>>{{R"({"name":"value","i":-1})", 7},
                                                                         {R"({"name":"value","f":1e10})", 5},
                                                                         {R"({"name":"value","f":NaN})", 6},
                                                                         {R"({"name":"value","i":256})", 7}}) {
    const char* arg = value_dtype.first;
    const int dtype = value_dtype.second;
    INFO("filling ", arg, " into dtype ", dtype);
    ExpectError([&] { fill(arg, dtype); }, Code::kOutOfRange, {"does not fit"});
  }
  fill(R"({"name":"value","i":255})", 7);
  CHECK(ws->GetTensor("y").data<uint8_t>()[1] == 255);
  fill(R"({"name":"value","i":-9007199254740993})", 6);  // 2^53 + 1: exact as an int
  CHECK(ws->GetTensor("y").data<int64_t>()[0] == -9007199254740993LL);
  fill(R"({"name":"value","f":-2.0})", 5);
  CHECK(ws->GetTensor("y").data<int32_t>()[0] == -2);
}

// Issue 10: a workspace memory limit, and exceptions of any type from ops.
namespace {

const ExecutorKind kBothExecutors[] = {ExecutorKind::kSimple, ExecutorKind::kAsync};

NetOptions WithExecutor(ExecutorKind kind) {
  NetOptions o;
  o.executor = kind;
  o.num_workers = 2;
  return o;
}

}  // namespace

TEST_CASE("a workspace's memory limit: outputs past it are kOutOfMemory naming op and blob; bytes come back") {
  for (ExecutorKind kind : kBothExecutors) {
    CAPTURE(static_cast<int>(kind));
    WorkspaceOptions wo;
    wo.max_bytes = 64 * 1024;
    auto ws = std::make_shared<Workspace>(wo);
    const MemoryBudget& budget = *ws->budget();
    Net init(Parse(kInit), ws, WithExecutor(kind));
    init.Run();
    CHECK(budget.used() == 48 + 12);  // w [3, 4] and b [3] float32
    Net main(Parse(kMain), ws, WithExecutor(kind));
    ws->Feed("x", Floats({2, 4}, {1, 2, 3, 4, -1, -2, -3, -4}));  // the caller's: not counted
    main.Run();
    CHECK(budget.used() == 60 + 24 + 24);  // + y [2, 3] and p [2, 3]

    // An FC output of 20000 x 3 floats (240000 bytes) does not fit.
    ws->Feed("x", Tensor({20000, 4}, DType::kFloat32));
    ExpectError([&] { main.Run(); }, Code::kOutOfMemory,  // a 240000-byte output under a 65536-byte limit
                {"net 'main'", "op 0 (FC 'fc')", "Y 'y'", "65536", "240000"});
    CHECK(budget.used() == 60 + 24);  // y went back before the refused allocation; p stays

    // The workspace and the net stay usable.
    ws->Feed("x", Floats({4, 4}, std::vector<float>(16, 1.0f)));
    main.Run();
    CHECK(ws->GetTensor("p").dims() == Dims{4, 3});
    CHECK(budget.used() == 60 + 48 + 48);
    // A fetched tensor keeps its bytes counted until it is gone. (y, the
    // net's sole owner of its block, keeps its 48 bytes for 24: within the
    // slack Resize allows before it reallocates.)
    Tensor fetched = ws->GetTensor("p");
    ws->Feed("x", Floats({2, 4}, {1, 2, 3, 4, -1, -2, -3, -4}));
    main.Run();
    CHECK(budget.used() == 60 + 48 + 24 + 48);
    fetched = Tensor();
    CHECK(budget.used() == 60 + 48 + 24);
    // Clearing (or overwriting by a feed) gives a blob's bytes back.
    ws->GetBlob("p")->Clear();
    CHECK(budget.used() == 60 + 48);
    ws->Feed("y", Tensor({1}, DType::kFloat32));
    CHECK(budget.used() == 60);

    // The limit counts what the workspace holds, whichever net allocates it.
    Net big(Parse(R"({"name":"fills","ops":[
      {"type":"ConstantFill","name":"small","outputs":["s"],"args":[{"name":"shape","ints":[1000]}]},
      {"type":"ConstantFill","name":"huge","outputs":["h"],"args":[{"name":"shape","ints":[100000]}]}]})"),
            ws, WithExecutor(kind));
    ExpectError([&] { big.Run(); }, Code::kOutOfMemory,  // a 400000-byte fill under a 65536-byte limit
                {"net 'fills'", "op 1 (ConstantFill 'huge')", "'h'", "65536", "400000"});
    CHECK(budget.used() <= 60 + 4000);
  }
}

TEST_CASE("without a limit the same nets run and the workspace still counts its bytes") {
  auto ws = std::make_shared<Workspace>();
  Net init(Parse(kInit), ws);
  init.Run();
  Net main(Parse(kMain), ws);
  ws->Feed("x", Floats({20000, 4}, std::vector<float>(80000, 0.5f)));
  main.Run();
  CHECK(ws->budget()->limit() == 0);
  CHECK(ws->budget()->used() == 60 + 2 * 240000);
}

namespace {

// Ops that throw what kernels should never throw, but might.
template <int kWhat>
class TestThrowOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    if constexpr (kWhat == 0) throw std::bad_alloc();
    if constexpr (kWhat == 1) throw std::runtime_error("boom");
    if constexpr (kWhat == 2) std::vector<double>().reserve(std::numeric_limits<size_t>::max());  // length_error
    if constexpr (kWhat == 3) throw 42;
  }
};
DP_OPERATOR_SCHEMA(TestThrow0).NumInputs(0).NumOutputs(1).Doc("test only: throws std::bad_alloc");
DP_OPERATOR_SCHEMA(TestThrow1).NumInputs(0).NumOutputs(1).Doc("test only: throws std::runtime_error");
DP_OPERATOR_SCHEMA(TestThrow2).NumInputs(0).NumOutputs(1).Doc("test only: throws std::length_error");
DP_OPERATOR_SCHEMA(TestThrow3).NumInputs(0).NumOutputs(1).Doc("test only: throws an int");
DP_REGISTER_CPU_OPERATOR(TestThrow0, TestThrowOp<0>);
DP_REGISTER_CPU_OPERATOR(TestThrow1, TestThrowOp<1>);
DP_REGISTER_CPU_OPERATOR(TestThrow2, TestThrowOp<2>);
DP_REGISTER_CPU_OPERATOR(TestThrow3, TestThrowOp<3>);

}  // namespace

TEST_CASE("whatever an op throws becomes that op's error on both executors; the net stays usable") {
  struct Case {
    int what;
    Code code;
    const char* needle;
  };
  for (ExecutorKind kind : kBothExecutors)
    for (Case c : {Case{0, Code::kOutOfMemory, "out of memory"}, Case{1, Code::kInternal, "boom"},
                   Case{2, Code::kOutOfMemory, "out of memory"}, Case{3, Code::kInternal, "unknown exception"}}) {
      CAPTURE(static_cast<int>(kind));
      CAPTURE(c.what);
      auto ws = std::make_shared<Workspace>();
      // Independent ops, so that the async executor runs the thrower on a worker.
      std::string json = R"({"name":"t","ops":[)";
      for (int i = 0; i < 8; ++i)
        json += StrCat(R"({"type":"ConstantFill","outputs":["f)", i, R"("],"args":[{"name":"shape","ints":[4]}]},)");
      json += StrCat(R"({"type":"TestThrow)", c.what, R"(","name":"thrower","outputs":["y"]}]})");
      Net net(Parse(json.c_str()), ws, WithExecutor(kind));
      for (int run = 0; run < 3; ++run) {
        ExpectError([&] { net.Run(); }, c.code,
                    {"net 't'", StrCat("op 8 (TestThrow", c.what, " 'thrower') on cpu:0"), c.needle});
      }
      // Asynchronous runs report it through Wait.
      net.RunAsync();
      ExpectError([&] { net.Wait(); }, c.code);
    }
}

TEST_CASE("a worker pool's reserved ring is not grown by pushes within it") {
  struct Counter final : TaskRunner {
    std::atomic<int> runs{0};
    void RunTask(int, int) override { ++runs; }
  } counter;
  WorkerPool pool(2);
  pool.Reserve(1000);
  CHECK(pool.capacity() == 1024);
  std::vector<int> tasks(1000);
  pool.Push(&counter, tasks.data(), tasks.size());
  CHECK(pool.capacity() == 1024);
  while (pool.RunOne(pool.size())) {
  }
  while (counter.runs.load() < 1000) std::this_thread::yield();
  pool.Push(&counter, tasks.data(), tasks.size());
  CHECK(pool.capacity() == 1024);
  while (counter.runs.load() < 2000) std::this_thread::yield();
}

// Regression (fuzzing): a net asking for 2^31 - 1 workers reserved room for
// that many threads (16 GB) before starting any.
TEST_CASE("worker counts past the limit are INVALID_ARGUMENT, not a process-sized allocation") {
  auto def = Parse(R"({"name":"n","executor":"Async","num_workers":2147483647,"ops":[
    {"type":"ConstantFill","outputs":["a"],"args":[{"name":"shape","ints":[2]}]}]})");
  auto ws = std::make_shared<Workspace>();
  ExpectError([&] { Net net(def, ws); }, Code::kInvalidArgument, {"num_workers 2147483647", "1024"});
  NetOptions o;
  o.executor = ExecutorKind::kAsync;
  o.streams_per_gpu = 1025;
  CHECK_THROWS_AS(Net(def, ws, o), Error);
  o.streams_per_gpu = 1;
  o.num_workers = AsyncOptions::kMaxWorkers;  // the limit itself is allowed
  CHECK_NOTHROW(Net(def, ws, o));
}

namespace {

// Thread t's k-th tensor for the shared blob: 1 + (t + k) % 5 elements of
// value 1000 t + k, so a fetch can tell a whole tensor from a torn one.
int64_t SharedNumel(int t, int k) { return 1 + (t + k) % 5; }

// n elements of `value` (no doctest assertion: worker threads call it).
Tensor Filled(int64_t n, float value) {
  Tensor t({n}, DType::kFloat32);
  std::fill_n(t.mutable_data<float>(), n, value);
  return t;
}

// Whether t holds n > 0 float32 elements, all equal; their value in *value.
bool Uniform(const Tensor& t, int64_t* n, float* value) {
  if (t.dtype() != DType::kFloat32 || t.ndim() != 1 || t.numel() == 0) return false;
  const float* v = t.data<float>();
  for (int64_t i = 1; i < t.numel(); ++i)
    if (v[i] != v[0]) return false;
  *n = t.numel();
  *value = v[0];
  return true;
}

}  // namespace

// Regression (issue 25, item 12): eight threads feeding one blob freed its
// tensor twice ("double free or corruption") and fetches read it torn. The
// workspace's own calls (Feed, GetTensor, Blobs) are serialised per blob and
// may race with each other on any blob, and fetch blobs a running net reads.
TEST_CASE("feeds and fetches of one blob and of many from 8 threads, while a net reading them runs") {
  constexpr int kThreads = 8, kIters = 200, kRuns = 100;
  auto ws = std::make_shared<Workspace>();
  ws->Feed("w", Filled(64, 0.5f));
  ws->Feed("b", Filled(1, -1.0f));
  Net reader(Parse(R"({"name":"reader","external_inputs":["w","b"],"ops":[
    {"type":"Scale","inputs":["w"],"outputs":["y"],"args":[{"name":"scale","f":2}]},
    {"type":"Scale","inputs":["b"],"outputs":["z"],"args":[{"name":"scale","f":3}]}]})"),
             ws);
  std::atomic<int> failures{0}, run_failures{0}, ready{0};
  std::atomic<bool> go{false};
  auto start_together = [&] {
    ++ready;
    while (!go.load()) std::this_thread::yield();
  };
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    start_together();
    for (int r = 0; r < kRuns; ++r) {
      try {
        reader.Run();
      } catch (const Error& e) {
        MESSAGE(e.what());
        ++run_failures;
      }
    }
  });
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const std::string own = "own/" + std::to_string(t);
      start_together();
      for (int k = 0; k < kIters; ++k) {
        int64_t n = 0;
        float v = 0;
        ws->Feed("shared", Filled(SharedNumel(t, k), static_cast<float>(1000 * t + k)));
        ws->Feed(own, Filled(3, static_cast<float>(k)));
        if (!Uniform(ws->GetTensor("shared"), &n, &v) || n != SharedNumel(static_cast<int>(v) / 1000, static_cast<int>(v) % 1000))
          ++failures;
        if (!Uniform(ws->GetTensor(own), &n, &v) || n != 3 || v != static_cast<float>(k)) ++failures;
        // Blobs the running net reads.
        if (!Uniform(ws->GetTensor("w"), &n, &v) || n != 64 || v != 0.5f) ++failures;
        if (!Uniform(ws->GetTensor("b"), &n, &v) || n != 1 || v != -1.0f) ++failures;
        if (ws->GetBlob("shared")->empty() || ws->Blobs("own/").empty()) ++failures;
      }
    });
  while (ready.load() < kThreads + 1) std::this_thread::yield();
  go = true;
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  CHECK(run_failures.load() == 0);
  int64_t n = 0;
  float v = 0;
  CHECK((Uniform(ws->GetTensor("y"), &n, &v) && n == 64 && v == 1.0f));
  CHECK((Uniform(ws->GetTensor("z"), &n, &v) && n == 1 && v == -3.0f));
  CHECK(ws->Blobs("own/").size() == kThreads);
}

TEST_CASE("fetching a blob says whether it is absent, empty or not a tensor") {
  auto ws = std::make_shared<Workspace>();
  Net net(Parse(R"({"name":"n","ops":[{"type":"ConstantFill","outputs":["c"],"args":[{"name":"shape","ints":[2]}]}]})"),
          ws);  // creates c, empty until the net runs
  ExpectError([&] { ws->GetTensor("nope"); }, Code::kNotFound, {"no blob named 'nope'"});
  ExpectError([&] { ws->GetTensor("c"); }, Code::kNotFound, {"blob 'c' is empty", "nothing has been fed"});
  ws->CreateBlob("counter")->Publish(std::make_shared<int>(3));
  ExpectError([&] { ws->GetTensor("counter"); }, Code::kDType, {"blob 'counter' holds int, not dp::Tensor"});
  net.Run();
  CHECK(ws->GetTensor("c").numel() == 2);
}

TEST_CASE("a fed blob that no net of the workspace reads is reported once, or fails a strict run") {
  static std::vector<std::string> warnings;
  warnings.clear();
  SetLogSink([](void*, int32_t, const char* m) { warnings.emplace_back(m); }, nullptr, LogLevel::kWarning);
  auto ws = std::make_shared<Workspace>();
  FeedWatch& feeds = ws->feeds();
  auto feed = [&](const std::string& name, float v) {  // as dp_workspace_feed does
    ws->Feed(name, Floats({1}, {v}));
    feeds.NoteFed(*ws->GetBlob(name));
  };
  const char* relu = R"({"name":"relu","external_inputs":["input"],"ops":[
    {"type":"Relu","inputs":["input"],"outputs":["out"]}]})";
  {
    Net net(Parse(relu), ws);
    CHECK(!feeds.pending());
    feed("input", 1);
    CHECK(feeds.pending());
    net.Run();  // read: nothing to say, and the feed is forgotten
    CHECK(!feeds.pending());
    feed("inptu", 2);
    feed("inptu", 3);  // fed twice between runs: one report
    net.Run();
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0] == "net 'relu': fed blob 'inptu' is read by no net of the workspace (did you mean 'input'?); "
                         "the run goes on without it (reported once per blob)");
    CHECK(ws->GetTensor("out").data<float>()[0] == 1.0f);
    feed("inptu", 2);
    net.Run();
    CHECK(warnings.size() == 1);  // once per blob

    NetOptions strict;
    strict.unread_feed_error = true;
    Net checked(Parse(relu), ws, strict);
    feed("input", 4);
    feed("inptu", 2);
    ExpectError([&] { checked.Run(); }, Code::kNotFound, {"net 'relu'", "'inptu'", "did you mean 'input'?"});
    CHECK(ws->GetTensor("out").data<float>()[0] == 1.0f);  // no op ran
    CHECK(!checked.running());
    checked.Run();  // reported: the next run goes on
    CHECK(ws->GetTensor("out").data<float>()[0] == 4.0f);
  }
  // Readers are counted per net: with both nets gone, "input" reads nothing.
  feed("input", 1);
  CHECK(feeds.TakeUnread().size() == 1);
  feeds.AddReaders({"a", "a"});
  feeds.RemoveReaders({"a"});
  feed("a", 1);
  CHECK(feeds.TakeUnread().empty());  // one reader left
  feeds.RemoveReaders({"a"});
  feed("a", 1);
  const auto unread = feeds.TakeUnread();
  REQUIRE(unread.size() == 1);
  CHECK((unread[0].blob == "a" && unread[0].nearest.empty() && unread[0].first_report));
  // The library's own feeds (Workspace::Feed: checkpoint loads) are not the caller's.
  ws->Feed("unnoted", Floats({1}, {0}));
  CHECK(!feeds.pending());
  SetLogSink(nullptr, nullptr, LogLevel::kWarning);
}
