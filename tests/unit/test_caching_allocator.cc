// The device memory allocator's policy (core/caching_allocator.h) on the
// host, over a fake backend: host memory for segments, with a capacity, and
// fake streams whose events complete when a test says so. What only a GPU
// checks (cudaMalloc counts over real training steps) is in test_cuda_gpu.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/caching_allocator.h"
#include "core/context.h"
#include "core/storage.h"
#include "exec/net.h"
#include "expect_error.h"
#include "graph/net_format.h"
#include "ops/operator.h"

using namespace dp;
using dp::testing::ExpectError;

namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

// Host memory as a device of `capacity` bytes. Each stream is a counter of
// work queued and work done: an event is done once its stream's done count
// reaches the queued count at recording. Streams in `captured` are being
// recorded into a graph: an event recorded there stands for no work, and its
// query says so (kCaptured, as CUDA refuses to query it); recording on a
// stream the allocator was told is captured (`told`), or the device
// synchronising or giving a segment back while any stream is captured, is
// counted as a fault.
class FakeBackend final : public CachingAllocatorBackend {
 public:
  explicit FakeBackend(size_t capacity = size_t{1} << 40) : capacity_(capacity) {}
  ~FakeBackend() override { CHECK(live_events_ == 0); }

  void* AllocateSegment(size_t bytes) override {
    ++segment_calls_;
    if (bytes > capacity_ - used_) return nullptr;
    void* p = std::aligned_alloc(CachingAllocator::kRound, bytes);
    REQUIRE(p != nullptr);
    used_ += bytes;
    segments_[p] = bytes;
    return p;
  }
  void FreeSegment(void* ptr, size_t bytes) noexcept override {
    if (!captured.empty()) ++capture_faults_;
    CHECK(segments_[ptr] == bytes);
    segments_.erase(ptr);
    used_ -= bytes;
    std::free(ptr);
  }
  EventHandle RecordEvent(StreamId stream) noexcept override {
    if (fail_records_) return nullptr;
    ++live_events_;
    ++records_;
    if (captured.count(stream) != 0) {
      if (told.count(stream) != 0) ++capture_faults_;
      return new Event{stream, 0, true};
    }
    auto* e = new Event{stream, ++queued_[stream]};
    return e;
  }
  EventState QueryEvent(EventHandle event) noexcept override {
    ++queries_;
    auto* e = static_cast<Event*>(event);
    if (e->in_capture) return EventState::kCaptured;
    return done_[e->stream] >= e->seq ? EventState::kDone : EventState::kRunning;
  }
  void ReleaseEvent(EventHandle event) noexcept override {
    --live_events_;
    delete static_cast<Event*>(event);
  }
  void SynchronizeDevice() noexcept override {
    if (!captured.empty()) ++capture_faults_;
    ++syncs_;
    for (auto& [s, q] : queued_) done_[s] = q;
  }

  // The stream gets past everything queued on it so far.
  void Complete(StreamId s) { done_[s] = queued_[s]; }
  void CompleteAll() {
    for (auto& [s, q] : queued_) done_[s] = q;
  }

  size_t used_ = 0;
  size_t capacity_;
  int segment_calls_ = 0;
  int live_events_ = 0;
  int records_ = 0;
  int syncs_ = 0;
  int queries_ = 0;
  int capture_faults_ = 0;  // events recorded on, or waits for, streams being captured
  bool fail_records_ = false;
  std::set<StreamId> captured;  // being captured
  std::set<StreamId> told;      // of those, the ones the allocator was told of

 private:
  struct Event {
    StreamId stream;
    uint64_t seq;
    bool in_capture = false;
  };
  std::map<void*, size_t> segments_;
  std::map<StreamId, uint64_t> queued_, done_;
};

constexpr StreamId kA = 101, kB = 202, kC = 303;

}  // namespace

