#include "core/caching_allocator.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace dp {

// Events recorded on every registered stream when a block was freed. Blocks
// split from or merged with that block share the set.
struct CachingAllocator::EventSet {
  explicit EventSet(CachingAllocatorBackend& b) : backend(b) {}
  ~EventSet() {
    for (EventHandle e : events) backend.ReleaseEvent(e);
  }
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;

  // Whether every event completed (none left to record on a stream that
  // was captured, no device-wide wait owed); completed ones are released on
  // the way.
  bool Done() {
    if (!deferred.empty() || sync_owed) return false;
    while (!events.empty()) {
      const auto state = backend.QueryEvent(events.back());
      if (state == CachingAllocatorBackend::EventState::kCaptured) sync_owed = true;
      if (state != CachingAllocatorBackend::EventState::kDone) return false;
      backend.ReleaseEvent(events.back());
      events.pop_back();
    }
    done = true;
    return true;
  }
  // After a wait for the whole device: everything queued before is done.
  void Settle() {
    for (EventHandle e : events) backend.ReleaseEvent(e);
    events.clear();
    deferred.clear();
    sync_owed = false;
  }

  using EventHandle = CachingAllocatorBackend::EventHandle;
  CachingAllocatorBackend& backend;
  std::vector<EventHandle> events;
  std::vector<StreamId> deferred;  // captured at free time: an event to record there once the capture ended
  bool sync_owed = false;          // settled only by a wait for the whole device once no capture is underway
  bool done = false;               // seen complete
};

// A piece of a segment: the segment's blocks are a list in address order.
struct CachingAllocator::Block {
  char* ptr = nullptr;
  size_t size = 0;
  bool small = false;
  bool allocated = false;
  Block* prev = nullptr;
  Block* next = nullptr;
  // Free blocks: the stream that may take the block before its events
  // complete (kNoStream: none), and those events (empty: any stream may).
  StreamId owner = kNoStream;
  std::vector<std::shared_ptr<EventSet>> events;
  Block* held_next = nullptr;  // in the list of blocks held back until the captures end
};

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
  return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
}

CachingAllocator::CachingAllocator(CachingAllocatorBackend& backend, DeviceOption device)
    : backend_(backend), device_(device) {}

CachingAllocator::~CachingAllocator() {
  std::vector<Block*> all(small_.begin(), small_.end());
  all.insert(all.end(), large_.begin(), large_.end());
  for (const auto& [ptr, b] : allocated_blocks_) all.push_back(b);
  for (Block* b = held_; b != nullptr; b = b->held_next) all.push_back(b);
  for (Block* b : all) {
    if (b->prev != nullptr) continue;  // segments are given back from their first block
    size_t bytes = 0;
    for (Block* x = b; x != nullptr; x = x->next) bytes += x->size;
    backend_.FreeSegment(b->ptr, bytes);
  }
  for (Block* b : all) delete b;
}

CachingAllocator::Pool& CachingAllocator::PoolOf(const Block* b) { return b->small ? small_ : large_; }

size_t CachingAllocator::RoundSize(size_t nbytes) {
  if (nbytes <= kRound) return kRound;
  return (nbytes + kRound - 1) / kRound * kRound;  // the caller keeps nbytes far from SIZE_MAX
}

size_t CachingAllocator::SegmentSize(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kLargeOwnSegment) return kLargeSegment;
  return (rounded + kSegmentRound - 1) / kSegmentRound * kSegmentRound;
}

void* CachingAllocator::Allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (nbytes > std::numeric_limits<size_t>::max() - 2 * kSegmentRound)
    DP_THROW(Code::kOutOfMemory, "cannot allocate ", nbytes, " bytes on ", DeviceName(device_),
             ": more than any device holds");
  const size_t rounded = RoundSize(nbytes);
  const bool small = rounded <= kSmallRequest;
  ProcessEvents();
  Pool& pool = small ? small_ : large_;
  Block* b = FindFree(pool, rounded, stream);
  if (b != nullptr) {
    pool.erase(b);
    pending_.erase(b);
  } else {
    b = NewSegment(nbytes, rounded, small);
  }
  try {
    return Hand(b, rounded);
  } catch (...) {
    InsertFree(b);  // unchanged: free (and cached) as it was
    throw;
  }
}

