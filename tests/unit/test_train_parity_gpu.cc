// The sample's models train the same on cuda:0 as on cpu:0 (issue 26's
// device parity of whole training steps; suite gpu, exits 77 without a GPU):
// each model parallelized on one replica of each device, initialised (equal
// bit for bit: the fills draw the same counter-based numbers), then 50 Adam
// steps on the same synthetic Fashion-MNIST-shaped batches. Stated
// tolerances, per step and at the end, relative as max |a - b| / (1 + |b|):
// the loss within 1e-3 and every param within 1e-2 after 50 steps (float
// sums in another order — cuBLAS GEMMs, block reductions — drift by rounding
// that Adam's normalised steps carry into every param). The observed errors
// are printed for the record.
#include <doctest/doctest.h>

#if defined(DP_WITH_CUDA) && DP_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/storage.h"
#include "core/workspace.h"
#include "data/device_loader.h"
#include "data/loader.h"
#include "exec/net.h"
#include "model/model_format.h"
#include "model/training.h"
#include "parallel/parallelize.h"
#include "scaled_training.h"

using namespace dp;

namespace {

constexpr int kBatch = 64;
constexpr int kSteps = 50;

std::string NetsDir() {
  const char* root = std::getenv("DP_SOURCE_ROOT");
  REQUIRE_MESSAGE(root != nullptr, "DP_SOURCE_ROOT is not set (meson sets it)");
  return std::string(root) + "/samples/nets/";
}

// Batch `step`: pixels like standardised Fashion-MNIST, labels a function of them.
// `pixels`: what the pixels are multiplied by (larger gradients), after
// the labels are drawn from them.
void FeedBatch(Workspace& ws, int step, float pixels = 1.0f) {
  std::mt19937 gen(static_cast<uint32_t>(1000 + step));
  std::uniform_real_distribution<float> px(-0.8f, 2.0f);
  Tensor x({kBatch, 1, 28, 28}, DType::kFloat32), y({kBatch}, DType::kInt32);
  float* xp = x.mutable_data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) xp[i] = px(gen);
  for (int i = 0; i < kBatch; ++i) {
    double s = 0;
    for (int j = 0; j < 28 * 28; j += 97) s += xp[i * 28 * 28 + j];
    y.mutable_data<int32_t>()[i] = static_cast<int32_t>(std::fabs(s * 3.0)) % 10;
  }
  if (pixels != 1.0f)
    for (int64_t i = 0; i < x.numel(); ++i) xp[i] *= pixels;
  ws.Feed("data", x);
  ws.Feed("label", y);
}

std::vector<float> HostFloats(const Workspace& ws, const std::string& name) {
  Tensor host;
  host.CopyFrom(ws.GetTensor(name));
  return std::vector<float>(host.data<float>(), host.data<float>() + host.numel());
}

double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i)
    e = std::max(e, std::fabs(double{a[i]} - double{b[i]}) / (1.0 + std::fabs(double{b[i]})));
  return e;
}

struct Trainer {
  ParallelNets nets;
  std::shared_ptr<Workspace> ws = std::make_shared<Workspace>();
  std::unique_ptr<Net> train;
  std::string scope;

  Trainer(const ModelDef& m, DeviceType type, MemoryMode memory = MemoryMode::kShare, bool fuse = true,
          std::vector<int32_t> device_ids = {0}, CudaGraphs graphs = CudaGraphs::kDefault, bool zero = false) {
    ParallelizeOptions o;
    o.device_type = type;
    o.device_ids = std::move(device_ids);
    o.shard_optimizer_state = zero;
    o.memory = memory;
    o.fuse = fuse;  // on CUDA: the updates as multi-tensor ops (FC + Relu fuses on the CPU only)
    o.nccl = o.device_ids.size() == 1;  // one GPU named twice: the copy-and-sum tree
    nets = Parallelize(m, o);
    scope = nets.scopes.at(0);
    Net(std::make_shared<const NetDef>(nets.init), ws).Run();
    NetOptions no;
    no.cuda_graphs = graphs;
    train = std::make_unique<Net>(std::make_shared<const NetDef>(nets.train), ws, no);
  }
  float Step(int step) {
    FeedBatch(*ws, step);
    train->Run();
    return HostFloats(*ws, "loss").at(0);
  }
};