TEST_CASE("sizes round to 512 bytes; small requests share 2 MiB segments, large ones 20 MiB or their own") {
  CHECK(CachingAllocator::RoundSize(1) == 512);
  CHECK(CachingAllocator::RoundSize(512) == 512);
  CHECK(CachingAllocator::RoundSize(513) == 1024);
  CHECK(CachingAllocator::SegmentSize(512) == 2 * kMiB);
  CHECK(CachingAllocator::SegmentSize(kMiB) == 2 * kMiB);
  CHECK(CachingAllocator::SegmentSize(kMiB + 512) == 20 * kMiB);
  CHECK(CachingAllocator::SegmentSize(10 * kMiB - 512) == 20 * kMiB);
  CHECK(CachingAllocator::SegmentSize(10 * kMiB) == 10 * kMiB);
  CHECK(CachingAllocator::SegmentSize(11 * kMiB + 1) == 12 * kMiB);

  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  CHECK(a.Allocate(0, kA) == nullptr);
  std::vector<void*> small;
  for (int i = 0; i < 4; ++i) small.push_back(a.Allocate(100 * kKiB, kA));  // 4 x 100 KiB: one segment
  void* large = a.Allocate(3 * kMiB, kA);
  CachingAllocatorStats s = a.stats();
  CHECK(s.raw_allocs == 2);
  CHECK(s.reserved == 22 * kMiB);
  CHECK(s.allocated == 4 * 100 * kKiB + 3 * kMiB);
  CHECK(s.peak == s.allocated);
  // Blocks carved from one segment lie one after the other.
  CHECK(static_cast<char*>(small[1]) == static_cast<char*>(small[0]) + 100 * kKiB);
  for (void* p : small) a.Free(p, kA);
  a.Free(large, kA);
  s = a.stats();
  CHECK(s.allocated == 0);
  CHECK(s.peak == 4 * 100 * kKiB + 3 * kMiB);
  CHECK(s.reserved == 22 * kMiB);  // cached, not given back
  CHECK(s.raw_frees == 0);
  a.ResetPeak();
  CHECK(a.stats().peak == 0);
  a.ReleaseCached();
  s = a.stats();
  CHECK(s.reserved == 0);
  CHECK(s.raw_frees == 2);
  CHECK(backend.used_ == 0);
}

TEST_CASE("a steady state of the same sizes makes no raw allocation") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  const size_t sizes[] = {4 * kKiB, 300 * kKiB, 5 * kMiB, 64 * kMiB, 1000};
  for (int step = 0; step < 5; ++step) {
    std::vector<void*> ptrs;
    for (size_t n : sizes) ptrs.push_back(a.Allocate(n, kA));
    for (void* p : ptrs) std::memset(p, step, 512);
    for (void* p : ptrs) a.Free(p, kA);
    if (step == 0) REQUIRE(a.stats().raw_allocs == 3);  // small, 20 MiB, 64 MiB
  }
  CHECK(a.stats().raw_allocs == 3);
  CHECK(a.stats().raw_frees == 0);
  CHECK(backend.segment_calls_ == 3);
}

TEST_CASE("best fit picks the smallest free block that fits, splits it and merges free neighbours") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  void* p1 = a.Allocate(8 * kKiB, kA);
  void* sep1 = a.Allocate(512, kA);
  void* p2 = a.Allocate(4 * kKiB, kA);
  void* sep2 = a.Allocate(512, kA);
  a.Free(p1, kA);
  a.Free(p2, kA);
  // 3 KiB fits both holes and the segment's tail; the 4 KiB hole is the best.
  void* q = a.Allocate(3 * kKiB, kA);
  CHECK(q == p2);
  // The 1 KiB left of the 4 KiB hole was split off and serves a 1 KiB request.
  void* r = a.Allocate(kKiB, kA);
  CHECK(static_cast<char*>(r) == static_cast<char*>(p2) + 3 * kKiB);
  for (void* p : {q, r, sep1, sep2}) a.Free(p, kA);
  backend.CompleteAll();  // blocks waiting for events merge once they are done
  // Everything merged back into the one segment: a request of the whole
  // small segment's largest block (1 MiB) and another still fit in it.
  void* whole = a.Allocate(kMiB, kA);
  CHECK(whole == p1);
  void* second = a.Allocate(kMiB, kA);
  CHECK(static_cast<char*>(second) == static_cast<char*>(p1) + kMiB);
  CHECK(a.stats().raw_allocs == 1);
  a.Free(whole, kA);
  a.Free(second, kA);

  // Large pool: three 4 MiB blocks from one 20 MiB segment, freed in an
  // order that merges from both sides, then 18 MiB fits in it.
  void* l1 = a.Allocate(4 * kMiB, kA);
  void* l2 = a.Allocate(4 * kMiB, kA);
  void* l3 = a.Allocate(4 * kMiB, kA);
  CHECK(a.stats().raw_allocs == 2);
  a.Free(l1, kA);
  a.Free(l3, kA);
  a.Free(l2, kA);
  backend.CompleteAll();
  void* l = a.Allocate(18 * kMiB, kA);
  CHECK(l == l1);
  CHECK(a.stats().raw_allocs == 2);
  a.Free(l, kA);
  backend.CompleteAll();
  // A large remainder under 1 MiB stays with the block.
  void* big = a.Allocate(19 * kMiB + 512 * kKiB, kA);
  CHECK(a.stats().allocated == 20 * kMiB);
  a.Free(big, kA);
}

