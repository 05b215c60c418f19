// Core engine: dtypes, devices, storage, tensors (sharing and copy-on-write),
// blobs, workspaces, events, contexts, logging, errors.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/blob.h"
#include "core/context.h"
#include "core/cpu_budget.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/event.h"
#include "core/logging.h"
#include "core/memory_limit.h"
#include "core/parallel_for.h"
#include "core/scope.h"
#include "core/philox.h"
#include "core/portable_math.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "temp_dir.h"

using namespace dp;
using dp::testing::TempDir;

namespace {

// Runs `f`, which must throw kOutOfMemory with `needle` in its message.
void ExpectOutOfMemory(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL("no kOutOfMemory");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kOutOfMemory);
    CHECK_MESSAGE(e.message().find(needle) != std::string::npos, e.message());
  }
}

}  // namespace

TEST_CASE("dtype sizes, names and conversion") {
  CHECK(DTypeSize(DType::kFloat32) == 4);
  CHECK(DTypeSize(DType::kFloat16) == 2);
  CHECK(DTypeSize(DType::kBFloat16) == 2);
  CHECK(DTypeSize(DType::kFloat64) == 8);
  CHECK(DTypeSize(DType::kInt32) == 4);
  CHECK(DTypeSize(DType::kInt64) == 8);
  CHECK(DTypeSize(DType::kUInt8) == 1);
  CHECK(DTypeSize(DType::kBool) == 1);
  CHECK(DTypeName(DType::kBFloat16) == "bfloat16");
  DType t;
  CHECK(DTypeFromInt(5, &t));
  CHECK(t == DType::kInt32);
  CHECK_FALSE(DTypeFromInt(0, &t));
  CHECK_FALSE(DTypeFromInt(9, &t));
  CHECK_FALSE(DTypeFromInt(-1, &t));
}

TEST_CASE("device names and scopes") {
  CHECK(DeviceName({DeviceType::kCUDA, 1}) == "cuda:1");
  CHECK(ReplicaScope({DeviceType::kCPU, 0}) == "cpu_0/");
  CHECK(ReplicaScope({DeviceType::kCUDA, 3}) == "cuda_3/");
  CHECK(DeviceCount(DeviceType::kCPU) == 1);
  CHECK(DeviceCount(DeviceType::kCUDA) >= 0);
  CHECK(ScopedName("cpu_1/", "w") == "cpu_1/w");
}

TEST_CASE("tensor allocation is 64-byte aligned and sized") {
  for (int64_t n : {1, 3, 17, 1000, 4097}) {
    Tensor t({n}, DType::kFloat32);
    CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
    CHECK(t.nbytes() == static_cast<size_t>(n) * 4);
    CHECK(t.storage()->nbytes() >= t.nbytes());
  }
  Tensor empty({0, 5}, DType::kFloat32);
  CHECK(empty.numel() == 0);
  CHECK(empty.nbytes() == 0);
  Tensor scalar(Dims{}, DType::kInt64);
  CHECK(scalar.numel() == 1);
  CHECK(scalar.ndim() == 0);
}

TEST_CASE("tensor shape errors") {
  CHECK_THROWS_AS(Tensor({-1}, DType::kFloat32), Error);
  try {
    Tensor({2, -3}, DType::kFloat32);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kShape);
    CHECK(std::string(e.message()).find("[2, -3]") != std::string::npos);
  }
  try {
    Tensor({INT64_MAX, 4}, DType::kFloat32);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kShape);
  }
  Tensor t({2, 3}, DType::kFloat32);
  CHECK(t.dim(-1) == 3);
  CHECK_THROWS_AS(t.dim(2), Error);
  CHECK_THROWS_AS(t.Reshape({7}), Error);
  t.Reshape({3, 2});
  CHECK(t.dims() == Dims{3, 2});
  try {
    (void)t.data<double>();
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kDType);
    CHECK(e.message().find("float64") != std::string::npos);
    CHECK(e.message().find("float32[3, 2]") != std::string::npos);
  }
}

TEST_CASE("resize reuses unshared storage and replaces shared storage") {
  Tensor t({4}, DType::kFloat32);
  const void* p = t.raw_data();
  t.Resize({2, 2}, DType::kFloat32);
  CHECK(t.raw_data() == p);  // same bytes, sole owner: reused
  Tensor copy = t;           // now shared
  t.Resize({2, 2}, DType::kFloat32);
  CHECK(t.raw_data() != p);  // a writer never touches memory others see
  CHECK(copy.raw_data() == p);
  t.Resize({100000}, DType::kFloat32);
  CHECK(t.numel() == 100000);
}

TEST_CASE("mutable_data copies on write when storage is shared") {
  Tensor a({3}, DType::kInt32);
  int32_t* pa = a.mutable_data<int32_t>();
  pa[0] = 1, pa[1] = 2, pa[2] = 3;
  Tensor b = a;
  CHECK(b.raw_data() == a.raw_data());
  int32_t* pb = b.mutable_data<int32_t>();
  CHECK(static_cast<const void*>(pb) != a.raw_data());
  CHECK(pb[1] == 2);
  pb[1] = 20;
  CHECK(a.data<int32_t>()[1] == 2);
}

