// Parallelize (single process, CPU replicas): N replicas fed a global batch B
// end with the same params as one device trained on B, for several N, bucket
// layouts and optimizers; the nets' structure; bad options.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/workspace.h"
#include "exec/net.h"
#include "graph/task_graph.h"
#include "model/model_format.h"
#include "model/training.h"
#include "op_test_util.h"
#include "cuda/cuda_runtime.h"
#include "ops/host_placement.h"
#include "ops/op_schema.h"
#include "parallel/parallelize.h"

using namespace dp;
using dp::testing::ExpectError;

namespace {

// A 2-layer MLP on 8 features, `hidden` units, 3 classes, with the given
// optimizer JSON.
ModelDef Mlp(const std::string& optimizer, int hidden = 16) {
  const std::string h = std::to_string(hidden);
  return ModelFromJson(R"({
  "name": "mlp",
  "init_net": {"ops": [
    {"type": "XavierFill", "outputs": ["w1"], "args": [{"name": "shape", "ints": [)" + h + R"(, 8]}, {"name": "seed", "i": 1}]},
    {"type": "ConstantFill", "outputs": ["b1"], "args": [{"name": "shape", "ints": [)" + h + R"(]}, {"name": "value", "f": 0.1}]},
    {"type": "XavierFill", "outputs": ["w2"], "args": [{"name": "shape", "ints": [3, )" + h + R"(]}, {"name": "seed", "i": 2}]},
    {"type": "ConstantFill", "outputs": ["b2"], "args": [{"name": "shape", "ints": [3]}]}]},
  "forward_net": {"ops": [
    {"type": "FC", "inputs": ["data", "w1", "b1"], "outputs": ["h"]},
    {"type": "Relu", "inputs": ["h"], "outputs": ["h"]},
    {"type": "FC", "inputs": ["h", "w2", "b2"], "outputs": ["logits"]},
    {"type": "SoftmaxWithLoss", "inputs": ["logits", "label"], "outputs": ["softmax", "loss"]},
    {"type": "Accuracy", "inputs": ["softmax", "label"], "outputs": ["accuracy"]}]},
  "params": ["w1", "b1", "w2", "b2"],
  "inputs": ["data", "label"],
  "losses": ["loss"],
  "metrics": ["accuracy"],
  "optimizer": )" + optimizer + "}");
}

// Mlp with SpatialBN (running statistics rm, rv) between the layers.
ModelDef BnMlp(const std::string& optimizer) {
  return ModelFromJson(R"({
  "name": "bn",
  "init_net": {"ops": [
    {"type": "XavierFill", "outputs": ["w1"], "args": [{"name": "shape", "ints": [16, 8]}, {"name": "seed", "i": 1}]},
    {"type": "ConstantFill", "outputs": ["b1"], "args": [{"name": "shape", "ints": [16]}]},
    {"type": "ConstantFill", "outputs": ["gamma"], "args": [{"name": "shape", "ints": [16]}, {"name": "value", "f": 1}]},
    {"type": "ConstantFill", "outputs": ["beta"], "args": [{"name": "shape", "ints": [16]}]},
    {"type": "ConstantFill", "outputs": ["rm"], "args": [{"name": "shape", "ints": [16]}]},
    {"type": "ConstantFill", "outputs": ["rv"], "args": [{"name": "shape", "ints": [16]}, {"name": "value", "f": 1}]},
    {"type": "XavierFill", "outputs": ["w2"], "args": [{"name": "shape", "ints": [3, 16]}, {"name": "seed", "i": 2}]},
    {"type": "ConstantFill", "outputs": ["b2"], "args": [{"name": "shape", "ints": [3]}]}]},
  "forward_net": {"ops": [
    {"type": "FC", "inputs": ["data", "w1", "b1"], "outputs": ["h"]},
    {"type": "SpatialBN", "inputs": ["h", "gamma", "beta", "rm", "rv"], "outputs": ["hn", "rm", "rv", "sm", "sv"]},
    {"type": "Relu", "inputs": ["hn"], "outputs": ["hn"]},
    {"type": "FC", "inputs": ["hn", "w2", "b2"], "outputs": ["logits"]},
    {"type": "SoftmaxWithLoss", "inputs": ["logits", "label"], "outputs": ["softmax", "loss"]}]},
  "params": ["w1", "b1", "gamma", "beta", "w2", "b2"],
  "computed_params": ["rm", "rv"],
  "inputs": ["data", "label"],
  "losses": ["loss"],
  "optimizer": )" + optimizer + "}");
}

void FeedBatch(Workspace& ws, int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  std::uniform_int_distribution<int32_t> c(0, 2);
  Tensor x({n, 8}, DType::kFloat32), y({n}, DType::kInt32);
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_data<float>()[i] = d(gen);
  for (int i = 0; i < n; ++i) y.mutable_data<int32_t>()[i] = c(gen);
  ws.Feed("data", x);
  ws.Feed("label", y);
}

// The ops of `type` in `net` whose `compress` argument names `c`'s 16-bit type
// ("bf16", "fp16"), each on `device` when one is given.
size_t CompressingOps(const NetDef& net, const std::string& type, DType c,
                      std::optional<DeviceOption> device = std::nullopt) {
  size_t n = 0;
  for (const auto& op : net.ops) {
    const Argument* a = op.FindArg("compress");
    if (op.type != type || a == nullptr || std::get<std::string>(a->value) != (c == DType::kBFloat16 ? "bf16" : "fp16"))
      continue;
    if (device) CHECK(net.OpDevice(op) == *device);
    ++n;
  }
  return n;
}

std::vector<float> Floats(const Workspace& ws, const std::string& name) {
  const Tensor& t = ws.GetTensor(name);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// A workspace after `init` and `steps` runs of `train` on batches of `batch`
// (seeds 100, 101, ...).
std::shared_ptr<Workspace> TrainSteps(const NetDef& init, const NetDef& train, int batch, int steps) {
  auto ws = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(init), ws).Run();
  Net net(std::make_shared<const NetDef>(train), ws);
  for (int s = 0; s < steps; ++s) {
    FeedBatch(*ws, batch, static_cast<uint32_t>(100 + s));
    net.Run();
  }
  return ws;
}

// Params and computed params after `steps` one-device steps on batches of `batch`.
std::map<std::string, std::vector<float>> TrainOneDevice(const ModelDef& m, int batch, int steps) {
  TrainingNets nets = BuildTraining(m);
  auto ws = TrainSteps(nets.init, nets.train, batch, steps);
  std::map<std::string, std::vector<float>> out;
  for (const auto* list : {&m.params, &m.computed_params})
    for (const auto& p : *list) out[p] = Floats(*ws, p);
  return out;
}


// max |a - b| / (1 + |b|)
double RelErr(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i)
    e = std::max(e, std::fabs(double{a[i]} - double{b[i]}) / (1.0 + std::fabs(double{b[i]})));
  return e;
}

