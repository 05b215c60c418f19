// Compiled for each GPU test executable with DP_TEST_NEEDS_GPUS=N (the
// number of CUDA devices its cases need); unit/gpu_main.cc reads it.
#include "gpus_needed.h"

#ifndef DP_TEST_NEEDS_GPUS
#error "compile gpus_needed.cc with -DDP_TEST_NEEDS_GPUS=<number of CUDA devices the tests need>"
#endif

namespace dp_test {
const int kGpusNeeded = DP_TEST_NEEDS_GPUS;
}  // namespace dp_test
