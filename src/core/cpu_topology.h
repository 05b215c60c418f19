// The CPUs this process may run on, as the hardware groups them: which
// last-level cache each shares (an AMD CCX, an Intel socket's L3), which NUMA
// node it is in, and which hardware threads are one core. dp divides its
// threads between CPU replicas along these lines (core/cpu_plan.h): threads
// that hand data to each other every op should sit behind one cache.
//
// Read from sysfs (/sys/devices/system) once per process; tests build
// topologies from fake files through the same reader.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dp {

struct CpuTopology {
  std::vector<int> cpus;  // the affinity mask's CPUs, ascending
  // Per entry of `cpus` (same index): its last-level-cache domain, NUMA node
  // and core (the smallest CPU number among the core's hardware threads).
  // Domains are numbered 0.. in the order of their first CPU.
  std::vector<int> llc, node, core;
  int num_llc = 1;
  int num_nodes = 1;
};

// A Linux CPU list ("0-3,8,10-11\n") as CPU numbers, ascending and distinct;
// nullopt when malformed (or beyond 1 << 20).
std::optional<std::vector<int>> ParseCpuList(std::string_view text);

// Returns a file's text under /sys/devices/system/ ("cpu/cpu3/cache/index3/level"),
// nullopt when absent.
using SysfsReader = std::function<std::optional<std::string>(const std::string& path)>;

// The topology of `cpus` as `read` describes it. What sysfs does not say
// (a container may hide it) is assumed: CPUs without a readable cache share
// one domain, a CPU without a NUMA node is in node 0, a CPU without sibling
// information is a core of its own.
CpuTopology ReadCpuTopology(const std::vector<int>& cpus, const SysfsReader& read);

// The process's affinity mask: its main thread's, which dp never changes
// (ascending; [0, hardware_concurrency) when it cannot be read).
std::vector<int> ProcessAffinity();

// The calling thread's affinity mask (ascending; empty when unreadable).
std::vector<int> CurrentThreadAffinity();

// Restricts the calling thread to `cpus`; false when the kernel refuses
// (nothing changes then). Empty: does nothing, returns true.
bool SetThreadAffinity(const std::vector<int>& cpus);

// Pins the calling thread to `cpus` until destroyed, then restores its
// mask (nothing happens for an empty list, or when the kernel refuses).
class ThreadAffinityScope {
 public:
  explicit ThreadAffinityScope(const std::vector<int>& cpus);
  ~ThreadAffinityScope();
  ThreadAffinityScope(const ThreadAffinityScope&) = delete;
  ThreadAffinityScope& operator=(const ThreadAffinityScope&) = delete;

 private:
  std::vector<int> saved_;
};

// ReadCpuTopology of the process's affinity mask at the first call, kept.
const CpuTopology& ProcessCpuTopology();

}  // namespace dp