// Largest RelErr over the params and computed params of replica `scope`
// against the one-device values.
double MaxRelErr(const Workspace& ws, const std::string& scope, const ModelDef& m,
                 std::map<std::string, std::vector<float>>& want) {
  double e = 0;
  for (const auto* list : {&m.params, &m.computed_params})
    for (const auto& p : *list) e = std::max(e, RelErr(Floats(ws, scope + p), want[p]));
  return e;
}

ParallelizeOptions Cpus(int n) {
  ParallelizeOptions o;
  for (int i = 0; i < n; ++i) o.device_ids.push_back(i);
  return o;
}

}  // namespace

TEST_CASE("N CPU replicas on a global batch equal one device on it") {
  const int batch = 12, steps = 4;
  for (const char* opt : {R"({"type": "sgd", "lr": 0.5})", R"({"type": "momentum", "lr": 0.1, "nesterov": true})",
                          R"({"type": "adam", "lr": 0.02, "weight_decay": 0.01})"}) {
    CAPTURE(opt);
    ModelDef m = Mlp(opt);
    auto want = TrainOneDevice(m, batch, steps);
    for (int n : {1, 2, 3, 4}) {
      for (int64_t bucket : {int64_t{64}, int64_t{25} << 20}) {  // one gradient per bucket, or one bucket
        CAPTURE(n);
        CAPTURE(bucket);
        ParallelizeOptions o = Cpus(n);
        o.first_bucket_bytes = o.bucket_bytes = bucket;
        ParallelNets nets = Parallelize(m, o);
        CHECK(nets.buckets.size() == (bucket == 64 ? 4u : 1u));
        auto ws = TrainSteps(nets.init, nets.train, batch, steps);
        CHECK(ws->GetTensor(kIterBlob).data<int64_t>()[0] == steps);
        for (const auto& p : m.params) {
          CAPTURE(p);
          // Every replica holds the one-device result, bitwise the same as replica 0.
          const auto first = Floats(*ws, nets.scopes[0] + p);
          CHECK(RelErr(first, want[p]) <= 1e-5);
          for (const auto& s : nets.scopes) CHECK(Floats(*ws, s + p) == first);
        }
        // The eval net reads replica 0's params under the model's own names.
        FeedBatch(*ws, 5, 7);
        Net(std::make_shared<const NetDef>(nets.eval), ws).Run();
        CHECK(std::isfinite(ws->GetTensor("loss").data<float>()[0]));
      }
    }
  }
}

TEST_CASE("gradient compression (bf16, fp16): replicas stay identical, within the 16-bit rounding of float32") {
  const int batch = 12, steps = 4;
  ModelDef m = Mlp(R"({"type": "sgd", "lr": 0.5})");
  auto want = TrainOneDevice(m, batch, steps);
  for (DType c : {DType::kBFloat16, DType::kFloat16}) {
    CAPTURE(DTypeName(c));
    ParallelizeOptions o = Cpus(2);
    o.gradient_compression = c;
    ParallelNets nets = Parallelize(m, o);
    // Every bucket (the updates do not sum the replicas' gradients then).
    CHECK(CompressingOps(nets.train, "Allreduce", c) == nets.buckets.size());
    auto ws = TrainSteps(nets.init, nets.train, batch, steps);
    double worst = 0;
    bool differs = false;
    for (const auto& p : m.params) {
      const auto first = Floats(*ws, nets.scopes[0] + p);
      CHECK(Floats(*ws, nets.scopes[1] + p) == first);
      worst = std::max(worst, RelErr(first, want[p]));
      differs = differs || first != want[p];
    }
    MESSAGE(DTypeName(c), ": params within ", worst, " of float32's after ", steps, " steps");
    CHECK(differs);
    CHECK(worst < (c == DType::kBFloat16 ? 4e-3 : 6e-4));
    // A sharded optimizer state reduce-scatters the same 16-bit sums: bit for
    // bit the unsharded compressed run (2 and 3 replicas, momentum's state).
    const ModelDef mm = Mlp(R"({"type": "momentum", "lr": 0.1})");
    for (int n : {2, 3}) {
      CAPTURE(n);
      ParallelizeOptions z = Cpus(n);
      z.gradient_compression = c;
      ParallelNets plain = Parallelize(mm, z);
      z.shard_optimizer_state = true;
      ParallelNets zero = Parallelize(mm, z);
      CHECK(CompressingOps(zero.train, "ReduceScatter", c) == zero.buckets.size());
      auto want_ws = TrainSteps(plain.init, plain.train, batch, steps);
      auto got_ws = TrainSteps(zero.init, zero.train, batch, steps);
      for (const auto& p : mm.params)
        for (const auto& s : zero.scopes) CHECK(Floats(*got_ws, s + p) == Floats(*want_ws, "cpu_0/" + p));
      CHECK(Floats(*got_ws, "loss") == Floats(*want_ws, "loss"));
    }
  }
  ParallelizeOptions bad = Cpus(2);
  bad.gradient_compression = DType::kInt32;
  ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"gradient_compression", "int32"});
  bad.gradient_compression = DType::kBFloat16;
  bad.bmuf.enabled = true;
  ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"gradient_compression", "BMUF"});
  // CUDA replicas compress too (CudaCollectives::AllreduceCompressed): each
  // bucket's Allreduce, on the first replica's GPU, carries the argument.
  if (cuda::BuiltWithCuda()) {
    ParallelizeOptions gpu = Cpus(2);
    gpu.device_type = DeviceType::kCUDA;
    gpu.device_ids = {0, 0};
    gpu.nccl = false;  // one GPU named twice: the tree
    gpu.gradient_compression = DType::kFloat16;
    const ParallelNets nets = Parallelize(m, gpu);
    CHECK(CompressingOps(nets.train, "Allreduce", DType::kFloat16, DeviceOption{DeviceType::kCUDA, 0}) ==
          nets.buckets.size());
  }
}

