// How many CPUs dp's compute may use, decided by the library so that no
// environment variable is needed: the CPUs of the process's affinity mask,
// capped by its cgroup's CPU quota (a container given 2 CPUs of a 64-core
// host gets 2 threads, not 64; the processes dp-run starts on one host,
// DP_LOCAL_WORLD_SIZE of them, share it), capped by the limit the application sets
// (dp_set_cpu_threads). Executors size their worker pools from it and split
// it between a net's CPU replicas; the ops' intra-op parallelism
// (core/parallel_for.h) never uses more.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace dp {

// CPUs of the affinity mask, capped by the cgroup quota (over the local
// processes); at least 1. Read
// once per process (the first call) and kept.
int UsableCpus();

// The application's cap on dp's threads (0: none). Any thread, any time;
// nets created later size their pools from it, running ops see it at once.
void SetCpuThreadLimit(int limit);
int CpuThreadLimit();

// What dp's compute may use: min(UsableCpus(), the limit when set).
int CpuBudget();

// The CPU quota of the cgroups this process is in, rounded up to whole CPUs
// (cgroup v2's cpu.max or v1's cpu.cfs_quota_us / cpu.cfs_period_us, the
// smallest over the process's group and its ancestors); nullopt when there is
// none. `proc_self_cgroup` is /proc/self/cgroup's text; `read` returns a
// file's text under /sys/fs/cgroup (nullopt when absent). Exposed for tests.
std::optional<int> CgroupCpuLimit(const std::string& proc_self_cgroup,
                                  const std::function<std::optional<std::string>(const std::string&)>& read);

}  // namespace dp
