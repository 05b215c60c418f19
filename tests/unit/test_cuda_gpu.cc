// CUDA backend on one GPU (built with DP_TEST_NEEDS_GPUS=1: gpu_main.cc skips
// the whole executable, exit 77, when no CUDA device is visible, so no case
// here skips itself): copies between host and device, the CUDA kernels
// against the CPU ones, what they reject, events and streams. The peer copy
// between two GPUs is in test_cuda_multi_gpu.
#include <doctest/doctest.h>

#if defined(DP_WITH_CUDA) && DP_WITH_CUDA

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
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
#include "cuda/cuda_context.h"
#include "cuda/cuda_graph.h"
#include "cuda/op_launchers.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "graph/net_format.h"
#include "ops/gradient_registry.h"  // MakeArg
#include "ops/operator.h"
#include "tests/unit/cuda_test_util.h"

namespace {

using dp::Code;
using dp::DeviceOption;
using dp::DeviceType;
using dp::DType;
using dp::Tensor;
using namespace dp::cuda_test;

const DeviceOption kGpu0{DeviceType::kCUDA, 0};

Tensor RandomTensor(dp::Dims dims, uint32_t seed) {
  Tensor t(std::move(dims), DType::kFloat32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

Tensor ToHost(const Tensor& t) {
  Tensor host;  // default device: cpu:0
  host.CopyFrom(t);
  return host;
}

// Runs `op` once with every op of the net on `device`: the inputs are fed on
// the CPU as "<name>_host" and moved to the device by Copy ops. Returns the
// op's output 0, copied to the CPU.
Tensor RunOp(const dp::OperatorDef& op, DeviceOption device, const std::vector<std::pair<std::string, Tensor>>& inputs,
             dp::MathMode math = dp::MathMode::kDefault) {
  auto def = std::make_shared<dp::NetDef>();
  def->name = "test_" + op.type + "_on_" + dp::DeviceName(device);
  def->device = device;
  auto ws = std::make_shared<dp::Workspace>();
  for (const auto& [name, value] : inputs) {
    ws->Feed(name + "_host", value);
    def->external_inputs.push_back(name + "_host");
    def->ops.push_back(MakeOp("Copy", {name + "_host"}, {name}));
  }
  def->ops.push_back(op);
  dp::NetOptions options;
  options.math = math;
  dp::Net net(def, ws, options);
  net.Run();  // finishes the device work
  const Tensor& out = ws->GetTensor(op.outputs.at(0));
  CHECK(out.device() == device);
  return ToHost(out);
}

// Relative to max(|expected|, 1), so values near zero compare absolutely.
void CheckClose(const Tensor& actual, const Tensor& expected, double tolerance = 1e-5) {
  REQUIRE(actual.dtype() == DType::kFloat32);
  REQUIRE(actual.dims() == expected.dims());
  const float* a = actual.data<float>();
  const float* e = expected.data<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double err = std::abs(static_cast<double>(a[i]) - e[i]);
    if (!(err <= tolerance * std::max(1.0, std::abs(static_cast<double>(e[i]))))) {
      if (bad++ < 5) MESSAGE("element ", i, ": got ", a[i], ", expected ", e[i]);
    }
  }
  CHECK_MESSAGE(bad == 0, bad, " of ", actual.numel(), " elements differ");
}

// The op on cuda:0 against the same op on the CPU.
void CheckSameAsCpu(const dp::OperatorDef& op, const std::vector<std::pair<std::string, Tensor>>& inputs) {
  Tensor gpu = RunOp(op, kGpu0, inputs);
  Tensor cpu = RunOp(op, kCpu, inputs);
  CheckClose(gpu, cpu);
}

}  // namespace

TEST_CASE("GPU: host -> device -> host round trip") {
  Tensor host = RandomTensor({3, 1000}, 1);
  SUBCASE("synchronous") {
    Tensor dev({3, 1000}, DType::kFloat32, kGpu0);
    dev.CopyFrom(host);
    Tensor dev2({1}, DType::kFloat32, kGpu0);
    dev2.CopyFrom(dev);  // device -> device
    CheckClose(ToHost(dev2), host, 0.0);
  }
  SUBCASE("asynchronous on a context's stream") {
    auto ctx = dp::CreateContext(kGpu0);
    CHECK(ctx->IsAsync());
    ctx->SwitchToDevice();
    Tensor dev({3, 1000}, DType::kFloat32, kGpu0);
    Tensor dev2({3, 1000}, DType::kFloat32, kGpu0);
    Tensor back(host.dims(), DType::kFloat32);
    dp::CopyBytes(host.nbytes(), host.raw_data(), kCpu, dev.raw_mutable_data(), kGpu0, ctx.get());
    dp::CopyBytes(dev.nbytes(), dev.raw_data(), kGpu0, dev2.raw_mutable_data(), kGpu0, ctx.get());
    dp::CopyBytes(dev2.nbytes(), dev2.raw_data(), kGpu0, back.raw_mutable_data(), kCpu, ctx.get());
    ctx->FinishDeviceComputation();
    CheckClose(back, host, 0.0);
  }
  SUBCASE("zero bytes") {
    Tensor empty({0, 4}, DType::kFloat32, kGpu0);
    CHECK(empty.raw_data() == nullptr);
    CHECK(ToHost(empty).numel() == 0);
  }
}

TEST_CASE("GPU: GatherRows matches the CPU's for every word size and alignment, on a stream and without one") {
  constexpr int64_t kRows = 37;
  // Row sizes whose widest word is 1, 2, 4 and 8 bytes; offsets that misalign both buffers.
  for (size_t row_bytes : {size_t{3}, size_t{6}, size_t{12}, size_t{3136}})
    for (size_t offset : {size_t{0}, size_t{1}, size_t{4}}) {
      CAPTURE(row_bytes);
      CAPTURE(offset);
      std::vector<uint8_t> src(offset + kRows * row_bytes);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
      const std::vector<int64_t> indices = {36, 0, 5, -1, 37, 5, 12, 1000};
      const auto n = static_cast<int64_t>(indices.size());
      std::vector<uint8_t> want(offset + static_cast<size_t>(n) * row_bytes, 0);
      dp::GatherRows(kCpu, src.data() + offset, kRows, row_bytes, indices.data(), n, want.data() + offset);
      Tensor dsrc({static_cast<int64_t>(src.size())}, DType::kUInt8, kGpu0);
      Tensor didx({n}, DType::kInt64, kGpu0);
      Tensor ddst({static_cast<int64_t>(want.size())}, DType::kUInt8, kGpu0);
      dp::CopyBytes(src.size(), src.data(), kCpu, dsrc.raw_mutable_data(), kGpu0);
      dp::CopyBytes(indices.size() * sizeof(int64_t), indices.data(), kCpu, didx.raw_mutable_data(), kGpu0);
      dp::CopyBytes(want.size(), want.data(), kCpu, ddst.raw_mutable_data(), kGpu0);  // the offset's bytes
      for (bool stream : {false, true}) {
        CAPTURE(stream);
        auto ctx = dp::CreateContext(kGpu0);
        dp::GatherRows(kGpu0, static_cast<const uint8_t*>(dsrc.raw_data()) + offset, kRows, row_bytes,
                       didx.data<int64_t>(), n, static_cast<uint8_t*>(ddst.raw_mutable_data()) + offset,
                       stream ? ctx.get() : nullptr);
        if (stream) ctx->FinishDeviceComputation();
        std::vector<uint8_t> got(want.size());
        dp::CopyBytes(got.size(), ddst.raw_data(), kGpu0, got.data(), kCpu);
        CHECK(got == want);
      }
    }
}

TEST_CASE("GPU: CUDA ops match the CPU ops") {
  SUBCASE("ConstantFill from shape") {
    CheckSameAsCpu(MakeOp("ConstantFill", {}, {"y"}, {{"shape", std::vector<int64_t>{7, 33}}, {"value", 2.5}}), {});
  }
  SUBCASE("ConstantFill like an input") {
    CheckSameAsCpu(MakeOp("ConstantFill", {"x"}, {"y"}, {{"value", -1.0}}), {{"x", RandomTensor({4, 5}, 2)}});
  }
  SUBCASE("ConstantFill with input_as_shape") {
    Tensor shape({2}, DType::kInt64);
    shape.mutable_data<int64_t>()[0] = 3;
    shape.mutable_data<int64_t>()[1] = 9;
    CheckSameAsCpu(MakeOp("ConstantFill", {"s"}, {"y"}, {{"input_as_shape", int64_t{1}}, {"value", 4.0}}),
                   {{"s", shape}});
  }
  SUBCASE("Copy") { CheckSameAsCpu(MakeOp("Copy", {"x"}, {"y"}), {{"x", RandomTensor({17, 3}, 3)}}); }
  SUBCASE("Relu") { CheckSameAsCpu(MakeOp("Relu", {"x"}, {"y"}), {{"x", RandomTensor({100, 37}, 4)}}); }
  SUBCASE("Relu in place") { CheckSameAsCpu(MakeOp("Relu", {"x"}, {"x"}), {{"x", RandomTensor({1000}, 5)}}); }
  SUBCASE("Add") {
    CheckSameAsCpu(MakeOp("Add", {"a", "b"}, {"c"}), {{"a", RandomTensor({9, 11}, 6)}, {"b", RandomTensor({9, 11}, 7)}});
  }
  SUBCASE("Add in place") {
    CheckSameAsCpu(MakeOp("Add", {"a", "b"}, {"a"}), {{"a", RandomTensor({300}, 8)}, {"b", RandomTensor({300}, 9)}});
  }
  SUBCASE("Scale") {
    CheckSameAsCpu(MakeOp("Scale", {"x"}, {"y"}, {{"scale", -0.75}}), {{"x", RandomTensor({2, 3, 4}, 10)}});
  }
  SUBCASE("FC") {
    CheckSameAsCpu(MakeOp("FC", {"x", "w", "b"}, {"y"}),
                   {{"x", RandomTensor({5, 7}, 11)}, {"w", RandomTensor({3, 7}, 12)}, {"b", RandomTensor({3}, 13)}});
  }
  SUBCASE("FC, larger, with a flattened input") {
    CheckSameAsCpu(MakeOp("FC", {"x", "w", "b"}, {"y"}), {{"x", RandomTensor({64, 4, 32}, 14)},
                                                          {"w", RandomTensor({48, 128}, 15)},
                                                          {"b", RandomTensor({48}, 16)}});
  }
  SUBCASE("FC with K = 0 gives the bias") {
    CheckSameAsCpu(MakeOp("FC", {"x", "w", "b"}, {"y"}),
                   {{"x", RandomTensor({4, 0}, 17)}, {"w", RandomTensor({3, 0}, 18)}, {"b", RandomTensor({3}, 19)}});
  }
}

// The math modes (core/math_mode.h) reach cuBLAS: FC, FCGradient, Conv and
// ConvGradient in TF32 and BF16 differ from FP32 (random data at K = 1024
// always rounds some product differently) by no more than their inputs'
// rounding allows: relative to the largest output, about the unit roundoff
// (the errors of a K-term sum grow as the sum does), bounded here at four
// times it: 2^-9 for TF32 (10 mantissa bits), 2^-6 for BF16 (7 bits). FP32
// and DEFAULT are cublasSgemm, bit for bit.
TEST_CASE("GPU: the math modes round the GEMMs' inputs as they say, and FP32 is the default's bits") {
  const std::vector<std::pair<std::string, Tensor>> fc = {
      {"X", RandomTensor({64, 1024}, 1)}, {"W", RandomTensor({96, 1024}, 2)}, {"b", RandomTensor({96}, 3)}};
  const std::vector<std::pair<std::string, Tensor>> fc_grad = {
      {"X", RandomTensor({64, 1024}, 1)}, {"W", RandomTensor({96, 1024}, 2)}, {"dY", RandomTensor({64, 96}, 4)}};
  const std::vector<std::pair<std::string, Tensor>> conv = {
      {"X", RandomTensor({4, 32, 12, 12}, 5)}, {"W", RandomTensor({16, 32, 3, 3}, 6)}, {"b", RandomTensor({16}, 7)}};
  const std::vector<std::pair<std::string, Tensor>> conv_grad = {
      {"X", RandomTensor({4, 32, 12, 12}, 5)}, {"W", RandomTensor({16, 32, 3, 3}, 6)},
      {"dY", RandomTensor({4, 16, 10, 10}, 8)}};
  struct Case {
    dp::OperatorDef op;
    const std::vector<std::pair<std::string, Tensor>>* inputs;
  };
  const std::vector<Case> cases = {
      {MakeOp("FC", {"X", "W", "b"}, {"Y"}), &fc},
      {MakeOp("FCGradient", {"X", "W", "dY"}, {"dW", "db", "dX"}), &fc_grad},
      {MakeOp("Conv", {"X", "W", "b"}, {"Y"}, {dp::MakeArg("kernel", int64_t{3})}), &conv},
      {MakeOp("ConvGradient", {"X", "W", "dY"}, {"dW", "db", "dX"}, {dp::MakeArg("kernel", int64_t{3})}), &conv_grad},
  };
  auto max_abs = [](const Tensor& t) {
    float m = 0;
    for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.data<float>()[i]));
    return m;
  };
  for (const Case& c : cases) {
    CAPTURE(c.op.type);
    const Tensor fp32 = RunOp(c.op, kGpu0, *c.inputs, dp::MathMode::kFp32);
    const Tensor dflt = RunOp(c.op, kGpu0, *c.inputs);
    CHECK(std::equal(fp32.data<float>(), fp32.data<float>() + fp32.numel(), dflt.data<float>()));
    const float scale = max_abs(fp32);
    for (auto [mode, bound] : {std::pair{dp::MathMode::kTf32, 1.0 / 512}, std::pair{dp::MathMode::kBf16, 1.0 / 64}}) {
      CAPTURE(dp::MathModeName(mode));
      const Tensor got = RunOp(c.op, kGpu0, *c.inputs, mode);
      double worst = 0;
      for (int64_t i = 0; i < got.numel(); ++i)
        worst = std::max(worst, static_cast<double>(std::fabs(got.data<float>()[i] - fp32.data<float>()[i])));
      MESSAGE(c.op.type, " ", dp::MathModeName(mode), ": max |error| / max |output| = ", worst / scale);
      CHECK(worst > 0);               // the mode reached cuBLAS
      CHECK(worst <= bound * scale);  // within its rounding
    }
  }
}