void CheckTrainsAlike(const std::string& file) {
  CAPTURE(file);
  const ModelDef m = ModelFromFile(NetsDir() + file);
  Trainer cpu(m, DeviceType::kCPU), gpu(m, DeviceType::kCUDA);
  CHECK(gpu.scope == "cuda_0/");
  for (const auto& p : m.params)  // the same numbers from the same seeds
    CHECK_MESSAGE(HostFloats(*gpu.ws, gpu.scope + p) == HostFloats(*cpu.ws, cpu.scope + p), p,
                  " differs after init");
  double worst_loss = 0;
  for (int s = 0; s < kSteps; ++s) {
    const float lc = cpu.Step(s), lg = gpu.Step(s);
    const double e = std::fabs(double{lg} - lc) / (1.0 + std::fabs(double{lc}));
    worst_loss = std::max(worst_loss, e);
    CHECK_MESSAGE(e <= 1e-3, "step ", s, ": loss ", lg, " on cuda:0, ", lc, " on cpu:0");
  }
  double worst_param = 0;
  for (const auto& p : m.params) {
    const double e = RelErr(HostFloats(*gpu.ws, gpu.scope + p), HostFloats(*cpu.ws, cpu.scope + p));
    worst_param = std::max(worst_param, e);
    CHECK_MESSAGE(e <= 1e-2, p, " after ", kSteps, " steps: relative error ", e);
  }
  MESSAGE(file, ": worst loss error over ", kSteps, " steps ", worst_loss, ", worst param error ", worst_param);
}

TEST_CASE("GPU: the sample's MLP trains on cuda:0 as on cpu:0") { CheckTrainsAlike("fashion_mlp.json"); }

TEST_CASE("GPU: the sample's CNN trains on cuda:0 as on cpu:0") { CheckTrainsAlike("fashion_cnn.json"); }

// The memory plan on CUDA (docs/MEMORY.md): sharing blocks and freeing after
// use give the bits of keeping every blob, and less device memory.
TEST_CASE("GPU: the sample's models train bit for bit alike on cuda:0 with and without the memory plan") {
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"}) {
    CAPTURE(file);
    const ModelDef m = ModelFromFile(NetsDir() + file);
    // Op by op: a captured GEMM may take another cuBLAS algorithm, and this
    // compares bits (the graphs have a test of their own below).
    const CudaGraphs off = CudaGraphs::kOff;
    Trainer keep(m, DeviceType::kCUDA, MemoryMode::kKeep, true, {0}, off),
        share(m, DeviceType::kCUDA, MemoryMode::kShare, true, {0}, off),
        free(m, DeviceType::kCUDA, MemoryMode::kFree, true, {0}, off);
    for (int s = 0; s < 5; ++s) {
      const float lk = keep.Step(s), ls = share.Step(s), lf = free.Step(s);
      CHECK_MESSAGE(ls == lk, "step ", s);
      CHECK_MESSAGE(lf == lk, "step ", s);
    }
    for (const auto& p : m.params) {
      CHECK_MESSAGE(HostFloats(*share.ws, share.scope + p) == HostFloats(*keep.ws, keep.scope + p), p);
      CHECK_MESSAGE(HostFloats(*free.ws, free.scope + p) == HostFloats(*keep.ws, keep.scope + p), p);
    }
    const DeviceOption gpu{DeviceType::kCUDA, 0};
    MESSAGE(file, ": cuda:0 peak ", keep.ws->budget()->peak(gpu), " bytes keep, ", share.ws->budget()->peak(gpu),
            " share, ", free.ws->budget()->peak(gpu), " free");
    CHECK(share.ws->budget()->peak(gpu) < keep.ws->budget()->peak(gpu));
    CHECK(free.ws->budget()->peak(gpu) < keep.ws->budget()->peak(gpu));
  }
}

