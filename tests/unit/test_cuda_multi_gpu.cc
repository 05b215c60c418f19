// Two or more GPUs (built with DP_TEST_NEEDS_GPUS=2: gpu_main.cc skips the
// whole executable, exit 77, with fewer CUDA devices visible): a peer copy
// between devices, and the CUDA collectives over 2..4 GPUs (as many as are
// visible) in NCCL and copy-and-sum tree modes: sums for the four dtypes,
// several tensors per call and a scale (integer-valued data, so every sum
// order is exact; the tree's fixed order also bitwise on random floats),
// Broadcast into uninitialised replicas, errors naming the blobs, and a
// multi-device net whose producers and consumers run on each GPU's own
// stream (the event ordering end to end). Loss scaling over two GPUs (each
// unscales on its own, the host gates). NCCL across processes, with two
// "processes" as threads of this one, each on its own GPUs: sums, the mean
// over active replicas, a broadcast from process 0, and a process that
// leaves failing the other in bounded time, naming it.
#include <doctest/doctest.h>

#if defined(DP_WITH_CUDA) && DP_WITH_CUDA

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "comm/cuda_collectives.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "model/model_format.h"
#include "ops/math/optimizer_updates.h"
#include "cuda_collectives_test_util.h"
#include "op_test_util.h"
#include "sample_batches.h"
#include "scaled_training.h"
#include "temp_dir.h"

using namespace dp;
using namespace dp::testing;