TEST_CASE("a freed block serves its stream at once and other streams once the free-time events complete") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  void* p = a.Allocate(64 * kKiB, kA);
  a.Free(p, kA);
  CHECK(backend.records_ == 2);  // one event on each of the device's streams
  void* on_b = a.Allocate(64 * kKiB, kB);
  CHECK(on_b != p);  // kA's work may still read p
  void* on_a = a.Allocate(64 * kKiB, kA);
  CHECK(on_a == p);  // ordered after kA's earlier work
  a.Free(on_a, kA);
  a.Free(on_b, kB);
  // Only one stream done: still only the owner may take it.
  backend.Complete(kA);
  void* b2 = a.Allocate(64 * kKiB, kB);
  CHECK(b2 == on_b);  // kB's own block
  a.Free(b2, kB);
  backend.CompleteAll();
  void* b3 = a.Allocate(64 * kKiB, kB);
  CHECK(b3 == p);  // every event done: the lower address for anyone (best fit by address)
  a.Free(b3, kB);
  CHECK(a.stats().raw_allocs == 1);
}

TEST_CASE("blocks of different owners stay apart until their events complete, then merge into one") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  void* x1 = a.Allocate(64 * kKiB, kA);
  void* x2 = a.Allocate(64 * kKiB, kA);
  void* x3 = a.Allocate(64 * kKiB, kA);
  a.Free(x1, kA);
  a.Free(x2, kB);  // owned by kB: does not merge with kA's neighbours
  a.Free(x3, kA);
  void* on_a = a.Allocate(128 * kKiB, kA);
  CHECK(on_a != x1);  // no 128 KiB block of kA's yet
  a.Free(on_a, kA);
  backend.CompleteAll();
  // All done: the three blocks and the rest of the segment are one free block again.
  void* whole = a.Allocate(kMiB, kB);
  CHECK(whole == x1);
  a.Free(whole, kB);
  CHECK(a.stats().raw_allocs == 1);
}

TEST_CASE("an allocation queries the oldest pending events, not every waiting block's") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(a.Allocate(4 * kKiB, kA));
  for (void* p : blocks) a.Free(p, kA);  // 100 blocks wait for the GPU, which lags behind
  backend.queries_ = 0;
  for (int i = 0; i < 100; ++i) a.Free(a.Allocate(64 * kKiB, kB), kB);
  CHECK(backend.queries_ <= 100);
  backend.CompleteAll();
  void* p = a.Allocate(400 * kKiB, kB);  // all merged again
  CHECK(p == blocks[0]);
  a.Free(p, kB);
}

TEST_CASE("memory freed or allocated outside any op waits for the events of every stream") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  void* p = a.Allocate(kKiB, kNoStream);
  a.Free(p, kNoStream);  // e.g. a net's teardown: no stream owns it
  void* q = a.Allocate(kKiB, kA);
  CHECK(q != p);
  void* h = a.Allocate(kKiB, kNoStream);
  CHECK(h != p);
  backend.Complete(kA);
  void* r = a.Allocate(kKiB, kNoStream);
  CHECK(r == p);
  // Freed on kA: kA takes it at once, a host allocation only after kA's event.
  a.Free(r, kA);
  void* host = a.Allocate(kKiB, kNoStream);
  CHECK(host != p);
  void* mine = a.Allocate(kKiB, kA);
  CHECK(mine == p);
  for (void* x : {q, h, host, mine}) a.Free(x, kA);
  // Without any stream registered (no CUDA context yet) there is nothing to wait for.
  FakeBackend b2;
  CachingAllocator lone(b2, {DeviceType::kCUDA, 1});
  void* x = lone.Allocate(kKiB, kNoStream);
  lone.Free(x, kNoStream);
  CHECK(lone.Allocate(kKiB, kNoStream) == x);
  lone.Free(x, kNoStream);
  CHECK(b2.records_ == 0);
}

