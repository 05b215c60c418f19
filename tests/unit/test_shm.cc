// Collectives between the processes of one host through shared memory
// (ShmCommunicator), and across hosts (HierarchicalCommunicator: shared
// memory inside a host, Gloo between hosts), with every rank a thread of
// this process: sums of four dtypes and many sizes (identical bytes on every
// rank), broadcast, allgather, reduce-scatter, barrier; buffered collectives
// hand out their result in ordered pieces straight from the owners'
// memory; a peer that leaves or stalls fails the others in bounded time,
// naming it, and a failure reaches every peer; nothing is left in /dev/shm.
// Then ConnectProcesses' choice of communicator.
#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/gloo_communicator.h"
#include "comm/hierarchical_communicator.h"
#include "comm/process_group.h"
#include "comm/shm_communicator.h"
#include "comm/shm_segment.h"
#include "comm/store.h"
#include "comm/store_address.h"
#include "communicator_checks.h"
#include "expect_error.h"
#include "temp_dir.h"

using namespace dp;
using namespace dp::testing;

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Runs fn(rank) on `size` threads and returns each one's error ("" when none).
std::vector<std::string> OnThreads(int size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = std::string(CodeName(e.code())) + ": " + e.message();
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = std::string("unexpected: ") + e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

void CheckNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    CAPTURE(r);
    CHECK(errors[r] == "");
  }
}

std::shared_ptr<Store> OpenStore(const TempDir& dir, const std::string& scope) {
  return Store::Open(ParseStoreAddress("file://" + dir.Path("store")), scope);
}

std::unique_ptr<ShmCommunicator> ConnectShm(const TempDir& dir, int rank, int size,
                                            milliseconds timeout = milliseconds(20000)) {
  ShmOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  return ShmCommunicator::Connect(OpenStore(dir, "shm"), o);
}

// Runs fn(rank, communicator) on `size` threads after their rendezvous.
void WithShm(int size, const std::function<void(int, ShmCommunicator&)>& fn) {
  TempDir dir("dp_shm");
  CheckNoErrors(OnThreads(size, [&](int r) {
    auto comm = ConnectShm(dir, r, size);
    fn(r, *comm);
    comm->Barrier();  // nobody leaves while another still waits for it
  }));
}

// The names of this process's segments in /dev/shm ("dp-<ns>-<pid>-...").
std::vector<std::string> MySegments() {
  std::vector<std::string> out;
  const std::string mine = "-" + std::to_string(getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("dp-", 0) == 0 && name.find(mine) != std::string::npos) out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

// ---- one host -----------------------------------------------------------------

TEST_CASE("shm: allreduce sums four dtypes over many sizes, exact on every rank") {
  const int64_t scratch_floats = static_cast<int64_t>(ShmCommunicator::kScratchBytes / 4);
  for (int size : {1, 2, 3, 4}) {
    CAPTURE(size);
    WithShm(size, [&](int r, ShmCommunicator& comm) {
      CHECK(comm.rank() == r);
      CHECK(comm.size() == size);
      CHECK(std::string(comm.backend()) == "shm");
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{17}, int64_t{1000}, scratch_floats + 3,
                            2 * scratch_floats + 101}) {
        CAPTURE(count);
        CheckAllreduceOn<float>(comm, r, size, count, DType::kFloat32);
      }
      CheckAllreduceOn<double>(comm, r, size, 1001, DType::kFloat64);
      CheckAllreduceOn<int32_t>(comm, r, size, 77, DType::kInt32);
      CheckAllreduceOn<int64_t>(comm, r, size, 3, DType::kInt64);
      CheckHalfAllreduceOn<BFloat16>(comm, r, size, 1000, DType::kBFloat16);
      CheckHalfAllreduceOn<Half>(comm, r, size, 2 * scratch_floats + 7, DType::kFloat16);
    });
  }
}

