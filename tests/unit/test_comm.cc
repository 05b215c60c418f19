// Communication between processes (src/comm): store addresses (accepted and
// refused URLs), the file store (set once, wait with a bound), and the Gloo
// communicator with every rank a thread of this process: allreduce of four
// dtypes and several sizes (identical bytes on every rank), broadcast,
// allgather, reduce-scatter, barrier; a rendezvous that a rank never
// reaches and a peer that goes away both fail in bounded time naming the
// rank, and leave the communicator failing at once. Then the hierarchical
// path of CpuCollectives (SumInto, CopyOut) and the collective operators of
// two "processes" (threads with a workspace each) of two devices each.
#include <doctest/doctest.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/cpu_collectives.h"
#include "comm/gloo_communicator.h"
#include "comm/store.h"
#include "comm/store_address.h"
#include "communicator_checks.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "expect_error.h"
#include "op_test_util.h"
#include "ops/gradient_registry.h"  // MakeArg
#include "temp_dir.h"

using namespace dp;
using namespace dp::testing;

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---- store addresses ------------------------------------------------------------

TEST_CASE("store addresses: file and redis URLs are parsed and normalised") {
  StoreAddress a = ParseStoreAddress("file:///shared/dp/");
  CHECK(a.kind == StoreAddress::Kind::kFile);
  CHECK(a.path == "/shared/dp");
  CHECK(a.ToString() == "file:///shared/dp");
  a = ParseStoreAddress("file:///");
  CHECK(a.path == "/");
  a = ParseStoreAddress("redis://127.0.0.1:6380/jobs/a");
  CHECK(a.kind == StoreAddress::Kind::kRedis);
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 6380);
  CHECK(a.prefix == "jobs/a");
  CHECK(a.ToString() == "redis://127.0.0.1:6380/jobs/a");
  a = ParseStoreAddress("redis://cache-1.example");
  CHECK(a.port == 6379);
  CHECK(a.prefix.empty());
  a = ParseStoreAddress("redis://[::1]:7000");
  CHECK(a.host == "::1");
  CHECK(a.ToString() == "redis://[::1]:7000");
}

TEST_CASE("store addresses: bad URLs are refused with the reason") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {"tcp://host:1", "unknown scheme"},
      {"file://relative/dir", "absolute path"},
      {"file:///a/../b", "'..'"},
      {"file:///a/./b", "'.'"},
      {"file:///a\\b", "backslash"},
      {"redis://", "no host"},
      {"redis://:6379", "empty host"},
      {"redis://host:", "empty port"},
      {"redis://host:0", "1..65535"},
      {"redis://host:65536", "1..65535"},
      {"redis://host:123456", "1..65535"},
      {"redis://host:12a", "decimal"},
      {"redis://ho st:1", "host name"},
      {"redis://user:pw@host:1", "credentials"},
      {"redis://[::1", "closing ']'"},
      {"redis://[::g]:1", "hex digits"},
      {"redis://[::1]x", "':port'"},
      {"redis://host:1/a b", "space"},
      {std::string("file:///a\0b", 11), "UTF-8"},
      {"file:///\xff", "UTF-8"},
      {"file:///" + std::string(5000, 'a'), "longer than"},
  };
  for (const auto& entry : bad) {
    const std::string& url = entry.first;
    CAPTURE(url);
    ExpectError([&] { ParseStoreAddress(url); }, Code::kInvalidArgument, {"store address", entry.second});
  }
}

// ---- the file store ---------------------------------------------------------------

TEST_CASE("file store: keys are set once, waited for with a bound, scoped") {
  TempDir dir("dp_store");
  auto store = Store::Open(ParseStoreAddress("file://" + dir.Path("sub/dir")), "job");
  CHECK_FALSE(store->Has({"a"}));
  store->Set("a", std::string("x\0y", 3));
  CHECK(store->Has({"a"}));
  CHECK(store->Get("a") == std::string("x\0y", 3));
  ExpectError([&] { store->Set("a", "again"); }, Code::kAlreadyExists, {"already holds key", "DP_RUN_ID"});
  const auto start = Clock::now();
  CHECK_FALSE(store->WaitFor({"a", "b"}, milliseconds(100)));
  CHECK(Clock::now() - start >= milliseconds(100));
  auto other = Store::Open(ParseStoreAddress("file://" + dir.Path("sub/dir")), "other-job");
  CHECK_FALSE(other->Has({"a"}));  // another scope
  auto sub = store->Sub("x");
  sub->Set("a", "1");
  CHECK(sub->Has({"a"}));
  // A waiter sees a key set by another thread.
  std::thread setter([&] { other->Set("late", "v"); });
  CHECK(other->WaitFor({"late"}, milliseconds(10000)));
  setter.join();
}