CachingAllocator::Block* CachingAllocator::FindFree(Pool& pool, size_t size, StreamId stream) {
  Block key;
  key.size = size;
  for (auto it = pool.lower_bound(&key); it != pool.end(); ++it) {
    Block* b = *it;
    if (b->events.empty() || (stream != kNoStream && b->owner == stream)) return b;
  }
  return nullptr;
}

CachingAllocator::Block* CachingAllocator::NewSegment(size_t nbytes, size_t rounded, bool small) {
  const size_t bytes = SegmentSize(rounded);
  auto block = std::make_unique<Block>();  // before the segment: nothing to undo if this throws
  void* p = backend_.AllocateSegment(bytes);
  if (p == nullptr) {
    ReleaseCachedLocked();
    p = backend_.AllocateSegment(bytes);
  }
  if (p == nullptr) ThrowOutOfMemory(nbytes, rounded, bytes);
  ++stats_.raw_allocs;
  stats_.reserved += bytes;
  block->ptr = static_cast<char*>(p);
  block->size = bytes;
  block->small = small;
  return block.release();
}

void* CachingAllocator::Hand(Block* b, size_t size) {
  // What may throw (host memory for the bookkeeping) comes first, while b is
  // unchanged: the caller then puts it back.
  const size_t rest = b->size - size;
  std::unique_ptr<Block> r;
  if (b->small ? rest >= kRound : rest > kSmallRequest) r = std::make_unique<Block>();
  allocated_blocks_.emplace(b->ptr, b);
  b->allocated = true;  // before the rest is split off, so that it does not merge back
  if (r != nullptr) {
    r->ptr = b->ptr + size;
    r->size = rest;
    r->small = b->small;
    r->prev = b;
    r->next = b->next;
    if (b->next != nullptr) b->next->prev = r.get();
    b->next = r.get();
    b->size = size;
    r->owner = b->owner;
    r->events = b->events;
    InsertFree(r.release());
  }
  b->owner = kNoStream;
  b->events.clear();
  stats_.allocated += b->size;
  stats_.peak = std::max(stats_.peak, stats_.allocated);
  return b->ptr;
}

void CachingAllocator::Free(void* ptr, StreamId stream) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_blocks_.find(ptr);
  if (it == allocated_blocks_.end()) return;
  Block* b = it->second;
  allocated_blocks_.erase(it);
  stats_.allocated -= b->size;
  // Work queued on any of dp's streams before now may still use the block:
  // an event on each (and on `stream`, should it be one dp did not register);
  // on a captured stream, one once its capture ended.
  std::shared_ptr<EventSet> set;
  try {
    set = std::make_shared<EventSet>(backend_);
    set->events.reserve(streams_.size() + 1);
    set->deferred.reserve(capturing_.size());  // so that noting one cannot throw
  } catch (...) {  // no memory for the bookkeeping: wait for the device instead
    set.reset();
  }
  bool recorded = set != nullptr;
  auto record = [&](StreamId s) {
    if (!recorded) return;
    if (Captured(s)) {
      if (std::find(set->deferred.begin(), set->deferred.end(), s) == set->deferred.end()) set->deferred.push_back(s);
      return;
    }
    EventSet::EventHandle e = backend_.RecordEvent(s);
    if (e == nullptr)
      recorded = false;
    else
      set->events.push_back(e);
  };
  for (StreamId s : streams_) record(s);
  if (stream != kNoStream && std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) record(stream);
  const bool waits = recorded && (!set->events.empty() || !set->deferred.empty());
  if (waits) {
    try {
      recorded_.push_back(set);
    } catch (...) {
      recorded = false;
    }
  }
  if (!recorded) {
    set.reset();
    // A capture is underway: synchronising the device would have to wait
    // for the captured streams. Nobody takes the block until the last
    // capture ended and the device was synchronised then.
    if (!capturing_.empty()) {
      b->held_next = held_;  // (a list through the blocks: holding cannot fail)
      held_ = b;
      return;  // still marked allocated: no neighbour merges with it, no release counts it free
    }
    backend_.SynchronizeDevice();
  }
  b->allocated = false;
  if (recorded && waits) {
    b->events.push_back(std::move(set));
    b->owner = stream;
  } else {
    b->owner = kNoStream;
  }
  InsertFree(b);
}

