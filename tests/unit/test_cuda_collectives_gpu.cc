// CUDA collectives on one GPU (built with DP_TEST_NEEDS_GPUS=1: gpu_main.cc
// skips the whole executable, exit 77, when no CUDA device is visible):
// single-device communicators (Allreduce is the identity times scale, in NCCL
// and copy-and-sum tree modes), keeping the communicator, argument errors,
// ZeRO-1's ReduceScatter and Allgather between two replicas on one GPU;
// NCCL across processes through a store (one process; a peer that reaches
// the store but never NCCL fails the initialisation in bounded time, named).
#include <doctest/doctest.h>

#if defined(DP_WITH_CUDA) && DP_WITH_CUDA

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "comm/cuda_collectives.h"
#include "comm/shards.h"
#include "comm/store.h"
#include "comm/store_address.h"
#include "cuda_collectives_test_util.h"
#include "op_test_util.h"
#include "temp_dir.h"

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

// The testing aid for the replica path on a one-GPU machine: the tree
// (not NCCL) runs two replicas on one device.
TEST_CASE("GPU: the copy-and-sum tree takes one GPU twice: two replicas' tensors are summed and broadcast") {
  auto ws = WithComm({0, 0}, false);
  ws->Feed("x", OnGpu<float>(0, {3}, {1, 2, 3}));
  ws->Feed("y", OnGpu<float>(0, {3}, {10, 20, 30}));
  RunNet(ws, {Collective("Allreduce", {"x", "y"}, 2, 0)});
  CHECK(HostValues<float>(ws->GetTensor("x")) == std::vector<float>{11, 22, 33});
  CHECK(HostValues<float>(ws->GetTensor("y")) == std::vector<float>{11, 22, 33});
  ws->Feed("y", OnGpu<float>(0, {3}, {0, 0, 0}));
  RunNet(ws, {Collective("Broadcast", {"x", "y"}, 2, 0)});
  CHECK(HostValues<float>(ws->GetTensor("y")) == std::vector<float>{11, 22, 33});
}

// ZeRO-1's collectives (comm/cuda_collective_ops.cc) between two replicas on
// one GPU through the tree: ReduceScatter leaves each replica's part
// (comm/shards.h: 300 elements are [0,192) and [192,300); 10 are part 0's
// alone) the scaled sum, the CPU's ReduceScatter's values; Allgather gives
// every replica each owner's part.
TEST_CASE("GPU: ReduceScatter and Allgather between two replicas on one GPU: parts summed, owners' parts everywhere") {
  ShardLayout layout;
  layout.devices = 2;
  const std::vector<int64_t> sizes = {300, 10};
  auto ws = WithComm({0, 0}, false);
  std::vector<std::string> grads, params;
  auto name = [](const char* what, int d, size_t j) { return what + std::to_string(d) + "_" + std::to_string(j); };
  auto grad = [](int d, int64_t i) { return static_cast<float>(1000 * (d + 1) + i); };
  auto param = [](size_t j, int64_t i) { return static_cast<float>(7 * i) + static_cast<float>(j); };
  for (int d = 0; d < 2; ++d)
    for (size_t j = 0; j < sizes.size(); ++j) {
      const int64_t n = sizes[j];
      const ElementRange mine = layout.OfDevice(n, d);
      std::vector<float> g(static_cast<size_t>(n)), w(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        g[static_cast<size_t>(i)] = grad(d, i);
        w[static_cast<size_t>(i)] = i >= mine.begin && i < mine.end ? param(j, i) : -1.0f;
      }
      ws->Feed(name("g", d, j), OnGpu<float>(0, {n}, g));
      ws->Feed(name("w", d, j), OnGpu<float>(0, {n}, w));
      grads.push_back(name("g", d, j));
      params.push_back(name("w", d, j));
    }
  RunNet(ws, {Collective("ReduceScatter", grads, 2, 0, {FloatArg("scale", 0.5)}), Collective("Allgather", params, 2, 0)});
  for (int d = 0; d < 2; ++d)
    for (size_t j = 0; j < sizes.size(); ++j) {
      CAPTURE(d);
      CAPTURE(j);
      const int64_t n = sizes[j];
      const ElementRange mine = layout.OfDevice(n, d);
      const std::vector<float> g = HostValues<float>(ws->GetTensor(name("g", d, j)));
      std::vector<float> part(g.begin() + mine.begin, g.begin() + mine.end), want_part, want_w;
      for (int64_t i = mine.begin; i < mine.end; ++i) want_part.push_back(0.5f * (grad(0, i) + grad(1, i)));
      CHECK(part == want_part);
      for (int64_t i = 0; i < n; ++i) want_w.push_back(param(j, i));
      CHECK(HostValues<float>(ws->GetTensor(name("w", d, j))) == want_w);
    }
  // One replica (NCCL): ReduceScatter scales its tensor, Allgather keeps it.
  auto one = WithComm({0}, true);
  one->Feed("g", OnGpu<float>(0, {3}, {2, 4, 6}));
  one->Feed("w", OnGpu<float>(0, {3}, {1, 2, 3}));
  RunNet(one, {Collective("ReduceScatter", {"g"}, 1, 0, {FloatArg("scale", 0.5)}), Collective("Allgather", {"w"}, 1, 0)});
  CHECK(HostValues<float>(one->GetTensor("g")) == std::vector<float>{1, 2, 3});
  CHECK(HostValues<float>(one->GetTensor("w")) == std::vector<float>{1, 2, 3});
}

