#include "core/memory_limit.h"

#include <unistd.h>

#include <charconv>
#include <vector>

#include "core/error.h"
#include "core/text_file.h"

namespace dp {
namespace {

std::string ReadFile(const std::string& path) { return ReadTextFile(path).value_or(std::string()); }

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

bool Contains(const std::vector<std::string_view>& list, std::string_view item) {
  for (std::string_view x : list)
    if (x == item) return true;
  return false;
}

// mountinfo writes space, tab, newline and backslash in paths as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        const char c = s[i + k];
        octal = octal && c >= '0' && c <= '7';
        v = v * 8 + (c - '0');
      }
      if (octal) {
        out += static_cast<char>(v);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// A limit file's value; false for "max" (v2: no limit) or anything unreadable.
bool ParseLimit(std::string_view text, uint64_t* out) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) return false;
  *out = v;
  return true;
}

struct CgroupMount {
  std::string root;   // the part of the hierarchy the mount shows ("/" or "/docker/<id>")
  std::string point;  // where it is mounted
  bool v2 = false;
};

// The mounts of cgroup v2 and of v1 hierarchies with the memory controller.
std::vector<CgroupMount> MemoryMounts(std::string_view mountinfo) {
  std::vector<CgroupMount> out;
  for (std::string_view line : Split(mountinfo, '\n')) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    const std::vector<std::string_view> f = Split(line, ' ');
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 6 || dash + 1 >= f.size()) continue;
    const std::string_view fstype = f[dash + 1];
    const bool v2 = fstype == "cgroup2";
    const bool v1_memory = fstype == "cgroup" && dash + 3 < f.size() && Contains(Split(f[dash + 3], ','), "memory");
    if (v2 || v1_memory) out.push_back({Unescape(f[3]), Unescape(f[4]), v2});
  }
  return out;
}

}  // namespace

MemoryLimit CgroupMemoryLimit(std::string_view proc_self_cgroup, std::string_view mountinfo, const std::string& root) {
  MemoryLimit best;
  const std::vector<CgroupMount> mounts = MemoryMounts(mountinfo);
  for (std::string_view line : Split(proc_self_cgroup, '\n')) {
    // hierarchy-id:controllers:path (v2: "0::/path"); the path may hold ':'.
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, c1), controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(line.substr(c2 + 1));
    const bool v2 = id == "0" && controllers.empty();
    if (!v2 && !Contains(Split(controllers, ','), "memory")) continue;
    const char* file = v2 ? "memory.max" : "memory.limit_in_bytes";
    for (const CgroupMount& m : mounts) {
      if (m.v2 != v2) continue;
      // The cgroup's place below the mount: its path less the mount's root.
      std::string rel;
      if (m.root == "/") {
        rel = path;
      } else if (path == m.root || path.compare(0, m.root.size() + 1, m.root + "/") == 0) {
        rel = path.substr(m.root.size());
      } else {
        continue;  // not visible through this mount
      }
      while (!rel.empty() && rel.back() == '/') rel.pop_back();
      // From the cgroup up to the mount: any level's limit holds for all below.
      for (std::string dir = m.point + rel;;) {
        uint64_t v;
        if (ParseLimit(ReadFile(root + dir + "/" + file), &v) && v < best.bytes) {
          best.bytes = v;
          best.source = StrCat("cgroup ", v2 ? "v2 " : "v1 ", file, " of ", dir);
        }
        if (dir.size() <= m.point.size()) break;
        dir.resize(dir.rfind('/'));
      }
    }
  }
  return best;
}

const MemoryLimit& ProcessMemoryLimit() {
  static const MemoryLimit limit = [] {
    MemoryLimit l = CgroupMemoryLimit(ReadFile("/proc/self/cgroup"), ReadFile("/proc/self/mountinfo"));
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0) {
      const uint64_t physical = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
      if (physical < l.bytes) l = {physical, "physical memory"};
    }
    return l;
  }();
  return limit;
}

}  // namespace dp