TEST_CASE("gradient accumulation: K steps of N replicas equal one device on the K global batches together") {
  const int global = 6, k = 3, steps = 3;
  ModelDef m = Mlp(R"({"type": "momentum", "lr": 0.1})");
  // One device: each step's batch is the K micro-batches concatenated.
  TrainingNets one = BuildTraining(m);
  auto w1 = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(one.init), w1).Run();
  Net train1(std::make_shared<const NetDef>(one.train), w1);
  for (int s = 0; s < steps; ++s) {
    Tensor x({global * k, 8}, DType::kFloat32), y({global * k}, DType::kInt32);
    for (int j = 0; j < k; ++j) {
      Workspace tmp;
      FeedBatch(tmp, global, static_cast<uint32_t>(10 * s + j));
      std::copy_n(tmp.GetTensor("data").data<float>(), global * 8, x.mutable_data<float>() + j * global * 8);
      std::copy_n(tmp.GetTensor("label").data<int32_t>(), global, y.mutable_data<int32_t>() + j * global);
    }
    w1->Feed("data", x);
    w1->Feed("label", y);
    train1.Run();
  }
  for (int n : {2, 3}) {
    CAPTURE(n);
    ParallelizeOptions o = Cpus(n);
    o.accumulate_steps = k;
    ParallelNets nets = Parallelize(m, o);
    REQUIRE(!nets.accumulate.ops.empty());
    for (const auto& op : nets.accumulate.ops) CHECK(op.type != "Allreduce");  // no communication
    auto ws = std::make_shared<Workspace>();
    Net(std::make_shared<const NetDef>(nets.init), ws).Run();
    Net acc(std::make_shared<const NetDef>(nets.accumulate), ws);
    Net train(std::make_shared<const NetDef>(nets.train), ws);
    for (int s = 0; s < steps; ++s) {
      for (int j = 0; j < k; ++j) {
        FeedBatch(*ws, global, static_cast<uint32_t>(10 * s + j));
        (j + 1 < k ? acc : train).Run();
      }
    }
    CHECK(ws->GetTensor(kIterBlob).data<int64_t>()[0] == steps);
    for (const auto& p : m.params) {
      CAPTURE(p);
      CHECK(RelErr(Floats(*ws, nets.scopes[n - 1] + p), Floats(*w1, p)) <= 1e-5);
    }
  }
  ParallelizeOptions bad = Cpus(2);
  bad.accumulate_steps = 0;
  ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"accumulate_steps"});
}

TEST_CASE("BMUF: local steps on each replica's shard, then the block update, against a reference") {
  const int global = 12, tau = 3, blocks = 2;
  for (bool nesterov : {true, false}) {
    CAPTURE(nesterov);
    ModelDef m = Mlp(R"({"type": "momentum", "lr": 0.1})");
    const int n = 3;
    const double zeta = 0.9, mu = 1.0 - 1.0 / n;
    // Reference: N independent one-device learners, each on its rows of the global batch.
    TrainingNets one = BuildTraining(m);
    std::vector<std::shared_ptr<Workspace>> learners;
    std::vector<std::unique_ptr<Net>> steps;
    for (int r = 0; r < n; ++r) {
      learners.push_back(std::make_shared<Workspace>());
      Net(std::make_shared<const NetDef>(one.init), learners.back()).Run();
      steps.push_back(std::make_unique<Net>(std::make_shared<const NetDef>(one.train), learners.back()));
    }
    std::map<std::string, std::vector<double>> wg, delta;
    for (const auto& p : m.params) {
      auto w = Floats(*learners[0], p);
      wg[p].assign(w.begin(), w.end());
      delta[p].assign(w.size(), 0.0);
    }
    // dp: the same with Parallelize + BMUF.
    ParallelizeOptions o = Cpus(n);
    o.bmuf.enabled = true;
    o.bmuf.block_lr = zeta;
    o.bmuf.nesterov = nesterov;
    o.bmuf.block_length = tau;
    ParallelNets nets = Parallelize(m, o);
    REQUIRE(!nets.block.ops.empty());
    for (const auto& op : nets.train.ops) CHECK(op.type != "Allreduce");  // local steps only
    auto ws = std::make_shared<Workspace>();
    Net(std::make_shared<const NetDef>(nets.init), ws).Run();
    Net train(std::make_shared<const NetDef>(nets.train), ws);
    Net block(std::make_shared<const NetDef>(nets.block), ws);

    for (int b = 0; b < blocks; ++b) {
      for (int t = 0; t < tau; ++t) {
        const auto seed = static_cast<uint32_t>(50 + b * tau + t);
        FeedBatch(*ws, global, seed);
        train.Run();
        Workspace tmp;
        FeedBatch(tmp, global, seed);
        const int rows = global / n;
        for (int r = 0; r < n; ++r) {
          Tensor x({rows, 8}, DType::kFloat32), y({rows}, DType::kInt32);
          std::copy_n(tmp.GetTensor("data").data<float>() + r * rows * 8, rows * 8, x.mutable_data<float>());
          std::copy_n(tmp.GetTensor("label").data<int32_t>() + r * rows, rows, y.mutable_data<int32_t>());
          learners[r]->Feed("data", x);
          learners[r]->Feed("label", y);
          steps[r]->Run();
        }
      }
      block.Run();
      for (const auto& p : m.params) {
        std::vector<double> avg(wg[p].size(), 0.0);
        for (int r = 0; r < n; ++r) {
          auto w = Floats(*learners[r], p);
          for (size_t i = 0; i < w.size(); ++i) avg[i] += w[i] / n;
        }
        Tensor next({static_cast<int64_t>(avg.size())}, DType::kFloat32);
        for (size_t i = 0; i < avg.size(); ++i) {
          delta[p][i] = mu * delta[p][i] + zeta * (avg[i] - wg[p][i]);
          wg[p][i] += delta[p][i];
          next.mutable_data<float>()[i] = static_cast<float>(nesterov ? wg[p][i] + mu * delta[p][i] : wg[p][i]);
        }
        next.Reshape(learners[0]->GetTensor(p).dims());
        for (int r = 0; r < n; ++r) {
          Tensor c;
          c.CopyFrom(next);
          learners[r]->Feed(p, c);
        }
        CAPTURE(p);
        CAPTURE(b);
        for (const auto& sc : nets.scopes) CHECK(RelErr(Floats(*ws, sc + p), Floats(*learners[0], p)) <= 1e-5);
      }
    }
  }
  ModelDef m = Mlp(R"({"type": "sgd", "lr": 0.1})");
  ParallelizeOptions bad = Cpus(2);
  bad.bmuf.enabled = true;
  bad.bmuf.block_momentum = 1.0;
  ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"block_momentum"});
  bad.bmuf.block_momentum = 0.5;
  bad.bmuf.block_length = 0;
  ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"block_length"});
  bad.bmuf.block_length = 4;
  bad.accumulate_steps = 2;
  ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"BMUF", "accumulat"});
}

TEST_CASE("computed params (BN running statistics): broadcast from replica 0, averaged, or left alone") {
  ModelDef m = BnMlp(R"({"type": "sgd", "lr": 0.1})");
  const int n = 3;
  auto one_step = [&](ComputedParamsSync sync) {
    ParallelizeOptions o = Cpus(n);
    o.computed_params = sync;
    ParallelNets nets = Parallelize(m, o);
    auto ws = std::make_shared<Workspace>();
    Net(std::make_shared<const NetDef>(nets.init), ws).Run();
    FeedBatch(*ws, 12, 5);
    Net(std::make_shared<const NetDef>(nets.train), ws).Run();
    std::map<std::string, std::vector<std::vector<float>>> stats;
    for (const char* b : {"rm", "rv"})
      for (const auto& s : nets.scopes) stats[b].push_back(Floats(*ws, s + b));
    return stats;
  };
  auto none = one_step(ComputedParamsSync::kNone);
  auto broadcast = one_step(ComputedParamsSync::kBroadcast);
  auto average = one_step(ComputedParamsSync::kAverage);
  for (const char* b : {"rm", "rv"}) {
    CAPTURE(b);
    CHECK(none[b][0] != none[b][1]);  // each replica saw other samples
    std::vector<float> mean(none[b][0].size(), 0.0f);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < mean.size(); ++i) mean[i] += none[b][static_cast<size_t>(r)][i];
    for (auto& v : mean) v /= n;
    for (int r = 0; r < n; ++r) {
      CHECK(broadcast[b][static_cast<size_t>(r)] == none[b][0]);
      CHECK(RelErr(average[b][static_cast<size_t>(r)], mean) <= 1e-6);
    }
  }
}

