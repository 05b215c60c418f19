// Multi-tensor optimizer updates (ops/cpu/multi_tensor_update_ops.cc,
// ops/math/multi_tensor.h) and the pass that fuses a step's updates into
// them (ops/update_fusion.h): the CUDA launch plan covers every element once;
// each MultiTensor op computes exactly the bits of its one-param ops (every
// optimizer, float32 and float64, sizes around the chunk, parts with a
// sharded state); its errors name the param; the pass fuses only what may
// move, leaves other devices, groups and arguments apart, and training with
// it (one device, two replicas by bucket, ZeRO-1) is bit for bit training
// without it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/workspace.h"
#include "exec/net.h"
#include "model/model_format.h"
#include "model/training.h"
#include "op_test_util.h"
#include "ops/math/multi_tensor.h"
#include "ops/math/optimizer_updates.h"
#include "ops/net_validate.h"
#include "ops/optimizer_op_utils.h"
#include "ops/update_fusion.h"
#include "parallel/parallelize.h"
#include "sample_batches.h"

using namespace dp;
using namespace dp::testing;

namespace {

// ---- the launch plan ----------------------------------------------------------

TEST_CASE("multi-tensor launches cover every element of every tensor exactly once") {
  const std::vector<std::vector<int64_t>> cases = {
      {1},
      {0, 0, 5},
      {kMultiTensorChunk, kMultiTensorChunk + 1, 3 * kMultiTensorChunk - 1, 0, 7},
      std::vector<int64_t>(61, 100),  // three launches: 24 + 24 + 13
      {784 * 512, 512, 512 * 512, 512, 5120, 10},  // the sample's MLP
  };
  for (const auto& sizes : cases) {
    CAPTURE(sizes.size());
    const auto launches = PlanMultiTensorLaunches(sizes);
    std::vector<std::vector<int>> covered(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) covered[i].assign(static_cast<size_t>(sizes[i]), 0);
    std::set<int> seen;
    for (const auto& l : launches) {
      REQUIRE(!l.tensors.empty());
      REQUIRE(l.tensors.size() <= static_cast<size_t>(MultiTensorList::kMaxTensors));
      MultiTensorList list;
      list.count = static_cast<int>(l.tensors.size());
      for (int k = 0; k < list.count; ++k) {
        list.n[k] = sizes[static_cast<size_t>(l.tensors[static_cast<size_t>(k)])];
        list.chunk_end[k] = l.chunk_end[static_cast<size_t>(k)];
        CHECK(seen.insert(l.tensors[static_cast<size_t>(k)]).second);
      }
      CHECK(l.blocks == list.chunk_end[list.count - 1]);
      for (int64_t b = 0; b < l.blocks; ++b) {  // what each block of the kernel does
        const ChunkSpan s = LocateChunk(list.n, list.chunk_end, list.count, b);
        REQUIRE(s.tensor >= 0);
        REQUIRE(s.tensor < list.count);
        REQUIRE(s.begin < s.end);
        REQUIRE(s.end - s.begin <= kMultiTensorChunk);
        auto& c = covered[static_cast<size_t>(l.tensors[static_cast<size_t>(s.tensor)])];
        for (int64_t e = s.begin; e < s.end; ++e) ++c[static_cast<size_t>(e)];
      }
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      CAPTURE(i);
      CHECK(std::count(covered[i].begin(), covered[i].end(), 1) == sizes[i]);
      CHECK((sizes[i] == 0) == (seen.count(static_cast<int>(i)) == 0));  // empty tensors take no slot
    }
  }
  CHECK(PlanMultiTensorLaunches(std::vector<int64_t>(61, 100)).size() == 3);
  CHECK(PlanMultiTensorLaunches({0, 0}).empty());
}

// ---- the ops against their one-param twins ---------------------------------------

struct Kind {
  std::string type;
  std::vector<std::string> states;
  bool iter;
  std::vector<Argument> args;
};

const std::vector<Kind>& Kinds() {
  static const std::vector<Kind> kinds = {
      {"SGD", {}, false, {FloatArg("weight_decay", 0.1)}},
      {"SGD", {}, false, {}},
      {"MomentumSGD", {"mom"}, false, {IntArg("nesterov", 1), FloatArg("weight_decay", 0.01)}},
      {"MomentumSGD", {"mom"}, false, {FloatArg("momentum", 0.5)}},
      {"Adam", {"m", "v"}, true, {FloatArg("weight_decay", 0.01), FloatArg("beta1", 0.8)}},
      {"Adam", {"m", "v"}, true, {}},
      {"Adagrad", {"h"}, false, {FloatArg("decay", 0.9)}},
  };
  return kinds;
}

std::string Name(const std::string& what, size_t i) { return what + std::to_string(i); }

// One-param ops of `kind` over params p0..p{n-1}, and the MultiTensor op over
// the same blobs; `extra` args (parts) on every op.
std::vector<OperatorDef> OneParamOps(const Kind& kind, size_t n, const std::vector<Argument>& extra) {
  std::vector<OperatorDef> ops;
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::string> in = {Name("p", i), Name("g", i)}, out = {Name("p", i)};
    for (const auto& s : kind.states) {
      in.push_back(Name(s, i));
      out.push_back(Name(s, i));
    }
    in.push_back("lr");
    if (kind.iter) in.push_back("it");
    std::vector<Argument> args = kind.args;
    args.insert(args.end(), extra.begin(), extra.end());
    ops.push_back(Op(kind.type, in, out, args));
  }
  return ops;
}