TEST_CASE("file store: a directory that cannot be made is UNAVAILABLE naming the URL") {
  ExpectError([] { Store::Open(ParseStoreAddress("file:///proc/dp-no/dir"), "job"); }, Code::kUnavailable,
              {"file:///proc/dp-no/dir"});
}

TEST_CASE("redis store: a server that is not there is UNAVAILABLE naming the URL") {
  // Port 1 on loopback: nothing listens there (connection refused at once).
  ExpectError([] { Store::Open(ParseStoreAddress("redis://127.0.0.1:1"), "job"); }, Code::kUnavailable,
              {"redis://127.0.0.1:1"});
}

// ---- Gloo communicator, ranks as threads -------------------------------------

// Runs fn(rank, communicator) on `size` threads after their rendezvous.
void WithGloo(int size, const std::function<void(int, Communicator&)>& fn, milliseconds timeout = milliseconds(20000),
              const std::string& algorithm = "auto") {
  TempDir dir("dp_gloo");
  const std::string url = "file://" + dir.Path("store");
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooOptions o;
        o.rank = r;
        o.size = size;
        o.timeout = timeout;
        o.algorithm = algorithm;
        auto comm = ConnectGloo(Store::Open(ParseStoreAddress(url), "t"), o);
        fn(r, *comm);
        comm->Barrier();  // nobody closes its connections while another still uses them
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    CAPTURE(r);
    CHECK(errors[static_cast<size_t>(r)] == "");
  }
}

template <typename T>
void CheckAllreduce(int size, int64_t count, DType dtype) {
  CAPTURE(size);
  CAPTURE(count);
  std::vector<std::vector<T>> results(static_cast<size_t>(size));
  WithGloo(size, [&](int r, Communicator& comm) {
    CHECK(comm.rank() == r);
    CHECK(comm.size() == size);
    std::vector<T> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = static_cast<T>((r + 1) * (i % 7 + 1));
    comm.AllreduceSum(v.data(), count, dtype);
    results[static_cast<size_t>(r)] = std::move(v);
  });
  const T ranks_sum = static_cast<T>(size * (size + 1) / 2);
  for (int r = 0; r < size; ++r) {
    REQUIRE(results[static_cast<size_t>(r)].size() == static_cast<size_t>(count));
    bool exact = true, same = true;
    for (int64_t i = 0; i < count; ++i) {
      const T got = results[static_cast<size_t>(r)][static_cast<size_t>(i)];
      exact = exact && got == ranks_sum * static_cast<T>(i % 7 + 1);
      same = same && std::memcmp(&got, &results[0][static_cast<size_t>(i)], sizeof(T)) == 0;
    }
    CHECK(exact);
    CHECK(same);
  }
}

TEST_CASE("gloo: allreduce sums four dtypes, identical on every rank") {
  CheckAllreduce<float>(2, 1000, DType::kFloat32);
  CheckAllreduce<double>(3, 5, DType::kFloat64);
  CheckAllreduce<int32_t>(4, 1, DType::kInt32);
  CheckAllreduce<int64_t>(2, 0, DType::kInt64);
  CheckAllreduce<float>(3, (int64_t{1} << 20) + 3, DType::kFloat32);  // several segments
}

