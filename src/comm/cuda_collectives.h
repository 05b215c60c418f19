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
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/storage.h"

namespace dp {

class CudaContext;

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

  CudaCollectives(std::vector<int> devices, bool nccl);
  ~CudaCollectives();
  CudaCollectives(const CudaCollectives&) = delete;
  CudaCollectives& operator=(const CudaCollectives&) = delete;

  const std::vector<int>& devices() const { return devices_; }
  int size() const { return static_cast<int>(devices_.size()); }
  bool nccl() const { return nccl_; }

  // Every buffer of every segment ends up holding scale * (sum of the
  // segment's N buffers), element-wise; scale is converted to the element
  // type and applied after the sum. dtype: float32, float64, int32 or int64
  // (kDType otherwise); scale must be 1 for integers (kInvalidArgument).
  // Ordered on ctx's stream (see above); ctx's device must be one of devices().
  void AllreduceSum(const std::vector<Segment>& segments, double scale, CudaContext& ctx);

  // Copies the root's buffer of every segment to the other devices' buffers
  // (the root's is only read). Any dtype. Ordered on ctx's stream.
  void Broadcast(const std::vector<Segment>& segments, int root, CudaContext& ctx);

 private:
  struct PerDevice {
    int device = -1;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;  // recorded on a caller's stream of this device
    cudaEvent_t ready = nullptr;  // this stream's point a tree peer waits for
    cudaEvent_t done = nullptr;   // this stream's end of a call
    ncclComm_t comm = nullptr;    // NCCL mode only
    std::shared_ptr<Storage> scratch;  // tree mode: what a receiver adds from
  };

  void Release() noexcept;
  // Runs issue() (the work of one call after Fork) and Join. If anything in
  // between throws, the call's work must not outlive it: NCCL communicators
  // are aborted (a group with a failed call would otherwise launch part of
  // its collectives and hang their peers), every stream of the communicator
  // is drained, and the communicator is marked broken (later calls fail at
  // once) before the error propagates.
  template <typename Issue>
  void IssueJoined(CudaContext& ctx, const Issue& issue);
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

  void NcclAllreduce(const std::vector<Segment>& segments);
  void NcclBroadcast(const std::vector<Segment>& segments, int root);
  // Sums into position 0 of the tree (device index 0).
  void TreeReduce(const std::vector<Segment>& segments);
  // Copies from device index `root` to every other device down the tree.
  void TreeBroadcast(const std::vector<Segment>& segments, int root);
  void Scale(const std::vector<Segment>& segments, double scale, int index);

  const std::vector<int> devices_;
  const bool nccl_;
  std::vector<PerDevice> per_device_;
  std::mutex mu_;  // one call issues at a time: the streams, events and scratch are shared
  std::string broken_;  // mu_: why the communicator was aborted ("" while usable)
};

// What a communicator blob holds: CreateCudaCollectives writes it, the CUDA
// Allreduce and Broadcast read it. Ops copy the shared_ptr, so a communicator
// replaced while an op issues work stays alive until that op returns (its
// destructor waits for the streams).
struct CudaCommunicator {
  std::shared_ptr<CudaCollectives> collectives;
};

}  // namespace dp

#define DP_NCCL_CHECK(expr)                                                                          \
  do {                                                                                               \
    const ncclResult_t dp_nccl_res_ = (expr);                                                        \
    if (dp_nccl_res_ != ncclSuccess) ::dp::cuda::ThrowNcclError(dp_nccl_res_, #expr, __FILE__, __LINE__); \
  } while (0)