OperatorDef MultiOp(const Kind& kind, size_t n, const std::vector<Argument>& extra) {
  std::vector<std::string> in, out;
  for (size_t i = 0; i < n; ++i) in.push_back(Name("p", i));
  for (const auto& s : kind.states)
    for (size_t i = 0; i < n; ++i) in.push_back(Name(s, i));
  out = in;
  for (size_t i = 0; i < n; ++i) in.push_back(Name("g", i));
  in.push_back("lr");
  if (kind.iter) in.push_back("it");
  std::vector<Argument> args = kind.args;
  args.insert(args.end(), extra.begin(), extra.end());
  return Op("MultiTensor" + kind.type, in, out, args);
}

template <typename T>
Feeds UpdateFeeds(const Kind& kind, const std::vector<int64_t>& sizes, const std::vector<int64_t>& state_sizes) {
  Feeds feeds = {{"lr", Make<float>({1}, {0.05f})}, {"it", Make<int64_t>({1}, {7})}};
  uint32_t seed = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    feeds.push_back({Name("p", i), Make<T>({sizes[i]}, Random<T>(sizes[i], seed++))});
    feeds.push_back({Name("g", i), Make<T>({sizes[i]}, Random<T>(sizes[i], seed++))});
    for (const auto& s : kind.states)
      feeds.push_back({Name(s, i), Make<T>({state_sizes[i]}, Random<T>(state_sizes[i], seed++, 0.0, 1.0))});
  }
  return feeds;
}

template <typename T>
void CheckSameBits(const Kind& kind, const std::vector<int64_t>& sizes, const std::vector<int64_t>& state_sizes,
                   const std::vector<Argument>& extra) {
  const Feeds feeds = UpdateFeeds<T>(kind, sizes, state_sizes);
  auto want = RunOps(OneParamOps(kind, sizes.size(), extra), feeds);
  auto got = RunOp(MultiOp(kind, sizes.size(), extra), feeds);
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<std::string> blobs = {Name("p", i)};
    for (const auto& s : kind.states) blobs.push_back(Name(s, i));
    for (const auto& b : blobs) {
      CAPTURE(b);
      CHECK(Values<T>(got->GetTensor(b)) == Values<T>(want->GetTensor(b)));
    }
  }
}

TEST_CASE_TEMPLATE("each MultiTensor update computes the bits of its one-param updates", T, float, double) {
  const std::vector<int64_t> sizes = {5003, 1, 0, kMultiTensorChunk + 3, 64, 17};
  for (const Kind& kind : Kinds()) {
    CAPTURE(kind.type);
    CAPTURE(kind.args.size());
    CheckSameBits<T>(kind, sizes, sizes, {});
    // ZeRO-1's form: part 1 of 3 of each param, with the part's state alone.
    std::vector<int64_t> parts;
    for (int64_t n : sizes) {
      const ElementRange r = PartOfElements(n, 1, 3);
      parts.push_back(r.end - r.begin);
    }
    CheckSameBits<T>(kind, sizes, parts, {IntArg("part", 1), IntArg("parts", 3), IntArg("sharded_state", 1)});
  }
}

