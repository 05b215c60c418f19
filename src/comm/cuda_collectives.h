// CudaCollectives: allreduce and broadcast between N replicas of the same
// tensors on N CUDA devices of this process (data parallelism over GPUs).
// Only compiled when dp is built with CUDA.
//
// Two modes. NCCL: one ncclComm_t per device from ncclCommInitAll, every call
// one ncclGroupStart/End over all devices. Tree (Caffe2's P2PSync): a binary
// copy-and-sum tree of peer copies; in round r, position i (a multiple of
// 2^(r+1)) copies position i + 2^r's buffer into a scratch buffer on its own
// device and adds it into its own, so sums run in a fixed order (for 4
// devices: (b0 + b1) + (b2 + b3)) and are deterministic; the result then goes
// back down the same tree by peer copies, so every replica gets the same bits.
// NCCL's sum order is its own (ring or tree, chosen by size and topology);
// it too computes each element once and copies it to every rank.
//
// Streams: the communicator owns one non-blocking stream per device, and all
// its work runs there, in issue order (calls are serialised on the host). A
// call is ordered after the work already queued on the caller's stream (an
// event recorded there, waited for by every communicator stream) and before
// the caller's later work (the caller's stream waits for an event recorded on
// every communicator stream), so the calling op's completion event covers the
// whole collective on every device. The host never waits (except once when a
// scratch buffer grows).
//
// Device ids are physical CUDA ordinals and must be distinct: dp names a
// replica by its device, so two replicas cannot share a GPU.
//
// Several processes (NCCL only): each process passes its own devices (the
// same number in every process) and CudaProcesses; device d of process p
// is NCCL rank p * devices + d of processes * devices. Process 0 makes
// NCCL's unique id and shares it through the store. The communicators are
// non-blocking, so that nothing waits without a bound: initialisation and
// every call end when NCCL reports completion or an error, or when the
// timeout passes; then the communicators are aborted (their kernels stop),
// the failing process reports in the store, and the error names the
// processes that did not (dead or stalled), like Gloo's roll call. A call
// across processes returns once its work is complete on the devices (the
// host waits, bounded), so a failure is this call's error, never a later
// one's; inside a process the work is only queued, as before.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/storage.h"

namespace dp {

class CudaContext;
class Store;

// The processes a CUDA communicator spans (see above). Without a store:
// this process alone (ncclCommInitAll); with one, NCCL meets the other
// processes through it, even when size is 1.
struct CudaProcesses {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;  // required when size > 1
  std::chrono::milliseconds timeout{60000};
};

namespace cuda {
// Throws kInternal naming the call, NCCL's description and its last error.
[[noreturn]] void ThrowNcclError(ncclResult_t result, const char* expr, const char* file, int line);
}  // namespace cuda

class CudaCollectives {
 public:
  // One logical tensor replicated on the N devices: buffers[d] on devices()[d].
  struct Segment {
    std::vector<void*> buffers;
    int64_t count = 0;  // elements of dtype
    DType dtype = DType::kFloat32;
  };

  // What the constructor checks, for callers that want to fail early:
  // kInvalidArgument for an empty list, a negative or repeated id, or (nccl)
  // two ids on one physical GPU; kUnavailable naming a device that is not visible.
  static void CheckDevices(const std::vector<int>& devices, bool nccl);

  // kInvalidArgument for bad devices or processes (the tree with several
  // processes); across processes kTimeout / kUnavailable naming the ranks
  // that did not join NCCL within the timeout.
  CudaCollectives(std::vector<int> devices, bool nccl, CudaProcesses processes = {});
  ~CudaCollectives();
  CudaCollectives(const CudaCollectives&) = delete;
  CudaCollectives& operator=(const CudaCollectives&) = delete;

  const std::vector<int>& devices() const { return devices_; }
  int size() const { return static_cast<int>(devices_.size()); }  // this process's devices
  bool nccl() const { return nccl_; }
  int process_rank() const { return processes_.rank; }
  // Across processes: bytes of the buffers this process's allreduces carried
  // since the communicator was made (count elements of the type that crosses
  // each run: 16 bits for compressed tensors), as Communicator::
  // allreduce_bytes counts them; 0 in one process (no wire). Any thread.
  uint64_t allreduce_bytes() const { return allreduce_bytes_.load(std::memory_order_relaxed); }
  // Whether an earlier failure aborted it (every call then fails at once).
  bool broken() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !broken_.empty();
  }
  int num_processes() const { return processes_.size; }

