// Dynamic loss scaling (model/training.h; ops/cpu/loss_scaling_ops.cc; the
// arithmetic in ops/math/loss_scaling.h, which the CUDA kernels share), on
// the CPU: the ops, the NaN rate that skips an update, the builders' nets
// (bit for bit the unscaled training while nothing overflows; an
// overflowing step skipped with its scale cut), the checks, and the fp16
// math mode's refusal of a gradient net without it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/workspace.h"
#include "exec/net.h"
#include "expect_error.h"
#include "model/model_format.h"
#include "model/training.h"
#include "op_test_util.h"
#include "parallel/parallelize.h"
#include "sample_batches.h"

using namespace dp;
using namespace dp::testing;

namespace {

Tensor Scalar(float v) { return Make<float>({}, {v}); }

float Value(const Workspace& ws, const std::string& blob) { return ws.GetTensor(blob).data<float>()[0]; }

TEST_CASE("UnscaleGradients divides every gradient by the scale in place and finds a non-finite one anywhere") {
  const std::vector<float> g0 = {1.5f, -3.0f, 1e-30f, 65504.0f, 0.0f};
  const std::vector<double> g1 = {2.0, -0.25, 1e300};
  auto run = [&](std::vector<float> a, std::vector<double> b) {
    return RunOps({Op("UnscaleGradients", {"scale", "found", "g0", "g1"}, {"found", "g0", "g1"})},
                  {{"scale", Scalar(1024.0f)}, {"found", Scalar(7.0f)}, {"g0", Make<float>({5}, a)},
                   {"g1", Make<double>({3}, b)}});
  };
  auto ws = run(g0, g1);
  CHECK(Value(*ws, "found") == 0.0f);  // set, not left: it held 7
  for (size_t i = 0; i < g0.size(); ++i) CHECK(ws->GetTensor("g0").data<float>()[i] == g0[i] / 1024.0f);
  for (size_t i = 0; i < g1.size(); ++i)
    CHECK(ws->GetTensor("g1").data<double>()[i] == g1[i] * static_cast<double>(1.0f / 1024.0f));
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    std::vector<double> b = g1;
    b[2] = bad;
    CHECK(Value(*run(g0, b), "found") == 1.0f);
    std::vector<float> a = g0;
    a[0] = static_cast<float>(bad);
    CHECK(Value(*run(a, g1), "found") == 1.0f);
  }
  // Its shape rules: found_inf and the gradients in place, scalars of float32.
  testing::ExpectError(
      [&] {
        RunOps({Op("UnscaleGradients", {"scale", "found", "g0"}, {"found", "g0"})},
               {{"scale", Make<float>({2}, {1, 2})}, {"found", Scalar(0)}, {"g0", Make<float>({5}, g0)}});
      },
      Code::kShape, {"scale 'scale'", "one value"});
}

TEST_CASE("UnscaleGradients with part and parts unscales and checks that part of each gradient alone") {
  // Part 1 of 3 of 300 elements (64-element chunks): [128, 256); of 5: none.
  const std::vector<float> g = Random<float>(300, 5, -100, 100);
  const std::vector<float> small = {1, 2, 3, 4, 5};
  auto run = [&](std::vector<float> a, std::vector<float> b, int64_t part, int64_t parts) {
    return RunOps({Op("UnscaleGradients", {"scale", "found", "g0", "g1"}, {"found", "g0", "g1"},
                      {IntArg("part", part), IntArg("parts", parts)})},
                  {{"scale", Scalar(4.0f)}, {"found", Scalar(7.0f)}, {"g0", Make<float>({300}, a)},
                   {"g1", Make<float>({5}, b)}});
  };
  auto ws = run(g, small, 1, 3);
  CHECK(Value(*ws, "found") == 0.0f);
  const std::vector<float> out = Values<float>(ws->GetTensor("g0"));
  for (size_t i = 0; i < g.size(); ++i) CHECK(out[i] == (i >= 128 && i < 256 ? g[i] / 4.0f : g[i]));
  CHECK(Values<float>(ws->GetTensor("g1")) == small);
  // Non-finite elements count inside the part only.
  std::vector<float> bad = g;
  bad[127] = bad[256] = std::numeric_limits<float>::infinity();
  CHECK(Value(*run(bad, {1, 2, std::numeric_limits<float>::quiet_NaN(), 4, 5}, 1, 3), "found") == 0.0f);
  bad[128] = std::numeric_limits<float>::quiet_NaN();
  CHECK(Value(*run(bad, small, 1, 3), "found") == 1.0f);
  CHECK(Value(*run(g, {1, 2, std::numeric_limits<float>::infinity(), 4, 5}, 0, 3), "found") == 1.0f);
  testing::ExpectError([&] { run(g, small, 3, 3); }, Code::kInvalidArgument, {"'part'", "part 3 of 3"});
}