TEST_CASE("MultiTensor updates refuse counts that fit no param count and inputs that do not match, naming them") {
  const Kind& adam = Kinds()[5];
  const Feeds feeds = UpdateFeeds<float>(adam, {4, 6}, {4, 6});
  OperatorDef short_op = MultiOp(adam, 2, {});
  short_op.inputs.pop_back();  // no iter
  ExpectBuildError({short_op}, feeds, Code::kInvalidArgument, {"MultiTensorAdam", "6 outputs and 9 inputs"});
  OperatorDef odd = MultiOp(adam, 2, {});
  odd.outputs.pop_back();  // 5 outputs: not 3 per param
  odd.inputs.erase(odd.inputs.begin() + 5);
  ExpectBuildError({odd}, feeds, Code::kInvalidArgument, {"5 outputs"});

  Feeds bad = feeds;
  for (auto& [name, t] : bad)
    if (name == "g1") t = Make<float>({5}, {1, 2, 3, 4, 5});
  ExpectRunError({MultiOp(adam, 2, {})}, bad, Code::kShape, {"grad 1 'g1'", "param 1 'p1'"});
  for (auto& [name, t] : bad)
    if (name == "g1") t = Make<double>({6}, {1, 2, 3, 4, 5, 6});
  ExpectRunError({MultiOp(adam, 2, {})}, bad, Code::kDType, {"grad 1 'g1'"});
  Feeds zero_iter = feeds;
  for (auto& [name, t] : zero_iter)
    if (name == "it") t = Make<int64_t>({1}, {0});
  ExpectRunError({MultiOp(adam, 2, {})}, zero_iter, Code::kOutOfRange, {"iter 'it'", ">= 1"});
  // In place, as the schema enforces.
  OperatorDef not_in_place = MultiOp(adam, 2, {});
  not_in_place.outputs[1] = "elsewhere";
  ExpectBuildError({not_in_place}, feeds, Code::kInvalidNet, {"in place"});
}

// ---- the pass ----------------------------------------------------------------

DeviceOption Cuda(int id) { return DeviceOption{DeviceType::kCUDA, id}; }

OperatorDef OnDevice(OperatorDef op, DeviceOption d) {
  op.device = d;
  return op;
}

std::multiset<std::string> Types(const NetDef& net) {
  std::multiset<std::string> types;
  for (const auto& op : net.ops) types.insert(op.type);
  return types;
}

TEST_CASE("the update pass fuses a group's updates where the last one was, on CUDA by default") {
  const Kind& adam = Kinds()[5];
  NetDef net;
  for (auto& op : OneParamOps(adam, 3, {})) net.ops.push_back(OnDevice(op, Cuda(0)));
  net.ops.insert(net.ops.begin() + 1, OnDevice(Op("Relu", {"x"}, {"y"}), Cuda(0)));
  const NetDef original = net;

  NetDef cpu_net = net;
  for (auto& op : cpu_net.ops) op.device = DeviceOption{};
  CHECK(FuseOptimizerUpdates(cpu_net, {{"p0", "p1", "p2"}}) == 0);  // CPU: only on request
  CHECK(FuseOptimizerUpdates(cpu_net, {{"p0", "p1", "p2"}}, UpdateFusionOptions{true}) == 1);

  CHECK(FuseOptimizerUpdates(net, {{"p1", "p2"}}) == 1);  // p0 in no group
  REQUIRE(net.ops.size() == 3);
  CHECK(net.ops[0].type == "Adam");
  CHECK(net.ops[1].type == "Relu");
  const OperatorDef& fused = net.ops[2];
  CHECK(fused.type == "MultiTensorAdam");
  CHECK(fused.inputs == std::vector<std::string>{"p1", "p2", "m1", "m2", "v1", "v2", "g1", "g2", "lr", "it"});
  CHECK(fused.outputs == std::vector<std::string>{"p1", "p2", "m1", "m2", "v1", "v2"});
  CHECK(fused.device == std::optional<DeviceOption>(Cuda(0)));

  // Separate groups, devices, arguments or learning rates stay apart.
  net = original;
  CHECK(FuseOptimizerUpdates(net, {{"p0"}, {"p1"}, {"p2"}}) == 0);
  net = original;
  net.ops[3].device = Cuda(1);
  CHECK(FuseOptimizerUpdates(net, {{"p0", "p1", "p2"}}) == 1);
  CHECK(Types(net) == std::multiset<std::string>{"Adam", "Relu", "MultiTensorAdam"});
  net = original;
  net.ops[2].args.push_back(FloatArg("beta2", 0.9));
  net.ops[3].inputs[4] = "lr2";
  CHECK(FuseOptimizerUpdates(net, {{"p0", "p1", "p2"}}) == 0);
  net = original;
  net.ops[2].inputs.push_back("g1_extra");  // extra gradients: a shared model's update
  net.ops[3].control_inputs.push_back("y");
  CHECK(FuseOptimizerUpdates(net, {{"p0", "p1", "p2"}}) == 0);
}

