// What the CUDA test files share (test_cuda runs everywhere, test_cuda_gpu
// needs a GPU): error expectations and op definitions with a device.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "graph/net_def.h"

namespace dp::cuda_test {

inline const DeviceOption kCpu{DeviceType::kCPU, 0};

inline bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs fn, which must throw dp::Error with `code`; returns the message.
template <typename Fn>
std::string ExpectError(Code code, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK_MESSAGE(e.code() == code, "got code ", std::string(CodeName(e.code())), ": ", e.message());
    return e.message();
  }
  FAIL("expected a dp::Error with code ", std::string(CodeName(code)));
  return {};
}

inline OperatorDef MakeOp(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                          std::vector<Argument> args = {}, std::optional<DeviceOption> device = std::nullopt) {
  OperatorDef op = MakeOperatorDef(std::move(type), std::move(inputs), std::move(outputs), std::move(args));
  op.device = device;
  return op;
}

}  // namespace dp::cuda_test
