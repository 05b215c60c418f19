// Helpers shared by the dp-bench subcommands: pinning, summary statistics,
// option parsing. Header-only; everything is inline in dpbench.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace dpbench {

// Pins the process to the CPUs it is allowed to use, so that threads created
// later (executor workers, thread teams) inherit the mask. Returns their count.
inline int PinToAllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return static_cast<int>(std::thread::hardware_concurrency());
  if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("dp-bench: sched_setaffinity");
  return CPU_COUNT(&set);
}

struct Stats {
  double median = 0, min = 0, p90 = 0;
};

inline Stats Summarise(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.p90 = v[std::min(n - 1, static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1)];
  return s;
}

// Comma-separated parts of s, empty parts dropped.
inline std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A whole decimal integer in [lo, hi]; false otherwise.
inline bool ParseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace dpbench
