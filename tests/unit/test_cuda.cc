// CUDA backend without GPUs. These tests run everywhere: in CPU-only builds
// and on machines without a driver or GPU, dp must simply report zero CUDA
// devices and fail cleanly when asked for one.
//
// What needs a GPU lives in test_cuda_gpu (and test_cuda_multi_gpu for two),
// whose main (gpu_main.cc) skips the whole executable with exit 77, meson's
// SKIP, when too few devices are visible: no GPU case passes by not running.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "cuda/cuda_runtime.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/gradient_registry.h"
#include "ops/host_placement.h"
#include "ops/op_schema.h"
#include "ops/operator.h"
#include "tests/unit/cuda_test_util.h"

#if defined(DP_WITH_CUDA) && DP_WITH_CUDA
#define DP_TEST_CUDA 1
#else
#define DP_TEST_CUDA 0
#endif

namespace {

using dp::Code;
using dp::DeviceOption;
using dp::DeviceType;
using dp::DType;
using dp::Tensor;
using namespace dp::cuda_test;

}  // namespace

TEST_CASE("CUDA device count is reported without throwing") {
  int count = -1;
  CHECK_NOTHROW(count = dp::DeviceCount(DeviceType::kCUDA));
  CHECK(count >= 0);
  CHECK(dp::cuda::DeviceCount() == count);
  CHECK(dp::DeviceCount(DeviceType::kCPU) == 1);
  CHECK(dp::cuda::BuiltWithCuda() == static_cast<bool>(DP_TEST_CUDA));
  if (!dp::cuda::BuiltWithCuda()) CHECK(count == 0);
  MESSAGE("CUDA built: ", dp::cuda::BuiltWithCuda(), ", CUDA devices: ", count);
}

TEST_CASE("the CUDA probe says why there are or are not CUDA devices") {
  using dp::cuda::Availability;
  const dp::cuda::ProbeResult& probe = dp::cuda::Probe();
  CHECK(&probe == &dp::cuda::Probe());  // probed once
  CHECK(probe.device_count == dp::cuda::DeviceCount());
  CHECK(probe.driver_version == dp::cuda::DriverVersion());
  CHECK_FALSE(probe.detail.empty());
  CHECK((probe.state == Availability::kAvailable) == (probe.device_count > 0));
  MESSAGE("CUDA probe: ", probe.detail);
  if (!dp::cuda::BuiltWithCuda()) {
    CHECK(probe.state == Availability::kNotBuilt);
    CHECK(probe.module_path.empty());
    return;
  }
  // meson runs the unit tests with DP_CUDA_MODULE naming this build's module
  // (the engine is linked into the test, not loaded from libdp's directory).
  const char* module = std::getenv("DP_CUDA_MODULE");
  REQUIRE(module != nullptr);
  CHECK(probe.module_path == module);
  const bool loaded = probe.state == Availability::kAvailable || probe.state == Availability::kNoDriver ||
                      probe.state == Availability::kNoDevice;
  CHECK_MESSAGE(loaded, probe.detail);
  CHECK(probe.runtime_version > 0);
  if (probe.state == Availability::kNoDriver) CHECK(Contains(probe.detail, "driver"));
}

TEST_CASE("CUDA device count is the same from many threads") {
  const int expected = dp::DeviceCount(DeviceType::kCUDA);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      if (dp::cuda::DeviceCount() != expected) ++mismatches;
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches.load() == 0);
}

