// Optimizer operators (SGD, MomentumSGD, Adam, Adagrad), LearningRate and
// Iter: every update against a scalar double reference over several steps
// with changing gradients and learning rates (float32 and float64, sizes that
// exercise the vector loops and their scalar tails), in-place semantics
// (storage reused, fetched and caller-owned tensors never written), the
// learning-rate policies at fixed iterations against hand-computed values,
// errors with their codes and blob names, shape inference against what the
// kernels produce, and registration as non-differentiable.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/gradient_registry.h"
#include "ops/math/optimizer_updates.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/net_validate.h"
#include "ops/op_schema.h"
#include "ops/operator.h"
#include "op_test_util.h"

using namespace dp;
using namespace dp::testing;

namespace {

// ---- building ops, nets and tensors ----------------------------------------

Tensor Int64(int64_t v) {
  Tensor t(Dims{1}, DType::kInt64);
  t.mutable_data<int64_t>()[0] = v;
  return t;
}

Tensor Int32(int32_t v) {
  Tensor t(Dims{1}, DType::kInt32);
  t.mutable_data<int32_t>()[0] = v;
  return t;
}

// ---- comparing -----------------------------------------------------------------

// |got - want| <= tol * (1 + |want|) elementwise; reports the first mismatch.
template <typename T>
void CheckTensorClose(const Tensor& t, const std::vector<double>& want, double tol, const std::string& what) {
  CAPTURE(what);
  std::vector<T> got = Values<T>(t);
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (!(std::fabs(g - want[i]) <= tol * (1.0 + std::fabs(want[i])))) {
      if (bad++ == 0) first = i;
    }
  }
  CHECK_MESSAGE(bad == 0, what, ": ", bad, " of ", got.size(), " elements differ; first at ", first, ": got ",
                bad ? static_cast<double>(got[first]) : 0.0, ", want ", bad ? want[first] : 0.0);
}

// ---- scalar references in double (PyTorch's formulas) ---------------------------

using Vec = std::vector<double>;
// Updates p and the states for one step with gradient g, learning rate lr and
// step number t (1-based).
using RefStep = std::function<void(Vec& p, std::vector<Vec>& s, const Vec& g, double lr, int64_t t)>;

RefStep RefSgd(double wd) {
  return [=](Vec& p, std::vector<Vec>&, const Vec& g, double lr, int64_t) {
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + wd * p[i];
      p[i] = p[i] - lr * d;
    }
  };
}

RefStep RefMomentum(double mu, bool nesterov, double wd) {
  return [=](Vec& p, std::vector<Vec>& s, const Vec& g, double lr, int64_t) {
    Vec& b = s[0];
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + wd * p[i];
      b[i] = mu * b[i] + d;
      double step = nesterov ? d + mu * b[i] : b[i];
      p[i] = p[i] - lr * step;
    }
  };
}

RefStep RefAdam(double b1, double b2, double eps, double wd) {
  return [=](Vec& p, std::vector<Vec>& s, const Vec& g, double lr, int64_t t) {
    Vec &m = s[0], &v = s[1];
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * d;
      v[i] = b2 * v[i] + (1 - b2) * d * d;
      double mhat = m[i] / (1 - std::pow(b1, static_cast<double>(t)));
      double vhat = v[i] / (1 - std::pow(b2, static_cast<double>(t)));
      p[i] = p[i] - lr * mhat / (std::sqrt(vhat) + eps);
    }
  };
}

RefStep RefAdagrad(double eps, double decay, double wd) {
  return [=](Vec& p, std::vector<Vec>& s, const Vec& g, double lr, int64_t) {
    Vec& h = s[0];
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + wd * p[i];
      h[i] = decay * h[i] + d * d;
      p[i] = p[i] - lr * d / (std::sqrt(h[i]) + eps);
    }
  };
}

struct OptCase {
  std::string type;
  std::vector<Argument> args;
  std::vector<std::string> states;  // state blob names, in input order
  bool uses_iter;                   // Adam: reads the step counter after lr
  RefStep ref;
  double grad_scale = 1.0;          // gradients uniform in +-2 * grad_scale
  DType lr_dtype = DType::kUndefined;  // default: the parameter's dtype
};