TEST_CASE("GPU: CUDA ops reject what they do not support") {
  SUBCASE("Add broadcasting over more dims than the kernel indexes") {
    // 34 alternating broadcast dims merge into none (ops/math/broadcast.h).
    std::vector<int64_t> a, b;
    for (int i = 0; i < 17; ++i) {
      a.insert(a.end(), {2, 1});
      b.insert(b.end(), {1, 2});
    }
    std::string msg = ExpectError([&] {
      RunOp(MakeOp("Add", {"a", "b"}, {"c"}), kGpu0, {{"a", RandomTensor(a, 1)}, {"b", RandomTensor(b, 2)}});
    }, Code::kUnimplemented);
    CHECK_MESSAGE(Contains(msg, "dims"), msg);
  }
  SUBCASE("ConstantFill of int64") {
    std::string msg = ExpectError([&] {
      RunOp(MakeOp("ConstantFill", {}, {"y"},
                   {{"shape", std::vector<int64_t>{2}}, {"dtype", static_cast<int64_t>(DType::kInt64)}}),
            kGpu0, {});
    }, Code::kDType);
    CHECK_MESSAGE(Contains(msg, "float32"), msg);
  }
  SUBCASE("FC with mismatched widths names the blobs") {
    std::string msg = ExpectError([&] {
      RunOp(MakeOp("FC", {"data", "w", "b"}, {"y"}), kGpu0,
            {{"data", RandomTensor({3, 5}, 1)}, {"w", RandomTensor({8, 4}, 2)}, {"b", RandomTensor({8}, 3)}});
    }, Code::kShape);
    CHECK_MESSAGE(Contains(msg, "'data'"), msg);
    CHECK_MESSAGE(Contains(msg, "'w'"), msg);
  }
  SUBCASE("an input on the CPU") {
    auto def = std::make_shared<dp::NetDef>();
    def->device = kGpu0;
    def->external_inputs = {"x"};
    def->ops.push_back(MakeOp("Relu", {"x"}, {"y"}));
    auto ws = std::make_shared<dp::Workspace>();
    ws->Feed("x", RandomTensor({4}, 3));
    dp::Net net(def, ws);
    std::string msg = ExpectError([&] { net.Run(); }, Code::kInvalidArgument);
    CHECK_MESSAGE(Contains(msg, "Copy"), msg);
  }
}

