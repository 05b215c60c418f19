// The device parity harness's CPU half (device_parity.h): every case runs on
// the CPU, the gradient makers of the cases that ask pass float64 finite
// differences, and every op with a CUDA kernel has a case. Builds and runs
// everywhere; the CUDA half is test_device_parity_gpu.cc.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "device_parity.h"
#include "gradient_checker.h"
#include "ops/operator.h"

namespace dp {
namespace {

using parity::AllCases;
using parity::Case;

bool AllFinite(const Tensor& t) {
  if (t.dtype() == DType::kFloat32) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.data<float>()[i])) return false;
  }
  if (t.dtype() == DType::kFloat64) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.data<double>()[i])) return false;
  }
  return true;
}

TEST_CASE("every parity case runs on the CPU with finite outputs") {
  const auto cases = AllCases();
  REQUIRE(!cases.empty());
  std::set<std::string> names;
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CHECK_MESSAGE(names.insert(c.name).second, "two cases named ", c.name);
    const auto outs = parity::RunCase(c, parity::MakeInputs(c), DeviceOption{});
    REQUIRE(outs.size() == c.op.outputs.size());
    for (int k : parity::ComparedOutputs(c)) {
      REQUIRE(k >= 0);
      REQUIRE(static_cast<size_t>(k) < outs.size());
      CHECK_MESSAGE(AllFinite(outs[k]), "output ", k, " ('", c.op.outputs[k], "') is not finite");
    }
  }
}

TEST_CASE("the gradient makers of the parity cases pass float64 finite differences on the CPU") {
  int checked = 0;
  for (const Case& c : AllCases()) {
    if (!c.grad_check) continue;
    CAPTURE(c.name);
    const auto inputs = parity::MakeInputs(c, DType::kFloat64);
    testing::GradFeeds feeds;
    for (size_t i = 0; i < inputs.size(); ++i) feeds.emplace_back(c.op.inputs[i], inputs[i]);
    testing::GradCheckOptions opt;
    opt.inputs = c.grad_inputs;
    CHECK(testing::CheckGradient(c.op, feeds, opt) > 0);
    ++checked;
  }
  MESSAGE(checked, " cases checked");
}

// Without a case, a CUDA kernel would never be compared with its CPU twin.
// The exceptions are compared elsewhere, as the reasons say.
TEST_CASE("every op with a CUDA kernel has a parity case") {
  const std::map<std::string, std::string> elsewhere = {
      {"Copy", "moves every parity input to the device (and test_cuda_gpu checks it)"},
      {"NoOp", "computes nothing"},
      {"Allreduce", "needs a communicator: test_cuda_collectives_gpu"},
      {"Broadcast", "needs a communicator: test_cuda_collectives_gpu"},
      {"CreateCudaCollectives", "creates the communicator: test_cuda_collectives_gpu"},
  };
  std::set<std::string> covered;
  for (const auto& [type, reason] : elsewhere) covered.insert(type);
  for (const Case& c : AllCases()) covered.insert(c.op.type);
  const auto cuda_ops = OperatorRegistry::Keys(DeviceType::kCUDA);
#if DP_WITH_CUDA
  CHECK(!cuda_ops.empty());
#else
  CHECK(cuda_ops.empty());
#endif
  for (const auto& key : cuda_ops) {
    const std::string type = key.substr(0, key.find("_ENGINE_"));
    CHECK_MESSAGE(covered.count(type) > 0, "the CUDA kernel of ", key, " has no case in tests/unit/parity_cases_*.cc");
  }
}

}  // namespace
}  // namespace dp
