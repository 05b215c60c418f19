// The CUDA device context and event, plus the error-check helpers every CUDA
// source file uses. Only compiled when dp is built with CUDA.
//
// A CudaContext owns one non-blocking stream on its device: every kernel and
// asynchronous copy issued through the context is ordered on that stream, and
// nothing else is (non-blocking streams do not synchronise with the legacy
// default stream). Cross-stream ordering goes through CudaEvent. The stream is
// registered with its device's caching allocator (cuda/cuda_caching_allocator.h)
// while the context lives, and is the allocation stream of the ops run on it.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "core/context.h"
#include "core/error.h"
#include "core/event.h"
#include "cuda/cuda_runtime.h"

namespace dp::cuda {

// Throw dp::Error for a failed call: kOutOfMemory for allocation failures,
// kInternal otherwise. The message names the expression, CUDA's description
// and the current device.
[[noreturn]] void ThrowCudaError(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void ThrowCublasError(cublasStatus_t status, const char* expr, const char* file, int line);

// Throws kUnavailable unless `device` is a visible CUDA device.
void CheckDeviceAvailable(DeviceOption device);

// Makes a device current for a scope and restores the previous one after
// (dp never leaves a caller thread on a different device than it found it).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;  // -1: the current device was not changed
};

// Runs fn with `device` current and restores the previous device, ignoring
// every error: for destructors and teardown paths that must not throw (at
// process exit the runtime may already be gone).
template <typename Fn>
void OnDeviceNoThrow(int device, Fn fn) noexcept {
  int previous = -1;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device &&
                        cudaSetDevice(device) == cudaSuccess;
  fn();
  if (switched) cudaSetDevice(previous);
  cudaGetLastError();
}

}  // namespace dp::cuda

#define DP_CUDA_CHECK(expr)                                                                 \
  do {                                                                                      \
    const cudaError_t dp_cuda_err_ = (expr);                                                \
    if (dp_cuda_err_ != cudaSuccess) ::dp::cuda::ThrowCudaError(dp_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define DP_CUBLAS_CHECK(expr)                                                               \
  do {                                                                                      \
    const cublasStatus_t dp_cublas_st_ = (expr);                                            \
    if (dp_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::dp::cuda::ThrowCublasError(dp_cublas_st_, #expr, __FILE__, __LINE__);               \
  } while (0)

namespace dp {

class CudaContext final : public DeviceContext {
 public:
  // Creates the stream on `device`, which must be visible (kUnavailable if not).
  explicit CudaContext(DeviceOption device);
  ~CudaContext() override;
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  DeviceOption device() const override { return device_; }
  void SwitchToDevice() override;
  void FinishDeviceComputation() override;
  bool IsAsync() const override { return true; }
  std::unique_ptr<Event> CreateEvent() override;
  // A stream capture (cuda/cuda_graph.cc).
  std::unique_ptr<GraphRecording> BeginGraphCapture(const std::vector<DeviceContext*>& joining) override;

  StreamId stream_id() const override { return reinterpret_cast<StreamId>(stream_); }

  cudaStream_t stream() const { return stream_; }
  // The cuBLAS handle bound to stream(); created on first use, since most
  // contexts never run a GEMM and a handle costs device memory.
  cublasHandle_t cublas();
  // The cuBLASLt handle (the FC engine CUBLASLT: a GEMM with its bias and
  // relu as the epilogue); made on first use. Its calls take the stream.
  cublasLtHandle_t cublas_lt();

 private:
  DeviceOption device_;
  cudaStream_t stream_ = nullptr;
  std::mutex cublas_mu_;  // guards both handles' creation
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
};

// A point in a CudaContext's stream. Besides the CUDA event it keeps a host
// state, so that the executor can fail an event (the error then reaches its
// waiters) or finish one that was never recorded.
class CudaEvent final : public Event {
 public:
  explicit CudaEvent(DeviceOption device);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  DeviceOption device() const override { return device_; }
  // ctx must be a CudaContext of this event's device (kInternal otherwise).
  void Record(DeviceContext& ctx) override;
  // A CUDA waiter's stream waits on the device; any other waiter blocks the host.
  void Wait(DeviceContext& waiter) override;
  bool Finish(std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) override;
  EventStatus Query() override;
  // An error always fails the event. Success only finishes an event that was
  // not recorded: once recorded, completion is the GPU's to report.
  void SetFinished(const std::string& error = {}) override;
  std::string ErrorMessage() override;
  void Reset() override;

 private:
  // Blocks until recorded or finished from the host, or until `deadline`;
  // returns the status then. Called with `lock` held.
  EventStatus WaitScheduled(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline,
                            bool forever);
  [[noreturn]] void ThrowFailed();  // called with mu_ held

  DeviceOption device_;
  cudaEvent_t event_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  EventStatus status_ = EventStatus::kInitialized;  // kScheduled once recorded
  std::string error_;
};

}  // namespace dp