TEST_CASE("GPU: CudaEvent orders two contexts") {
  dp::CudaContext producer(kGpu0), consumer(kGpu0);
  producer.SwitchToDevice();
  const int64_t n = int64_t{1} << 24;
  Tensor a({n}, DType::kFloat32, kGpu0), b({n}, DType::kFloat32, kGpu0);
  float* ap = a.mutable_data<float>();
  float* bp = b.mutable_data<float>();

  // A slow producer, so that an unordered consumer would read unfinished data.
  REQUIRE(dp::cuda::LaunchFill(ap, n, 3.0f, producer.stream()) == cudaSuccess);
  for (int i = 0; i < 20; ++i) REQUIRE(dp::cuda::LaunchScale(ap, 1.0f, ap, n, producer.stream()) == cudaSuccess);
  auto event = producer.CreateEvent();
  CHECK(event->device() == kGpu0);
  CHECK(event->Query() == dp::EventStatus::kInitialized);
  event->Record(producer);
  event->Wait(consumer);  // the consumer's stream waits; the host goes on
  REQUIRE(dp::cuda::LaunchScale(ap, 2.0f, bp, n, consumer.stream()) == cudaSuccess);
  consumer.FinishDeviceComputation();
  CHECK(event->Query() == dp::EventStatus::kSuccess);
  CHECK(event->Finish(std::chrono::milliseconds(0)));

  Tensor host = ToHost(b);
  const float* h = host.data<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += h[i] != 6.0f;
  CHECK(wrong == 0);

  SUBCASE("a host waiter blocks until the GPU passes the event") {
    event->Reset();
    REQUIRE(dp::cuda::LaunchFill(ap, n, 1.0f, producer.stream()) == cudaSuccess);
    event->Record(producer);
    dp::CpuContext cpu;
    event->Wait(cpu);
    CHECK(event->Query() == dp::EventStatus::kSuccess);
  }
  SUBCASE("Finish with a timeout") {
    event->Reset();
    CHECK_FALSE(event->Finish(std::chrono::milliseconds(5)));  // never recorded
    event->Record(producer);
    CHECK(event->Finish(std::chrono::seconds(60)));
    CHECK(event->Query() == dp::EventStatus::kSuccess);
  }
  SUBCASE("an error set from the host reaches the waiters") {
    event->Reset();
    event->SetFinished("producer failed");
    CHECK(event->Query() == dp::EventStatus::kFailed);
    CHECK(event->ErrorMessage() == "producer failed");
    std::string msg = ExpectError([&] { event->Wait(consumer); }, Code::kFailedPrecondition);
    CHECK(Contains(msg, "producer failed"));
    ExpectError([&] { event->Finish(); }, Code::kFailedPrecondition);
    event->SetFinished();  // first wins
    CHECK(event->Query() == dp::EventStatus::kFailed);
  }
  SUBCASE("finished from the host without recording") {
    event->Reset();
    event->SetFinished();
    CHECK(event->Query() == dp::EventStatus::kSuccess);
    CHECK_NOTHROW(event->Wait(consumer));
    CHECK(event->Finish());
  }
  SUBCASE("recording twice or on a CPU context is a bug") {
    event->Reset();
    event->Record(producer);
    ExpectError([&] { event->Record(producer); }, Code::kInternal);
    event->Reset();
    dp::CpuContext cpu;
    ExpectError([&] { event->Record(cpu); }, Code::kInternal);
  }
  producer.FinishDeviceComputation();
}

