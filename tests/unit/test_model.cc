// Model definitions (schemas/model.fbs): loading from JSON and binary,
// validation of the model's lists, and the one-device training nets built
// from it: structure, one SGD step against a hand computation, and training
// that lowers the loss.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_format.h"
#include "model/inference.h"
#include "model/model_format.h"
#include "model/training.h"
#include "op_test_util.h"

using namespace dp;
using dp::testing::ExpectError;

namespace {

// A 2-layer MLP on 8 features, 3 classes. `optimizer` is the JSON of the optimizer table.
std::string ModelJson(const std::string& optimizer, const std::string& extra = "") {
  return R"({
  "name": "tiny",
  "init_net": {"ops": [
    {"type": "XavierFill", "outputs": ["w1"], "args": [{"name": "shape", "ints": [16, 8]}, {"name": "seed", "i": 1}]},
    {"type": "ConstantFill", "outputs": ["b1"], "args": [{"name": "shape", "ints": [16]}]},
    {"type": "XavierFill", "outputs": ["w2"], "args": [{"name": "shape", "ints": [3, 16]}, {"name": "seed", "i": 2}]},
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
  "metrics": ["accuracy"])" + extra + (optimizer.empty() ? "" : ",\n  \"optimizer\": " + optimizer) + "\n}";
}

// A linearly separable-ish batch: class = argmax of three fixed projections.
void Batch(Workspace& ws, int n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d;
  Tensor x({n, 8}, DType::kFloat32), y({n}, DType::kInt32);
  for (int i = 0; i < n; ++i) {
    float s[3] = {0, 0, 0};
    for (int k = 0; k < 8; ++k) {
      float v = d(gen);
      x.mutable_data<float>()[i * 8 + k] = v;
      s[k % 3] += v;
    }
    y.mutable_data<int32_t>()[i] = s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2);
  }
  ws.Feed("data", x);
  ws.Feed("label", y);
}

std::vector<float> Values(const Workspace& ws, const std::string& name) {
  const Tensor& t = ws.GetTensor(name);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

}  // namespace

TEST_CASE("a model loads from JSON, round-trips through binary and JSON, and completes its forward net") {
  ModelDef m = ModelFromJson(ModelJson(R"({"type": "adam", "lr": 0.002})"));
  CHECK(m.name == "tiny");
  CHECK(m.params.size() == 4);
  REQUIRE(m.optimizer.has_value());
  CHECK(m.optimizer->type == "adam");
  CHECK(m.optimizer->lr == 0.002);
  CHECK(m.optimizer->beta2 == 0.999);  // schema default
  CHECK(m.optimizer->lr_policy == "fixed");
  // params and inputs were added to the forward net's external inputs.
  CHECK(m.forward_net.external_inputs.size() == 6);
  std::string buf = ModelToBuffer(m);
  ModelDef b = ModelFromBuffer(buf.data(), buf.size());
  CHECK(ModelToJson(b) == ModelToJson(m));
  ModelDef j = ModelFromJson(ModelToJson(m));
  CHECK(ModelToBuffer(j) == buf);
}

TEST_CASE("model validation names the offending blob") {
  ExpectError([] { ModelFromJson(ModelJson("", R"(, "computed_params": ["w1"])")); }, Code::kInvalidNet,
              {"'w1'", "twice"});
  std::string j = ModelJson("");
  std::string bad = j;
  bad.replace(bad.find(R"("params": ["w1", "b1", "w2", "b2"])"), 34, R"("params": ["w1", "b1", "w2", "bx"])");
  // b2 is no longer a param, so the forward net reads a blob nobody provides.
  ExpectError([&] { ModelFromJson(bad); }, Code::kInvalidNet, {"forward_net", "'b2'"});
  ExpectError([] { ModelFromJson(ModelJson("", R"(, "computed_params": ["zz"])")); }, Code::kInvalidNet,
              {"computed param 'zz'", "not created by the init net"});
  bad = j;
  bad.replace(bad.find(R"("losses": ["loss"])"), 18, R"("losses": ["lost"])");
  ExpectError([&] { ModelFromJson(bad); }, Code::kInvalidNet, {"loss 'lost'", "not written"});
  ExpectError([] { ModelFromJson(ModelJson(R"({"type": "rmsprop"})")); }, Code::kInvalidArgument, {"'rmsprop'"});
  ExpectError([] { ModelFromJson(ModelJson(R"({"type": "sgd", "lr": -1})")); }, Code::kInvalidArgument, {"lr"});
  ExpectError([] { ModelFromJson(ModelJson(R"({"type": "sgd", "lr_policy": "sometimes"})")); },
              Code::kInvalidArgument, {"'sometimes'"});
  ExpectError([] { ModelFromJson("{\"name\": 3"); }, Code::kParse, {"model JSON"});
  ExpectError([] { ModelFromFile("/nonexistent/model.json"); }, Code::kNotFound, {"/nonexistent/model.json"});
  std::string garbage(64, 'x');
  ExpectError([&] { ModelFromBuffer(garbage.data(), garbage.size()); }, Code::kParse, {"DPMD"});
  // Training needs an optimizer.
  ModelDef no_opt = ModelFromJson(ModelJson(""));
  ExpectError([&] { BuildTraining(no_opt); }, Code::kInvalidArgument, {"no optimizer"});
}

