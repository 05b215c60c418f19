// CpuCollectives: allreduce and broadcast between N replicas of the same
// tensors inside one process (data parallelism over CPU devices, which all
// share host memory). Nothing is copied into a staging buffer: the buffers of
// one call form one logical index space that is cut into contiguous slices,
// one per team thread, and each thread reduces its slice across the N buffers
// and writes the result back to all of them (reduce-scatter and allgather in
// one pass, no device-0 bottleneck). Sums run in buffer order 0, 1, ..., N-1,
// so results are deterministic and bitwise identical on every replica.
//
// Calls are safe from any thread. Calls that use the team are serialised by
// it; small ones run on the calling thread alone and do not wait for others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "comm/thread_team.h"

namespace dp {

class CpuCollectives {
 public:
  // One logical tensor replicated on N devices: N buffers of `count` elements.
  struct Segment {
    std::vector<void*> buffers;
    int64_t count = 0;
  };

  // Below this many bytes touched (N buffers of a call together) a call runs
  // on the calling thread alone: waking the team would cost more than it saves.
  static constexpr size_t kSerialBytes = size_t{64} << 10;
  // A thread is given at least this many bytes (over its N slices) of a call.
  static constexpr size_t kMinBytesPerThread = size_t{32} << 10;

  // num_threads <= 0: min(num_devices_hint, hardware concurrency) when the
  // hint is positive, else the hardware concurrency; at least 1.
  explicit CpuCollectives(int num_threads = 0, int num_devices_hint = 0);
  // The team size the constructor picks for these arguments.
  static int DefaultThreads(int num_threads, int num_devices_hint);
  CpuCollectives(const CpuCollectives&) = delete;
  CpuCollectives& operator=(const CpuCollectives&) = delete;

  int num_threads() const { return team_.size(); }

  // Every buffer of every segment ends up holding scale * (sum of the
  // segment's N buffers), element-wise; scale is converted to the element type
  // and applied after the sum. dtype: float32, float64, int32 or int64 (kDType
  // otherwise); scale must be 1 for integers (kInvalidArgument). All segments
  // need the same N >= 1; a buffer may be null only when its count is 0.
  void AllreduceSum(const std::vector<Segment>& segments, DType dtype, double scale = 1.0);

  // Copies nbytes from buffers[root] to every other buffer (root's is only read).
  void Broadcast(const std::vector<void*>& buffers, int root, size_t nbytes);

  // Returns once every team thread has met here: no collective issued before
  // is still running. (All replicas of this communicator live in this
  // process; a multi-process communicator's barrier also waits for peers.)
  void Barrier();

  // Team members a call touching `bytes` (its N buffers together) uses: 1
  // below kSerialBytes (benchmarks match their bounds to it).
  int ThreadsFor(size_t bytes) const;

 private:
  ThreadTeam team_;
};

// What a communicator blob holds: CreateCpuCollectives writes it, Allreduce and
// Broadcast read it. Ops copy the shared_ptr, so a communicator replaced while
// an op uses it stays alive until that op finishes.
struct CpuCommunicator {
  std::shared_ptr<CpuCollectives> collectives;
};

}  // namespace dp
