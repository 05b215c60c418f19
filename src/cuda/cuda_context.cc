// CudaContext and CudaEvent, and the CUDA copy routine and context factory
// that the core looks up by device type (the allocator is
// cuda/cuda_caching_allocator).
#include "cuda/cuda_context.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "core/storage.h"
#include "cuda/cuda_caching_allocator.h"
#include "cuda/op_launchers.h"

namespace dp {

using cuda::OnDeviceNoThrow;

// ---- CudaContext ------------------------------------------------------------

CudaContext::CudaContext(DeviceOption device) : device_(device) {
  cuda::CheckDeviceAvailable(device);
  cuda::DeviceGuard guard(device.id);
  // Non-blocking: the stream must not serialise with the legacy default
  // stream, or every context on a device would run in lock step.
  DP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // Memory freed on other streams of the device waits for this one's work too.
  try {
    cuda::DeviceAllocator(device.id).RegisterStream(stream_id());
  } catch (...) {
    cudaStreamDestroy(stream_);
    throw;
  }
}

CudaContext::~CudaContext() {
  cuda::DeviceAllocator(device_.id).UnregisterStream(stream_id());
  // Errors are ignored: at process exit the runtime may already be unloaded.
  OnDeviceNoThrow(device_.id, [this] {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (cublas_lt_ != nullptr) cublasLtDestroy(cublas_lt_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  });
}

void CudaContext::SwitchToDevice() { DP_CUDA_CHECK(cudaSetDevice(device_.id)); }

void CudaContext::FinishDeviceComputation() { DP_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::unique_ptr<Event> CudaContext::CreateEvent() { return std::make_unique<CudaEvent>(device_); }

cublasHandle_t CudaContext::cublas() {
  std::lock_guard<std::mutex> lock(cublas_mu_);
  if (cublas_ == nullptr) {
    cuda::DeviceGuard guard(device_.id);  // a handle belongs to the device current at creation
    cublasHandle_t handle = nullptr;
    DP_CUBLAS_CHECK(cublasCreate(&handle));
    cublasStatus_t st = cublasSetStream(handle, stream_);
    if (st != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(handle);
      DP_CUBLAS_CHECK(st);
    }
    cublas_ = handle;
  }
  return cublas_;
}

cublasLtHandle_t CudaContext::cublas_lt() {
  std::lock_guard<std::mutex> lock(cublas_mu_);
  if (cublas_lt_ == nullptr) {
    cuda::DeviceGuard guard(device_.id);
    DP_CUBLAS_CHECK(cublasLtCreate(&cublas_lt_));
  }
  return cublas_lt_;
}

// ---- CudaEvent --------------------------------------------------------------

CudaEvent::CudaEvent(DeviceOption device) : device_(device) {
  cuda::CheckDeviceAvailable(device);
  cuda::DeviceGuard guard(device.id);
  // No timing: timing events are slower to record and wait on.
  DP_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  // Safe even while recorded work is pending: CUDA frees the event after it.
  if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
}

void CudaEvent::Record(DeviceContext& ctx) {
  auto* cuda_ctx = dynamic_cast<CudaContext*>(&ctx);
  DP_ENFORCE_CODE(cuda_ctx != nullptr && ctx.device() == device_, Code::kInternal, "an event of ",
                  DeviceName(device_), " cannot be recorded on ", DeviceName(ctx.device()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    DP_ENFORCE_CODE(status_ == EventStatus::kInitialized, Code::kInternal, "event recorded twice without Reset");
    DP_CUDA_CHECK(cudaEventRecord(event_, cuda_ctx->stream()));
    status_ = EventStatus::kScheduled;
  }
  cv_.notify_all();
}

EventStatus CudaEvent::WaitScheduled(std::unique_lock<std::mutex>& lock,
                                     std::chrono::steady_clock::time_point deadline, bool forever) {
  // Until the producer records, there is no point in its stream to wait for;
  // block like a CPU event would.
  auto ready = [this] { return status_ != EventStatus::kInitialized; };
  if (forever) {
    cv_.wait(lock, ready);
  } else {
    cv_.wait_until(lock, deadline, ready);
  }
  return status_;
}

void CudaEvent::ThrowFailed() {
  DP_THROW(Code::kFailedPrecondition, "waited on a failed event: ", error_);
}

void CudaEvent::Wait(DeviceContext& waiter) {
  auto* cuda_waiter = dynamic_cast<CudaContext*>(&waiter);
  if (cuda_waiter == nullptr) {
    Finish();  // a host waiter blocks until the GPU passes the recorded point
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  EventStatus s = WaitScheduled(lock, {}, true);
  if (s == EventStatus::kFailed) ThrowFailed();
  if (s == EventStatus::kSuccess) return;  // already done: nothing to order after
  // Queued on the waiter's stream; works across devices. The host goes on.
  DP_CUDA_CHECK(cudaStreamWaitEvent(cuda_waiter->stream(), event_, 0));
}

bool CudaEvent::Finish(std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const bool forever = timeout == std::chrono::milliseconds::max();
  // Clamp so that a huge (but finite) timeout cannot overflow the time point.
  const auto deadline =
      forever ? Clock::time_point::max()
              : Clock::now() + std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24 * 365));
  {
    std::unique_lock<std::mutex> lock(mu_);
    EventStatus s = WaitScheduled(lock, deadline, forever);
    if (s == EventStatus::kInitialized) return false;  // timed out before the producer recorded
    if (s == EventStatus::kFailed) ThrowFailed();
    if (s == EventStatus::kSuccess) return true;
  }
  // Recorded: wait for the GPU without holding mu_, so that SetFinished and
  // Query stay available meanwhile.
  cudaError_t err = cudaSuccess;
  if (forever) {
    err = cudaEventSynchronize(event_);
  } else {
    // CUDA has no timed wait on an event, hence the poll: yield at first (the
    // common case is a short wait), then sleep with a growing, capped backoff.
    auto backoff = std::chrono::microseconds(20);
    for (int spin = 0;; ++spin) {
      err = cudaEventQuery(event_);
      if (err != cudaErrorNotReady) break;
      const auto now = Clock::now();
      if (now >= deadline) return false;
      if (spin < 16) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
        backoff = std::min(backoff * 2, std::chrono::microseconds(1000));
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (status_ != EventStatus::kFailed) {
      status_ = EventStatus::kFailed;
      error_ = StrCat("CUDA error on ", DeviceName(device_), ": ", cudaGetErrorString(err), " (",
                      cudaGetErrorName(err), ")");
    }
    DP_THROW(Code::kInternal, "waiting for an event: ", error_);
  }
  if (status_ == EventStatus::kFailed) ThrowFailed();  // failed from the host while we waited
  status_ = EventStatus::kSuccess;
  return true;
}

EventStatus CudaEvent::Query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (status_ != EventStatus::kScheduled) return status_;
  cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) return EventStatus::kScheduled;
  if (err == cudaSuccess) {
    status_ = EventStatus::kSuccess;
  } else {
    cudaGetLastError();
    status_ = EventStatus::kFailed;
    error_ = StrCat("CUDA error on ", DeviceName(device_), ": ", cudaGetErrorString(err), " (",
                    cudaGetErrorName(err), ")");
  }
  return status_;
}

void CudaEvent::SetFinished(const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_ == EventStatus::kSuccess || status_ == EventStatus::kFailed) return;  // first wins
    if (error.empty()) {
      if (status_ == EventStatus::kScheduled) return;  // the GPU reports completion
      status_ = EventStatus::kSuccess;
    } else {
      status_ = EventStatus::kFailed;
      error_ = error;
    }
  }
  cv_.notify_all();
}