TEST_CASE("GPU: FinishDeviceComputation waits for the stream") {
  auto ctx = dp::CreateContext(kGpu0);
  auto& cuda_ctx = static_cast<dp::CudaContext&>(*ctx);
  ctx->SwitchToDevice();
  const int64_t n = int64_t{1} << 24;
  Tensor a({n}, DType::kFloat32, kGpu0);
  float* ap = a.mutable_data<float>();
  REQUIRE(dp::cuda::LaunchFill(ap, n, 1.0f, cuda_ctx.stream()) == cudaSuccess);
  for (int i = 0; i < 10; ++i) REQUIRE(dp::cuda::LaunchScale(ap, 1.5f, ap, n, cuda_ctx.stream()) == cudaSuccess);
  ctx->FinishDeviceComputation();
  CHECK(cudaStreamQuery(cuda_ctx.stream()) == cudaSuccess);
  CHECK(cuda_ctx.cublas() != nullptr);
  CHECK(cuda_ctx.cublas() == cuda_ctx.cublas());  // created once
}

TEST_CASE("GPU: Copy in place moves a tensor from another device onto the op's device") {
  // The op runs on the CPU; its input (and, in place, its output blob) holds a GPU tensor.
  Tensor host = RandomTensor({2, 3}, 122);
  Tensor dev({2, 3}, DType::kFloat32, kGpu0);
  dev.CopyFrom(host);
  auto def = std::make_shared<dp::NetDef>();
  def->external_inputs = {"x"};
  def->ops.push_back(MakeOp("Copy", {"x"}, {"x"}));
  auto ws = std::make_shared<dp::Workspace>();
  ws->Feed("x", dev);
  dp::Net(def, ws).Run();
  const Tensor& out = ws->GetTensor("x");
  CHECK(out.device() == kCpu);
  CheckClose(out, host, 0.0);
}