  // Every buffer of every segment ends up holding scale * (sum of the
  // segment's N buffers), element-wise; scale is converted to the element
  // type and applied after the sum. dtype: float32, float64, int32 or int64
  // (kDType otherwise); scale must be 1 for integers (kInvalidArgument).
  // Ordered on ctx's stream (see above); ctx's device must be one of devices().
  // Across processes: over every device of every process.
  void AllreduceSum(const std::vector<Segment>& segments, double scale, CudaContext& ctx);
  // The mean over the replicas that had data (Join): `flags` holds each
  // device's float32 [1] flag (1 with data, 0 without) and is summed with
  // the segments; every segment then holds ActiveScale(scale, flags' sum)
  // times its sum (comm/active_scale.h). Float segments only.
  void AllreduceActive(const std::vector<Segment>& segments, const Segment& flags, double scale, CudaContext& ctx);

  // Compressed gradients (the `compress` argument; comm/compressed_sum.h's
  // arithmetic): every buffer of the float32 `compressed` segments ends up
  // holding H's rounding (H: half, kBFloat16 or kFloat16) of the sum of the
  // contributions, each rounded to H once and summed in float, times scale
  // (or, with `flags`, ActiveScale(scale, the flags' sum) as
  // AllreduceActive). In one process the contributions are the devices'
  // (summed in float by NCCL or the tree: the CPU collectives' arithmetic,
  // no bytes saved); across processes every NCCL rank's, exchanged in H
  // (chunks to their owners, summed there in rank order, all-gathered): a
  // 16-bit allreduce's bytes. `rest` (float, and the flags) are summed as
  // AllreduceSum / AllreduceActive sum them, first.
  void AllreduceCompressed(const std::vector<Segment>& compressed, DType half, const std::vector<Segment>& rest,
                           const Segment* flags, double scale, CudaContext& ctx);

  // Copies the root's buffer of every segment to the other devices' buffers
  // (the root's is only read). Any dtype. Ordered on ctx's stream. Across
  // processes the root is process 0's device `root`.
  void Broadcast(const std::vector<Segment>& segments, int root, CudaContext& ctx);

  // Each segment from its own owner: owners[i] is the device index of
  // segment i's root (in one process) or its NCCL rank across processes
  // (process p's device d is p * size() + d); its buffer there is only read,
  // the others are written. One call for all (one NCCL group): a sharded
  // optimizer state's parts, each from the replica that updated it
  // (Allgather, comm/shards.h: part p * size() + d is that rank's). Any
  // dtype. Ordered on ctx's stream.
  void Allgather(const std::vector<Segment>& segments, const std::vector<int>& owners, CudaContext& ctx);

  // Host bytes between the processes: `block` bytes of this process's
  // (`mine`) and every other's into all[q * block], q = 0..processes-1
  // (mine at this process's rank too), through device 0 of each process.
  // Returns once done (the host waits, bounded across processes). For host
  // ops that save a sharded state (GatherShards).
  void AllgatherHost(const void* mine, void* all, size_t block);

 private:
  struct PerDevice {
    int device = -1;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;  // recorded on a caller's stream of this device
    cudaEvent_t ready = nullptr;  // this stream's point a tree peer waits for
    cudaEvent_t done = nullptr;   // this stream's end of a call
    ncclComm_t comm = nullptr;    // NCCL mode only
    bool registered = false;      // stream registered with the device's caching allocator
    std::shared_ptr<Storage> scratch;  // tree mode: what a receiver adds from
  };