TEST_CASE("caller memory is never written: borrowed and adopted storage") {
  float buf[4] = {1, 2, 3, 4};
  Tensor t = Tensor::FromStorage({4}, DType::kFloat32, Storage::Borrow({}, buf, sizeof buf));
  CHECK(t.raw_data() == buf);
  float* w = t.mutable_data<float>();
  CHECK(w != buf);
  w[0] = 100;
  CHECK(buf[0] == 1);

  static int deleted = 0;
  deleted = 0;
  float* heap = new float[2]{5, 6};
  {
    Tensor owned = Tensor::FromStorage({2}, DType::kFloat32,
                                       Storage::Adopt({}, heap, 2 * sizeof(float),
                                                      {[](void* d, void* ud) {
                                                         ++*static_cast<int*>(ud);
                                                         delete[] static_cast<float*>(d);
                                                       },
                                                       &deleted}));
    Tensor second = owned;
    CHECK(deleted == 0);
    owned = Tensor();
    CHECK(deleted == 0);
  }
  CHECK(deleted == 1);
  CHECK_THROWS_AS(Tensor::FromStorage({8}, DType::kFloat32, Storage::Borrow({}, buf, sizeof buf)), Error);
}

TEST_CASE("CopyFrom makes an independent deep copy") {
  Tensor a({2, 2}, DType::kFloat64);
  double* p = a.mutable_data<double>();
  for (int i = 0; i < 4; ++i) p[i] = i * 1.5;
  Tensor b;
  b.CopyFrom(a);
  CHECK(b.dims() == a.dims());
  CHECK(b.raw_data() != a.raw_data());
  CHECK(std::memcmp(b.raw_data(), a.raw_data(), a.nbytes()) == 0);
  CHECK_THROWS_AS(b.CopyFrom(Tensor()), Error);
}

TEST_CASE("CUDA storage is unavailable or works, never crashes") {
  if (DeviceCount(DeviceType::kCUDA) == 0) {
    try {
      Tensor t({4}, DType::kFloat32, {DeviceType::kCUDA, 0});
      // Built with CUDA but no device: the allocator must fail with a status.
      FAIL("allocating on a missing CUDA device succeeded");
    } catch (const Error& e) {
      CHECK((e.code() == Code::kUnavailable || e.code() == Code::kInternal || e.code() == Code::kOutOfMemory));
      MESSAGE("CUDA allocation without a device: " << e.message());
    }
  }
}

struct Counter {
  int value = 0;
};

TEST_CASE("blobs hold tensors and other objects") {
  Blob b("x");
  CHECK(b.empty());
  CHECK_FALSE(b.IsType<Tensor>());
  try {
    (void)b.Get<Tensor>();
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kNotFound);
    CHECK(e.message().find("'x'") != std::string::npos);
  }
  b.GetMutable<Counter>()->value = 7;
  CHECK(b.IsType<Counter>());
  CHECK(b.Get<Counter>().value == 7);
  try {
    (void)b.Get<Tensor>();
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kDType);
    CHECK(e.message().find("Counter") != std::string::npos);
  }
  b.GetMutable<Tensor>();
  CHECK(b.IsType<Tensor>());
  b.Clear();
  CHECK(b.empty());
}

TEST_CASE("workspace: create, find, list by scope, feed, concurrent access") {
  Workspace ws;
  Blob* a = ws.CreateBlob("cpu_0/w");
  CHECK(ws.CreateBlob("cpu_0/w") == a);
  CHECK(ws.GetBlob("nope") == nullptr);
  CHECK_THROWS_AS(ws.CreateBlob(""), Error);
  ws.Feed("cpu_0/b", Tensor({1}, DType::kFloat32));
  ws.Feed("cpu_1/w", Tensor({1}, DType::kFloat32));
  ws.Feed("cpu_0/w", Tensor({2}, DType::kFloat32));
  CHECK(ws.Blobs("cpu_0/") == std::vector<std::string>{"cpu_0/b", "cpu_0/w"});
  CHECK(ws.Blobs().size() == 3);
  CHECK(ws.GetTensor("cpu_0/w").numel() == 2);
  CHECK_THROWS_AS(ws.GetTensor("missing"), Error);

  std::vector<std::thread> threads;
  std::atomic<int> found{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        std::string name = "t";
        name += std::to_string(t);
        name += '/';
        name += std::to_string(i);
        ws.CreateBlob(name);
        if (ws.GetBlob("cpu_0/w") != nullptr) ++found;
        (void)ws.Blobs("t0/");
      }
    });
  for (auto& th : threads) th.join();
  CHECK(found == 2000);
  CHECK(ws.GetBlob("t3/499") != nullptr);
}

TEST_CASE("CPU events: record, finish, errors, timeout, reset") {
  CpuContext ctx;
  auto ev = ctx.CreateEvent();
  CHECK(ev->Query() == EventStatus::kInitialized);
  ev->Record(ctx);
  CHECK(ev->Query() == EventStatus::kScheduled);
  CHECK_FALSE(ev->Finish(std::chrono::milliseconds(1)));  // bounded wait
  std::thread setter([&] { ev->SetFinished(); });
  CHECK(ev->Finish(std::chrono::milliseconds(10000)));
  setter.join();
  CHECK(ev->Query() == EventStatus::kSuccess);
  ev->Wait(ctx);  // already finished: returns at once

  ev->Reset();
  CHECK(ev->Query() == EventStatus::kInitialized);
  ev->Record(ctx);
  ev->SetFinished("op 3 failed");
  ev->SetFinished();  // first outcome wins
  CHECK(ev->Query() == EventStatus::kFailed);
  CHECK(ev->ErrorMessage() == "op 3 failed");
  CHECK_THROWS_AS(ev->Finish(), Error);
  CHECK_THROWS_AS(ev->Wait(ctx), Error);
  CHECK_THROWS_AS(ev->Record(ctx), Error);  // record twice without reset
}

