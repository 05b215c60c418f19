// In-process CPU collectives: ThreadTeam (every member once per run, many
// runs, exceptions, concurrent and reentrant runs, destruction while idle),
// CpuCollectives::AllreduceSum against a reference that sums in buffer order
// (bitwise, on every replica; 1 to 8 buffers, empty/odd/unbalanced segments
// crossing slice boundaries, four dtypes, scale, 1 to 4 threads) and
// Broadcast, then the CreateCpuCollectives / Allreduce / Broadcast operators
// through nets, their errors (naming blobs), schemas and registration.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/gradient_registry.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/op_schema.h"
#include "ops/operator.h"
#include "op_test_util.h"
#include "comm/compressed_sum.h"
#include "comm/compression.h"
#include "comm/cpu_collectives.h"
#include "comm/thread_team.h"

using namespace dp;
using namespace dp::testing;

namespace {

// ---- ThreadTeam -------------------------------------------------------------------

TEST_CASE("ThreadTeam runs every member exactly once per run") {
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    ThreadTeam team(n);
    CHECK(team.size() == n);
    // Plain counters: each index is written by one member per run, and runs
    // are ordered by the team, so TSan would flag any overlap.
    std::vector<int> counts(static_cast<size_t>(n), 0);
    std::atomic<int> bad_n{0};
    const int runs = 300;
    for (int r = 0; r < runs; ++r)
      team.Run([&](int index, int size) {
        if (size != n) bad_n.fetch_add(1);
        ++counts[static_cast<size_t>(index)];
      });
    CHECK(bad_n.load() == 0);
    for (int i = 0; i < n; ++i) CHECK(counts[static_cast<size_t>(i)] == runs);
  }
}

TEST_CASE("ThreadTeam runs member 0 on the caller and the others concurrently") {
  ThreadTeam team(3);
  std::vector<std::thread::id> ids(3);
  team.Run([&](int index, int) { ids[static_cast<size_t>(index)] = std::this_thread::get_id(); });
  CHECK(ids[0] == std::this_thread::get_id());
  CHECK(ids[1] != ids[0]);
  CHECK(ids[2] != ids[0]);
  CHECK(ids[1] != ids[2]);
  // All three inside fn at once: a barrier that only a concurrent team passes.
  std::atomic<int> arrived{0};
  team.Run([&](int, int n) {
    arrived.fetch_add(1);
    while (arrived.load() < n) std::this_thread::yield();
  });
  CHECK(arrived.load() == 3);
}

TEST_CASE("ThreadTeam rethrows the first exception after every member finished") {
  for (int n : {1, 2, 4}) {
    CAPTURE(n);
    ThreadTeam team(n);
    std::atomic<int> finished{0};
    try {
      team.Run([&](int index, int) {
        if (index == n - 1) throw Error(Code::kDataLoss, "member failed");
        finished.fetch_add(1);
      });
      FAIL("Run did not throw");
    } catch (const Error& e) {
      CHECK(e.code() == Code::kDataLoss);
      CHECK(e.message() == "member failed");
      CHECK(finished.load() == n - 1);  // the others had all finished
    }
    // Every member throwing: one of them comes out, and the team stays usable.
    CHECK_THROWS_AS(team.Run([](int index, int) { throw std::runtime_error(index == 0 ? "caller" : "helper"); }),
                    std::runtime_error);
    std::atomic<int> ran{0};
    team.Run([&](int, int) { ran.fetch_add(1); });
    CHECK(ran.load() == n);
  }
}

TEST_CASE("ThreadTeam serialises runs from several threads") {
  const int n = 3, callers = 4, runs = 150;
  ThreadTeam team(n);
  std::vector<int> counts(n, 0);  // plain: see the first test case
  std::atomic<int> inside{0}, overlaps{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&] {
      for (int r = 0; r < runs; ++r)
        team.Run([&](int index, int) {
          if (inside.fetch_add(1) >= n) overlaps.fetch_add(1);  // more than one run's members
          ++counts[static_cast<size_t>(index)];
          inside.fetch_sub(1);
        });
    });
  for (auto& t : threads) t.join();
  CHECK(overlaps.load() == 0);
  for (int i = 0; i < n; ++i) CHECK(counts[static_cast<size_t>(i)] == callers * runs);
}

