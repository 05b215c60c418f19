// How much memory this process may use: the tightest memory limit of the
// cgroups it is in (cgroup v2 memory.max, v1 memory.limit_in_bytes, of its
// own cgroup and every ancestor up to the hierarchy's mount), else physical
// memory. Storage (storage.cc) bounds what dp allocates on the host by it, so
// that a tensor that could never fit is a kOutOfMemory status rather than the
// kernel's OOM kill of the whole process (a container's limit is a cgroup's).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dp {

struct MemoryLimit {
  uint64_t bytes = UINT64_MAX;  // UINT64_MAX: none found
  std::string source;           // "cgroup v1 memory.limit_in_bytes of /sys/fs/cgroup/memory/a", "physical memory"
};

// The tightest cgroup limit, from the texts of /proc/self/cgroup and
// /proc/self/mountinfo; the limit files are read under `root` + their path
// (root "" is the real file system; tests pass a directory standing in for
// it). v1 hierarchies count when they carry the memory controller; "max"
// (v2) means no limit at that level. A cgroup outside what its hierarchy's
// mount shows (a different cgroup namespace) is skipped.
MemoryLimit CgroupMemoryLimit(std::string_view proc_self_cgroup, std::string_view mountinfo,
                              const std::string& root = "");

// min(CgroupMemoryLimit of this process, physical memory), read once, the
// first time it is asked for (dp's first host allocation).
const MemoryLimit& ProcessMemoryLimit();

}  // namespace dp