// Runs `c` for `steps` steps in one net (Iter first when the optimizer reads
// the counter, fed 0 like the init net does), feeding a new gradient and
// learning rate each step; compares parameter and states with the reference
// after every step; checks shape inference, that the update reuses the
// blobs' storage, and that a tensor fetched before a step keeps its values.
template <typename T>
void RunCase(const OptCase& c, const Dims& dims, int steps = 5) {
  CAPTURE(c.type);
  CAPTURE(DimsString(dims));
  const int64_t n = Prod(dims);
  const DType lr_dtype = c.lr_dtype == DType::kUndefined ? DTypeOf<T>() : c.lr_dtype;
  const double lrs[] = {0.1, 0.05, 0.2, 0.08, 0.15, 0.12, 0.03};
  REQUIRE(steps <= 7);
  auto lr_tensor = [&](double lr, double* rounded) {
    Tensor t(Dims{1}, lr_dtype);
    if (lr_dtype == DType::kFloat32) {
      t.mutable_data<float>()[0] = static_cast<float>(lr);
      *rounded = static_cast<double>(static_cast<float>(lr));
    } else {
      t.mutable_data<double>()[0] = lr;
      *rounded = lr;
    }
    return t;
  };
  auto grad = [&](int step) { return Random<T>(n, 100u + static_cast<uint32_t>(step), -2 * c.grad_scale, 2 * c.grad_scale); };

  const std::vector<T> p0 = Random<T>(n, 1);
  Vec p = ToDouble(p0);
  std::vector<Vec> s;
  Feeds feeds;
  double lr0 = 0;
  feeds.emplace_back("w", Make<T>(dims, p0));
  feeds.emplace_back("g", Make<T>(dims, grad(1)));
  std::vector<std::string> inputs = {"w", "g"}, outputs = {"w"};
  for (size_t k = 0; k < c.states.size(); ++k) {
    // Nonnegative (v and h are sums of squares), nonzero so that the state is read.
    std::vector<T> s0 = Random<T>(n, 10u + static_cast<uint32_t>(k), 0.0, 0.5);
    s.push_back(ToDouble(s0));
    feeds.emplace_back(c.states[k], Make<T>(dims, s0));
    inputs.push_back(c.states[k]);
    outputs.push_back(c.states[k]);
  }
  feeds.emplace_back("lr", lr_tensor(lrs[0], &lr0));
  inputs.push_back("lr");
  std::vector<OperatorDef> ops;
  if (c.uses_iter) {
    feeds.emplace_back("iter", Int64(0));
    inputs.push_back("iter");
    ops.push_back(Op("Iter", {"iter"}, {"iter"}));
  }
  ops.push_back(Op(c.type, inputs, outputs, c.args));

  auto def = std::make_shared<const NetDef>(MakeNet(ops, feeds));
  auto ws = std::make_shared<Workspace>();
  for (const auto& [name, t] : feeds) FeedOwned(*ws, name, t);
  Net net(def, ws);

  std::vector<std::string> updated = {"w"};
  for (const auto& st : c.states) updated.push_back(st);
  std::vector<const void*> storage;  // data pointers after step 1
  Tensor held;
  std::vector<T> held_values;
  for (int step = 1; step <= steps; ++step) {
    CAPTURE(step);
    double lr = lr0;
    std::vector<T> g = grad(step);
    if (step > 1) {
      FeedOwned(*ws, "g", Make<T>(dims, g));
      FeedOwned(*ws, "lr", lr_tensor(lrs[step - 1], &lr));
    }
    if (step == 3) {  // a fetched tensor must keep its values (copy-on-write)
      held = ws->GetTensor("w");
      held_values = Values<T>(held);
    }
    net.Run();
    c.ref(p, s, ToDouble(g), lr, step);
    CheckTensorClose<T>(ws->GetTensor("w"), p, Tol<T>(), "param");
    for (size_t k = 0; k < c.states.size(); ++k) CheckTensorClose<T>(ws->GetTensor(c.states[k]), s[k], Tol<T>(), c.states[k]);
    if (c.uses_iter) CHECK(ws->GetTensor("iter").data<int64_t>()[0] == step);
    if (step == 1) {
      CheckInference(*def, feeds, *ws);
      for (const auto& name : updated) storage.push_back(ws->GetTensor(name).raw_data());
    }
    if (step == 2 && n > 0) {  // sole owners: updated in place, no new storage
      for (size_t k = 0; k < updated.size(); ++k) {
        CAPTURE(updated[k]);
        CHECK(ws->GetTensor(updated[k]).raw_data() == storage[k]);
      }
    }
    if (step == 3) {
      CHECK(Values<T>(held) == held_values);
      if (n > 0) CHECK(Values<T>(ws->GetTensor("w")) != held_values);
    }
  }
  // The parameter moved: a kernel that did nothing fails the comparisons above
  // unless the reference did nothing either.
  if (n > 0) CHECK(ToDouble(Values<T>(ws->GetTensor("w"))) != ToDouble(p0));
}

const Dims kOdd{37};       // vector body plus a scalar tail for every lane width
const Dims kMatrix{3, 5};  // 15 elements, 2-D
const Dims kLarge{1029};   // many vector iterations

// The init op of an int64 [1] iteration counter "iter" at 0.
OperatorDef IterInitOp() {
  return Op("ConstantFill", {}, {"iter"}, {IntsArg("shape", {1}), IntArg("dtype", 6), IntArg("value", 0)});
}

}  // namespace

// ---- SGD -------------------------------------------------------------------------

TEST_CASE_TEMPLATE("SGD matches the reference over several steps", T, float, double) {
  for (double wd : {0.0, 0.05}) {
    CAPTURE(wd);
    std::vector<Argument> args;
    if (wd != 0) args.push_back(FloatArg("weight_decay", wd));
    OptCase c{"SGD", args, {}, false, RefSgd(wd)};
    RunCase<T>(c, kOdd);
    RunCase<T>(c, kMatrix);
  }
}

TEST_CASE("SGD reads a learning rate of the other float dtype") {
  OptCase c{"SGD", {FloatArg("weight_decay", 0.01)}, {}, false, RefSgd(0.01)};
  c.lr_dtype = DType::kFloat64;
  RunCase<float>(c, kOdd);
  c.lr_dtype = DType::kFloat32;
  RunCase<double>(c, kOdd);
}

TEST_CASE("SGD over caller memory never writes it") {
  std::vector<float> buf = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> orig = buf;
  Tensor w = Tensor::FromStorage(Dims{2, 2}, DType::kFloat32,
                                 Storage::Borrow(DeviceOption{}, buf.data(), buf.size() * sizeof(float)));
  Feeds feeds = {{"w", w}, {"g", Make<float>({2, 2}, {1, 1, -1, 2})}, {"lr", Make<float>({1}, {0.5f})}};
  auto ws = RunOps({Op("SGD", {"w", "g", "lr"}, {"w"})}, feeds);
  CHECK(buf == orig);
  CHECK(Values<float>(ws->GetTensor("w")) == std::vector<float>{0.5f, -2.5f, 3.5f, -0.5f});
}

TEST_CASE("SGD and Adam accept empty parameters") {
  auto ws = RunOps({Op("SGD", {"w", "g", "lr"}, {"w"})},
                   {{"w", Make<float>({0, 3}, {})}, {"g", Make<float>({0, 3}, {})}, {"lr", Make<float>({1}, {0.1f})}});
  CHECK(ws->GetTensor("w").dims() == Dims{0, 3});
  ws = RunOps({Op("Adam", {"w", "g", "m", "v", "lr", "it"}, {"w", "m", "v"})},
              {{"w", Make<double>({0}, {})},
               {"g", Make<double>({0}, {})},
               {"m", Make<double>({0}, {})},
               {"v", Make<double>({0}, {})},
               {"lr", Make<double>({1}, {0.1})},
               {"it", Int64(1)}});
  CHECK(ws->GetTensor("v").dims() == Dims{0});
}

// ---- shared params: extra gradients and parts --------------------------------