TEST_CASE("shm: float sums are the same bytes on every rank (computed once, rank order)") {
  const int size = 3;
  const int64_t count = 100000;
  std::vector<std::vector<float>> got(size);
  WithShm(size, [&](int r, ShmCommunicator& comm) {
    std::vector<float> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = 0.1f * static_cast<float>(i % 13) / static_cast<float>(r + 3);
    auto prepared = comm.PrepareAllreduceSum(v.data(), count, DType::kFloat32);
    prepared->Run();
    got[static_cast<size_t>(r)] = v;
  });
  for (int r = 1; r < size; ++r)
    CHECK(std::memcmp(got[0].data(), got[static_cast<size_t>(r)].data(), static_cast<size_t>(count) * 4) == 0);
  // In rank order: ((x0 + x1) + x2), as one would sum them.
  const float want = (0.1f * 5 / 3 + 0.1f * 5 / 4) + 0.1f * 5 / 5;
  CHECK(got[0][5] == want);
}

TEST_CASE("shm: broadcast, allgather, reduce-scatter and barrier; argument errors leave it usable") {
  WithShm(3, [&](int r, ShmCommunicator& comm) {
    CheckOtherCollectives(comm, r, 3, {1000, ShmCommunicator::kScratchBytes * 2 + 5});
    CheckPreparedShardCollectives(comm, r, 3);
  });
}

TEST_CASE("shm: a buffered allreduce hands out ordered pieces from the owners' memory, run after run") {
  const int size = 3;
  const int64_t count = 1000;  // 3 slices of whole cache lines: 336, 336, 328 floats
  WithShm(size, [&](int r, ShmCommunicator& comm) {
    auto coll = comm.PrepareBufferedAllreduceSum(count, DType::kFloat32);
    auto bcast = comm.PrepareBufferedBroadcast(64, 2);
    for (int run = 0; run < 5; ++run) {
      auto* in = static_cast<float*>(coll->input());
      for (int64_t i = 0; i < count; ++i) in[i] = static_cast<float>(run * 100 + r + i);
      std::vector<std::pair<size_t, size_t>> pieces;
      std::vector<float> out(static_cast<size_t>(count));
      auto sink = [&](const void* piece, size_t off, size_t n) {
        pieces.emplace_back(off, n);
        std::memcpy(reinterpret_cast<char*>(out.data()) + off, piece, n);
      };
      coll->Run(SinkOf(sink));
      REQUIRE(pieces.size() == 3);
      CHECK(pieces[0] == std::make_pair(size_t{0}, size_t{336 * 4}));
      CHECK(pieces[1] == std::make_pair(size_t{336 * 4}, size_t{336 * 4}));
      CHECK(pieces[2] == std::make_pair(size_t{672 * 4}, size_t{328 * 4}));
      bool exact = true;
      for (int64_t i = 0; i < count; ++i)
        exact = exact && out[static_cast<size_t>(i)] == static_cast<float>(3 * (run * 100 + i) + 0 + 1 + 2);
      CHECK(exact);
      // The broadcast's root writes its input; everyone reads the root's bytes.
      char* b = static_cast<char*>(bcast->input());
      if (r == 2) std::snprintf(b, 64, "run %d", run);
      std::string got;
      auto read = [&](const void* piece, size_t, size_t n) { got.assign(static_cast<const char*>(piece), strnlen(static_cast<const char*>(piece), n)); };
      bcast->Run(SinkOf(read));
      CHECK(got == "run " + std::to_string(run));
    }
    // A sink's error is the caller's: the collective completed, the peers go on.
    auto thrower = [&](const void*, size_t, size_t) { DP_THROW(Code::kShape, "sink of rank ", r); };
    coll->input();
    ExpectError([&] { coll->Run(SinkOf(thrower)); }, Code::kShape, {"sink of rank"});
    comm.Barrier();
  });
  CHECK(MySegments().empty());  // every segment was unlinked once mapped
}

TEST_CASE("shm: a peer that leaves fails the others at once, naming it; the communicator stays failed") {
  TempDir dir("dp_shm");
  std::vector<std::unique_ptr<AfterPeerLeft>> seen(3);
  CheckNoErrors(OnThreads(3, [&](int r) {
    auto comm = ConnectShm(dir, r, 3, milliseconds(20000));
    comm->Barrier();
    if (r == 2) return;  // leaves: its communicator closes
    seen[static_cast<size_t>(r)] = std::make_unique<AfterPeerLeft>(*comm);
  }));
  for (int r = 0; r < 2; ++r) {
    REQUIRE(seen[static_cast<size_t>(r)]);
    const AfterPeerLeft& s = *seen[static_cast<size_t>(r)];
    CAPTURE(s.first);
    CHECK(s.first.rfind("UNAVAILABLE", 0) == 0);
    CHECK(s.first.find("rank 2 is missing (it closed its communicator)") != std::string::npos);
    CHECK(s.seconds < 1.0);  // not the 20 s timeout
    CHECK(s.StaysFailed());
  }
}

