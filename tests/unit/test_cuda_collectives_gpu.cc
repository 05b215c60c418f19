// CUDA collectives on one GPU (built with DP_TEST_NEEDS_GPUS=1: gpu_main.cc
// skips the whole executable, exit 77, when no CUDA device is visible):
// single-device communicators (Allreduce is the identity times scale, in NCCL
// and copy-and-sum tree modes), keeping the communicator, argument errors.
#include <doctest/doctest.h>

#if defined(DP_WITH_CUDA) && DP_WITH_CUDA

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "comm/cuda_collectives.h"
#include "cuda_collectives_test_util.h"
#include "op_test_util.h"

using namespace dp;
using namespace dp::testing;

namespace {

TEST_CASE("GPU: a one-device communicator: Allreduce is the identity times scale") {
  for (bool nccl : {true, false}) {
    CAPTURE(nccl);
    CheckAllreduce<float>({0}, nccl, SeveralTensors(), 1.0, IntValued<float>, true);
    CheckAllreduce<double>({0}, nccl, SeveralTensors(), 0.25, IntValued<double>, true);
    CheckAllreduce<int32_t>({0}, nccl, {{5}}, 1.0, IntValued<int32_t>, true);
    CheckAllreduce<int64_t>({0}, nccl, {{5}, {0}}, 1.0, IntValued<int64_t>, true);
    // Broadcast to itself changes nothing.
    auto ws = WithComm({0}, nccl);
    ws->Feed("x", OnGpu<float>(0, {3}, {1, 2, 3}));
    RunNet(ws, {Collective("Broadcast", {"x"}, 1, 0)});
    CHECK(HostValues<float>(ws->GetTensor("x")) == std::vector<float>{1, 2, 3});
  }
}

TEST_CASE("GPU: CreateCudaCollectives keeps a communicator of the same devices and mode") {
  auto ws = WithComm({0}, true);
  const CudaCollectives* first = ws->GetBlob("comm")->Get<CudaCommunicator>().collectives.get();
  CHECK(first->nccl());
  CHECK(first->devices() == std::vector<int>{0});
  RunNet(ws, {CreateComm({0}, 1)});
  CHECK(ws->GetBlob("comm")->Get<CudaCommunicator>().collectives.get() == first);
  RunNet(ws, {CreateComm({0}, 0)});  // another mode replaces it
  const CudaCollectives* tree = ws->GetBlob("comm")->Get<CudaCommunicator>().collectives.get();
  CHECK_FALSE(tree->nccl());
  // Placed on a GPU (an init net whose default device is one) works the same.
  RunNet(ws, {OnDevice(CreateComm({0}, 0), {kCuda, 0})});
  CHECK(ws->GetBlob("comm")->Get<CudaCommunicator>().collectives.get() == tree);
}

TEST_CASE("GPU: collective errors with one GPU name what is wrong") {
  ExpectBuildError({CreateComm({0, 0}, 0)}, {}, Code::kInvalidArgument, {"cuda:0 is listed twice"});
  ExpectBuildError({CreateComm({0, 0}, 1)}, {}, Code::kInvalidArgument, {"cuda:0 is listed twice"});
  auto ws = WithComm({0}, true);
  ws->Feed("x", OnGpu<float>(0, {2}, {1, 2}));
  ws->Feed("y", OnGpu<float>(0, {2}, {1, 2}));
  ws->Feed("h", Make<float>({2}, {1, 2}));
  // num_devices differs from the communicator's size.
  ExpectError([&] { RunNet(ws, {Collective("Allreduce", {"x", "y"}, 2, 0)}); }, Code::kInvalidArgument,
              {"Allreduce", "serves 1 devices but num_devices is 2"});
  // A host tensor.
  ExpectError([&] { RunNet(ws, {Collective("Allreduce", {"h"}, 1, 0)}); }, Code::kInvalidArgument,
              {"'h'", "cpu:0", "cuda:0", "Copy"});
  // Scale on integers, an unsupported dtype.
  ws->Feed("i", OnGpu<int32_t>(0, {2}, {1, 2}));
  ws->Feed("u", OnGpu<uint8_t>(0, {1}, {1}));
  ExpectError([&] { RunNet(ws, {Collective("Allreduce", {"i"}, 1, 0, {FloatArg("scale", 0.5)})}); },
              Code::kInvalidArgument, {"scale 0.5", "'i'"});
  ExpectError([&] { RunNet(ws, {Collective("Allreduce", {"u"}, 1, 0)}); }, Code::kDType, {"'u'", "uint8"});
  // A CPU communicator, or a tensor, where the CUDA one should be.
  auto other = std::make_shared<Workspace>();
  other->Feed("x", OnGpu<float>(0, {2}, {1, 2}));
  RunNet(other, {Op("CreateCpuCollectives", {}, {"comm"})});
  ExpectError([&] { RunNet(other, {Collective("Allreduce", {"x"}, 1, 0)}); }, Code::kDType,
              {"comm 'comm'", "not a CUDA communicator", "CreateCudaCollectives"});
  other->Feed("comm", Make<float>({1}, {0}));
  ExpectError([&] { RunNet(other, {Collective("Broadcast", {"x"}, 1, 0)}); }, Code::kDType,
              {"not a CUDA communicator"});
}

}  // namespace

#endif  // DP_WITH_CUDA