// The step's updates fused into multi-tensor ops (ops/update_fusion.h): the
// bits of the one-param updates, in fewer ops; per replica and gradient
// bucket on two replicas of one GPU.
TEST_CASE("GPU: fused optimizer updates train bit for bit as separate ones on cuda:0 and cuda:0,cuda:0") {
  auto count = [](const NetDef& net, const std::string& prefix) {
    return std::count_if(net.ops.begin(), net.ops.end(),
                         [&](const OperatorDef& op) { return op.type.rfind(prefix, 0) == 0; });
  };
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"}) {
    ModelDef m = ModelFromFile(NetsDir() + file);
    for (const std::string optimizer : {"adam", "momentum", "sgd", "adagrad"})
      for (const std::vector<int32_t>& ids : {std::vector<int32_t>{0}, std::vector<int32_t>{0, 0}}) {
        CAPTURE(file);
        CAPTURE(optimizer);
        CAPTURE(ids.size());
        m.optimizer->type = optimizer;
        Trainer apart(m, DeviceType::kCUDA, MemoryMode::kShare, false, ids),
            fused(m, DeviceType::kCUDA, MemoryMode::kShare, true, ids);
        CHECK(count(apart.nets.train, "MultiTensor") == 0);
        CHECK(count(fused.nets.train, "MultiTensor") >= static_cast<std::ptrdiff_t>(ids.size()));
        for (int s = 0; s < 5; ++s) CHECK_MESSAGE(fused.Step(s) == apart.Step(s), "step ", s);
        for (const auto& scope : fused.nets.scopes)
          for (const auto& p : TrainingStateBlobs(m))
            if (p != kIterBlob) CHECK_MESSAGE(HostFloats(*fused.ws, scope + p) == HostFloats(*apart.ws, scope + p), p);
      }
  }
}

// ZeRO-1 over two replicas of one GPU (the copy-and-sum tree): each replica
// keeps half of Adam's moments; the reduce-scatter is the allreduce in one
// process and the all-gather a broadcast of each half, so training is the
// unsharded run's bit for bit. The checkpoint's nets gather the state whole
// (as the unsharded replicas hold it) and cut it back into shards on the GPUs.
TEST_CASE("GPU: a sharded optimizer state on cuda:0,cuda:0 trains bit for bit as unsharded; saved whole, loaded back") {
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"}) {
    CAPTURE(file);
    const ModelDef m = ModelFromFile(NetsDir() + file);
    const std::vector<int32_t> ids{0, 0};
    Trainer plain(m, DeviceType::kCUDA, MemoryMode::kShare, true, ids);
    Trainer sharded(m, DeviceType::kCUDA, MemoryMode::kShare, true, ids, CudaGraphs::kDefault, /*zero=*/true);
    for (int s = 0; s < 6; ++s) CHECK_MESSAGE(sharded.Step(s) == plain.Step(s), "step ", s);
    for (const auto& scope : plain.nets.scopes)
      for (const auto& p : m.params)
        CHECK_MESSAGE(HostFloats(*sharded.ws, scope + p) == HostFloats(*plain.ws, scope + p), scope, p);
    REQUIRE_FALSE(sharded.nets.shard_full.empty());
    Net(std::make_shared<const NetDef>(sharded.nets.shard_gather), sharded.ws).Run();
    for (const auto& p : m.params)
      for (const auto& st : OptimizerStateBlobs(*m.optimizer, p)) {
        const Tensor full = sharded.ws->GetTensor(FullStateName(st));
        CHECK(full.device() == DeviceOption{});
        CHECK_MESSAGE(HostFloats(*sharded.ws, FullStateName(st)) == HostFloats(*plain.ws, plain.scope + st), st);
      }
    // Loaded back: the whole state cut into each replica's shard on its GPU.
    std::map<std::string, std::vector<float>> shards;
    for (const auto& scope : sharded.nets.scopes)
      for (const auto& p : m.params)
        for (const auto& st : OptimizerStateBlobs(*m.optimizer, scope + p)) {
          shards[st] = HostFloats(*sharded.ws, st);
          sharded.ws->Feed(st, Tensor({1}, DType::kFloat32));  // overwritten by the scatter
        }
    Net(std::make_shared<const NetDef>(sharded.nets.shard_scatter), sharded.ws).Run();
    for (const auto& shard : shards) {  // (no structured binding: clang cannot capture one in CHECK_MESSAGE)
      CHECK(sharded.ws->GetTensor(shard.first).device() == DeviceOption{DeviceType::kCUDA, 0});
      CHECK_MESSAGE(HostFloats(*sharded.ws, shard.first) == shard.second, shard.first);
    }
    for (int s = 6; s < 8; ++s) CHECK_MESSAGE(sharded.Step(s) == plain.Step(s), "step ", s);
  }
}

