// CachingAllocator: the policy of dp's device memory allocator (PyTorch's
// CUDA caching allocator, ../shared/reference/gpu.md), written against a small
// backend interface so that it is plain C++ and tested on the host with a fake
// backend (tests/unit/test_caching_allocator.cc); cuda/cuda_caching_allocator
// is the CUDA backend (cudaMalloc/cudaFree, events) and registers one
// allocator per GPU.
//
// Sizes. A request is rounded up to a multiple of 512 bytes. Requests of up to
// 1 MiB come from the small pool, carved from 2 MiB segments; larger ones from
// the large pool, whose segments are 20 MiB for requests under 10 MiB and the
// request rounded up to 2 MiB otherwise. A request takes the smallest free
// block of its pool that fits and that its stream may use (best fit), split
// when the rest is worth keeping (at least 512 bytes in the small pool, more
// than 1 MiB in the large one); a freed block merges with free neighbours of
// its segment. Segments go back to the backend only when a raw allocation
// fails (then every wholly free segment is released and the allocation tried
// once more) or on ReleaseCached: a step that allocates what the previous one
// freed makes no raw call at all.
//
// Streams. Device work is asynchronous: when the host frees a block, kernels
// queued on streams may still use it. A block freed while an op runs (the
// thread's CurrentStream, core/current_stream.h, is the op's stream F) is
// reusable at once by allocations on F: anything queued on F later runs after
// everything queued on F before, and dp's executor orders the op that drops a
// blob's memory after every op that reads or writes that blob (its stream
// waits on their events), so F is after every use. Before the block may serve
// any other stream, events recorded at free time on every stream of the device
// registered with this allocator (dp's contexts register theirs) must have
// completed: then all work queued before the free is done. A block freed
// outside any op (F = kNoStream: teardown, the C API) has no such owner and
// waits for its events; an allocation outside any op takes only blocks with
// no pending events. Blocks merge only with free neighbours of the same owner
// that wait for events too (or, both, do not), keeping both's events; once
// its events complete a block merges with the free blocks around it. An
// event that cannot be recorded makes the free wait for the whole device
// instead (Backend::SynchronizeDevice).
//
// The owner is the stream that frees, not (as in PyTorch, whose callers
// record other streams' uses on the tensor) the one that allocated: in dp the
// allocating stream is not ordered after the readers on other streams, the
// freeing op's stream is.
//
// Graph capture. While a stream is captured into a CUDA graph
// (cuda/cuda_graph.cc tells BeginCapture / EndCapture), what is queued on it
// is recorded, not run, and an event recorded there says nothing of the
// work queued before the capture (CUDA even refuses to query it). So a free
// records no event on a captured stream: it notes the stream, and once the
// capture ended an event recorded there then must complete too. And while
// any capture is underway on the device, nothing synchronises the whole
// device or gives a segment back (either would have to wait for the
// captured streams): a refused raw allocation does not release the cache,
// and a free whose events cannot be recorded is held back (nobody may take
// the block) until the last capture ends. An event that turns out to have
// been captured all the same (QueryEvent: a stream that joined a capture
// unnamed) stands for no work: its set waits for the whole device once no
// capture is underway. A caller about to synchronise the whole device
// brackets it with BeginDeviceSync / EndDeviceSync, which waits for the
// captures and holds new ones back.
//
// Memory read from another GPU's stream (a peer copy) is not covered by this
// device's events: when an op on another GPU drops it (its input held for the
// kernel, Operator::Run), the CUDA allocator first waits for that op's
// stream (cuda/cuda_caching_allocator.cc); a free outside any op comes after
// a run, which waits for every device.
//
// Thread-safe: one mutex per allocator (one device); backend calls are made
// with it held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/current_stream.h"
#include "core/device.h"

namespace dp {

// What the policy needs of a device. Called with the allocator's lock held.
class CachingAllocatorBackend {
 public:
  using EventHandle = void*;
  virtual ~CachingAllocatorBackend() = default;
  // A raw segment of `bytes`; nullptr when the device is out of memory (any
  // other failure throws).
  virtual void* AllocateSegment(size_t bytes) = 0;
  // Gives a segment back. Must not let the memory be reused before work
  // still queued on it is done (cudaFree waits for the device).
  virtual void FreeSegment(void* ptr, size_t bytes) noexcept = 0;
  // An event recorded on `stream` now; nullptr when that fails.
  virtual EventHandle RecordEvent(StreamId stream) noexcept = 0;
  // Whether the work before the event is done. An event whose stream failed
  // counts as done (the device's error reaches the ops that run there).
  // kCaptured: it was recorded into a stream being captured into a graph (or
  // the device cannot tell while a capture runs), so it stands for no work
  // that ran: the policy waits for the whole device once no capture is
  // underway.
  enum class EventState { kDone, kRunning, kCaptured };
  virtual EventState QueryEvent(EventHandle event) noexcept = 0;
  virtual void ReleaseEvent(EventHandle event) noexcept = 0;
  // Waits for all work on the device (the fallback when an event cannot be
  // recorded).
  virtual void SynchronizeDevice() noexcept = 0;
};

struct CachingAllocatorStats {
  uint64_t allocated = 0;   // bytes of blocks handed out now (rounded sizes)
  uint64_t peak = 0;        // most allocated at once since the last ResetPeak
  uint64_t reserved = 0;    // bytes of the segments held (allocated + cached)
  uint64_t raw_allocs = 0;  // successful AllocateSegment calls
  uint64_t raw_frees = 0;   // FreeSegment calls
};

class CachingAllocator {
 public:
  static constexpr size_t kRound = 512;
  static constexpr size_t kSmallRequest = size_t{1} << 20;   // up to this: small pool
  static constexpr size_t kSmallSegment = size_t{2} << 20;
  static constexpr size_t kLargeSegment = size_t{20} << 20;  // for requests under kLargeOwnSegment
  static constexpr size_t kLargeOwnSegment = size_t{10} << 20;
  static constexpr size_t kSegmentRound = size_t{2} << 20;