TEST_CASE("the update pass splits a group past kMaxMultiTensors params into ops the schema accepts") {
  const Kind& sgd = Kinds()[1];
  const size_t n = static_cast<size_t>(kMaxMultiTensors) + 1;
  NetDef net;
  std::vector<std::string> group;
  for (auto& op : OneParamOps(sgd, n, {})) {
    group.push_back(op.inputs[0]);
    net.ops.push_back(OnDevice(op, Cuda(0)));
    net.external_inputs.push_back(op.inputs[0]);
    net.external_inputs.push_back(op.inputs[1]);
  }
  net.external_inputs.push_back("lr");
  CHECK(FuseOptimizerUpdates(net, {group}) == 2);
  REQUIRE(net.ops.size() == 2);
  CHECK(net.ops[0].outputs.size() == static_cast<size_t>(kMaxMultiTensors));
  CHECK(net.ops[1].outputs == std::vector<std::string>{Name("p", n - 1)});
  CHECK_NOTHROW(ValidateNet(net));
}

TEST_CASE("the update pass moves no update past an op that touches its param, state or gradient") {
  const Kind& momentum = Kinds()[3];
  const NetDef base = [&] {
    NetDef net;
    for (auto& op : OneParamOps(momentum, 3, {})) net.ops.push_back(OnDevice(op, Cuda(0)));
    return net;
  }();
  // Between update 0 and update 2: an op that reads p0 (it must see p0
  // updated), reads mom0, writes g0, or writes lr: update 0 stays; update 1
  // (after it) and update 2 fuse.
  const std::vector<OperatorDef> blockers = {Op("Relu", {"p0"}, {"z"}), Op("Relu", {"mom0"}, {"z"}),
                                             Op("Relu", {"x"}, {"g0"}), Op("Relu", {"x"}, {"lr"})};
  for (const auto& blocker : blockers) {
    CAPTURE(blocker.inputs[0]);
    CAPTURE(blocker.outputs[0]);
    NetDef net = base;
    net.ops.insert(net.ops.begin() + 1, OnDevice(blocker, Cuda(0)));
    CHECK(FuseOptimizerUpdates(net, {{"p0", "p1", "p2"}}) == 1);
    REQUIRE(net.ops.size() == 3);
    CHECK(net.ops[0].type == "MomentumSGD");
    CHECK(net.ops[0].inputs[0] == "p0");
    CHECK(net.ops[1].type == "Relu");
    CHECK(net.ops[2].type == "MultiTensorMomentumSGD");
    CHECK(net.ops[2].inputs[0] == "p1");
  }
  // Reading the gradient, or anything else, does not block.
  NetDef net = base;
  net.ops.insert(net.ops.begin() + 1, OnDevice(Op("Relu", {"g0"}, {"z"}), Cuda(0)));
  CHECK(FuseOptimizerUpdates(net, {{"p0", "p1", "p2"}}) == 1);
  CHECK(net.ops.size() == 2);
  CHECK(net.ops[1].inputs[0] == "p0");
}

// ---- training with it ------------------------------------------------------------

constexpr int kBatch = 16;

void FeedBatch(Workspace& ws, int step) { FeedSyntheticBatch(ws, kBatch, static_cast<uint32_t>(5 + step)); }

enum class Setup { kOneDevice, kTwoReplicas, kTwoReplicasZero };

// Three steps of `m`; the training state and losses after them, and the
// train net's ops by type.
struct Trained {
  std::map<std::string, std::vector<float>> blobs;
  std::multiset<std::string> types;
};

