// The CUDA backend of the caching allocator (core/caching_allocator.h): one
// allocator per GPU over cudaMalloc/cudaFree and pooled CUDA events,
// registered as the CUDA device type's Allocator. A CudaContext registers its
// stream with its device's allocator for as long as it lives.
//
// Graph captures: while a thread records a CUDA graph on a device's streams
// (CaptureRegistration, for its whole length), the allocator records no
// free-time event on them and synchronises nothing device-wide, and a copy
// with no stream (DeviceSyncScope) waits for the capture to end before it
// synchronises the device, and keeps a new one from starting meanwhile.
#pragma once

#include <vector>

#include "core/caching_allocator.h"

namespace dp::cuda {

// The caching allocator of a visible device (kUnavailable otherwise); made
// on first use (without any CUDA call) and kept for the process's life: at
// exit the runtime may be gone before the last tensor.
CachingAllocator& DeviceAllocator(int device);

// `streams` of `device` are captured into a graph by this thread for the
// registration's life (CachingAllocator::BeginCapture / EndCapture).
class CaptureRegistration {
 public:
  CaptureRegistration(int device, std::vector<StreamId> streams);
  ~CaptureRegistration();
  CaptureRegistration(const CaptureRegistration&) = delete;
  CaptureRegistration& operator=(const CaptureRegistration&) = delete;

 private:
  int device_;
  std::vector<StreamId> streams_;
};

// Around a synchronisation of the whole device by a caller outside any
// stream (a copy without a context): waits, bounded (kTimeout after 60 s),
// until no capture is underway there, whose streams the synchronisation
// would have to wait for (CUDA refuses to), and holds new captures back
// until it is destroyed. Does nothing on a thread that is capturing on the
// device: its synchronisation fails the capture, which then runs on the
// streams.
class DeviceSyncScope {
 public:
  explicit DeviceSyncScope(int device);
  ~DeviceSyncScope();
  DeviceSyncScope(const DeviceSyncScope&) = delete;
  DeviceSyncScope& operator=(const DeviceSyncScope&) = delete;

 private:
  CachingAllocator* allocator_ = nullptr;
};

}  // namespace dp::cuda
