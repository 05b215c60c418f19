// The doctest main of the unit-test executables whose every case needs GPUs
// (test_cuda_gpu, test_cuda_collectives_gpu, test_cuda_multi_gpu, ...),
// compiled once into a static library: each executable states the N CUDA
// devices it needs in unit/gpus_needed.cc, compiled for it with
// DP_TEST_NEEDS_GPUS=N (doctest's implementation here takes seconds to
// compile; that file, none). With fewer than N CUDA devices visible
// to dp (a CPU-only build, no driver or GPU, too few GPUs) the executable
// runs nothing: it prints one line with the reason and exits 77, which meson
// reports as SKIP (and tools/test.sh counts as skipped). So a GPU case never
// skips itself: whatever runs, runs for real.
//
// Query-only options (--help, --list-test-cases, --count, ...) go to doctest
// whatever the devices.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "core/device.h"
#include "cuda/cuda_runtime.h"

#include "gpus_needed.h"

namespace {

constexpr int kExitSkip = 77;  // meson's (and automake's) "skipped"

// Why dp sees `found` CUDA devices: what its probe found (module, runtime,
// driver, GPUs).
std::string Reason(int found) {
  if (found > 0) return "";
  return " (" + dp::cuda::Probe().detail + ")";
}

bool QueryOnly(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    // doctest accepts "--x", "-x" and "--dt-x" spellings.
    for (const char* prefix : {"--dt-", "--", "-dt-", "-"})
      if (a.rfind(prefix, 0) == 0) {
        a = a.substr(std::string(prefix).size());
        break;
      }
    a = a.substr(0, a.find('='));
    for (const char* q : {"h", "help", "?", "v", "version", "c", "count", "ltc", "list-test-cases", "lts",
                          "list-test-suites", "lr", "list-reporters"})
      if (a == q) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const int needed = dp_test::kGpusNeeded;
  const int found = dp::DeviceCount(dp::DeviceType::kCUDA);
  if (found < needed && !QueryOnly(argc, argv)) {
    std::printf("skipped: needs %d CUDA device%s, found %d%s\n", needed, needed == 1 ? "" : "s", found,
                Reason(found).c_str());
    return kExitSkip;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