// Compressed gradients (CudaCollectives::AllreduceCompressed): `tensors`
// float32 tensors per replica (the first `compressed` of them compressed,
// then an active flag when `flags`), run through `comm_ws`'s communicator
// on `replicas` replicas of cuda:0, against the CPU collective op on as
// many CPU replicas with the same arguments: the same bits.
void CheckCompressedLikeCpu(const std::shared_ptr<Workspace>& comm_ws, int replicas, const std::string& compress,
                            int compressed, bool flags) {
  CAPTURE(compress);
  CAPTURE(replicas);
  CAPTURE(flags);
  const std::vector<int64_t> sizes = {1000, 37, 5000};
  auto cpu = std::make_shared<Workspace>();
  RunNet(cpu, {Op("CreateCpuCollectives", {}, {"comm"})});
  std::vector<std::string> blobs;
  for (int d = 0; d < replicas; ++d) {
    for (size_t j = 0; j < sizes.size(); ++j) {
      const std::string name = "x" + std::to_string(d) + "_" + std::to_string(j);
      std::vector<float> v = Random<float>(sizes[j], static_cast<uint32_t>(100 * d + j), -70, 70);
      for (size_t i = 0; i < v.size(); i += 7) v[i] *= 1e-3f;  // small values: binary16's subnormals
      comm_ws->Feed(name, OnGpu<float>(0, {sizes[j]}, v));
      cpu->Feed(name, Make<float>({sizes[j]}, v));
      blobs.push_back(name);
    }
    if (flags) {
      const std::string name = "flag" + std::to_string(d);
      const float active = d == 0 ? 1.0f : 0.0f;  // one replica with data: the mean is its sum
      comm_ws->Feed(name, OnGpu<float>(0, {1}, {active}));
      cpu->Feed(name, Make<float>({1}, {active}));
      blobs.push_back(name);
    }
  }
  std::vector<Argument> args = {StringArg("compress", compress), IntArg("compress_tensors", compressed),
                                FloatArg("scale", 0.5)};
  if (flags) args.push_back(IntArg("average_active", 1));
  RunNet(comm_ws, {Collective("Allreduce", blobs, replicas, 0, args)});
  std::vector<std::string> in = {"comm"};
  in.insert(in.end(), blobs.begin(), blobs.end());
  args.push_back(IntArg("num_devices", replicas));
  RunNet(cpu, {Op("Allreduce", in, blobs, args)});
  for (const auto& b : blobs) {
    CAPTURE(b);
    CHECK(BitwiseEqual(HostValues<float>(comm_ws->GetTensor(b)), Values<float>(cpu->GetTensor(b))));
  }
}

// Two replicas on one GPU through the tree: every replica's contribution
// rounded once, the float sum rounded once (no bytes saved in a process).
TEST_CASE("GPU: compressed Allreduce between two replicas on one GPU gives the CPU's bits") {
  for (const char* compress : {"bf16", "fp16"})
    for (bool flags : {false, true}) {
      CheckCompressedLikeCpu(WithComm({0, 0}, false), 2, compress, 2, flags);  // the last tensor whole
      CheckCompressedLikeCpu(WithComm({0}, true), 1, compress, 3, flags);
    }
}