TEST_CASE("shm: a stalled peer fails the others after the timeout, naming it; the failure reaches it too") {
  TempDir dir("dp_shm");
  const int size = 3;
  std::vector<std::string> errors(size);
  std::vector<double> took(size);
  std::atomic<int> failed{0};
  CheckNoErrors(OnThreads(size, [&](int r) {
    auto comm = ConnectShm(dir, r, size, milliseconds(400));
    comm->Barrier();
    std::vector<float> v(10, 1.0f);
    if (r == 1) {  // stalls until both others have failed, then comes late
      while (failed.load() < 2) std::this_thread::yield();
    }
    const auto start = Clock::now();
    try {
      comm->AllreduceSum(v.data(), 10, DType::kFloat32);
    } catch (const Error& e) {
      errors[static_cast<size_t>(r)] = std::string(CodeName(e.code())) + ": " + e.message();
    }
    took[static_cast<size_t>(r)] = Seconds(start);
    failed.fetch_add(1);
  }));
  for (int r : {0, 2}) {
    CAPTURE(errors[static_cast<size_t>(r)]);
    CHECK(errors[static_cast<size_t>(r)].rfind("TIMEOUT", 0) == 0);
    CHECK(errors[static_cast<size_t>(r)].find("rank 1 is missing (alive, but it did not arrive") != std::string::npos);
    CHECK(took[static_cast<size_t>(r)] < 0.4 + 1.0);
  }
  // The latecomer finds the published failure at once instead of waiting.
  CAPTURE(errors[1]);
  CHECK(errors[1].rfind("TIMEOUT", 0) == 0);
  CHECK(errors[1].find("failed first") != std::string::npos);
  CHECK(took[1] < 0.2);
}

TEST_CASE("shm: Abort reaches a peer blocked in a collective") {
  TempDir dir("dp_shm");
  std::vector<std::string> errors(2);
  double took = 0;
  CheckNoErrors(OnThreads(2, [&](int r) {
    auto comm = ConnectShm(dir, r, 2, milliseconds(20000));
    comm->Barrier();
    if (r == 0) {
      std::this_thread::sleep_for(milliseconds(50));  // let rank 1 block (any moment would do)
      comm->Abort("rank 0 gives up");
      ExpectError([&] { comm->Barrier(); }, Code::kUnavailable, {"rank 0 gives up"});
      return;
    }
    const auto start = Clock::now();
    try {
      comm->Barrier();
    } catch (const Error& e) {
      errors[1] = e.message();
    }
    took = Seconds(start);
  }));
  CHECK(errors[1].find("rank 0 failed first: rank 0 gives up") != std::string::npos);
  CHECK(took < 1.0);
}

TEST_CASE("shm: a rank that never arrives fails the rendezvous in bounded time, naming it") {
  TempDir dir("dp_shm");
  const auto errors = OnThreads(2, [&](int r) {  // ranks 0 and 1 of 3
    const auto start = Clock::now();
    try {
      ConnectShm(dir, r, 3, milliseconds(300));
    } catch (...) {
      CHECK(Seconds(start) < 0.3 + 1.0);
      throw;
    }
  });
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(e.rfind("TIMEOUT", 0) == 0);
    CHECK(e.find("rank 2 did not arrive") != std::string::npos);
  }
  CHECK(MySegments().empty());
}

