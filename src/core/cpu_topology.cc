#include "core/cpu_topology.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <thread>
#include <utility>

#include "core/text_file.h"

#if defined(__linux__)
#include <sched.h>
#include <unistd.h>
#endif

namespace dp {
namespace {

constexpr int kMaxCpu = 1 << 20;
constexpr int kMaxCacheIndex = 16;

// Without the trailing newline (and spaces) sysfs files end with.
std::string_view TrimEnd(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return s;
}

std::optional<int> ParseInt(std::string_view s) {
  s = TrimEnd(s);
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The CPUs sharing the highest-level data or unified cache of `cpu`.
std::optional<std::vector<int>> LastLevelCacheCpus(int cpu, const SysfsReader& read) {
  const std::string dir = "cpu/cpu" + std::to_string(cpu) + "/cache/index";
  int best_level = -1;
  std::optional<std::vector<int>> best;
  for (int k = 0; k < kMaxCacheIndex; ++k) {
    const std::string index = dir + std::to_string(k) + "/";
    const auto level_text = read(index + "level");
    if (!level_text) continue;  // indices may have gaps
    const auto level = ParseInt(*level_text);
    const auto type = read(index + "type");
    if (!level || (type && TrimEnd(*type) == "Instruction")) continue;
    const auto shared = read(index + "shared_cpu_list");
    if (!shared) continue;
    auto list = ParseCpuList(*shared);
    if (list && *level > best_level) {
      best_level = *level;
      best = std::move(list);
    }
  }
  return best;
}

}  // namespace

std::optional<std::vector<int>> ParseCpuList(std::string_view text) {
  text = TrimEnd(text);
  std::vector<int> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t dash = item.find('-');
    const auto lo = ParseInt(item.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : ParseInt(item.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi >= kMaxCpu) return std::nullopt;
    for (int c = *lo; c <= *hi; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

CpuTopology ReadCpuTopology(const std::vector<int>& cpus, const SysfsReader& read) {
  CpuTopology t;
  t.cpus = cpus;
  std::sort(t.cpus.begin(), t.cpus.end());
  t.cpus.erase(std::unique(t.cpus.begin(), t.cpus.end()), t.cpus.end());
  const size_t n = t.cpus.size();
  t.llc.assign(n, 0);
  t.node.assign(n, 0);
  t.core.assign(n, 0);

  // NUMA nodes: node/online lists them, node/nodeN/cpulist their CPUs.
  std::map<int, int> node_of;  // cpu -> node
  if (auto online = read("node/online")) {
    if (auto nodes = ParseCpuList(*online))
      for (int nd : *nodes)
        if (auto list = read("node/node" + std::to_string(nd) + "/cpulist"))
          if (auto members = ParseCpuList(*list))
            for (int c : *members) node_of.emplace(c, nd);
  }

  // Domains are keyed by the smallest CPU sharing the cache, numbered in the
  // order of the process's CPUs; so are nodes.
  std::map<int, int> llc_id, node_id;
  for (size_t i = 0; i < n; ++i) {
    const int c = t.cpus[i];
    const auto shared = LastLevelCacheCpus(c, read);
    // Unknown: one domain with every other unknown CPU (what dp assumed before it read caches).
    const int llc_key = shared && !shared->empty() ? shared->front() : -1;
    t.llc[i] = llc_id.emplace(llc_key, static_cast<int>(llc_id.size())).first->second;
    const auto it = node_of.find(c);
    const int nd = it == node_of.end() ? 0 : it->second;
    t.node[i] = node_id.emplace(nd, static_cast<int>(node_id.size())).first->second;
    std::optional<std::vector<int>> siblings;
    for (const char* f : {"/topology/core_cpus_list", "/topology/thread_siblings_list"}) {
      if (auto text = read("cpu/cpu" + std::to_string(c) + f)) siblings = ParseCpuList(*text);
      if (siblings && !siblings->empty()) break;
    }
    t.core[i] = siblings && !siblings->empty() ? siblings->front() : c;
  }
  t.num_llc = std::max<int>(1, static_cast<int>(llc_id.size()));
  t.num_nodes = std::max<int>(1, static_cast<int>(node_id.size()));
  return t;
}

namespace {

// The mask of thread `tid` (0: the caller; the process id: its main
// thread), ascending; empty when unreadable.
std::vector<int> AffinityOf(int tid) {
  std::vector<int> out;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(tid, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
#else
  (void)tid;
#endif
  return out;
}

}  // namespace

std::vector<int> ProcessAffinity() {
#if defined(__linux__)
  std::vector<int> out = AffinityOf(static_cast<int>(getpid()));
#else
  std::vector<int> out;
#endif
  if (out.empty())
    for (int c = 0; c < std::max(1, static_cast<int>(std::thread::hardware_concurrency())); ++c) out.push_back(c);
  return out;
}

std::vector<int> CurrentThreadAffinity() { return AffinityOf(0); }

bool SetThreadAffinity(const std::vector<int>& cpus) {
  if (cpus.empty()) return true;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return false;
    CPU_SET(c, &set);
  }
  return sched_setaffinity(0, sizeof set, &set) == 0;
#else
  return false;
#endif
}

const CpuTopology& ProcessCpuTopology() {
  static const CpuTopology* topology = new CpuTopology(ReadCpuTopology(
      ProcessAffinity(), [](const std::string& path) { return ReadTextFile("/sys/devices/system/" + path); }));
  return *topology;
}

ThreadAffinityScope::ThreadAffinityScope(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  std::vector<int> current = CurrentThreadAffinity();
  if (SetThreadAffinity(cpus)) saved_ = std::move(current);
}

ThreadAffinityScope::~ThreadAffinityScope() { SetThreadAffinity(saved_); }

}  // namespace dp