CachingAllocator::Block* CachingAllocator::Merge(Block* into, Block* next) {
  PoolOf(into).erase(into);
  PoolOf(next).erase(next);
  pending_.erase(into);
  pending_.erase(next);
  into->size += next->size;
  into->next = next->next;
  if (next->next != nullptr) next->next->prev = into;
  for (auto& set : next->events)
    if (std::find(into->events.begin(), into->events.end(), set) == into->events.end())
      into->events.push_back(std::move(set));
  delete next;
  return into;
}

void CachingAllocator::InsertFree(Block* b) {
  // Only blocks of the same owner that both wait for events, or both do not,
  // merge (the merged block keeps both's events): a block free for every
  // stream never becomes one that waits.
  auto mergeable = [&b](const Block* n) {  // b: the block as merged so far
    return n != nullptr && !n->allocated && n->owner == b->owner && n->events.empty() == b->events.empty();
  };
  if (mergeable(b->prev)) b = Merge(b->prev, b);
  if (mergeable(b->next)) b = Merge(b, b->next);
  PoolOf(b).insert(b);
  if (!b->events.empty()) pending_.insert(b);
}

void CachingAllocator::ProcessEvents() {
  // Oldest first, and no further than the first set still running: the sets
  // after it were recorded later, on the same streams as a rule, so querying
  // them would mostly find them running too. (At worst a later set that is
  // done waits for the next call: a delay, never an early reuse.) Each call
  // then queries a few events however many blocks wait, and looks at the
  // blocks only when some set completed.
  bool advanced = false;
  while (!recorded_.empty()) {
    std::shared_ptr<EventSet> set = recorded_.front().lock();
    if (set != nullptr) {
      RecordDeferred(*set);
      if (!set->Done()) {
        // An event that stands for no work (captured): settled by a wait for
        // the whole device, once no capture is underway.
        if (!set->sync_owed || !capturing_.empty()) break;
        RecordDeferred(*set);
        if (!set->Done()) break;
      }
    }
    recorded_.pop_front();
    advanced = advanced || set != nullptr;
  }
  if (!advanced) return;
  std::vector<Block*> ready;
  for (auto it = pending_.begin(); it != pending_.end();) {
    Block* b = *it;
    std::erase_if(b->events, [](const std::shared_ptr<EventSet>& s) { return s->done; });
    if (b->events.empty()) {
      ready.push_back(b);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  // Now free for every stream: merge with the free neighbours that are too.
  // A ready block may be merged into an earlier one on the way, so each is
  // first taken out and its owner cleared, then put back one by one while it
  // is still a block of its own.
  for (Block* b : ready) b->owner = kNoStream;
  std::set<Block*> left(ready.begin(), ready.end());
  while (!left.empty()) {
    Block* b = *left.begin();
    left.erase(left.begin());
    PoolOf(b).erase(b);
    if (b->prev != nullptr) left.erase(b->prev);
    if (b->next != nullptr) left.erase(b->next);
    // Neighbours still in `left` are merged now and need no turn of their own.
    InsertFree(b);
  }
}

bool CachingAllocator::Captured(StreamId stream) const { return capturing_.count(stream) != 0; }

void CachingAllocator::RecordDeferred(EventSet& set) noexcept {
  if (set.sync_owed) {
    if (capturing_.empty()) {
      backend_.SynchronizeDevice();
      set.Settle();
    }
    return;
  }
  for (auto it = set.deferred.begin(); it != set.deferred.end();) {
    if (Captured(*it)) {
      ++it;
      continue;
    }
    EventSet::EventHandle e = nullptr;
    try {
      set.events.reserve(set.events.size() + 1);
      e = backend_.RecordEvent(*it);
    } catch (...) {
    }
    if (e != nullptr) {
      set.events.push_back(e);  // reserved: cannot throw
    } else if (capturing_.empty()) {
      backend_.SynchronizeDevice();  // everything queued before is done
    } else {
      ++it;  // tried again once the captures ended
      continue;
    }
    it = set.deferred.erase(it);
  }
}

void CachingAllocator::BeginCapture(const std::vector<StreamId>& streams) {
  std::multiset<StreamId> add(streams.begin(), streams.end());  // made first: merging allocates nothing
  std::unique_lock<std::mutex> lock(mu_);
  // A device-wide synchronisation running now would break the capture (or
  // fail): it ends first. Bounded: past the wait the capture goes ahead, and
  // at worst fails and the run goes on the streams.
  no_sync_.wait_for(lock, kSyncWait, [this] { return syncing_ == 0; });
  capturing_.merge(add);
}

void CachingAllocator::EndCapture(const std::vector<StreamId>& streams) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (StreamId s : streams)
    if (auto it = capturing_.find(s); it != capturing_.end()) capturing_.erase(it);
  // The frees during the capture: the events they could not record then.
  for (const auto& weak : recorded_)
    if (std::shared_ptr<EventSet> set = weak.lock()) RecordDeferred(*set);
  if (!capturing_.empty()) return;
  if (held_ != nullptr) {
    backend_.SynchronizeDevice();
    while (held_ != nullptr) {
      Block* b = held_;
      held_ = b->held_next;
      b->held_next = nullptr;
      b->allocated = false;
      b->owner = kNoStream;
      InsertFree(b);
    }
  }
  no_capture_.notify_all();
}

bool CachingAllocator::BeginDeviceSync(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!no_capture_.wait_for(lock, timeout, [this] { return capturing_.empty(); })) return false;
  ++syncing_;
  return true;
}