TEST_CASE("an unregistered stream's blocks lose their owner; a failed record waits for the device") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  void* p = a.Allocate(kKiB, kA);
  a.Free(p, kA);
  a.UnregisterStream(kA);
  // A new stream at kA's address is not kA: it waits for the events.
  a.RegisterStream(kA);
  void* q = a.Allocate(kKiB, kA);
  CHECK(q != p);
  a.Free(q, kA);
  backend.CompleteAll();

  backend.fail_records_ = true;
  void* r = a.Allocate(kKiB, kB);
  a.Free(r, kB);
  CHECK(backend.syncs_ == 1);
  backend.fail_records_ = false;
  void* s = a.Allocate(kKiB, kNoStream);
  CHECK(s == r);  // nothing pending after the device was synchronised
  a.Free(s, kNoStream);
}

TEST_CASE("a refused raw allocation releases the cache and retries once, then is kOutOfMemory with the figures") {
  FakeBackend backend(24 * kMiB);
  CachingAllocator a(backend, {DeviceType::kCUDA, 3});
  void* small = a.Allocate(kKiB, kA);       // 2 MiB segment, kept
  void* cached = a.Allocate(11 * kMiB, kA); // a 12 MiB segment of its own
  a.Free(cached, kA);                       // cached: 14 MiB reserved
  CHECK(a.stats().reserved == 14 * kMiB);
  // 16 MiB is refused until the cached 12 MiB goes back.
  void* big = a.Allocate(16 * kMiB, kA);
  CHECK(big != nullptr);
  CachingAllocatorStats s = a.stats();
  CHECK(s.raw_frees == 1);
  CHECK(s.reserved == 18 * kMiB);
  CHECK(s.allocated == 16 * kMiB + 1024);
  ExpectError([&] { a.Allocate(12 * kMiB, kA); }, Code::kOutOfMemory,
              {"cuda:3", "12582912 bytes", "16778240 bytes allocated", "18874368 bytes reserved"});
  CHECK(a.stats().allocated == 16 * kMiB + 1024);  // nothing changed
  CHECK(a.stats().raw_frees == 1);
  ExpectError([&] { a.Allocate(size_t(-1), kA); }, Code::kOutOfMemory, {"cuda:3"});
  a.Free(big, kA);
  a.Free(small, kA);
}

namespace {

// A capture of `streams` as cuda/cuda_graph.cc makes one: the allocator told
// before the streams are recorded and after they are not any more.
struct FakeCapture {
  FakeCapture(CachingAllocator& a, FakeBackend& b, std::vector<StreamId> s) : alloc(a), backend(b), streams(s) {
    alloc.BeginCapture(streams);
    backend.captured.insert(streams.begin(), streams.end());
    backend.told.insert(streams.begin(), streams.end());
  }
  ~FakeCapture() { End(); }
  void End() {
    if (ended) return;
    ended = true;
    for (StreamId s : streams) {
      backend.captured.erase(s);
      backend.told.erase(s);
    }
    alloc.EndCapture(streams);
  }
  CachingAllocator& alloc;
  FakeBackend& backend;
  std::vector<StreamId> streams;
  bool ended = false;
};

}  // namespace

TEST_CASE("a block freed while its stream is captured waits for an event recorded there after the capture") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  void* p = a.Allocate(kKiB, kA);  // kA's work before the capture may still use p
  std::vector<void*> others;
  {
    FakeCapture capture(a, backend, {kA});
    a.Free(p, kNoStream);  // e.g. a tensor the caller dropped: no stream owns the block
    CHECK(backend.capture_faults_ == 0);  // no event recorded on kA while it is captured
    CHECK(backend.records_ == 1);         // kB's
    backend.CompleteAll();
    others.push_back(a.Allocate(kKiB, kB));
    CHECK(others.back() != p);  // kA's event is still to come
    others.push_back(a.Allocate(kKiB, kNoStream));
    CHECK(others.back() != p);
    const int records = backend.records_;
    capture.End();
    CHECK(backend.records_ == records + 1);  // kA's event, recorded once its capture ended
  }
  others.push_back(a.Allocate(kKiB, kB));
  CHECK(others.back() != p);  // kA's pre-capture work not yet done
  backend.Complete(kA);
  void* again = a.Allocate(kKiB, kB);
  CHECK(again == p);
  for (void* x : others) a.Free(x, kB);
  a.Free(again, kB);
  CHECK(backend.capture_faults_ == 0);
}