TEST_CASE("GateLearningRate gives the rate, or NaN after an overflow") {
  for (float found : {0.0f, 1.0f}) {
    auto ws = RunOps({Op("GateLearningRate", {"lr", "found"}, {"lr_step"})},
                     {{"lr", Make<float>({1}, {0.125f})}, {"found", Scalar(found)}});
    const float step = ws->GetTensor("lr_step").data<float>()[0];
    if (found != 0.0f)
      CHECK(std::isnan(step));
    else
      CHECK(step == 0.125f);
  }
}

TEST_CASE("a NaN rate leaves every update's param and state as they are") {
  const Dims dims{3, 70};
  const std::vector<float> p = Random<float>(210, 1), g = Random<float>(210, 2), s0 = Random<float>(210, 3, 0.1, 1),
                           s1 = Random<float>(210, 4, 0.1, 1);
  const Tensor nan_lr = Make<float>({1}, {std::numeric_limits<float>::quiet_NaN()});
  const Tensor iter = Make<int64_t>({1}, {3});
  struct Case {
    OperatorDef op;
    std::vector<std::string> state;
  };
  const std::vector<Case> cases = {
      {Op("SGD", {"p", "g", "lr"}, {"p"}), {}},
      {Op("MomentumSGD", {"p", "g", "s0", "lr"}, {"p", "s0"}), {"s0"}},
      {Op("Adam", {"p", "g", "s0", "s1", "lr", "iter"}, {"p", "s0", "s1"}), {"s0", "s1"}},
      {Op("Adagrad", {"p", "g", "s0", "lr"}, {"p", "s0"}), {"s0"}},
      {Op("MultiTensorSGD", {"p", "g", "lr"}, {"p"}), {}},
      {Op("MultiTensorMomentumSGD", {"p", "s0", "g", "lr"}, {"p", "s0"}), {"s0"}},
      {Op("MultiTensorAdam", {"p", "s0", "s1", "g", "lr", "iter"}, {"p", "s0", "s1"}), {"s0", "s1"}},
      {Op("MultiTensorAdagrad", {"p", "s0", "g", "lr"}, {"p", "s0"}), {"s0"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.op.type);
    auto ws = RunOps({c.op}, {{"p", Make<float>(dims, p)}, {"g", Make<float>(dims, g)}, {"s0", Make<float>(dims, s0)},
                              {"s1", Make<float>(dims, s1)}, {"lr", nan_lr}, {"iter", iter}});
    CHECK(Values<float>(ws->GetTensor("p")) == p);
    for (const auto& st : c.state) CHECK(Values<float>(ws->GetTensor(st)) == (st == "s0" ? s0 : s1));
  }
}

TEST_CASE("UpdateLossScale cuts the scale after an overflow and grows it after growth_interval good steps") {
  auto ws = std::make_shared<Workspace>();
  ws->Feed("scale", Scalar(8.0f));
  ws->Feed("good", Scalar(0.0f));
  NetDef def = MakeNet({Op("UpdateLossScale", {"scale", "good", "found"}, {"scale", "good"},
                           {IntArg("growth_interval", 3)})},
                       {{"scale", Tensor()}, {"good", Tensor()}, {"found", Tensor()}});
  Net net(std::make_shared<const NetDef>(def), ws);
  auto step = [&](float found) {
    ws->Feed("found", Scalar(found));
    net.Run();
    return std::pair<float, float>{Value(*ws, "scale"), Value(*ws, "good")};
  };
  CHECK(step(0) == std::pair<float, float>{8, 1});
  CHECK(step(0) == std::pair<float, float>{8, 2});
  CHECK(step(0) == std::pair<float, float>{16, 0});  // three good steps: grown
  CHECK(step(1) == std::pair<float, float>{8, 0});   // an overflow: cut, the count restarts
  CHECK(step(0) == std::pair<float, float>{8, 1});
  // Never to infinity, never to 0.
  ws->Feed("scale", Scalar(3e38f));
  ws->Feed("good", Scalar(2.0f));
  CHECK(step(0) == std::pair<float, float>{3e38f, 0});
  ws->Feed("scale", Scalar(1.2e-38f));
  CHECK(step(1) == std::pair<float, float>{1.2e-38f, 0});
  testing::ExpectError(
      [&] {
        RunOps({Op("UpdateLossScale", {"s", "g", "f"}, {"s", "g"}, {IntArg("growth_interval", 0)})},
               {{"s", Scalar(1)}, {"g", Scalar(0)}, {"f", Scalar(0)}});
      },
      Code::kInvalidArgument, {"growth_interval"});
}

// ---- training with it ---------------------------------------------------------

enum class Setup { kOneDevice, kOneReplica, kTwoReplicas, kTwoSharedReplicas, kTwoShardedReplicas };

struct Run {
  std::map<std::string, std::vector<float>> blobs;  // losses per step, params and state
  float scale = 0, good_steps = 0;
};

// `steps` steps of `m` on synthetic batches whose pixels are multiplied by `pixels`.
Run Train(const ModelDef& m, Setup setup, const LossScaling& ls, int steps, float pixels = 1.0f) {
  auto ws = std::make_shared<Workspace>();
  NetDef init, train;
  std::vector<std::string> scopes = {""};
  if (setup == Setup::kOneDevice) {
    TrainingOptions o;
    o.loss_scaling = ls;
    TrainingNets nets = BuildTraining(m, o);
    init = nets.init;
    train = nets.train;
  } else {
    ParallelizeOptions o;
    o.device_ids = setup == Setup::kOneReplica ? std::vector<int32_t>{0} : std::vector<int32_t>{0, 1};
    o.shared_model = setup == Setup::kTwoSharedReplicas;
    o.shard_optimizer_state = setup == Setup::kTwoShardedReplicas;  // ZeRO-1 in one process
    o.loss_scaling = ls;
    ParallelNets nets = Parallelize(m, o);
    init = nets.init;
    train = nets.train;
    scopes = nets.scopes;
    if (setup == Setup::kTwoSharedReplicas) scopes = {nets.scopes[0]};
  }
  Net(std::make_shared<const NetDef>(init), ws).Run();
  Net step(std::make_shared<const NetDef>(train), ws);
  Run out;
  for (int s = 0; s < steps; ++s) {
    FeedSyntheticBatch(*ws, 16, static_cast<uint32_t>(11 + s));
    if (pixels != 1.0f) {
      Tensor x = ws->GetTensor("data");
      for (int64_t i = 0; i < x.numel(); ++i) x.mutable_data<float>()[i] *= pixels;
      ws->Feed("data", x);
    }
    step.Run();
    for (const auto& l : m.losses) out.blobs["step" + std::to_string(s) + "/" + l] = Values<float>(ws->GetTensor(l));
  }
  for (const auto& scope : scopes)
    for (const auto& name : TrainingStateBlobs(m))
      if (name != kIterBlob) out.blobs[scope + name] = Values<float>(ws->GetTensor(scope + name));
  if (ls.dynamic) {
    out.scale = Value(*ws, kLossScaleBlob);
    out.good_steps = Value(*ws, kLossScaleStepsBlob);
  }
  return out;
}

TEST_CASE("training with dynamic loss scaling is bit for bit training without it while nothing overflows") {
  LossScaling on;
  on.dynamic = true;
  on.growth_interval = 2;  // the scale grows within the run: 2^16, 2^17 after two steps, 2^18 after four
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"}) {
    const ModelDef m = ModelFromFile(SampleNetsDir() + file);
    for (Setup setup : {Setup::kOneDevice, Setup::kOneReplica, Setup::kTwoReplicas, Setup::kTwoSharedReplicas,
                        Setup::kTwoShardedReplicas}) {
      CAPTURE(file);
      CAPTURE(static_cast<int>(setup));
      const Run plain = Train(m, setup, LossScaling{}, 5);
      const Run scaled = Train(m, setup, on, 5);
      CHECK(scaled.blobs == plain.blobs);
      CHECK(scaled.scale == 262144.0f);
      CHECK(scaled.good_steps == 1.0f);
    }
  }
}

