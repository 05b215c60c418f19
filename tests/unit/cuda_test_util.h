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
#include "expect_error.h"
#include "graph/net_def.h"

namespace dp::cuda_test {

inline const DeviceOption kCpu{DeviceType::kCPU, 0};

inline bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ExpectError(fn, code, {needles}) returns the message (expect_error.h).
using testing::ExpectError;

inline OperatorDef MakeOp(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                          std::vector<Argument> args = {}, std::optional<DeviceOption> device = std::nullopt) {
  OperatorDef op = MakeOperatorDef(std::move(type), std::move(inputs), std::move(outputs), std::move(args));
  op.device = device;
  return op;
}

}  // namespace dp::cuda_test