TEST_CASE("a free during a capture on the captured stream serves that stream at once, others after the capture") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  void* p = a.Allocate(kKiB, kA);
  FakeCapture capture(a, backend, {kA, kB});  // both streams joined
  a.Free(p, kA);
  CHECK(backend.records_ == 0);
  void* mine = a.Allocate(kKiB, kA);
  CHECK(mine == p);  // ordered after kA's work, captured or not
  a.Free(mine, kA);
  backend.CompleteAll();
  void* other = a.Allocate(kKiB, kB);
  CHECK(other != p);
  capture.End();
  CHECK(backend.records_ == 2);
  backend.CompleteAll();
  void* later = a.Allocate(kKiB, kB);
  CHECK(later == p);
  a.Free(later, kB);
  a.Free(other, kB);
  CHECK(backend.capture_faults_ == 0);
}

TEST_CASE("while a capture is underway the device is never synchronised nor a segment given back") {
  FakeBackend backend(24 * kMiB);
  CachingAllocator a(backend, {DeviceType::kCUDA, 2});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  void* cached = a.Allocate(11 * kMiB, kA);  // a 12 MiB segment of its own
  a.Free(cached, kA);
  backend.CompleteAll();
  {
    FakeCapture capture(a, backend, {kA});
    // 16 MiB fits only once the cached 12 MiB went back, which would
    // synchronise the device.
    ExpectError([&] { a.Allocate(16 * kMiB, kB); }, Code::kOutOfMemory,
                {"cuda:2", "a CUDA graph is being captured"});
    a.ReleaseCached();
    CHECK(a.stats().raw_frees == 0);
    // A free whose event cannot be recorded: held back, not a device-wide wait.
    void* q = a.Allocate(kKiB, kB);
    backend.fail_records_ = true;
    a.Free(q, kB);
    backend.fail_records_ = false;
    CHECK(backend.syncs_ == 0);
    CHECK(a.stats().allocated == 0);  // no longer counted, but nobody may take it yet
    void* r = a.Allocate(kKiB, kB);
    CHECK(r != q);
    void* mine = a.Allocate(kKiB, kNoStream);
    CHECK(mine != q);
    a.Free(r, kB);
    a.Free(mine, kB);
    CHECK(backend.capture_faults_ == 0);
    capture.End();
    CHECK(backend.syncs_ == 1);  // the held block's wait, once no capture is underway
    void* back = a.Allocate(kKiB, kNoStream);
    CHECK(back == q);
    a.Free(back, kNoStream);
  }
  void* big = a.Allocate(16 * kMiB, kB);  // now the cache goes back (the small segment too)
  CHECK(a.stats().raw_frees == 2);
  a.Free(big, kB);
  CHECK(backend.capture_faults_ == 0);
}

TEST_CASE("two captures at once: the device waits for the last to end; WaitUntilNoCapture is bounded") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  a.RegisterStream(kC);  // not captured
  CHECK(a.WaitUntilNoCapture(std::chrono::milliseconds(0)));
  auto first = std::make_unique<FakeCapture>(a, backend, std::vector<StreamId>{kA});
  auto second = std::make_unique<FakeCapture>(a, backend, std::vector<StreamId>{kB});
  CHECK(!a.WaitUntilNoCapture(std::chrono::milliseconds(1)));
  void* p = a.Allocate(kKiB, kA);
  backend.fail_records_ = true;  // kC's event cannot be recorded
  a.Free(p, kA);
  backend.fail_records_ = false;
  std::atomic<int> waited{-1};
  std::thread waiter([&] { waited = a.WaitUntilNoCapture(std::chrono::seconds(60)) ? 1 : 0; });
  first.reset();
  CHECK(backend.syncs_ == 0);  // kB is still captured
  CHECK(a.Allocate(kKiB, kNoStream) != p);
  second.reset();
  waiter.join();
  CHECK(waited == 1);
  CHECK(backend.syncs_ == 1);
  CHECK(backend.capture_faults_ == 0);
  void* q = a.Allocate(kKiB, kA);
  CHECK(q == p);
  a.Free(q, kA);
}