// One update split into `parts` ops (part k on CPU device k, run by the async
// executor at once), each summing the gradients g0 + g1 + g2 itself, equals
// one whole update on the precomputed sum, bit for bit; caller-owned param
// memory is never written (MakeWritable copies it before the parts).
TEST_CASE("updates in parts, summing extra gradients, equal one update on the summed gradient") {
  struct Kind {
    const char* type;
    std::vector<std::string> states;
    bool iter;
    std::vector<Argument> args;
  };
  const std::vector<Kind> kinds = {{"SGD", {}, false, {FloatArg("weight_decay", 0.1)}},
                                   {"MomentumSGD", {"mom"}, false, {IntArg("nesterov", 1)}},
                                   {"Adam", {"m", "v"}, true, {FloatArg("weight_decay", 0.01)}},
                                   {"Adagrad", {"h"}, false, {}}};
  const int64_t n = 5003;  // parts of 64 elements, the last one short
  for (const Kind& k : kinds)
    for (int64_t parts : {1, 2, 3, 7}) {
      CAPTURE(k.type);
      CAPTURE(parts);
      std::vector<float> w0 = Random<float>(n, 1), g0 = Random<float>(n, 2), g1 = Random<float>(n, 3),
                         g2 = Random<float>(n, 4);
      std::vector<float> sum(static_cast<size_t>(n));
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = g0[i] + g1[i] + g2[i];
      Feeds feeds = {{"g0", Make<float>({n}, g0)}, {"g1", Make<float>({n}, g1)}, {"g2", Make<float>({n}, g2)},
                     {"sum", Make<float>({n}, sum)}, {"lr", Make<float>({1}, {0.05f})}, {"it", Int64(3)}};
      uint32_t seed = 10;
      for (const auto& st : k.states) feeds.push_back({st, Make<float>({n}, Random<float>(n, seed++, 0.0, 1.0))});
      auto inputs = [&](const std::string& g) {
        std::vector<std::string> in = {"w", g};
        in.insert(in.end(), k.states.begin(), k.states.end());
        in.push_back("lr");
        if (k.iter) in.push_back("it");
        return in;
      };
      std::vector<std::string> outs = {"w"};
      outs.insert(outs.end(), k.states.begin(), k.states.end());

      Feeds whole_feeds = feeds;
      whole_feeds.push_back({"w", Make<float>({n}, w0)});
      auto want = RunOps({Op(k.type, inputs("sum"), outs, k.args)}, whole_feeds);

      std::vector<float> caller = w0;  // the param in caller memory
      Feeds part_feeds = feeds;
      part_feeds.push_back({"w", Tensor::FromStorage(Dims{n}, DType::kFloat32,
                                                     Storage::Borrow(DeviceOption{}, caller.data(), caller.size() * sizeof(float)))});
      NetDef net = MakeNet({}, part_feeds);
      net.executor = ExecutorKind::kAsync;
      if (parts > 1) net.ops.push_back(Op("MakeWritable", outs, outs));
      for (int64_t p = 0; p < parts; ++p) {
        std::vector<std::string> in = inputs("g0");
        in.push_back("g1");
        in.push_back("g2");
        std::vector<Argument> args = k.args;
        args.push_back(IntArg("part", p));
        args.push_back(IntArg("parts", parts));
        OperatorDef op = Op(k.type, in, outs, args);
        op.device = DeviceOption{DeviceType::kCPU, static_cast<int32_t>(p)};
        net.ops.push_back(op);
      }
      auto ws = std::make_shared<Workspace>();
      for (const auto& [name, t] : part_feeds) ws->Feed(name, t);
      Net(std::make_shared<const NetDef>(net), ws).Run();
      CHECK(caller == w0);
      for (const auto& b : outs) {
        CAPTURE(b);
        CHECK(Values<float>(ws->GetTensor(b)) == Values<float>(want->GetTensor(b)));
      }
    }
}

TEST_CASE("updates reject bad parts and extra gradients of another shape") {
  Feeds feeds = {{"w", Make<float>({4}, {1, 2, 3, 4})}, {"g", Make<float>({4}, {1, 1, 1, 1})},
                 {"g1", Make<float>({3}, {1, 1, 1})}, {"lr", Make<float>({1}, {0.1f})}};
  ExpectRunError({Op("SGD", {"w", "g", "lr", "g1"}, {"w"})}, feeds, Code::kShape, {"g1"});
  ExpectBuildError({Op("SGD", {"w", "g", "lr"}, {"w"}, {IntArg("part", 2), IntArg("parts", 2)})}, feeds,
                 Code::kInvalidArgument, {"part"});
  // Parts run at once and may not copy on write: caller memory needs MakeWritable first.
  std::vector<float> caller = {1, 2, 3, 4};
  Feeds borrowed = {{"w", Tensor::FromStorage(Dims{4}, DType::kFloat32,
                                              Storage::Borrow(DeviceOption{}, caller.data(), 4 * sizeof(float)))},
                    {"g", Make<float>({4}, {1, 1, 1, 1})}, {"lr", Make<float>({1}, {0.1f})}};
  ExpectRunError({Op("SGD", {"w", "g", "lr"}, {"w"}, {IntArg("part", 0), IntArg("parts", 2)})}, borrowed,
                 Code::kFailedPrecondition, {"'w'", "MakeWritable"});
  auto ws = RunOps({Op("MakeWritable", {"w"}, {"w"}), Op("SGD", {"w", "g", "lr"}, {"w"}, {IntArg("part", 1), IntArg("parts", 2)})},
                   borrowed);
  CHECK(caller == std::vector<float>{1, 2, 3, 4});
  CHECK(Values<float>(ws->GetTensor("w")) == std::vector<float>{1, 2, 3, 4});  // part 1 of 2 of 4 elements: empty
}

// ---- MomentumSGD ---------------------------------------------------------------