TEST_CASE("GPU: collective errors with one GPU name what is wrong") {
  ExpectBuildError({CreateComm({0, 0}, 1)}, {}, Code::kInvalidArgument, {"cuda:0 is listed twice", "NCCL"});
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

// ---- NCCL across processes through a store --------------------------------------

// A communicator of cuda:0 across "processes" (this one alone, meeting NCCL
// through a store in `dir`), in a workspace's blob "comm".
std::shared_ptr<Workspace> OneProcessNccl(const TempDir& dir, std::shared_ptr<CudaCollectives>* out) {
  CudaProcesses p;
  p.store = Store::Open(ParseStoreAddress("file://" + dir.Path("store")), "one");
  p.timeout = std::chrono::milliseconds(20000);
  auto comm = std::make_shared<CudaCollectives>(std::vector<int>{0}, true, p);
  auto ws = std::make_shared<Workspace>();
  ws->CreateBlob("comm")->Reset(std::make_shared<CudaCommunicator>(CudaCommunicator{comm, ""}));
  *out = std::move(comm);
  return ws;
}

TEST_CASE("GPU: NCCL across processes: one process meets NCCL through the store; the ops run on it") {
  TempDir dir("dp_nccl");
  std::shared_ptr<CudaCollectives> comm;
  auto ws = OneProcessNccl(dir, &comm);
  CHECK(comm->num_processes() == 1);
  ws->Feed("x", OnGpu<float>(0, {4}, {2, 4, 6, 8}));
  ws->Feed("flag", OnGpu<float>(0, {1}, {2}));  // two "active replicas": the mean halves the sum
  ws->Feed("w", OnGpu<float>(0, {2}, {5, 6}));
  RunNet(ws, {Collective("Allreduce", {"x"}, 1, 0, {FloatArg("scale", 0.5)})});
  CHECK(HostValues<float>(ws->GetTensor("x")) == std::vector<float>{1, 2, 3, 4});
  RunNet(ws, {Collective("Allreduce", {"x", "flag"}, 1, 0, {IntArg("average_active", 1)})});
  CHECK(HostValues<float>(ws->GetTensor("x")) == std::vector<float>{0.5f, 1, 1.5f, 2});
  CHECK(HostValues<float>(ws->GetTensor("flag")) == std::vector<float>{2});
  RunNet(ws, {Collective("Broadcast", {"w"}, 1, 0)});
  CHECK(HostValues<float>(ws->GetTensor("w")) == std::vector<float>{5, 6});
}

// Across processes (one here, meeting NCCL through a store) the exchange of
// comm/compressed_sum.h runs: casts, the chunks to their owners (itself),
// the sums, the all-gather; one contribution gives the CPU's bits.
TEST_CASE("GPU: NCCL across processes: the compressed exchange gives the CPU's bits") {
  TempDir dir("dp_nccl");
  std::shared_ptr<CudaCollectives> comm;
  auto ws = OneProcessNccl(dir, &comm);
  for (const char* compress : {"bf16", "fp16"})
    for (bool flags : {false, true}) CheckCompressedLikeCpu(ws, 1, compress, 2, flags);
  // The bytes that cross: 16 bits for the compressed tensors (1037 elements
  // a call), 32 for the whole one (5000) and the flag.
  const uint64_t before = comm->allreduce_bytes();
  CheckCompressedLikeCpu(ws, 1, "bf16", 2, true);
  CHECK(comm->allreduce_bytes() - before == 1037 * 2 + 5000 * 4 + 4);
  const uint64_t compressed = comm->allreduce_bytes();
  CheckCompressedLikeCpu(ws, 1, "bf16", 0, false);  // nothing compressed: float32 all through
  CHECK(comm->allreduce_bytes() - compressed == 6037 * 4);
}

TEST_CASE("GPU: NCCL across processes: a peer that never joins NCCL fails the initialisation in bounded time") {
  TempDir dir("dp_nccl");
  auto store = Store::Open(ParseStoreAddress("file://" + dir.Path("store")), "two");
  store->Set("nccl/devices/1", "1");  // rank 1 reaches the store, then never calls NCCL
  CudaProcesses p;
  p.size = 2;
  p.store = store;
  p.timeout = std::chrono::milliseconds(3000);
  const auto start = std::chrono::steady_clock::now();
  ExpectError([&] { CudaCollectives({0}, true, p); }, Code::kTimeout,
              {"NCCL initialisation on rank 0 of 2", "rank 1 is missing", "3000 ms"});
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 3.0 + 1.5);
  // Bad process settings are refused before anything starts.
  CudaProcesses tree = p;
  ExpectError([&] { CudaCollectives({0}, false, tree); }, Code::kInvalidArgument, {"copy-and-sum tree"});
  CudaProcesses no_store;
  no_store.size = 2;
  ExpectError([&] { CudaCollectives({0}, true, no_store); }, Code::kInvalidArgument, {"need a store"});
  ExpectBuildError({Op("CreateCudaCollectives", {}, {"comm"},
                       {IntsArg("device_ids", {0}), IntArg("world_size", 2)})},
                   {}, Code::kInvalidArgument, {"needs a store"});
  ExpectBuildError({Op("CreateCudaCollectives", {}, {"comm"},
                       {IntsArg("device_ids", {0}), IntArg("nccl", 0), IntArg("world_size", 2),
                        StringArg("store", "file:///tmp/x")})},
                   {}, Code::kInvalidArgument, {"copy-and-sum tree"});
}

}  // namespace

#endif  // DP_WITH_CUDA
