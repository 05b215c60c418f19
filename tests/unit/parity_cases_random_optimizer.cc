// Device parity cases of the random_optimizer family (device_parity.h).
#include "device_parity.h"

namespace dp::parity {
namespace {

DP_PARITY_CASES(RandomOptimizerCases) {
  CaseList cases;
  return cases;
}

}  // namespace
}  // namespace dp::parity