TEST_CASE_TEMPLATE("MomentumSGD matches the reference, Nesterov on and off", T, float, double) {
  for (int nesterov : {0, 1}) {
    for (double wd : {0.0, 0.01}) {
      CAPTURE(nesterov);
      CAPTURE(wd);
      std::vector<Argument> args = {IntArg("nesterov", nesterov)};
      if (wd != 0) args.push_back(FloatArg("weight_decay", wd));
      RunCase<T>({"MomentumSGD", args, {"mom"}, false, RefMomentum(0.9, nesterov != 0, wd)}, kOdd);
    }
  }
  // Explicit momentum, 2-D.
  RunCase<T>({"MomentumSGD", {FloatArg("momentum", 0.5), IntArg("nesterov", 1)}, {"mom"}, false,
              RefMomentum(0.5, true, 0.0)},
             kMatrix);
}

TEST_CASE("MomentumSGD from a zero buffer takes PyTorch's first step") {
  // Step 1 from zeros: buf = d, p -= lr * d (plain) or lr * (1 + mu) * d (Nesterov).
  for (int nesterov : {0, 1}) {
    CAPTURE(nesterov);
    auto ws = RunOps({Op("MomentumSGD", {"w", "g", "b", "lr"}, {"w", "b"},
                         {IntArg("nesterov", nesterov), FloatArg("weight_decay", 0.5)})},
                     {{"w", Make<double>({2}, {1.0, -2.0})},
                      {"g", Make<double>({2}, {0.5, 0.25})},
                      {"b", Make<double>({2}, {0.0, 0.0})},
                      {"lr", Make<double>({1}, {0.1})}});
    // d = g + 0.5 p = {1.0, -0.75}
    CHECK(Values<double>(ws->GetTensor("b")) == std::vector<double>{1.0, -0.75});
    const double f = nesterov ? 1.9 : 1.0;
    auto w = Values<double>(ws->GetTensor("w"));
    CHECK(w[0] == doctest::Approx(1.0 - 0.1 * f * 1.0).epsilon(1e-14));
    CHECK(w[1] == doctest::Approx(-2.0 + 0.1 * f * 0.75).epsilon(1e-14));
  }
}

// ---- Adam ----------------------------------------------------------------------

TEST_CASE_TEMPLATE("Adam matches torch.optim.Adam's formula", T, float, double) {
  for (double wd : {0.0, 0.1}) {
    CAPTURE(wd);
    std::vector<Argument> args;
    if (wd != 0) args.push_back(FloatArg("weight_decay", wd));
    RunCase<T>({"Adam", args, {"m", "v"}, true, RefAdam(0.9, 0.999, 1e-8, wd)}, kOdd);
  }
  // Custom betas, 2-D.
  RunCase<T>({"Adam", {FloatArg("beta1", 0.8), FloatArg("beta2", 0.99)}, {"m", "v"}, true,
              RefAdam(0.8, 0.99, 1e-8, 0.0)},
             kMatrix);
  // Small gradients and a large epsilon: where eps goes (after the
  // bias-corrected square root) changes the result.
  OptCase small{"Adam", {FloatArg("epsilon", 1e-2)}, {"m", "v"}, true, RefAdam(0.9, 0.999, 1e-2, 0.0)};
  small.grad_scale = 1e-2;
  RunCase<T>(small, kOdd);
  RunCase<T>({"Adam", {FloatArg("weight_decay", 0.01)}, {"m", "v"}, true, RefAdam(0.9, 0.999, 1e-8, 0.01)}, kLarge, 3);
}

TEST_CASE("Adam's first step from zero state moves each weight by about lr") {
  // t = 1, m = v = 0: mhat = d, vhat = d^2, so p -= lr * d / (|d| + eps).
  auto ws = RunOps({Op("Adam", {"w", "g", "m", "v", "lr", "it"}, {"w", "m", "v"})},
                   {{"w", Make<double>({3}, {1.0, 1.0, 1.0})},
                    {"g", Make<double>({3}, {0.5, -3.0, 1e-3})},
                    {"m", Make<double>({3}, {0, 0, 0})},
                    {"v", Make<double>({3}, {0, 0, 0})},
                    {"lr", Make<double>({1}, {0.01})},
                    {"it", Int64(1)}});
  auto w = Values<double>(ws->GetTensor("w"));
  CHECK(w[0] == doctest::Approx(0.99).epsilon(1e-6));
  CHECK(w[1] == doctest::Approx(1.01).epsilon(1e-6));
  CHECK(w[2] == doctest::Approx(0.99).epsilon(1e-6));
  auto m = Values<double>(ws->GetTensor("m"));
  CHECK(m[1] == doctest::Approx(-0.3).epsilon(1e-14));
  auto v = Values<double>(ws->GetTensor("v"));
  CHECK(v[1] == doctest::Approx(0.009).epsilon(1e-14));
}

// ---- Adagrad ---------------------------------------------------------------------

TEST_CASE_TEMPLATE("Adagrad matches the reference", T, float, double) {
  for (double decay : {1.0, 0.9}) {
    for (double wd : {0.0, 0.05}) {
      CAPTURE(decay);
      CAPTURE(wd);
      std::vector<Argument> args;
      if (decay != 1.0) args.push_back(FloatArg("decay", decay));
      if (wd != 0) args.push_back(FloatArg("weight_decay", wd));
      RunCase<T>({"Adagrad", args, {"h"}, false, RefAdagrad(1e-10, decay, wd)}, kOdd);
    }
  }
  RunCase<T>({"Adagrad", {FloatArg("epsilon", 0.1)}, {"h"}, false, RefAdagrad(0.1, 1.0, 0.0)}, kMatrix);
  RunCase<T>({"Adagrad", {FloatArg("weight_decay", 0.01)}, {"h"}, false, RefAdagrad(1e-10, 1.0, 0.01)}, kLarge, 3);
}

// ---- the optimizers' errors --------------------------------------------------------

