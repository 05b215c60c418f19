// Communicator: collectives between the processes of a job, one buffer per
// process (the devices inside a process are combined by CpuCollectives
// first: see HierarchicalAllreduce in cpu_collective_ops.cc). Ranks are
// 0..size-1. Implementations: GlooCommunicator (CPU memory over TCP); NCCL
// across processes is the CUDA communicator's (cuda_collectives.h).
//
// Every call is bounded by the communicator's timeout. A failure — a peer
// that died (its connections close) or stalled (nothing arrives within the
// timeout) — throws kUnavailable or kTimeout naming the ranks that are
// missing, and leaves the communicator broken: every later call fails at
// once with the same error. Calls from several threads are serialised; all
// processes must issue the same collectives in the same order (the nets
// order them with control inputs: parallel/).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace dp {

// A collective bound to one buffer, prepared once and run many times: the
// hot path of the collective ops (a gradient bucket's staging buffer stays
// put from step to step). Every process prepares its counterparts in the
// same order and runs them in the same order.
class PreparedCollective {
 public:
  virtual ~PreparedCollective() = default;
  virtual void Run() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  // "gloo", "nccl": for messages and introspection.
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

  // AllreduceSum and Broadcast of a fixed buffer, prepared for repeated runs.
  virtual std::unique_ptr<PreparedCollective> PrepareAllreduceSum(void* data, int64_t count, DType dtype) = 0;
  virtual std::unique_ptr<PreparedCollective> PrepareBroadcast(void* data, size_t nbytes, int root) = 0;
};

}  // namespace dp
