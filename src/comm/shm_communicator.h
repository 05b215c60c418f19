// ShmCommunicator: the Communicator of the processes of one host, through
// shared memory (shm_segment.h) instead of loopback TCP. The intra-node
// transport of NCCL, oneCCL and Horovod's hierarchical allreduce does the
// same; across hosts the processes still meet over Gloo
// (HierarchicalCommunicator composes the two).
//
// Each process owns one region per collective and the others read it
// directly. An allreduce of count elements over L processes:
//   1. each process writes its part into its region (input()) and posts
//      "arrived";
//   2. process r sums slice r (count / L elements, cache-line aligned) of
//      every region, in rank order, into slice r of its own region
//      (reduce-scatter; the sum is computed once, so every process ends
//      with identical bytes), then posts "reduced";
//   3. each process reads the reduced slices straight from their owners'
//      regions (the result pieces of BufferedCollective::Run; allgather
//      without a copy) and posts "released": its region may be written
//      again once every peer has released it.
// Memory traffic per process: its part in, 1/L of the buffer reduced, the
// result out; no process is a bottleneck.
//
// Synchronisation is one 32-bit sequence word per process (its own cache
// line) that only it advances; waiters spin briefly, then sleep on the
// word with futex(2) in slices of at most kWaitSlice, checking between
// slices that the peer still runs (pidfd) and that nobody aborted. So a
// peer that dies fails the others within kWaitSlice, naming it; one that
// stalls fails them after the timeout, naming it; a failing process
// publishes its error in the shared header, and the others fail at once
// with it. Calls are serialised; every call is bounded by the timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/gloo_communicator.h"
#include "comm/shm_segment.h"
#include "comm/store.h"
#include "core/error.h"

namespace dp {

struct ShmOptions {
  int rank = 0;  // among the processes of this host
  int size = 1;
  // How messages name local rank i (the job's ranks); empty: i itself.
  std::vector<int> names;
  std::chrono::milliseconds timeout{60000};
  // The most shared memory the prepared collectives may hold together (all
  // processes' regions); 0: whatever /dev/shm holds. Past it, or when
  // /dev/shm is full, preparing a collective is OUT_OF_MEMORY, unless
  // tcp_fallback: then that collective runs over Gloo between these
  // processes (connected when first needed, with `tcp`'s interface and
  // algorithm), with a warning; the others keep shared memory.
  size_t max_bytes = 0;
  bool tcp_fallback = false;
  GlooOptions tcp;
};

class ShmCommunicator final : public Communicator {
 public:
  // The longest a waiter sleeps before it checks its peer and the abort flag.
  static constexpr std::chrono::milliseconds kWaitSlice{20};
  // Per process, the shared buffer of the calls that are not prepared.
  static constexpr size_t kScratchBytes = size_t{512} << 10;

  // Rendezvous of options.size processes through `store` (scoped to this
  // communicator): local rank 0 makes the shared segment, the others map it.
  // kTimeout naming the ranks that did not arrive; kUnavailable when the
  // segment cannot be shared (processes on different hosts).
  static std::unique_ptr<ShmCommunicator> Connect(std::shared_ptr<Store> store, const ShmOptions& options);
  // Tells the peers that this process left (a peer still waiting for it fails at once).
  ~ShmCommunicator() override;

  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }
  std::chrono::milliseconds timeout() const override { return o_.timeout; }
  const char* backend() const override { return "shm"; }

  void AllreduceSum(void* data, int64_t count, DType dtype) override;
  void Broadcast(void* data, size_t nbytes, int root) override;
  void Allgather(const void* in, void* out, size_t nbytes) override;
  void ReduceScatterSum(void* data, int64_t count, DType dtype) override;
  void Barrier() override;
  std::unique_ptr<PreparedCollective> PrepareAllreduceSum(void* data, int64_t count, DType dtype) override;
  std::unique_ptr<PreparedCollective> PrepareBroadcast(void* data, size_t nbytes, int root) override;
  std::unique_ptr<BufferedCollective> PrepareBufferedAllreduceSum(int64_t count, DType dtype) override;
  std::unique_ptr<BufferedCollective> PrepareBufferedBroadcast(size_t nbytes, int root) override;
  std::unique_ptr<BufferedCollective> PrepareBufferedReduceScatterSum(int64_t count, DType dtype) override;
  std::unique_ptr<BufferedCollective> PrepareBufferedAllgather(size_t nbytes) override;
  void Abort(const std::string& why) noexcept override;

  // ---- the steps a hierarchical communicator adds (across hosts) -------------
  // Run on this process's reduced slice (elements [offset, offset + count)
  // of the buffer, in place in shared memory) before the others read it:
  // the same slice of every host is summed there.
  using SliceStep = std::function<void(void* slice, int64_t offset, int64_t count)>;
  // Made once per prepared allreduce, on this process's slice.
  using SliceStepFactory =
      std::function<std::unique_ptr<PreparedCollective>(void* slice, int64_t offset, int64_t count)>;
  // Run by a broadcast's root on its region before the others read it.
  using RootStep = std::function<void(void* data, size_t nbytes)>;
  using RootStepFactory = std::function<std::unique_ptr<PreparedCollective>(void* data, size_t nbytes)>;