TEST_CASE("a missing CUDA device fails with kUnavailable naming it") {
  // One past the last device: cuda:0 on machines without a GPU.
  const DeviceOption missing{DeviceType::kCUDA, dp::DeviceCount(DeviceType::kCUDA)};
  const std::string name = dp::DeviceName(missing);

  SUBCASE("a net with an op on it") {
    auto def = std::make_shared<dp::NetDef>();
    def->name = "gpu_net";
    def->ops.push_back(MakeOp("ConstantFill", {}, {"y"}, {{"shape", std::vector<int64_t>{2, 3}}}, missing));
    auto ws = std::make_shared<dp::Workspace>();
    std::string msg = ExpectError([&] { dp::Net net(def, ws); }, Code::kUnavailable);
    CHECK_MESSAGE(Contains(msg, name), msg);
  }
  SUBCASE("a net whose default device it is") {
    auto def = std::make_shared<dp::NetDef>();
    def->device = missing;
    def->ops.push_back(MakeOp("ConstantFill", {}, {"y"}, {{"shape", std::vector<int64_t>{4}}}));
    auto ws = std::make_shared<dp::Workspace>();
    std::string msg = ExpectError([&] { dp::Net net(def, ws); }, Code::kUnavailable);
    CHECK_MESSAGE(Contains(msg, name), msg);
  }
  SUBCASE("a context on it") {
    std::string msg = ExpectError([&] { dp::CreateContext(missing); }, Code::kUnavailable);
    if (dp::cuda::BuiltWithCuda()) CHECK_MESSAGE(Contains(msg, name), msg);
  }
  SUBCASE("a tensor on it") {
    std::string msg = ExpectError([&] { Tensor t({4}, DType::kFloat32, missing); }, Code::kUnavailable);
    if (dp::cuda::BuiltWithCuda()) CHECK_MESSAGE(Contains(msg, name), msg);
  }
  SUBCASE("its memory statistics") {
    std::string msg = ExpectError([&] { dp::GetDeviceMemoryStats(missing); }, Code::kUnavailable);
    if (dp::cuda::BuiltWithCuda()) CHECK_MESSAGE(Contains(msg, name), msg);
    ExpectError([&] { dp::ResetPeakDeviceMemory(missing); }, Code::kUnavailable);
  }
  SUBCASE("a copy to it") {
    float host[4] = {1, 2, 3, 4};
    float* fake_device_ptr = host;  // never dereferenced: the device check comes first
    ExpectError([&] { dp::CopyBytes(sizeof(host), host, kCpu, fake_device_ptr, missing); }, Code::kUnavailable);
  }
}

#if DP_TEST_CUDA

TEST_CASE("CUDA kernels are registered even without a device") {
  for (const char* type : {"ConstantFill", "Copy", "Relu", "Add", "Scale", "FC"})
    CHECK_MESSAGE(dp::OperatorRegistry::Has(DeviceType::kCUDA, type), type);
}

// Issue 26's rule: a net built for a GPU runs every op there, except the
// host ops, which say why they stay on the host. A new CPU op fails here
// until it has a CUDA kernel or a reason.
TEST_CASE("every CPU op has a CUDA kernel or is a host op with its reason") {
  std::vector<std::string> missing;
  for (const auto& key : dp::OperatorRegistry::Keys(DeviceType::kCPU)) {
    const std::string type = key.substr(0, key.find("_ENGINE_"));
    const dp::OpSchema* schema = dp::OpSchemaRegistry::Find(type);
    REQUIRE_MESSAGE(schema != nullptr, type);
    if (dp::OperatorRegistry::Has(DeviceType::kCUDA, type)) {
      CHECK_MESSAGE((!schema->host_op() || schema->host_unless_placed()), type,
                    " has a CUDA kernel yet is declared a host op (not HostOpUnlessPlaced)");
      continue;
    }
    if (!schema->host_op()) missing.push_back(type);
  }
  std::string list;
  for (const auto& t : missing) list += " " + t;
  CHECK_MESSAGE(missing.empty(), missing.size(), " CPU ops have neither a CUDA kernel nor a HostOp reason:", list);
}

#endif  // DP_TEST_CUDA