TEST_CASE("contexts per device type") {
  auto cpu = CreateContext({DeviceType::kCPU, 2});
  CHECK(cpu->device() == DeviceOption{DeviceType::kCPU, 2});
  CHECK_FALSE(cpu->IsAsync());
  if (DeviceCount(DeviceType::kCUDA) == 0) {
    // Without CUDA support the factory is missing; with it, creating a context
    // on a missing device may fail when it first touches the driver. Either
    // way: an Error, never a crash.
    try {
      auto c = CreateContext({DeviceType::kCUDA, 0});
      c->SwitchToDevice();
      c->FinishDeviceComputation();
    } catch (const Error& e) {
      MESSAGE("CUDA context without a device: " << e.message());
    }
  }
}

TEST_CASE("logging goes to the installed callback at or above the level") {
  struct Seen {
    std::vector<std::pair<int, std::string>> msgs;
  } seen;
  SetLogSink([](void* ud, int32_t level, const char* m) { static_cast<Seen*>(ud)->msgs.emplace_back(level, m); },
             &seen, LogLevel::kInfo);
  DP_LOG(kDebug, "hidden");
  DP_LOG(kInfo, "shown ", 42);
  DP_LOG(kError, "bad");
  SetLogSink(nullptr, nullptr, LogLevel::kWarning);
  DP_LOG(kError, "to stderr, not the callback");
  REQUIRE(seen.msgs.size() == 2);
  CHECK(seen.msgs[0] == std::make_pair(1, std::string("shown 42")));
  CHECK(seen.msgs[1].first == 3);
}

TEST_CASE("a log callback may log and may try to replace itself without deadlocking") {
  struct Seen {
    std::vector<std::string> msgs;
  } seen;
  // The callback logs (as a dp call it made would): that message goes to
  // stderr, not into the callback again; replacing the sink from within is
  // ignored.
  SetLogSink(
      [](void* ud, int32_t, const char* m) {
        static_cast<Seen*>(ud)->msgs.emplace_back(m);
        DP_LOG(kError, "logged from inside the callback");
        SetLogSink(nullptr, nullptr, LogLevel::kError);
      },
      &seen, LogLevel::kInfo);
  DP_LOG(kWarning, "first");
  DP_LOG(kWarning, "second");  // still the same sink
  SetLogSink(nullptr, nullptr, LogLevel::kWarning);
  CHECK(seen.msgs == std::vector<std::string>{"first", "second"});
}

// Counter-based random numbers (core/philox.h): the known answers of
// Random123's kat_vectors file, and the portable log and cosine the normals
// use, against long double.
TEST_CASE("Philox4x32-10 gives Random123's known answers") {
  struct Kat {
    philox::Block ctr;
    uint32_t key0, key1;
    philox::Block expected;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& k : kats) {
    const philox::Block out = philox::Philox4x32(k.ctr, k.key0, k.key1);
    for (int w = 0; w < 4; ++w) CHECK(out.w[w] == k.expected.w[w]);
  }
  // The stream's counter layout: block index in words 0-1, stream in 2-3, seed as the key.
  const philox::Block b = philox::StreamBlock(0x299f31d0a4093822ULL, 0x0370734413198a2eULL, 0x85a308d3243f6a88ULL);
  CHECK(b.w[0] == 0xd16cfe09);
  CHECK(b.w[3] == 0x24126ea1);
}

TEST_CASE("portable log and cosine match long double to a few ulp") {
  std::mt19937_64 gen(42);
  auto check_log = [](double x) {
    const long double want = std::log(static_cast<long double>(x));
    const double got = portable::Log(x);
    const double err = static_cast<double>(std::abs(static_cast<long double>(got) - want));
    CHECK_MESSAGE(err <= 1e-15 * std::max(1.0, std::abs(static_cast<double>(want))) + 1e-300, "log(", x, ")");
    CHECK_MESSAGE(err <= 4e-16 * std::abs(static_cast<double>(want)), "log(", x, ") relative");
  };
  for (double x : {1.0, 0x1p-53, 0x1p-1022, 0.5, 2.0, 0x1.6a09e667f3bcdp+0, 0x1.6a09e667f3bcep+0,
                   0x1.6a09e667f3bccp-1, 1.0 - 0x1p-53, 1.0 + 0x1p-52, 10.0, 1e300})
    if (x != 1.0) check_log(x);
  CHECK(portable::Log(1.0) == 0.0);
  for (int i = 0; i < 200000; ++i) {
    check_log(static_cast<double>((gen() >> 11) + 1) * 0x1p-53);  // the normals' (0, 1]
    check_log(std::ldexp(1.0 + static_cast<double>(gen() >> 11) * 0x1p-53, static_cast<int>(gen() % 200) - 100));
  }
  const long double two_pi = 6.283185307179586476925286766559005768L;
  auto check_cos = [&](uint64_t turns) {
    const long double t = static_cast<long double>(turns & ((uint64_t{1} << 53) - 1)) * 0x1p-53L;
    const double got = portable::CosTurns(turns);
    CHECK_MESSAGE(std::abs(static_cast<long double>(got) - std::cos(two_pi * t)) <= 1e-15L, "cos of ", turns);
    // The sine, as the odd normals take it.
    const double sin = portable::CosTurns(turns - (uint64_t{1} << 51));
    CHECK_MESSAGE(std::abs(static_cast<long double>(sin) - std::sin(two_pi * t)) <= 1e-15L, "sin of ", turns);
  };
  for (uint64_t q = 0; q <= 8; ++q) {  // eighth turns and their neighbours
    const uint64_t at = q << 50;
    for (uint64_t d : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}}) check_cos(at + d);
  }
  CHECK(portable::CosTurns(0) == 1.0);
  CHECK(portable::CosTurns(uint64_t{1} << 52) == -1.0);
  for (int i = 0; i < 200000; ++i) check_cos(gen() >> 11);
}

