// CudaCollectives: the communicator's resources, the stream ordering of a
// call (fork from the caller's stream, join back into it) and the two ways
// of moving the data (NCCL group calls, or the copy-and-sum tree).
#include "comm/cuda_collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "core/logging.h"
#include "comm/collective_kernels.h"
#include "comm/compressed_sum.h"
#include "comm/store.h"
#include "cuda/cuda_caching_allocator.h"
#include "cuda/cuda_context.h"
#include "ops/op_utils.h"

namespace dp {
namespace cuda {

void ThrowNcclError(ncclResult_t result, const char* expr, const char* file, int line) {
  // The last error often says which device or transport failed, which the
  // result code alone does not.
  const char* last = ncclGetLastError(nullptr);
  DP_THROW(Code::kInternal, "NCCL error: ", expr, " failed: ", ncclGetErrorString(result),
           last != nullptr && *last != '\0' ? StrCat(" (", last, ")") : std::string(), " at ", file, ":", line);
}

}  // namespace cuda

namespace {

// NCCL calls on communicators of the same devices must not be issued from
// several threads at once (NCCL's thread-safety rules), even for different
// communicators: one lock for every NCCL communicator of the process.
std::mutex& NcclMutex() {
  static std::mutex mu;
  return mu;
}

// A call on a non-blocking communicator (across processes) may answer
// ncclInProgress: queued, its outcome comes through ncclCommGetAsyncError.
#define DP_NCCL_QUEUED(expr, nonblocking)                                                              \
  do {                                                                                                 \
    const ncclResult_t dp_nccl_res_ = (expr);                                                          \
    if (dp_nccl_res_ != ncclSuccess && !((nonblocking) && dp_nccl_res_ == ncclInProgress))             \
      ::dp::cuda::ThrowNcclError(dp_nccl_res_, #expr, __FILE__, __LINE__);                             \
  } while (0)

// Ends an NCCL group on every path: a failed call inside must not leave the
// thread in a group, which would swallow every later NCCL call. When a call
// inside failed, NCCL marks the group failed and its end drops the group's
// queued work without launching any of it (so none waits for peers that
// never join); `abort` (ncclCommAbort of the communicators) runs after that.
// (Aborting inside the open group would only queue the abort into the group
// that is dropped.) Nothing but NCCL calls may throw inside a group: a group
// ended after another exception would launch the calls queued so far.
class NcclGroup {
 public:
  NcclGroup(std::function<void()> abort, bool nonblocking) : abort_(std::move(abort)), nonblocking_(nonblocking) {
    DP_NCCL_CHECK(ncclGroupStart());
  }
  ~NcclGroup() {
    if (!open_) return;
    ncclGroupEnd();  // a call inside failed: the group is dropped
    abort_();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void End() {
    open_ = false;
    DP_NCCL_QUEUED(ncclGroupEnd(), nonblocking_);
  }

 private:
  bool open_ = true;
  std::function<void()> abort_;
  const bool nonblocking_;
};

// How long a failing process waits for the other survivors' reports before
// it names the processes that sent none (as GlooCommunicator does).
constexpr auto kRollCallGrace = std::chrono::milliseconds(500);

// A bounded poll's pause: short at first (NCCL calls finish in microseconds
// to milliseconds), then up to 1 ms, so that a long wait costs no CPU.
void Backoff(int round) {
  if (round < 64) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 * (round - 63))));
  }
}

ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    default: DP_THROW(Code::kDType, "NCCL cannot sum ", DTypeName(dtype));
  }
}

// Lets peer copies between the devices go straight over NVLink or PCIe rather
// than through host memory. cudaMemcpyPeerAsync works either way, so a refusal
// (no P2P between the two, too many peers) only costs speed.
void EnablePeerAccess(const std::vector<int>& devices) {
  for (int a : devices) {
    cuda::DeviceGuard guard(a);
    for (int b : devices) {
      int can = 0;
      if (a == b || cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || can == 0) continue;
      const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
      if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
        DP_LOG(kDebug, "no peer access from cuda:", a, " to cuda:", b, ": ", cudaGetErrorString(err));
    }
  }
  cudaGetLastError();  // the refusals above are not errors of anything later
}

// (receiver, sender) positions of the reduce tree over n positions, round by
// round: in the round of step 2^r, position i (a multiple of 2^(r+1))
// receives from i + 2^r. Broadcasting walks the pairs backwards.
std::vector<std::pair<int, int>> TreePairs(int n) {
  std::vector<std::pair<int, int>> pairs;
  for (int step = 1; step < n; step *= 2)
    for (int i = 0; i + step < n; i += 2 * step) pairs.emplace_back(i, i + step);
  return pairs;
}

size_t SegmentBytes(const CudaCollectives::Segment& seg) {
  return static_cast<size_t>(seg.count) * DTypeSize(seg.dtype);
}

// Where each segment goes in a receiver's scratch buffer, and the total:
// 256-byte aligned, as the kernels' loads expect of any dtype.
std::vector<size_t> ScratchOffsets(const std::vector<CudaCollectives::Segment>& segments, size_t* total) {
  constexpr size_t kAlign = 256;
  std::vector<size_t> offsets;
  size_t at = 0;
  for (const auto& seg : segments) {
    offsets.push_back(at);
    at += (SegmentBytes(seg) + kAlign - 1) / kAlign * kAlign;
  }
  *total = at;
  return offsets;
}

