// Device parity cases of the nn family (device_parity.h).
#include "device_parity.h"

namespace dp::parity {
namespace {

DP_PARITY_CASES(NnCases) {
  CaseList cases;
  Case fc = MakeCase("FC", MakeOperatorDef("FC", {"X", "W", "b"}, {"Y"}), {{{8, 20}}, {{6, 20}}, {{6}}}, 1e-5);
  fc.grad_check = true;
  cases.push_back(fc);
  cases.push_back(MakeCase("FC/relu", MakeOperatorDef("FC", {"X", "W", "b"}, {"Y"}, {MakeArg("activation", "relu")}),
                           {{{33, 70}}, {{65, 70}}, {{65}}}, 1e-5));
  return cases;
}

}  // namespace
}  // namespace dp::parity
