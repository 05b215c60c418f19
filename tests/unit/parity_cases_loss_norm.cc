// Device parity cases of the loss_norm family (device_parity.h).
#include "device_parity.h"

namespace dp::parity {
namespace {

DP_PARITY_CASES(LossNormCases) {
  CaseList cases;
  return cases;
}

}  // namespace
}  // namespace dp::parity
