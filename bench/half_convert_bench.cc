// dp-bench half-convert: the bulk binary16 conversions (core/half_convert.h)
// that compressed fp16 gradients go through, float32 -> binary16 and back,
// per path: the scalar functions' loop, the portable one (SSE2 on x86-64)
// and F16C's where the CPU has it. Interleaved (each repeat runs every
// path once), medians in GB/s of float32 read or written, and the ratio to
// the portable path. In cache (64 KiB) and from memory (16 MiB).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/half_convert.h"
#include "core/half_float.h"

namespace dpbench {
namespace {

void ScalarToHalves(const float* in, dp::Half* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = dp::FloatToHalf(in[i]);
}
void ScalarToFloats(const dp::Half* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = dp::HalfToFloat(in[i]);
}

struct Path {
  const char* name;
  void (*to_halves)(const float*, dp::Half*, int64_t);
  void (*to_floats)(const dp::Half*, float*, int64_t);
};

}  // namespace

int HalfConvertMain(int argc, char** argv) {
  int repeats = 15;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc && ParseInt(argv[i + 1], 1, 10000, &repeats)) {
      ++i;
      continue;
    }
    std::fprintf(stderr, "dp-bench half-convert: unknown option '%s'\n", argv[i]);
    return 2;
  }
  PinToAllowedCpus();
  std::vector<Path> paths = {{"scalar", &ScalarToHalves, &ScalarToFloats},
                             {"portable", &dp::half_convert::FloatsToHalvesPortable,
                              &dp::half_convert::HalvesToFloatsPortable}};
  if (dp::half_convert::F16cAvailable())
    paths.push_back({"f16c", &dp::half_convert::FloatsToHalvesF16c, &dp::half_convert::HalvesToFloatsF16c});
  std::printf("# dp-bench half-convert: medians of %d interleaved repeats, GB/s of float32 (x: / portable)\n",
              repeats);
  std::printf("%-10s %-9s %14s %14s\n", "floats", "path", "to binary16", "to float32");
  for (const int64_t n : {int64_t{16} << 10, int64_t{4} << 20}) {
    std::mt19937 gen(7);
    std::normal_distribution<float> dist(0.0f, 1e-2f);  // gradient-like values, subnormal halves among them
    std::vector<float> f(static_cast<size_t>(n)), back(static_cast<size_t>(n));
    for (float& x : f) x = dist(gen);
    std::vector<dp::Half> h(static_cast<size_t>(n));
    const int rounds = n < (int64_t{1} << 20) ? 200 : 4;  // each sample ~1 ms or more
    std::vector<std::vector<double>> to_h(paths.size()), to_f(paths.size());
    for (int r = 0; r < repeats; ++r)
      for (size_t p = 0; p < paths.size(); ++p) {
        auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < rounds; ++k) paths[p].to_halves(f.data(), h.data(), n);
        auto t1 = std::chrono::steady_clock::now();
        for (int k = 0; k < rounds; ++k) paths[p].to_floats(h.data(), back.data(), n);
        auto t2 = std::chrono::steady_clock::now();
        const double bytes = static_cast<double>(n) * sizeof(float) * rounds;
        to_h[p].push_back(bytes / std::chrono::duration<double>(t1 - t0).count() / 1e9);
        to_f[p].push_back(bytes / std::chrono::duration<double>(t2 - t1).count() / 1e9);
      }
    const double base_h = Summarise(to_h[1]).median, base_f = Summarise(to_f[1]).median;
    for (size_t p = 0; p < paths.size(); ++p) {
      const double a = Summarise(to_h[p]).median, b = Summarise(to_f[p]).median;
      std::printf("%-10lld %-9s %7.2f (%4.2fx) %7.2f (%4.2fx)\n", static_cast<long long>(n), paths[p].name, a,
                  a / base_h, b, b / base_f);
    }
  }
  return 0;
}

}  // namespace dpbench