// ---- the caching allocator on a GPU ----------------------------------------

TEST_CASE("GPU: a steady-state step makes no cudaMalloc or cudaFree; statistics per device") {
  auto ws = std::make_shared<dp::Workspace>();
  auto def = std::make_shared<const dp::NetDef>(dp::NetDefFromJson(R"({"name":"steady","device":{"type":"CUDA","id":0},
    "external_inputs":["x_host","w_host","b_host"],"ops":[
    {"type":"Copy","inputs":["x_host"],"outputs":["x"]},
    {"type":"Copy","inputs":["w_host"],"outputs":["w"]},
    {"type":"Copy","inputs":["b_host"],"outputs":["b"]},
    {"type":"FC","inputs":["x","w","b"],"outputs":["y"]},
    {"type":"Relu","inputs":["y"],"outputs":["r"]},
    {"type":"Scale","inputs":["r"],"outputs":["s"],"args":[{"name":"scale","f":0.5}]},
    {"type":"Add","inputs":["s","r"],"outputs":["y"]}]})"));
  dp::Net net(def, ws);
  for (int step = 0; step < 6; ++step) {
    // Batches of two sizes in turn: the outputs' memory is freed and taken
    // again every step (a tensor keeps its block only for similar sizes).
    ws->Feed("x_host", RandomTensor({step % 2 == 0 ? 64 : 16, 300}, 1 + step));
    ws->Feed("w_host", RandomTensor({200, 300}, 100 + step));
    ws->Feed("b_host", RandomTensor({200}, 200 + step));
    const dp::DeviceMemoryStats before = dp::GetDeviceMemoryStats(kGpu0);
    net.Run();
    const dp::DeviceMemoryStats after = dp::GetDeviceMemoryStats(kGpu0);
    CHECK(after.allocated > 0);
    CHECK(after.reserved >= after.allocated);
    CHECK(after.peak >= after.allocated);
    if (step >= 2) {  // the first steps fill the cache
      CHECK_MESSAGE(after.raw_allocs == before.raw_allocs, "step ", step, " called cudaMalloc");
      CHECK_MESSAGE(after.raw_frees == before.raw_frees, "step ", step, " called cudaFree");
    }
  }
  dp::ResetPeakDeviceMemory(kGpu0);
  const dp::DeviceMemoryStats reset = dp::GetDeviceMemoryStats(kGpu0);
  CHECK(reset.peak == reset.allocated);
}