std::string CudaEvent::ErrorMessage() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void CudaEvent::Reset() {
  // The CUDA event needs no reset: recording it again moves its point.
  std::lock_guard<std::mutex> lock(mu_);
  status_ = EventStatus::kInitialized;
  error_.clear();
}

// ---- allocator, copies, factory ---------------------------------------------

namespace {

CudaContext* AsCudaContext(DeviceContext* ctx) { return dynamic_cast<CudaContext*>(ctx); }

// Issues the copy on `stream` (for CUDA->CUDA between devices, as a peer copy).
void CopyAsync(size_t n, const void* src, DeviceOption src_device, void* dst, DeviceOption dst_device,
               cudaStream_t stream) {
  const bool src_gpu = src_device.type == DeviceType::kCUDA;
  const bool dst_gpu = dst_device.type == DeviceType::kCUDA;
  if (src_gpu && dst_gpu && src_device.id != dst_device.id) {
    DP_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.id, src, src_device.id, n, stream));
    return;
  }
  cudaMemcpyKind kind = src_gpu && dst_gpu ? cudaMemcpyDeviceToDevice
                        : src_gpu          ? cudaMemcpyDeviceToHost
                                           : cudaMemcpyHostToDevice;
  DP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind, stream));
}

void CudaCopy(size_t n, const void* src, DeviceOption src_device, void* dst, DeviceOption dst_device,
              DeviceContext* ctx) {
  if (src_device.type == DeviceType::kCUDA) cuda::CheckDeviceAvailable(src_device);
  if (dst_device.type == DeviceType::kCUDA) cuda::CheckDeviceAvailable(dst_device);
  if (CudaContext* cuda_ctx = AsCudaContext(ctx)) {
    // Ordered after the kernels already on the context's stream; the caller
    // keeps both buffers alive until that stream gets there.
    cuda::DeviceGuard guard(cuda_ctx->device().id);
    CopyAsync(n, src, src_device, dst, dst_device, cuda_ctx->stream());
    return;
  }
  // Synchronous copy. Our streams are non-blocking, so a copy on the legacy
  // stream would not wait for kernels still writing the source (or reading
  // the destination) there: first wait for every CUDA device involved (once
  // no graph is being captured there, which such a wait would break; none
  // starts until the copy is done).
  std::optional<cuda::DeviceSyncScope> sync_src, sync_dst;
  if (src_device.type == DeviceType::kCUDA) sync_src.emplace(src_device.id);
  if (dst_device.type == DeviceType::kCUDA && !(src_device == dst_device)) sync_dst.emplace(dst_device.id);
  for (DeviceOption d : {src_device, dst_device}) {
    if (d.type != DeviceType::kCUDA) continue;
    cuda::DeviceGuard guard(d.id);
    DP_CUDA_CHECK(cudaDeviceSynchronize());
  }
  const DeviceOption gpu = dst_device.type == DeviceType::kCUDA ? dst_device : src_device;
  cuda::DeviceGuard guard(gpu.id);
  CopyAsync(n, src, src_device, dst, dst_device, cudaStreamLegacy);
  DP_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

// Rows by index on a GPU (core's GatherRows): in words as wide as the rows
// and both buffers' alignment allow.
void CudaGatherRows(DeviceOption device, const void* src, int64_t src_rows, size_t row_bytes,
                    const int64_t* indices, int64_t rows, void* dst, DeviceContext* ctx) {
  cuda::CheckDeviceAvailable(device);
  int word = 8;
  const auto bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | row_bytes;
  while (word > 1 && bits % static_cast<uintptr_t>(word) != 0) word /= 2;
  const auto row_length = static_cast<int64_t>(row_bytes / static_cast<size_t>(word));
  cuda::DeviceGuard guard(device.id);
  if (CudaContext* cuda_ctx = AsCudaContext(ctx)) {
    DP_CUDA_CHECK(cuda::LaunchGatherRows(src, src_rows, indices, dst, rows, row_length, word, cuda_ctx->stream()));
    return;
  }
  // As CudaCopy without a context: after everything queued on the device,
  // done before returning.
  cuda::DeviceSyncScope sync(device.id);
  DP_CUDA_CHECK(cudaDeviceSynchronize());
  DP_CUDA_CHECK(cuda::LaunchGatherRows(src, src_rows, indices, dst, rows, row_length, word, cudaStreamLegacy));
  DP_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

std::unique_ptr<DeviceContext> MakeCudaContext(DeviceOption device) { return std::make_unique<CudaContext>(device); }

// Page-locked host memory (Storage::AllocatePinned): cudaMallocHost, which
// under unified addressing (every 64-bit platform CUDA 13 runs on) every GPU
// copies from asynchronously. Only asked for by code that targets a GPU;
// without one it throws, and the storage falls back to ordinary memory.
class PinnedHostAllocator final : public Allocator {
 public:
  void* Allocate(DeviceOption, size_t nbytes) override {
    DP_ENFORCE_CODE(cuda::DeviceCount() > 0, Code::kUnavailable, "no GPU to page-lock host memory for");
    void* p = nullptr;
    const cudaError_t err = cudaMallocHost(&p, nbytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      DP_THROW(Code::kOutOfMemory, "cannot page-lock ", nbytes, " bytes of host memory: ", cudaGetErrorString(err));
    }
    return p;
  }
  void Free(DeviceOption, void* ptr) noexcept override { cudaFreeHost(ptr); }
};

PinnedHostAllocator g_pinned_host_allocator;

// Runs at load time, so it only stores pointers: no CUDA call may happen
// before somebody asks for a CUDA device (there may be no driver at all).
struct Registrations {
  Registrations() {
    RegisterCopy(DeviceType::kCUDA, &CudaCopy);
    RegisterGatherRows(DeviceType::kCUDA, &CudaGatherRows);
    RegisterPinnedAllocator(&g_pinned_host_allocator);
    RegisterContextFactory(DeviceType::kCUDA, &MakeCudaContext);
    RegisterDeviceCounter(DeviceType::kCUDA, &cuda::DeviceCount);
  }
} g_registrations;

}  // namespace
}  // namespace dp