// kInvalidArgument unless every segment has one buffer per device, a count of
// at least 0 and no null buffer where there is something to move.
void CheckSegments(const std::vector<CudaCollectives::Segment>& segments, int n, const char* what) {
  for (size_t s = 0; s < segments.size(); ++s) {
    const auto& seg = segments[s];
    DP_ENFORCE(static_cast<int>(seg.buffers.size()) == n, what, ": segment ", s, " has ", seg.buffers.size(),
               " buffers but the communicator has ", n, " devices");
    DP_ENFORCE(seg.count >= 0, what, ": segment ", s, " has a negative count ", seg.count);
    for (int d = 0; d < n && seg.count > 0; ++d)
      DP_ENFORCE(seg.buffers[static_cast<size_t>(d)] != nullptr, what, ": buffer ", d, " of segment ", s,
                 " is null but holds ", seg.count, " elements");
  }
}

std::string DeviceList(const std::vector<int>& devices) {
  std::string s;
  for (int d : devices) s += (s.empty() ? "" : ", ") + DeviceName({DeviceType::kCUDA, d});
  return s;
}

}  // namespace

// ---- creation and teardown ---------------------------------------------------

void CudaCollectives::CheckDevices(const std::vector<int>& devices, bool nccl) {
  DP_ENFORCE(!devices.empty(), "a CUDA communicator needs at least one device");
  for (size_t i = 0; i < devices.size(); ++i) {
    DP_ENFORCE(devices[i] >= 0, "device id ", devices[i], " is negative");
    cuda::CheckDeviceAvailable({DeviceType::kCUDA, devices[i]});
    // The tree's peer copies work within one GPU too: two replicas on one
    // device (a testing aid) are fine without NCCL.
    for (size_t j = 0; j < i && nccl; ++j)
      DP_ENFORCE(devices[j] != devices[i], "device ", DeviceName({DeviceType::kCUDA, devices[i]}),
                 " is listed twice in [", DeviceList(devices), "]: NCCL needs a GPU per rank (without NCCL, the ",
                 "copy-and-sum tree runs two replicas on one GPU)");
  }
  if (!nccl) return;
  // Should two distinct ordinals still be one physical GPU (same UUID), NCCL
  // would refuse or hang on two ranks of it, while peer copies do not mind.
  std::vector<cudaUUID_t> uuids(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    cudaDeviceProp prop;
    DP_CUDA_CHECK(cudaGetDeviceProperties(&prop, devices[i]));
    uuids[i] = prop.uuid;
    for (size_t j = 0; j < i; ++j)
      DP_ENFORCE(std::memcmp(&uuids[j], &uuids[i], sizeof(cudaUUID_t)) != 0,
                 DeviceName({DeviceType::kCUDA, devices[j]}), " and ", DeviceName({DeviceType::kCUDA, devices[i]}),
                 " are the same physical GPU, which NCCL cannot use as two ranks; create the communicator with ",
                 "nccl=0 (copy-and-sum tree of peer copies) instead");
  }
}