TEST_CASE("GPU: more memory than the device has is kOutOfMemory naming the net, op, blob, device and bytes") {
  const dp::DeviceMemoryStats before = dp::GetDeviceMemoryStats(kGpu0);
  ExpectError([] { Tensor t({int64_t{1} << 40}, DType::kFloat32, kGpu0); }, Code::kOutOfMemory,
              {"cuda:0", "4398046511104 bytes", "bytes allocated", "bytes reserved"});
  auto ws = std::make_shared<dp::Workspace>();
  auto def = std::make_shared<const dp::NetDef>(dp::NetDefFromJson(R"({"name":"too_big","device":{"type":"CUDA","id":0},
    "ops":[{"type":"ConstantFill","name":"fill","outputs":["huge"],
            "args":[{"name":"shape","ints":[1099511627776]}]}]})"));
  dp::Net net(def, ws);
  ExpectError([&] { net.Run(); }, Code::kOutOfMemory,
              {"'too_big'", "'fill'", "'huge'", "cuda:0", "4398046511104 bytes", "bytes reserved"});
  CHECK(dp::GetDeviceMemoryStats(kGpu0).allocated == before.allocated);
  // The device is still usable.
  Tensor ok({1024}, DType::kFloat32, kGpu0);
  CHECK(ok.raw_data() != nullptr);
}

TEST_CASE("GPU: a workspace's max_bytes is a budget per device") {
  dp::WorkspaceOptions o;
  o.max_bytes = 1 << 20;
  auto ws = std::make_shared<dp::Workspace>(o);
  auto def = std::make_shared<const dp::NetDef>(dp::NetDefFromJson(R"({"name":"both","ops":[
    {"type":"ConstantFill","outputs":["h"],"args":[{"name":"shape","ints":[200000]}]},
    {"type":"ConstantFill","outputs":["g"],"device":{"type":"CUDA","id":0},
     "args":[{"name":"shape","ints":[200000]}]}]})"));
  dp::Net(def, ws).Run();  // 800 kB on each: both fit their own 1 MiB
  CHECK(ws->budget()->used(kGpu0) == 800000);
  CHECK(ws->budget()->used(kCpu) == 800000);
  auto more = std::make_shared<const dp::NetDef>(dp::NetDefFromJson(R"({"name":"more","ops":[
    {"type":"ConstantFill","name":"g2","outputs":["g2"],"device":{"type":"CUDA","id":0},
     "args":[{"name":"shape","ints":[100000]}]}]})"));
  dp::Net net(more, ws);
  ExpectError([&] { net.Run(); }, Code::kOutOfMemory, {"'g2'", "1048576 bytes on cuda:0", "400000 bytes asked"});
}

// The CUDA half of graph capture (cuda/cuda_graph.h): work on two streams,
// forked from and joined back into the origin by events, recorded into one
// graph that runs nothing until launched and reads its buffers as they are
// at each launch.
TEST_CASE("GPU: a stream capture across two streams replays as one graph") {
  dp::CudaContext origin(kGpu0), side(kGpu0);
  origin.SwitchToDevice();
  const int64_t n = int64_t{1} << 20;
  Tensor x({n}, DType::kFloat32, kGpu0), a({n}, DType::kFloat32, kGpu0), b({n}, DType::kFloat32, kGpu0);
  float* xp = x.mutable_data<float>();
  float* ap = a.mutable_data<float>();
  float* bp = b.mutable_data<float>();
  cudaEvent_t fork = nullptr, join = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(dp::cuda::LaunchFill(xp, n, 1.0f, origin.stream()) == cudaSuccess);
  REQUIRE(dp::cuda::LaunchFill(ap, n, 0.0f, origin.stream()) == cudaSuccess);
  origin.FinishDeviceComputation();

  std::unique_ptr<dp::cuda::CudaGraphExec> graph;
  {
    dp::cuda::StreamCapture capture(origin.stream());
    REQUIRE(cudaEventRecord(fork, origin.stream()) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(side.stream(), fork, 0) == cudaSuccess);
    REQUIRE(dp::cuda::LaunchScale(xp, 2.0f, ap, n, side.stream()) == cudaSuccess);    // a = 2x
    REQUIRE(dp::cuda::LaunchScale(xp, 3.0f, bp, n, origin.stream()) == cudaSuccess);  // b = 3x, beside it
    REQUIRE(cudaEventRecord(join, side.stream()) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(origin.stream(), join, 0) == cudaSuccess);
    REQUIRE(dp::cuda::LaunchAdd(ap, bp, ap, n, origin.stream()) == cudaSuccess);  // a = 5x
    graph = capture.Finish();
  }
  CHECK(graph->nodes() >= 3);
  origin.FinishDeviceComputation();
  CHECK(ToHost(a).data<float>()[0] == 0.0f);  // recording ran nothing

  for (float value : {2.0f, 4.0f}) {
    REQUIRE(dp::cuda::LaunchFill(xp, n, value, origin.stream()) == cudaSuccess);
    graph->Launch(origin.stream());
    origin.FinishDeviceComputation();
    Tensor host = ToHost(a);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += host.data<float>()[i] != 5.0f * value;
    CHECK(wrong == 0);
  }

  SUBCASE("a synchronisation while recording fails the capture; the stream stays usable") {
    dp::cuda::StreamCapture capture(origin.stream());
    REQUIRE(dp::cuda::LaunchFill(ap, n, 7.0f, origin.stream()) == cudaSuccess);
    CHECK(cudaStreamSynchronize(origin.stream()) != cudaSuccess);
    ExpectError([&] { capture.Finish(); }, Code::kInternal);
    cudaGetLastError();
    REQUIRE(dp::cuda::LaunchFill(ap, n, 8.0f, origin.stream()) == cudaSuccess);
    origin.FinishDeviceComputation();
    CHECK(ToHost(a).data<float>()[0] == 8.0f);
  }
  SUBCASE("a capture abandoned unfinished leaves the stream usable") {
    {
      dp::cuda::StreamCapture capture(origin.stream());
      REQUIRE(dp::cuda::LaunchFill(ap, n, 7.0f, origin.stream()) == cudaSuccess);
    }
    REQUIRE(dp::cuda::LaunchFill(ap, n, 9.0f, origin.stream()) == cudaSuccess);
    origin.FinishDeviceComputation();
    CHECK(ToHost(a).data<float>()[0] == 9.0f);
  }
  graph.reset();
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
}

