// The stream that the calling thread's device work is ordered on, for the
// device memory allocator (core/caching_allocator.h): memory allocated and
// freed while an op runs belongs to the stream of the op's context.
//
// Operator::Run sets it for the op's device from DeviceContext::stream_id()
// (a CudaContext's stream; 0 for contexts without streams) for the duration
// of the kernel, and restores what was there before. Outside any op (the C
// API, net creation and teardown, checkpoint loads) it is kNoStream: work
// there is synchronous with the host, and the allocator treats such memory
// conservatively. One slot per thread: a thread runs one op at a time, and an
// op allocates only on its own device.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace dp {

// An opaque stream of a device backend (a cudaStream_t's value for CUDA).
using StreamId = uint64_t;
inline constexpr StreamId kNoStream = 0;

// The stream current on this thread for `device`; kNoStream when none is.
StreamId CurrentStream(DeviceOption device);

// The device and stream current on this thread, whatever the device
// (stream kNoStream: none): what an allocator of another device needs to
// know that an op elsewhere frees its memory.
struct ThreadStream {
  DeviceOption device;
  StreamId stream = kNoStream;
};
ThreadStream CurrentThreadStream();

class CurrentStreamScope {
 public:
  CurrentStreamScope(DeviceOption device, StreamId stream);
  ~CurrentStreamScope();
  CurrentStreamScope(const CurrentStreamScope&) = delete;
  CurrentStreamScope& operator=(const CurrentStreamScope&) = delete;

 private:
  DeviceOption previous_device_;
  StreamId previous_stream_;
};

}  // namespace dp
