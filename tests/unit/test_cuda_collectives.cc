// CUDA collectives without GPUs: CreateCudaCollectives and the CUDA
// Allreduce / Broadcast kernels must fail cleanly when asked for missing
// devices (CPU-only builds, machines without a driver or GPU), and with CUDA
// built the kernels are registered and bad arguments are rejected before any
// GPU is touched. These run everywhere.
//
// What needs GPUs lives in executables that skip as a whole (exit 77, meson's
// SKIP) when too few are visible, so none of their cases can pass by not
// running: test_cuda_collectives_gpu (one GPU: single-device communicators,
// argument errors, keeping the communicator) and test_cuda_multi_gpu (two or
// more: sums over 2..4 GPUs, Broadcast, errors between GPUs, a multi-GPU net).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/gradient_registry.h"
#include "core/device.h"
#include "cuda/cuda_runtime.h"
#include "ops/op_schema.h"
#include "ops/operator.h"
#include "cuda_collectives_test_util.h"
#include "op_test_util.h"

#if defined(DP_WITH_CUDA) && DP_WITH_CUDA
#include "comm/cuda_collectives.h"
#define DP_TEST_CUDA 1
#else
#define DP_TEST_CUDA 0
#endif

using namespace dp;
using namespace dp::testing;

namespace {

TEST_CASE("CreateCudaCollectives over a missing GPU fails cleanly") {
  // One past the last device: cuda:0 on machines without a GPU.
  const int64_t missing = DeviceCount(DeviceType::kCUDA);
  for (int64_t nccl : {0, 1}) {
    CAPTURE(nccl);
    if (DP_TEST_CUDA) {
      ExpectBuildError({CreateComm({missing}, nccl)}, {}, Code::kUnavailable,
                       {"CreateCudaCollectives", DeviceName({DeviceType::kCUDA, static_cast<int32_t>(missing)}),
                        "not available"});
    } else {
      // Not built: the op does not exist, as any unknown type.
      ExpectBuildError({CreateComm({missing}, nccl)}, {}, Code::kInvalidNet,
                       {"unknown operator type 'CreateCudaCollectives'"});
    }
  }
}

#if DP_TEST_CUDA

TEST_CASE("CUDA collective kernels are registered even without a GPU") {
  for (const char* type : {"Allreduce", "Broadcast", "CreateCudaCollectives"}) {
    CAPTURE(type);
    CHECK(OperatorRegistry::Has(kCuda, type));
    CHECK(OpSchemaRegistry::Find(type) != nullptr);
    CHECK(GradientRegistry::Kind(type) == GradientKind::kNone);
  }
  CHECK(OperatorRegistry::Has(DeviceType::kCPU, "CreateCudaCollectives"));
}

TEST_CASE("CreateCudaCollectives rejects bad arguments before touching a GPU") {
  ExpectBuildError({CreateComm({0}, 2)}, {}, Code::kInvalidArgument, {"nccl 2"});
  ExpectBuildError({CreateComm({}, 1)}, {}, Code::kInvalidArgument, {"at least one device"});
  ExpectBuildError({CreateComm({-1}, 0)}, {}, Code::kInvalidArgument, {"device id -1"});
  ExpectBuildError({Op("CreateCudaCollectives", {}, {"comm"})}, {}, Code::kInvalidNet, {"device_ids"});
  ExpectError([] { CudaCollectives comm({DeviceCount(kCuda)}, true); }, Code::kUnavailable, {"not available"});
}

#endif  // DP_TEST_CUDA

}  // namespace