TEST_CASE("training nets: structure and one SGD step equal to param - lr * gradient") {
  ModelDef m = ModelFromJson(ModelJson(R"({"type": "sgd", "lr": 0.1})"));
  TrainingNets nets = BuildTraining(m);
  CHECK(nets.grads.size() == 4);
  CHECK(nets.train.ops[0].type == "Iter");
  CHECK(nets.train.ops[1].type == "LearningRate");
  int updates = 0;
  for (const auto& op : nets.train.ops) updates += op.type == "SGD";
  CHECK(updates == 4);

  auto ws = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(nets.init), ws).Run();
  Batch(*ws, 32, 7);
  std::map<std::string, std::vector<float>> before;
  for (const auto& p : m.params) before[p] = Values(*ws, p);
  // The gradients at the starting point, from a gradient-only net.
  GradientOptions g;
  g.losses = {"loss"};
  g.wrt = m.params;
  auto grads_ws = std::make_shared<Workspace>();
  for (const auto& p : m.params) grads_ws->Feed(p, ws->GetTensor(p));
  grads_ws->Feed("data", ws->GetTensor("data"));
  grads_ws->Feed("label", ws->GetTensor("label"));
  Net(std::make_shared<const NetDef>(AddGradients(m.forward_net, g).net), grads_ws).Run();

  Net train(std::make_shared<const NetDef>(nets.train), ws);
  train.Run();
  CHECK(ws->GetTensor(kIterBlob).data<int64_t>()[0] == 1);
  CHECK(ws->GetTensor(kLrBlob).data<float>()[0] == doctest::Approx(0.1));
  for (const auto& p : m.params) {
    auto after = Values(*ws, p);
    auto grad = Values(*grads_ws, GradientName(p));
    REQUIRE(after.size() == before[p].size());
    for (size_t i = 0; i < after.size(); ++i)
      CHECK(after[i] == doctest::Approx(before[p][i] - 0.1f * grad[i]).epsilon(1e-5));
  }
}

TEST_CASE("every optimizer lowers the training loss; the eval net runs beside the train net") {
  for (const char* opt : {R"({"type": "sgd", "lr": 0.2})", R"({"type": "momentum", "lr": 0.05, "nesterov": true})",
                          R"({"type": "adam", "lr": 0.01})", R"({"type": "adagrad", "lr": 0.1})",
                          R"({"type": "momentum", "lr": 0.05, "weight_decay": 0.001, "lr_policy": "step",
                              "stepsize": 50, "gamma": 0.5, "warmup_iters": 10})"}) {
    CAPTURE(opt);
    ModelDef m = ModelFromJson(ModelJson(opt));
    TrainingNets nets = BuildTraining(m);
    auto ws = std::make_shared<Workspace>();
    Net(std::make_shared<const NetDef>(nets.init), ws).Run();
    Net train(std::make_shared<const NetDef>(nets.train), ws);
    Net eval(std::make_shared<const NetDef>(nets.eval), ws);
    Batch(*ws, 256, 99);
    eval.Run();
    const float first = ws->GetTensor("loss").data<float>()[0];
    for (int step = 0; step < 150; ++step) {
      Batch(*ws, 64, static_cast<uint32_t>(step));
      train.Run();
    }
    Batch(*ws, 256, 99);
    eval.Run();
    const float last = ws->GetTensor("loss").data<float>()[0];
    CHECK(std::isfinite(last));
    CHECK(last < 0.6f * first);
    CHECK(ws->GetTensor("accuracy").data<float>()[0] > 0.7f);
    CHECK(ws->GetTensor(kIterBlob).data<int64_t>()[0] == 150);
  }
}