// Values that round: Gloo's plain ring (small buffers) sums in each rank's
// own order, so with three ranks the bits differed between ranks until rank
// 0's sum was broadcast after it (float32 included).
TEST_CASE("gloo: allreduce sums bfloat16 and float16 (compressed gradients), identical on every rank") {
  for (int size : {2, 3}) {
    CAPTURE(size);
    std::vector<std::vector<uint16_t>> bits(static_cast<size_t>(size)), fbits(static_cast<size_t>(size));
    WithGloo(size, [&](int r, Communicator& comm) {
      CheckHalfAllreduceOn<BFloat16>(comm, r, size, 100000, DType::kBFloat16);  // the chunked ring
      CheckHalfAllreduceOn<Half>(comm, r, size, 33, DType::kFloat16);
      std::vector<Half> v(257);
      for (size_t i = 0; i < v.size(); ++i) v[i] = FromFloat<Half>(0.3f * static_cast<float>(r) + 0.01f * i);
      comm.AllreduceSum(v.data(), static_cast<int64_t>(v.size()), DType::kFloat16);
      for (const Half& h : v) bits[static_cast<size_t>(r)].push_back(h.bits);
      std::vector<float> f(257);
      for (size_t i = 0; i < f.size(); ++i) f[i] = 0.3f * static_cast<float>(r) + 0.01f * static_cast<float>(i) + 1e-3f;
      comm.AllreduceSum(f.data(), static_cast<int64_t>(f.size()), DType::kFloat32);
      for (float x : f) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        fbits[static_cast<size_t>(r)].push_back(static_cast<uint16_t>(u));
        fbits[static_cast<size_t>(r)].push_back(static_cast<uint16_t>(u >> 16));
      }
    });
    for (int r = 1; r < size; ++r) CHECK(bits[static_cast<size_t>(r)] == bits[0]);
    for (int r = 1; r < size; ++r) CHECK(fbits[static_cast<size_t>(r)] == fbits[0]);
  }
}

// The direct allreduce (dp's exchange over Gloo's pairs) sums each element in
// rank order: shared memory's bits, the same on every rank. Counts that the
// ranks do not divide (the last blocks short or empty), prepared runs again
// and again on one buffer, 16-bit floats; "auto" takes it from 64 KiB.
TEST_CASE("gloo: the direct allreduce sums in rank order, identical on every rank") {
  auto value = [](int run, int rank, int64_t i) {
    return std::sin(0.37f * static_cast<float>(i) + 0.7f * static_cast<float>(rank + run)) * 1e3f + 1e-3f;
  };
  for (int size : {2, 3}) {
    for (const char* algorithm : {"direct", "auto"}) {
      CAPTURE(size);
      CAPTURE(algorithm);
      const bool direct = std::string(algorithm) == "direct";
      const std::vector<int64_t> counts = direct ? std::vector<int64_t>{1, 2, 5, 1000, 100003}
                                                 : std::vector<int64_t>{16384, 100003};  // 64 KiB and more
      std::vector<std::vector<float>> results(static_cast<size_t>(size));
      WithGloo(
          size,
          [&](int r, Communicator& comm) {
            for (int64_t count : counts) {
              CAPTURE(count);
              std::vector<float> v(static_cast<size_t>(count));
              auto prepared = comm.PrepareAllreduceSum(v.data(), count, DType::kFloat32);
              for (int run = 0; run < 3; ++run) {
                for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = value(run, r, i);
                prepared->Run();
                bool in_order = true;
                for (int64_t i = 0; i < count; ++i) {
                  float want = value(run, 0, i);
                  for (int k = 1; k < size; ++k) want += value(run, k, i);
                  in_order = in_order && v[static_cast<size_t>(i)] == want;
                }
                CHECK(in_order);
              }
              results[static_cast<size_t>(r)].insert(results[static_cast<size_t>(r)].end(), v.begin(), v.end());
            }
            if (direct) {
              std::vector<int32_t> n(7, r + 1);
              comm.AllreduceSum(n.data(), 7, DType::kInt32);
              CHECK(std::all_of(n.begin(), n.end(), [&](int32_t x) { return x == size * (size + 1) / 2; }));
              CheckHalfAllreduceOn<BFloat16>(comm, r, size, 1001, DType::kBFloat16);
              CheckHalfAllreduceOn<Half>(comm, r, size, 3, DType::kFloat16);
            }
          },
          milliseconds(20000), algorithm);
      for (int r = 1; r < size; ++r)
        CHECK(std::memcmp(results[static_cast<size_t>(r)].data(), results[0].data(), results[0].size() * 4) == 0);
    }
  }
}

// This process's connected TCP sockets (the ranks' Gloo pairs, both ends of
// each here) and how many have a send buffer of at least `bytes`.
std::pair<int, int> TcpSockets(int bytes) {
  int connected = 0, wide = 0;
  DIR* dir = opendir("/proc/self/fd");
  REQUIRE(dir != nullptr);
  while (const dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(dir)) continue;
    int type = 0, domain = 0, sndbuf = 0;
    socklen_t len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || (domain != AF_INET && domain != AF_INET6)) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;  // a listener
    ++connected;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) == 0 && sndbuf >= bytes) ++wide;
  }
  closedir(dir);
  return {connected, wide};
}

