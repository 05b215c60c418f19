// The scale of an allreduce averaged over the replicas that had data (Join):
// `active` is the sum of their float32 flags, allreduced with the tensors.
// One definition for the CPU op and the CUDA kernel, so that the host tests
// of the CPU op check the kernel's arithmetic too.
#pragma once

#if defined(__CUDACC__)
#define DP_HOST_DEVICE __host__ __device__
#else
#define DP_HOST_DEVICE
#endif

namespace dp {

// scale / active; scale when no replica was active (the sums are zeros then).
inline DP_HOST_DEVICE double ActiveScale(double scale, float active) {
  return active > 0 ? scale / static_cast<double>(active) : scale;
}

}  // namespace dp