CudaCollectives::CudaCollectives(std::vector<int> devices, bool nccl, CudaProcesses processes)
    : devices_(std::move(devices)), nccl_(nccl), processes_(std::move(processes)) {
  CheckDevices(devices_, nccl_);
  DP_ENFORCE(processes_.size >= 1 && processes_.rank >= 0 && processes_.rank < processes_.size, "CUDA communicator: ",
             "process rank ", processes_.rank, " is out of range for ", processes_.size, " processes");
  DP_ENFORCE(processes_.size == 1 || processes_.store != nullptr, "CUDA communicator: ", processes_.size,
             " processes need a store to meet through");
  if (across()) {
    DP_ENFORCE(nccl_, "CUDA communicator: the copy-and-sum tree works inside one process; across processes use ",
               "NCCL (nccl=1)");
    DP_ENFORCE(processes_.timeout.count() > 0, "CUDA communicator: timeout ", processes_.timeout.count(),
               " ms must be positive");
  }
  try {
    per_device_.resize(devices_.size());
    for (size_t i = 0; i < devices_.size(); ++i) {
      PerDevice& p = per_device_[i];
      p.device = devices_[i];
      cuda::DeviceGuard guard(p.device);
      // Non-blocking: the legacy default stream must not serialise with it.
      DP_CUDA_CHECK(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
      // Memory freed on the device waits for this stream's work too: a
      // tensor an op frees right after queuing a collective that reads it
      // (an active flag, a temporary) is not handed out again before the
      // collective is done with it (Join orders the other devices' reads).
      cuda::DeviceAllocator(p.device).RegisterStream(reinterpret_cast<StreamId>(p.stream));
      p.registered = true;
      for (cudaEvent_t* e : {&p.start, &p.ready, &p.done})
        DP_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    }
    if (nccl_ && across()) {
      InitAcrossProcesses();
    } else if (nccl_) {
      std::vector<ncclComm_t> comms(devices_.size(), nullptr);
      int current = 0;
      DP_CUDA_CHECK(cudaGetDevice(&current));
      {
        std::lock_guard<std::mutex> lock(NcclMutex());
        const ncclResult_t result = ncclCommInitAll(comms.data(), size(), devices_.data());
        cudaSetDevice(current);  // whatever NCCL left current, the caller gets its own back
        DP_NCCL_CHECK(result);
      }
      for (size_t i = 0; i < comms.size(); ++i) per_device_[i].comm = comms[i];
    } else {
      EnablePeerAccess(devices_);
    }
  } catch (...) {
    Release();
    throw;
  }
}

CudaCollectives::~CudaCollectives() { Release(); }

void CudaCollectives::Release() noexcept {
  // Work still queued on the streams reads the scratch buffers and uses the
  // comms: let it finish first.
  for (PerDevice& p : per_device_)
    if (p.stream != nullptr) cuda::OnDeviceNoThrow(p.device, [&] { cudaStreamSynchronize(p.stream); });
  if (nccl_) {
    std::lock_guard<std::mutex> lock(NcclMutex());
    // Across processes every call has completed when it returned, so there
    // is nothing to wait for; abort does not block on peers that already left.
    for (PerDevice& p : per_device_)
      if (p.comm != nullptr)
        cuda::OnDeviceNoThrow(p.device, [&] { across() ? ncclCommAbort(p.comm) : ncclCommDestroy(p.comm); });
  }
  for (PerDevice& p : per_device_) {
    if (p.registered) cuda::DeviceAllocator(p.device).UnregisterStream(reinterpret_cast<StreamId>(p.stream));
    if (p.stream != nullptr) {  // created first: without it there is nothing else
      cuda::OnDeviceNoThrow(p.device, [&] {
        for (cudaEvent_t e : {p.start, p.ready, p.done})
          if (e != nullptr) cudaEventDestroy(e);
        cudaStreamDestroy(p.stream);
      });
    }
    p = PerDevice{};  // the scratch storage is freed through dp's CUDA allocator
  }
}

// ---- ordering ----------------------------------------------------------------

int CudaCollectives::IndexOf(const CudaContext& ctx) const {
  const DeviceOption d = ctx.device();
  const auto it = std::find(devices_.begin(), devices_.end(), d.id);
  DP_ENFORCE(d.type == DeviceType::kCUDA && it != devices_.end(), "the op runs on ", DeviceName(d),
             ", which is not one of the communicator's devices [", DeviceList(devices_), "]");
  return static_cast<int>(it - devices_.begin());
}

void CudaCollectives::Fork(int index, const CudaContext& ctx) {
  const PerDevice& caller = per_device_[static_cast<size_t>(index)];
  {
    cuda::DeviceGuard guard(caller.device);
    DP_CUDA_CHECK(cudaEventRecord(caller.start, ctx.stream()));
  }
  for (const PerDevice& p : per_device_) {
    cuda::DeviceGuard guard(p.device);
    DP_CUDA_CHECK(cudaStreamWaitEvent(p.stream, caller.start, 0));
  }
}

void CudaCollectives::Join(const CudaContext& ctx) {
  for (const PerDevice& p : per_device_) {
    cuda::DeviceGuard guard(p.device);
    DP_CUDA_CHECK(cudaEventRecord(p.done, p.stream));
  }
  // Every stream past every other's end of the call: a device's buffers are
  // read by the other devices' streams too (the tree's peer copies), and
  // its allocator orders a free after its own devices' streams alone.
  if (per_device_.size() > 1)
    for (const PerDevice& p : per_device_) {
      cuda::DeviceGuard guard(p.device);
      for (const PerDevice& q : per_device_)
        if (&q != &p) DP_CUDA_CHECK(cudaStreamWaitEvent(p.stream, q.done, 0));
    }
  cuda::DeviceGuard guard(ctx.device().id);
  for (const PerDevice& p : per_device_) DP_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), p.done, 0));
}

void CudaCollectives::Handoff(int from, int to) {
  const PerDevice& f = per_device_[static_cast<size_t>(from)];
  const PerDevice& t = per_device_[static_cast<size_t>(to)];
  {
    cuda::DeviceGuard guard(f.device);
    DP_CUDA_CHECK(cudaEventRecord(f.ready, f.stream));
  }
  cuda::DeviceGuard guard(t.device);
  DP_CUDA_CHECK(cudaStreamWaitEvent(t.stream, f.ready, 0));
}

void CudaCollectives::EnsureScratch(int index, size_t nbytes) {
  PerDevice& p = per_device_[static_cast<size_t>(index)];
  if (p.scratch != nullptr && p.scratch->nbytes() >= nbytes) return;
  // Only this device's stream touches its scratch; once it is idle the old
  // buffer can go. Growth is rare (the largest bucket, once).
  {
    cuda::DeviceGuard guard(p.device);
    DP_CUDA_CHECK(cudaStreamSynchronize(p.stream));
  }
  p.scratch.reset();
  p.scratch = Storage::Allocate({DeviceType::kCUDA, p.device}, nbytes);
}

// ---- the calls ---------------------------------------------------------------

