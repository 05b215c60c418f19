// The CUDA backend of the caching allocator (core/caching_allocator.h): one
// allocator per GPU over cudaMalloc/cudaFree and pooled CUDA events,
// registered as the CUDA device type's Allocator. A CudaContext registers its
// stream with its device's allocator for as long as it lives.
#pragma once

#include "core/caching_allocator.h"

namespace dp::cuda {

// The caching allocator of a visible device (kUnavailable otherwise); made
// on first use (without any CUDA call) and kept for the process's life: at
// exit the runtime may be gone before the last tensor.
CachingAllocator& DeviceAllocator(int device);

}  // namespace dp::cuda