TEST_CASE("Philox uniforms and normals have the right moments and depend on (seed, index) only") {
  const uint64_t seed = 0x123456789abcdefULL;
  const int n = 400000;
  double su = 0, suu = 0, sf = 0;
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = philox::UniformDouble(philox::StreamBits64(seed, 0, static_cast<uint64_t>(i)));
    REQUIRE((u >= 0.0 && u < 1.0));
    su += u;
    suu += u * u;
    const float f = philox::UniformFloat(philox::StreamWord(seed, 7, static_cast<uint64_t>(i)));
    REQUIRE((f >= 0.0f && f < 1.0f));
    sf += f;
    const double z = philox::StandardNormal(seed, 0, static_cast<uint64_t>(i));
    s1 += z;
    s2 += z * z;
    s3 += z * z * z;
    s4 += z * z * z * z;
  }
  // Standard errors: uniform mean 0.00046, normal mean 0.0016, var 0.0022, 3rd 0.0039, 4th 0.016.
  CHECK(std::abs(su / n - 0.5) < 0.003);
  CHECK(std::abs(suu / n - 1.0 / 3.0) < 0.003);
  CHECK(std::abs(sf / n - 0.5) < 0.003);
  CHECK(std::abs(s1 / n) < 0.008);
  CHECK(std::abs(s2 / n - 1.0) < 0.012);
  CHECK(std::abs(s3 / n) < 0.02);
  CHECK(std::abs(s4 / n - 3.0) < 0.08);
  // Pure functions: any order, any subset gives the same values; another seed or stream others.
  for (uint64_t i : {uint64_t{5}, uint64_t{1} << 40, ~uint64_t{0}}) {
    CHECK(philox::NormalValue(seed, i, 1.0, 2.0) == philox::NormalValue(seed, i, 1.0, 2.0));
    CHECK(philox::StreamWord(seed, 3, i) == philox::StreamBlock(seed, 3, i / 4).w[i % 4]);
    CHECK(philox::StreamWord(seed, 3, i) != philox::StreamWord(seed, 4, i));
    CHECK(philox::UniformValue(seed, i, 0, 1) != philox::UniformValue(seed + 1, i, 0, 1));
  }
  // The 24-bit threshold is exactly "UniformFloat(w) >= p".
  for (double p : {0.0, 0.1, 0.5, 0.3333333333333333, 1.0 - 0x1p-30, 0x1p-24, 0x1p-25}) {
    const uint32_t t = philox::UniformThreshold(p);
    for (uint32_t k : {t == 0 ? 0u : t - 1, t, t + 1})
      if (k < (1u << 24)) CHECK((static_cast<double>(philox::UniformFloat(k << 8)) >= p) == (k >= t));
  }
}

TEST_CASE("error codes have stable names") {
  CHECK(std::string(CodeName(Code::kInvalidNet)) == "INVALID_NET");
  CHECK(static_cast<int>(Code::kDType) == 17);
  Error e(Code::kShape, "inner");
  e.Prepend("outer");
  CHECK(e.message() == "outer: inner");
}

// Memory accounting (issue 10): the per-device statistics of dp's storage,
// and the budgets that cap what a workspace's blobs hold.
TEST_CASE("memory statistics count dp's storage, not caller memory") {
  ResetPeakMemory(DeviceType::kCPU);
  const MemoryStats start = GetMemoryStats(DeviceType::kCPU);
  CHECK(start.peak == start.allocated);
  {
    Tensor a({1000}, DType::kFloat32);
    CHECK(GetMemoryStats(DeviceType::kCPU).allocated == start.allocated + 4000);
    Tensor b({500}, DType::kFloat64);
    CHECK(GetMemoryStats(DeviceType::kCPU).allocated == start.allocated + 8000);
    float buf[16] = {};
    Tensor borrowed = Tensor::FromStorage({16}, DType::kFloat32, Storage::Borrow({}, buf, sizeof buf));
    CHECK(GetMemoryStats(DeviceType::kCPU).allocated == start.allocated + 8000);
  }
  MemoryStats end = GetMemoryStats(DeviceType::kCPU);
  CHECK(end.allocated == start.allocated);
  CHECK(end.peak == start.allocated + 8000);
  ResetPeakMemory(DeviceType::kCPU);
  CHECK(GetMemoryStats(DeviceType::kCPU).peak == start.allocated);
}