TEST_CASE("a captured stream unregistered before its capture ended: its frees wait for the whole device after it") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  void* p = a.Allocate(kKiB, kB);
  {
    FakeCapture capture(a, backend, {kA});
    a.Free(p, kB);
    CHECK(backend.records_ == 1);
    a.UnregisterStream(kA);  // it may still be captured: no event there, ever
    CHECK(backend.records_ == 1);
    CHECK(!a.WaitUntilNoCapture(std::chrono::milliseconds(0)));  // its capture has not ended
    backend.CompleteAll();
    void* other = a.Allocate(kKiB, kNoStream);
    CHECK(other != p);
    a.Free(other, kNoStream);
    CHECK(backend.syncs_ == 0);
  }
  CHECK(backend.syncs_ == 1);  // once the capture ended
  CHECK(backend.capture_faults_ == 0);
  void* q = a.Allocate(kKiB, kNoStream);
  CHECK(q == p);
  a.Free(q, kNoStream);
}

TEST_CASE("an event recorded on a stream that joined a capture unnamed waits for the device after the captures") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  a.RegisterStream(kB);
  void* p = a.Allocate(kKiB, kA);
  void* other = nullptr;
  {
    FakeCapture capture(a, backend, {kA});
    backend.captured.insert(kB);  // joined the capture without the allocator being told
    a.Free(p, kNoStream);
    backend.CompleteAll();
    backend.captured.erase(kB);
    capture.End();
    CHECK(backend.syncs_ == 0);
    backend.CompleteAll();
    // kB's event stands for no work: the next allocation waits for the whole
    // device instead, then takes p.
    other = a.Allocate(kKiB, kNoStream);
    CHECK(backend.syncs_ == 1);
    CHECK(other == p);
  }
  a.Free(other, kNoStream);
  CHECK(backend.capture_faults_ == 0);
}

TEST_CASE("a device-wide synchronisation holds a capture back; a capture holds it back, bounded") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  a.RegisterStream(kA);
  REQUIRE(a.BeginDeviceSync(std::chrono::milliseconds(0)));
  std::atomic<bool> captured{false};
  std::thread capturer([&] {
    a.BeginCapture({kA});  // waits for the synchronisation to end
    captured = true;
    a.EndCapture({kA});
  });
  CHECK(!captured);  // (it may not have started yet: either way it has not captured)
  a.EndDeviceSync();
  capturer.join();
  CHECK(captured);
  a.BeginCapture({kA});
  CHECK(!a.BeginDeviceSync(std::chrono::milliseconds(1)));  // bounded: the capture is still underway
  a.EndCapture({kA});
  REQUIRE(a.BeginDeviceSync(std::chrono::milliseconds(0)));
  a.EndDeviceSync();
}

TEST_CASE("threads allocating and freeing at once never share memory") {
  FakeBackend backend;
  CachingAllocator a(backend, {DeviceType::kCUDA, 0});
  std::vector<std::thread> threads;
  std::atomic<int> overlaps{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const StreamId stream = 1000 + static_cast<StreamId>(t);
      a.RegisterStream(stream);
      std::vector<std::pair<unsigned char*, size_t>> held;
      for (int i = 0; i < 400; ++i) {
        size_t n = 512 * static_cast<size_t>(1 + (i * 7 + t) % 40) + (i % 3 == 0 ? 2 * kMiB : 0);
        auto* p = static_cast<unsigned char*>(a.Allocate(n, stream));
        std::memset(p, t + 1, n);
        held.emplace_back(p, n);
        if (held.size() > 8) {
          auto [q, m] = held.front();
          held.erase(held.begin());
          for (size_t k = 0; k < m; k += 512)
            if (q[k] != t + 1) overlaps.fetch_add(1);
          a.Free(q, stream);
        }
      }
      for (auto [q, m] : held) a.Free(q, stream);
      a.UnregisterStream(stream);
    });
  for (auto& th : threads) th.join();
  CHECK(overlaps.load() == 0);
  CHECK(a.stats().allocated == 0);
}