void CudaCollectives::AllreduceSum(const std::vector<Segment>& segments, double scale, CudaContext& ctx) {
  CheckSegments(segments, size(), "AllreduceSum");
  for (const Segment& seg : segments) {
    const bool is_float = seg.dtype == DType::kFloat32 || seg.dtype == DType::kFloat64;
    DP_ENFORCE_CODE(is_float || seg.dtype == DType::kInt32 || seg.dtype == DType::kInt64, Code::kDType,
                    "AllreduceSum supports float32, float64, int32 and int64, got ", DTypeName(seg.dtype));
    DP_ENFORCE(is_float || scale == 1.0, "AllreduceSum: scale must be 1 for ", DTypeName(seg.dtype), ", got ",
               scale);
  }
  IssueJoined(ctx, "allreduce", [&] { IssueSum(segments, nullptr, scale); });
}

void CudaCollectives::IssueSum(const std::vector<Segment>& segments, const Segment* flags, double scale) {
  if (across()) {
    size_t bytes = flags != nullptr ? SegmentBytes(*flags) : 0;
    for (const Segment& seg : segments) bytes += SegmentBytes(seg);
    allreduce_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  if (flags == nullptr) {
    if (nccl_) {
      NcclAllreduce(segments);
      // Every device scales its own copy of the same sum: still equal bitwise.
      if (scale != 1.0)
        for (int d = 0; d < size(); ++d) Scale(segments, scale, d);
    } else {
      TreeReduce(segments);
      if (scale != 1.0) Scale(segments, scale, 0);  // once, before the result goes down the tree
      TreeBroadcast(segments, 0);
    }
    return;
  }
  std::vector<Segment> all = segments;
  all.push_back(*flags);
  if (nccl_) {
    NcclAllreduce(all);
    // Every device reads its own copy of the same flag sum: equal bitwise.
    for (int d = 0; d < size(); ++d) ScaleByActive(segments, *flags, scale, d);
  } else {
    TreeReduce(all);
    ScaleByActive(segments, *flags, scale, 0);  // once, before the result goes down the tree
    TreeBroadcast(all, 0);
  }
}

void CudaCollectives::AllreduceActive(const std::vector<Segment>& segments, const Segment& flags, double scale,
                                      CudaContext& ctx) {
  CheckSegments(segments, size(), "AllreduceSum");
  CheckSegments({flags}, size(), "AllreduceSum (active flags)");
  DP_ENFORCE_CODE(flags.dtype == DType::kFloat32 && flags.count == 1, Code::kShape,
                  "AllreduceSum: the active flags must be float32 [1] per device, got ", DTypeName(flags.dtype), " [",
                  flags.count, "]");
  for (const Segment& seg : segments)
    DP_ENFORCE_CODE(seg.dtype == DType::kFloat32 || seg.dtype == DType::kFloat64, Code::kDType,
                    "AllreduceSum averaged over active replicas needs float tensors, got ", DTypeName(seg.dtype));
  IssueJoined(ctx, "allreduce", [&] { IssueSum(segments, &flags, scale); });
}

void CudaCollectives::AllreduceCompressed(const std::vector<Segment>& compressed, DType half,
                                          const std::vector<Segment>& rest, const Segment* flags, double scale,
                                          CudaContext& ctx) {
  DP_ENFORCE_CODE(half == DType::kBFloat16 || half == DType::kFloat16, Code::kInvalidArgument,
                  "AllreduceCompressed: compress to bfloat16 or float16, not ", DTypeName(half));
  CheckSegments(compressed, size(), "AllreduceCompressed");
  for (const Segment& seg : compressed)
    DP_ENFORCE_CODE(seg.dtype == DType::kFloat32, Code::kDType, "AllreduceCompressed: compressed tensors must be ",
                    "float32, got ", DTypeName(seg.dtype));
  CheckSegments(rest, size(), "AllreduceCompressed");
  for (const Segment& seg : rest)
    DP_ENFORCE_CODE(seg.dtype == DType::kFloat32 || seg.dtype == DType::kFloat64, Code::kDType,
                    "AllreduceCompressed needs float tensors, got ", DTypeName(seg.dtype));
  if (flags != nullptr) {
    CheckSegments({*flags}, size(), "AllreduceCompressed (active flags)");
    DP_ENFORCE_CODE(flags->dtype == DType::kFloat32 && flags->count == 1, Code::kShape,
                    "AllreduceCompressed: the active flags must be float32 [1] per device");
  }
  IssueJoined(ctx, "compressed allreduce", [&] {
    // The whole tensors and the flags first: the compressed sums' scale
    // reads the flags' sum.
    if (!rest.empty() || flags != nullptr) IssueSum(rest, flags, scale);
    if (half == DType::kBFloat16)
      IssueCompressed<BFloat16>(compressed, flags, scale);
    else
      IssueCompressed<Half>(compressed, flags, scale);
  });
}

// In one process (no wire): every device's contribution rounded through H,
// summed in float (NCCL or the tree), the sum rounded through H: the CPU
// collectives' bits for two devices (comm/compression.h). Across processes
// only H crosses: the exchange of comm/compressed_sum.h, every NCCL rank a
// contribution.
template <typename H>
void CudaCollectives::IssueCompressed(const std::vector<Segment>& segments, const Segment* flags, double scale) {
  int64_t total = 0;
  for (const Segment& seg : segments) total += seg.count;
  if (total == 0) return;
  const int n = size();
  const int contributions = across() ? n * num_processes() : n;
  const float pre = CompressionPreScale<H>(contributions);
  const double factor = std::is_same_v<H, Half> ? contributions : 1;
  auto active = [&](int d) {
    return flags != nullptr ? static_cast<const float*>(flags->buffers[static_cast<size_t>(d)]) : nullptr;
  };
  if (!across()) {
    // Every buffer through H: x = float(H(x * in)) * post(out_factor, flags, out_scale).
    auto round_through = [&](float in, double out_factor, bool with_flags, double out_scale) {
      for (int d = 0; d < n; ++d) {
        const PerDevice& p = per_device_[static_cast<size_t>(d)];
        cuda::DeviceGuard guard(p.device);
        for (const Segment& seg : segments)
          DP_CUDA_CHECK(cuda::LaunchRoundThrough<H>(static_cast<float*>(seg.buffers[static_cast<size_t>(d)]), in,
                                                    out_factor, with_flags ? active(d) : nullptr, out_scale,
                                                    seg.count, p.stream));
      }
    };
    round_through(pre, 1.0, false, 1.0);  // each contribution
    IssueSum(segments, nullptr, 1.0);
    round_through(1.0f, factor, true, scale);  // the sum
    return;
  }
  allreduce_bytes_.fetch_add(static_cast<uint64_t>(total) * sizeof(uint16_t), std::memory_order_relaxed);
  // Each device's scratch: its contributions (padded to the layout), the
  // ranks' contributions to its chunk, its chunk's sums; the all-gather
  // writes every chunk's sums over the first.
  const CompressedLayout layout = MakeCompressedLayout(total, contributions);
  const size_t words = static_cast<size_t>(2 * layout.padded + layout.chunk);
  for (int d = 0; d < n; ++d) EnsureScratch(d, words * sizeof(uint16_t));
  auto send_of = [&](int d) { return static_cast<uint16_t*>(per_device_[static_cast<size_t>(d)].scratch->data()); };
  auto inbox_of = [&](int d) { return send_of(d) + layout.padded; };
  auto mine_of = [&](int d) { return send_of(d) + 2 * layout.padded; };
  const auto chunk_bytes = static_cast<size_t>(layout.chunk) * sizeof(uint16_t);
  for (int d = 0; d < n; ++d) {
    const PerDevice& p = per_device_[static_cast<size_t>(d)];
    cuda::DeviceGuard guard(p.device);
    uint16_t* send = send_of(d);
    int64_t at = 0;
    for (const Segment& seg : segments) {
      DP_CUDA_CHECK(cuda::LaunchCastScaled<H>(static_cast<const float*>(seg.buffers[static_cast<size_t>(d)]), pre,
                                              send + at, seg.count, p.stream));
      at += seg.count;
    }
    if (layout.padded > total)
      DP_CUDA_CHECK(cudaMemsetAsync(send + total, 0, static_cast<size_t>(layout.padded - total) * sizeof(uint16_t),
                                    p.stream));
    // Its own contribution to its chunk stays here.
    const int64_t me = static_cast<int64_t>(processes_.rank) * n + d;
    DP_CUDA_CHECK(cudaMemcpyAsync(inbox_of(d) + me * layout.chunk, send + me * layout.chunk, chunk_bytes,
                                  cudaMemcpyDeviceToDevice, p.stream));
  }
  const ncclDataType_t type = std::is_same_v<H, Half> ? ncclFloat16 : ncclBfloat16;
  const size_t count = static_cast<size_t>(layout.chunk);
  {
    std::unique_lock<std::mutex> lock(NcclMutex());
    NcclGroup group([&] { AbortComms(); }, true);
    for (int d = 0; d < n; ++d) {
      const PerDevice& p = per_device_[static_cast<size_t>(d)];
      const int me = processes_.rank * n + d;
      for (int q = 0; q < contributions; ++q) {
        if (q == me) continue;
        const int64_t at = static_cast<int64_t>(q) * layout.chunk;
        DP_NCCL_QUEUED(ncclSend(send_of(d) + at, count, type, q, p.comm, p.stream), true);
        DP_NCCL_QUEUED(ncclRecv(inbox_of(d) + at, count, type, q, p.comm, p.stream), true);
      }
    }
    group.End();
  }
  WaitAcross("compressed allreduce (exchange)", false);
  for (int d = 0; d < n; ++d) {
    const PerDevice& p = per_device_[static_cast<size_t>(d)];
    cuda::DeviceGuard guard(p.device);
    DP_CUDA_CHECK(cuda::LaunchSumContributions<H>(inbox_of(d), contributions, layout.chunk, mine_of(d), p.stream));
  }
  {
    std::unique_lock<std::mutex> lock(NcclMutex());
    NcclGroup group([&] { AbortComms(); }, true);
    for (int d = 0; d < n; ++d) {
      const PerDevice& p = per_device_[static_cast<size_t>(d)];
      DP_NCCL_QUEUED(ncclAllGather(mine_of(d), send_of(d), count, type, p.comm, p.stream), true);
    }
    group.End();
  }
  WaitAcross("compressed allreduce (all-gather)", false);
  for (int d = 0; d < n; ++d) {
    const PerDevice& p = per_device_[static_cast<size_t>(d)];
    cuda::DeviceGuard guard(p.device);
    int64_t at = 0;
    for (const Segment& seg : segments) {
      DP_CUDA_CHECK(cuda::LaunchUncastScaled<H>(send_of(d) + at, factor, active(d), scale,
                                                static_cast<float*>(seg.buffers[static_cast<size_t>(d)]), seg.count,
                                                p.stream));
      at += seg.count;
    }
  }
}

template <typename Issue>
void CudaCollectives::IssueJoined(CudaContext& ctx, const char* what, const Issue& issue) {
  const int caller = IndexOf(ctx);
  std::lock_guard<std::mutex> lock(mu_);
  DP_ENFORCE_CODE(broken_.empty(), Code::kUnavailable, "the CUDA communicator of [", DeviceList(devices_),
                  "] was aborted after an earlier failure (", broken_, "); create a new one");
  try {
    Fork(caller, ctx);
    issue();
    Join(ctx);
    if (across()) WaitAcross(what, true);
  } catch (const std::exception& e) {
    AbortAndDrain(e.what());
    throw;
  }
}

void CudaCollectives::AbortComms() noexcept {
  // Abort, not destroy: ncclCommAbort stops kernels that wait for peers.
  for (PerDevice& p : per_device_)
    if (p.comm != nullptr) {
      cuda::OnDeviceNoThrow(p.device, [&] { ncclCommAbort(p.comm); });
      p.comm = nullptr;
    }
}

void CudaCollectives::AbortAndDrain(const std::string& reason) noexcept {
  broken_ = reason.empty() ? std::string("unknown error") : reason;
  if (nccl_) {
    std::lock_guard<std::mutex> lock(NcclMutex());
    AbortComms();  // (already done when the failure was inside an NCCL group)
  }
  for (PerDevice& p : per_device_)
    if (p.stream != nullptr) cuda::OnDeviceNoThrow(p.device, [&] { cudaStreamSynchronize(p.stream); });
}

void CudaCollectives::Broadcast(const std::vector<Segment>& segments, int root, CudaContext& ctx) {
  CheckSegments(segments, size(), "Broadcast");
  DP_ENFORCE(root >= 0 && root < size(), "Broadcast: root ", root, " is out of range for ", size(), " devices");
  IssueJoined(ctx, "broadcast", [&] {
    if (nccl_) {
      NcclBroadcast(segments, std::vector<int>(segments.size(), root), "broadcast");
    } else {
      TreeBroadcast(segments, root);
    }
  });
}

void CudaCollectives::Allgather(const std::vector<Segment>& segments, const std::vector<int>& owners,
                                CudaContext& ctx) {
  CheckSegments(segments, size(), "Allgather");
  DP_ENFORCE(owners.size() == segments.size(), "Allgather: ", owners.size(), " owners for ", segments.size(),
             " segments");
  const int ranks = size() * num_processes();
  for (int o : owners) DP_ENFORCE(o >= 0 && o < ranks, "Allgather: owner ", o, " is out of range for ", ranks, " ranks");
  IssueJoined(ctx, "allgather", [&] {
    if (nccl_) {
      NcclBroadcast(segments, owners, "allgather");
      return;
    }
    // The tree (one process): the segments of each owner down its tree.
    for (int root = 0; root < size(); ++root) {
      std::vector<Segment> mine;
      for (size_t i = 0; i < segments.size(); ++i)
        if (owners[i] == root) mine.push_back(segments[i]);
      if (!mine.empty()) TreeBroadcast(mine, root);
    }
  });
}

void CudaCollectives::AllgatherHost(const void* mine, void* all, size_t block) {
  const int procs = num_processes(), me = process_rank();
  if (block == 0) return;
  if (procs == 1) {
    std::memcpy(all, mine, block);
    return;
  }
  // A buffer of every process's block on each device (every NCCL rank takes
  // part in each broadcast); this process's block goes in on device 0, and
  // process q's device 0 sends block q.
  CudaContext ctx({DeviceType::kCUDA, devices_[0]});
  std::vector<Tensor> buffers;
  Segment whole;
  for (int d = 0; d < size(); ++d) {
    buffers.emplace_back(Dims{static_cast<int64_t>(block) * procs}, DType::kUInt8,
                         DeviceOption{DeviceType::kCUDA, devices_[static_cast<size_t>(d)]});
    whole.buffers.push_back(buffers.back().raw_mutable_data());
  }
  char* const first = static_cast<char*>(whole.buffers[0]);
  CopyBytes(block, mine, DeviceOption{}, first + static_cast<size_t>(me) * block, ctx.device(), &ctx);
  std::vector<Segment> segments;
  std::vector<int> roots;
  for (int q = 0; q < procs; ++q) {
    Segment seg;
    seg.count = static_cast<int64_t>(block);
    seg.dtype = DType::kUInt8;
    for (void* b : whole.buffers) seg.buffers.push_back(static_cast<char*>(b) + static_cast<size_t>(q) * block);
    segments.push_back(std::move(seg));
    roots.push_back(q * size());
  }
  Allgather(segments, roots, ctx);
  CopyBytes(block * static_cast<size_t>(procs), first, ctx.device(), all, DeviceOption{}, &ctx);
  ctx.FinishDeviceComputation();
}

template <typename Call>
void CudaCollectives::NcclEachSegment(const std::vector<Segment>& segments, const char* what, const Call& call) {
  {
    std::unique_lock<std::mutex> lock(NcclMutex());
    NcclGroup group([&] { AbortComms(); }, across());
    for (size_t s = 0; s < segments.size(); ++s) {
      if (segments[s].count == 0) continue;
      for (size_t d = 0; d < per_device_.size(); ++d) {
        const ncclResult_t r = call(s, d, per_device_[d]);
        if (r != ncclSuccess && !(across() && r == ncclInProgress))  // as DP_NCCL_QUEUED, naming the call
          cuda::ThrowNcclError(r, what, __FILE__, __LINE__);
      }
    }
    group.End();
  }
  if (across()) WaitAcross(what, false);  // on the streams before anything queued after it
}

void CudaCollectives::NcclAllreduce(const std::vector<Segment>& segments) {
  std::vector<ncclDataType_t> types;  // before the group: nothing else may throw inside it
  for (const Segment& seg : segments) types.push_back(NcclType(seg.dtype));
  NcclEachSegment(segments, "allreduce", [&](size_t s, size_t d, const PerDevice& p) {
    const Segment& seg = segments[s];
    return ncclAllReduce(seg.buffers[d], seg.buffers[d], static_cast<size_t>(seg.count), types[s], ncclSum, p.comm,
                         p.stream);
  });
}

void CudaCollectives::NcclBroadcast(const std::vector<Segment>& segments, const std::vector<int>& roots,
                                    const char* what) {
  // Bytes: a broadcast does not care about the element type. Across
  // processes a root is an NCCL rank (process 0's device d is rank d).
  NcclEachSegment(segments, what, [&](size_t s, size_t d, const PerDevice& p) {
    const Segment& seg = segments[s];
    return ncclBroadcast(seg.buffers[d], seg.buffers[d], SegmentBytes(seg), ncclUint8, roots[s], p.comm, p.stream);
  });
}

void CudaCollectives::TreeReduce(const std::vector<Segment>& segments) {
  size_t total = 0;
  const std::vector<size_t> offsets = ScratchOffsets(segments, &total);
  for (const auto& [to, from] : TreePairs(size())) {
    EnsureScratch(to, total);
    Handoff(from, to);  // `from` holds its subtree's sum
    const PerDevice& t = per_device_[static_cast<size_t>(to)];
    cuda::DeviceGuard guard(t.device);
    char* scratch = static_cast<char*>(t.scratch->data());
    for (size_t s = 0; s < segments.size(); ++s) {
      const Segment& seg = segments[s];
      if (seg.count == 0) continue;
      char* staged = scratch + offsets[s];
      DP_CUDA_CHECK(cudaMemcpyPeerAsync(staged, t.device, seg.buffers[static_cast<size_t>(from)],
                                        devices_[static_cast<size_t>(from)], SegmentBytes(seg), t.stream));
      DispatchNumeric(seg.dtype, "AllreduceSum", [&](auto zero) {
        using T = decltype(zero);
        DP_CUDA_CHECK(cuda::LaunchAccumulate<T>(static_cast<T*>(seg.buffers[static_cast<size_t>(to)]),
                                                reinterpret_cast<const T*>(staged), seg.count, t.stream));
      });
    }
  }
}

void CudaCollectives::TreeBroadcast(const std::vector<Segment>& segments, int root) {
  const int n = size();
  const std::vector<std::pair<int, int>> pairs = TreePairs(n);
  // The reduce's rounds backwards, so every parent has the value before it
  // passes it on; positions count from the root.
  for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
    const int from = (it->first + root) % n;
    const int to = (it->second + root) % n;
    Handoff(from, to);
    const PerDevice& t = per_device_[static_cast<size_t>(to)];
    cuda::DeviceGuard guard(t.device);
    for (const Segment& seg : segments) {
      if (seg.count == 0) continue;
      DP_CUDA_CHECK(cudaMemcpyPeerAsync(seg.buffers[static_cast<size_t>(to)], t.device,
                                        seg.buffers[static_cast<size_t>(from)], devices_[static_cast<size_t>(from)],
                                        SegmentBytes(seg), t.stream));
    }
  }
}

