// Device parity cases of the nn family (device_parity.h): FC, Conv, MaxPool,
// AveragePool and their gradient ops. The forward cases with grad_check run
// the gradient makers' ops (FCGradient, ConvGradient, ...) on the device too;
// the gradient ops' own cases cover their other output sets and edge shapes.
//
// Tolerances: 1e-5 where an output sums up to ~100 float products or terms in
// another order than the CPU's BLAS or oneDNN (a few float roundings of
// values below ~10); 2e-5 for the sums over a whole batch's planes (db, dW
// of the two-block cases: ~20k terms). Pooling's outputs are the CPU's own
// arithmetic in the CPU's order (ops/math/pool_geometry.h), except the
// block-per-window reductions of large windows (another order: 1e-5).
#include <string>
#include <utility>
#include <vector>

#include "device_parity.h"

namespace dp::parity {
namespace {

using Args = std::vector<Argument>;

// Distinct inputs (0, 1, 2, ...): no max ties, so finite differences of
// steps below 0.5 (the CUDA check's 1e-2) keep each window's winner. The
// cases stay under 2048 elements, where float32 rounds x +- 1e-2 by under 1%
// of the step.
InputSpec Distinct(Dims dims) {
  InputSpec s{std::move(dims)};
  s.init = Init::kIota;
  return s;
}


void AddFcCases(CaseList& cases) {
  cases.push_back(WithGradCheck(
      MakeCase("FC", MakeOperatorDef("FC", {"X", "W", "b"}, {"Y"}), {{{8, 20}}, {{6, 20}}, {{6}}}, 1e-5)));
  cases.push_back(MakeCase("FC/relu", MakeOperatorDef("FC", {"X", "W", "b"}, {"Y"}, {MakeArg("activation", "relu")}),
                           {{{33, 70}}, {{65, 70}}, {{65}}}, 1e-5));
  cases.push_back(WithGradCheck(MakeCase("FC/axis 2 axis_w 2",
                                         MakeOperatorDef("FC", {"X", "W", "b"}, {"Y"},
                                                         {MakeArg("axis", 2), MakeArg("axis_w", 2)}),
                                         {{{2, 3, 4, 5}}, {{3, 2, 4, 5}}, {{6}}}, 1e-5)));
  cases.push_back(MakeCase("FCGradient", MakeOperatorDef("FCGradient", {"X", "W", "dY"}, {"dW", "db", "dX"}),
                           {{{37, 50}}, {{29, 50}}, {{37, 29}}}, 1e-5));
  cases.push_back(MakeCase("FCGradient/no dX", MakeOperatorDef("FCGradient", {"X", "W", "dY"}, {"dW", "db"}),
                           {{{5, 3}}, {{7, 3}}, {{5, 7}}}, 1e-5));
  // The mask reads Y's sign: uniform Y has no element at the kink.
  cases.push_back(MakeCase("FCGradient/relu",
                           MakeOperatorDef("FCGradient", {"X", "W", "dY", "Y"}, {"dW", "db", "dX"},
                                           {MakeArg("activation", "relu")}),
                           {{{40, 33}}, {{21, 33}}, {{40, 21}}, {{40, 21}}}, 1e-5));
  // Two tiles of the bias gradient's 32 columns, 70 rows over its 16 row groups.
  cases.push_back(MakeCase("FCGradient/relu, two column tiles",
                           MakeOperatorDef("FCGradient", {"X", "W", "dY", "Y"}, {"dW", "db", "dX"},
                                           {MakeArg("activation", "relu")}),
                           {{{70, 9}}, {{65, 9}}, {{70, 65}}, {{70, 65}}}, 1e-5));
  cases.push_back(MakeCase("FC/relu K = 0", MakeOperatorDef("FC", {"X", "W", "b"}, {"Y"}, {MakeArg("activation", "relu")}),
                           {{{4, 0}}, {{3, 0}}, {{3}}}, 1e-6));
  // The CUBLASLT engine (the CPU runs the plain FC): the bias and relu in
  // the GEMM's epilogue; odd N and K (rows of X, W and Y not 16-byte
  // aligned), and K = 0 (the plain path).
  auto lt = [](std::vector<Argument> args) {
    OperatorDef op = MakeOperatorDef("FC", {"X", "W", "b"}, {"Y"}, std::move(args));
    op.engine = "CUBLASLT";
    return op;
  };
  cases.push_back(MakeCase("FC/engine CUBLASLT", lt({}), {{{64, 96}}, {{128, 96}}, {{128}}}, 1e-5));
  cases.push_back(MakeCase("FC/engine CUBLASLT relu", lt({MakeArg("activation", "relu")}),
                           {{{33, 70}}, {{65, 70}}, {{65}}}, 1e-5));
  cases.push_back(MakeCase("FC/engine CUBLASLT odd K relu", lt({MakeArg("activation", "relu")}),
                           {{{33, 71}}, {{65, 71}}, {{65}}}, 1e-5));
  cases.push_back(MakeCase("FC/engine CUBLASLT axis 2 relu",
                           lt({MakeArg("axis", 2), MakeArg("axis_w", 2), MakeArg("activation", "relu")}),
                           {{{2, 3, 4, 5}}, {{3, 2, 4, 5}}, {{6}}}, 1e-5));
  cases.push_back(MakeCase("FC/engine CUBLASLT K = 0", lt({MakeArg("activation", "relu")}),
                           {{{4, 0}}, {{3, 0}}, {{3}}}, 1e-6));
  cases.push_back(MakeCase("FCGradient/M = 0", MakeOperatorDef("FCGradient", {"X", "W", "dY"}, {"dW", "db", "dX"}),
                           {{{0, 4}}, {{3, 4}}, {{0, 3}}}, 1e-5));
  cases.push_back(MakeCase("FCGradient/K = 0", MakeOperatorDef("FCGradient", {"X", "W", "dY"}, {"dW", "db", "dX"}),
                           {{{6, 0}}, {{3, 0}}, {{6, 3}}}, 1e-5));
}

// A Conv case, with bias when `bias`, and the matching ConvGradient case
// (outputs dW, db when biased, dX when `dx`) on dY of Y's dims `y`.
void AddConv(CaseList& cases, const std::string& what, Dims x, Dims w, Dims y, const Args& args, bool bias,
             bool dx, double tolerance, bool grad_check) {
  std::vector<std::string> ins{"X", "W"};
  std::vector<InputSpec> specs{{x}, {w}};
  if (bias) {
    ins.push_back("b");
    specs.push_back({{w[0]}});
  }
  Case fwd = MakeCase("Conv/" + what, MakeOperatorDef("Conv", ins, {"Y"}, args), specs, tolerance);
  fwd.grad_check = grad_check;
  cases.push_back(fwd);
  Args grad_args = args;
  grad_args.push_back(MakeArg("no_bias", bias ? 0 : 1));
  std::vector<std::string> outs{"dW"};
  if (bias) outs.push_back("db");
  if (dx) outs.push_back("dX");
  cases.push_back(MakeCase("ConvGradient/" + what, MakeOperatorDef("ConvGradient", {"X", "W", "dY"}, outs, grad_args),
                           {{x}, {w}, {y}}, tolerance));
}

void AddConvCases(CaseList& cases) {
  AddConv(cases, "3x3 pad 1", {2, 3, 7, 6}, {4, 3, 3, 3}, {2, 4, 7, 6}, {MakeArg("pad", 1)}, true, true, 1e-5, true);
  // OH = (9 + 1 + 2 - 3) / 2 + 1 = 5, OW = (8 + 0 + 1 - 2) / 3 + 1 = 3.
  AddConv(cases, "strides and pads per side, no bias", {3, 2, 9, 8}, {5, 2, 3, 2}, {3, 5, 5, 3},
          {MakeArg("stride_h", 2), MakeArg("stride_w", 3), MakeArg("pad_t", 1), MakeArg("pad_l", 0),
           MakeArg("pad_b", 2), MakeArg("pad_r", 1)},
          false, true, 1e-5, true);
  // Dilated extent 5: OH = (9 + 4 - 5) + 1 = 9, OW = (8 + 2 - 3) / 2 + 1 = 4 (dilation_w 1, pad 1, stride 2).
  AddConv(cases, "dilation per axis", {2, 2, 9, 8}, {3, 2, 3, 3}, {2, 3, 9, 4},
          {MakeArg("dilation_h", 2), MakeArg("dilation_w", 1), MakeArg("pad_t", 2), MakeArg("pad_b", 2),
           MakeArg("pad_l", 1), MakeArg("pad_r", 1), MakeArg("stride_w", 2)},
          true, true, 1e-5, true);
  // OH = (6 + 2 - 3) / 2 + 1 = 3, OW = (5 + 2 - 3) / 2 + 1 = 3.
  AddConv(cases, "2 groups stride 2", {2, 4, 6, 5}, {6, 2, 3, 3}, {2, 6, 3, 3},
          {MakeArg("group", 2), MakeArg("stride", 2), MakeArg("pad", 1)}, true, true, 1e-5, true);
  AddConv(cases, "depthwise dilation 2", {2, 3, 7, 7}, {3, 1, 3, 3}, {2, 3, 7, 7},
          {MakeArg("group", 3), MakeArg("dilation", 2), MakeArg("pad", 2)}, true, true, 1e-5, true);
  AddConv(cases, "1x1", {4, 8, 5, 3}, {16, 8, 1, 1}, {4, 16, 5, 3}, {}, true, false, 1e-5, false);
  AddConv(cases, "kernel the size of X", {3, 2, 4, 5}, {7, 2, 4, 5}, {3, 7, 1, 1}, {MakeArg("kernel_h", 4),
          MakeArg("kernel_w", 5)}, false, true, 1e-5, false);
  // (32 * 5 * 5 + 8) * 32 * 32 = 827392 block elements per image: the 24
  // images are two blocks on CUDA (20 + 4), so dW adds across blocks.
  AddConv(cases, "two image blocks", {24, 32, 32, 32}, {8, 32, 5, 5}, {24, 8, 32, 32}, {MakeArg("pad", 2)}, true,
          true, 2e-5, false);
  AddConv(cases, "empty batch", {0, 3, 5, 5}, {4, 3, 3, 3}, {0, 4, 3, 3}, {}, true, true, 1e-5, false);
  // No input channels: Y is the bias, dW is empty and db sums dY.
  AddConv(cases, "C = 0", {2, 0, 5, 5}, {4, 0, 3, 3}, {2, 4, 3, 3}, {}, true, true, 1e-5, false);
}

// MaxPool / AveragePool on `x` (forward, with grad_check on distinct inputs
// for MaxPool) and the gradient op on dY of Y's dims `y`.
void AddPool(CaseList& cases, const std::string& type, const std::string& what, Dims x, Dims y, const Args& args,
             double tolerance) {
  const bool max = type == "MaxPool";
  Case fwd = MakeCase(type + "/" + what, MakeOperatorDef(type, {"X"}, {"Y"}, args),
                      {max ? Distinct(x) : InputSpec{x}}, tolerance);
  fwd.grad_check = true;
  cases.push_back(fwd);
  if (max) {
    cases.push_back(MakeCase("MaxPoolGradient/" + what,
                             MakeOperatorDef("MaxPoolGradient", {"X", "Y", "dY"}, {"dX"}, args), {{x}, {y}, {y}},
                             tolerance));
    // Every window a tie: dY goes to each window's first element, as on the CPU.
    cases.push_back(MakeCase("MaxPoolGradient/" + what + ", ties",
                             MakeOperatorDef("MaxPoolGradient", {"X", "Y", "dY"}, {"dX"}, args),
                             {Constant(x, 0.5), {y}, {y}}, tolerance));
  } else {
    cases.push_back(MakeCase("AveragePoolGradient/" + what,
                             MakeOperatorDef("AveragePoolGradient", {"X", "dY"}, {"dX"}, args), {{x}, {y}},
                             tolerance));
  }
}

void AddPoolCases(CaseList& cases) {
  for (const std::string type : {"MaxPool", "AveragePool"}) {
    // OH = (9 + 2 - 3) / 2 + 1 = 5, OW = (8 + 2 - 3) / 2 + 1 = 4: overlapping, clipped windows.
    AddPool(cases, type, "3x3 stride 2 pad 1", {2, 3, 9, 8}, {2, 3, 5, 4},
            {MakeArg("kernel", 3), MakeArg("stride", 2), MakeArg("pad", 1)}, 1e-6);
    AddPool(cases, type, "2x2 stride 2, odd sizes", {2, 2, 7, 5}, {2, 2, 3, 2},
            {MakeArg("kernel", 2), MakeArg("stride", 2)}, 1e-6);
    // OH = (7 + 1 + 2 - 3) / 1 + 1 = 8, OW = (9 + 0 + 1 - 2) / 2 + 1 = 5.
    AddPool(cases, type, "kernel, stride and pads per side", {1, 2, 7, 9}, {1, 2, 8, 5},
            {MakeArg("kernel_h", 3), MakeArg("kernel_w", 2), MakeArg("stride_h", 1), MakeArg("stride_w", 2),
             MakeArg("pad_t", 1), MakeArg("pad_l", 0), MakeArg("pad_b", 2), MakeArg("pad_r", 1)},
            1e-6);
    AddPool(cases, type, "global", {2, 3, 5, 7}, {2, 3, 1, 1}, {MakeArg("global_pooling", 1)}, 1e-6);
    // Windows of more than 256 elements take a block each on CUDA.
    AddPool(cases, type, "global, a block per window", {1, 3, 20, 21}, {1, 3, 1, 1},
            {MakeArg("global_pooling", 1)}, 1e-5);
    // OH = (23 + 2 - 17) / 3 + 1 = 3, OW = (21 + 2 - 17) / 3 + 1 = 3.
    AddPool(cases, type, "17x17 stride 3 pad 1, a block per window", {1, 2, 23, 21}, {1, 2, 3, 3},
            {MakeArg("kernel", 17), MakeArg("stride", 3), MakeArg("pad", 1)}, 1e-5);
  }
  Args include_pad{MakeArg("kernel", 3), MakeArg("stride", 2), MakeArg("pad", 1), MakeArg("count_include_pad", 1)};
  AddPool(cases, "AveragePool", "count_include_pad", {2, 3, 9, 8}, {2, 3, 5, 4}, include_pad, 1e-6);
  AddPool(cases, "AveragePool", "count_include_pad, a block per window", {1, 2, 23, 21}, {1, 2, 3, 3},
          {MakeArg("kernel", 17), MakeArg("stride", 3), MakeArg("pad", 1), MakeArg("count_include_pad", 1)}, 1e-5);
}

DP_PARITY_CASES(NnCases) {
  CaseList cases;
  AddFcCases(cases);
  AddConvCases(cases);
  AddPoolCases(cases);
  return cases;
}

}  // namespace
}  // namespace dp::parity