TEST_CASE("ThreadTeam refuses reentrant runs and bad sizes") {
  ThreadTeam team(2);
  std::atomic<int> refused{0};
  team.Run([&](int, int) {
    try {
      team.Run([](int, int) {});
    } catch (const Error& e) {
      if (e.code() == Code::kFailedPrecondition) refused.fetch_add(1);
    }
  });
  CHECK(refused.load() == 2);  // the caller and the helper
  // Another team may run inside a member.
  ThreadTeam inner(2);
  std::atomic<int> inner_runs{0};
  team.Run([&](int index, int) {
    if (index == 0) inner.Run([&](int, int) { inner_runs.fetch_add(1); });
  });
  CHECK(inner_runs.load() == 2);
  ExpectError([] { ThreadTeam bad(0); }, Code::kInvalidArgument, {"at least 1"});
}

TEST_CASE("ThreadTeam is destroyed cleanly while idle") {
  for (int n : {1, 2, 5}) {
    CAPTURE(n);
    { ThreadTeam never_ran(n); }  // helpers may not even have started
    {
      ThreadTeam spinning(n);
      spinning.Run([](int, int) {});
    }  // helpers still spinning
    {
      ThreadTeam sleeping(n);
      sleeping.Run([](int, int) {});
      // Not synchronisation: lets the helpers pass their spin and sleep on the
      // condition variable, the path a long-idle team is destroyed from.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  CHECK(true);
}

// ---- AllreduceSum -------------------------------------------------------------------

// What every buffer must hold: the sum in buffer order, then the scale in T.
template <typename T>
std::vector<T> ReferenceSum(const std::vector<std::vector<T>>& bufs, double scale) {
  std::vector<T> out = bufs[0];
  for (size_t i = 1; i < bufs.size(); ++i)
    for (size_t k = 0; k < out.size(); ++k) out[k] = out[k] + bufs[i][k];
  if (scale != 1.0)
    for (auto& v : out) v = v * static_cast<T>(scale);
  return out;
}

template <typename T>
bool BitwiseEqual(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// N replicas of segments of `sizes` elements, reduced in one call, checked
// against the reference on every replica.
template <typename T>
void CheckAllreduce(CpuCollectives& comm, int n, const std::vector<int64_t>& sizes, double scale, uint32_t seed) {
  // data[s][i]: segment s on device i; distinct values per buffer.
  std::vector<std::vector<std::vector<T>>> data(sizes.size());
  std::vector<CpuCollectives::Segment> segments;
  for (size_t s = 0; s < sizes.size(); ++s) {
    CpuCollectives::Segment seg;
    seg.count = sizes[s];
    for (int i = 0; i < n; ++i) {
      data[s].push_back(Random<T>(sizes[s], seed + static_cast<uint32_t>(s * 131 + static_cast<size_t>(i)),
                                  std::is_integral_v<T> ? -1000 : -2, std::is_integral_v<T> ? 1000 : 2));
      seg.buffers.push_back(data[s].back().data());  // null for empty segments
    }
    segments.push_back(std::move(seg));
  }
  std::vector<std::vector<T>> want;
  for (const auto& bufs : data) want.push_back(ReferenceSum(bufs, scale));
  comm.AllreduceSum(segments, DTypeOf<T>(), scale);
  int bad = 0;
  for (size_t s = 0; s < sizes.size(); ++s)
    for (int i = 0; i < n; ++i)
      if (!BitwiseEqual(data[s][static_cast<size_t>(i)], want[s])) {
        if (bad++ == 0) MESSAGE("segment ", s, " (", sizes[s], " elements) on buffer ", i, " differs");
      }
  CHECK(bad == 0);
}

const std::vector<std::vector<int64_t>>& SegmentSizeSets() {
  static const std::vector<std::vector<int64_t>> sets = {
      {0},
      {1},
      {7, 0, 13},
      {1000, 1, 3, 0},
      {20011},  // one tensor above the serial limit, odd, not divisible by threads
      {5, 16411, 0, 17, 4099},
      // many small tensors: slices cut through segments
      [] {
        std::vector<int64_t> v;
        for (int64_t i = 0; i < 200; ++i) v.push_back((i * 37) % 101);
        return v;
      }(),
  };
  return sets;
}

TEST_CASE_TEMPLATE("AllreduceSum matches the in-order sum bitwise on every replica", T, float, double, int32_t,
                   int64_t) {
  for (int threads = 1; threads <= 4; ++threads) {
    CpuCollectives comm(threads);
    REQUIRE(comm.num_threads() == threads);
    uint32_t seed = 1;
    for (int n : {1, 2, 3, 4, 8}) {
      for (const auto& sizes : SegmentSizeSets()) {
        for (double scale : std::is_integral_v<T> ? std::vector<double>{1.0} : std::vector<double>{1.0, 0.3}) {
          CAPTURE(threads);
          CAPTURE(n);
          CAPTURE(sizes.size());
          CAPTURE(scale);
          CheckAllreduce<T>(comm, n, sizes, scale, seed++);
        }
      }
    }
  }
}

TEST_CASE("AllreduceSum splits large calls across the team and keeps bitwise agreement") {
  // 3 x 300k floats: well above the serial limit for every thread count.
  CpuCollectives comm(4);
  CheckAllreduce<float>(comm, 3, {300001, 3, 65536}, 1.0 / 3.0, 99);
  CheckAllreduce<double>(comm, 2, {150001}, 0.5, 7);
  // No segments: nothing to do.
  comm.AllreduceSum({}, DType::kFloat32);
}

TEST_CASE("AllreduceSum treats aliased buffers as separate summands") {
  // The same buffer passed twice counts twice; both results agree.
  CpuCollectives comm(2);
  std::vector<float> a = {1, 2, 3}, b = {10, 20, 30};
  comm.AllreduceSum({{{a.data(), b.data(), a.data()}, 3}}, DType::kFloat32);
  CHECK(a == std::vector<float>{12, 24, 36});
  CHECK(b == std::vector<float>{12, 24, 36});
}

TEST_CASE("AllreduceSum rejects bad arguments") {
  CpuCollectives comm(2);
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  ExpectError([&] { comm.AllreduceSum({{{}, 0}}, DType::kFloat32); }, Code::kInvalidArgument,
              {"segment 0 has no buffers"});
  ExpectError([&] { comm.AllreduceSum({{{a.data(), b.data()}, 4}, {{a.data()}, 4}}, DType::kFloat32); },
              Code::kInvalidArgument, {"segment 1 has 1 buffers but segment 0 has 2"});
  ExpectError([&] { comm.AllreduceSum({{{a.data(), nullptr}, 4}}, DType::kFloat32); }, Code::kInvalidArgument,
              {"buffer 1 of segment 0 is null"});
  ExpectError([&] { comm.AllreduceSum({{{a.data(), b.data()}, -1}}, DType::kFloat32); }, Code::kInvalidArgument,
              {"negative count"});
  ExpectError([&] { comm.AllreduceSum({{{a.data(), b.data()}, 2}}, DType::kFloat16); }, Code::kDType,
              {"float16"});
  ExpectError([&] { comm.AllreduceSum({{{a.data(), b.data()}, 1}}, DType::kInt32, 0.5); }, Code::kInvalidArgument,
              {"scale must be 1 for int32"});
  // Null buffers are fine where nothing is to be touched.
  comm.AllreduceSum({{{nullptr, nullptr}, 0}}, DType::kFloat32);
  CHECK(a == std::vector<float>(4, 1.0f));  // failed calls wrote nothing
  CHECK(b == std::vector<float>(4, 2.0f));
}

TEST_CASE("CpuCollectives picks its thread count") {
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  CHECK(CpuCollectives(3).num_threads() == 3);
  CHECK(CpuCollectives().num_threads() == hw);
  CHECK(CpuCollectives(0, 1).num_threads() == 1);
  CHECK(CpuCollectives(0, 1000).num_threads() == hw);
  CHECK(CpuCollectives(2, 1).num_threads() == 2);  // explicit count wins over the hint
}

// ---- Broadcast -------------------------------------------------------------------------

TEST_CASE("Broadcast copies the root's bytes to every other buffer") {
  for (int threads : {1, 3}) {
    CpuCollectives comm(threads);
    for (int n : {1, 2, 3, 8}) {
      for (size_t nbytes : {size_t{0}, size_t{1}, size_t{100}, size_t{(1 << 18) + 3}}) {
        for (int root : {0, n - 1, n / 2}) {
          CAPTURE(threads);
          CAPTURE(n);
          CAPTURE(nbytes);
          CAPTURE(root);
          std::vector<std::vector<uint8_t>> bufs;
          std::vector<void*> ptrs;
          for (int i = 0; i < n; ++i) {
            bufs.push_back(Random<uint8_t>(static_cast<int64_t>(nbytes), static_cast<uint32_t>(i + 7), 0, 255));
            ptrs.push_back(bufs.back().data());
          }
          const std::vector<uint8_t> want = bufs[static_cast<size_t>(root)];
          comm.Broadcast(ptrs, root, nbytes);
          int bad = 0;
          for (int i = 0; i < n; ++i) bad += bufs[static_cast<size_t>(i)] != want;
          CHECK(bad == 0);
        }
      }
    }
  }
}

TEST_CASE("Broadcast rejects bad arguments") {
  CpuCollectives comm(2);
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  ExpectError([&] { comm.Broadcast({}, 0, 4); }, Code::kInvalidArgument, {"no buffers"});
  ExpectError([&] { comm.Broadcast({a.data(), b.data()}, 2, 16); }, Code::kInvalidArgument,
              {"root 2 is out of range for 2 buffers"});
  ExpectError([&] { comm.Broadcast({a.data(), b.data()}, -1, 16); }, Code::kInvalidArgument, {"root -1"});
  ExpectError([&] { comm.Broadcast({a.data(), nullptr}, 0, 16); }, Code::kInvalidArgument,
              {"buffer 1 of 2 is null"});
  comm.Broadcast({a.data(), nullptr}, 0, 0);  // nothing to copy
  CHECK(b == std::vector<float>(4, 2.0f));
}

// ---- operators -----------------------------------------------------------------------

Argument Devices(int64_t n) { return IntArg("num_devices", n); }

// A float32 tensor of `values` on CPU device `id`.
Tensor OnCpu(int32_t id, Dims dims, const std::vector<float>& values) {
  Tensor t(std::move(dims), DType::kFloat32, DeviceOption{DeviceType::kCPU, id});
  std::copy(values.begin(), values.end(), t.mutable_data<float>());
  return t;
}

OperatorDef Create(int64_t threads = 2) { return Op("CreateCpuCollectives", {}, {"comm"}, {IntArg("threads", threads)}); }

// Allreduce or Broadcast over `blobs` in place.
OperatorDef Collective(const std::string& type, const std::vector<std::string>& blobs, std::vector<Argument> args) {
  std::vector<std::string> in = {"comm"};
  in.insert(in.end(), blobs.begin(), blobs.end());
  return Op(type, in, blobs, std::move(args));
}

// Feeds each tensor as the sole owner of its storage, on its own device (as
// replicas in a training loop; FeedOwned would copy them to cpu:0).
std::shared_ptr<Workspace> FeedSole(const Feeds& feeds) {
  auto ws = std::make_shared<Workspace>();
  for (const auto& [name, t] : feeds) {
    Tensor copy;
    if (t.defined()) {
      copy = Tensor(t.dims(), t.dtype(), t.device());
      copy.CopyFrom(t);
    }
    ws->Feed(name, copy);
  }
  return ws;
}

TEST_CASE("Allreduce sums device-major replicas in place, grouping dtypes") {
  // 3 devices, 2 tensors each: w (float32 [2, 3], on its device) and n (int64 [2]).
  Feeds feeds;
  std::vector<std::vector<float>> w;
  for (int d = 0; d < 3; ++d) {
    w.push_back(Random<float>(6, static_cast<uint32_t>(d + 1)));
    feeds.emplace_back("cpu_" + std::to_string(d) + "/w", OnCpu(d, {2, 3}, w.back()));
    feeds.emplace_back("cpu_" + std::to_string(d) + "/n", Make<int64_t>({2}, {d + 1, 10 * (d + 1)}));
  }
  // Device-major order: cpu_0/w, cpu_0/n, cpu_1/w, cpu_1/n, ...
  std::vector<std::string> blobs;
  for (const auto& f : feeds) blobs.push_back(f.first);
  auto def = std::make_shared<const NetDef>(MakeNet({Create(), Collective("Allreduce", blobs, {Devices(3)})}, feeds));
  auto ws = FeedSole(feeds);
  const void* own = ws->GetTensor("cpu_0/w").raw_data();
  Net net(def, ws);
  net.Run();
  const std::vector<float> want = ReferenceSum(w, 1.0);
  for (int d = 0; d < 3; ++d) {
    CAPTURE(d);
    const Tensor& tw = ws->GetTensor("cpu_" + std::to_string(d) + "/w");
    CHECK(tw.dims() == Dims{2, 3});
    CHECK(tw.device() == DeviceOption{DeviceType::kCPU, d});  // replicas stay on their device
    CHECK(BitwiseEqual(Values<float>(tw), want));
    CHECK(Values<int64_t>(ws->GetTensor("cpu_" + std::to_string(d) + "/n")) == std::vector<int64_t>{6, 60});
  }
  CHECK(ws->GetTensor("cpu_0/w").raw_data() == own);  // reduced in place, no copy
  CheckInference(*def, feeds, *ws, Infer::kPartial);
}

TEST_CASE("Allreduce averages with scale and defaults to one tensor per device") {
  Feeds feeds = {{"a", Make<double>({3}, {1, 2, 3})}, {"b", Make<double>({3}, {3, 4, 5})}};
  auto ws = RunOps({Create(1), Collective("Allreduce", {"a", "b"}, {FloatArg("scale", 0.5)})}, feeds,
                   Infer::kPartial);
  CHECK(Values<double>(ws->GetTensor("a")) == std::vector<double>{2, 3, 4});
  CHECK(Values<double>(ws->GetTensor("b")) == std::vector<double>{2, 3, 4});
}

TEST_CASE("Allreduce never writes memory that someone else sees") {
  // A fetched tensor keeps its values (copy-on-write); a net run twice
  // reduces again, reusing the communicator.
  auto def = std::make_shared<const NetDef>(MakeNet(
      {Create(2), Collective("Allreduce", {"a", "b"}, {})}, {{"a", Tensor()}, {"b", Tensor()}}));
  auto ws = std::make_shared<Workspace>();
  FeedOwned(*ws, "a", Make<float>({2}, {1, 2}));
  FeedOwned(*ws, "b", Make<float>({2}, {10, 20}));
  Net net(def, ws);
  net.Run();
  const Tensor fetched = ws->GetTensor("a");
  const auto* comm = ws->GetBlob("comm")->Get<CpuCommunicator>().collectives.get();
  CHECK(comm->num_threads() == 2);
  net.Run();
  CHECK(Values<float>(fetched) == std::vector<float>{11, 22});
  CHECK(Values<float>(ws->GetTensor("a")) == std::vector<float>{22, 44});
  CHECK(Values<float>(ws->GetTensor("b")) == std::vector<float>{22, 44});
  CHECK(ws->GetBlob("comm")->Get<CpuCommunicator>().collectives.get() == comm);  // kept
  // Caller memory is only read: the blob gets fresh storage with the sum.
  std::vector<float> caller = {1, 2};
  ws->Feed("a", Borrowed({2}, caller));
  net.Run();
  CHECK(caller == std::vector<float>{1, 2});
  CHECK(Values<float>(ws->GetTensor("a")) == std::vector<float>{23, 46});
  CHECK(Values<float>(ws->GetTensor("b")) == std::vector<float>{23, 46});
  // Another thread count replaces it.
  auto def3 = std::make_shared<const NetDef>(MakeNet({Create(3)}, {}));
  Net(def3, ws).Run();
  CHECK(ws->GetBlob("comm")->Get<CpuCommunicator>().collectives->num_threads() == 3);
}

TEST_CASE("Broadcast copies the root's tensors and initialises replicas") {
  // Device 1 is the root; device 0 has an empty tensor, device 2 other shapes.
  const std::vector<float> root_w = {1, 2, 3, 4};
  Feeds feeds = {
      {"cpu_0/w", Tensor()},                 {"cpu_0/b", Make<int32_t>({2}, {0, 0})},
      {"cpu_1/w", OnCpu(1, {2, 2}, root_w)}, {"cpu_1/b", Make<int32_t>({2}, {5, 6})},
      {"cpu_2/w", OnCpu(2, {3}, {9, 9, 9})}, {"cpu_2/b", Make<int32_t>({1}, {7})},
  };
  std::vector<std::string> blobs;
  for (const auto& f : feeds) blobs.push_back(f.first);
  NetDef d = MakeNet({Create(), Collective("Broadcast", blobs, {Devices(3), IntArg("root", 1)})}, feeds);
  auto ws = FeedSole(feeds);
  Net(std::make_shared<const NetDef>(std::move(d)), ws).Run();
  for (int dev = 0; dev < 3; ++dev) {
    CAPTURE(dev);
    const Tensor& w = ws->GetTensor("cpu_" + std::to_string(dev) + "/w");
    CHECK(w.dims() == Dims{2, 2});
    CHECK(Values<float>(w) == root_w);
    CHECK(Values<int32_t>(ws->GetTensor("cpu_" + std::to_string(dev) + "/b")) == std::vector<int32_t>{5, 6});
  }
  // A resized replica keeps its device; an uninitialised one gets the op's.
  CHECK(ws->GetTensor("cpu_0/w").device() == DeviceOption{DeviceType::kCPU, 0});
  CHECK(ws->GetTensor("cpu_1/w").device() == DeviceOption{DeviceType::kCPU, 1});
  CHECK(ws->GetTensor("cpu_2/w").device() == DeviceOption{DeviceType::kCPU, 2});
}

TEST_CASE("collective ops report their errors with the blobs involved") {
  Feeds two = {{"cpu_0/w", Make<float>({2}, {1, 2})}, {"cpu_1/w", Make<float>({3}, {1, 2, 3})}};
  // Shapes differ between the replicas.
  ExpectRunError({Create(), Collective("Allreduce", {"cpu_0/w", "cpu_1/w"}, {})}, two, Code::kShape,
                 {"Allreduce", "'cpu_1/w'", "[3]", "'cpu_0/w'", "[2]"});
  // Dtypes differ.
  Feeds mixed = {{"x", Make<float>({2}, {1, 2})}, {"y", Make<int32_t>({2}, {1, 2})}};
  ExpectRunError({Create(), Collective("Allreduce", {"x", "y"}, {})}, mixed, Code::kDType, {"'y'", "int32", "'x'"});
  // Scale on integers.
  Feeds ints = {{"x", Make<int32_t>({2}, {1, 2})}, {"y", Make<int32_t>({2}, {1, 2})}};
  ExpectRunError({Create(), Collective("Allreduce", {"x", "y"}, {FloatArg("scale", 0.5)})}, ints,
                 Code::kInvalidArgument, {"scale 0.5", "'x'"});
  // Unsupported dtype.
  Feeds bytes = {{"x", Make<uint8_t>({1}, {1})}, {"y", Make<uint8_t>({1}, {2})}};
  ExpectRunError({Create(), Collective("Allreduce", {"x", "y"}, {})}, bytes, Code::kDType, {"'x'", "uint8"});
  // k not a multiple of num_devices.
  Feeds three = {{"a", Make<float>({1}, {1})}, {"b", Make<float>({1}, {1})}, {"c", Make<float>({1}, {1})}};
  ExpectBuildError({Create(), Collective("Allreduce", {"a", "b", "c"}, {Devices(2)})}, three,
                   Code::kInvalidArgument, {"Allreduce", "num_devices 2", "3 tensors"});
  ExpectBuildError({Create(), Collective("Broadcast", {"a", "b", "c"}, {Devices(0)})}, three,
                   Code::kInvalidArgument, {"num_devices 0"});
  ExpectBuildError({Create(), Collective("Broadcast", {"a", "b", "c"}, {IntArg("root", 3)})}, three,
                   Code::kInvalidArgument, {"root 3 is out of range for 3 devices"});
  // Outputs not in place.
  ExpectBuildError({Create(), Op("Allreduce", {"comm", "a", "b"}, {"a", "c"})}, three, Code::kInvalidNet,
                   {"in place", "'b'", "'c'"});
  ExpectBuildError({Create(), Op("Broadcast", {"comm", "a", "b"}, {"a"})}, three, Code::kInvalidNet,
                   {"3 inputs and 1 outputs"});
  // No communicator: a tensor where it should be.
  Feeds fake = {{"comm", Make<float>({1}, {0})}, {"a", Make<float>({1}, {1})}, {"b", Make<float>({1}, {2})}};
  ExpectRunError({Collective("Allreduce", {"a", "b"}, {})}, fake, Code::kDType,
                 {"comm 'comm'", "not a CPU communicator", "CreateCpuCollectives"});
  ExpectRunError({Collective("Broadcast", {"a", "b"}, {})}, fake, Code::kDType, {"not a CPU communicator"});
  // Bad thread count.
  ExpectBuildError({Create(-1)}, {}, Code::kInvalidArgument, {"threads -1"});
}

TEST_CASE("collective schemas infer shapes and check replicas") {
  const OpSchema* all = OpSchemaRegistry::Find("Allreduce");
  const OpSchema* bc = OpSchemaRegistry::Find("Broadcast");
  REQUIRE(all != nullptr);
  REQUIRE(bc != nullptr);
  // The communicator is never a tensor, so nets leave these shapes unknown;
  // the functions themselves are checked with a stand-in for it.
  const TensorInfo comm{{}, DType::kUInt8};
  const TensorInfo f23{{2, 3}, DType::kFloat32}, f4{{4}, DType::kFloat32}, i2{{2}, DType::kInt32};
  OperatorDef op = Collective("Allreduce", {"a0", "b0", "a1", "b1"}, {Devices(2)});
  auto out = all->InferShapes(op, "op 0 (Allreduce)", {comm, f23, i2, f23, i2});
  REQUIRE(out.size() == 4);
  CHECK(out[0].dims == Dims{2, 3});
  CHECK(out[3].dtype == DType::kInt32);
  ExpectError([&] { all->InferShapes(op, "op 0 (Allreduce)", {comm, f23, i2, f4, i2}); }, Code::kShape,
              {"op 0 (Allreduce)", "'a1'", "'a0'"});
  OperatorDef bop = Collective("Broadcast", {"a0", "a1", "a2"}, {IntArg("root", 2)});
  out = bc->InferShapes(bop, "op 1 (Broadcast)", {comm, f23, i2, f4});
  REQUIRE(out.size() == 3);
  for (const auto& info : out) CHECK((info.dims == Dims{4} && info.dtype == DType::kFloat32));
}

TEST_CASE("collective ops are registered for the CPU and not differentiable") {
  for (const char* type : {"CreateCpuCollectives", "Allreduce", "Broadcast"}) {
    CAPTURE(type);
    CHECK(OpSchemaRegistry::Find(type) != nullptr);
    CHECK(OperatorRegistry::Has(DeviceType::kCPU, type));
    CHECK(GradientRegistry::Kind(type) == GradientKind::kNone);
  }
}

}  // namespace

// ---- the compressed exchange's arithmetic (comm/compressed_sum.h) ---------------

// What the CUDA collectives across processes compute with it, simulated on
// the host: each rank's contributions cast to H into a buffer padded to the
// layout, chunk q of every rank's buffer to rank q, summed there in rank
// order, the chunks' sums all-gathered and cast back. Bit for bit the CPU
// collectives' compressed allreduce over as many contributions
// (AllreduceThroughHalf: every contribution rounded once, the float sum
// rounded once), for rank counts that do or do not divide the elements.
TEST_CASE_TEMPLATE("the compressed exchange gives the CPU's compressed allreduce bit for bit", H, BFloat16, Half) {
  CpuCollectives collectives(2);
  for (int ranks : {1, 2, 3, 5, 8})
    for (const std::vector<int64_t>& sizes : {std::vector<int64_t>{1}, {63, 130}, {1000, 7, 4096}}) {
      CAPTURE(ranks);
      CAPTURE(sizes.size());
      int64_t total = 0;
      for (int64_t s : sizes) total += s;
      const CompressedLayout layout = MakeCompressedLayout(total, ranks);
      CHECK(layout.chunk % 64 == 0);
      CHECK(layout.padded == layout.chunk * ranks);
      CHECK(layout.padded >= total);
      CHECK(layout.chunk < (total + ranks - 1) / ranks + 64);
      // Each rank's tensors end to end, as the exchange lays them out.
      // Magnitudes 2^-12 .. 2^15 (within binary16's range), so that the
      // float sums are inexact and their order shows.
      std::vector<std::vector<float>> x(static_cast<size_t>(ranks));
      for (int r = 0; r < ranks; ++r) {
        x[static_cast<size_t>(r)] = Random<float>(total, 90 + r, -8, 8);
        const std::vector<float> e = Random<float>(total, 190 + r, -12, 12);
        for (int64_t i = 0; i < total; ++i) x[r][i] = std::ldexp(x[r][i], static_cast<int>(e[i]));
      }
      const double scale = 0.25;
      const float pre = CompressionPreScale<H>(ranks), post = CompressionPostScale<H>(ranks, scale);
      std::vector<std::vector<H>> send(static_cast<size_t>(ranks), std::vector<H>(layout.padded, FromFloat<H>(0)));
      for (int r = 0; r < ranks; ++r)
        for (int64_t i = 0; i < total; ++i) send[r][i] = FromFloat<H>(x[r][i] * pre);
      std::vector<H> gathered(layout.padded);
      for (int r = 0; r < ranks; ++r) {
        std::vector<H> inbox(layout.padded);  // rank q's contribution to chunk r at q * chunk
        for (int q = 0; q < ranks; ++q)
          std::copy_n(send[q].begin() + r * layout.chunk, layout.chunk, inbox.begin() + q * layout.chunk);
        for (int64_t j = 0; j < layout.chunk; ++j)
          gathered[r * layout.chunk + j] = SumContributions<H>(inbox.data(), ranks, layout.chunk, j);
      }
      // The CPU collectives over `ranks` devices, one segment per tensor.
      std::vector<std::vector<float>> cpu = x;
      std::vector<CpuCollectives::Segment> segments;
      int64_t at = 0;
      for (int64_t s : sizes) {
        CpuCollectives::Segment seg;
        seg.count = s;
        for (auto& b : cpu) seg.buffers.push_back(b.data() + at);
        segments.push_back(seg);
        at += s;
      }
      AllreduceThroughHalf<H>(collectives, segments, ranks, scale);
      for (int r = 0; r < ranks; ++r) {
        bool same = true;
        for (int64_t i = 0; i < total; ++i) {
          const float got = ToFloat(gathered[i]) * post;
          same = same && std::memcmp(&got, &cpu[r][i], sizeof got) == 0;
        }
        CHECK_MESSAGE(same, "rank ", r);
      }
    }
}