void CudaCollectives::Scale(const std::vector<Segment>& segments, double scale, int index) {
  const PerDevice& p = per_device_[static_cast<size_t>(index)];
  cuda::DeviceGuard guard(p.device);
  for (const Segment& seg : segments) {
    DispatchFloat(seg.dtype, "AllreduceSum with a scale", [&](auto zero) {
      using T = decltype(zero);
      DP_CUDA_CHECK(cuda::LaunchScaleInPlace<T>(static_cast<T*>(seg.buffers[static_cast<size_t>(index)]),
                                                static_cast<T>(scale), seg.count, p.stream));
    });
  }
}

void CudaCollectives::ScaleByActive(const std::vector<Segment>& segments, const Segment& flags, double scale,
                                    int index) {
  const PerDevice& p = per_device_[static_cast<size_t>(index)];
  cuda::DeviceGuard guard(p.device);
  const auto* active = static_cast<const float*>(flags.buffers[static_cast<size_t>(index)]);
  for (const Segment& seg : segments) {
    DispatchFloat(seg.dtype, "AllreduceSum averaged over active replicas", [&](auto zero) {
      using T = decltype(zero);
      DP_CUDA_CHECK(cuda::LaunchScaleByActive<T>(static_cast<T*>(seg.buffers[static_cast<size_t>(index)]), active,
                                                 scale, seg.count, p.stream));
    });
  }
}