namespace {

TEST_CASE("GPU: a tensor copies between two devices") {
  const DeviceOption gpu0{kCuda, 0}, gpu1{kCuda, 1};
  const std::vector<float> values = Random<float>(3 * 1000, 1);
  Tensor dev0 = OnGpu<float>(0, {3, 1000}, values);
  Tensor dev1({1}, DType::kFloat32, gpu1);
  dev1.CopyFrom(dev0);  // device -> device: resized, on its own device
  CHECK(dev0.device() == gpu0);
  CHECK(dev1.device() == gpu1);
  CHECK(dev1.dims() == Dims{3, 1000});
  CHECK(HostValues<float>(dev1) == values);
  // And back, into a tensor on the first device.
  Tensor back({7}, DType::kFloat32, gpu0);
  back.CopyFrom(dev1);
  CHECK(back.device() == gpu0);
  CHECK(HostValues<float>(back) == values);
}

TEST_CASE_TEMPLATE("GPU: Allreduce sums 2..4 GPUs' tensors in both modes", T, float, double, int32_t, int64_t) {
  for (const auto& devices : DeviceSets()) {
    for (bool nccl : {true, false}) {
      for (double scale : std::is_integral_v<T> ? std::vector<double>{1.0} : std::vector<double>{1.0, 0.5}) {
        CAPTURE(devices.size());
        CAPTURE(nccl);
        CAPTURE(scale);
        CheckAllreduce<T>(devices, nccl, SeveralTensors(), scale, IntValued<T>, true);
      }
    }
  }
}

TEST_CASE("GPU: the tree sums in its fixed order; NCCL leaves every replica equal") {
  auto real = [](int64_t n, uint32_t seed) { return Random<float>(n, seed, -1.0, 1.0); };
  for (const auto& devices : DeviceSets()) {
    CAPTURE(devices.size());
    CheckAllreduce<float>(devices, false, {{100003}}, 1.0 / static_cast<double>(devices.size()), real, true);
    CheckAllreduce<float>(devices, true, {{100003}}, 1.0 / static_cast<double>(devices.size()), real, false);
  }
}

TEST_CASE("GPU: Broadcast copies the root's tensors into uninitialised and misshaped replicas") {
  for (const auto& devices : DeviceSets()) {
    for (bool nccl : {true, false}) {
      CAPTURE(devices.size());
      CAPTURE(nccl);
      const int n = static_cast<int>(devices.size());
      const int root = n - 1;
      auto ws = WithComm(devices, nccl);
      const std::vector<float> w = Random<float>(6, 3);
      const std::vector<int64_t> b = {7, -8, 9, 1 << 30};
      std::vector<std::string> blobs;
      for (int d = 0; d < n; ++d) {
        const int dev = devices[static_cast<size_t>(d)];
        blobs.push_back(Scoped(dev, "w"));
        blobs.push_back(Scoped(dev, "b"));
        if (d == root) {
          ws->Feed(blobs[blobs.size() - 2], OnGpu<float>(dev, {2, 3}, w));
          ws->Feed(blobs.back(), OnGpu<int64_t>(dev, {4}, b));
        } else if (d == 0) {
          ws->Feed(blobs[blobs.size() - 2], OnGpu<float>(dev, {5}, Random<float>(5, 9)));  // misshaped
          ws->Feed(blobs.back(), Tensor());                                                // empty tensor
        }  // the others: never fed at all
      }
      RunNet(ws, {Collective("Broadcast", blobs, n, devices[0], {IntArg("root", root)})});
      for (int d = 0; d < n; ++d) {
        CAPTURE(d);
        const Tensor& tw = ws->GetTensor(blobs[static_cast<size_t>(2 * d)]);
        const Tensor& tb = ws->GetTensor(blobs[static_cast<size_t>(2 * d + 1)]);
        CHECK(tw.device() == DeviceOption{kCuda, devices[static_cast<size_t>(d)]});  // on its own GPU
        CHECK(tb.device() == DeviceOption{kCuda, devices[static_cast<size_t>(d)]});
        CHECK(tw.dims() == Dims{2, 3});
        CHECK(HostValues<float>(tw) == w);
        CHECK(HostValues<int64_t>(tb) == b);
      }
    }
  }
}

TEST_CASE("GPU: collective errors between GPUs name the blobs") {
  for (bool nccl : {true, false}) {
    CAPTURE(nccl);
    auto ws = WithComm({0, 1}, nccl);
    ws->Feed("cuda_0/w", OnGpu<float>(0, {2}, {1, 2}));
    ws->Feed("cuda_1/w", OnGpu<float>(1, {3}, {1, 2, 3}));
    ws->Feed("cuda_1/i", OnGpu<int32_t>(1, {2}, {1, 2}));
    ws->Feed("cuda_1/on0", OnGpu<float>(0, {2}, {1, 2}));
    auto run = [&](const std::string& type, std::vector<std::string> blobs) {
      RunNet(ws, {Collective(type, blobs, 2, 0)});
    };
    ExpectError([&] { run("Allreduce", {"cuda_0/w", "cuda_1/w"}); }, Code::kShape,
                {"Allreduce", "'cuda_1/w'", "[3]", "'cuda_0/w'", "[2]"});
    ExpectError([&] { run("Allreduce", {"cuda_0/w", "cuda_1/i"}); }, Code::kDType,
                {"'cuda_1/i'", "int32", "'cuda_0/w'"});
    // A replica's tensor on the wrong GPU, for either op.
    ExpectError([&] { run("Allreduce", {"cuda_0/w", "cuda_1/on0"}); }, Code::kInvalidArgument,
                {"'cuda_1/on0'", "is on cuda:0", "device 1 of the communicator, cuda:1"});
    ExpectError([&] { run("Broadcast", {"cuda_0/w", "cuda_1/on0"}); }, Code::kInvalidArgument,
                {"'cuda_1/on0'", "cuda:1"});
    // Nothing was written by the failed runs.
    CHECK(HostValues<float>(ws->GetTensor("cuda_0/w")) == std::vector<float>{1, 2});
    // The op on a GPU that the communicator does not serve.
    auto one = WithComm({1}, nccl);
    one->Feed("x", OnGpu<float>(1, {2}, {1, 2}));
    ExpectError([&] { RunNet(one, {Collective("Allreduce", {"x"}, 1, 0)}); }, Code::kInvalidArgument,
                {"runs on cuda:0", "not one of the communicator's devices [cuda:1]"});
  }
}

TEST_CASE("GPU: Allreduce in a multi-GPU net waits for every producer and precedes every consumer") {
  // Each GPU fills and rescales its own gradient on its stream (slow enough
  // that an unordered collective would read unfinished data), the collective
  // runs on the first GPU's stream, and every GPU scales the result on its
  // own stream. The async executor joins the streams through events only.
  const int64_t numel = int64_t{1} << 22;
  for (const auto& devices : DeviceSets()) {
    for (bool nccl : {true, false}) {
      CAPTURE(devices.size());
      CAPTURE(nccl);
      const int n = static_cast<int>(devices.size());
      auto ws = WithComm(devices, nccl);
      auto dev = [&](int d) { return DeviceOption{kCuda, devices[static_cast<size_t>(d)]}; };
      auto blob = [&](int d, const std::string& name) { return Scoped(dev(d).id, name); };
      std::vector<OperatorDef> ops;
      std::vector<std::string> grads;
      for (int d = 0; d < n; ++d) {
        grads.push_back(blob(d, "g"));
        ops.push_back(OnDevice(
            Op("ConstantFill", {}, {grads.back()}, {IntsArg("shape", {numel}), FloatArg("value", d + 1)}), dev(d)));
        for (int k = 0; k < 8; ++k)
          ops.push_back(OnDevice(Op("Scale", {grads.back()}, {grads.back()}, {FloatArg("scale", 1.0)}), dev(d)));
      }
      ops.push_back(Collective("Allreduce", grads, n, devices[0]));
      for (int d = 0; d < n; ++d)
        ops.push_back(OnDevice(Op("Scale", {blob(d, "g")}, {blob(d, "out")}, {FloatArg("scale", 2.0)}), dev(d)));
      auto def = std::make_shared<NetDef>();
      def->ops = std::move(ops);
      def->external_inputs = {"comm"};
      Net net(def, ws);
      const float want = static_cast<float>(n * (n + 1));  // 2 * (1 + ... + n)
      for (int run = 0; run < 3; ++run) {  // events and streams are reused
        CAPTURE(run);
        net.Run();
        for (int d = 0; d < n; ++d) {
          const std::vector<float> out = HostValues<float>(ws->GetTensor(blob(d, "out")));
          const auto wrong = std::count_if(out.begin(), out.end(), [&](float v) { return v != want; });
          CHECK_MESSAGE(wrong == 0, wrong, " elements on device ", d, " differ from ", want);
        }
      }
    }
  }
}

// ---- NCCL across processes ------------------------------------------------------------

// Process r's workspace with a communicator over its GPUs (half of the
// visible ones each) of a two-process job meeting at `url`.
std::shared_ptr<Workspace> ProcessComm(int r, const std::string& url, int64_t timeout_ms) {
  const int per = DeviceCount(kCuda) / 2;
  std::vector<int64_t> devices;
  for (int d = 0; d < per; ++d) devices.push_back(r * per + d);
  auto ws = std::make_shared<Workspace>();
  RunNet(ws, {Op("CreateCudaCollectives", {}, {"comm"},
                 {IntsArg("device_ids", devices), IntArg("world_size", 2), IntArg("rank", r),
                  StringArg("store", url), IntArg("timeout_ms", timeout_ms), StringArg("run_id", "gpu-test")})});
  return ws;
}

// Runs fn(r) on two threads, returning their errors ("" when none).
std::vector<std::string> TwoProcesses(const std::function<void(int)>& fn) {
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = std::string(CodeName(e.code())) + ": " + e.message();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

TEST_CASE("GPUs: NCCL across two processes: sums, the mean over active replicas, a broadcast from process 0") {
  TempDir dir("dp_nccl");
  const std::string url = "file://" + dir.Path("store");
  const int per = DeviceCount(kCuda) / 2;
  std::vector<std::vector<float>> got(2);
  const auto errors = TwoProcesses([&](int r) {
    auto ws = ProcessComm(r, url, 20000);
    CHECK(ws->GetBlob("comm")->Get<CudaCommunicator>().collectives->num_processes() == 2);
    std::vector<std::string> x, xf, w;
    for (int d = 0; d < per; ++d) {
      const int g = r * per + d;  // the job's replica index
      x.push_back(Scoped(g, "x"));
      ws->Feed(x.back(), OnGpu<float>(g, {3}, {float(g + 1), float(2 * (g + 1)), 1}));
      xf.push_back(x.back());
      xf.push_back(Scoped(g, "f"));
      ws->Feed(xf.back(), OnGpu<float>(g, {1}, {r == 0 ? 1.0f : 0.0f}));  // process 1 has no data
      w.push_back(Scoped(g, "w"));
      ws->Feed(w.back(), OnGpu<float>(g, {2}, {r == 0 ? 7.0f : 0.0f, float(g)}));
    }
    const int n = 2 * per;
    RunNet(ws, {Collective("Allreduce", x, per, r * per, {FloatArg("scale", 1.0 / n)})});
    const float mean = static_cast<float>(n + 1) / 2;  // of 1..n
    for (const auto& b : x) CHECK(HostValues<float>(ws->GetTensor(b)) == std::vector<float>{mean, 2 * mean, 1});
    // Process 1 joins with zeros: the mean over process 0's replicas alone.
    for (int d = 0; d < per; ++d)
      if (r == 1) ws->Feed(x[static_cast<size_t>(d)], OnGpu<float>(r * per + d, {3}, {0, 0, 0}));
    // (per copies of {mean, 2 mean, 1} and per of zeros) / per active replicas.
    RunNet(ws, {Collective("Allreduce", xf, per, r * per, {IntArg("average_active", 1)})});
    for (const auto& b : x) CHECK(HostValues<float>(ws->GetTensor(b)) == std::vector<float>{mean, 2 * mean, 1});
    RunNet(ws, {Collective("Broadcast", w, per, r * per)});
    got[static_cast<size_t>(r)] = HostValues<float>(ws->GetTensor(w.back()));
  });
  CHECK(errors == std::vector<std::string>{"", ""});
  for (int r = 0; r < 2; ++r) CHECK(got[static_cast<size_t>(r)] == std::vector<float>{7, 0});  // process 0's device 0
}

// ZeRO-1 across processes: Allgather takes each part from the replica of
// the job that owns it (part p * devices + d: device d of process p), and
// GatherShards puts the processes' parts of a sharded state together on
// the host through the CUDA communicator.
TEST_CASE("GPUs: NCCL across two processes: Allgather from each part's owner, GatherShards of every process") {
  TempDir dir("dp_nccl");
  const std::string url = "file://" + dir.Path("store");
  const int per = DeviceCount(kCuda) / 2, parts = 2 * per;
  constexpr int64_t kN = 1000;  // parts of whole 64-element chunks, the last short
  std::vector<std::vector<float>> gathered(2), full(2);
  const auto errors = TwoProcesses([&](int r) {
    auto ws = ProcessComm(r, url, 20000);
    std::vector<std::string> w, shards;
    for (int d = 0; d < per; ++d) {
      const int g = r * per + d;  // the job's replica index, and the part it owns
      std::vector<float> values(kN);
      for (int64_t i = 0; i < kN; ++i) values[static_cast<size_t>(i)] = static_cast<float>(g * 10000 + i);
      w.push_back(Scoped(g, "w"));
      ws->Feed(w.back(), OnGpu<float>(g, {kN}, values));
      const ElementRange mine = PartOfElements(kN, g, parts);
      shards.push_back(Scoped(g, "w_shard"));
      ws->Feed(shards.back(), OnGpu<float>(g, {mine.end - mine.begin},
                                           std::vector<float>(values.begin() + mine.begin, values.begin() + mine.end)));
    }
    RunNet(ws, {Collective("Allgather", w, per, r * per)});
    for (const auto& b : w) {
      const std::vector<float> got = HostValues<float>(ws->GetTensor(b));
      if (&b == &w.front()) gathered[static_cast<size_t>(r)] = got;
      CHECK(got == gathered[static_cast<size_t>(r)]);  // every replica of the process alike
    }
    ws->Feed("like", OnGpu<float>(r * per, {kN}, {}));
    std::vector<std::string> in{"comm", "like"};
    in.insert(in.end(), shards.begin(), shards.end());
    RunNet(ws, {Op("GatherShards", in, {"full"}, {IntArg("num_devices", per)})});
    full[static_cast<size_t>(r)] = HostValues<float>(ws->GetTensor("full"));
  });
  CHECK(errors == std::vector<std::string>{"", ""});
  std::vector<float> want(kN);
  for (int p = 0; p < parts; ++p) {
    const ElementRange r = PartOfElements(kN, p, parts);
    for (int64_t i = r.begin; i < r.end; ++i) want[static_cast<size_t>(i)] = static_cast<float>(p * 10000 + i);
  }
  for (int r = 0; r < 2; ++r) {
    CHECK(gathered[static_cast<size_t>(r)] == want);
    CHECK(full[static_cast<size_t>(r)] == want);
  }
}

TEST_CASE("GPUs: NCCL across processes: a process that leaves fails the other in bounded time, naming it") {
  TempDir dir("dp_nccl");
  const std::string url = "file://" + dir.Path("store");
  const int per = DeviceCount(kCuda) / 2;
  std::atomic<bool> left{false};
  double took = 0;
  const auto errors = TwoProcesses([&](int r) {
    auto ws = ProcessComm(r, url, 3000);
    if (r == 1) {
      ws.reset();  // closes its communicator
      left = true;
      return;
    }
    while (!left) std::this_thread::yield();
    std::vector<std::string> x;
    for (int d = 0; d < per; ++d) {
      x.push_back(Scoped(d, "x"));
      ws->Feed(x.back(), OnGpu<float>(d, {1000}, std::vector<float>(1000, 1.0f)));
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      RunNet(ws, {Collective("Allreduce", x, per, 0)});
    } catch (...) {
      took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      throw;
    }
  });
  CAPTURE(errors[0]);
  CHECK((errors[0].rfind("TIMEOUT", 0) == 0 || errors[0].rfind("UNAVAILABLE", 0) == 0));
  CHECK(errors[0].find("rank 1 is missing") != std::string::npos);
  CHECK(took < 3.0 + 1.5);
  CHECK(errors[1] == "");
}

// Loss scaling with replicas on two GPUs: each reads a copy of the scale on
// its GPU and unscales its gradients there, the flags are summed, the host
// gates the rate. From 2^127 with pixels 1000 times larger the first steps
// overflow: the steps skipped and the params are one GPU's named twice
// (two replicas: a + b in either sum), with and without a sharded state.
TEST_CASE("GPUs: loss scaling over cuda:0,cuda:1 skips the steps cuda:0,cuda:0 skips") {
  const ModelDef m = ModelFromFile(SampleNetsDir() + "fashion_mlp.json");
  auto feed = [](Workspace& ws, int step) {
    FeedSyntheticBatch(ws, 32, static_cast<uint32_t>(40 + step));
    Tensor x = ws.GetTensor("data");
    for (int64_t i = 0; i < x.numel(); ++i) x.mutable_data<float>()[i] *= 1000.0f;
    ws.Feed("data", x);
  };
  for (bool zero : {false, true}) {
    CAPTURE(zero);
    const ScaledRun one = TrainScaledOnGpus(m, {0, 0}, zero, 20, feed);
    const ScaledRun two = TrainScaledOnGpus(m, {0, 1}, zero, 20, feed);
    CHECK(two.scales == one.scales);
    CHECK(two.scales.back() < std::ldexp(1.0f, 127));
    CHECK(two.params == one.params);
  }
}

}  // namespace

#endif  // DP_WITH_CUDA
