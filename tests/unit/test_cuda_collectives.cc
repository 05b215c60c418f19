// CUDA collectives: CreateCudaCollectives and the CUDA Allreduce / Broadcast
// kernels, in NCCL and copy-and-sum tree modes. The first tests run
// everywhere (CPU-only builds, machines without a GPU): asking for missing
// devices must fail cleanly. With one GPU: single-device communicators
// (Allreduce is the identity times scale), argument errors, keeping the
// communicator. With two or more: sums over 2..4 GPUs for the four dtypes,
// several tensors per call and a scale (integer-valued data, so every sum
// order is exact; the tree's fixed order also bitwise on random floats),
// Broadcast into uninitialised replicas, errors naming the blobs, and a
// multi-device net whose producers and consumers run on each GPU's own
// stream (the event ordering end to end). Tests skip with a message when
// there are too few GPUs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autodiff/gradient_registry.h"
#include "core/device.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "cuda/cuda_runtime.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/op_schema.h"
#include "ops/operator.h"
#include "op_test_util.h"

#if defined(DP_WITH_CUDA) && DP_WITH_CUDA
#include "cuda/cuda_collectives.h"
#define DP_TEST_CUDA 1
#else
#define DP_TEST_CUDA 0
#endif

using namespace dp;
using namespace dp::testing;

namespace {

OperatorDef CreateComm(const std::vector<int64_t>& devices, int64_t nccl) {
  return Op("CreateCudaCollectives", {}, {"comm"}, {IntsArg("device_ids", devices), IntArg("nccl", nccl)});
}

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

}  // namespace

#if DP_TEST_CUDA