// The sample's train nets on one GPU run as a CUDA graph by default: the
// copies of the batch, the learning rate and the iteration into the GPU run
// before it (CapturePlan::transfers), its temporaries share the memory
// plan's blocks, the loss and accuracy are copied out after it. Captured on
// the third step, replayed after; training as op by op (cuBLAS may pick
// other algorithms while captured: within 1e-5 per step's loss, 1e-4 for
// the params after 12 steps).
TEST_CASE("GPU: the sample's train nets run as CUDA graphs, training as op by op") {
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"}) {
    CAPTURE(file);
    const ModelDef m = ModelFromFile(NetsDir() + file);
    Trainer graphs(m, DeviceType::kCUDA), streams(m, DeviceType::kCUDA, MemoryMode::kShare, true, {0},
                                                  CudaGraphs::kOff);
    REQUIRE_MESSAGE(graphs.train->capture_refusal().empty(), graphs.train->capture_refusal());
    constexpr int kGraphSteps = 12;
    for (int s = 0; s < kGraphSteps; ++s) {
      const float lg = graphs.Step(s), ls = streams.Step(s);
      CHECK_MESSAGE(std::fabs(double{lg} - ls) <= 1e-5 * (1.0 + std::fabs(double{ls})), "step ", s, ": ", lg,
                    " as a graph, ", ls, " op by op");
    }
    const std::optional<CaptureStats> stats = graphs.train->capture_stats();
    REQUIRE(stats.has_value());
    MESSAGE(file, ": ", stats->runs.captures, " captures, ", stats->runs.replays, " replays, ", stats->graph_nodes,
            " graph nodes; ", stats->reason);
    CHECK(stats->runs.captures == 1);
    CHECK(stats->runs.replays == kGraphSteps - 3);
    for (const auto& p : m.params)
      CHECK_MESSAGE(RelErr(HostFloats(*graphs.ws, graphs.scope + p), HostFloats(*streams.ws, streams.scope + p)) <= 1e-4,
                    p);
  }
}