TEST_CASE("optimizers reject mismatched shapes and dtypes, naming the blobs") {
  auto f = [](Dims d) { return Make<float>(d, std::vector<float>(static_cast<size_t>(Prod(d)), 1.0f)); };
  auto dbl = [](Dims d) { return Make<double>(d, std::vector<double>(static_cast<size_t>(Prod(d)), 1.0)); };
  const OperatorDef sgd = Op("SGD", {"w", "g", "lr"}, {"w"});

  ExpectRunAndInferError({sgd}, {{"w", f({2, 3})}, {"g", f({3, 2})}, {"lr", f({1})}}, Code::kShape,
                         {"grad 'g'", "[3, 2]", "param 'w'", "[2, 3]"});
  ExpectRunAndInferError({sgd}, {{"w", f({2, 3})}, {"g", dbl({2, 3})}, {"lr", f({1})}}, Code::kDType,
                         {"grad 'g'", "float64", "param 'w'"});
  ExpectRunAndInferError({sgd}, {{"w", Int32(1)}, {"g", Int32(1)}, {"lr", f({1})}}, Code::kDType,
                         {"param 'w'", "int32"});
  ExpectRunAndInferError({sgd}, {{"w", f({2})}, {"g", f({2})}, {"lr", f({2})}}, Code::kShape, {"lr 'lr'", "[2]"});
  ExpectRunAndInferError({sgd}, {{"w", f({2})}, {"g", f({2})}, {"lr", Int64(1)}}, Code::kDType, {"lr 'lr'", "int64"});
  // The op is named in run-time errors.
  ExpectRunError({sgd}, {{"w", f({2})}, {"g", f({3})}, {"lr", f({1})}}, Code::kShape, {"SGD"});
  // A learning rate never fed (the net checks its external inputs first).
  ExpectRunError({sgd}, {{"w", f({2})}, {"g", f({2})}}, Code::kNotFound, {"'lr'"}, {"lr"});
  ExpectRunError({sgd}, {{"w", f({2})}, {"g", f({2})}, {"lr", Tensor()}}, Code::kNotFound, {"lr 'lr'"});

  ExpectRunAndInferError({Op("MomentumSGD", {"w", "g", "mom", "lr"}, {"w", "mom"})},
                         {{"w", f({4})}, {"g", f({4})}, {"mom", f({5})}, {"lr", f({1})}}, Code::kShape,
                         {"momentum 'mom'", "[5]"});
  ExpectRunAndInferError({Op("MomentumSGD", {"w", "g", "mom", "lr"}, {"w", "mom"})},
                         {{"w", dbl({4})}, {"g", dbl({4})}, {"mom", f({4})}, {"lr", f({1})}}, Code::kDType,
                         {"momentum 'mom'", "float32"});

  const OperatorDef adam = Op("Adam", {"w", "g", "m", "v", "lr", "it"}, {"w", "m", "v"});
  ExpectRunAndInferError({adam}, {{"w", f({4})}, {"g", f({4})}, {"m", f({4})}, {"v", f({2, 2})}, {"lr", f({1})},
                                  {"it", Int64(1)}},
                         Code::kShape, {"v 'v'", "[2, 2]"});
  ExpectRunAndInferError({adam}, {{"w", f({4})}, {"g", f({4})}, {"m", dbl({4})}, {"v", f({4})}, {"lr", f({1})},
                                  {"it", Int64(1)}},
                         Code::kDType, {"m 'm'"});
  ExpectRunAndInferError({adam}, {{"w", f({4})}, {"g", f({4})}, {"m", f({4})}, {"v", f({4})}, {"lr", f({1})},
                                  {"it", f({1})}},
                         Code::kDType, {"iter 'it'", "int64"});
  ExpectRunAndInferError({adam}, {{"w", f({4})}, {"g", f({4})}, {"m", f({4})}, {"v", f({4})}, {"lr", f({1})},
                                  {"it", Make<int64_t>({2}, {1, 2})}},
                         Code::kShape, {"iter 'it'"});
  // Adam before Iter ever ran: t = 0 has no bias correction.
  ExpectRunError({adam}, {{"w", f({4})}, {"g", f({4})}, {"m", f({4})}, {"v", f({4})}, {"lr", f({1})},
                          {"it", Int64(0)}},
                 Code::kOutOfRange, {"iter 'it'", ">= 1"});

  ExpectRunAndInferError({Op("Adagrad", {"w", "g", "h", "lr"}, {"w", "h"})},
                         {{"w", f({4})}, {"g", f({4})}, {"h", f({1})}, {"lr", f({1})}}, Code::kShape,
                         {"h 'h'", "[1]"});
}

TEST_CASE("optimizers must update in place and reject bad arguments") {
  auto f = [](Dims d) { return Make<float>(d, std::vector<float>(static_cast<size_t>(Prod(d)), 1.0f)); };
  ExpectBuildError({Op("SGD", {"w", "g", "lr"}, {"w2"})}, {{"w", f({2})}, {"g", f({2})}, {"lr", f({1})}},
                   Code::kInvalidNet, {"in place", "'w'", "'w2'"});
  ExpectBuildError({Op("MomentumSGD", {"w", "g", "b", "lr"}, {"w", "b2"})},
                   {{"w", f({2})}, {"g", f({2})}, {"b", f({2})}, {"lr", f({1})}}, Code::kInvalidNet,
                   {"in place", "'b2'"});
  Feeds adam_feeds = {{"w", f({2})}, {"g", f({2})}, {"m", f({2})}, {"v", f({2})}, {"lr", f({1})}, {"it", Int64(1)}};
  ExpectBuildError({Op("Adam", {"w", "g", "m", "v", "lr", "it"}, {"w", "m", "v2"})}, adam_feeds, Code::kInvalidNet,
                   {"in place", "'v2'"});
  ExpectBuildError({Op("Adagrad", {"w", "g", "h", "lr"}, {"w", "h2"})},
                   {{"w", f({2})}, {"g", f({2})}, {"h", f({2})}, {"lr", f({1})}}, Code::kInvalidNet,
                   {"in place", "'h2'"});
  // The gradient cannot be written in place of anything.
  ExpectBuildError({Op("SGD", {"w", "w", "lr"}, {"w"})}, {{"w", f({2})}, {"lr", f({1})}}, Code::kInvalidNet,
                   {"cannot run in place"});
  ExpectBuildError({Op("Adam", {"w", "g", "m", "v", "lr", "it"}, {"w", "m", "v"}, {FloatArg("beta1", 1.0)})},
                   adam_feeds, Code::kInvalidArgument, {"beta1"});
  ExpectBuildError({Op("Adam", {"w", "g", "m", "v", "lr", "it"}, {"w", "m", "v"}, {FloatArg("beta2", -0.1)})},
                   adam_feeds, Code::kInvalidArgument, {"beta2"});
  ExpectBuildError({Op("Adagrad", {"w", "g", "h", "lr"}, {"w", "h"}, {FloatArg("epsilon", -1.0)})},
                   {{"w", f({2})}, {"g", f({2})}, {"h", f({2})}, {"lr", f({1})}}, Code::kInvalidArgument,
                   {"epsilon"});
}