TEST_CASE("an overflowing step is skipped: params and optimizer state stay, the scale is cut, training goes on") {
  const ModelDef m = ModelFromFile(SampleNetsDir() + "fashion_mlp.json");
  LossScaling huge;
  huge.dynamic = true;
  huge.initial = 3e38;  // with pixels 1000 times larger, the scaled gradients overflow float32
  constexpr float kPixels = 1000.0f;
  for (Setup setup : {Setup::kOneDevice, Setup::kTwoReplicas, Setup::kTwoShardedReplicas}) {
    CAPTURE(static_cast<int>(setup));
    const Run start = Train(m, setup, LossScaling{}, 0);  // the state after init
    const Run unscaled = Train(m, setup, LossScaling{}, 1, kPixels);
    bool finite = true;
    for (const auto& [name, values] : unscaled.blobs)
      for (float v : values) finite = finite && std::isfinite(v);
    REQUIRE(finite);  // without the scale nothing overflows
    const Run one = Train(m, setup, huge, 1, kPixels);
    for (const auto& blob : start.blobs) CHECK_MESSAGE(one.blobs.at(blob.first) == blob.second, blob.first);
    CHECK(one.scale == 1.5e38f);
    CHECK(one.good_steps == 0.0f);
    // Cut after cut until the gradients fit: then the steps update.
    const Run many = Train(m, setup, huge, 60, kPixels);
    CHECK(many.scale < 1e37f);
    CHECK(many.good_steps >= 1.0f);
    bool moved = false;
    for (const auto& [name, values] : start.blobs) moved = moved || many.blobs.at(name) != values;
    CHECK(moved);
    for (const auto& blob : many.blobs) {  // (no structured binding: clang cannot capture one in a lambda)
      bool all_finite = true;
      for (float v : blob.second) all_finite = all_finite && std::isfinite(v);
      CHECK_MESSAGE(all_finite, blob.first);
    }
  }
}

