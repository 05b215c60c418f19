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
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
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

  // Hierarchical collectives (several processes): out (the segments' total
  // count, laid end to end) = each segment's sum over its N buffers, buffer
  // order; then, after the processes' sums are combined there, CopyOut
  // writes scale * in into every buffer of every segment.
  void SumInto(const std::vector<Segment>& segments, DType dtype, void* out);
  void CopyOut(const void* in, const std::vector<Segment>& segments, DType dtype, double scale);
  // The same for elements [begin, begin + count) of the segments laid end
  // to end, `in` holding element begin: a piece of a result.
  void CopyOut(const void* in, const std::vector<Segment>& segments, DType dtype, double scale, int64_t begin,
               int64_t count);

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
  static std::vector<int64_t> Layout(const char* what, const std::vector<Segment>& segments, DType dtype,
                                     double scale);
  int ThreadsForPass(int64_t total, size_t itemsize, size_t n) const;
  // body(lo, hi) over slices of [0, total) on `threads` team members.
  template <typename Body>
  void Split(int64_t total, size_t itemsize, int threads, const Body& body);

  ThreadTeam team_;
};

// What a communicator blob holds: CreateCpuCollectives writes it, Allreduce and
// Broadcast read it. Ops copy the shared_ptrs, so a communicator replaced
// while an op uses it stays alive until that op finishes. With several
// processes, `peers` connects this process to the others (rank 0..size-1)
// and the collectives are hierarchical: the devices of a process are
// combined by `collectives`, the processes by `peers`, then the result is
// spread over the devices again.
// A collective across processes prepared on the communicator's buffer
// (Communicator::PrepareBuffered*: shared memory between the processes of
// a host), kept from run to run.
enum class StagedKind { kAllreduce, kBroadcast, kReduceScatter, kAllgather };
struct StagedCollective {
  std::shared_ptr<Communicator> comm;  // held: what `prepared` runs on
  StagedKind kind = StagedKind::kAllreduce;
  int64_t count = -1;  // elements (a reduce-scatter's per block; an allgather's bytes per process)
  DType dtype = DType::kFloat32;
  int root = -1;  // broadcast root
  std::unique_ptr<BufferedCollective> prepared;
};

// Staged collectives by key. Processes pair prepared collectives by the
// order in which they were prepared, so a collective that several ops run
// (a gradient bucket's allreduce in the train net and in the join net) must
// be one entry: ops name it with their `key` argument. Thread-safe lookup;
// an entry is used by one op at a time (collectives run in order).
class StagingCache {
 public:
  // The entry `key`, sized for count elements of dtype, with its allreduce
  // (root < 0) or broadcast from root prepared on `comm`; rebuilt only when
  // one of these changes (at the same run in every process: same shapes).
  StagedCollective& Get(const std::string& key, const std::shared_ptr<Communicator>& comm, int64_t count,
                        DType dtype, int root);
  // The same for any kind: a reduce-scatter of `count` elements per block,
  // an allgather of `count` bytes per process (dtype unused).
  StagedCollective& Get(const std::string& key, const std::shared_ptr<Communicator>& comm, StagedKind kind,
                        int64_t count, DType dtype, int root = -1);

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<StagedCollective>> entries_;
};

struct CpuCommunicator {
  std::shared_ptr<CpuCollectives> collectives;
  std::shared_ptr<Communicator> peers;  // null: this process alone
  std::string peers_config;             // what peers was made from (store, rank, size, ...)
  std::shared_ptr<StagingCache> staging;  // made with the communicator (CreateCpuCollectives)
};

}  // namespace dp