// ---- several processes -------------------------------------------------------

void CudaCollectives::InitAcrossProcesses() {
  Store& store = *processes_.store;
  const int me = processes_.rank, procs = processes_.size, n = size();
  if (me == 0) {  // the id first: a process's device count then says that its keys are all set
    ncclUniqueId id;
    DP_NCCL_CHECK(ncclGetUniqueId(&id));
    store.Set("nccl/id", std::string(id.internal, sizeof id.internal));
  }
  store.Set(StrCat("nccl/devices/", me), std::to_string(n));
  const std::vector<int> missing = store.MissingRanks("nccl/devices/", procs, processes_.timeout);
  if (!missing.empty())
    DP_THROW(Code::kTimeout, "NCCL rendezvous at ", store.url(), ": rank ", me, " of ", procs, " waited ",
             processes_.timeout.count(), " ms, but ", RankList(missing), " did not arrive");
  for (int r = 0; r < procs; ++r) {
    const std::string v = store.Get(StrCat("nccl/devices/", r));
    DP_ENFORCE(v == std::to_string(n), "NCCL across processes: rank ", r, " has ", v.substr(0, 12), " CUDA devices ",
               "but rank ", me, " has ", n, "; every process needs the same number");
  }
  const std::string id_bytes = store.Get("nccl/id");
  ncclUniqueId id;
  DP_ENFORCE_CODE(id_bytes.size() == sizeof id.internal, Code::kDataLoss, "NCCL rendezvous at ", store.url(),
                  ": the unique id holds ", id_bytes.size(), " bytes, not ", sizeof id.internal);
  std::memcpy(id.internal, id_bytes.data(), sizeof id.internal);
  {
    std::lock_guard<std::mutex> lock(NcclMutex());
    // Non-blocking: NCCL returns at once, and WaitAcross bounds the wait for the peers.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    NcclGroup group([&] { AbortComms(); }, true);
    for (int d = 0; d < n; ++d) {
      PerDevice& p = per_device_[static_cast<size_t>(d)];
      cuda::DeviceGuard guard(p.device);
      DP_NCCL_QUEUED(ncclCommInitRankConfig(&p.comm, procs * n, id, me * n + d, &config), true);
    }
    group.End();
  }
  WaitAcross("initialisation", true);
}