// Regression (fuzzing): JSON printed doubles with 12 fixed decimals, so a
// model with lr 1e-13 wrote JSON that no longer loaded ("lr must be > 0, got 0").
TEST_CASE("a model goes binary -> JSON -> binary to the same bytes with every optimizer field at an extreme") {
  ModelDef m = ModelFromJson(ModelJson(R"({"type": "momentum", "lr": 1e-13})"));
  REQUIRE(m.optimizer.has_value());
  CHECK(ModelFromJson(ModelToJson(m)).optimizer->lr == 1e-13);
  OptimizerDef& o = *m.optimizer;
  o.nesterov = true;
  o.momentum = std::numeric_limits<double>::denorm_min();
  o.beta1 = std::nextafter(1.0, 0.0);
  o.beta2 = std::numeric_limits<double>::min();
  o.epsilon = 1e-300;
  o.weight_decay = 1.2345678901234e-7;
  o.lr_policy = "inv";
  o.gamma = 1e300;
  o.power = -0.0;
  o.warmup_start_factor = static_cast<double>(std::numeric_limits<float>::max());
  o.stepsize = std::numeric_limits<int64_t>::max();
  o.max_iter = std::numeric_limits<int64_t>::max();
  o.warmup_iters = std::numeric_limits<int64_t>::max();
  const std::string buffer = ModelToBuffer(m);
  const ModelDef back = ModelFromJson(ModelToJson(m));
  CHECK(ModelToBuffer(back) == buffer);
  CHECK(std::signbit(back.optimizer->power));
  CHECK(back.optimizer->momentum == std::numeric_limits<double>::denorm_min());
  CHECK(back.optimizer->beta1 == o.beta1);
}

namespace {

// The tiny MLP with batch norm and dropout between its layers (training mode
// in the model; inference nets switch both off).
ModelDef BnDropoutModel() {
  return ModelFromJson(R"({
  "name": "bnd",
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
    {"type": "Dropout", "inputs": ["hn"], "outputs": ["hd", "mask"], "args": [{"name": "ratio", "f": 0.5}]},
    {"type": "FC", "inputs": ["hd", "w2", "b2"], "outputs": ["logits"]},
    {"type": "SoftmaxWithLoss", "inputs": ["logits", "label"], "outputs": ["softmax", "loss"]},
    {"type": "Accuracy", "inputs": ["softmax", "label"], "outputs": ["accuracy"]}]},
  "params": ["w1", "b1", "gamma", "beta", "w2", "b2"],
  "computed_params": ["rm", "rv"],
  "inputs": ["data", "label"],
  "losses": ["loss"],
  "metrics": ["accuracy"],
  "optimizer": {"type": "momentum", "lr": 0.05}})");
}

std::vector<std::string> OpTypes(const NetDef& net) {
  std::vector<std::string> types;
  for (const auto& op : net.ops) types.push_back(op.type);
  return types;
}

// Trains `m` a few steps, then runs its eval net on a batch and the inference
// net for `outputs` in a workspace of its own that holds only the trained
// params (fed from the training workspace, shared) and the data: each output
// must equal the eval net's blob bit for bit.
void CheckInferenceMatchesEval(const ModelDef& m, const std::vector<std::string>& outputs) {
  TrainingNets nets = BuildTraining(m);
  auto ws = std::make_shared<Workspace>();
  Net(std::make_shared<const NetDef>(nets.init), ws).Run();
  Net train(std::make_shared<const NetDef>(nets.train), ws);
  for (int step = 0; step < 5; ++step) {
    Batch(*ws, 32, static_cast<uint32_t>(step));
    train.Run();
  }
  Batch(*ws, 64, 1234);
  Net(std::make_shared<const NetDef>(nets.eval), ws).Run();

  const NetDef inference = BuildInference(m, outputs);
  CHECK(inference.external_outputs == outputs);
  auto serving = std::make_shared<Workspace>();
  for (const auto& x : inference.external_inputs) {
    CHECK(x != "label");
    serving->Feed(x, ws->GetTensor(x));
  }
  Net(std::make_shared<const NetDef>(inference), serving).Run();
  for (const auto& y : outputs) {
    CAPTURE(y);
    const Tensor& got = serving->GetTensor(y);
    const Tensor& want = ws->GetTensor(y);
    REQUIRE(got.dims() == want.dims());
    CHECK(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()) == 0);
  }
  // It never wrote the params it shares with the training workspace.
  for (const auto& p : m.params)
    if (serving->HasBlob(p)) CHECK(serving->GetTensor(p).raw_data() == ws->GetTensor(p).raw_data());
}

}  // namespace

