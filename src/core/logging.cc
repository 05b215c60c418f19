#include "core/logging.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "core/error.h"

namespace dp {
namespace {

struct Sink {
  std::mutex mu;  // serialises callback invocations and sink changes
  LogCallback cb = nullptr;
  void* user_data = nullptr;
  std::atomic<int32_t> min_level{static_cast<int32_t>(LogLevel::kWarning)};
};

// Set while this thread runs the callback: a dp call the callback makes
// that logs would otherwise wait for the lock this thread holds.
thread_local bool t_in_callback = false;

Sink& GetSink() {
  static Sink* sink = new Sink;  // never destroyed: logging may happen during exit
  return *sink;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

}  // namespace

void SetLogSink(LogCallback cb, void* user_data, LogLevel min_level) {
  if (t_in_callback) {
    std::fprintf(stderr, "dp warning: the log callback cannot be replaced from within itself; ignored\n");
    return;
  }
  Sink& s = GetSink();
  std::lock_guard<std::mutex> lock(s.mu);
  s.cb = cb;
  s.user_data = user_data;
  s.min_level.store(static_cast<int32_t>(min_level), std::memory_order_relaxed);
}

bool LogEnabled(LogLevel level) {
  return static_cast<int32_t>(level) >= GetSink().min_level.load(std::memory_order_relaxed);
}

void LogMessage(LogLevel level, const std::string& message) {
  Sink& s = GetSink();
  if (t_in_callback) {  // logged by a dp call of the callback: never re-entered
    if (LogEnabled(level)) std::fprintf(stderr, "dp %s: %s\n", LevelName(level), message.c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (static_cast<int32_t>(level) < s.min_level.load(std::memory_order_relaxed)) return;
  if (s.cb != nullptr) {
    // Cleared however the callback ends (a C++ sink in tests may throw).
    struct InCallback {
      InCallback() { t_in_callback = true; }
      ~InCallback() { t_in_callback = false; }
    } in_callback;
    s.cb(s.user_data, static_cast<int32_t>(level), message.c_str());
  } else {
    std::fprintf(stderr, "dp %s: %s\n", LevelName(level), message.c_str());
  }
}

}  // namespace dp
