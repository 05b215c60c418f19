// Device parity cases of the random_optimizer family (device_parity.h).
//
// Fills and dropout are exact (tolerance 0): both devices draw Philox's
// numbers for (seed, counter, index) with exactly rounded arithmetic
// (core/philox.h). The optimizer updates run the same formulas
// (ops/math/optimizer_updates.h), but nvcc fuses a * b + c into an FMA where
// the CPU rounds twice: a few float32 ulp per step, so 1e-6.
//
// The part/parts updates are not here: on the CPU, the harness's fed inputs
// are caller memory, which a partial update refuses (MakeWritable first);
// both devices take the part's range from PartOfElements, which
// test_optimizers covers.
#include "device_parity.h"

namespace dp::parity {
namespace {

constexpr double kExact = 0;
constexpr double kUpdateTolerance = 1e-6;

// The learning rate and the iteration: [1] tensors on the op's device.
InputSpec Lr(double value) { return Constant({1}, value); }
InputSpec Iter(int64_t value) { return Constant({1}, static_cast<double>(value), DType::kInt64); }
InputSpec Positive(Dims dims) { return InputSpec{std::move(dims), DType::kFloat32, Init::kUniform, 0.0, 1.0}; }

void AddRandomFillCases(CaseList& cases) {
  using V = std::vector<int64_t>;
  cases.push_back(MakeCase("UniformFill/shape",
                           MakeOperatorDef("UniformFill", {}, {"Y"},
                                           {MakeArg("shape", V{13, 7}), MakeArg("min", -2.0), MakeArg("max", 3.0),
                                            MakeArg("seed", int64_t{11})}),
                           {}, kExact));
  cases.push_back(MakeCase("UniformFill/like, seed from the name",
                           MakeOperatorDef("UniformFill", {"X"}, {"Y"}), {{{5, 9}}}, kExact));
  cases.push_back(MakeCase("UniformFill/empty",
                           MakeOperatorDef("UniformFill", {}, {"Y"}, {MakeArg("shape", V{0, 4})}), {}, kExact));
  cases.push_back(MakeCase("GaussianFill/odd size",
                           MakeOperatorDef("GaussianFill", {}, {"Y"},
                                           {MakeArg("shape", V{1001}), MakeArg("mean", 0.5), MakeArg("std", 2.0),
                                            MakeArg("seed", int64_t{-5})}),
                           {}, kExact));
  cases.push_back(MakeCase("GaussianFill/like", MakeOperatorDef("GaussianFill", {"X"}, {"Y"}), {{{3, 4, 5}}}, kExact));
  cases.push_back(MakeCase("XavierFill/conv filter",
                           MakeOperatorDef("XavierFill", {}, {"W"},
                                           {MakeArg("shape", V{16, 3, 3, 3}), MakeArg("seed", int64_t{3})}),
                           {}, kExact));
  cases.push_back(MakeCase("XavierFill/like", MakeOperatorDef("XavierFill", {"X"}, {"W"}), {{{10, 7}}}, kExact));
}

void AddDropoutCases(CaseList& cases) {
  auto args = [](double ratio) {
    return std::vector<Argument>{MakeArg("ratio", ratio), MakeArg("seed", int64_t{2024})};
  };
  // 4k + 1 elements: the last Philox block serves one.
  // With a counter the mask is the same on every run: Y is linear in X.
  Case counted = MakeCase("Dropout/counter", MakeOperatorDef("Dropout", {"X", "iter"}, {"Y", "mask"}, args(0.3)),
                          {{{17, 13}}, Iter(41)}, kExact);
  counted.grad_check = true;
  cases.push_back(counted);
  cases.push_back(MakeCase("Dropout/counter, in place",
                           MakeOperatorDef("Dropout", {"X", "iter"}, {"X", "mask"}, args(0.75)),
                           {{{1025}}, Iter(int64_t{1} << 33)}, kExact));
  cases.push_back(MakeCase("Dropout/own run count",
                           MakeOperatorDef("Dropout", {"X"}, {"Y", "mask"}, args(0.5)), {{{6, 7}}}, kExact));
  Case test_mode = MakeCase("Dropout/is_test",
                            MakeOperatorDef("Dropout", {"X"}, {"Y", "mask"},
                                            {MakeArg("ratio", 0.5), MakeArg("is_test", int64_t{1})}),
                            {{{4, 5}}}, kExact);
  test_mode.grad_check = true;
  cases.push_back(test_mode);
  cases.push_back(MakeCase("Dropout/ratio 0",
                           MakeOperatorDef("Dropout", {"X"}, {"Y", "mask"}, args(0.0)), {{{9}}}, kExact));
  InputSpec mask{{11, 3}, DType::kUInt8, Init::kLabels, 0, 2};
  cases.push_back(MakeCase("DropoutGradient",
                           MakeOperatorDef("DropoutGradient", {"dY", "mask"}, {"dX"}, {MakeArg("ratio", 0.3)}),
                           {{{11, 3}}, mask}, kExact));
  cases.push_back(MakeCase("DropoutGradient/in place",
                           MakeOperatorDef("DropoutGradient", {"dY", "mask"}, {"dY"}, {MakeArg("ratio", 0.6)}),
                           {{{11, 3}}, mask}, kExact));
  cases.push_back(MakeCase("DropoutGradient/is_test",
                           MakeOperatorDef("DropoutGradient", {"dY"}, {"dX"},
                                           {MakeArg("ratio", 0.3), MakeArg("is_test", int64_t{1})}),
                           {{{7, 2}}}, kExact));
}

// Param, gradient(s) and states of an update, 4k + 3 elements (a vector
// loop's tail on the CPU).
const Dims kParam{23, 13};

void AddOptimizerCases(CaseList& cases) {
  const Argument wd = MakeArg("weight_decay", 0.01);
  cases.push_back(MakeCase("SGD", MakeOperatorDef("SGD", {"P", "G", "lr"}, {"P"}), {{kParam}, {kParam}, Lr(0.1)},
                           kUpdateTolerance));
  cases.push_back(MakeCase("SGD/weight decay, two gradients",
                           MakeOperatorDef("SGD", {"P", "G", "lr", "G1"}, {"P"}, {wd}),
                           {{kParam}, {kParam}, Lr(0.1), {kParam}}, kUpdateTolerance));
  cases.push_back(MakeCase("SGD/four gradients",
                           MakeOperatorDef("SGD", {"P", "G", "lr", "G1", "G2", "G3"}, {"P"}),
                           {{kParam}, {kParam}, Lr(0.05), {kParam}, {kParam}, {kParam}}, kUpdateTolerance));
  cases.push_back(MakeCase("SGD/empty", MakeOperatorDef("SGD", {"P", "G", "lr"}, {"P"}), {{{0, 3}}, {{0, 3}}, Lr(0.1)},
                           kExact));
  cases.push_back(
      MakeCase("MomentumSGD",
               MakeOperatorDef("MomentumSGD", {"P", "G", "M", "lr"}, {"P", "M"}, {MakeArg("momentum", 0.8)}),
               {{kParam}, {kParam}, {kParam}, Lr(0.1)}, kUpdateTolerance));
  cases.push_back(MakeCase("MomentumSGD/nesterov, weight decay, three gradients",
                           MakeOperatorDef("MomentumSGD", {"P", "G", "M", "lr", "G1", "G2"}, {"P", "M"},
                                           {MakeArg("nesterov", int64_t{1}), wd}),
                           {{kParam}, {kParam}, {kParam}, Lr(0.1), {kParam}, {kParam}}, kUpdateTolerance));
  cases.push_back(MakeCase("Adam",
                           MakeOperatorDef("Adam", {"P", "G", "m", "v", "lr", "iter"}, {"P", "m", "v"}),
                           {{kParam}, {kParam}, {kParam}, Positive(kParam), Lr(0.01), Iter(1)}, kUpdateTolerance));
  cases.push_back(MakeCase("Adam/step 1000, weight decay, two gradients",
                           MakeOperatorDef("Adam", {"P", "G", "m", "v", "lr", "iter", "G1"}, {"P", "m", "v"},
                                           {MakeArg("beta1", 0.8), MakeArg("beta2", 0.99), MakeArg("epsilon", 1e-6),
                                            wd}),
                           {{kParam}, {kParam}, {kParam}, Positive(kParam), Lr(0.001), Iter(1000), {kParam}},
                           kUpdateTolerance));
  cases.push_back(MakeCase("Adagrad",
                           MakeOperatorDef("Adagrad", {"P", "G", "h", "lr"}, {"P", "h"}),
                           {{kParam}, {kParam}, Positive(kParam), Lr(0.1)}, kUpdateTolerance));
  cases.push_back(MakeCase("Adagrad/decay, weight decay, two gradients",
                           MakeOperatorDef("Adagrad", {"P", "G", "h", "lr", "G1"}, {"P", "h"},
                                           {MakeArg("decay", 0.9), MakeArg("epsilon", 1e-5), wd}),
                           {{kParam}, {kParam}, Positive(kParam), Lr(0.1), {kParam}}, kUpdateTolerance));
  // The step counter and the learning rate (a step on one GPU keeps them
  // there): every schedule, warmup, float64; the CUDA kernel shares the
  // CPU's formula (ops/math/learning_rate.h), in double on both.
  cases.push_back(MakeCase("Iter", MakeOperatorDef("Iter", {"iter"}, {"iter"}), {Iter(41)}, kExact));
  auto lr_case = [&](const std::string& what, int64_t iter, std::vector<Argument> args) {
    args.push_back(MakeArg("base_lr", 0.25));
    cases.push_back(MakeCase("LearningRate/" + what, MakeOperatorDef("LearningRate", {"iter"}, {"lr"}, args),
                             {Iter(iter)}, 1e-7));
  };
  lr_case("fixed", 1, {});
  lr_case("step", 8, {MakeArg("policy", "step"), MakeArg("gamma", 0.5), MakeArg("stepsize", int64_t{3})});
  lr_case("exp", 20, {MakeArg("policy", "exp"), MakeArg("gamma", 0.97)});
  lr_case("inv", 100, {MakeArg("policy", "inv"), MakeArg("gamma", 0.01), MakeArg("power", 0.75)});
  lr_case("cosine past max_iter, float64", 700,
          {MakeArg("policy", "cosine"), MakeArg("max_iter", int64_t{500}), MakeArg("dtype", int64_t{4})});
  lr_case("cosine in warmup", 4,
          {MakeArg("policy", "cosine"), MakeArg("max_iter", int64_t{50}), MakeArg("warmup_iters", int64_t{10}),
           MakeArg("warmup_start_factor", 0.2)});
  // Dynamic loss scaling: the gradients unscaled (a power of two: exact),
  // an overflow found; the gate's rate (NaN after one); the scale's update.
  const double inf = std::numeric_limits<double>::infinity();
  cases.push_back(MakeCase("UnscaleGradients",
                           MakeOperatorDef("UnscaleGradients", {"S", "F", "G0", "G1"}, {"F", "G0", "G1"}),
                           {Constant({}, 1024.0), Constant({}, 7.0), {{3, 4100}}, {{5}}}, kExact));
  Case overflow = MakeCase("UnscaleGradients/an overflow",
                           MakeOperatorDef("UnscaleGradients", {"S", "F", "G0", "G1"}, {"F", "G0", "G1"}),
                           {Constant({}, 65536.0), Constant({}, 0.0), {kParam}, Constant({9}, inf)}, kExact);
  overflow.outputs = {0, 1};  // found_inf and the finite gradient (the other stays infinite)
  cases.push_back(overflow);
  // A shard of each gradient (part 1 of 3: elements 1408..2815 of 4100, none
  // of 5); an infinite gradient outside the part is not found.
  const std::vector<Argument> part_of_3{MakeArg("part", int64_t{1}), MakeArg("parts", int64_t{3})};
  cases.push_back(MakeCase("UnscaleGradients/part 1 of 3",
                           MakeOperatorDef("UnscaleGradients", {"S", "F", "G0", "G1"}, {"F", "G0", "G1"}, part_of_3),
                           {Constant({}, 1024.0), Constant({}, 7.0), {{3, 4100}}, {{5}}}, kExact));
  Case outside = MakeCase("UnscaleGradients/an overflow outside the part",
                          MakeOperatorDef("UnscaleGradients", {"S", "F", "G0", "G1"}, {"F", "G0", "G1"}, part_of_3),
                          {Constant({}, 65536.0), Constant({}, 1.0), {kParam}, Constant({9}, inf)}, kExact);
  outside.outputs = {0, 1};
  cases.push_back(outside);
  // (The gate's NaN after an overflow is not finite, which the harness
  // requires: test_loss_scaling covers it on the CPU, test_train_parity_gpu
  // the skipped step on a GPU.)
  cases.push_back(MakeCase("GateLearningRate", MakeOperatorDef("GateLearningRate", {"lr", "F"}, {"lr_step"}),
                           {Lr(0.05), Constant({}, 0.0)}, kExact));
  for (double found : {0.0, 1.0})
    cases.push_back(MakeCase(found != 0 ? "UpdateLossScale/an overflow" : "UpdateLossScale/growth",
                             MakeOperatorDef("UpdateLossScale", {"S", "N", "F"}, {"S", "N"},
                                             {MakeArg("growth_interval", int64_t{3})}),
                             {Constant({}, 4096.0), Constant({}, 2.0), Constant({}, found)}, kExact));
  cases.push_back(MakeCase("BmufUpdate",
                           MakeOperatorDef("BmufUpdate", {"W", "Wg", "D"}, {"W", "Wg", "D"},
                                           {MakeArg("block_lr", 0.9), MakeArg("block_momentum", 0.5)}),
                           {{kParam}, {kParam}, {kParam}}, kUpdateTolerance));
  cases.push_back(MakeCase("BmufUpdate/nesterov",
                           MakeOperatorDef("BmufUpdate", {"W", "Wg", "D"}, {"W", "Wg", "D"},
                                           {MakeArg("block_momentum", 0.75), MakeArg("nesterov", int64_t{1})}),
                           {{{1001}}, {{1001}}, {{1001}}}, kUpdateTolerance));
}

// A multi-tensor update of params of `sizes` (MultiUpdateLayout: params,
// states, gradients, lr, iter); the states positive (Adam's v, Adagrad's h).
Case MultiTensorCase(const std::string& name, const std::string& type, int states, bool iter,
                     const std::vector<int64_t>& sizes, std::vector<Argument> args) {
  std::vector<std::string> in, out;
  std::vector<InputSpec> specs;
  auto add = [&](const std::string& prefix, bool positive, bool output) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      in.push_back(prefix + std::to_string(i));
      if (output) out.push_back(in.back());
      specs.push_back(positive ? Positive({sizes[i]}) : InputSpec{{sizes[i]}});
    }
  };
  add("P", false, true);
  for (int k = 0; k < states; ++k) add("S" + std::to_string(k) + "_", k == states - 1 && type != "MomentumSGD", true);
  add("G", false, false);
  in.push_back("lr");
  specs.push_back(Lr(0.01));
  if (iter) {
    in.push_back("iter");
    specs.push_back(Iter(3));
  }
  return MakeCase(name, MakeOperatorDef("MultiTensor" + type, in, out, std::move(args)), specs, kUpdateTolerance);
}