TEST_CASE("parallel nets: replicas under scopes, buckets in backward order, averaged loss") {
  ModelDef m = Mlp(R"({"type": "sgd", "lr": 0.1})");
  // Five CPU replicas: more than sum their gradients in the updates, so one
  // Allreduce per bucket.
  ParallelizeOptions o = Cpus(5);
  o.first_bucket_bytes = 16 * 3 * 4 + 3 * 4;  // w2 and b2: the last layer's gradients come first
  o.bucket_bytes = 1 << 20;
  ParallelNets nets = Parallelize(m, o);
  CHECK(nets.scopes == std::vector<std::string>{"cpu_0/", "cpu_1/", "cpu_2/", "cpu_3/", "cpu_4/"});
  REQUIRE(nets.buckets.size() == 2);
  CHECK(nets.buckets[0] == std::vector<std::string>{"w2", "b2"});  // FCGradient writes both at once
  CHECK(nets.buckets[1] == std::vector<std::string>{"w1", "b1"});
  int allreduce = 0, fc_on_1 = 0;
  for (const auto& op : nets.train.ops) {
    allreduce += op.type == "Allreduce";
    fc_on_1 += op.type == "FC" && op.device && op.device->id == 1 && op.inputs[1] == "cpu_1/w1";
  }
  CHECK(allreduce == 2);
  CHECK(fc_on_1 == 1);
  // Two to four: no Allreduce; every replica's update of a param reads every
  // replica's gradient of it, in replica order (the allreduce's sum).
  for (int n : {2, 4}) {
    CAPTURE(n);
    const ParallelNets few = Parallelize(m, Cpus(n));
    int updates = 0;
    for (const auto& op : few.train.ops) {
      CHECK(op.type != "Allreduce");
      if (op.type != "SGD") continue;
      ++updates;
      REQUIRE(op.inputs.size() == static_cast<size_t>(2 + n));  // param, grad, lr, the other replicas' grads
      const std::string param = op.outputs[0].substr(op.outputs[0].find('/') + 1);
      CHECK(op.inputs[1] == "cpu_0/" + param + "_grad");
      for (int r = 1; r < n; ++r) CHECK(op.inputs[static_cast<size_t>(2 + r)] == "cpu_" + std::to_string(r) + "/" + param + "_grad");
    }
    CHECK(updates == 4 * n);  // each replica updates its own copy of each of the 4 params
  }

  // The loss the train net reports is the global batch's mean loss.
  auto ws = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(nets.init), ws).Run();
  FeedBatch(*ws, 10, 3);
  Net(std::make_shared<const NetDef>(nets.eval), ws).Run();  // before the step: the same params
  const float eval_loss = ws->GetTensor("loss").data<float>()[0];
  Net(std::make_shared<const NetDef>(nets.train), ws).Run();
  CHECK(ws->GetTensor("loss").data<float>()[0] == doctest::Approx(eval_loss).epsilon(1e-5));
}

TEST_CASE("parallelize: bad options and batches give clear errors") {
  ModelDef m = Mlp(R"({"type": "sgd", "lr": 0.1})");
  ExpectError([&] { Parallelize(m, ParallelizeOptions{}); }, Code::kInvalidArgument, {"no devices"});
  ParallelizeOptions dup = Cpus(2);
  dup.device_ids[1] = 0;
  ExpectError([&] { Parallelize(m, dup); }, Code::kInvalidArgument, {"cpu:0", "twice"});
  ParallelizeOptions neg = Cpus(1);
  neg.device_ids[0] = -1;
  ExpectError([&] { Parallelize(m, neg); }, Code::kInvalidArgument, {"-1"});
  ParallelizeOptions zero = Cpus(2);
  zero.bucket_bytes = 0;
  ExpectError([&] { Parallelize(m, zero); }, Code::kInvalidArgument, {"bucket"});
  ParallelizeOptions gpu = Cpus(2);
  gpu.device_type = DeviceType::kCUDA;
  // Every training op has a CUDA kernel or runs on the host: CUDA nets build
  // without a GPU (creating them needs one).
  if (!cuda::BuiltWithCuda())
    ExpectError([&] { Parallelize(m, gpu); }, Code::kUnavailable, {"without CUDA"});
  else
    CHECK(Parallelize(m, gpu).scopes == std::vector<std::string>{"cuda_0/", "cuda_1/"});
  // Several processes of CUDA replicas communicate through NCCL...
  ParallelizeOptions gpu_shards = gpu;
  gpu_shards.num_shards = 2;
  gpu_shards.store = "file:///tmp/dp-unused-store";
  if (!cuda::BuiltWithCuda())
    ExpectError([&] { Parallelize(m, gpu_shards); }, Code::kUnavailable, {"without CUDA"});
  else
    CHECK(Parallelize(m, gpu_shards).num_shards == 2);
  // ... not the copy-and-sum tree, which works inside one process.
  gpu_shards.nccl = false;
  ExpectError([&] { Parallelize(m, gpu_shards); }, Code::kInvalidArgument, {"NCCL", "tree"});
  // One GPU named twice: two replicas through the tree (a testing aid); NCCL
  // cannot run two ranks on one GPU.
  ParallelizeOptions twice = gpu;
  twice.device_ids = {0, 0};
  ExpectError([&] { Parallelize(m, twice); }, Code::kInvalidArgument,
              {"cuda:0 twice", "NCCL", "DP_CUDA_COLLECTIVES_TREE"});
  twice.nccl = false;
  if (!cuda::BuiltWithCuda())
    ExpectError([&] { Parallelize(m, twice); }, Code::kUnavailable, {"without CUDA"});
  else
    CHECK(Parallelize(m, twice).scopes == std::vector<std::string>{"cuda_0/", "cuda_0.1/"});
  ParallelizeOptions shared_gpu = gpu;
  shared_gpu.shared_model = true;
  ExpectError([&] { Parallelize(m, shared_gpu); }, Code::kInvalidArgument, {"shared_model", "CPU"});
  ParallelizeOptions bmuf_shared = Cpus(2);
  bmuf_shared.bmuf.enabled = bmuf_shared.shared_model = true;
  ExpectError([&] { Parallelize(m, bmuf_shared); }, Code::kInvalidArgument, {"BMUF", "shared_model"});
  ParallelizeOptions bmuf_sync = Cpus(2);
  bmuf_sync.bmuf.enabled = bmuf_sync.sync_bn = true;
  ExpectError([&] { Parallelize(m, bmuf_sync); }, Code::kInvalidArgument, {"BMUF", "sync_bn"});
  ModelDef no_opt = m;
  no_opt.optimizer.reset();
  ExpectError([&] { Parallelize(no_opt, Cpus(2)); }, Code::kInvalidArgument, {"no optimizer"});

  // A batch of 10 over 3 replicas: refused, naming the input, unless uneven splitting is on.
  ParallelNets nets = Parallelize(m, Cpus(3));
  auto ws = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(nets.init), ws).Run();
  Net train(std::make_shared<const NetDef>(nets.train), ws);
  FeedBatch(*ws, 10, 1);
  ExpectError([&] { train.Run(); }, Code::kShape, {"SplitBatch", "a batch of 10", "3 devices"});  // data or label
  ParallelizeOptions uneven = Cpus(3);
  uneven.uneven_split = true;
  uneven.memory = MemoryMode::kKeep;  // the replicas' shards are read after the step
  ParallelNets u = Parallelize(m, uneven);
  auto wu = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(u.init), wu).Run();
  FeedBatch(*wu, 10, 1);
  Net(std::make_shared<const NetDef>(u.train), wu).Run();
  CHECK(wu->GetTensor("cpu_0/data").dims() == Dims{4, 8});
  CHECK(wu->GetTensor("cpu_2/data").dims() == Dims{3, 8});
}