void CudaCollectives::WaitAcross(const char* what, bool complete) {
  const auto deadline = std::chrono::steady_clock::now() + processes_.timeout;
  for (int round = 0;; ++round) {
    bool done = true;
    for (PerDevice& p : per_device_) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t got = ncclCommGetAsyncError(p.comm, &state);
      if (got != ncclSuccess) state = got;
      if (state == ncclInProgress) {
        done = false;
        continue;
      }
      if (state != ncclSuccess) {
        const char* last = ncclGetLastError(p.comm);
        FailAcross(what, false, StrCat("NCCL on ", DeviceName({DeviceType::kCUDA, p.device}), ": ",
                                       ncclGetErrorString(state),
                                       last != nullptr && *last != '\0' ? StrCat(" (", last, ")") : std::string()));
      }
      if (!complete) continue;
      // Then the work on the device (`done` is recorded at the end of every
      // call; an event never recorded counts as complete).
      const cudaError_t e = cudaEventQuery(p.done);
      if (e == cudaErrorNotReady) {
        done = false;
      } else if (e != cudaSuccess) {
        cudaGetLastError();
        FailAcross(what, false, StrCat("CUDA on ", DeviceName({DeviceType::kCUDA, p.device}), ": ",
                                       cudaGetErrorString(e)));
      }
    }
    if (done) return;
    if (std::chrono::steady_clock::now() >= deadline)
      FailAcross(what, true, StrCat("not complete within ", processes_.timeout.count(), " ms"));
    Backoff(round);
  }
}