// A capture through the context (what the executor uses): while it records,
// another thread frees device memory and copies from the device without a
// stream. The free records no event on the captured stream (CUDA would refuse
// to query it, and it would say nothing of the work before the capture), the
// copy waits for the capture to end before it synchronises the device (which
// would otherwise fail or break the capture), and the graph replays right.
TEST_CASE("GPU: another thread's frees and copies without a stream keep clear of a capture") {
  dp::CudaContext origin(kGpu0), side(kGpu0);
  origin.SwitchToDevice();
  const int64_t n = int64_t{1} << 20;
  Tensor a({n}, DType::kFloat32, kGpu0), x({n}, DType::kFloat32, kGpu0);
  auto dropped = std::make_shared<Tensor>(dp::Dims{n}, DType::kFloat32, kGpu0);
  REQUIRE(dp::cuda::LaunchFill(x.mutable_data<float>(), n, 3.0f, origin.stream()) == cudaSuccess);
  REQUIRE(dp::cuda::LaunchFill(dropped->mutable_data<float>(), n, 1.0f, origin.stream()) == cudaSuccess);
  origin.FinishDeviceComputation();
  std::unique_ptr<dp::DeviceGraph> graph;
  Tensor copied;
  std::string thread_error, capture_error;
  {
    std::unique_ptr<dp::GraphRecording> recording = origin.BeginGraphCapture({&side});
    std::thread other([&] {
      try {
        dropped.reset();     // freed outside any op while origin is captured
        copied = ToHost(x);  // a copy without a stream: synchronises the device once the capture ended
      } catch (const std::exception& e) {
        thread_error = e.what();
      }
    });
    float* ap = a.mutable_data<float>();
    int failed = 0;  // no REQUIRE while the thread runs
    for (int i = 0; i < 200; ++i) failed += dp::cuda::LaunchFill(ap, n, static_cast<float>(i), origin.stream()) != 0;
    try {
      graph = recording->Finish();
    } catch (const std::exception& e) {
      capture_error = e.what();
    }
    recording.reset();  // the allocator and the waiting copy learn that the capture ended
    other.join();
    CHECK(failed == 0);
  }
  REQUIRE(thread_error.empty());
  REQUIRE(capture_error.empty());
  REQUIRE(copied.numel() == n);
  CHECK(copied.data<float>()[n - 1] == 3.0f);
  CHECK(graph->nodes() >= 200);
  graph->Launch(origin);
  origin.FinishDeviceComputation();
  CHECK(ToHost(a).data<float>()[n - 1] == 199.0f);
}