TEST_CASE("shm segments: full /dev/shm is an error with a remedy; dead makers' segments are swept") {
  ExpectError([] { ShmSegment::Create(size_t{1} << 52); }, Code::kOutOfMemory, {"/dev/shm cannot hold", "tcp"});
  // A segment named for a process that no longer runs (this one's child).
  const pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  auto probe = ShmSegment::Create(4096);
  const std::string name = probe.name();  // "/dp-<ns>-<pid>-<hex>"
  const std::string stale = name.substr(0, name.find('-', 4) + 1) + std::to_string(child) + "-0123456789abcdef";
  const int fd = shm_open(stale.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  REQUIRE(fd >= 0);
  close(fd);
  ShmSegment::SweepStale();  // (the first Create of a process runs it)
  CHECK(shm_open(stale.c_str(), O_RDONLY, 0) < 0);
  auto other = ShmSegment::Create(4096);
  // Opening checks the size it expects.
  ExpectError([&] { ShmSegment::Open(other.name(), 8192); }, Code::kUnavailable, {"holds 4096 bytes"});
  auto same = ShmSegment::Open(other.name(), 4096);
  other.data()[7] = 42;
  CHECK(same.data()[7] == 42);
  CHECK(!ShmDomain().empty());
}

TEST_CASE("shm: a collective that shared memory cannot hold falls back to TCP (auto), or fails (shm)") {
  for (bool fallback : {true, false}) {
    CAPTURE(fallback);
    TempDir dir("dp_shm");
    const int64_t count = 100000;  // 400 KB per process: over the 256 KiB limit
    const auto errors = OnThreads(2, [&](int r) {
      ShmOptions o;
      o.rank = r;
      o.size = 2;
      o.timeout = milliseconds(20000);
      o.max_bytes = size_t{256} << 10;
      o.tcp_fallback = fallback;
      auto comm = ShmCommunicator::Connect(OpenStore(dir, "shm"), o);
      auto small = comm->PrepareBufferedAllreduceSum(1000, DType::kFloat32);  // fits: shared memory
      auto big = comm->PrepareBufferedAllreduceSum(count, DType::kFloat32);   // over TCP, or an error
      for (auto* coll : {small.get(), big.get()}) {
        const int64_t n = coll == small.get() ? 1000 : count;
        auto* in = static_cast<float*>(coll->input());
        for (int64_t i = 0; i < n; ++i) in[i] = static_cast<float>(r + i % 3);
        bool exact = true;
        auto check = [&](const void* piece, size_t off, size_t len) {
          const auto* p = static_cast<const float*>(piece);
          for (size_t k = 0; k < len / 4; ++k) exact = exact && p[k] == static_cast<float>(1 + 2 * ((off / 4 + k) % 3));
        };
        coll->Run(SinkOf(check));
        CHECK(exact);
      }
      comm->Barrier();
    });
    for (const auto& e : errors) {
      CAPTURE(e);
      if (fallback) {
        CHECK(e == "");
      } else {
        CHECK(e.rfind("OUT_OF_MEMORY", 0) == 0);
        CHECK(e.find("would hold 792 KiB, over their limit of 256 KiB") != std::string::npos);
      }
    }
  }
}

// ---- several hosts: shared memory inside, Gloo across -------------------------------

// Ranks {0, 2} on "host" 0 and {1, 3} on host 1 (interleaved, as --nodes
// placement need not be), every rank a thread.
void WithTwoHosts(const std::function<void(int, Communicator&)>& fn) {
  TempDir dir("dp_hier");
  const std::vector<std::vector<int>> hosts = {{0, 2}, {1, 3}};
  CheckNoErrors(OnThreads(4, [&](int r) {
    HostLayout layout;
    layout.ranks_of = hosts;
    layout.host_of = {0, 1, 0, 1};
    layout.local_of = {0, 0, 1, 1};
    const int h = layout.host_of[static_cast<size_t>(r)], l = layout.local_of[static_cast<size_t>(r)];
    ShmOptions s;
    s.rank = l;
    s.size = 2;
    s.names = hosts[static_cast<size_t>(h)];
    s.timeout = milliseconds(20000);
    auto local = ShmCommunicator::Connect(OpenStore(dir, "shm/" + std::to_string(h)), s);
    GlooOptions g;
    g.rank = h;
    g.size = 2;
    g.timeout = milliseconds(20000);
    g.names = {hosts[0][static_cast<size_t>(l)], hosts[1][static_cast<size_t>(l)]};
    auto across = ConnectGloo(OpenStore(dir, "col/" + std::to_string(l)), g);
    auto comm = MakeHierarchical(r, layout, std::move(local), std::move(across));
    fn(r, *comm);
    comm->Barrier();
  }));
}

TEST_CASE("hierarchical: allreduce, broadcast, allgather in rank order, reduce-scatter, barrier") {
  WithTwoHosts([](int r, Communicator& comm) {
    CHECK(comm.rank() == r);
    CHECK(comm.size() == 4);
    CHECK(std::string(comm.backend()) == "shm+gloo");
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{300000}})
      CheckAllreduceOn<float>(comm, r, 4, count, DType::kFloat32);
    CheckAllreduceOn<int64_t>(comm, r, 4, 9, DType::kInt64);
    CheckHalfAllreduceOn<BFloat16>(comm, r, 4, 300000, DType::kBFloat16);
    CheckHalfAllreduceOn<Half>(comm, r, 4, 1001, DType::kFloat16);
    for (int root = 0; root < 4; ++root) {
      std::vector<int32_t> b(1000, r);
      comm.Broadcast(b.data(), b.size() * 4, root);
      CHECK(std::count(b.begin(), b.end(), root) == 1000);
    }
    // Allgather in rank order though hosts interleave ranks; the reduce-scatter is the allreduce.
    CheckOtherCollectives(comm, r, 4, {1000}, false);
    CheckPreparedShardCollectives(comm, r, 4);
  });
}