TEST_CASE("gloo: every pair's socket can hold many loopback segments from the start") {
  // Gloo sizes a pair's send buffer by the largest message sent so far; a
  // barrier's few bytes would leave it at the kernel's minimum, and a later
  // message of up to twice that size then travels one segment per delayed
  // ACK. The communicator widens every pair on connecting: at least 256 KiB
  // (four 64 KiB loopback segments; the kernel may cap the 2 MiB asked for at
  // twice net.core.wmem_max).
  WithGloo(3, [&](int r, Communicator& comm) {
    comm.Barrier();
    if (r == 0) {
      const auto [connected, wide] = TcpSockets(256 << 10);
      CHECK(connected == 6);  // 3 ranks, 2 pairs each
      CHECK(wide == connected);
    }
    comm.Barrier();
  });
}

TEST_CASE("gloo: broadcast, allgather, reduce-scatter and barrier") {
  WithGloo(3, [&](int r, Communicator& comm) {
    CheckOtherCollectives(comm, r, 3, {1000});
    CheckPreparedShardCollectives(comm, r, 3);
  });
}

TEST_CASE("gloo: a rank that never arrives fails the rendezvous in bounded time, naming it") {
  TempDir dir("dp_gloo");
  const std::string url = "file://" + dir.Path("store");
  std::vector<std::string> errors(2);
  std::vector<double> took(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)  // ranks 0 and 1 of 3
    threads.emplace_back([&, r] {
      const auto start = Clock::now();
      try {
        GlooOptions o;
        o.rank = r;
        o.size = 3;
        o.timeout = milliseconds(400);
        ConnectGloo(Store::Open(ParseStoreAddress(url), "t"), o);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = std::string(CodeName(e.code())) + ": " + e.message();
      }
      took[static_cast<size_t>(r)] = std::chrono::duration<double>(Clock::now() - start).count();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    CAPTURE(errors[static_cast<size_t>(r)]);
    CHECK(errors[static_cast<size_t>(r)].find("TIMEOUT") == 0);
    CHECK(errors[static_cast<size_t>(r)].find("rank 2 did not arrive") != std::string::npos);
    CHECK(took[static_cast<size_t>(r)] < 0.4 + 1.0);
  }
}

TEST_CASE("gloo: a peer that goes away fails the others in bounded time, naming it; the communicator stays failed") {
  for (const char* algorithm : {"auto", "direct"}) {  // Gloo's ring, dp's exchange
    CAPTURE(algorithm);
    TempDir dir("dp_gloo");
    const std::string url = "file://" + dir.Path("store");
    std::vector<std::unique_ptr<AfterPeerLeft>> seen(3);
    std::vector<std::string> errors(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        try {
          GlooOptions o;
          o.rank = r;
          o.size = 3;
          o.timeout = milliseconds(3000);
          o.algorithm = algorithm;
          auto comm = ConnectGloo(Store::Open(ParseStoreAddress(url), "t"), o);
          comm->Barrier();
          if (r == 2) return;  // leaves: its connections close with the communicator
          seen[static_cast<size_t>(r)] = std::make_unique<AfterPeerLeft>(*comm);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    CHECK(errors == std::vector<std::string>(3));
    for (int r = 0; r < 2; ++r) {
      REQUIRE(seen[static_cast<size_t>(r)]);
      const AfterPeerLeft& s = *seen[static_cast<size_t>(r)];
      CAPTURE(s.first);
      CHECK((s.first.rfind("UNAVAILABLE", 0) == 0 || s.first.rfind("TIMEOUT", 0) == 0));
      CHECK(s.first.find("rank 2 is missing") != std::string::npos);
      CHECK(s.seconds < 3.0 + 1.0);
      CHECK(s.StaysFailed());
    }
  }
}

TEST_CASE("gloo: bad options are refused before any rendezvous") {
  TempDir dir("dp_gloo");
  auto store = Store::Open(ParseStoreAddress("file://" + dir.dir()), "t");
  GlooOptions o;
  o.size = 2;
  o.rank = 2;
  ExpectError([&] { ConnectGloo(store, o); }, Code::kInvalidArgument, {"rank 2"});
  o.rank = 0;
  o.algorithm = "tree";
  ExpectError([&] { ConnectGloo(store, o); }, Code::kInvalidArgument, {"tree"});
  o.algorithm = "ring";
  o.timeout = milliseconds(0);
  ExpectError([&] { ConnectGloo(store, o); }, Code::kInvalidArgument, {"timeout"});
}

// ---- hierarchical collectives --------------------------------------------------

TEST_CASE("CpuCollectives: SumInto and CopyOut lay segments end to end") {
  CpuCollectives coll(2);
  for (int64_t big : {int64_t{5}, int64_t{300000}}) {
    CAPTURE(big);
    std::vector<std::vector<float>> a(3, std::vector<float>(static_cast<size_t>(big))),
        b(3, std::vector<float>(7));
    for (int d = 0; d < 3; ++d) {
      for (int64_t i = 0; i < big; ++i) a[static_cast<size_t>(d)][static_cast<size_t>(i)] = static_cast<float>(d + i % 5);
      for (int i = 0; i < 7; ++i) b[static_cast<size_t>(d)][static_cast<size_t>(i)] = static_cast<float>(10 * d + i);
    }
    std::vector<CpuCollectives::Segment> segs(2);
    for (int d = 0; d < 3; ++d) {
      segs[0].buffers.push_back(a[static_cast<size_t>(d)].data());
      segs[1].buffers.push_back(b[static_cast<size_t>(d)].data());
    }
    segs[0].count = big;
    segs[1].count = 7;
    std::vector<float> flat(static_cast<size_t>(big + 7));
    coll.SumInto(segs, DType::kFloat32, flat.data());
    bool ok = true;
    for (int64_t i = 0; i < big; ++i) ok = ok && flat[static_cast<size_t>(i)] == static_cast<float>(3 + 3 * (i % 5));
    for (int i = 0; i < 7; ++i) ok = ok && flat[static_cast<size_t>(big + i)] == static_cast<float>(30 + 3 * i);
    CHECK(ok);
    for (auto& x : flat) x *= 2;
    coll.CopyOut(flat.data(), segs, DType::kFloat32, 0.5);
    for (int d = 0; d < 3; ++d) {
      bool same = true;
      for (int64_t i = 0; i < big; ++i)
        same = same && a[static_cast<size_t>(d)][static_cast<size_t>(i)] == static_cast<float>(3 + 3 * (i % 5));
      for (int i = 0; i < 7; ++i) same = same && b[static_cast<size_t>(d)][static_cast<size_t>(i)] == static_cast<float>(30 + 3 * i);
      CHECK(same);
    }
  }
  ExpectError([&] { coll.SumInto({}, DType::kUInt8, nullptr); }, Code::kDType, {"SumInto"});
}

// Runs fn(rank) for ranks 0 and 1, each on a thread of its own (a process
// of the job), and checks that neither threw.
template <typename Fn>
void OnTwoRanks(const Fn& fn) {
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      try {
        fn(rank);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    CHECK(errors[static_cast<size_t>(rank)] == "");
  }
}

TEST_CASE("collective ops across two processes of two devices: Allreduce, Broadcast, Barrier") {
  // Through shared memory (the default between processes of a host) and over Gloo.
  for (const char* transport : {"auto", "tcp"}) {
    CAPTURE(transport);
    TempDir dir("dp_gloo");
    const std::string url = "file://" + dir.Path("store");
    std::vector<std::vector<float>> got(2);
    OnTwoRanks([&](int rank) {
      auto wsp = std::make_shared<Workspace>();
      Workspace& ws = *wsp;
      NetDef net;
      net.ops.push_back(MakeOperatorDef(
          "CreateCpuCollectives", {}, {"comm"},
          {MakeArg("num_devices", int64_t{2}), MakeArg("world_size", int64_t{2}), MakeArg("rank", int64_t{rank}),
           MakeArg("store", url), MakeArg("timeout_ms", int64_t{20000}), MakeArg("run_id", std::string("t")),
           MakeArg("local_transport", std::string(transport))}));
      for (int d = 0; d < 2; ++d) {
        const float base = static_cast<float>(10 * rank + d);
        FeedOwned(ws, "x" + std::to_string(d), Make<float>({3}, {base, base + 1, base + 2}));
        FeedOwned(ws, "w" + std::to_string(d), Make<float>({2}, {base, -base}));
      }
      net.ops.push_back(MakeOperatorDef("Allreduce", {"comm", "x0", "x1"}, {"x0", "x1"},
                                        {MakeArg("num_devices", int64_t{2}), MakeArg("scale", 0.25)}));
      net.ops.push_back(MakeOperatorDef("Broadcast", {"comm", "w0", "w1"}, {"w0", "w1"},
                                        {MakeArg("num_devices", int64_t{2}), MakeArg("root", int64_t{1})}));
      net.ops.push_back(MakeOperatorDef("Barrier", {"comm"}, {}));
      net.external_inputs = {"x0", "x1", "w0", "w1"};
      Net(std::make_shared<const NetDef>(net), wsp).Run();
      std::vector<float> out;
      for (const char* name : {"x0", "x1", "w0", "w1"}) {
        const Tensor& t = ws.GetBlob(name)->Get<Tensor>();
        out.insert(out.end(), t.data<float>(), t.data<float>() + t.numel());
      }
      got[static_cast<size_t>(rank)] = out;
    });
    for (int rank = 0; rank < 2; ++rank) {
      CAPTURE(rank);
      // x: (0 + 1 + 10 + 11) / 4 = 5.5 (+1, +2) on every device of every process.
      // w: rank 0's device 1 ({1, -1}) everywhere.
      const std::vector<float> want{5.5f, 6.5f, 7.5f, 5.5f, 6.5f, 7.5f, 1, -1, 1, -1};
      CHECK(got[static_cast<size_t>(rank)] == want);
    }
  }
}

// A sharded optimizer state's ops (comm/cpu_shard_ops.cc) on 4 devices in
// all: one process of 4, or two processes of 2 through shared memory and over
// Gloo. Tensors of 300 elements (parts [0,128), [128,256), [256,300), empty),
// 10 (part 0 alone) and a scalar summed whole: each device's part holds the
// sum Allreduce gives it, bit for bit, the scalar its whole sum; Allgather
// gives every device every owner's part; GatherShards and ScatterShards
// round-trip the shards.
TEST_CASE("ReduceScatter, Allgather, GatherShards, ScatterShards: one process of 4 devices or 2 of 2") {
  const int total = 4;
  auto value = [](int device, int j, int64_t i) {
    return std::sin(0.37f * static_cast<float>(i) + static_cast<float>(device) + 5.0f * static_cast<float>(j)) * 3.0f;
  };
  const int64_t sizes[3] = {300, 10, 1};
  // parts of whole 64-element chunks over 4 devices: [0,128) [128,256) [256,300) [300,300)
  auto owner = [](int64_t n, int64_t i) {
    const int64_t per = (n + 4 * 64 - 1) / (4 * 64) * 64;
    return static_cast<int>(i / per);
  };
  // Each global device g = process * devices + d; what it ends with, per tensor.
  auto run = [&](int devices, int process, const std::vector<Argument>& comm_args) {
    auto ws = std::make_shared<Workspace>();
    NetDef net;
    std::vector<Argument> cargs{MakeArg("num_devices", int64_t{devices})};
    for (const auto& a : comm_args) cargs.push_back(a);
    net.ops.push_back(MakeOperatorDef("CreateCpuCollectives", {}, {"comm"}, cargs));
    std::vector<std::string> g{"comm"}, w{"comm"}, shards{"comm", "w0_0"};
    for (int d = 0; d < devices; ++d) {
      const int gd = process * devices + d;
      for (int j = 0; j < 3; ++j) {
        const std::string x = "g" + std::to_string(d) + "_" + std::to_string(j);
        std::vector<float> v(static_cast<size_t>(sizes[j]));
        for (int64_t i = 0; i < sizes[j]; ++i) v[static_cast<size_t>(i)] = value(gd, j, i);
        FeedOwned(*ws, x, Make<float>({sizes[j]}, v));
        g.push_back(x);
        net.external_inputs.push_back(x);
      }
      for (int j = 0; j < 2; ++j) {  // params: the owner's values in its part, junk elsewhere
        const std::string x = "w" + std::to_string(d) + "_" + std::to_string(j);
        std::vector<float> v(static_cast<size_t>(sizes[j]));
        for (int64_t i = 0; i < sizes[j]; ++i)
          v[static_cast<size_t>(i)] = owner(sizes[j], i) == gd ? static_cast<float>(1000 * gd + i) : -1.0f;
        FeedOwned(*ws, x, Make<float>({sizes[j]}, v));
        w.push_back(x);
        net.external_inputs.push_back(x);
      }
    }
    net.ops.push_back(MakeOperatorDef("ReduceScatter", g, std::vector<std::string>(g.begin() + 1, g.end()),
                                      {MakeArg("num_devices", int64_t{devices}), MakeArg("shard_tensors", int64_t{2}),
                                       MakeArg("scale", 0.5)}));
    net.ops.push_back(MakeOperatorDef("Allgather", w, std::vector<std::string>(w.begin() + 1, w.end()),
                                      {MakeArg("num_devices", int64_t{devices})}));
    // w_0 after the gather is whole: cut it into shards and gather them again.
    std::vector<std::string> cut;
    for (int d = 0; d < devices; ++d) cut.push_back("s" + std::to_string(d));
    net.ops.push_back(MakeOperatorDef("ScatterShards", {"comm", "w0_0"}, cut, {MakeArg("num_devices", int64_t{devices})}));
    std::vector<std::string> gather_in{"comm", "w0_0"};
    gather_in.insert(gather_in.end(), cut.begin(), cut.end());
    net.ops.push_back(MakeOperatorDef("GatherShards", gather_in, {"full"}, {MakeArg("num_devices", int64_t{devices})}));
    Net(std::make_shared<const NetDef>(net), ws).Run();
    std::map<std::string, std::vector<float>> out;
    for (const auto& name : ws->Blobs()) {
      const Blob* b = ws->GetBlob(name);
      if (!b->IsType<Tensor>()) continue;
      const Tensor& t = b->Get<Tensor>();
      out[name] = std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
    }
    return out;
  };
  // The allreduce's sums: one process of 4 devices.
  std::map<std::string, std::vector<float>> want;
  {
    auto ws = std::make_shared<Workspace>();
    NetDef net;
    net.ops.push_back(MakeOperatorDef("CreateCpuCollectives", {}, {"comm"}, {MakeArg("num_devices", int64_t{total})}));
    std::vector<std::string> g{"comm"};
    for (int d = 0; d < total; ++d)
      for (int j = 0; j < 3; ++j) {
        const std::string x = "g" + std::to_string(d) + "_" + std::to_string(j);
        std::vector<float> v(static_cast<size_t>(sizes[j]));
        for (int64_t i = 0; i < sizes[j]; ++i) v[static_cast<size_t>(i)] = value(d, j, i);
        FeedOwned(*ws, x, Make<float>({sizes[j]}, v));
        g.push_back(x);
        net.external_inputs.push_back(x);
      }
    net.ops.push_back(MakeOperatorDef("Allreduce", g, std::vector<std::string>(g.begin() + 1, g.end()),
                                      {MakeArg("num_devices", int64_t{total}), MakeArg("scale", 0.5)}));
    Net(std::make_shared<const NetDef>(net), ws).Run();
    for (int j = 0; j < 3; ++j) {
      const Tensor& t = ws->GetTensor("g0_" + std::to_string(j));
      want["g_" + std::to_string(j)] = std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
    }
  }
  auto check = [&](const std::map<std::string, std::vector<float>>& got, int devices, int process, bool exact) {
    for (int d = 0; d < devices; ++d) {
      const int gd = process * devices + d;
      CAPTURE(gd);
      for (int j = 0; j < 3; ++j) {
        const auto& v = got.at("g" + std::to_string(d) + "_" + std::to_string(j));
        const auto& sum = want.at("g_" + std::to_string(j));
        bool ok = true;
        for (int64_t i = 0; i < sizes[j]; ++i) {
          const bool mine = j == 2 || owner(sizes[j], i) == gd;
          const float a = v[static_cast<size_t>(i)], b = sum[static_cast<size_t>(i)];
          if (mine) ok = ok && (exact ? a == b : std::fabs(a - b) <= 1e-5f * (1 + std::fabs(b)));
        }
        CHECK(ok);
      }
      for (int j = 0; j < 2; ++j) {
        const auto& v = got.at("w" + std::to_string(d) + "_" + std::to_string(j));
        bool ok = true;
        for (int64_t i = 0; i < sizes[j]; ++i)
          ok = ok && v[static_cast<size_t>(i)] == static_cast<float>(1000 * owner(sizes[j], i) + i);
        CHECK(ok);
      }
      CHECK(got.at("s" + std::to_string(d)).size() == (gd < 2 ? 128u : gd == 2 ? 44u : 0u));
    }
    CHECK(got.at("full") == got.at("w0_0"));
  };
  check(run(total, 0, {}), total, 0, true);
  for (const char* transport : {"auto", "tcp"}) {
    CAPTURE(transport);
    TempDir dir("dp_shards");
    const std::string url = "file://" + dir.Path("store");
    std::vector<std::map<std::string, std::vector<float>>> got(2);
    OnTwoRanks([&](int rank) {
      got[static_cast<size_t>(rank)] =
          run(2, rank,
              {MakeArg("world_size", int64_t{2}), MakeArg("rank", int64_t{rank}), MakeArg("store", url),
               MakeArg("timeout_ms", int64_t{20000}), MakeArg("run_id", std::string("z")),
               MakeArg("local_transport", std::string(transport))});
    });
    // Two processes sum each one's pair first: the float sums of 4 devices
    // in another association (mp_zero_* compare with the unsharded run of
    // the same processes, bit for bit).
    for (int rank = 0; rank < 2; ++rank)
      if (!got[static_cast<size_t>(rank)].empty()) check(got[static_cast<size_t>(rank)], 2, rank, false);
  }
}

// Compressed gradients: one process's two devices and two processes of one
// device each give the same bits (each contribution rounded to 16 bits once,
// summed in float, rounded once), through shared memory and over Gloo; and
// the result is the float sum within the 16-bit type's rounding.
TEST_CASE("compressed Allreduce (bf16, fp16): two devices of one process equal two processes, bit for bit") {
  const int64_t n = 5000;
  auto values = [&](int who) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(who)) * 3e-3f;
    return v;
  };
  auto allreduce = [&](int devices, const std::vector<Argument>& comm_args, const std::string& compress, int who) {
    auto ws = std::make_shared<Workspace>();
    NetDef net;
    std::vector<Argument> cargs{MakeArg("num_devices", int64_t{devices})};
    for (const auto& a : comm_args) cargs.push_back(a);
    net.ops.push_back(MakeOperatorDef("CreateCpuCollectives", {}, {"comm"}, cargs));
    std::vector<std::string> xs{"comm"};
    for (int d = 0; d < devices; ++d) {
      FeedOwned(*ws, "x" + std::to_string(d), Make<float>({n}, values(who + d)));
      xs.push_back("x" + std::to_string(d));
      net.external_inputs.push_back("x" + std::to_string(d));
    }
    net.ops.push_back(MakeOperatorDef("Allreduce", xs, std::vector<std::string>(xs.begin() + 1, xs.end()),
                                      {MakeArg("num_devices", int64_t{devices}), MakeArg("scale", 0.5),
                                       MakeArg("compress", compress), MakeArg("key", std::string("g"))}));
    Net(std::make_shared<const NetDef>(net), ws).Run();
    std::vector<std::vector<float>> out;
    for (int d = 0; d < devices; ++d) {
      const Tensor& t = ws->GetBlob("x" + std::to_string(d))->Get<Tensor>();
      out.emplace_back(t.data<float>(), t.data<float>() + t.numel());
    }
    return out;
  };
  std::vector<float> exact(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    exact[static_cast<size_t>(i)] = 0.5f * (values(0)[static_cast<size_t>(i)] + values(1)[static_cast<size_t>(i)]);
  for (const std::string compress : {"bf16", "fp16"}) {
    CAPTURE(compress);
    const auto one = allreduce(2, {}, compress, 0);
    CHECK(one[0] == one[1]);
    // Three roundings (each contribution, the sum), each within half a unit
    // in the last place of its term: relative to the terms' magnitude.
    double worst = 0;
    const std::vector<float> a = values(0), b = values(1);
    for (size_t i = 0; i < static_cast<size_t>(n); ++i)
      worst = std::max(worst, std::fabs(double{one[0][i]} - exact[i]) / (0.5 * (std::fabs(a[i]) + std::fabs(b[i]))));
    CHECK(worst <= (compress == "bf16" ? 3.0 / 256 : 3.0 / 2048));
    CHECK(one[0] != exact);  // it did go through 16 bits
    for (const char* transport : {"auto", "tcp"}) {
      CAPTURE(transport);
      TempDir dir("dp_compress");
      const std::string url = "file://" + dir.Path("store");
      std::vector<std::vector<std::vector<float>>> got(2);
      OnTwoRanks([&](int rank) {
        got[static_cast<size_t>(rank)] =
            allreduce(1,
                      {MakeArg("world_size", int64_t{2}), MakeArg("rank", int64_t{rank}), MakeArg("store", url),
                       MakeArg("timeout_ms", int64_t{20000}), MakeArg("run_id", std::string("c")),
                       MakeArg("local_transport", std::string(transport))},
                      compress, rank);
      });
      for (int rank = 0; rank < 2; ++rank) {
        CAPTURE(rank);
        if (!got[static_cast<size_t>(rank)].empty()) CHECK(got[static_cast<size_t>(rank)][0] == one[0]);
      }
    }
  }
}

}  // namespace
