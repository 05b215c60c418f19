// A small text file read whole: the sysfs, procfs and cgroup files dp reads
// to size itself (CPU topology and quota, memory limit).
#pragma once

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace dp {

// The file's bytes; nullopt when it cannot be opened.
inline std::optional<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace dp