TEST_CASE("hierarchical: buffered collectives (a slice of each host across, then read in place)") {
  WithTwoHosts([](int r, Communicator& comm) {
    const int64_t count = 100003;
    auto coll = comm.PrepareBufferedAllreduceSum(count, DType::kFloat32);
    auto bcast = comm.PrepareBufferedBroadcast(static_cast<size_t>(count) * 4, 0);
    for (int run = 0; run < 3; ++run) {
      auto* in = static_cast<float*>(coll->input());
      for (int64_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * (i % 5) + run);
      std::vector<float> out(static_cast<size_t>(count), -1.0f);
      size_t next = 0;
      auto sink = [&](const void* piece, size_t off, size_t n) {
        CHECK(off == next);  // ordered, covering
        next = off + n;
        std::memcpy(reinterpret_cast<char*>(out.data()) + off, piece, n);
      };
      coll->Run(SinkOf(sink));
      CHECK(next == static_cast<size_t>(count) * 4);
      bool exact = true;
      for (int64_t i = 0; i < count; ++i) exact = exact && out[static_cast<size_t>(i)] == static_cast<float>(10 * (i % 5) + 4 * run);
      CHECK(exact);
      auto* b = static_cast<float*>(bcast->input());
      if (r == 0) std::fill(b, b + count, static_cast<float>(run + 7));
      bool same = true;
      auto check = [&](const void* piece, size_t, size_t n) {
        const auto* p = static_cast<const float*>(piece);
        for (size_t i = 0; i < n / 4; ++i) same = same && p[i] == static_cast<float>(run + 7);
      };
      bcast->Run(SinkOf(check));
      CHECK(same);
    }
  });
}

// ---- choosing the communicator ---------------------------------------------------

TEST_CASE("ConnectProcesses: shared memory on one host, Gloo with local_transport tcp; all must agree") {
  for (const char* transport : {"auto", "shm", "tcp"}) {
    CAPTURE(transport);
    TempDir dir("dp_group");
    CheckNoErrors(OnThreads(3, [&](int r) {
      ProcessGroupOptions o;
      o.rank = r;
      o.size = 3;
      o.timeout = milliseconds(20000);
      o.local_transport = transport;
      auto comm = ConnectProcesses(OpenStore(dir, "job"), o);
      CHECK(std::string(comm->backend()) == (std::string(transport) == "tcp" ? "gloo" : "shm"));
      CheckAllreduceOn<float>(*comm, r, 3, 5000, DType::kFloat32);
      comm->Barrier();
    }));
  }
  TempDir dir("dp_group");
  const auto errors = OnThreads(2, [&](int r) {
    ProcessGroupOptions o;
    o.rank = r;
    o.size = 2;
    o.timeout = milliseconds(20000);
    o.local_transport = r == 0 ? "auto" : "tcp";
    ConnectProcesses(OpenStore(dir, "job"), o);
  });
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(e.find("every process must pass the same") != std::string::npos);
  }
  ProcessGroupOptions bad;
  bad.size = 2;
  bad.local_transport = "udp";
  ExpectError([&] { ConnectProcesses(OpenStore(dir, "x"), bad); }, Code::kInvalidArgument, {"udp"});
}

}  // namespace