  // `device` names the memory in messages. The backend must outlive this.
  CachingAllocator(CachingAllocatorBackend& backend, DeviceOption device);
  // Gives every segment back (blocks still handed out are then dangling: dp
  // destroys allocators only at process exit, if at all).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // At least nbytes (nullptr for 0), for work on `stream`. kOutOfMemory naming
  // the device, the bytes asked, allocated and reserved when the backend
  // refuses even after the cache was released.
  void* Allocate(size_t nbytes, StreamId stream);
  // `stream`: the stream current where the last reference was dropped
  // (kNoStream outside ops). A pointer this allocator did not hand out is
  // ignored.
  void Free(void* ptr, StreamId stream) noexcept;

  // dp's streams on this device: free-time events are recorded on each.
  // Unregister before the stream is destroyed: its free blocks lose their
  // owner (they keep their events, this stream's too), so a new stream at the
  // same address cannot take them early.
  void RegisterStream(StreamId stream);
  void UnregisterStream(StreamId stream) noexcept;

  // `streams` (registered or not) are captured into a graph from now until
  // the matching EndCapture (see "Graph capture" above). Call BeginCapture
  // before the capture starts and EndCapture once it ended (discarded or
  // finished), for every stream that joins it.
  void BeginCapture(const std::vector<StreamId>& streams);
  void EndCapture(const std::vector<StreamId>& streams) noexcept;
  // For a caller about to synchronise the whole device: waits until no
  // capture is underway on the device, at most `timeout` (false: one still
  // is), and keeps new captures from starting until EndDeviceSync. Never
  // call it from a thread that is capturing.
  bool BeginDeviceSync(std::chrono::milliseconds timeout);
  void EndDeviceSync() noexcept;
  // Whether no capture is underway, waiting at most `timeout` for that.
  bool WaitUntilNoCapture(std::chrono::milliseconds timeout);
  // How long BeginCapture waits for device-wide synchronisations to end.
  static constexpr std::chrono::seconds kSyncWait{60};

  // Gives every wholly free segment back to the backend (nothing while a
  // capture is underway).
  void ReleaseCached() noexcept;

  CachingAllocatorStats stats() const;
  void ResetPeak();  // peak := allocated now
  DeviceOption device() const { return device_; }

  // The size a request is served with (a multiple of kRound, at least kRound).
  static size_t RoundSize(size_t nbytes);
  // The segment a request of `rounded` bytes needs when no cached block fits.
  static size_t SegmentSize(size_t rounded);

 private:
  struct EventSet;
  struct Block;
  struct BySize {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BySize>;

  Pool& PoolOf(const Block* b);
  Block* FindFree(Pool& pool, size_t size, StreamId stream);
  Block* NewSegment(size_t nbytes, size_t rounded, bool small);  // throws kOutOfMemory
  void* Hand(Block* b, size_t size);   // splits and marks allocated
  void InsertFree(Block* b);           // merges with neighbours, then pools it
  Block* Merge(Block* into, Block* next);
  void ProcessEvents();
  bool Captured(StreamId stream) const;
  // Events on its deferred streams no longer captured; once no capture is
  // underway, a set that met a captured event (or lost a deferred stream)
  // is settled by synchronising the device.
  void RecordDeferred(EventSet& set) noexcept;
  void ReleaseCachedLocked() noexcept;
  [[noreturn]] void ThrowOutOfMemory(size_t nbytes, size_t rounded, size_t segment);

  CachingAllocatorBackend& backend_;
  const DeviceOption device_;
  mutable std::mutex mu_;
  Pool small_, large_;
  std::unordered_map<void*, Block*> allocated_blocks_;
  std::set<Block*> pending_;  // free blocks with events not yet seen complete
  std::deque<std::weak_ptr<EventSet>> recorded_;  // event sets in the order they were recorded
  std::vector<StreamId> streams_;
  std::multiset<StreamId> capturing_;  // streams captured now (BeginCapture), once per capture
  Block* held_ = nullptr;              // freed during captures without events (a list through held_next)
  int syncing_ = 0;                    // device-wide synchronisations running (BeginDeviceSync)
  std::condition_variable no_capture_;  // notified when capturing_ becomes empty
  std::condition_variable no_sync_;     // notified when syncing_ drops to 0
  CachingAllocatorStats stats_;
};

}  // namespace dp