TEST_CASE("sync BN: N replicas normalise over the global batch, as one device does") {
  const int batch = 12, steps = 3;
  ModelDef m = BnMlp(R"({"type": "momentum", "lr": 0.1})");
  auto want = TrainOneDevice(m, batch, steps);
  for (int n : {2, 3, 4}) {
    CAPTURE(n);
    ParallelizeOptions o = Cpus(n);
    o.sync_bn = true;
    ParallelNets nets = Parallelize(m, o);
    int sync_ops = 0;
    for (const auto& op : nets.train.ops) sync_ops += op.type == "SyncSpatialBN" || op.type == "SyncSpatialBNGradient";
    CHECK(sync_ops == 2 * n);
    auto ws = TrainSteps(nets.init, nets.train, batch, steps);
    for (const auto& s : nets.scopes) CHECK(MaxRelErr(*ws, s, m, want) <= 1e-5);  // params and running statistics

    // Without sync BN each replica normalises its own shard: another result.
    ParallelizeOptions local = Cpus(n);
    ParallelNets lnets = Parallelize(m, local);
    auto lws = TrainSteps(lnets.init, lnets.train, batch, steps);
    CHECK(MaxRelErr(*lws, "cpu_0/", m, want) > 1e-3);
  }
  // Uneven shards (4, 3, 3 of 10): the statistics count every sample once.
  auto want10 = TrainOneDevice(m, 10, steps);
  ParallelizeOptions o = Cpus(3);
  o.sync_bn = o.uneven_split = true;
  ParallelNets nets = Parallelize(m, o);
  auto ws = TrainSteps(nets.init, nets.train, 10, steps);
  for (const auto& s : nets.scopes) CHECK(MaxRelErr(*ws, s, m, want10) <= 1e-5);
}