  void AllreduceSum(void* data, int64_t count, DType dtype, const SliceStep& across);
  void Broadcast(void* data, size_t nbytes, int root, const RootStep& across);
  std::unique_ptr<BufferedCollective> PrepareBufferedAllreduceSum(int64_t count, DType dtype,
                                                                  const SliceStepFactory& across);
  std::unique_ptr<BufferedCollective> PrepareBufferedBroadcast(size_t nbytes, int root, const RootStepFactory& across);

  // The slice of `count` elements of `itemsize` bytes that local rank r
  // reduces: [*lo, *hi), multiples of a cache line apart.
  static void SliceOf(int64_t count, size_t itemsize, int parts, int r, int64_t* lo, int64_t* hi);

 private:
  struct Shared;   // the control segment's layout
  struct Regions;  // one buffer per process, and when the peers released it last
  class BufferedAllreduce;
  class BufferedBroadcast;
  class BufferedReduceScatter;
  class BufferedAllgather;

  ShmCommunicator(std::shared_ptr<Store> store, const ShmOptions& options);
  void Rendezvous();

  // The name of local rank r in messages: "rank 3".
  std::string Name(int r) const;
  // The Gloo communicator between these processes that collectives fall
  // back to when shared memory runs out (tcp_fallback), connected on first use.
  Communicator& Fallback(const std::string& why);
  // One region of per_process bytes for each process (page-aligned), in a
  // segment made by local rank 0 and opened by the others through the
  // store: a prepared collective's buffers.
  Regions ShareRegions(size_t per_process, const char* what);

  // The steps of a collective (mu_ held); `what` names it in errors, and
  // every wait is bounded by the timeout (plus `grace` where the peer's
  // step includes a collective across hosts, whose own error names the
  // missing rank and must come first).
  void Post(uint32_t value);
  void WaitFor(int peer, uint32_t target, const char* what,
               std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  void WaitAll(uint32_t target, const char* what, std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  // Waits until every peer has released `regions` (their last run), so that
  // this process may write its region again.
  void Acquire(Regions& regions, const char* what);
  void AllreduceLocked(Regions& regions, int64_t count, DType dtype, const SliceStep* across,
                       PreparedCollective* across_prepared, const ResultSink& sink, const char* what);
  void BroadcastLocked(Regions& regions, size_t nbytes, int root, const RootStep* across,
                       PreparedCollective* across_prepared, const ResultSink& sink, const char* what);
  // The end of a collective that read the regions: `read` (the pieces
  // handed out) runs, then this process releases them; an error of `read`
  // is rethrown after the release and leaves the communicator usable.
  template <typename Read>
  void HandOut(Regions& regions, uint32_t base, const Read& read);
  // Runs body under mu_; a failure once the peers are involved breaks the
  // communicator (and tells the peers) before it propagates.
  template <typename Body>
  void Call(const char* what, const Body& body);
  // A prepared collective in shared memory (share()), or, when /dev/shm
  // cannot hold it and tcp_fallback allows (not with a step across hosts),
  // tcp(Fallback()).
  template <typename Share, typename Tcp>
  std::unique_ptr<BufferedCollective> SharedOrTcp(const char* what, bool across, const Share& share,
                                                  const Tcp& tcp);
  // Whether the peer closed its communicator or its process ended (*why says which).
  bool PeerGone(int peer, std::string* why);
  // Throws (breaking this communicator) when another process published a failure.
  void CheckAborted(const char* what);
  [[noreturn]] void Fail(Code code, const std::string& message);
  // The first failure of any process is kept in the shared header, and every sleeper woken.
  void Publish(Code code, const std::string& message) noexcept;
  void WakeAll() noexcept;

  std::shared_ptr<Store> store_;
  const ShmOptions o_;
  ShmSegment control_;
  Shared* shared_ = nullptr;
  std::vector<int> pids_;     // per local rank
  std::vector<int> pidfds_;   // per local rank (-1: none, e.g. this process)
  std::unique_ptr<Regions> scratch_;
  std::mutex mu_;
  uint32_t op_ = 0;           // mu_: collectives run so far (phases 3 op + 1..3)
  int segments_ = 0;          // mu_: segments shared so far (their store keys)
  size_t shared_bytes_ = 0;   // mu_: bytes of the segments local rank 0 made so far
  std::unique_ptr<Communicator> fallback_;  // see Fallback
  bool in_collective_ = false;  // mu_: the current call has involved the peers
  std::unique_ptr<Error> broken_;  // mu_
};

}  // namespace dp
