// Errors inside the engine are exceptions carrying a stable code; the C API
// turns them into dp_status objects at the boundary (capi/), never further.
#pragma once

#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <utility>

namespace dp {

// Mirrors DP_ERR_* in include/dp/dp.h; the numbers are part of the ABI.
enum class Code : int32_t {
  kOk = 0,
  kInvalidArgument = 1,
  kNotFound = 2,
  kAlreadyExists = 3,
  kOutOfRange = 4,
  kUnimplemented = 5,
  kInternal = 6,
  kUnavailable = 7,
  kCancelled = 8,
  kTimeout = 9,
  kDataLoss = 10,
  kOutOfMemory = 11,
  kFailedPrecondition = 12,
  kIo = 13,
  kParse = 14,
  kInvalidNet = 15,
  kShape = 16,
  kDType = 17,
};

const char* CodeName(Code code);

class Error : public std::exception {
 public:
  Error(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }
  // Adds context in front of the message ("op 3 (FC 'fc1'): ...").
  Error& Prepend(const std::string& context) {
    message_ = context + ": " + message_;
    return *this;
  }

 private:
  Code code_;
  std::string message_;
};

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace dp

#define DP_THROW(code, ...) throw ::dp::Error((code), ::dp::StrCat(__VA_ARGS__))
// Checks a condition on user-controlled input and fails with a clear message.
#define DP_ENFORCE_CODE(cond, code, ...) \
  do {                                   \
    if (!(cond)) DP_THROW((code), __VA_ARGS__); \
  } while (0)
#define DP_ENFORCE(cond, ...) DP_ENFORCE_CODE(cond, ::dp::Code::kInvalidArgument, __VA_ARGS__)