TEST_CASE("GPU: a dataset held on cuda:0, or staged there, feeds the host loader's batches; training is bit for bit the same") {
  // 640 samples in batches of 64: two epochs of 10 steps (the second
  // uploads a new permutation while the first's last gathers may run).
  constexpr int64_t kSamples = 640;
  Tensor x({kSamples, 1, 28, 28}, DType::kFloat32), y({kSamples}, DType::kInt32);
  std::mt19937 gen(77);
  std::uniform_real_distribution<float> px(-0.8f, 2.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_data<float>()[i] = px(gen);
  for (int64_t i = 0; i < kSamples; ++i) y.mutable_data<int32_t>()[i] = static_cast<int32_t>(gen() % 10);
  LoaderOptions o;
  o.batch_size = kBatch;
  o.seed = 9;
  LoaderOptions staging = o;
  staging.target = DeviceOption{DeviceType::kCUDA, 0};
  CHECK(Storage::AllocatePinned(4096)->pinned());  // cudaMallocHost's page-locked memory
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"})
    for (const std::vector<int32_t>& ids : {std::vector<int32_t>{0}, std::vector<int32_t>{0, 0}}) {
      CAPTURE(file);
      CAPTURE(ids.size());
      const ModelDef m = ModelFromFile(NetsDir() + file);
      Trainer host(m, DeviceType::kCUDA, MemoryMode::kShare, true, ids);
      Trainer dev(m, DeviceType::kCUDA, MemoryMode::kShare, true, ids);
      Trainer staged(m, DeviceType::kCUDA, MemoryMode::kShare, true, ids);
      const std::vector<LoaderInput> inputs = {{"data", DType::kFloat32, {1, 28, 28}}, {"label", DType::kInt32, {}}};
      Loader from_host(host.ws, inputs, MakeTensorSource({x, y}), o);
      DeviceLoader on_gpu(dev.ws, {"data", "label"}, {x, y}, DeviceOption{DeviceType::kCUDA, 0}, o);
      Loader to_gpu(staged.ws, inputs, MakeTensorSource({x, y}), staging);
      int steps = 0;
      for (int epoch = 0; epoch < 2; ++epoch)
        while (from_host.Next()) {
          REQUIRE(on_gpu.Next());
          REQUIRE(to_gpu.Next());
          CHECK(dev.ws->GetTensor("data").device() == DeviceOption{DeviceType::kCUDA, 0});
          CHECK(staged.ws->GetTensor("label").device() == DeviceOption{DeviceType::kCUDA, 0});
          CHECK(HostFloats(*dev.ws, "data") == HostFloats(*host.ws, "data"));
          CHECK(HostFloats(*staged.ws, "data") == HostFloats(*host.ws, "data"));
          host.train->Run();
          dev.train->Run();
          staged.train->Run();
          CHECK_MESSAGE(HostFloats(*dev.ws, "loss") == HostFloats(*host.ws, "loss"), "step ", steps);
          CHECK_MESSAGE(HostFloats(*staged.ws, "loss") == HostFloats(*host.ws, "loss"), "step ", steps);
          ++steps;
        }
      CHECK_FALSE(on_gpu.Next());  // its epoch ends with the host loader's
      CHECK_FALSE(to_gpu.Next());
      CHECK(steps == 20);
      for (const auto& p : m.params) {
        CHECK_MESSAGE(HostFloats(*dev.ws, dev.scope + p) == HostFloats(*host.ws, host.scope + p), p);
        CHECK_MESSAGE(HostFloats(*staged.ws, staged.scope + p) == HostFloats(*host.ws, host.scope + p), p);
      }
      // One GPU: replayed as a CUDA graph, batches fed from the GPU. Captured
      // on the third step; a step or two after it go on the streams while the
      // loader's ring still holds the buffer the graph captured the batch in
      // (a replay refills that buffer, which a holder outside the net would see).
      if (ids.size() == 1)
        for (const Trainer* t : {&dev, &staged}) {
          const std::optional<CaptureStats> stats = t->train->capture_stats();
          REQUIRE(stats.has_value());
          CHECK_MESSAGE(stats->runs.replays >= steps - 5, stats->reason);
        }
    }
}

// The sample's MLP on cuda:0 with dynamic loss scaling: in fp32 bit for bit
// as without it (powers of two, nothing overflows), replayed as a graph; in
// fp16 products close to fp32; a step whose scaled gradients overflow is
// skipped on the device (params unchanged, the scale halved).
TEST_CASE("GPU: dynamic loss scaling on cuda:0: fp32 unchanged bit for bit, fp16 close to it, an overflow skipped") {
  const ModelDef m = ModelFromFile(NetsDir() + "fashion_mlp.json");
  struct Run {
    std::vector<float> losses;
    std::map<std::string, std::vector<float>> params;
    float scale = 0;
    uint64_t replays = 0;
  };
  auto train = [&](bool scaled, MathMode math, double initial, float pixels, int steps) {
    ParallelizeOptions o;
    o.device_type = DeviceType::kCUDA;
    o.device_ids = {0};
    o.loss_scaling.dynamic = scaled;
    o.loss_scaling.initial = initial;
    const ParallelNets nets = Parallelize(m, o);
    auto ws = std::make_shared<Workspace>();
    Net(std::make_shared<const NetDef>(nets.init), ws).Run();
    NetOptions no;
    no.math = math;
    Net net(std::make_shared<const NetDef>(nets.train), ws, no);
    Run r;
    for (int s = 0; s < steps; ++s) {
      FeedBatch(*ws, s, pixels);
      net.Run();
      r.losses.push_back(HostFloats(*ws, "loss").at(0));
    }
    for (const auto& p : m.params) r.params[p] = HostFloats(*ws, nets.scopes.at(0) + p);
    if (scaled) r.scale = HostFloats(*ws, kLossScaleBlob).at(0);
    if (auto stats = net.capture_stats()) r.replays = stats->runs.replays;
    return r;
  };
  const Run fp32 = train(false, MathMode::kFp32, 65536, 1.0f, 20);
  const Run fp32_scaled = train(true, MathMode::kFp32, 65536, 1.0f, 20);
  CHECK(fp32_scaled.losses == fp32.losses);
  CHECK(fp32_scaled.params == fp32.params);
  CHECK(fp32_scaled.scale == 65536.0f);
  CHECK(fp32_scaled.replays >= 17);  // the scaler's ops are in the graph
  const Run fp16 = train(true, MathMode::kFp16, 65536, 1.0f, 20);
  double worst = 0;
  for (size_t s = 0; s < fp32.losses.size(); ++s)
    worst = std::max(worst, std::fabs(double{fp16.losses[s]} - fp32.losses[s]) / (1.0 + std::fabs(double{fp32.losses[s]})));
  MESSAGE("fp16 with loss scaling: worst loss error against fp32 over 20 steps ", worst, ", scale ", fp16.scale);
  CHECK(worst <= 2e-2);
  // An overflow: pixels 1000 times larger and a scale of 3e38.
  const Run before = train(true, MathMode::kFp32, 3e38, 1000.0f, 0);
  const Run skipped = train(true, MathMode::kFp32, 3e38, 1000.0f, 1);
  CHECK(skipped.params == before.params);
  CHECK(skipped.scale == 1.5e38f);
}

// With a sharded optimizer state each replica checks its shard of the
// gradients and the flags are summed: the steps skipped are the unsharded
// run's, bit for bit, through cut after cut of the scale from 2^127.
TEST_CASE("GPU: loss scaling with a sharded optimizer state on cuda:0,cuda:0 skips as unsharded") {
  const ModelDef m = ModelFromFile(NetsDir() + "fashion_mlp.json");
  auto feed = [](Workspace& ws, int step) { FeedBatch(ws, step, 1000.0f); };
  const testing::ScaledRun plain = testing::TrainScaledOnGpus(m, {0, 0}, false, 30, feed);
  const testing::ScaledRun sharded = testing::TrainScaledOnGpus(m, {0, 0}, true, 30, feed);
  CHECK(sharded.scales == plain.scales);
  CHECK(sharded.scales.back() < std::ldexp(1.0f, 127));  // cut: steps were skipped
  CHECK(sharded.params == plain.params);
}

}  // namespace

#endif  // DP_WITH_CUDA