Trained Train(const ModelDef& m, Setup setup, bool fuse_cpu_updates, bool fuse = true) {
  auto ws = std::make_shared<Workspace>();
  NetDef init, train;
  std::vector<std::string> scopes = {""};
  if (setup == Setup::kOneDevice) {
    TrainingOptions o;
    o.fuse = fuse;
    o.update_fusion.cpu = fuse_cpu_updates;
    TrainingNets nets = BuildTraining(m, o);
    init = nets.init;
    train = nets.train;
  } else {
    ParallelizeOptions o;
    o.device_ids = {0, 1};
    o.fuse = fuse;
    o.update_fusion.cpu = fuse_cpu_updates;
    o.first_bucket_bytes = 64 << 10;  // several buckets, some of several params
    o.bucket_bytes = 1536 << 10;
    o.shard_optimizer_state = setup == Setup::kTwoReplicasZero;
    ParallelNets nets = Parallelize(m, o);
    init = nets.init;
    train = nets.train;
    scopes = nets.scopes;
  }
  Net(std::make_shared<const NetDef>(init), ws).Run();
  Net step(std::make_shared<const NetDef>(train), ws);
  Trained out;
  out.types = Types(train);
  for (int s = 0; s < 3; ++s) {
    FeedBatch(*ws, s);
    step.Run();
    for (const auto& l : m.losses) {
      const Tensor t = ws->GetTensor(l);
      out.blobs["step" + std::to_string(s) + "/" + l] = std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
    }
  }
  for (const auto& scope : scopes)
    for (const auto& name : TrainingStateBlobs(m)) {
      if (name == kIterBlob) continue;
      const Tensor t = ws->GetTensor(scope + name);
      out.blobs[scope + name] = std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
    }
  return out;
}

size_t CountFused(const Trained& t) {
  size_t n = 0;
  for (const auto& type : t.types) n += type.rfind("MultiTensor", 0) == 0 ? 1 : 0;
  return n;
}

TEST_CASE("training with fused updates is bit for bit training without them") {
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"}) {
    ModelDef m = ModelFromFile(SampleNetsDir() + file);
    for (const std::string optimizer : {"sgd", "momentum", "adam", "adagrad"}) {
      CAPTURE(file);
      CAPTURE(optimizer);
      m.optimizer->type = optimizer;
      m.optimizer->weight_decay = optimizer == "momentum" ? 1e-4 : 0.0;
      for (Setup setup : {Setup::kOneDevice, Setup::kTwoReplicas, Setup::kTwoReplicasZero}) {
        CAPTURE(static_cast<int>(setup));
        const Trained apart = Train(m, setup, false);
        const Trained fused = Train(m, setup, true);
        CHECK(CountFused(apart) == 0);
        if (setup == Setup::kTwoReplicas) {
          // CPU replicas of one process sum each other's gradients in their
          // updates (no allreduce): extra gradients, which do not fuse.
          CHECK(CountFused(fused) == 0);
        } else {
          CHECK(CountFused(fused) >= (setup == Setup::kOneDevice ? 1u : 2u));  // ZeRO: one per replica and bucket
          CHECK(fused.types.size() < apart.types.size());
        }
        CHECK(fused.blobs == apart.blobs);
      }
    }
  }
}

// The step's other fusions (graph/fusion.h: FC + Relu on the CPU, the loss
// with its gradient) change no bit either.
TEST_CASE("training with the step's fusions (FC + Relu, SoftmaxWithLoss with its gradient) is bit for bit training without") {
  for (const std::string file : {"fashion_mlp.json", "fashion_cnn.json"}) {
    const ModelDef m = ModelFromFile(SampleNetsDir() + file);
    for (Setup setup : {Setup::kOneDevice, Setup::kTwoReplicas}) {
      CAPTURE(file);
      CAPTURE(static_cast<int>(setup));
      const Trained apart = Train(m, setup, false, /*fuse=*/false);
      const Trained fused = Train(m, setup, false, /*fuse=*/true);
      CHECK(apart.types.count("SoftmaxWithLossGradient") >= 1);
      CHECK(fused.types.count("SoftmaxWithLossGradient") == 0);
      CHECK(fused.types.size() < apart.types.size());
      CHECK(fused.blobs == apart.blobs);
    }
  }
}

}  // namespace