// ---- Iter --------------------------------------------------------------------------

TEST_CASE("Iter increments the counter in place") {
  Feeds feeds = {{"iter", Int64(0)}};
  auto def = std::make_shared<const NetDef>(MakeNet({Op("Iter", {"iter"}, {"iter"})}, feeds));
  auto ws = std::make_shared<Workspace>();
  ws->Feed("iter", feeds[0].second);  // shared with the test: the first run must copy
  Net net(def, ws);
  net.Run();
  CheckInference(*def, feeds, *ws);
  CHECK(ws->GetTensor("iter").dims() == Dims{1});
  CHECK(ws->GetTensor("iter").data<int64_t>()[0] == 1);
  const void* storage = ws->GetTensor("iter").raw_data();
  net.Run();
  CHECK(ws->GetTensor("iter").data<int64_t>()[0] == 2);
  CHECK(ws->GetTensor("iter").raw_data() == storage);
  Tensor held = ws->GetTensor("iter");  // fetched: must keep 2
  net.Run();
  CHECK(held.data<int64_t>()[0] == 2);
  CHECK(ws->GetTensor("iter").data<int64_t>()[0] == 3);
  // The fed tensor is never written either.
  CHECK(feeds[0].second.data<int64_t>()[0] == 0);
}

TEST_CASE("Iter counts from an init net's ConstantFill") {
  auto ws = std::make_shared<Workspace>();
  NetDef init;
  init.ops.push_back(IterInitOp());
  Net(std::make_shared<const NetDef>(init), ws).Run();
  NetDef train;
  train.external_inputs = {"iter"};
  train.ops.push_back(Op("Iter", {"iter"}, {"iter"}));
  Net net(std::make_shared<const NetDef>(train), ws);
  for (int64_t i = 1; i <= 4; ++i) {
    net.Run();
    CHECK(ws->GetTensor("iter").data<int64_t>()[0] == i);
  }
}

TEST_CASE("Iter errors") {
  const OperatorDef iter = Op("Iter", {"iter"}, {"iter"});
  // Declared but never created (no init net).
  ExpectRunError({iter}, {}, Code::kNotFound, {"'iter'"}, {"iter"});
  // An empty tensor.
  ExpectRunError({iter}, {{"iter", Tensor()}}, Code::kNotFound, {"iter 'iter'"});
  ExpectRunAndInferError({iter}, {{"iter", Int32(0)}}, Code::kDType, {"iter 'iter'", "int32"});
  ExpectRunAndInferError({iter}, {{"iter", Make<int64_t>({2}, {0, 0})}}, Code::kShape, {"iter 'iter'", "[2]"});
  ExpectRunError({iter}, {{"iter", Int64(std::numeric_limits<int64_t>::max())}}, Code::kOutOfRange, {"iter 'iter'"});
  ExpectBuildError({Op("Iter", {"iter"}, {"iter2"})}, {{"iter", Int64(0)}}, Code::kInvalidNet, {"in place"});
}

// ---- LearningRate -------------------------------------------------------------------

namespace {

// The learning rate LearningRate computes for an iter blob holding `iter`.
double LrAt(std::vector<Argument> args, int64_t iter, DType want = DType::kFloat32) {
  CAPTURE(iter);
  auto ws = RunOps({Op("LearningRate", {"iter"}, {"lr"}, std::move(args))}, {{"iter", Int64(iter)}});
  const Tensor& lr = ws->GetTensor("lr");
  REQUIRE(lr.dims() == Dims{1});
  REQUIRE(lr.dtype() == want);
  return want == DType::kFloat32 ? static_cast<double>(lr.data<float>()[0]) : lr.data<double>()[0];
}

// Checks the float64 rate (to 1e-14 relative) at each iter value (it = iter - 1).
void CheckSchedule(const std::vector<Argument>& args, const std::vector<std::pair<int64_t, double>>& want) {
  std::vector<Argument> a = args;
  a.push_back(IntArg("dtype", 4));
  for (const auto& point : want) {
    const int64_t iter = point.first;
    const double lr = point.second;
    CAPTURE(iter);
    const double got = LrAt(a, iter, DType::kFloat64);
    CHECK_MESSAGE(std::fabs(got - lr) <= 1e-14 * std::fabs(lr), "got ", got, ", want ", lr);
  }
}

}  // namespace