TEST_CASE("a budget charges a tensor's storage, refuses past its limit and gets the bytes back") {
  auto budget = std::make_shared<MemoryBudget>(10000);
  Tensor t;
  t.set_budget(budget);
  t.Resize({1000}, DType::kFloat32);
  CHECK(budget->used() == 4000);
  CHECK(t.storage()->budget() == budget);
  // Growing gives the old block back before taking the new one.
  t.Resize({2000}, DType::kFloat32);
  CHECK(budget->used() == 8000);
  try {
    t.Resize({3000}, DType::kFloat32);
    FAIL("12000 bytes fit under a 10000-byte limit");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kOutOfMemory);
    CHECK_MESSAGE(e.message().find("10000") != std::string::npos, e.message());
    CHECK_MESSAGE(e.message().find("12000") != std::string::npos, e.message());
  }
  CHECK_FALSE(t.defined());  // its old block went back first; it is left empty
  CHECK(budget->used() == 0);
  t.Resize({1000}, DType::kFloat32);
  CHECK(budget->used() == 4000);

  // Copy-on-write copies are charged too; copies carry the budget.
  Tensor shared = t;
  CHECK(shared.budget() == budget);
  t.mutable_data<float>()[0] = 1;
  CHECK(budget->used() == 8000);
  shared = Tensor();
  CHECK(budget->used() == 4000);
  // ShareData views another tensor's storage but keeps its own budget.
  Tensor other({10}, DType::kFloat32);
  Tensor view;
  view.set_budget(budget);
  view.ShareData(other);
  CHECK(view.budget() == budget);
  CHECK(view.raw_data() == other.raw_data());
  CHECK(budget->used() == 4000);  // other's storage is not the budget's
  // A refused copy-on-write leaves the tensor as it was.
  MemoryBudget* raw = budget.get();
  Tensor big;
  big.set_budget(budget);
  big.Resize({1500}, DType::kFloat32);  // 6000: 10000 in use
  Tensor big_copy = big;
  CHECK_THROWS_AS(big.mutable_data<float>(), Error);
  CHECK(big.raw_data() == big_copy.raw_data());
  CHECK(raw->used() == 10000);
  t = Tensor();
  big = Tensor();
  big_copy = Tensor();
  CHECK(raw->used() == 0);
  // Storage outlives the tensor's budget handle: the bytes still go back.
  {
    Tensor keep;
    keep.set_budget(budget);
    keep.Resize({10}, DType::kFloat32);
    budget.reset();
    keep.set_budget(nullptr);
    CHECK(raw == keep.storage()->budget().get());
  }
}

TEST_CASE("a budget's limit applies per device: the host (all cpu replicas) and each GPU") {
  MemoryBudget b(1000);
  const DeviceOption cpu0{DeviceType::kCPU, 0}, cpu1{DeviceType::kCPU, 1};
  const DeviceOption gpu0{DeviceType::kCUDA, 0}, gpu1{DeviceType::kCUDA, 1};
  b.Charge(cpu0, 800);
  CHECK_THROWS_AS(b.Charge(cpu1, 300), Error);  // cpu:1 is the same host memory
  b.Charge(gpu0, 900);
  b.Charge(gpu1, 1000);
  try {
    b.Charge(gpu0, 200);
    FAIL("1100 bytes fit in cuda:0's 1000");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kOutOfMemory);
    for (const char* needle : {"1000 bytes on cuda:0", "200 bytes asked", "900 bytes in use"})
      CHECK_MESSAGE(e.message().find(needle) != std::string::npos, e.message());
  }
  CHECK(b.used() == 2700);
  CHECK(b.used(cpu1) == 800);
  CHECK(b.used(gpu0) == 900);
  CHECK(b.used(gpu1) == 1000);
  b.Release(gpu1, 1000);
  b.Release(gpu0, 900);
  b.Release(cpu0, 800);
  CHECK(b.used() == 0);
  try {
    b.Charge({DeviceType::kCUDA, MemoryBudget::kMaxCudaDevices}, 1);
    FAIL("a budget past the last GPU id it covers");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kUnavailable);
  }
}

TEST_CASE("the host's device statistics: dp's host storage, nothing cached, its allocations and frees") {
  const DeviceOption cpu{DeviceType::kCPU, 0};
  ResetPeakDeviceMemory(cpu);
  const DeviceMemoryStats start = GetDeviceMemoryStats(cpu);
  CHECK(start.reserved == start.allocated);
  CHECK(start.peak == start.allocated);
  {
    Tensor a({1000}, DType::kFloat32);
    const DeviceMemoryStats during = GetDeviceMemoryStats({DeviceType::kCPU, 3});  // every replica: the host
    CHECK(during.allocated == start.allocated + 4000);
    CHECK(during.reserved == during.allocated);
    CHECK(during.raw_allocs == start.raw_allocs + 1);
    CHECK(during.raw_frees == start.raw_frees);
  }
  const DeviceMemoryStats end = GetDeviceMemoryStats(cpu);
  CHECK(end.allocated == start.allocated);
  CHECK(end.peak == start.allocated + 4000);
  CHECK(end.raw_frees == start.raw_frees + 1);
  ResetPeakDeviceMemory(cpu);
  CHECK(GetDeviceMemoryStats(cpu).peak == start.allocated);
}

