// The arithmetic of compressed gradients (the `compress` argument of
// Allreduce and ReduceScatter) that the CPU collectives (comm/compression.h)
// and the CUDA ones (comm/cuda_collectives.cc, their kernels in
// comm/collective_kernels.cu) share, so that the host tests check what the
// kernels compute. Each contribution is rounded to the 16-bit float H once
// (binary16 after a scale of 1 / contributions, so that the sum cannot
// overflow where no term does), the contributions are summed in float in
// rank order and the sum is rounded to H once; the result is H's value times
// the post-scale (the pre-scale undone, times the collective's scale).
//
// The CUDA exchange across processes (CudaCollectives, NCCL) lays every
// compressed tensor of a call end to end in one H buffer per rank, padded
// to `ranks` chunks of equal length (CompressedLayout): rank q owns chunk q.
// Each rank sends chunk q of its contributions to rank q and receives every
// rank's contribution to its own chunk, in rank order, into an inbox of
// `ranks` chunks; it sums them (SumContributions) and all-gathers the sums.
// Only H's bytes cross: as many as a 16-bit ring allreduce moves.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/half_float.h"
#include "core/host_device.h"

namespace dp {

// What each contribution is multiplied by before its cast to H.
template <typename H>
DP_HD float CompressionPreScale(int contributions) {
  return std::is_same_v<H, Half> ? 1.0f / static_cast<float>(contributions) : 1.0f;
}

// What the sum is multiplied by after its cast back: the pre-scale undone,
// times the collective's scale s.
template <typename H>
DP_HD float CompressionPostScale(int contributions, double s) {
  return static_cast<float>((std::is_same_v<H, Half> ? contributions : 1) * s);
}

// Chunks of whole 64-element runs (128 bytes of H), so that every chunk of
// the buffer starts aligned for NCCL and the kernels.
struct CompressedLayout {
  int64_t total = 0;   // the call's compressed elements, end to end
  int64_t chunk = 0;   // elements each rank owns (sums and all-gathers)
  int64_t padded = 0;  // chunk * ranks >= total; the tail is zeros
};
DP_HD inline CompressedLayout MakeCompressedLayout(int64_t total, int ranks) {
  CompressedLayout l;
  l.total = total;
  const int64_t per_rank = (total + ranks - 1) / ranks;
  l.chunk = (per_rank + 63) / 64 * 64;
  l.padded = l.chunk * ranks;
  return l;
}

// Element j of this rank's chunk: the ranks' contributions to it (inbox
// holds `ranks` chunks, rank q's at q * chunk) summed in float in rank order
// and rounded to H once.
template <typename H>
DP_HD H SumContributions(const H* inbox, int ranks, int64_t chunk, int64_t j) {
  float sum = ToFloat(inbox[j]);
  for (int q = 1; q < ranks; ++q) sum += ToFloat(inbox[static_cast<int64_t>(q) * chunk + j]);
  return FromFloat<H>(sum);
}

}  // namespace dp