// FC, then Relu and Sigmoid on two streams, then Add: run 7 times as a CUDA
// graph and op by op, with a new batch each run (copied into the graph's
// buffer). With `memory` 'keep' it is captured on the second run; with
// 'share' (the training builders' default) on the third (the first run's
// sizes make a new plan), its temporaries h, r and s taking turns in the
// plan's blocks and empty after each run while y, the output, is kept. Both
// replay the op-by-op results, with no cudaMalloc in a steady step.
void CheckGraphMatchesStreams(dp::MemoryMode memory) {
  dp::NetDef net_def = dp::NetDefFromJson(R"({"name":"graphed","device":{"type":"CUDA","id":0},
    "external_inputs":["x","w","b"],"external_outputs":["y"],"ops":[
    {"type":"FC","inputs":["x","w","b"],"outputs":["h"]},
    {"type":"Relu","inputs":["h"],"outputs":["r"]},
    {"type":"Sigmoid","inputs":["h"],"outputs":["s"]},
    {"type":"Add","inputs":["r","s"],"outputs":["y"]}]})");
  net_def.memory = memory;
  const bool share = memory == dp::MemoryMode::kShare;
  auto def = std::make_shared<const dp::NetDef>(std::move(net_def));
  auto on_gpu = [](const Tensor& host) {
    Tensor dev(host.dims(), DType::kFloat32, kGpu0);
    dev.CopyFrom(host);
    return dev;
  };
  const int steps = 7, warm = share ? 3 : 2;
  std::vector<std::vector<float>> results[2];
  for (int mode = 0; mode < 2; ++mode) {
    CAPTURE(mode);
    auto ws = std::make_shared<dp::Workspace>();
    ws->Feed("w", on_gpu(RandomTensor({200, 300}, 7)));
    ws->Feed("b", on_gpu(RandomTensor({200}, 8)));
    dp::NetOptions options;
    options.streams_per_gpu = 2;  // Relu and Sigmoid fork onto two streams
    options.cuda_graphs = mode == 0 ? dp::CudaGraphs::kDefault : dp::CudaGraphs::kOff;
    dp::Net net(def, ws, options);
    CHECK(net.capture_stats().has_value() == (mode == 0));
    for (int step = 0; step < steps; ++step) {
      ws->Feed("x", on_gpu(RandomTensor({64, 300}, 10 + step)));
      const dp::DeviceMemoryStats before = dp::GetDeviceMemoryStats(kGpu0);
      net.Run();
      const dp::DeviceMemoryStats after = dp::GetDeviceMemoryStats(kGpu0);
      if (step >= warm) CHECK_MESSAGE(after.raw_allocs == before.raw_allocs, "step ", step, " called cudaMalloc");
      if (share) CHECK(ws->GetBlob("h")->empty());  // a temporary: its block waits in its slot
      Tensor y = ToHost(ws->GetTensor("y"));
      results[mode].emplace_back(y.data<float>(), y.data<float>() + y.numel());
    }
    if (mode == 0) {
      std::optional<dp::CaptureStats> stats = net.capture_stats();
      REQUIRE(stats.has_value());
      CHECK_MESSAGE(stats->runs.captures == 1, stats->reason);
      CHECK(stats->runs.replays == static_cast<uint64_t>(steps - warm));
      CHECK(stats->runs.capture_failures == 0);
      CHECK(stats->graph_nodes >= 4);
      CHECK(stats->reason.empty());
    }
  }
  // Within 1e-6: cuBLAS may pick another algorithm while a stream is captured.
  for (size_t step = 0; step < results[0].size(); ++step) {
    CAPTURE(step);
    REQUIRE(results[0][step].size() == results[1][step].size());
    size_t bad = 0;
    for (size_t i = 0; i < results[0][step].size(); ++i)
      if (std::abs(results[0][step][i] - results[1][step][i]) > 1e-6f * std::max(1.0f, std::abs(results[1][step][i])))
        ++bad;
    CHECK(bad == 0);
  }
}

// The number after "key": in a trace's JSON (-1 when absent).
double TraceNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  return at == std::string::npos ? -1 : std::stod(json.substr(at + key.size() + 3));
}

TEST_CASE("GPU: a profiled replay reports the graph's kernels and the device's time for it") {
  dp::NetDef net_def = dp::NetDefFromJson(R"({"name":"timed","device":{"type":"CUDA","id":0},
    "external_inputs":["x","w","b"],"external_outputs":["y"],"ops":[
    {"type":"FC","inputs":["x","w","b"],"outputs":["h"]},
    {"type":"Sigmoid","inputs":["h"],"outputs":["y"]}]})");
  auto ws = std::make_shared<dp::Workspace>();
  for (const auto& [name, host] : {std::pair<std::string, Tensor>{"x", RandomTensor({64, 300}, 1)},
                                   {"w", RandomTensor({200, 300}, 2)}, {"b", RandomTensor({200}, 3)}}) {
    Tensor dev(host.dims(), DType::kFloat32, kGpu0);
    dev.CopyFrom(host);
    ws->Feed(name, dev);
  }
  dp::NetOptions options;
  options.profile = true;
  dp::Net net(std::make_shared<const dp::NetDef>(std::move(net_def)), ws, options);
  for (int step = 0; step < 3; ++step) net.Run();
  REQUIRE(net.capture_stats().has_value());
  REQUIRE(net.capture_stats()->runs.replays == 1);
  const std::string trace = net.TraceJson();
  CAPTURE(trace);
  // FC's GEMM (one kernel or more) and its bias pass, Sigmoid's.
  CHECK(TraceNumber(trace, "kernels") >= 3);
  CHECK(TraceNumber(trace, "kernels") <= static_cast<double>(net.capture_stats()->graph_nodes));
  CHECK(TraceNumber(trace, "device_us") > 0);
}

TEST_CASE("GPU: a net on one GPU runs as a CUDA graph from its second run, equal to it op by op") {
  CheckGraphMatchesStreams(dp::MemoryMode::kKeep);
}

TEST_CASE("GPU: a net whose memory plan shares blocks runs as a CUDA graph, equal to it op by op") {
  CheckGraphMatchesStreams(dp::MemoryMode::kShare);
}

#endif  // DP_WITH_CUDA