TEST_CASE("an unlimited budget counts; a workspace's budget has its limit") {
  auto budget = std::make_shared<MemoryBudget>();
  Tensor t;
  t.set_budget(budget);
  t.Resize({1 << 20}, DType::kUInt8);
  CHECK(budget->limit() == 0);
  CHECK(budget->used() == (1u << 20));
  Workspace unlimited;
  CHECK(unlimited.budget() != nullptr);
  CHECK(unlimited.budget()->limit() == 0);
  WorkspaceOptions o;
  o.max_bytes = 12345;
  Workspace capped(o);
  CHECK(capped.budget()->limit() == 12345);
  // Fed tensors are the caller's: they do not count.
  capped.Feed("x", Tensor({100}, DType::kFloat32));
  CHECK(capped.budget()->used() == 0);
}

// ---- the CPU budget and intra-op parallelism -------------------------------

namespace {

// A fake /sys/fs/cgroup: path -> contents.
std::function<std::optional<std::string>(const std::string&)> FakeCgroupFs(
    std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("cgroup v2 quota: the smallest over the group and its ancestors, rounded up") {
  const std::string self = "0::/user.slice/job.scope\n";
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({})) == std::nullopt);
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/user.slice/job.scope/cpu.max", "max 100000\n"}})) ==
        std::nullopt);
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/user.slice/job.scope/cpu.max", "200000 100000\n"}})) == 2);
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/user.slice/job.scope/cpu.max", "150000 100000\n"}})) == 2);
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/user.slice/job.scope/cpu.max", "50000 100000\n"}})) == 1);
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/user.slice/job.scope/cpu.max", "400000 100000"},
                                               {"/user.slice/cpu.max", "300000 100000"}})) == 3);
  // A container whose namespace shows its own group at the mount point.
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/cpu.max", "100000 100000"}})) == 1);
  CHECK(dp::CgroupCpuLimit("0::/\n", FakeCgroupFs({{"/cpu.max", "300000 100000"}})) == 3);
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/user.slice/job.scope/cpu.max", "garbage"}})) == std::nullopt);
}

TEST_CASE("cgroup v1 quota from the cpu controller's hierarchy") {
  const std::string self = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n";
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n"},
                                               {"/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n"}})) ==
        std::nullopt);
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n"},
                                               {"/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n"}})) == 3);
  CHECK(dp::CgroupCpuLimit(self, FakeCgroupFs({{"/cpu/cpu.cfs_quota_us", "100000"},
                                               {"/cpu/cpu.cfs_period_us", "100000"}})) == 1);
  // The memory hierarchy's files are not the cpu controller's.
  CHECK(dp::CgroupCpuLimit("3:memory:/x\n", FakeCgroupFs({{"/memory/x/cpu.cfs_quota_us", "100000"},
                                                          {"/memory/x/cpu.cfs_period_us", "100000"}})) ==
        std::nullopt);
}

TEST_CASE("the CPU budget: usable CPUs capped by the application's limit") {
  const int usable = dp::UsableCpus();
  REQUIRE(usable >= 1);
  CHECK(dp::CpuBudget() == usable);
  dp::SetCpuThreadLimit(1);
  CHECK(dp::CpuBudget() == 1);
  CHECK(dp::IntraOpThreads() == 1);
  dp::SetCpuThreadLimit(usable + 5);  // a cap, never more than the CPUs
  CHECK(dp::CpuBudget() == usable);
  dp::SetCpuThreadLimit(0);
  CHECK(dp::CpuBudget() == usable);
  {
    dp::IntraOpThreadsScope scope(1);
    CHECK(dp::IntraOpThreads() == 1);
    CHECK(dp::ParallelChunks(1000, 1) == 1);
  }
  CHECK(dp::IntraOpThreads() == usable);
}

TEST_CASE("ParallelForChunks covers the range once, in aligned chunks, on several threads") {
  for (int chunks : {1, 2, 3, 7}) {
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{64}, int64_t{1000}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::pair<int64_t, int64_t>> ranges(static_cast<size_t>(chunks), {-1, -1});
      dp::ParallelForChunks(n, chunks, 16, [&](int c, int64_t b, int64_t e) {
        ranges[static_cast<size_t>(c)] = {b, e};
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) CHECK(hits[static_cast<size_t>(i)].load() == 1);
      for (int c = 0; c < chunks; ++c) {
        const auto [b, e] = ranges[static_cast<size_t>(c)];
        CHECK(b >= 0);
        CHECK(b <= e);
        if (c + 1 < chunks && e < n) CHECK(e % 16 == 0);  // cut at multiples of the alignment
      }
    }
  }
  // With more than one CPU the team's helpers take part.
  if (dp::UsableCpus() > 1) {
    std::mutex mu;
    std::set<std::thread::id> threads;
    for (int round = 0; round < 200 && threads.size() < 2; ++round)
      dp::ParallelForChunks(2, 2, 1, [&](int, int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // work, not synchronisation
        std::lock_guard<std::mutex> lock(mu);
        threads.insert(std::this_thread::get_id());
      });
    CHECK(threads.size() == 2);
    CHECK(dp::ComputeTeamHelpers() == dp::UsableCpus() - 1);
  }
  // An op given one thread runs every chunk it cut on its own thread (a
  // helper would spin on a CPU another replica was given).
  {
    dp::IntraOpThreadsScope one(1);
    std::mutex mu;
    std::set<std::thread::id> threads;
    for (int round = 0; round < 20; ++round)
      dp::ParallelForChunks(4, 4, 1, [&](int, int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // time for a helper to take one
        std::lock_guard<std::mutex> lock(mu);
        threads.insert(std::this_thread::get_id());
      });
    CHECK(threads == std::set<std::thread::id>{std::this_thread::get_id()});
  }
}

