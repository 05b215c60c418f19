#include "core/cpu_budget.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "core/cpu_topology.h"
#include "core/text_file.h"

namespace dp {
namespace {

std::atomic<int> g_limit{0};

// "a/b/c" -> "/a/b/c", "/a/b", "/a", "" (the cgroup and its ancestors, each
// as a path to append to a hierarchy's mount point).
std::vector<std::string> SelfAndAncestors(std::string path) {
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (!path.empty() && path.front() != '/') path.insert(path.begin(), '/');
  std::vector<std::string> out;
  for (;;) {
    out.push_back(path);
    if (path.empty()) break;
    path.resize(path.rfind('/'));
  }
  return out;
}

std::optional<double> ParseNumber(const std::string& s) {
  std::istringstream in(s);
  double v;
  if (!(in >> v)) return std::nullopt;
  return v;
}

// cgroup v2 "max 100000" or "150000 100000": quota / period in CPUs.
std::optional<double> V2Quota(const std::string& text) {
  std::istringstream in(text);
  std::string quota, period;
  if (!(in >> quota >> period) || quota == "max") return std::nullopt;
  auto q = ParseNumber(quota), p = ParseNumber(period);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return *q / *p;
}

std::optional<double> V1Quota(const std::optional<std::string>& quota, const std::optional<std::string>& period) {
  if (!quota || !period) return std::nullopt;
  auto q = ParseNumber(*quota), p = ParseNumber(*period);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;  // -1: no quota
  return *q / *p;
}

std::optional<std::string> ReadCgroupFile(const std::string& path) { return ReadTextFile("/sys/fs/cgroup" + path); }

// The processes of one host that dp-run started (DP_LOCAL_WORLD_SIZE): they
// share the cgroup's quota (dp-run's children stay in its group).
int LocalProcesses() {
  const char* env = std::getenv("DP_LOCAL_WORLD_SIZE");
  if (env == nullptr) return 1;
  const long n = std::strtol(env, nullptr, 10);
  return n > 1 && n <= 4096 ? static_cast<int>(n) : 1;
}

std::string ReadProcSelfCgroup() { return ReadTextFile("/proc/self/cgroup").value_or(std::string()); }

}  // namespace

std::optional<int> CgroupCpuLimit(const std::string& proc_self_cgroup,
                                  const std::function<std::optional<std::string>(const std::string&)>& read) {
  std::optional<double> best;
  auto consider = [&](std::optional<double> cpus) {
    if (cpus && (!best || *cpus < *best)) best = cpus;
  };
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // "hierarchy-id:controllers:path"
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      // v2. Inside a container the path may name the host's group while the
      // container sees its own at the mount point: the ancestors include "".
      for (const std::string& g : SelfAndAncestors(path))
        if (auto text = read(g + "/cpu.max")) consider(V2Quota(*text));
      continue;
    }
    // v1: the hierarchy holding the cpu controller, mounted under its names.
    std::istringstream names(controllers);
    std::string name;
    bool has_cpu = false;
    while (std::getline(names, name, ',')) has_cpu |= name == "cpu";
    if (!has_cpu) continue;
    for (const std::string& mount : {"/" + controllers, std::string("/cpu"), std::string("/cpu,cpuacct")})
      for (const std::string& g : SelfAndAncestors(path))
        consider(V1Quota(read(mount + g + "/cpu.cfs_quota_us"), read(mount + g + "/cpu.cfs_period_us")));
  }
  if (!best) return std::nullopt;
  // 1.5 CPUs of quota: two threads make use of it, the second at half time.
  return std::max(1, static_cast<int>(std::ceil(*best - 1e-9)));
}

int UsableCpus() {
  static const int cpus = [] {
    // The main thread's mask, not the caller's: dp pins its own threads.
    int n = static_cast<int>(ProcessAffinity().size());
    if (auto quota = CgroupCpuLimit(ReadProcSelfCgroup(), ReadCgroupFile))
      n = std::min(n, std::max(1, *quota / LocalProcesses()));
    return std::max(1, n);
  }();
  return cpus;
}

void SetCpuThreadLimit(int limit) { g_limit.store(std::max(0, limit), std::memory_order_relaxed); }

int CpuThreadLimit() { return g_limit.load(std::memory_order_relaxed); }

int CpuBudget() {
  const int limit = CpuThreadLimit();
  const int cpus = UsableCpus();
  return limit > 0 ? std::min(limit, cpus) : cpus;
}

}  // namespace dp