// Sizes around a chunk (4096 elements: a block each), an empty param, and
// 26 params (two launches of at most 24).
void AddMultiTensorCases(CaseList& cases) {
  const std::vector<int64_t> sizes = {4097, 1, 0, 299, 8192};
  const Argument wd = MakeArg("weight_decay", 0.01);
  cases.push_back(MultiTensorCase("MultiTensorSGD/26 params", "SGD", 0, false, std::vector<int64_t>(26, 37), {wd}));
  cases.push_back(MultiTensorCase("MultiTensorSGD", "SGD", 0, false, sizes, {}));
  cases.push_back(MultiTensorCase("MultiTensorMomentumSGD/nesterov, weight decay", "MomentumSGD", 1, false, sizes,
                                  {MakeArg("nesterov", int64_t{1}), wd}));
  cases.push_back(MultiTensorCase("MultiTensorAdam", "Adam", 2, true, sizes, {MakeArg("beta1", 0.8)}));
  cases.push_back(MultiTensorCase("MultiTensorAdam/weight decay, 26 params", "Adam", 2, true,
                                  std::vector<int64_t>(26, 300), {wd}));
  cases.push_back(MultiTensorCase("MultiTensorAdagrad", "Adagrad", 1, false, sizes, {MakeArg("decay", 0.9), wd}));
}

DP_PARITY_CASES(RandomOptimizerCases) {
  CaseList cases;
  AddRandomFillCases(cases);
  AddDropoutCases(cases);
  AddOptimizerCases(cases);
  AddMultiTensorCases(cases);
  return cases;
}

}  // namespace
}  // namespace dp::parity