TEST_CASE("ParallelForChunks rethrows a chunk's error after the others finish; nested calls run inline") {
  std::atomic<int> ran{0};
  CHECK_THROWS_WITH_AS(dp::ParallelForChunks(8, 8, 1,
                                             [&](int c, int64_t, int64_t) {
                                               ran.fetch_add(1);
                                               if (c == 3) DP_THROW(dp::Code::kShape, "chunk three failed");
                                             }),
                       doctest::Contains("chunk three failed"), dp::Error);
  CHECK(ran.load() >= 1);
  CHECK(ran.load() <= 8);
  // The team is free again, and an op inside an op (the team busy) runs alone.
  std::atomic<int> inner{0};
  dp::ParallelForChunks(4, 4, 1, [&](int, int64_t, int64_t) {
    dp::ParallelForChunks(3, 3, 1, [&](int, int64_t, int64_t) { inner.fetch_add(1); });
  });
  CHECK(inner.load() == 12);
}

TEST_CASE("a slice of storage keeps its parent alive and is copied before it is written") {
  dp::Tensor parent({4, 2}, dp::DType::kFloat32);
  float* p = parent.mutable_data<float>();
  for (int i = 0; i < 8; ++i) p[i] = static_cast<float>(i);
  dp::Tensor half = dp::Tensor::FromStorage({2, 2}, dp::DType::kFloat32,
                                            dp::Storage::Slice(parent.storage(), 4 * sizeof(float), 4 * sizeof(float)));
  CHECK(half.data<float>() == p + 4);
  CHECK(parent.storage().use_count() == 2);
  parent = dp::Tensor();  // the slice keeps the memory
  CHECK(half.data<float>()[0] == 4.0f);
  float* w = half.mutable_data<float>();  // written: a fresh copy, the parent untouched
  CHECK(w[3] == 7.0f);
  CHECK(half.storage()->library_owned());
  CHECK_THROWS_AS(dp::Storage::Slice(half.storage(), 8, 16), dp::Error);
}

// ---- zero-filled storage and the host memory bound (issue 25 items 6, 11) ----

TEST_CASE("zero-filled storage: aligned, zero, counted and charged; large blocks mapped, writable like any other") {
  auto budget = std::make_shared<MemoryBudget>(64 << 20);
  const MemoryStats start = GetMemoryStats(DeviceType::kCPU);
  for (size_t n : {size_t{0}, size_t{1}, size_t{4000}, (size_t{1} << 20) - 1, size_t{1} << 20, size_t{12345678}}) {
    CAPTURE(n);
    // Dirty memory first, so that a reused block shows whether it was cleared.
    if (n > 0) std::memset(Storage::Allocate({}, n)->data(), 0xab, n);
    auto s = Storage::AllocateZeroed({}, n, budget);
    CHECK(s->nbytes() == n);
    CHECK(s->library_owned());
    CHECK(reinterpret_cast<uintptr_t>(s->data()) % kCpuAlignment == 0);
    CHECK(budget->used() == n);
    CHECK(GetMemoryStats(DeviceType::kCPU).allocated == start.allocated + n);
    const auto* p = static_cast<const unsigned char*>(s->data());
    CHECK(std::all_of(p, p + n, [](unsigned char b) { return b == 0; }));
    if (n > 0) {
      std::memset(s->data(), 0x5a, n);  // writable to its last byte
      CHECK(p[n - 1] == 0x5a);
    }
  }
  CHECK(budget->used() == 0);
  CHECK(GetMemoryStats(DeviceType::kCPU).allocated == start.allocated);
  auto small = std::make_shared<MemoryBudget>(1000);
  ExpectOutOfMemory([&] { Storage::AllocateZeroed({}, 1 << 20, small); }, "1000");
  CHECK(small->used() == 0);
  CHECK(GetMemoryStats(DeviceType::kCPU).allocated == start.allocated);
  CHECK_THROWS(Storage::AllocateZeroed({DeviceType::kCUDA, 0}, 16));

  // A tensor of zeros is an ordinary tensor: written in place, resized into its block.
  Tensor z = Tensor::Zeros({1 << 20}, DType::kFloat32, budget);
  CHECK(z.budget() == budget);
  CHECK(z.writable_in_place());
  const void* block = z.raw_data();
  z.mutable_data<float>()[(1 << 20) - 1] = 2.5f;
  CHECK(z.data<float>()[0] == 0.0f);
  CHECK(z.data<float>()[(1 << 20) - 1] == 2.5f);
  z.Resize({600000}, DType::kFloat32);
  CHECK(z.raw_data() == block);
  z = Tensor();
  CHECK(budget->used() == 0);
  CHECK(Tensor::Zeros({0, 3}, DType::kInt64).nbytes() == 0);
}