TEST_CASE("loss scaling's options are checked; its state is in the parallel model's checkpoint") {
  const ModelDef m = ModelFromFile(SampleNetsDir() + "fashion_mlp.json");
  ParallelizeOptions o;
  o.device_ids = {0, 1};
  o.loss_scaling.dynamic = true;
  const ParallelNets nets = Parallelize(m, o);
  for (const auto& blob : LossScalingStateBlobs())
    CHECK(std::find(nets.checkpoint.begin(), nets.checkpoint.end(), std::pair<std::string, std::string>{blob, blob}) !=
          nets.checkpoint.end());
  // Uneven splits (seeds weighted by the replicas' shares) and gradient
  // accumulation (the accumulate net scales its seeds, the train net
  // unscales the sums) build; an fp16 accumulate net is accepted.
  ParallelizeOptions uneven = o;
  uneven.uneven_split = true;
  CHECK_NOTHROW(Parallelize(m, uneven));
  ParallelizeOptions accumulate = o;
  accumulate.accumulate_steps = 2;
  const ParallelNets acc = Parallelize(m, accumulate);
  NetOptions fp16;
  fp16.math = MathMode::kFp16;
  auto ws = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(acc.init), ws).Run();
  CHECK_NOTHROW(Net(std::make_shared<const NetDef>(acc.accumulate), ws, fp16));
  CHECK_NOTHROW(Net(std::make_shared<const NetDef>(acc.train), ws, fp16));
  ParallelizeOptions bmuf = o;
  bmuf.bmuf.enabled = true;
  bmuf.bmuf.block_lr = 1.0;
  testing::ExpectError([&] { Parallelize(m, bmuf); }, Code::kInvalidArgument, {"options->loss_scaling", "BMUF"});
  // A sharded state across processes (trained in tests/multiprocess,
  // mp_zero_scaled): each replica unscales its shard of every gradient, and
  // one Allreduce sums the flags of every replica of every process into the
  // global one, which the gate reads.
  ParallelizeOptions zero = o;
  zero.shard_optimizer_state = true;
  zero.num_shards = 2;
  zero.shard_id = 1;
  zero.store = "file:///nonexistent";
  const ParallelNets sharded = Parallelize(m, zero);
  std::vector<int64_t> parts;
  const OperatorDef* found_sum = nullptr;
  size_t gate = 0, sum_at = 0;
  for (size_t i = 0; i < sharded.train.ops.size(); ++i) {
    const OperatorDef& op = sharded.train.ops[i];
    if (op.type == "UnscaleGradients") {
      CHECK(ArgReader(op, "").Int("parts", 1) == 4);
      parts.push_back(ArgReader(op, "").Int("part", -1));
      CHECK(op.inputs.size() == 2 + m.params.size());
    }
    if (op.type == "Allreduce" && op.outputs.size() == 2 && op.outputs[0] == kFoundInfBlob) {
      found_sum = &op;
      sum_at = i;
    }
    if (op.type == "GateLearningRate") gate = i;
  }
  CHECK(parts == std::vector<int64_t>{2, 3});  // process 1's replicas own parts 2 and 3 of 4
  REQUIRE(found_sum != nullptr);
  CHECK(found_sum->outputs[1] == nets.scopes[1] + kFoundInfBlob);
  CHECK(sum_at < gate);
  ParallelizeOptions bad = o;
  bad.loss_scaling.initial = -1;
  testing::ExpectError([&] { Parallelize(m, bad); }, Code::kInvalidArgument, {"initial loss scale"});
  TrainingOptions t;
  t.loss_scaling.dynamic = true;
  t.loss_scaling.growth_interval = 0;
  testing::ExpectError([&] { BuildTraining(m, t); }, Code::kInvalidArgument,
                       {"TrainingOptions::loss_scaling", "growth interval"});
}

TEST_CASE("math mode fp16 refuses a net that computes gradients without loss scaling") {
  const ModelDef m = ModelFromFile(SampleNetsDir() + "fashion_mlp.json");
  NetOptions fp16;
  fp16.math = MathMode::kFp16;
  auto ws = std::make_shared<Workspace>();
  const TrainingNets plain = BuildTraining(m, TrainingOptions{});
  testing::ExpectError([&] { Net(std::make_shared<const NetDef>(plain.train), ws, fp16); }, Code::kInvalidArgument,
                       {"math mode fp16", "loss scaling", "Gradient"});
  TrainingOptions scaled;
  scaled.loss_scaling.dynamic = true;
  const TrainingNets nets = BuildTraining(m, scaled);
  Net(std::make_shared<const NetDef>(nets.init), ws).Run();
  Net train(std::make_shared<const NetDef>(nets.train), ws, fp16);  // CPU kernels: float32 whatever the mode
  FeedSyntheticBatch(*ws, 8, 3);
  train.Run();
  Net eval(std::make_shared<const NetDef>(nets.eval), ws, fp16);  // no gradients: no scaling needed
}

}  // namespace