namespace {

constexpr DeviceType kCuda = DeviceType::kCUDA;

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

// ---- helpers for the GPU tests ------------------------------------------------

bool HaveGpus(int want) {
  const int have = DeviceCount(kCuda);
  if (have >= want) return true;
  MESSAGE("skipping: needs ", want, " CUDA device(s), ", have, " visible");
  return false;
}

std::string Scoped(int device, const std::string& name) { return DeviceScope({kCuda, device}) + name; }

OperatorDef OnDevice(OperatorDef op, DeviceOption device) {
  op.device = device;
  return op;
}

// Allreduce or Broadcast over `blobs`, in place, on cuda:device.
OperatorDef Collective(const std::string& type, const std::vector<std::string>& blobs, int num_devices, int device,
                       std::vector<Argument> args = {}) {
  std::vector<std::string> in = {"comm"};
  in.insert(in.end(), blobs.begin(), blobs.end());
  args.push_back(IntArg("num_devices", num_devices));
  return OnDevice(Op(type, in, blobs, std::move(args)), {kCuda, device});
}

// Runs `ops` once in ws; what they read before writing is an external input.
void RunNet(const std::shared_ptr<Workspace>& ws, std::vector<OperatorDef> ops) {
  auto def = std::make_shared<NetDef>();
  std::vector<std::string> written;
  for (const auto& op : ops) {
    for (const auto& in : op.inputs)
      if (std::find(written.begin(), written.end(), in) == written.end() &&
          std::find(def->external_inputs.begin(), def->external_inputs.end(), in) == def->external_inputs.end())
        def->external_inputs.push_back(in);
    written.insert(written.end(), op.outputs.begin(), op.outputs.end());
  }
  def->ops = std::move(ops);
  Net(def, ws).Run();
}

// A workspace holding a communicator over `devices`.
std::shared_ptr<Workspace> WithComm(const std::vector<int>& devices, bool nccl) {
  auto ws = std::make_shared<Workspace>();
  RunNet(ws, {CreateComm(std::vector<int64_t>(devices.begin(), devices.end()), nccl ? 1 : 0)});
  return ws;
}

template <typename T>
Tensor OnGpu(int device, Dims dims, const std::vector<T>& values) {
  Tensor gpu(dims, DTypeOf<T>(), {kCuda, device});
  if (!values.empty()) gpu.CopyFrom(Make<T>(std::move(dims), values));
  return gpu;
}

template <typename T>
std::vector<T> HostValues(const Tensor& t) {
  Tensor host;
  host.CopyFrom(t);  // synchronous: waits for the devices involved
  return Values<T>(host);
}

// Integer values in [-50, 50]: sums of a few are exact in every dtype, in any order.
template <typename T>
std::vector<T> IntValued(int64_t n, uint32_t seed) {
  std::vector<int64_t> ints = Random<int64_t>(n, seed, -50, 50);
  return std::vector<T>(ints.begin(), ints.end());
}

// The copy-and-sum tree's order: ((b0 + b1) + (b2 + b3)), then the scale.
template <typename T>
std::vector<T> TreeSum(std::vector<std::vector<T>> bufs, double scale) {
  const size_t n = bufs.size();
  for (size_t step = 1; step < n; step *= 2)
    for (size_t i = 0; i + step < n; i += 2 * step)
      for (size_t k = 0; k < bufs[i].size(); ++k) bufs[i][k] = bufs[i][k] + bufs[i + step][k];
  if (scale != 1.0)
    for (T& v : bufs[0]) v = v * static_cast<T>(scale);
  return bufs[0];
}

template <typename T>
bool BitwiseEqual(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Device lists of 2..min(4, visible) GPUs.
std::vector<std::vector<int>> DeviceSets() {
  std::vector<std::vector<int>> sets;
  for (int n = 2; n <= std::min(4, DeviceCount(kCuda)); ++n) {
    std::vector<int> devices(static_cast<size_t>(n));
    for (int d = 0; d < n; ++d) devices[static_cast<size_t>(d)] = d;
    sets.push_back(devices);
  }
  return sets;
}

// Feeds replica d's tensor j (values[d][j], dims[j]) as "cuda_<dev>/t<j>" on
// its GPU; returns the blob names, device-major.
template <typename T>
std::vector<std::string> FeedReplicas(Workspace& ws, const std::vector<int>& devices, const std::vector<Dims>& dims,
                                      const std::vector<std::vector<std::vector<T>>>& values) {
  std::vector<std::string> blobs;
  for (size_t d = 0; d < devices.size(); ++d)
    for (size_t j = 0; j < dims.size(); ++j) {
      std::string name = "t";  // (not "t" + to_string: GCC 12's -Wrestrict false positive)
      name += std::to_string(j);
      blobs.push_back(Scoped(devices[d], name));
      ws.Feed(blobs.back(), OnGpu<T>(devices[d], dims[j], values[d][j]));
    }
  return blobs;
}

// Runs Allreduce over N replicas of tensors shaped `dims` filled by `make`
// and checks every replica bitwise against the tree-order sum (with
// tree_reference) or else against replica 0, and then closely against the sum.
template <typename T, typename Make>
void CheckAllreduce(const std::vector<int>& devices, bool nccl, const std::vector<Dims>& dims, double scale,
                    Make make, bool tree_reference) {
  auto ws = WithComm(devices, nccl);
  const size_t n = devices.size();
  std::vector<std::vector<std::vector<T>>> values(n);  // [device][tensor]
  for (size_t d = 0; d < n; ++d)
    for (size_t j = 0; j < dims.size(); ++j)
      values[d].push_back(make(NumElements(dims[j]), static_cast<uint32_t>(100 * d + j + 1)));
  const std::vector<std::string> blobs = FeedReplicas<T>(*ws, devices, dims, values);
  std::vector<Argument> args;
  if (scale != 1.0) args.push_back(FloatArg("scale", scale));
  RunNet(ws, {Collective("Allreduce", blobs, static_cast<int>(n), devices[0], args)});
  for (size_t j = 0; j < dims.size(); ++j) {
    std::vector<std::vector<T>> replicas;
    for (size_t d = 0; d < n; ++d) replicas.push_back(values[d][j]);
    const std::vector<T> tree = TreeSum(replicas, scale);
    const std::vector<T> first = HostValues<T>(ws->GetTensor(blobs[j]));
    for (size_t d = 0; d < n; ++d) {
      CAPTURE(j);
      CAPTURE(d);
      const Tensor& t = ws->GetTensor(blobs[d * dims.size() + j]);
      CHECK(t.device() == DeviceOption{kCuda, devices[d]});  // reduced where it lives
      CHECK(t.dims() == dims[j]);
      const std::vector<T> got = HostValues<T>(t);
      CHECK(BitwiseEqual(got, tree_reference ? tree : first));
      if (!tree_reference) CheckClose(got, ToDouble(tree), std::is_same_v<T, float> ? 1e-5 : 1e-12);
    }
  }
}

const std::vector<Dims>& SeveralTensors() {
  // Empty, tiny, odd, and one large enough for many blocks.
  static const std::vector<Dims> dims = {{0}, {7}, {3, 1001}, {(1 << 18) + 3}};
  return dims;
}

// ---- one GPU ------------------------------------------------------------------

TEST_CASE("GPU: a one-device communicator: Allreduce is the identity times scale") {
  if (!HaveGpus(1)) return;
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
  if (!HaveGpus(1)) return;
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
  if (!HaveGpus(1)) return;
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

// ---- two or more GPUs -----------------------------------------------------------

TEST_CASE_TEMPLATE("GPU: Allreduce sums 2..4 GPUs' tensors in both modes", T, float, double, int32_t, int64_t) {
  if (!HaveGpus(2)) return;
  for (const auto& devices : DeviceSets()) {
    for (bool nccl : {true, false}) {
      for (double scale : std::is_integral_v<T> ? std::vector<double>{1.0} : std::vector<double>{1.0, 0.5}) {
        CAPTURE(devices.size());
        CAPTURE(nccl);
        CAPTURE(scale);
        CheckAllreduce<T>(devices, nccl, SeveralTensors(), scale, IntValued<T>, true);
      }
    }
  }
}

TEST_CASE("GPU: the tree sums in its fixed order; NCCL leaves every replica equal") {
  if (!HaveGpus(2)) return;
  auto real = [](int64_t n, uint32_t seed) { return Random<float>(n, seed, -1.0, 1.0); };
  for (const auto& devices : DeviceSets()) {
    CAPTURE(devices.size());
    CheckAllreduce<float>(devices, false, {{100003}}, 1.0 / static_cast<double>(devices.size()), real, true);
    CheckAllreduce<float>(devices, true, {{100003}}, 1.0 / static_cast<double>(devices.size()), real, false);
  }
}

TEST_CASE("GPU: Broadcast copies the root's tensors into uninitialised and misshaped replicas") {
  if (!HaveGpus(2)) return;
  for (const auto& devices : DeviceSets()) {
    for (bool nccl : {true, false}) {
      CAPTURE(devices.size());
      CAPTURE(nccl);
      const int n = static_cast<int>(devices.size());
      const int root = n - 1;
      auto ws = WithComm(devices, nccl);
      const std::vector<float> w = Random<float>(6, 3);
      const std::vector<int64_t> b = {7, -8, 9, 1 << 30};
      std::vector<std::string> blobs;
      for (int d = 0; d < n; ++d) {
        const int dev = devices[static_cast<size_t>(d)];
        blobs.push_back(Scoped(dev, "w"));
        blobs.push_back(Scoped(dev, "b"));
        if (d == root) {
          ws->Feed(blobs[blobs.size() - 2], OnGpu<float>(dev, {2, 3}, w));
          ws->Feed(blobs.back(), OnGpu<int64_t>(dev, {4}, b));
        } else if (d == 0) {
          ws->Feed(blobs[blobs.size() - 2], OnGpu<float>(dev, {5}, Random<float>(5, 9)));  // misshaped
          ws->Feed(blobs.back(), Tensor());                                                // empty tensor
        }  // the others: never fed at all
      }
      RunNet(ws, {Collective("Broadcast", blobs, n, devices[0], {IntArg("root", root)})});
      for (int d = 0; d < n; ++d) {
        CAPTURE(d);
        const Tensor& tw = ws->GetTensor(blobs[static_cast<size_t>(2 * d)]);
        const Tensor& tb = ws->GetTensor(blobs[static_cast<size_t>(2 * d + 1)]);
        CHECK(tw.device() == DeviceOption{kCuda, devices[static_cast<size_t>(d)]});  // on its own GPU
        CHECK(tb.device() == DeviceOption{kCuda, devices[static_cast<size_t>(d)]});
        CHECK(tw.dims() == Dims{2, 3});
        CHECK(HostValues<float>(tw) == w);
        CHECK(HostValues<int64_t>(tb) == b);
      }
    }
  }
}

TEST_CASE("GPU: collective errors between GPUs name the blobs") {
  if (!HaveGpus(2)) return;
  for (bool nccl : {true, false}) {
    CAPTURE(nccl);
    auto ws = WithComm({0, 1}, nccl);
    ws->Feed("cuda_0/w", OnGpu<float>(0, {2}, {1, 2}));
    ws->Feed("cuda_1/w", OnGpu<float>(1, {3}, {1, 2, 3}));
    ws->Feed("cuda_1/i", OnGpu<int32_t>(1, {2}, {1, 2}));
    ws->Feed("cuda_1/on0", OnGpu<float>(0, {2}, {1, 2}));
    auto run = [&](const std::string& type, std::vector<std::string> blobs) {
      RunNet(ws, {Collective(type, blobs, 2, 0)});
    };
    ExpectError([&] { run("Allreduce", {"cuda_0/w", "cuda_1/w"}); }, Code::kShape,
                {"Allreduce", "'cuda_1/w'", "[3]", "'cuda_0/w'", "[2]"});
    ExpectError([&] { run("Allreduce", {"cuda_0/w", "cuda_1/i"}); }, Code::kDType,
                {"'cuda_1/i'", "int32", "'cuda_0/w'"});
    // A replica's tensor on the wrong GPU, for either op.
    ExpectError([&] { run("Allreduce", {"cuda_0/w", "cuda_1/on0"}); }, Code::kInvalidArgument,
                {"'cuda_1/on0'", "is on cuda:0", "device 1 of the communicator, cuda:1"});
    ExpectError([&] { run("Broadcast", {"cuda_0/w", "cuda_1/on0"}); }, Code::kInvalidArgument,
                {"'cuda_1/on0'", "cuda:1"});
    // Nothing was written by the failed runs.
    CHECK(HostValues<float>(ws->GetTensor("cuda_0/w")) == std::vector<float>{1, 2});
    // The op on a GPU that the communicator does not serve.
    auto one = WithComm({1}, nccl);
    one->Feed("x", OnGpu<float>(1, {2}, {1, 2}));
    ExpectError([&] { RunNet(one, {Collective("Allreduce", {"x"}, 1, 0)}); }, Code::kInvalidArgument,
                {"runs on cuda:0", "not one of the communicator's devices [cuda:1]"});
  }
}

TEST_CASE("GPU: Allreduce in a multi-GPU net waits for every producer and precedes every consumer") {
  if (!HaveGpus(2)) return;
  // Each GPU fills and rescales its own gradient on its stream (slow enough
  // that an unordered collective would read unfinished data), the collective
  // runs on the first GPU's stream, and every GPU scales the result on its
  // own stream. The async executor joins the streams through events only.
  const int64_t numel = int64_t{1} << 22;
  for (const auto& devices : DeviceSets()) {
    for (bool nccl : {true, false}) {
      CAPTURE(devices.size());
      CAPTURE(nccl);
      const int n = static_cast<int>(devices.size());
      auto ws = WithComm(devices, nccl);
      auto dev = [&](int d) { return DeviceOption{kCuda, devices[static_cast<size_t>(d)]}; };
      auto blob = [&](int d, const std::string& name) { return Scoped(dev(d).id, name); };
      std::vector<OperatorDef> ops;
      std::vector<std::string> grads;
      for (int d = 0; d < n; ++d) {
        grads.push_back(blob(d, "g"));
        ops.push_back(OnDevice(
            Op("ConstantFill", {}, {grads.back()}, {IntsArg("shape", {numel}), FloatArg("value", d + 1)}), dev(d)));
        for (int k = 0; k < 8; ++k)
          ops.push_back(OnDevice(Op("Scale", {grads.back()}, {grads.back()}, {FloatArg("scale", 1.0)}), dev(d)));
      }
      ops.push_back(Collective("Allreduce", grads, n, devices[0]));
      for (int d = 0; d < n; ++d)
        ops.push_back(OnDevice(Op("Scale", {blob(d, "g")}, {blob(d, "out")}, {FloatArg("scale", 2.0)}), dev(d)));
      auto def = std::make_shared<NetDef>();
      def->ops = std::move(ops);
      def->external_inputs = {"comm"};
      Net net(def, ws);
      const float want = static_cast<float>(n * (n + 1));  // 2 * (1 + ... + n)
      for (int run = 0; run < 3; ++run) {  // events and streams are reused
        CAPTURE(run);
        net.Run();
        for (int d = 0; d < n; ++d) {
          const std::vector<float> out = HostValues<float>(ws->GetTensor(blob(d, "out")));
          const auto wrong = std::count_if(out.begin(), out.end(), [&](float v) { return v != want; });
          CHECK_MESSAGE(wrong == 0, wrong, " elements on device ", d, " differ from ", want);
        }
      }
    }
  }
}

}  // namespace

#endif  // DP_TEST_CUDA
