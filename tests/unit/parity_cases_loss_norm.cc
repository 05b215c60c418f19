// Device parity cases of the loss_norm family (device_parity.h): softmax,
// log-softmax, losses, accuracy, batch norm and the synchronised BN ops'
// per-replica parts. Shapes cover odd row lengths, rows wider than a block
// (1024 threads), 1x1 spatial BN, channels whose values span several
// partial sums, and in-place use.
//
// Tolerances: 1e-5 where the CUDA kernel computes what the CPU does and only
// the order of double sums (or expf's last bit) differs; SoftmaxGradient's
// CPU dot is a float sum, so wide rows round it differently (see there).
// SoftmaxWithLoss has no grad_check: its gradient maker refuses the gradient
// of its softmax output, and the harness weights every output; its gradient
// op has its own cases, and test_grad_ops checks the maker.
#include "device_parity.h"

namespace dp::parity {
namespace {

InputSpec Labels(Dims dims, int64_t classes) {
  return {std::move(dims), DType::kInt32, Init::kLabels, 0, static_cast<double>(classes)};
}
InputSpec Uniform(Dims dims, double lo, double hi) {
  return {std::move(dims), DType::kFloat32, Init::kUniform, lo, hi};
}
// Allreduced statistics [2C + 1] as 0, 1, ..., 2C: per-channel sums c and
// C + c over a count of 2C, a valid mean and positive variance per channel.
InputSpec Stats(int64_t channels) { return {{2 * channels + 1}, DType::kFloat64, Init::kIota}; }

void AddSoftmaxCases(CaseList& cases) {
  cases.push_back(WithGradCheck(MakeCase("Softmax/odd rows", MakeOperatorDef("Softmax", {"X"}, {"Y"}),
                                         {Uniform({7, 13}, -3, 3)})));
  cases.push_back(WithGradCheck(MakeCase("Softmax/rows wider than a block", MakeOperatorDef("Softmax", {"X"}, {"Y"}),
                                         {Uniform({3, 2049}, -5, 5)})));
  cases.push_back(MakeCase("Softmax/axis 2 in place",
                           MakeOperatorDef("Softmax", {"X"}, {"X"}, {MakeArg("axis", int64_t{2})}),
                           {Uniform({2, 3, 5, 3}, -2, 2)}));
  cases.push_back(MakeCase("Softmax/one column", MakeOperatorDef("Softmax", {"X"}, {"Y"}), {Uniform({5, 1}, -1, 1)}));

  // The CPU sums dot(Y, dY) in float, CUDA in double: over 1500 terms of
  // size ~1e-3 float rounding reaches ~1e-7 relative, far below 1e-5.
  cases.push_back(MakeCase("SoftmaxGradient/wide rows", MakeOperatorDef("SoftmaxGradient", {"Y", "dY"}, {"dX"}),
                           {Uniform({6, 1500}, 0, 2e-3), Uniform({6, 1500}, -1, 1)}));
  cases.push_back(MakeCase("SoftmaxGradient/in place",
                           MakeOperatorDef("SoftmaxGradient", {"Y", "dY"}, {"dY"}, {MakeArg("axis", int64_t{-1})}),
                           {Uniform({3, 4, 9}, 0, 0.2), Uniform({3, 4, 9}, -1, 1)}));

  // LogSoftmax: CUDA's row sum adds the exps in another order, so log(sum)
  // may differ in its last bit; the outputs (x - max - log(sum)) carry that
  // absolute error, ~1e-7 against a tolerance of 1e-5 relative to max(1, |y|).
  cases.push_back(WithGradCheck(MakeCase("LogSoftmax/odd rows", MakeOperatorDef("LogSoftmax", {"X"}, {"Y"}),
                                         {Uniform({7, 13}, -3, 3)})));
  cases.push_back(MakeCase("LogSoftmax/rows wider than a block", MakeOperatorDef("LogSoftmax", {"X"}, {"Y"}),
                           {Uniform({3, 2049}, -5, 5)}));
  cases.push_back(MakeCase("LogSoftmax/axis 2 in place",
                           MakeOperatorDef("LogSoftmax", {"X"}, {"X"}, {MakeArg("axis", int64_t{2})}),
                           {Uniform({2, 3, 5, 3}, -2, 2)}));
  cases.push_back(
      MakeCase("LogSoftmax/one column", MakeOperatorDef("LogSoftmax", {"X"}, {"Y"}), {Uniform({5, 1}, -1, 1)}));
  // Logits far apart: every softmax but the max's underflows; the log stays finite.
  cases.push_back(MakeCase("LogSoftmax/large logits",
                           MakeOperatorDef("LogSoftmax", {"X"}, {"Y"}, {MakeArg("axis", int64_t{-1})}),
                           {Uniform({4, 3, 17}, -1e4, 1e4)}));
  // Y as log-probabilities (<= 0); the sum of dY is in double on both devices.
  cases.push_back(MakeCase("LogSoftmaxGradient/wide rows", MakeOperatorDef("LogSoftmaxGradient", {"Y", "dY"}, {"dX"}),
                           {Uniform({6, 1500}, -12, -5), Uniform({6, 1500}, -1, 1)}));
  cases.push_back(MakeCase("LogSoftmaxGradient/in place",
                           MakeOperatorDef("LogSoftmaxGradient", {"Y", "dY"}, {"dY"}, {MakeArg("axis", int64_t{-1})}),
                           {Uniform({3, 4, 9}, -4, 0), Uniform({3, 4, 9}, -1, 1)}));

  cases.push_back(MakeCase("SoftmaxWithLoss/odd rows", MakeOperatorDef("SoftmaxWithLoss", {"X", "L"}, {"P", "loss"}),
                           {Uniform({9, 11}, -4, 4), Labels({9}, 11)}));
  cases.push_back(MakeCase("SoftmaxWithLoss/weighted scaled",
                           MakeOperatorDef("SoftmaxWithLoss", {"X", "L", "W"}, {"P", "loss"}, {MakeArg("scale", 0.5)}),
                           {Uniform({12, 5}, -4, 4), Labels({12, 1}, 5), Uniform({12}, 0.1, 2)}));
  cases.push_back(MakeCase("SoftmaxWithLoss/rows wider than a block",
                           MakeOperatorDef("SoftmaxWithLoss", {"X", "L"}, {"P", "loss"}),
                           {Uniform({4, 3001}, -20, 20), Labels({4, 1}, 3001)}));

  // With its gradient fused (graph/fusion.h): dX from the rows' P, scaled.
  cases.push_back(MakeCase("SoftmaxWithLoss/fused gradient, scaled",
                           MakeOperatorDef("SoftmaxWithLoss", {"X", "L"}, {"P", "loss", "dX"},
                                           {MakeArg("scale", 0.5), MakeArg("grad_seed", 0.125)}),
                           {Uniform({9, 11}, -4, 4), Labels({9}, 11)}));
  cases.push_back(MakeCase("SoftmaxWithLoss/fused gradient, rows wider than a block",
                           MakeOperatorDef("SoftmaxWithLoss", {"X", "L"}, {"P", "loss", "dX"}),
                           {Uniform({4, 3001}, -20, 20), Labels({4, 1}, 3001)}));
  cases.push_back(MakeCase("SoftmaxWithLossGradient",
                           MakeOperatorDef("SoftmaxWithLossGradient", {"P", "L", "dloss"}, {"dX"}),
                           {Uniform({9, 11}, 0, 0.2), Labels({9}, 11), Uniform({}, 0.5, 2)}));
  cases.push_back(MakeCase("SoftmaxWithLossGradient/weighted scaled wide",
                           MakeOperatorDef("SoftmaxWithLossGradient", {"P", "L", "dloss", "W"}, {"dX"},
                                           {MakeArg("scale", 0.25)}),
                           {Uniform({5, 1537}, 0, 1e-3), Labels({5, 1}, 1537), Uniform({}, 0.5, 2),
                            Uniform({5}, 0, 3)}));
}

void AddLossCases(CaseList& cases) {
  // Probabilities away from 0, where -log is smooth enough for differences.
  cases.push_back(WithGradCheck(MakeCase("LabelCrossEntropy", MakeOperatorDef("LabelCrossEntropy", {"X", "L"}, {"Y"}),
                                         {Uniform({8, 7}, 0.3, 1), Labels({8}, 7)}),
                                {0}));
  cases.push_back(MakeCase("LabelCrossEntropy/clamped zeros",
                           MakeOperatorDef("LabelCrossEntropy", {"X", "L"}, {"Y"}),
                           {{{6, 3}, DType::kFloat32, Init::kConstant, 0}, Labels({6, 1}, 3)}));
  cases.push_back(MakeCase("LabelCrossEntropyGradient",
                           MakeOperatorDef("LabelCrossEntropyGradient", {"X", "L", "dY"}, {"dX"}),
                           {Uniform({8, 1029}, 0, 1), Labels({8}, 1029), Uniform({8}, -1, 1)}));

  cases.push_back(WithGradCheck(MakeCase("AveragedLoss", MakeOperatorDef("AveragedLoss", {"X"}, {"loss"}),
                                         {Uniform({3, 5}, -1, 1)})));
  // Spans several partial sums (math::SumPartials).
  cases.push_back(MakeCase("AveragedLoss/many partials", MakeOperatorDef("AveragedLoss", {"X"}, {"loss"}),
                           {Uniform({1000, 77}, 0, 10)}));
  cases.push_back(MakeCase("AveragedLossGradient", MakeOperatorDef("AveragedLossGradient", {"X", "dloss"}, {"dX"}),
                           {Uniform({13, 7}, -1, 1), Uniform({}, -2, 2)}));

  cases.push_back(WithGradCheck(MakeCase("SquaredL2Distance",
                                         MakeOperatorDef("SquaredL2Distance", {"X", "Y"}, {"Z"}),
                                         {Uniform({6, 3, 5}, -1, 1), Uniform({6, 3, 5}, -1, 1)})));
  cases.push_back(MakeCase("SquaredL2Distance/rows wider than a block",
                           MakeOperatorDef("SquaredL2Distance", {"X", "Y"}, {"Z"}),
                           {Uniform({3, 2500}, -1, 1), Uniform({3, 2500}, 0, 2)}));
  cases.push_back(MakeCase("SquaredL2DistanceGradient",
                           MakeOperatorDef("SquaredL2DistanceGradient", {"X", "Y", "dZ"}, {"dX"}),
                           {Uniform({7, 9}, -1, 1), Uniform({7, 9}, -1, 1), Uniform({7}, -1, 1)}));

  cases.push_back(MakeCase("Accuracy/top 1", MakeOperatorDef("Accuracy", {"X", "L"}, {"accuracy"}),
                           {Uniform({33, 10}, 0, 1), Labels({33}, 10)}));
  cases.push_back(MakeCase("Accuracy/top 3 wide",
                           MakeOperatorDef("Accuracy", {"X", "L"}, {"accuracy"}, {MakeArg("top_k", int64_t{3})}),
                           {Uniform({17, 1100}, 0, 1), Labels({17, 1}, 1100)}));
  // Equal scores: ties rank against the label.
  cases.push_back(MakeCase("Accuracy/ties",
                           MakeOperatorDef("Accuracy", {"X", "L"}, {"accuracy"}, {MakeArg("top_k", int64_t{2})}),
                           {{{9, 4}, DType::kFloat32, Init::kConstant, 0.5}, Labels({9}, 4)}));
}

// SpatialBN in training: X, scale, bias, running_mean, running_var.
Case BnTraining(std::string name, Dims x, double lo, double hi, const std::string& y = "Y") {
  const int64_t c = x[1];
  return MakeCase(std::move(name),
                  MakeOperatorDef("SpatialBN", {"X", "scale", "bias", "rm", "rv"}, {y, "rm", "rv", "sm", "sis"},
                                  {MakeArg("epsilon", 1e-4), MakeArg("momentum", 0.8)}),
                  {Uniform(std::move(x), lo, hi), Uniform({c}, 0.5, 1.5), Uniform({c}, -1, 1), Uniform({c}, -1, 1),
                   Uniform({c}, 0.5, 2)});
}

void AddBatchNormCases(CaseList& cases) {
  // The gradient maker's scale and bias gradients (the running statistics,
  // also outputs, get none, so X is checked by the SpatialBNGradient cases).
  cases.push_back(WithGradCheck(BnTraining("SpatialBN/NCHW", {4, 3, 5, 7}, -2, 2), {1, 2}));
  cases.push_back(BnTraining("SpatialBN/1x1 spatial", {8, 6, 1, 1}, -1, 3));
  cases.push_back(BnTraining("SpatialBN/2-D", {10, 5}, -1, 1));
  cases.push_back(BnTraining("SpatialBN/in place", {3, 4, 3, 3}, -1, 1, "X"));
  // A large mean and a small spread over several partial sums per channel:
  // the two-pass statistics keep the variance.
  cases.push_back(BnTraining("SpatialBN/offset data, many partials", {4, 2, 96, 96}, 100, 101));
  cases.push_back(MakeCase("SpatialBN/inference",
                           MakeOperatorDef("SpatialBN", {"X", "scale", "bias", "rm", "rv"}, {"Y"},
                                           {MakeArg("is_test", int64_t{1})}),
                           {Uniform({3, 5, 4, 3}, -2, 2), Uniform({5}, 0.5, 1.5), Uniform({5}, -1, 1),
                            Uniform({5}, -1, 1), Uniform({5}, 0.5, 2)}));

  const std::vector<InputSpec> grad_inputs{Uniform({4, 3, 5, 5}, -2, 2), Uniform({3}, 0.5, 1.5),
                                           Uniform({4, 3, 5, 5}, -1, 1), Uniform({3}, -0.2, 0.2),
                                           Uniform({3}, 0.5, 2)};
  cases.push_back(MakeCase("SpatialBNGradient",
                           MakeOperatorDef("SpatialBNGradient", {"X", "scale", "dY", "sm", "sis"},
                                           {"dX", "dscale", "dbias"}),
                           grad_inputs));
  cases.push_back(MakeCase("SpatialBNGradient/1x1 spatial in place",
                           MakeOperatorDef("SpatialBNGradient", {"X", "scale", "dY", "sm", "sis"},
                                           {"dY", "dscale", "dbias"}),
                           {Uniform({16, 7, 1, 1}, -2, 2), Uniform({7}, 0.5, 1.5), Uniform({16, 7, 1, 1}, -1, 1),
                            Uniform({7}, -0.2, 0.2), Uniform({7}, 0.5, 2)}));

  cases.push_back(MakeCase("SpatialBNStats", MakeOperatorDef("SpatialBNStats", {"X"}, {"stats"}),
                           {Uniform({4, 3, 5, 5}, 10, 12)}));
  cases.push_back(MakeCase("SpatialBNStats/2-D many partials", MakeOperatorDef("SpatialBNStats", {"X"}, {"stats"}),
                           {Uniform({40000, 2}, -1, 1)}));
  cases.push_back(MakeCase("SyncSpatialBN",
                           MakeOperatorDef("SyncSpatialBN", {"X", "scale", "bias", "rm", "rv", "stats"},
                                           {"Y", "rm", "rv", "sm", "sis"}, {MakeArg("momentum", 0.7)}),
                           {Uniform({2, 3, 4, 5}, -1, 1), Uniform({3}, 0.5, 1.5), Uniform({3}, -1, 1),
                            Uniform({3}, -1, 1), Uniform({3}, 0.5, 2), Stats(3)}));
  cases.push_back(MakeCase("SpatialBNGradStats",
                           MakeOperatorDef("SpatialBNGradStats", {"X", "dY", "sm", "sis"},
                                           {"dscale", "dbias", "gstats"}),
                           {grad_inputs[0], grad_inputs[2], grad_inputs[3], grad_inputs[4]}));
  cases.push_back(MakeCase("SyncSpatialBNGradient",
                           MakeOperatorDef("SyncSpatialBNGradient", {"X", "scale", "dY", "sm", "sis", "gstats"},
                                           {"dX"}),
                           {grad_inputs[0], grad_inputs[1], grad_inputs[2], grad_inputs[3], grad_inputs[4], Stats(3)}));
}

DP_PARITY_CASES(LossNormCases) {
  CaseList cases;
  AddSoftmaxCases(cases);
  AddLossCases(cases);
  AddBatchNormCases(cases);
  return cases;
}

}  // namespace
}  // namespace dp::parity