TEST_CASE("LearningRate policies at fixed iterations") {
  SUBCASE("fixed (default)") {
    CheckSchedule({FloatArg("base_lr", 0.25)}, {{1, 0.25}, {2, 0.25}, {1000, 0.25}});
    CheckSchedule({FloatArg("base_lr", 0.25), StringArg("policy", "fixed"), FloatArg("gamma", 0.5)},
                  {{1, 0.25}, {7, 0.25}});
  }
  SUBCASE("step") {
    CheckSchedule({FloatArg("base_lr", 0.1), StringArg("policy", "step"), FloatArg("gamma", 0.5), IntArg("stepsize", 3)},
                  {{1, 0.1}, {2, 0.1}, {3, 0.1}, {4, 0.05}, {6, 0.05}, {7, 0.025}, {10, 0.0125}});
    // Defaults gamma = 0.1, stepsize = 1.
    CheckSchedule({FloatArg("base_lr", 1.0), StringArg("policy", "step")}, {{1, 1.0}, {2, 0.1}, {4, 1e-3}});
  }
  SUBCASE("exp") {
    CheckSchedule({FloatArg("base_lr", 2.0), StringArg("policy", "exp"), FloatArg("gamma", 0.9)},
                  {{1, 2.0}, {2, 1.8}, {4, 2.0 * 0.729}});
    CheckSchedule({FloatArg("base_lr", 1.0), StringArg("policy", "exp")}, {{3, 0.01}});
  }
  SUBCASE("inv") {
    CheckSchedule({FloatArg("base_lr", 1.0), StringArg("policy", "inv"), FloatArg("gamma", 0.5), FloatArg("power", 2.0)},
                  {{1, 1.0}, {3, 0.25}, {7, 0.0625}});
    // Default power 1, gamma 0.1: it = 10 -> 1 / 2.
    CheckSchedule({FloatArg("base_lr", 3.0), StringArg("policy", "inv")}, {{11, 1.5}});
  }
  SUBCASE("cosine") {
    const double c2 = 0.5 * (1.0 + std::cos(std::numbers::pi * 0.2));
    CheckSchedule({FloatArg("base_lr", 1.0), StringArg("policy", "cosine"), IntArg("max_iter", 10)},
                  {{1, 1.0}, {3, c2}, {6, 0.5}, {11, 0.0}, {16, 0.0}});
    // Default max_iter 1.
    CheckSchedule({FloatArg("base_lr", 4.0), StringArg("policy", "cosine")}, {{1, 4.0}, {2, 0.0}, {5, 0.0}});
  }
  SUBCASE("warmup") {
    CheckSchedule({FloatArg("base_lr", 1.0), IntArg("warmup_iters", 4), FloatArg("warmup_start_factor", 0.2)},
                  {{1, 0.2}, {2, 0.4}, {3, 0.6}, {4, 0.8}, {5, 1.0}, {11, 1.0}});
    // Default start factor 0.1.
    CheckSchedule({FloatArg("base_lr", 2.0), IntArg("warmup_iters", 10)}, {{1, 0.2}, {6, 1.1}, {11, 2.0}});
    // Combined with a schedule: the factor multiplies the scheduled rate.
    CheckSchedule({FloatArg("base_lr", 0.1), StringArg("policy", "step"), IntArg("stepsize", 2),
                   IntArg("warmup_iters", 2), FloatArg("warmup_start_factor", 0.5)},
                  {{1, 0.05}, {2, 0.075}, {3, 0.01}, {4, 0.01}, {5, 0.001}});
    CheckSchedule({FloatArg("base_lr", 1.0), StringArg("policy", "cosine"), IntArg("max_iter", 10),
                   IntArg("warmup_iters", 3), FloatArg("warmup_start_factor", 0.0)},
                  {{1, 0.0}, {2, (1.0 / 3.0) * 0.5 * (1.0 + std::cos(std::numbers::pi * 0.1))}, {6, 0.5}});
  }
}

TEST_CASE("LearningRate writes float32 by default and float64 on request") {
  const std::vector<Argument> args = {FloatArg("base_lr", 0.1), StringArg("policy", "exp"), FloatArg("gamma", 0.3)};
  const double want = 0.1 * std::pow(0.3, 2.0);
  CHECK(LrAt(args, 3) == static_cast<double>(static_cast<float>(want)));
  std::vector<Argument> a32 = args;
  a32.push_back(IntArg("dtype", 1));
  CHECK(LrAt(a32, 3) == static_cast<double>(static_cast<float>(want)));
  std::vector<Argument> a64 = args;
  a64.push_back(IntArg("dtype", 4));
  CHECK(LrAt(a64, 3, DType::kFloat64) == doctest::Approx(want).epsilon(1e-15));
}

TEST_CASE("Iter then LearningRate: the first step sees it = 0") {
  auto ws = std::make_shared<Workspace>();
  NetDef init;
  init.ops.push_back(IterInitOp());
  Net(std::make_shared<const NetDef>(init), ws).Run();
  NetDef train;
  train.external_inputs = {"iter"};
  train.ops.push_back(Op("Iter", {"iter"}, {"iter"}));
  train.ops.push_back(Op("LearningRate", {"iter"}, {"lr"},
                         {FloatArg("base_lr", 0.5), StringArg("policy", "step"), FloatArg("gamma", 0.5),
                          IntArg("stepsize", 2), IntArg("dtype", 4)}));
  Net net(std::make_shared<const NetDef>(train), ws);
  const double want[] = {0.5, 0.5, 0.25, 0.25, 0.125};
  for (double w : want) {
    net.Run();
    CHECK(ws->GetTensor("lr").data<double>()[0] == w);
  }
}

TEST_CASE("LearningRate errors name the argument or blob") {
  Feeds feeds = {{"iter", Int64(1)}};
  auto lr = [](std::vector<Argument> args) { return Op("LearningRate", {"iter"}, {"lr"}, std::move(args)); };
  auto both = [&](std::vector<Argument> args, Code code, std::initializer_list<std::string> needles) {
    ExpectBuildError({lr(args)}, feeds, code, needles);
    ExpectInferError({lr(args)}, feeds, code, needles);
  };
  both({FloatArg("base_lr", 0.1), StringArg("policy", "linear")}, Code::kInvalidArgument, {"policy", "linear"});
  both({FloatArg("base_lr", 0.1), StringArg("policy", "step"), IntArg("stepsize", 0)}, Code::kInvalidArgument,
       {"stepsize"});
  both({FloatArg("base_lr", 0.1), StringArg("policy", "cosine"), IntArg("max_iter", 0)}, Code::kInvalidArgument,
       {"max_iter"});
  both({FloatArg("base_lr", 0.1), IntArg("max_iter", -5)}, Code::kInvalidArgument, {"max_iter"});
  both({FloatArg("base_lr", 0.1), IntArg("warmup_iters", -1)}, Code::kInvalidArgument, {"warmup_iters"});
  both({FloatArg("base_lr", 0.1), FloatArg("warmup_start_factor", -0.5)}, Code::kInvalidArgument,
       {"warmup_start_factor"});
  both({FloatArg("base_lr", 0.1), IntArg("dtype", 6)}, Code::kDType, {"dtype"});
  // The op is named when construction fails.
  ExpectBuildError({lr({FloatArg("base_lr", 0.1), StringArg("policy", "linear")})}, feeds, Code::kInvalidArgument,
                   {"LearningRate"});
  ExpectBuildError({lr({StringArg("policy", "fixed")})}, feeds, Code::kInvalidNet, {"base_lr"});

  const OperatorDef ok = lr({FloatArg("base_lr", 0.1)});
  ExpectRunError({ok}, {{"iter", Int64(0)}}, Code::kOutOfRange, {"iter 'iter'", ">= 1"});
  ExpectRunError({ok}, {}, Code::kNotFound, {"'iter'"}, {"iter"});
  ExpectRunError({ok}, {{"iter", Tensor()}}, Code::kNotFound, {"iter 'iter'"});
  ExpectRunAndInferError({ok}, {{"iter", Int32(1)}}, Code::kDType, {"iter 'iter'", "int32"});
  ExpectRunAndInferError({ok}, {{"iter", Make<int64_t>({3}, {1, 1, 1})}}, Code::kShape, {"iter 'iter'"});
}