// Placement needs no device: it rewrites the definition.
TEST_CASE("host ops of a CUDA net run on the host; host-written blobs that CUDA ops read are copied to them") {
  const DeviceOption gpu{DeviceType::kCUDA, 0};
  dp::NetDef def;
  def.name = "placed";
  def.device = gpu;
  def.ops.push_back(MakeOp("Iter", {"iter"}, {"iter"}));
  def.ops.push_back(MakeOp("LearningRate", {"iter"}, {"lr"}, {dp::MakeArg("base_lr", 0.1)}));
  def.ops.push_back(MakeOp("Scale", {"lr"}, {"half_lr"}, {dp::MakeArg("scale", 0.5)}));
  def.ops.push_back(MakeOp("Mul", {"lr", "w"}, {"y"}));
  def.ops.push_back(MakeOp("Print", {"lr", "y"}, {}));
  def.ops.push_back(MakeOp("Mul", {"lr", "y"}, {"z"}, {}, DeviceOption{DeviceType::kCUDA, 1}));
  // An op placed on the host by its definition: its output is copied too.
  def.ops.push_back(MakeOp("Scale", {"w"}, {"s"}, {}, kCpu));
  def.ops.push_back(MakeOp("Add", {"s", "z"}, {"t"}));
  auto placed = dp::PlaceHostOps(def);
  REQUIRE(placed != nullptr);
  const auto& ops = placed->ops;
  REQUIRE(ops.size() == 11);
  CHECK(ops[0].type == "Iter");
  CHECK(placed->OpDevice(ops[0]) == kCpu);
  CHECK(ops[1].type == "LearningRate");
  CHECK(placed->OpDevice(ops[1]) == kCpu);
  // One copy per device, right after the producer, in the order first read.
  CHECK(ops[2].type == "Copy");
  CHECK(ops[2].inputs == std::vector<std::string>{"lr"});
  CHECK(ops[2].outputs == std::vector<std::string>{"lr@cuda:0"});
  CHECK(placed->OpDevice(ops[2]) == gpu);
  CHECK(ops[3].type == "Copy");
  CHECK(ops[3].outputs == std::vector<std::string>{"lr@cuda:1"});
  CHECK(placed->OpDevice(ops[3]) == DeviceOption{DeviceType::kCUDA, 1});
  CHECK(ops[4].inputs == std::vector<std::string>{"lr@cuda:0"});
  CHECK(ops[5].inputs == std::vector<std::string>{"lr@cuda:0", "w"});
  // Print reads across devices on the host: the originals.
  CHECK(ops[6].type == "Print");
  CHECK(placed->OpDevice(ops[6]) == kCpu);
  CHECK(ops[6].inputs == std::vector<std::string>{"lr", "y"});
  CHECK(ops[7].inputs == std::vector<std::string>{"lr@cuda:1", "y"});
  CHECK(ops[8].type == "Scale");
  CHECK(ops[9].type == "Copy");
  CHECK(ops[9].outputs == std::vector<std::string>{"s@cuda:0"});
  CHECK(ops[10].inputs == std::vector<std::string>{"s@cuda:0", "z"});

  // A CPU net, or a CUDA net that reads nothing written on the host, is left
  // as it is.
  dp::NetDef cpu = def;
  cpu.device = kCpu;
  for (auto& op : cpu.ops) op.device.reset();
  CHECK(dp::PlaceHostOps(cpu) == nullptr);
  dp::NetDef plain;
  plain.device = gpu;
  plain.ops.push_back(MakeOp("Relu", {"x"}, {"y"}));
  plain.ops.push_back(MakeOp("Print", {"y"}, {}, {}, kCpu));
  CHECK(dp::PlaceHostOps(plain) == nullptr);
}

TEST_CASE("a host op that may run where placed (Iter, LearningRate) stays on the GPU its definition names") {
  const DeviceOption gpu{DeviceType::kCUDA, 0};
  dp::NetDef def;
  def.name = "counter_on_gpu";
  def.device = gpu;
  def.ops.push_back(MakeOp("Iter", {"iter"}, {"iter"}, {}, gpu));
  def.ops.push_back(MakeOp("LearningRate", {"iter"}, {"lr"}, {dp::MakeArg("base_lr", 0.1)}, gpu));
  def.ops.push_back(MakeOp("Mul", {"lr", "w"}, {"y"}));
  // Inheriting the net's GPU, the same op is a host op, as before.
  def.ops.push_back(MakeOp("Iter", {"other"}, {"other"}));
  def.ops.push_back(MakeOp("Scale", {"other"}, {"z"}));
  auto placed = dp::PlaceHostOps(def);
  REQUIRE(placed != nullptr);
  const auto& ops = placed->ops;
  REQUIRE(ops.size() == 6);
  CHECK(placed->OpDevice(ops[0]) == gpu);
  CHECK(placed->OpDevice(ops[1]) == gpu);
  CHECK(ops[2].type == "Mul");
  CHECK(ops[2].inputs == std::vector<std::string>{"lr", "w"});  // read where it was written: no copy
  CHECK(ops[3].type == "Iter");
  CHECK(placed->OpDevice(ops[3]) == kCpu);
  CHECK(ops[4].type == "Copy");
  CHECK(ops[4].outputs == std::vector<std::string>{"other@cuda:0"});
  CHECK(ops[5].inputs == std::vector<std::string>{"other@cuda:0"});
}