TEST_CASE("inference nets: the forward ops the outputs need, without loss, metric or labels") {
  ModelDef m = ModelFromJson(ModelJson(R"({"type": "adam", "lr": 0.01})"));
  CHECK(DefaultInferenceOutputs(m) == std::vector<std::string>{"logits", "softmax"});

  NetDef soft = BuildInference(m, {"softmax"});
  CHECK(soft.name == "tiny_inference");
  CHECK(OpTypes(soft) == std::vector<std::string>{"FC", "FC", "Softmax"});  // FC + Relu fused, as in training
  CHECK(soft.ops[0].FindArg("activation") != nullptr);
  CHECK(soft.external_inputs == std::vector<std::string>{"w1", "b1", "w2", "b2", "data"});
  CHECK(soft.external_outputs == std::vector<std::string>{"softmax"});

  NetDef logits = BuildInference(m, {"logits"});
  CHECK(OpTypes(logits) == std::vector<std::string>{"FC", "FC"});
  NetDef unfused = BuildInference(m, {"h"}, InferenceOptions{.fuse = false});
  CHECK(OpTypes(unfused) == std::vector<std::string>{"FC", "Relu"});
  CHECK(unfused.external_inputs == std::vector<std::string>{"w1", "b1", "data"});
  CHECK(BuildInference(m, {}).external_outputs == std::vector<std::string>{"logits", "softmax"});

  // A loss or metric may be asked for: the net then reads the labels.
  // (The softmax Accuracy reads needs no loss: a Softmax computes it.)
  NetDef acc = BuildInference(m, {"accuracy", "softmax"});
  CHECK(OpTypes(acc) == std::vector<std::string>{"FC", "FC", "Softmax", "Accuracy"});
  CHECK(acc.external_inputs.back() == "label");

  CheckInferenceMatchesEval(m, {"softmax"});
  CheckInferenceMatchesEval(m, {"logits", "softmax"});
  CheckInferenceMatchesEval(m, {"h"});
}

TEST_CASE("inference nets: batch norm on running statistics and no dropout, as the eval net") {
  ModelDef m = BnDropoutModel();
  NetDef net = BuildInference(m, {"softmax"});
  CHECK(OpTypes(net) == std::vector<std::string>{"FC", "SpatialBN", "Relu", "Dropout", "FC", "Softmax"});
  for (const auto& op : net.ops) {
    if (op.type != "SpatialBN" && op.type != "Dropout") continue;
    CHECK(ArgReader(op, op.type).Int("is_test") == 1);
    CHECK(op.outputs.size() == 1);
  }
  CHECK(net.external_inputs == std::vector<std::string>{"w1", "b1", "gamma", "beta", "w2", "b2", "rm", "rv", "data"});
  CheckInferenceMatchesEval(m, {"softmax", "hd"});
  ExpectError([&] { BuildInference(m, {"sm"}); }, Code::kNotFound, {"'sm'", "training mode"});
}

TEST_CASE("inference nets: unknown, repeated and unwritten outputs are clear errors") {
  ModelDef m = ModelFromJson(ModelJson(""));
  ExpectError([&] { BuildInference(m, {"sofmax"}); }, Code::kNotFound,
              {"model 'tiny'", "no blob 'sofmax'", "did you mean 'softmax'?"});
  ExpectError([&] { BuildInference(m, {"data"}); }, Code::kNotFound, {"'data' is an input"});
  ExpectError([&] { BuildInference(m, {"w2"}); }, Code::kNotFound, {"'w2' is a param"});
  ExpectError([&] { BuildInference(m, {"softmax", "softmax"}); }, Code::kInvalidArgument, {"'softmax'", "twice"});
  ExpectError([&] { BuildInference(m, {""}); }, Code::kInvalidArgument, {"empty"});
}
