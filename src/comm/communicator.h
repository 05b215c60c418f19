// Communicator: collectives between the processes of a job, one buffer per
// process (the devices inside a process are combined by CpuCollectives
// first: see the Allreduce op in cpu_collective_ops.cc). Ranks are
// 0..size-1. Implementations (ConnectProcesses in process_group.h picks):
//   GlooCommunicator          Gloo's TCP transport, any hosts;
//   ShmCommunicator           processes of one host, through shared memory;
//   HierarchicalCommunicator  shared memory inside each host, Gloo between
//                             hosts (one Gloo group per local rank);
// NCCL across processes is the CUDA communicator's (cuda_collectives.h).
//
// Every call is bounded by the communicator's timeout. A failure — a peer
// that died (its connections close, its process exits) or stalled (nothing
// arrives within the timeout) — throws kUnavailable or kTimeout naming the
// ranks that are missing, and leaves the communicator broken: every later
// call fails at once with the same error. Calls from several threads are
// serialised; all processes must issue the same collectives in the same
// order (the nets order them with control inputs: parallel/).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace dp {

// A collective bound to a caller's buffer, in place, prepared once and run
// many times. Every process prepares its counterparts in the same order and
// runs them in the same order.
class PreparedCollective {
 public:
  virtual ~PreparedCollective() = default;
  virtual void Run() = 0;
};

// Where a buffered collective hands its result: pieces that together cover
// it once, in increasing offset order, each readable only during the call.
// A plain function pointer and context: no allocation per run.
struct ResultSink {
  void (*fn)(void* context, const void* piece, size_t offset, size_t nbytes) = nullptr;
  void* context = nullptr;
  void operator()(const void* piece, size_t offset, size_t nbytes) const {
    if (nbytes > 0) fn(context, piece, offset, nbytes);
  }
};

// Makes a ResultSink of a callable that outlives it (a lambda in the caller's frame).
template <typename F>
ResultSink SinkOf(F& f) {
  return ResultSink{[](void* c, const void* p, size_t off, size_t n) { (*static_cast<F*>(c))(p, off, n); }, &f};
}

// A collective on a buffer the communicator provides, prepared once and run
// many times: the hot path of the collective ops (a gradient bucket). The
// buffer may be shared memory that the peers read directly, so the result
// is not necessarily written back into it: it is handed out in pieces.
class BufferedCollective {
 public:
  virtual ~BufferedCollective() = default;
  // Where this process puts its part before Run (an allreduce's count
  // elements; a broadcast root's bytes: other processes' input is unused).
  // Waits, bounded by the timeout, until the peers have finished reading the
  // previous run's data from it.
  virtual void* input() = 0;
  // Runs the collective on what input() holds, then hands the result to
  // `sink`. A sink that throws still lets the peers go on (the collective
  // is complete); the error reaches the caller.
  virtual void Run(const ResultSink& sink) = 0;
};

// An in-place collective on `data` (nbytes) through a buffered one: the
// input copied in (when writes_input: an allreduce, a broadcast's root),
// the result copied back. For communicators whose buffers are their own.
std::unique_ptr<PreparedCollective> InPlaceThrough(std::unique_ptr<BufferedCollective> buffered, void* data,
                                                   size_t nbytes, bool writes_input);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  // "gloo", "shm", "shm+gloo": for messages and introspection.
  virtual const char* backend() const = 0;

  // data (count elements of dtype: float32, float64, int32 or int64) becomes
  // the element-wise sum over the processes, identical bytes everywhere.
  virtual void AllreduceSum(void* data, int64_t count, DType dtype) = 0;
  // Root's nbytes are copied into every other process's data.
  virtual void Broadcast(void* data, size_t nbytes, int root) = 0;
  // out (size() * nbytes) receives every process's in (nbytes), rank order.
  virtual void Allgather(const void* in, void* out, size_t nbytes) = 0;
  // data holds size() blocks of `count` elements; afterwards block rank()
  // holds that block's sum over the processes (the other blocks are scratch).
  virtual void ReduceScatterSum(void* data, int64_t count, DType dtype) = 0;
  // Returns once every process has called it.
  virtual void Barrier() = 0;

  // AllreduceSum and Broadcast of a fixed caller's buffer, in place,
  // prepared for repeated runs (the buffer must outlive the result).
  virtual std::unique_ptr<PreparedCollective> PrepareAllreduceSum(void* data, int64_t count, DType dtype) = 0;
  virtual std::unique_ptr<PreparedCollective> PrepareBroadcast(void* data, size_t nbytes, int root) = 0;

  // The same on the communicator's own buffer (BufferedCollective). The
  // default stages through a private buffer and the in-place collective;
  // shared-memory communicators hand out their shared buffers instead.
  virtual std::unique_ptr<BufferedCollective> PrepareBufferedAllreduceSum(int64_t count, DType dtype);
  virtual std::unique_ptr<BufferedCollective> PrepareBufferedBroadcast(size_t nbytes, int root);
  // A reduce-scatter (input: size() blocks of count elements; the result
  // handed out is this rank's block, at its offset rank() * count elements)
  // and an allgather (input: this rank's nbytes; the result: every rank's
  // block, at offset r * nbytes, each block as one piece). The defaults
  // stage through private buffers and ReduceScatterSum / Allgather.
  virtual std::unique_ptr<BufferedCollective> PrepareBufferedReduceScatterSum(int64_t count, DType dtype);
  virtual std::unique_ptr<BufferedCollective> PrepareBufferedAllgather(size_t nbytes);

  // Breaks the communicator for good (later calls throw kUnavailable with
  // `why`), so that peers blocked on this process fail soon instead of at
  // their timeout. Not while a call of this communicator runs on another
  // thread; a no-op when already broken.
  virtual void Abort(const std::string& why) noexcept = 0;

  // Bytes of the buffers this process's allreduces carried since the
  // communicator was made (count elements of their dtype each run): what a
  // compressed gradient allreduce halves. Any thread.
  uint64_t allreduce_bytes() const { return allreduce_bytes_.load(std::memory_order_relaxed); }

 protected:
  void CountAllreduce(size_t nbytes) { allreduce_bytes_.fetch_add(nbytes, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> allreduce_bytes_{0};
};

}  // namespace dp
