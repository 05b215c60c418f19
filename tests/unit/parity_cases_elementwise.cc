// Device parity cases of the elementwise family (device_parity.h).
#include "device_parity.h"

namespace dp::parity {
namespace {

DP_PARITY_CASES(ElementwiseCases) {
  CaseList cases;
  cases.push_back(MakeCase("ConstantFill/shape", MakeOperatorDef("ConstantFill", {}, {"Y"},
                                                                 {MakeArg("shape", std::vector<int64_t>{3, 5}),
                                                                  MakeArg("value", 2.5)}),
                           {}));
  cases.push_back(MakeCase("ConstantFill/like", MakeOperatorDef("ConstantFill", {"X"}, {"Y"}, {MakeArg("value", -1.0)}),
                           {{{4, 7}}}));
  Case relu = MakeCase("Relu", MakeOperatorDef("Relu", {"X"}, {"Y"}), {{{13, 17}}});
  cases.push_back(relu);
  cases.push_back(MakeCase("Relu/in place", MakeOperatorDef("Relu", {"X"}, {"X"}), {{{1000}}}));
  Case add = MakeCase("Add", MakeOperatorDef("Add", {"A", "B"}, {"Y"}), {{{6, 9}}, {{6, 9}}});
  add.grad_check = true;
  cases.push_back(add);
  Case scale = MakeCase("Scale", MakeOperatorDef("Scale", {"X"}, {"Y"}, {MakeArg("scale", -0.75)}), {{{5, 11}}});
  scale.grad_check = true;
  cases.push_back(scale);
  return cases;
}

}  // namespace
}  // namespace dp::parity
