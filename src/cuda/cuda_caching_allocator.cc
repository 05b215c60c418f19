// cudaMalloc/cudaFree segments and pooled events under the caching policy,
// and its registration as the CUDA allocator.
#include "cuda/cuda_caching_allocator.h"

#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <memory>
#include <vector>

#include "core/storage.h"
#include "cuda/cuda_context.h"

namespace dp::cuda {
namespace {

// Called with the allocator's lock held, so the event pool needs none.
class CudaBackend final : public CachingAllocatorBackend {
 public:
  explicit CudaBackend(int device) : device_(device) {}

  void* AllocateSegment(size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it, the policy releases its cache and retries
      return nullptr;
    }
    DP_CUDA_CHECK(err);
    return p;
  }

  void FreeSegment(void* ptr, size_t) noexcept override {
    // cudaFree waits until the device is idle, so work still queued on the
    // segment finishes first.
    OnDeviceNoThrow(device_, [ptr] { cudaFree(ptr); });
  }

  EventHandle RecordEvent(StreamId stream) noexcept override {
    cudaEvent_t e = nullptr;
    if (!free_events_.empty()) {
      e = free_events_.back();
      free_events_.pop_back();
    }
    bool ok = true;
    OnDeviceNoThrow(device_, [&] {
      // No timing: cheaper to record and query.
      if (e == nullptr) ok = cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess;
      if (ok) ok = cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)) == cudaSuccess;
    });
    if (!ok) {
      if (e != nullptr) cudaEventDestroy(e);
      cudaGetLastError();
      return nullptr;
    }
    return e;
  }

  EventState QueryEvent(EventHandle event) noexcept override {
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaSuccess) return EventState::kDone;
    if (err == cudaErrorNotReady) return EventState::kRunning;
    cudaGetLastError();
    switch (err) {
      // Recorded into a stream being captured (the policy records none there,
      // CaptureRegistration; a stream that joined a capture unnamed would), or
      // not answerable while a capture runs: it says nothing of the work.
      case cudaErrorCapturedEvent:
      case cudaErrorStreamCaptureUnsupported:
      case cudaErrorStreamCaptureInvalidated:
      case cudaErrorStreamCaptureImplicit:
      case cudaErrorStreamCaptureWrongThread:
      case cudaErrorStreamCaptureIsolation:
      case cudaErrorStreamCaptureMerge:
      case cudaErrorStreamCaptureUnmatched:
      case cudaErrorStreamCaptureUnjoined:
        return EventState::kCaptured;
      default:
        return EventState::kDone;  // the stream's failure reaches its ops, not the allocator
    }
  }

  void ReleaseEvent(EventHandle event) noexcept override {
    try {
      free_events_.push_back(static_cast<cudaEvent_t>(event));
    } catch (...) {
      cudaEventDestroy(static_cast<cudaEvent_t>(event));
    }
  }

  void SynchronizeDevice() noexcept override {
    OnDeviceNoThrow(device_, [] { cudaDeviceSynchronize(); });
  }

 private:
  const int device_;
  std::vector<cudaEvent_t> free_events_;  // recorded and completed once, ready to record again
};

struct PerDevice {
  explicit PerDevice(int id) : backend(id), allocator(backend, {DeviceType::kCUDA, id}) {}
  CudaBackend backend;
  CachingAllocator allocator;
};

// Every visible device's, made together on first use; never destroyed.
std::vector<std::unique_ptr<PerDevice>>& Devices() {
  static auto* devices = [] {
    auto* v = new std::vector<std::unique_ptr<PerDevice>>;
    for (int i = 0; i < DeviceCount(); ++i) v->push_back(std::make_unique<PerDevice>(i));
    return v;
  }();
  return *devices;
}

// The CUDA device type's Allocator: the thread's current stream on the
// device (core/current_stream.h) orders each allocation and free.
class CudaCachingAllocator final : public Allocator {
 public:
  void* Allocate(DeviceOption device, size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    return DeviceAllocator(device.id).Allocate(nbytes, CurrentStream(device));
  }

  void Free(DeviceOption device, void* ptr) noexcept override {
    if (ptr == nullptr) return;
    // Dropped by an op on another GPU (it read this memory: a peer copy):
    // work queued on that op's stream may still read the block, and this
    // device's free-time events cover this device's streams alone. Rare
    // (multi-GPU nets' cross-device copies), so the host waits for it.
    const ThreadStream op = CurrentThreadStream();
    if (op.stream != kNoStream && op.device.type == DeviceType::kCUDA && op.device.id != device.id)
      OnDeviceNoThrow(op.device.id, [&] { cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(op.stream)); });
    auto& devices = Devices();  // exists: ptr came from it
    devices[static_cast<size_t>(device.id)]->allocator.Free(ptr, CurrentStream(device));
  }

  bool GetStats(DeviceOption device, DeviceMemoryStats* out) override {
    const CachingAllocatorStats s = DeviceAllocator(device.id).stats();
    *out = {s.allocated, s.peak, s.reserved, s.raw_allocs, s.raw_frees};
    return true;
  }

  void ResetPeak(DeviceOption device) override { DeviceAllocator(device.id).ResetPeak(); }
};

CudaCachingAllocator g_allocator;

// At load time: only a pointer is stored (no CUDA call before a device is asked for).
struct Registration {
  Registration() { RegisterAllocator(DeviceType::kCUDA, &g_allocator); }
} g_registration;

}  // namespace

namespace {

// Captures this thread has open, per device.
constexpr int kCountedDevices = 64;
thread_local std::array<int, kCountedDevices> t_captures{};
int& CapturesHere(int device) { return t_captures[static_cast<size_t>(device) % kCountedDevices]; }

// A capture holds its streams for as long as issuing a net's ops takes.
constexpr std::chrono::seconds kCaptureWait{60};

}  // namespace

CaptureRegistration::CaptureRegistration(int device, std::vector<StreamId> streams)
    : device_(device), streams_(std::move(streams)) {
  DeviceAllocator(device_).BeginCapture(streams_);
  ++CapturesHere(device_);
}

CaptureRegistration::~CaptureRegistration() {
  --CapturesHere(device_);
  DeviceAllocator(device_).EndCapture(streams_);
}

DeviceSyncScope::DeviceSyncScope(int device) {
  if (CapturesHere(device) > 0) return;  // this thread's own capture: CUDA fails it, and the run goes on the streams
  CachingAllocator& allocator = DeviceAllocator(device);
  DP_ENFORCE_CODE(allocator.BeginDeviceSync(kCaptureWait), Code::kTimeout, "a copy on cuda:", device,
                  " without a stream waited ", kCaptureWait.count(), " s for a CUDA graph capture there to end");
  allocator_ = &allocator;
}

DeviceSyncScope::~DeviceSyncScope() {
  if (allocator_ != nullptr) allocator_->EndDeviceSync();
}

CachingAllocator& DeviceAllocator(int device) {
  auto& devices = Devices();
  if (device < 0 || static_cast<size_t>(device) >= devices.size()) {
    CheckDeviceAvailable({DeviceType::kCUDA, device});  // throws kUnavailable with the probe's reason
    DP_THROW(Code::kInternal, "no allocator for cuda:", device);
  }
  return devices[static_cast<size_t>(device)]->allocator;
}

}  // namespace dp::cuda
