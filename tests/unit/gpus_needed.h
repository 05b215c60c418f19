// How many CUDA devices a GPU test executable needs (unit/gpu_main.cc): one
// definition per executable, in unit/gpus_needed.cc.
#pragma once

namespace dp_test {
extern const int kGpusNeeded;
}  // namespace dp_test