TEST_CASE("uneven split: each replica's loss weighs its share of the batch, exactly") {
  const int steps = 3;
  for (const char* opt : {R"({"type": "sgd", "lr": 0.5})", R"({"type": "adam", "lr": 0.02})"}) {
    CAPTURE(opt);
    ModelDef m = Mlp(opt);
    for (int batch : {7, 10}) {
      auto want = TrainOneDevice(m, batch, steps);
      for (int n : {2, 3, 4}) {
        CAPTURE(batch);
        CAPTURE(n);
        ParallelizeOptions o = Cpus(n);
        o.uneven_split = true;
        ParallelNets nets = Parallelize(m, o);
        auto ws = TrainSteps(nets.init, nets.train, batch, steps);
        for (const auto& s : nets.scopes) CHECK(MaxRelErr(*ws, s, m, want) <= 1e-5);
        // The reported loss is the global batch's mean loss.
        FeedBatch(*ws, batch, 9);
        Net(std::make_shared<const NetDef>(nets.eval), ws).Run();
        const float eval_loss = ws->GetTensor("loss").data<float>()[0];
        Net(std::make_shared<const NetDef>(nets.train), ws).Run();
        CHECK(ws->GetTensor("loss").data<float>()[0] == doctest::Approx(eval_loss).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("shared model: replicas read replica 0's params, one update per param, spread over the replicas") {
  const int batch = 12, steps = 3;
  ModelDef m = BnMlp(R"({"type": "momentum", "lr": 0.1, "nesterov": true})");
  auto want = TrainOneDevice(m, batch, steps);
  for (int n : {2, 3}) {
    CAPTURE(n);
    ParallelizeOptions o = Cpus(n);
    o.shared_model = o.sync_bn = true;
    ParallelNets nets = Parallelize(m, o);
    auto ws = TrainSteps(nets.init, nets.train, batch, steps);
    CHECK(MaxRelErr(*ws, "cpu_0/", m, want) <= 1e-5);
    for (int r = 1; r < n; ++r) {
      const std::string s = nets.scopes[static_cast<size_t>(r)];
      CHECK_FALSE(ws->HasBlob(s + "w1"));
      CHECK_FALSE(ws->HasBlob(s + "w1/momentum"));
      CHECK(Floats(*ws, s + "rm") == Floats(*ws, "cpu_0/rm"));  // computed params stay per replica
    }
    // Each (small) param updated once, the updates spread over the
    // replicas, each summing every replica's gradient: no allreduce.
    std::set<std::string> updated, on;
    for (const auto& op : nets.train.ops) {
      if (op.type == "Allreduce") {  // sync BN's statistics only
        const Argument* key = op.FindArg("key");
        CHECK((key && std::get<std::string>(key->value).rfind("grad_bucket", 0) != 0));
      }
      if (op.type != "MomentumSGD") continue;
      CHECK(op.inputs.at(0).rfind("cpu_0/", 0) == 0);
      CHECK(op.inputs.at(1).rfind("cpu_0/", 0) == 0);
      CHECK(op.inputs.size() == 4 + static_cast<size_t>(n) - 1);
      CHECK(updated.insert(op.inputs.at(0)).second);
      on.insert(nets.scopes.at(static_cast<size_t>(op.device->id)));
    }
    CHECK(updated.size() == m.params.size());
    CHECK(on.size() == static_cast<size_t>(n));
  }
}

TEST_CASE("shared model in one process: big params updated in one part per replica, gradients summed by the updates") {
  // w1 is 8192 x 8 floats (256 KiB): split; the others are updated whole.
  const int batch = 12, steps = 3;
  for (const char* opt : {R"({"type": "adam", "lr": 0.01, "weight_decay": 0.01})", R"({"type": "momentum", "lr": 0.05})"}) {
    CAPTURE(opt);
    const ModelDef mo = Mlp(opt, 8192);
    auto want_o = TrainOneDevice(mo, batch, steps);
    for (int n : {2, 3}) {
      CAPTURE(n);
      ParallelizeOptions o = Cpus(n);
      o.shared_model = true;
      ParallelNets nets = Parallelize(mo, o);
      std::map<std::string, std::set<int64_t>> parts;
      for (const auto& op : nets.train.ops) {
        CHECK(op.type != "Allreduce");
        if (op.type != "Adam" && op.type != "MomentumSGD") continue;
        const size_t replica = static_cast<size_t>(op.device->id);
        const PartialWrite w = PartialWriteOf(op);
        if (op.inputs.at(0) == "cpu_0/w1") {
          CHECK(w.parts == n);
          CHECK(w.part == static_cast<int64_t>(replica));  // part k on replica k
        } else {
          CHECK(w.parts == 1);
        }
        parts[op.inputs.at(0)].insert(w.part);
        // grad (replica 0's), then the other replicas' in order.
        const size_t first_extra = op.type == "Adam" ? 6 : 4;
        REQUIRE(op.inputs.size() == first_extra + static_cast<size_t>(n) - 1);
        CHECK(op.inputs.at(1).rfind("cpu_0/", 0) == 0);
        for (int r = 1; r < n; ++r) CHECK(op.inputs.at(first_extra + static_cast<size_t>(r) - 1).rfind(nets.scopes.at(static_cast<size_t>(r)), 0) == 0);
      }
      CHECK(parts.size() == mo.params.size());
      // w1 and its state are made writable before the parts run at once.
      const auto first_part = std::find_if(nets.train.ops.begin(), nets.train.ops.end(),
                                           [](const OperatorDef& op) { return PartialWriteOf(op).parts > 1; });
      REQUIRE(first_part != nets.train.ops.begin());
      CHECK(std::prev(first_part)->type == "MakeWritable");
      CHECK(std::prev(first_part)->inputs.at(0) == "cpu_0/w1");
      CHECK(parts["cpu_0/w1"].size() == static_cast<size_t>(n));
      // The parts of w1 do not wait for one another.
      std::vector<DeviceOption> devices;
      for (const auto& op : nets.train.ops) devices.push_back(*op.device);
      const TaskGraph g = BuildTaskGraph(nets.train, devices);
      std::vector<int> w1_parts;
      for (size_t i = 0; i < nets.train.ops.size(); ++i)
        if (PartialWriteOf(nets.train.ops[i]).parts > 1) w1_parts.push_back(static_cast<int>(i));
      for (int a : w1_parts)
        for (int b : w1_parts) CHECK(std::find(g.parents[static_cast<size_t>(a)].begin(), g.parents[static_cast<size_t>(a)].end(), b) == g.parents[static_cast<size_t>(a)].end());
      auto ws = TrainSteps(nets.init, nets.train, batch, steps);
      CHECK(MaxRelErr(*ws, "cpu_0/", mo, want_o) <= 1e-5);
    }
  }
}

// Replica r's shards of `state` (one per replica, in part order) laid end to end.
std::vector<float> Concat(const Workspace& ws, const ParallelNets& nets, const std::string& state) {
  std::vector<float> all;
  for (const auto& s : nets.scopes) {
    const auto part = Floats(ws, s + state);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

TEST_CASE("sharded optimizer state (ZeRO-1) in one process: bitwise the unsharded run, 1/N of the state each") {
  const int batch = 12, steps = 3;
  for (const char* opt : {R"({"type": "sgd", "lr": 0.5, "weight_decay": 0.01})",
                          R"({"type": "momentum", "lr": 0.1, "nesterov": true})",
                          R"({"type": "adam", "lr": 0.02, "weight_decay": 0.01})", R"({"type": "adagrad", "lr": 0.1})"}) {
    CAPTURE(opt);
    for (int hidden : {16, 100}) {  // w1: 128 elements (parts of 64: the third replica's empty) or 800
      const ModelDef m = Mlp(opt, hidden);
      for (int n : {2, 3}) {
        for (int accumulate : {1, 2}) {
          for (int64_t bucket : {int64_t{64}, int64_t{25} << 20}) {
            CAPTURE(hidden);
            CAPTURE(n);
            CAPTURE(accumulate);
            CAPTURE(bucket);
            ParallelizeOptions o = Cpus(n);
            o.first_bucket_bytes = o.bucket_bytes = bucket;
            o.accumulate_steps = accumulate;
            const ParallelNets plain = Parallelize(m, o);
            o.shard_optimizer_state = true;
            const ParallelNets zero = Parallelize(m, o);
            int scatters = 0, gathers = 0;
            for (const auto& op : zero.train.ops) {
              CHECK(op.type != "Allreduce");
              scatters += op.type == "ReduceScatter";
              gathers += op.type == "Allgather";
            }
            CHECK(scatters == static_cast<int>(zero.buckets.size()));
            CHECK(gathers == static_cast<int>(zero.buckets.size()));
            auto run = [&](const ParallelNets& nets) {
              auto ws = std::make_shared<Workspace>();
              Net(std::make_shared<const NetDef>(nets.init), ws).Run();
              Net train(std::make_shared<const NetDef>(nets.train), ws);
              std::unique_ptr<Net> acc;
              if (accumulate > 1) acc = std::make_unique<Net>(std::make_shared<const NetDef>(nets.accumulate), ws);
              for (int s = 0; s < steps * accumulate; ++s) {
                FeedBatch(*ws, batch, static_cast<uint32_t>(100 + s));
                (s % accumulate == accumulate - 1 ? train : *acc).Run();
              }
              return ws;
            };
            auto want = run(plain);
            auto got = run(zero);
            for (const auto& p : m.params) {
              CAPTURE(p);
              for (const auto& s : zero.scopes) CHECK(Floats(*got, s + p) == Floats(*want, "cpu_0/" + p));
              for (const auto& st : OptimizerStateBlobs(*m.optimizer, p)) {
                CAPTURE(st);
                const auto whole = Floats(*want, "cpu_0/" + st);
                CHECK(Concat(*got, zero, st) == whole);
                // Each replica holds its part alone.
                if (p == "w1") CHECK(got->GetTensor("cpu_0/" + st).numel() < static_cast<int64_t>(whole.size()));
              }
            }
            CHECK(Floats(*got, "loss") == Floats(*want, "loss"));
            // The checkpoint's whole state: gathered, then scattered again into zeroed shards.
            const auto& full = zero.shard_full;
            CHECK(full.empty() == (std::string(opt).find("sgd") != std::string::npos));  // SGD keeps no state
            if (full.empty()) continue;
            Net(std::make_shared<const NetDef>(zero.shard_gather), got).Run();
            for (const auto& binding : zero.checkpoint) {
              const std::string& name = binding.first;
              const std::string& blob = binding.second;
              CAPTURE(name);
              if (std::find(full.begin(), full.end(), blob) != full.end())
                CHECK(Floats(*got, blob) == Floats(*want, "cpu_0/" + name));
              else if (name != kIterBlob)
                CHECK(blob == "cpu_0/" + name);
            }
            std::map<std::string, std::vector<float>> before;
            for (const auto& s : zero.scopes)
              for (const auto& p : m.params)
                for (const auto& st : OptimizerStateBlobs(*m.optimizer, p)) {
                  before[s + st] = Floats(*got, s + st);
                  got->Feed(s + st, Tensor({0}, DType::kFloat32));
                }
            Net(std::make_shared<const NetDef>(zero.shard_scatter), got).Run();
            for (const auto& kept : before) CHECK(Floats(*got, kept.first) == kept.second);
            Net(std::make_shared<const NetDef>(zero.shard_stage), got).Run();
            for (const auto& f : full) {
              const auto zeros = Floats(*got, f);
              CHECK(std::all_of(zeros.begin(), zeros.end(), [](float v) { return v == 0; }));
            }
          }
        }
      }
    }
  }
  // One replica in all: nothing to shard, the plain nets.
  ParallelizeOptions one = Cpus(1);
  one.shard_optimizer_state = true;
  CHECK(Parallelize(Mlp(R"({"type": "adam", "lr": 0.01})"), one).shard_full.empty());
  const ModelDef m = Mlp(R"({"type": "momentum", "lr": 0.1})");
  ParallelizeOptions bad = Cpus(2);
  bad.shard_optimizer_state = true;
  bad.shared_model = true;
  ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"shard_optimizer_state", "shared_model"});
  bad.shared_model = false;
  bad.bmuf.enabled = true;
  ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"shard_optimizer_state", "BMUF"});
  bad.bmuf.enabled = false;
  bad.shared_model_auto = true;  // AUTO keeps a model each
  CHECK(!Parallelize(m, bad).shard_full.empty());
  ParallelizeOptions gpu;  // CUDA replicas across processes (their nets: below)
  gpu.device_type = DeviceType::kCUDA;
  gpu.device_ids = {0, 1};
  gpu.shard_optimizer_state = true;
  gpu.num_shards = 2;
  gpu.store = "file:///nonexistent";
  if (!cuda::BuiltWithCuda())
    ExpectError([&] { Parallelize(m, gpu); }, Code::kUnavailable, {"without CUDA"});
  else
    CHECK(!Parallelize(m, gpu).shard_full.empty());
}

TEST_CASE("sync net: replica 0's params, statistics and optimizer state re-broadcast on demand") {
  ModelDef m = BnMlp(R"({"type": "adam", "lr": 0.01})");
  ParallelizeOptions o = Cpus(3);
  o.computed_params = ComputedParamsSync::kNone;
  ParallelNets nets = Parallelize(m, o);
  auto ws = TrainSteps(nets.init, nets.train, 12, 2);
  const std::vector<std::string> blobs{"w1", "gamma", "rm", "rv", "w1/adam_m", "b2/adam_v"};
  CHECK(Floats(*ws, "cpu_1/rm") != Floats(*ws, "cpu_0/rm"));  // kNone: the statistics drifted apart
  // Replica 2 drifts: its params and state are perturbed.
  for (const auto& b : blobs) {
    const Tensor& old = ws->GetTensor("cpu_2/" + b);
    Tensor t(old.dims(), old.dtype());
    t.CopyFrom(old);
    for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data<float>()[i] += 0.5f;
    ws->Feed("cpu_2/" + b, t);
  }
  Net(std::make_shared<const NetDef>(nets.sync), ws).Run();
  CHECK(nets.sync.ops.back().type == "Barrier");
  for (const auto& b : blobs)
    for (const char* s : {"cpu_1/", "cpu_2/"}) {
      CAPTURE(b);
      CHECK(Floats(*ws, s + b) == Floats(*ws, "cpu_0/" + b));
    }
}

// CUDA nets cannot run here, but where each blob lives can be followed:
// through the init, train and eval nets in the order they run (as Net places
// them), every op on a CUDA device reads the blobs written before it on its
// own device, unless the op reads across devices or on the host by its
// schema. So a CUDA replica never meets a tensor it cannot address.
TEST_CASE("parallelize for CUDA: the counter and the rate live on the GPU when every replica is on it") {
  if (!cuda::BuiltWithCuda()) return;  // Parallelize refuses CUDA replicas then (tested above)
  const std::string adam = R"({"type": "adam", "lr": 0.02})";
  auto device_of = [](const NetDef& net, const std::string& type) {
    for (const auto& op : net.ops)
      if (op.type == type) return net.OpDevice(op);
    FAIL("no ", type, " op");
    return DeviceOption{};
  };
  auto copies_of = [](const NetDef& net, const std::string& blob) {
    int n = 0;
    for (const auto& op : net.ops) n += op.type == "Copy" && op.inputs.at(0) == blob ? 1 : 0;
    return n;
  };
  const DeviceOption gpu0{DeviceType::kCUDA, 0};
  for (const std::vector<int32_t>& ids : {std::vector<int32_t>{0}, std::vector<int32_t>{0, 0},
                                          std::vector<int32_t>{0, 1}}) {
    CAPTURE(ids.size());
    const bool one_gpu = ids.size() == 1 || ids[1] == ids[0];
    ParallelizeOptions o = Cpus(static_cast<int>(ids.size()));
    o.device_type = DeviceType::kCUDA;
    o.device_ids = ids;
    o.nccl = !(ids.size() == 2 && ids[1] == ids[0]);  // one GPU named twice: the copy-and-sum tree
    const ParallelNets nets = Parallelize(Mlp(adam), o);
    const DeviceOption counter = one_gpu ? gpu0 : DeviceOption{};
    CHECK(device_of(nets.train, "Iter") == counter);
    CHECK(device_of(nets.train, "LearningRate") == counter);
    // Placed by the definition: host placement leaves them there.
    auto placed = PlaceHostOps(nets.train);
    const NetDef& train = placed ? *placed : nets.train;
    CHECK(device_of(train, "Iter") == counter);
    // The rate is copied to each replica's GPU only from the host.
    CHECK(copies_of(nets.train, kLrBlob) == (one_gpu ? 0 : 2));
    // The init net fills the counter on the host and moves it to the GPU.
    CHECK(copies_of(nets.init, kIterBlob) == (one_gpu ? 1 : 0));
    // With loss scaling the GPUs get the gated rate (NaN on a skipped step),
    // and the scale: from the host on two GPUs, read in place on one.
    o.loss_scaling.dynamic = true;
    const ParallelNets scaled = Parallelize(Mlp(adam), o);
    CHECK(copies_of(scaled.train, kLrBlob) == 0);
    CHECK(copies_of(scaled.train, kLrStepBlob) == (one_gpu ? 0 : 2));
    CHECK(copies_of(scaled.train, kLossScaleBlob) == (one_gpu ? 0 : 2));
    CHECK(device_of(scaled.train, "GateLearningRate") == counter);
  }
}

TEST_CASE("parallelize for CUDA: every CUDA op reads blobs written on its own device") {
  if (!cuda::BuiltWithCuda()) return;  // Parallelize refuses CUDA replicas then (tested above)
  auto check = [](const ParallelNets& nets) {
    std::map<std::string, DeviceOption> where;  // blob -> device of its last writer
    for (const NetDef* net : {&nets.init, &nets.accumulate, &nets.train, &nets.eval, &nets.shard_gather,
                              &nets.shard_scatter, &nets.join_collectives, &nets.join_update}) {
      CAPTURE(net->name);
      for (const char* fed : {"data", "label"}) where[fed] = DeviceOption{};  // the caller feeds host batches
      auto placed = PlaceHostOps(*net);
      const NetDef& d = placed ? *placed : *net;
      for (const auto& op : d.ops) {
        const DeviceOption dev = d.OpDevice(op);
        const OpSchema* schema = OpSchemaRegistry::Find(op.type);
        REQUIRE(schema != nullptr);
        if (dev.type == DeviceType::kCUDA && !schema->inputs_can_cross_devices() &&
            !schema->inputs_on_replica_devices())
          for (size_t i = 0; i < op.inputs.size(); ++i) {
            auto w = where.find(op.inputs[i]);
            if (w == where.end() || schema->host_input(static_cast<int>(i))) continue;
            CHECK_MESSAGE(w->second == dev, op.type, " on ", DeviceName(dev), " reads '", op.inputs[i],
                          "' written on ", DeviceName(w->second));
          }
        if (schema->inputs_on_replica_devices()) continue;  // in place: every tensor stays on its replica
        for (const auto& o : op.outputs) where[o] = dev;
      }
    }
  };
  for (const char* opt : {R"({"type": "sgd", "lr": 0.5})", R"({"type": "momentum", "lr": 0.1})",
                          R"({"type": "adam", "lr": 0.02})", R"({"type": "adagrad", "lr": 0.02})"}) {
    CAPTURE(opt);
    for (int n : {1, 2}) {
      CAPTURE(n);
      ParallelizeOptions o = Cpus(n);
      o.device_type = DeviceType::kCUDA;
      check(Parallelize(Mlp(opt), o));
      o.sync_bn = true;
      check(Parallelize(BnMlp(opt), o));
      o.sync_bn = false;
      o.uneven_split = true;
      check(Parallelize(Mlp(opt), o));
      o.uneven_split = false;
      o.accumulate_steps = 2;
      check(Parallelize(Mlp(opt), o));
      // Loss scaling: with 2 GPUs each replica reads a copy of the scale
      // on its GPU, in the accumulate net's seeds too.
      o.loss_scaling.dynamic = true;
      check(Parallelize(Mlp(opt), o));
      o.accumulate_steps = 1;
      o.shard_optimizer_state = true;
      check(Parallelize(Mlp(opt), o));
      o.shard_optimizer_state = false;
      o.loss_scaling.dynamic = false;
      o.gradient_compression = DType::kBFloat16;  // the collectives compress in place on the GPUs
      check(Parallelize(Mlp(opt), o));
      o.gradient_compression = DType::kUndefined;
      o.shard_optimizer_state = true;  // ZeRO-1 in one process; its checkpoint nets copy shards to the GPUs
      const ParallelNets zero = Parallelize(Mlp(opt), o);
      check(zero);
      const bool sharded = n > 1 && opt[10] != 's';  // one replica shards nothing, SGD has no state
      CHECK(zero.shard_full.empty() == !sharded);
      if (sharded) {
        int copies = 0;
        for (const auto& op : zero.shard_scatter.ops)
          if (op.type == "Copy") {
            CHECK(zero.shard_scatter.OpDevice(op).type == DeviceType::kCUDA);
            ++copies;
          }
        CHECK(copies > 0);
      }
      o.shard_optimizer_state = false;
      o.bmuf.enabled = true;
      o.bmuf.block_lr = 1.0;
      check(Parallelize(Mlp(opt), o));
    }
  }
  // ZeRO-1 across 2 processes of 2 GPUs (NCCL): the same nets, the parts
  // all-gathered over every process's replicas; with loss scaling and
  // compression too. (Variant 3: loss scaling unsharded, whose join nets
  // copy the scale to the GPUs as the train net does.)
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    ParallelizeOptions o = Cpus(2);
    o.device_type = DeviceType::kCUDA;
    o.device_ids = {0, 1};
    o.num_shards = 2;
    o.shard_id = 1;
    o.store = "file:///tmp/dp-unused-store";
    o.shard_optimizer_state = variant != 3;
    o.loss_scaling.dynamic = variant == 1 || variant == 3;
    if (variant == 2) o.gradient_compression = DType::kFloat16;
    const ParallelNets across = Parallelize(Mlp(R"({"type": "adam", "lr": 0.02})"), o);
    check(across);
    if (variant == 3) continue;
    int gathers = 0, scatters = 0;
    for (const auto& op : across.train.ops) {
      gathers += op.type == "Allgather" ? 1 : 0;
      scatters += op.type == "ReduceScatter" ? 1 : 0;
      if (op.type == "Allgather" || op.type == "ReduceScatter")
        CHECK(across.train.OpDevice(op).type == DeviceType::kCUDA);
    }
    CHECK(gathers > 0);
    CHECK(scatters > 0);
    CHECK(!across.shard_full.empty());
  }
  // ZeRO-1 with loss scaling on one GPU named twice (the copy-and-sum tree):
  // each replica unscales its shard there, the flags are summed on the GPU.
  ParallelizeOptions o = Cpus(2);
  o.device_type = DeviceType::kCUDA;
  o.device_ids = {0, 0};
  o.nccl = false;
  o.shard_optimizer_state = true;
  o.loss_scaling.dynamic = true;
  const ParallelNets scaled = Parallelize(Mlp(R"({"type": "adam", "lr": 0.02})"), o);
  check(scaled);
  int unscales = 0;
  for (const auto& op : scaled.train.ops)
    if (op.type == "UnscaleGradients") {
      CHECK(scaled.train.OpDevice(op) == DeviceOption{DeviceType::kCUDA, 0});
      ++unscales;
    }
  CHECK(unscales == 2);
}