TEST_CASE("dp's host storage together is bounded by the memory the process may use") {
  const MemoryLimit& limit = ProcessMemoryLimit();
  CHECK(limit.bytes > (64u << 20));  // no machine that runs dp has less
  CHECK(!limit.source.empty());
  const long pages = sysconf(_SC_PHYS_PAGES);
  CHECK(limit.bytes <= static_cast<uint64_t>(pages) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  MESSAGE("this process may use " << limit.bytes << " bytes (" << limit.source << ")");
  const MemoryStats start = GetMemoryStats(DeviceType::kCPU);
  const size_t past = static_cast<size_t>(limit.bytes - start.allocated + 1);
  ExpectOutOfMemory([&] { Storage::Allocate({}, past); }, limit.source);
  ExpectOutOfMemory([&] { Storage::AllocateZeroed({}, past); }, std::to_string(limit.bytes));
  ExpectOutOfMemory([&] { Tensor t({static_cast<int64_t>(past)}, DType::kUInt8); }, "this process may use");
  // A workspace's budget is charged first and gets its bytes back.
  auto budget = std::make_shared<MemoryBudget>();
  ExpectOutOfMemory([&] { Storage::Allocate({}, past, budget); }, "cpu");
  CHECK(budget->used() == 0);
  CHECK(GetMemoryStats(DeviceType::kCPU).allocated == start.allocated);
  // What is left still fits: 1 GiB of it (only reserved here, never touched).
  { auto fits = Storage::AllocateZeroed({}, static_cast<size_t>(std::min<uint64_t>(1 << 30, limit.bytes - start.allocated))); }
}

TEST_CASE("the cgroup memory limit: the tightest of the process's cgroups and their ancestors, v1 and v2") {
  TempDir root("dp_test_cgroup");
  auto put = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root.dir() + path).parent_path());
    std::ofstream(root.dir() + path) << text;
  };
  const std::string v1_mount = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
  const std::string cpu_mount = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu\n";
  const std::string v2_mount = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:5 - cgroup2 cgroup2 rw\n";
  // v1: the parent's limit is the tightest; "unlimited" is a huge number.
  put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  put("/sys/fs/cgroup/memory/a/memory.limit_in_bytes", "1073741824\n");
  put("/sys/fs/cgroup/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");
  put("/sys/fs/cgroup/cpu/a/b/memory.limit_in_bytes", "1\n");  // not a memory hierarchy
  const std::string v1_cgroup = "5:cpu,cpuacct:/a/b\n4:memory:/a/b\n0::/\n";
  MemoryLimit l = CgroupMemoryLimit(v1_cgroup, cpu_mount + v1_mount + v2_mount, root.dir());
  CHECK(l.bytes == 1073741824);
  CHECK(l.source == "cgroup v1 memory.limit_in_bytes of /sys/fs/cgroup/memory/a");
  // v2: "max" is no limit; an ancestor's number holds.
  put("/sys/fs/cgroup/unified/memory.max", "max\n");  // (the root has none; a stray file changes nothing)
  put("/sys/fs/cgroup/unified/x/memory.max", "536870912\n");
  put("/sys/fs/cgroup/unified/x/y/memory.max", "max\n");
  l = CgroupMemoryLimit("0::/x/y\n", v2_mount, root.dir());
  CHECK(l.bytes == 536870912);
  CHECK(l.source == "cgroup v2 memory.max of /sys/fs/cgroup/unified/x");
  // Both (a hybrid host): the tighter.
  l = CgroupMemoryLimit("4:memory:/a/b\n0::/x/y\n", v1_mount + v2_mount, root.dir());
  CHECK(l.bytes == 536870912);
  // No limit anywhere, no hierarchy mounted, or a cgroup the mount does not show.
  CHECK(CgroupMemoryLimit("0::/\n", v2_mount, root.dir()).bytes == UINT64_MAX);
  CHECK(CgroupMemoryLimit(v1_cgroup, cpu_mount, root.dir()).bytes == UINT64_MAX);
  CHECK(CgroupMemoryLimit("", "", root.dir()).bytes == UINT64_MAX);
  CHECK(CgroupMemoryLimit("garbage\n::\n0:\n", "garbage\n1 2 3\n", root.dir()).bytes == UINT64_MAX);
  // A container's view: the mount shows /docker/c as its root, at a path with a space (\040).
  put("/sys/fs/cgroup/mem ory/memory.limit_in_bytes", "2147483648\n");
  put("/sys/fs/cgroup/mem ory/sub/memory.limit_in_bytes", "not a number\n");
  const std::string container = "35 31 0:32 /docker/c /sys/fs/cgroup/mem\\040ory rw - cgroup cgroup rw,memory\n";
  l = CgroupMemoryLimit("4:memory:/docker/c/sub\n", container, root.dir());
  CHECK(l.bytes == 2147483648);
  CHECK(l.source == "cgroup v1 memory.limit_in_bytes of /sys/fs/cgroup/mem ory");
  CHECK(CgroupMemoryLimit("4:memory:/docker/cc\n", container, root.dir()).bytes == UINT64_MAX);
  CHECK(CgroupMemoryLimit("4:memory:/other\n", container, root.dir()).bytes == UINT64_MAX);
}
