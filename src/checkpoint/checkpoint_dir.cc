#include "checkpoint/checkpoint_dir.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "checkpoint/atomic_file.h"
#include "checkpoint/checkpoint_file.h"
#include "core/error.h"
#include "core/logging.h"

namespace dp {
namespace {

constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".dpckpt";

// (step, path) of every step checkpoint in dir, newest first.
std::vector<std::pair<int64_t, std::string>> StepFiles(const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec)
    DP_THROW(ec == std::errc::no_such_file_or_directory ? Code::kNotFound : Code::kIo,
             "cannot read checkpoint directory '", dir, "': ", ec.message());
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& entry : it)
    if (auto step = ParseStepCheckpointName(entry.path().filename().string()))
      out.emplace_back(*step, entry.path().string());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

// The pid in a temporary file's name ".<name>.tmp.<pid>.<n>", or 0.
pid_t TempFilePid(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos) return 0;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + at + 5, &end, 10);
  return pid > 0 && *end == '.' ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

std::string StepCheckpointName(int64_t step) {
  DP_ENFORCE_CODE(step >= 0, Code::kInvalidArgument, "checkpoint step must be >= 0, got ", step);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%09lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return buf;
}

std::optional<int64_t> ParseStepCheckpointName(const std::string& name) {
  const size_t p = std::strlen(kPrefix), s = std::strlen(kSuffix);
  if (name.size() <= p + s || name.compare(0, p, kPrefix) != 0 || name.compare(name.size() - s, s, kSuffix) != 0)
    return std::nullopt;
  const std::string digits = name.substr(p, name.size() - p - s);
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

std::vector<std::string> ListStepCheckpoints(const std::string& dir) {
  std::vector<std::string> good;
  for (const auto& [step, path] : StepFiles(dir)) {
    try {
      CheckpointReader r(path);
      good.push_back(path);
    } catch (const Error& e) {
      DP_LOG(kWarning, "skipping checkpoint '", path, "' (step ", step, "): ", e.message());
    }
  }
  return good;
}

int PruneStepCheckpoints(const std::string& dir, int keep) {
  DP_ENFORCE_CODE(keep >= 0, Code::kInvalidArgument, "keep must be >= 0, got ", keep);
  int removed = 0;
  const auto files = StepFiles(dir);
  for (size_t i = static_cast<size_t>(keep); keep > 0 && i < files.size(); ++i)
    if (std::remove(files[i].second.c_str()) == 0) ++removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!AtomicFileWriter::IsTempName(name)) continue;
    const pid_t pid = TempFilePid(name);
    // Only a writer that is gone: this process's own (another thread may be
    // writing it) and live processes' files stay.
    if (pid == 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (std::remove(entry.path().c_str()) == 0) {
      DP_LOG(kInfo, "removed stale temporary checkpoint file '", entry.path().string(), "'");
      ++removed;
    }
  }
  return removed;
}

}  // namespace dp