// ---- a training step: Iter, LearningRate, MomentumSGD from an init net ------------

TEST_CASE("Iter + LearningRate(step, warmup) + MomentumSGD from zero state over 6 steps") {
  const Dims dims{11};
  const int64_t n = Prod(dims);
  const std::vector<float> w0 = Random<float>(n, 7);
  auto ws = std::make_shared<Workspace>();
  ws->Feed("w", Make<float>(dims, w0));
  NetDef init;
  init.external_inputs = {"w"};
  init.ops.push_back(IterInitOp());
  init.ops.push_back(Op("ConstantFill", {"w"}, {"mom"}, {FloatArg("value", 0.0)}));
  Net(std::make_shared<const NetDef>(init), ws).Run();

  NetDef train;
  train.external_inputs = {"w", "g", "mom", "iter"};
  train.ops.push_back(Op("Iter", {"iter"}, {"iter"}));
  train.ops.push_back(Op("LearningRate", {"iter"}, {"lr"},
                         {FloatArg("base_lr", 0.2), StringArg("policy", "step"), FloatArg("gamma", 0.5),
                          IntArg("stepsize", 2), IntArg("warmup_iters", 2), FloatArg("warmup_start_factor", 0.5)}));
  train.ops.push_back(Op("MomentumSGD", {"w", "g", "mom", "lr"}, {"w", "mom"},
                         {FloatArg("momentum", 0.9), IntArg("nesterov", 1), FloatArg("weight_decay", 0.01)}));
  auto def = std::make_shared<const NetDef>(train);
  Net net(def, ws);

  // it = 0..5: step factor 1, 1, 0.5, 0.5, 0.25, 0.25; warmup 0.5, 0.75.
  const double lrs[] = {0.2 * 0.5, 0.2 * 0.75, 0.1, 0.1, 0.05, 0.05};
  Vec p = ToDouble(w0);
  std::vector<Vec> s = {Vec(static_cast<size_t>(n), 0.0)};
  RefStep ref = RefMomentum(0.9, true, 0.01);
  for (int step = 1; step <= 6; ++step) {
    CAPTURE(step);
    std::vector<float> g = Random<float>(n, 50u + static_cast<uint32_t>(step));
    ws->Feed("g", Make<float>(dims, g));
    net.Run();
    const double lr = static_cast<double>(static_cast<float>(lrs[step - 1]));
    CHECK(static_cast<double>(ws->GetTensor("lr").data<float>()[0]) == lr);
    ref(p, s, ToDouble(g), lr, step);
    CheckTensorClose<float>(ws->GetTensor("w"), p, Tol<float>(), "param");
    CheckTensorClose<float>(ws->GetTensor("mom"), s[0], Tol<float>(), "momentum");
    if (step == 1) {
      Feeds known = {{"w", ws->GetTensor("w")}, {"g", ws->GetTensor("g")}, {"mom", ws->GetTensor("mom")},
                     {"iter", ws->GetTensor("iter")}};
      CheckInference(*def, known, *ws);
    }
  }
}

// ---- registration -------------------------------------------------------------------

// The shared math the CUDA kernels run beside the CPU's (ops/math/optimizer_updates.h):
// Adam's bias corrections by exact repeated squaring instead of pow (the
// same bits on both devices), and the part ranges.
TEST_CASE("PowInt and Adam's coefficients agree with pow; parts cover the elements once") {
  for (double x : {0.9, 0.999, 0.5, 0.0}) {
    for (int64_t t : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}, int64_t{123457}}) {
      CAPTURE(x);
      CAPTURE(t);
      const double want = std::pow(x, static_cast<double>(t));
      // Each squaring doubles the relative error: at most about t ulp.
      CHECK(std::abs(PowInt(x, t) - want) <= 2.3e-16 * static_cast<double>(t + 1) * want + 1e-300);
    }
  }
  const AdamHyper h{0.9, 0.999, 1e-8, 0.01};
  const auto c = MakeAdamCoeffs<double>(h, 0.01, 10, [](double v) { return std::sqrt(v); });
  CHECK(c.step == doctest::Approx(0.01 / (1 - std::pow(0.9, 10))).epsilon(1e-14));
  CHECK(c.rs == doctest::Approx(1 / std::sqrt(1 - std::pow(0.999, 10))).epsilon(1e-14));
  CHECK(c.c1 == 1 - 0.9);
  CHECK(c.wd == 0.01);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{1000}, int64_t{4097}}) {
    for (int64_t parts : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{64}}) {
      int64_t next = 0;
      for (int64_t part = 0; part < parts; ++part) {
        const ElementRange r = PartOfElements(n, part, parts);
        CHECK(r.begin == next);
        CHECK(r.end >= r.begin);
        CHECK((r.begin % 64 == 0 || r.begin == n));
        next = r.end;
      }
      CHECK(next == n);
    }
  }
}

TEST_CASE("optimizer ops are registered for the CPU and not differentiable") {
  for (const char* type : {"Iter", "LearningRate", "SGD", "MomentumSGD", "Adam", "Adagrad"}) {
    CAPTURE(type);
    CHECK(OpSchemaRegistry::Find(type) != nullptr);
    CHECK(OperatorRegistry::Has(DeviceType::kCPU, type));
    CHECK(GradientRegistry::Kind(type) == GradientKind::kNone);
  }
}
