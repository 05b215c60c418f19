// The device parity harness's CPU half (device_parity.h): every case runs on
// the CPU, the gradient makers of the cases that ask pass float64 finite
// differences, and every op with a CUDA kernel has a case. Builds and runs
// everywhere; the CUDA half is test_device_parity_gpu.cc.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

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

// The case's op with its outputs in memory a memory plan lends them
// (docs/MEMORY.md): blocks that other blobs, filled with NaN just before,
// left (ConstantFill junk_k, alive together, then read by Copy), and after
// the first run blocks the plan sizes for them and for the op's scratch.
// The outputs are copied out as the net's external outputs. Three runs; the
// bytes of each must be what the op gives in memory of its own.
std::vector<std::vector<uint8_t>> RunInLentMemory(const Case& c, const std::vector<Tensor>& inputs, MemoryMode mode,
                                                  const std::vector<size_t>& output_bytes) {
  auto def = std::make_shared<NetDef>();
  def->name = "lent_" + c.name;
  def->memory = mode;
  auto ws = std::make_shared<Workspace>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (ws->HasBlob(c.op.inputs[i])) continue;
    ws->Feed(c.op.inputs[i], inputs[i]);
    def->external_inputs.push_back(c.op.inputs[i]);
  }
  const size_t n = c.op.outputs.size();
  for (size_t k = 0; k < n; ++k) {
    const int64_t floats = static_cast<int64_t>(std::max<size_t>(output_bytes[k], 4) + 3) / 4;
    def->ops.push_back(MakeOperatorDef("ConstantFill", {}, {"junk_" + std::to_string(k)},
                                       {MakeArg("shape", std::vector<int64_t>{floats}), MakeArg("value", std::nan(""))}));
  }
  for (size_t k = 0; k < n; ++k) {
    def->ops.push_back(MakeOperatorDef("Copy", {"junk_" + std::to_string(k)}, {"sink_" + std::to_string(k)}));
    def->external_outputs.push_back("sink_" + std::to_string(k));
  }
  def->ops.push_back(c.op);
  for (size_t k = 0; k < n; ++k) {
    def->ops.push_back(MakeOperatorDef("Copy", {c.op.outputs[k]}, {"result_" + std::to_string(k)}));
    def->external_outputs.push_back("result_" + std::to_string(k));
  }
  NetOptions simple;
  simple.executor = ExecutorKind::kSimple;
  Net net(def, ws, simple);
  std::vector<std::vector<uint8_t>> runs;
  for (int run = 0; run < 3; ++run) {
    net.Run();
    for (size_t k = 0; k < n; ++k) {
      const Tensor t = ws->GetTensor("result_" + std::to_string(k));
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      runs.emplace_back(p, p + t.nbytes());
    }
  }
  return runs;
}

TEST_CASE("every parity case gives the same bits with its outputs and scratch in lent, stale memory") {
  int planned = 0;
  for (const Case& c : AllCases()) {
    CAPTURE(c.name);
    const auto inputs = parity::MakeInputs(c);
    std::vector<size_t> bytes;
    for (const Tensor& t : parity::RunCase(c, inputs, DeviceOption{})) bytes.push_back(t.nbytes());
    const auto own = RunInLentMemory(c, inputs, MemoryMode::kKeep, bytes);
    for (MemoryMode mode : {MemoryMode::kShare, MemoryMode::kFree}) {
      CAPTURE(std::string(MemoryModeName(mode)));
      CHECK(RunInLentMemory(c, inputs, mode, bytes) == own);
    }
    ++planned;
  }
  MESSAGE(planned, " cases run in lent memory");
}

// Without a case, a CUDA kernel would never be compared with its CPU twin.
// The exceptions are compared elsewhere, as the reasons say.
TEST_CASE("every op with a CUDA kernel has a parity case") {
  const std::map<std::string, std::string> elsewhere = {
      {"Copy", "moves every parity input to the device (and test_cuda_gpu checks it)"},
      {"NoOp", "computes nothing"},
      {"Allreduce", "needs a communicator: test_cuda_collectives_gpu"},
      {"Broadcast", "needs a communicator: test_cuda_collectives_gpu"},
      {"ReduceScatter", "needs a communicator: test_cuda_collectives_gpu"},
      {"Allgather", "needs a communicator: test_cuda_collectives_gpu"},
      {"CreateCudaCollectives", "creates the communicator: test_cuda_collectives_gpu"},
  };
  std::set<std::string> covered;
  for (const auto& [type, reason] : elsewhere) covered.insert(type);
  // An engine's kernel needs a case of its own (the op with that engine).
  for (const Case& c : AllCases()) covered.insert(c.op.engine.empty() ? c.op.type : c.op.type + "_ENGINE_" + c.op.engine);
  const auto cuda_ops = OperatorRegistry::Keys(DeviceType::kCUDA);
#if DP_WITH_CUDA
  CHECK(!cuda_ops.empty());
#else
  CHECK(cuda_ops.empty());
#endif
  for (const auto& key : cuda_ops)
    CHECK_MESSAGE(covered.count(key) > 0, "the CUDA kernel of ", key, " has no case in tests/unit/parity_cases_*.cc");
}

}  // namespace
}  // namespace dp
