// Library logging. Messages go to a process-wide sink: stderr by default, or
// the callback installed through dp_set_log_callback. Levels match DP_LOG_*.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

namespace dp {

enum class LogLevel : int32_t { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

using LogCallback = void (*)(void* user_data, int32_t level, const char* message);

// Installs a sink (nullptr restores stderr). Safe from any thread; the
// callback may be called from any thread, one message at a time.
void SetLogSink(LogCallback cb, void* user_data, LogLevel min_level);
bool LogEnabled(LogLevel level);
void LogMessage(LogLevel level, const std::string& message);

}  // namespace dp

#define DP_LOG(level, ...)                                             \
  do {                                                                 \
    if (::dp::LogEnabled(::dp::LogLevel::level))                       \
      ::dp::LogMessage(::dp::LogLevel::level, ::dp::StrCat(__VA_ARGS__)); \
  } while (0)