void CudaCollectives::FailAcross(const char* what, bool timed_out, const std::string& cause) {
  {
    std::lock_guard<std::mutex> lock(NcclMutex());
    AbortComms();  // kernels waiting for peers stop, so the streams drain
  }
  Store& store = *processes_.store;
  const int me = processes_.rank, procs = processes_.size;
  std::vector<int> missing;
  const auto started = std::chrono::steady_clock::now();
  try {
    store.Set(StrCat("nccl/failed/", me), cause);
    missing = store.MissingRanks("nccl/failed/", procs, kRollCallGrace);
  } catch (const std::exception& e) {
    DP_LOG(kWarning, "dp: rank ", me, ": the NCCL failure roll call at ", store.url(), " failed: ", e.what());
  }
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  const std::string who =
      missing.empty() ? std::string("every process reported the failure")
                      : StrCat(RankList(missing), missing.size() > 1 ? " are" : " is",
                               " missing (dead or stalled: no report within ", waited, " ms)");
  DP_THROW(timed_out ? Code::kTimeout : Code::kUnavailable, "NCCL ", what, " on rank ", me, " of ", procs, " failed",
           timed_out ? StrCat(" after the ", processes_.timeout.count(), " ms timeout") : std::string(), ": ", who,
           "; the communicator is aborted (", cause, ")");
}

}  // namespace dp