  void Release() noexcept;
  // Across processes: NCCL's unique id and the device counts through the
  // store, then ncclCommInitRankConfig on every device (non-blocking), bounded.
  void InitAcrossProcesses();
  bool across() const { return processes_.store != nullptr; }
  // Across processes, after work is queued: waits (bounded) until NCCL has
  // put it on the streams (non-blocking communicators may do that after
  // ncclGroupEnd returns ncclInProgress, from a thread of their own: nothing
  // may be queued after it before then) and, when `complete`, until every
  // device has finished it; on an error or the timeout, aborts the
  // communicators, runs the roll call and throws naming the processes that
  // are missing. Called without NcclMutex held.
  void WaitAcross(const char* what, bool complete);
  [[noreturn]] void FailAcross(const char* what, bool timed_out, const std::string& cause);
  // Runs issue() (the work of one call after Fork) and Join. If anything in
  // between throws, the call's work must not outlive it: NCCL communicators
  // are aborted (a group with a failed call would otherwise launch part of
  // its collectives and hang their peers), every stream of the communicator
  // is drained, and the communicator is marked broken (later calls fail at
  // once) before the error propagates.
  template <typename Issue>
  void IssueJoined(CudaContext& ctx, const char* what, const Issue& issue);
  void AbortAndDrain(const std::string& reason) noexcept;
  void AbortComms() noexcept;  // NcclMutex() held
  // Index in devices() of ctx's device; kInvalidArgument if it is not one.
  int IndexOf(const CudaContext& ctx) const;
  // Communicator streams wait for ctx's stream (fork) / ctx's stream waits for them (join).
  void Fork(int index, const CudaContext& ctx);
  void Join(const CudaContext& ctx);
  // Makes `to`'s stream wait for the work queued so far on `from`'s stream.
  void Handoff(int from, int to);
  void EnsureScratch(int index, size_t nbytes);

  // The work of AllreduceSum (flags null) or AllreduceActive, issued.
  void IssueSum(const std::vector<Segment>& segments, const Segment* flags, double scale);
  // The compressed segments' work of AllreduceCompressed (H: BFloat16, Half).
  template <typename H>
  void IssueCompressed(const std::vector<Segment>& segments, const Segment* flags, double scale);
  // Queues call(s, d, per_device_[d]) (an NCCL call) for every non-empty
  // segment s on every device d in one NCCL group, then (across processes)
  // waits until NCCL has queued it (WaitAcross, naming `what`).
  template <typename Call>
  void NcclEachSegment(const std::vector<Segment>& segments, const char* what, const Call& call);
  void NcclAllreduce(const std::vector<Segment>& segments);
  // Scales every float segment on every device by ActiveScale(scale, that device's flag sum).
  void ScaleByActive(const std::vector<Segment>& segments, const Segment& flags, double scale, int index);
  // Segment i from NCCL rank roots[i], all in one group.
  void NcclBroadcast(const std::vector<Segment>& segments, const std::vector<int>& roots, const char* what);
  // Sums into position 0 of the tree (device index 0).
  void TreeReduce(const std::vector<Segment>& segments);
  // Copies from device index `root` to every other device down the tree.
  void TreeBroadcast(const std::vector<Segment>& segments, int root);
  void Scale(const std::vector<Segment>& segments, double scale, int index);

  const std::vector<int> devices_;
  const bool nccl_;
  const CudaProcesses processes_;
  std::vector<PerDevice> per_device_;
  mutable std::mutex mu_;  // one call issues at a time: the streams, events and scratch are shared
  std::atomic<uint64_t> allreduce_bytes_{0};
  std::string broken_;  // mu_: why the communicator was aborted ("" while usable)
};

// What a communicator blob holds: CreateCudaCollectives writes it, the CUDA
// Allreduce and Broadcast read it. Ops copy the shared_ptr, so a communicator
// replaced while an op issues work stays alive until that op returns (its
// destructor waits for the streams).
struct CudaCommunicator {
  std::shared_ptr<CudaCollectives> collectives;
  std::string processes_config;  // ProcessArgs::Config() it was made with
};

}  // namespace dp

#define DP_NCCL_CHECK(expr)                                                                          \
  do {                                                                                               \
    const ncclResult_t dp_nccl_res_ = (expr);                                                        \
    if (dp_nccl_res_ != ncclSuccess) ::dp::cuda::ThrowNcclError(dp_nccl_res_, #expr, __FILE__, __LINE__); \
  } while (0)