void CachingAllocator::EndDeviceSync() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (--syncing_ == 0) no_sync_.notify_all();
}

bool CachingAllocator::WaitUntilNoCapture(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return no_capture_.wait_for(lock, timeout, [this] { return capturing_.empty(); });
}

void CachingAllocator::ReleaseCachedLocked() noexcept {
  // Giving a segment back (cudaFree) synchronises the device, which a
  // capture underway forbids.
  if (!capturing_.empty()) return;
  // A segment may be wholly free in several blocks (of different owners, not
  // merged): walk each from its first block.
  std::vector<Block*> heads;
  for (Pool* pool : {&small_, &large_})
    for (Block* b : *pool)
      if (b->prev == nullptr) heads.push_back(b);
  for (Block* head : heads) {
    size_t bytes = 0;
    bool free = true;
    for (Block* b = head; b != nullptr && free; b = b->next) {
      free = !b->allocated;
      bytes += b->size;
    }
    if (!free) continue;
    void* segment = head->ptr;
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      PoolOf(b).erase(b);
      pending_.erase(b);
      delete b;
      b = next;
    }
    backend_.FreeSegment(segment, bytes);
    ++stats_.raw_frees;
    stats_.reserved -= bytes;
  }
}

void CachingAllocator::ReleaseCached() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCachedLocked();
}

void CachingAllocator::RegisterStream(StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
}

void CachingAllocator::UnregisterStream(StreamId stream) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase(streams_, stream);
  // A stream goes only after its captures ended; should one not have, no
  // event can be recorded there any more (it may still be captured): the
  // frees waiting for it wait for the whole device once no capture is
  // underway (its capture's EndCapture still comes).
  if (Captured(stream))
    for (const auto& weak : recorded_)
      if (std::shared_ptr<EventSet> set = weak.lock())
        if (std::erase(set->deferred, stream) != 0) set->sync_owed = true;
  // Its blocks keep their events (recorded on every stream, this one too).
  for (Pool* pool : {&small_, &large_})
    for (Block* b : *pool)
      if (b->owner == stream) b->owner = kNoStream;
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.allocated;
}

void CachingAllocator::ThrowOutOfMemory(size_t nbytes, size_t rounded, size_t segment) {
  DP_THROW(Code::kOutOfMemory, "cannot allocate ", nbytes, " bytes (", rounded, " rounded) on ",
           DeviceName(device_), ": the device refused a segment of ", segment, " bytes ",
           capturing_.empty() ? "after dp's cache was released"
                              : "(dp's cache was not released: a CUDA graph is being captured on the device)",
           "; dp has ", stats_.allocated, " bytes allocated and ", stats_.reserved, " bytes reserved there");
}

}  // namespace dp