// ---- out of memory as an op's error, not an abort -------------------------

namespace {

// Serves the host's storage from a caching allocator over a small fake
// device, as the CUDA backend serves a GPU's: a net that needs more fails
// with the allocator's message behind the net's, op's and blob's names.
class CachedHostAllocator final : public Allocator {
 public:
  CachedHostAllocator(CachingAllocatorBackend& backend) : cache_(backend, {DeviceType::kCPU, 0}) {}
  void* Allocate(DeviceOption device, size_t nbytes) override {
    last_stream_ = CurrentStream(device);
    return cache_.Allocate(nbytes, last_stream_);
  }
  void Free(DeviceOption device, void* ptr) noexcept override { cache_.Free(ptr, CurrentStream(device)); }
  CachingAllocator cache_;
  StreamId last_stream_ = kNoStream;  // of the last allocation
};

}  // namespace

TEST_CASE("a device out of memory is an op's kOutOfMemory naming the net, op, blob, device and bytes") {
  FakeBackend backend(30 * kMiB);
  CachedHostAllocator cached(backend);
  Allocator* previous = GetAllocator(DeviceType::kCPU);
  RegisterAllocator(DeviceType::kCPU, &cached);
  {
    auto ws = std::make_shared<Workspace>();
    auto def = std::make_shared<const NetDef>(NetDefFromJson(R"({"name":"fill","ops":[
      {"type":"ConstantFill","name":"small","outputs":["a"],"args":[{"name":"shape","ints":[1024,1024]}]},
      {"type":"ConstantFill","name":"huge","outputs":["b"],"args":[{"name":"shape","ints":[4096,4096]}]}]})"));
    Net net(def, ws);
    ExpectError([&] { net.Run(); }, Code::kOutOfMemory,
                {"'fill'", "'huge'", "'b'", "cpu:0", "67108864 bytes", "bytes allocated", "bytes reserved"});
    CHECK(ws->GetTensor("a").numel() == 1024 * 1024);  // the net and workspace stay usable
  }
  RegisterAllocator(DeviceType::kCPU, previous);
  CHECK(cached.cache_.stats().allocated == 0);
}

namespace {

// A host context whose work is "ordered on" stream 77, as a CudaContext's is
// on its CUDA stream.
class StreamContext final : public DeviceContext {
 public:
  DeviceOption device() const override { return {}; }
  StreamId stream_id() const override { return 77; }
  std::unique_ptr<Event> CreateEvent() override { return host_.CreateEvent(); }

 private:
  CpuContext host_;
};

}  // namespace

TEST_CASE("an op allocates on its context's stream; outside ops there is none") {
  FakeBackend backend;
  CachedHostAllocator cached(backend);
  cached.cache_.RegisterStream(77);
  Allocator* previous = GetAllocator(DeviceType::kCPU);
  RegisterAllocator(DeviceType::kCPU, &cached);
  {
    auto ws = std::make_shared<Workspace>();
    const OperatorDef def =
        MakeOperatorDef("ConstantFill", {}, {"a"}, {Argument{"shape", std::vector<int64_t>{1000}}});
    std::unique_ptr<Operator> op = OperatorRegistry::Create(OpInit{def, 0, DeviceOption{}, ws.get()});
    StreamContext ctx;
    op->Run(ctx);
    CHECK(cached.last_stream_ == 77);
    CHECK(CurrentStream(DeviceOption{}) == kNoStream);  // restored after the op
    {
      CurrentStreamScope outer(DeviceOption{}, 5);
      CHECK(CurrentStream(DeviceOption{}) == 5);
      CHECK(CurrentStream({DeviceType::kCUDA, 0}) == kNoStream);  // another device's stream is not this one's
      CHECK(CurrentThreadStream().stream == 5);  // but the thread's, whatever the device
      CHECK(CurrentThreadStream().device == DeviceOption{});
      Tensor t({10}, DType::kFloat32);
      CHECK(cached.last_stream_ == 5);
    }
    Tensor t({10}, DType::kFloat32);
    CHECK(cached.last_stream_ == kNoStream);
    CHECK(CurrentThreadStream().stream == kNoStream);
  }
  RegisterAllocator(DeviceType::kCPU, previous);
  cached.cache_.UnregisterStream(77);
  CHECK(cached.cache_.stats().allocated == 0);
}
