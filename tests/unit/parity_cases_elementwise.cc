// Device parity cases of the elementwise family (device_parity.h): fills,
// activations, broadcasting arithmetic and its reductions, shape ops,
// Transpose and Concat. Every case's tolerance is float rounding unless it
// says why not.
#include "device_parity.h"

namespace dp::parity {
namespace {

using Ints = std::vector<int64_t>;

// A case whose gradient maker is checked by finite differences too.
Case Grad(Case c) {
  c.grad_check = true;
  return c;
}

// The same case with every output written over input 0 (in place).
Case InPlace(Case c) {
  c.name += "/in place";
  c.op.outputs[0] = c.op.inputs[0];
  return c;
}

void AddConstantFillCases(CaseList& cases) {
  cases.push_back(MakeCase("ConstantFill/shape", MakeOperatorDef("ConstantFill", {}, {"Y"},
                                                                 {MakeArg("shape", Ints{3, 5}), MakeArg("value", 2.5)}),
                           {}));
  cases.push_back(MakeCase("ConstantFill/like", MakeOperatorDef("ConstantFill", {"X"}, {"Y"}, {MakeArg("value", -1.0)}),
                           {{{4, 7}}}));
}

// GivenTensorFill's elements reach the device as they are: tolerance 0.
void AddGivenTensorFillCases(CaseList& cases) {
  auto given = [](Ints shape, DType dtype, Argument elements) {
    return MakeOperatorDef("GivenTensorFill", {}, {"Y"},
                           {MakeArg("shape", std::move(shape)), MakeArg("dtype", static_cast<int64_t>(dtype)),
                            std::move(elements)});
  };
  std::vector<double> floats(3 * 37);
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = std::sin(static_cast<double>(i)) * 1e3;
  const Argument values{"values", Argument::Value{floats}};
  const Argument int_values{"int_values",
                            Argument::Value{Ints{int64_t{1} << 40, -7, 0, INT32_MAX, -(int64_t{1} << 62), 3}}};
  cases.push_back(MakeCase("GivenTensorFill/float32", given({3, 37}, DType::kFloat32, values), {}, 0));
  cases.push_back(MakeCase("GivenTensorFill/float64", given({37, 3}, DType::kFloat64, values), {}, 0));
  cases.push_back(MakeCase("GivenTensorFill/int64", given({2, 3}, DType::kInt64, int_values), {}, 0));
  cases.push_back(MakeCase("GivenTensorFill/int32 scalar",
                           given({}, DType::kInt32, Argument{"int_values", Argument::Value{Ints{INT32_MIN}}}), {}, 0));
  cases.push_back(MakeCase("GivenTensorFill/empty",
                           given({0, 5}, DType::kFloat32, Argument{"values", Argument::Value{std::vector<double>{}}}),
                           {}, 0));
}

void AddActivationCases(CaseList& cases) {
  cases.push_back(MakeCase("Relu", MakeOperatorDef("Relu", {"X"}, {"Y"}), {{{13, 17}}}));
  cases.push_back(MakeCase("Relu/in place", MakeOperatorDef("Relu", {"X"}, {"X"}), {{{1000}}}));
  // Y with negatives and zeros' neighbours: dX is dY or 0 exactly.
  const Case relu_grad = MakeCase("ReluGradient", MakeOperatorDef("ReluGradient", {"Y", "dY"}, {"dX"}),
                                  {{{7, 33}}, {{7, 33}}});
  cases.push_back(relu_grad);
  // In place writes dX over dY (the pair the schema allows).
  Case relu_grad_in_place = relu_grad;
  relu_grad_in_place.name += "/in place";
  relu_grad_in_place.op.outputs[0] = "dY";
  cases.push_back(relu_grad_in_place);

  for (const char* type : {"Sigmoid", "Tanh"}) {
    const std::string t = type;
    // Smooth everywhere: the gradient maker (the *Gradient op on Y) is checked.
    const Case forward = MakeCase(t, MakeOperatorDef(t, {"X"}, {"Y"}), {{{9, 31}, DType::kFloat32, Init::kUniform, -3, 3}});
    cases.push_back(Grad(forward));
    cases.push_back(InPlace(forward));
    // Saturated arguments: the stable logistic never overflows exp.
    cases.push_back(MakeCase(t + "/saturated", MakeOperatorDef(t, {"X"}, {"Y"}),
                             {{{257}, DType::kFloat32, Init::kUniform, -90, 90}}));
    const std::string g = t + "Gradient";
    const Case gradient = MakeCase(g, MakeOperatorDef(g, {"Y", "dY"}, {"dX"}),
                                   {{{5, 67}, DType::kFloat32, Init::kUniform, 0, 1}, {{5, 67}}});
    cases.push_back(gradient);
    Case gradient_in_place = gradient;
    gradient_in_place.name += "/in place";
    gradient_in_place.op.outputs[0] = "dY";
    cases.push_back(gradient_in_place);
  }
}

void AddClipCases(CaseList& cases) {
  // ReLU6 over values on both sides of both bounds. No grad_check: elements
  // within the device check's step (1e-2) of a bound would meet the kinks;
  // test_grad_ops checks the maker away from them.
  const std::vector<Argument> relu6 = {MakeArg("min", 0.0), MakeArg("max", 6.0)};
  cases.push_back(MakeCase("Clip/relu6", MakeOperatorDef("Clip", {"X"}, {"Y"}, relu6),
                           {{{11, 23}, DType::kFloat32, Init::kUniform, -3, 9}}));
  cases.push_back(InPlace(MakeCase("Clip/relu6", MakeOperatorDef("Clip", {"X"}, {"Y"}, relu6),
                                   {{{1000}, DType::kFloat32, Init::kUniform, -3, 9}})));
  cases.push_back(MakeCase("Clip/min only", MakeOperatorDef("Clip", {"X"}, {"Y"}, {MakeArg("min", -0.25)}), {{{257}}}));
  cases.push_back(MakeCase("Clip/max only", MakeOperatorDef("Clip", {"X"}, {"Y"}, {MakeArg("max", 0.1)}), {{{257}}}));
  cases.push_back(MakeCase("Clip/no bounds", MakeOperatorDef("Clip", {"X"}, {"Y"}), {{{5, 9}}}));
  // Y inside and outside (-0.5, 0.5), then every Y exactly at a bound.
  const Case gradient = MakeCase(
      "ClipGradient",
      MakeOperatorDef("ClipGradient", {"Y", "dY"}, {"dX"}, {MakeArg("min", -0.5), MakeArg("max", 0.5)}),
      {{{7, 33}}, {{7, 33}}});
  cases.push_back(gradient);
  Case in_place = gradient;
  in_place.name += "/in place";
  in_place.op.outputs[0] = "dY";
  cases.push_back(in_place);
  cases.push_back(MakeCase("ClipGradient/at the bound",
                           MakeOperatorDef("ClipGradient", {"Y", "dY"}, {"dX"}, {MakeArg("max", 0.5)}),
                           {Constant({65}, 0.5), {{65}}}));
}

void AddArithmeticCases(CaseList& cases) {
  // Shapes of A and B that broadcast: same, row, column, both ways, scalar,
  // leading dims added, an empty batch.
  struct Shapes {
    const char* name;
    Dims a, b;
  };
  const Shapes shapes[] = {
      {"", {6, 9}, {6, 9}},
      {"/row", {6, 9}, {9}},
      {"/column", {7, 5}, {7, 1}},
      {"/both ways", {4, 1, 5}, {3, 1}},
      {"/scalar", {3, 11}, {}},
      {"/leading", {1, 9}, {2, 3, 9}},
      {"/inner", {2, 3, 4, 5}, {3, 1, 1}},
  };
  for (const char* type : {"Add", "Sub", "Mul", "Div"}) {
    const std::string t = type;
    const bool div = t == "Div";
    for (const Shapes& s : shapes) {
      // Div's B stays away from 0, so its finite differences stay smooth.
      const InputSpec b = div ? InputSpec{s.b, DType::kFloat32, Init::kUniform, 0.5, 2.0} : InputSpec{s.b};
      cases.push_back(Grad(MakeCase(t + s.name, MakeOperatorDef(t, {"A", "B"}, {"C"}), {{s.a}, b})));
    }
    cases.push_back(MakeCase(t + "/empty", MakeOperatorDef(t, {"A", "B"}, {"C"}), {{{0, 5}}, {{5}}}));
    // In place over A when A is C's shape, over B when B is, and over A
    // when A grows (the kernel holds A while C takes fresh memory).
    cases.push_back(MakeCase(t + "/in place A", MakeOperatorDef(t, {"A", "B"}, {"A"}),
                             {{{5, 13}}, {{13}, DType::kFloat32, Init::kUniform, 0.5, 2.0}}));
    cases.push_back(MakeCase(t + "/in place B", MakeOperatorDef(t, {"A", "B"}, {"B"}),
                             {{{13}}, {{5, 13}, DType::kFloat32, Init::kUniform, 0.5, 2.0}}));
    cases.push_back(MakeCase(t + "/in place growing", MakeOperatorDef(t, {"A", "B"}, {"A"}),
                             {{{1, 13}}, {{5, 13}, DType::kFloat32, Init::kUniform, 0.5, 2.0}}));
  }

  cases.push_back(MakeCase("Sum/one input", MakeOperatorDef("Sum", {"X"}, {"Y"}), {{{3, 7}}}));
  cases.push_back(Grad(MakeCase("Sum", MakeOperatorDef("Sum", {"X0", "X1", "X2"}, {"Y"}), {{{4, 9}}, {{4, 9}}, {{4, 9}}})));
  cases.push_back(MakeCase("Sum/in place", MakeOperatorDef("Sum", {"X0", "X1", "X2", "X3"}, {"X0"}),
                           {{{1001}}, {{1001}}, {{1001}}, {{1001}}}));
  cases.push_back(Grad(MakeCase("Scale", MakeOperatorDef("Scale", {"X"}, {"Y"}, {MakeArg("scale", -0.75)}), {{{5, 11}}})));
  cases.push_back(MakeCase("Scale/in place", MakeOperatorDef("Scale", {"X"}, {"X"}, {MakeArg("scale", 3.0)}), {{{77}}}));

  // SumReduceLike: the outer dims (a bias), outer and inner (a conv bias),
  // everything (a scalar), long sums (one block per output), many short
  // ones (one thread per output), the same shape (shared, no kernel), empty X.
  struct Reduce {
    const char* name;
    Dims x, like;
    double tolerance;
  };
  // Sums of n uniform(-1, 1) terms in another order: rounding grows ~sqrt(n).
  const Reduce reduces[] = {
      {"", {8, 6}, {6}, 1e-5},
      {"/outer and inner", {4, 3, 5}, {3, 1}, 1e-5},
      {"/to a scalar", {33, 65}, {}, 1e-4},
      {"/long", {1000, 7}, {1, 7}, 1e-4},
      {"/long inner", {3, 5000}, {3, 1}, 1e-4},
      {"/many outputs", {3, 70000}, {70000}, 1e-5},
      {"/same shape", {4, 5}, {4, 5}, 1e-5},
      {"/empty", {0, 6}, {6}, 1e-5},
  };
  for (const Reduce& r : reduces)
    cases.push_back(MakeCase("SumReduceLike" + std::string(r.name),
                             MakeOperatorDef("SumReduceLike", {"X", "like"}, {"Y"}), {{r.x}, {r.like}}, r.tolerance));
}

void AddShapeCases(CaseList& cases) {
  cases.push_back(Grad(MakeCase("Reshape", MakeOperatorDef("Reshape", {"X"}, {"Y"}, {MakeArg("shape", Ints{3, -1})}),
                                {{{4, 6}}})));
  // old_shape is a host tensor on every device; the gradient reads it there.
  cases.push_back(Grad(MakeCase("Reshape/old shape",
                                MakeOperatorDef("Reshape", {"X"}, {"Y", "old_shape"}, {MakeArg("shape", Ints{0, 2, -1})}),
                                {{{4, 6}}})));
  // The new shape as a host tensor ([-1]: flatten).
  cases.push_back(MakeCase("Reshape/shape input", MakeOperatorDef("Reshape", {"X", "shape"}, {"Y"}),
                           {{{4, 6}}, {{1}, DType::kInt64, Init::kConstant, -1, -1, true}}));
  cases.push_back(MakeCase("Reshape/in place", MakeOperatorDef("Reshape", {"X"}, {"X"}, {MakeArg("shape", Ints{-1})}),
                           {{{2, 3, 4}}}));
  cases.push_back(MakeCase("ReshapeLike", MakeOperatorDef("ReshapeLike", {"X", "like"}, {"Y"}), {{{4, 6}}, {{2, 12}}}));
  cases.push_back(Grad(MakeCase("Flatten", MakeOperatorDef("Flatten", {"X"}, {"Y"}, {MakeArg("axis", 2)}),
                                {{{2, 3, 4, 5}}})));
  cases.push_back(Grad(MakeCase("Alias", MakeOperatorDef("Alias", {"X"}, {"Y"}), {{{3, 4}}})));
  cases.push_back(MakeCase("StopGradient", MakeOperatorDef("StopGradient", {"X"}, {"Y"}), {{{3, 4}}}));
  cases.push_back(MakeCase("MakeWritable", MakeOperatorDef("MakeWritable", {"X", "Y"}, {"X", "Y"}), {{{5, 3}}, {{7}}}));

  cases.push_back(Grad(MakeCase("Transpose", MakeOperatorDef("Transpose", {"X"}, {"Y"}), {{{5, 7}}})));
  cases.push_back(Grad(MakeCase("Transpose/axes", MakeOperatorDef("Transpose", {"X"}, {"Y"}, {MakeArg("axes", Ints{0, 2, 1})}),
                                {{{3, 5, 7}}})));
  // NCHW -> NHWC and back, with merged dims (H and W move together).
  cases.push_back(MakeCase("Transpose/nhwc", MakeOperatorDef("Transpose", {"X"}, {"Y"}, {MakeArg("axes", Ints{0, 2, 3, 1})}),
                           {{{2, 3, 5, 9}}}));
  cases.push_back(MakeCase("Transpose/negative axes",
                           MakeOperatorDef("Transpose", {"X"}, {"Y"}, {MakeArg("axes", Ints{-1, 0, -2})}),
                           {{{4, 1, 6}}}));
  cases.push_back(MakeCase("Transpose/int64", MakeOperatorDef("Transpose", {"X"}, {"Y"}),
                           {{{6, 35}, DType::kInt64, Init::kIota}}));
  cases.push_back(MakeCase("Transpose/empty", MakeOperatorDef("Transpose", {"X"}, {"Y"}), {{{0, 4}}}));
}

void AddConcatCases(CaseList& cases) {
  cases.push_back(Grad(MakeCase("Concat", MakeOperatorDef("Concat", {"X0", "X1", "X2"}, {"Y"}),
                                {{{4, 3, 5}}, {{4, 1, 5}}, {{4, 6, 5}}})));
  cases.push_back(Grad(MakeCase("Concat/axis 0", MakeOperatorDef("Concat", {"X0", "X1"}, {"Y"}, {MakeArg("axis", 0)}),
                                {{{2, 7}}, {{5, 7}}})));
  cases.push_back(MakeCase("Concat/last axis and split info",
                           MakeOperatorDef("Concat", {"X0", "X1", "X2"}, {"Y", "split_info"}, {MakeArg("axis", -1)}),
                           {{{3, 2}}, {{3, 0}}, {{3, 9}}}));
  cases.push_back(MakeCase("Concat/int32", MakeOperatorDef("Concat", {"X0", "X1"}, {"Y"}),
                           {{{5, 4}, DType::kInt32, Init::kLabels, 0, 100}, {{5, 3}, DType::kInt32, Init::kLabels, 0, 100}}));
  // The split alone, for some of the inputs only.
  cases.push_back(MakeCase("ConcatGradient",
                           MakeOperatorDef("ConcatGradient", {"dY", "X0", "X1", "X2"}, {"dX2", "dX0"},
                                           {MakeArg("grad_indices", Ints{2, 0})}),
                           {{{4, 10, 3}}, {{4, 3, 3}}, {{4, 2, 3}}, {{4, 5, 3}}}));
}

DP_PARITY_CASES(ElementwiseCases) {
  CaseList cases;
  AddConstantFillCases(cases);
  AddGivenTensorFillCases(cases);
  AddActivationCases(cases);
  AddClipCases(cases);
  AddArithmeticCases(cases);
  AddShapeCases(cases);
  AddConcatCases(cases);
  return cases;
}

}  // namespace
}  // namespace dp::parity
