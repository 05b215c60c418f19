// Multi-tensor launches: one CUDA launch updates many tensors (the
// MultiTensor* optimizer ops, ops/cpu/multi_tensor_update_ops.cc), so a step
// with P params costs ceil(P / kMaxTensors) launches instead of P. The
// tensors' pointers and sizes travel by value in the kernel's parameters
// (MultiTensorList, about 1 KiB; no table in device memory, so a captured
// CUDA graph holds them like any other argument). Each tensor is cut into
// chunks of kMultiTensorChunk elements, and block b of a launch handles chunk
// b of the list's chunks in order (LocateChunk). The host tests walk every
// block of a plan to check that each element is covered exactly once.
#pragma once

#include <cstdint>
#include <vector>

#include "core/host_device.h"

namespace dp {

// Elements a block updates: 256 threads, 16 elements each.
inline constexpr int64_t kMultiTensorChunk = 4096;

// The tensors of one launch: param, gradient and up to two state tensors
// each, n elements. chunk_end[i] counts the chunks of tensors 0..i.
struct MultiTensorList {
  static constexpr int kMaxTensors = 24;
  int count = 0;
  int64_t n[kMaxTensors] = {};
  int64_t chunk_end[kMaxTensors] = {};
  float* param[kMaxTensors] = {};
  const float* grad[kMaxTensors] = {};
  float* state0[kMaxTensors] = {};
  float* state1[kMaxTensors] = {};
};

// The elements [begin, end) of tensor `tensor` that block `block` handles
// (block < chunk_end[count - 1]). A linear scan: count <= 24, and every
// thread of the block finds the same answer.
struct ChunkSpan {
  int tensor;
  int64_t begin, end;
};
DP_HD inline ChunkSpan LocateChunk(const int64_t* n, const int64_t* chunk_end, int count, int64_t block) {
  int t = 0;
  while (t + 1 < count && block >= chunk_end[t]) ++t;
  const int64_t first = t == 0 ? 0 : chunk_end[t - 1];
  const int64_t begin = (block - first) * kMultiTensorChunk;
  const int64_t end = begin + kMultiTensorChunk < n[t] ? begin + kMultiTensorChunk : n[t];
  return {t, begin, end};
}

// How `sizes` (elements of each tensor, in order) split into launches: runs
// of at most kMaxTensors tensors, the empty ones left out (no chunk, no
// slot). Each launch lists its tensors' indices and its blocks.
struct MultiTensorLaunch {
  std::vector<int> tensors;
  std::vector<int64_t> chunk_end;  // as MultiTensorList's
  int64_t blocks = 0;
};
inline std::vector<MultiTensorLaunch> PlanMultiTensorLaunches(const std::vector<int64_t>& sizes) {
  std::vector<MultiTensorLaunch> launches;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0) continue;
    if (launches.empty() || launches.back().tensors.size() == static_cast<size_t>(MultiTensorList::kMaxTensors))
      launches.emplace_back();
    MultiTensorLaunch& l = launches.back();
    l.blocks += (sizes[i] + kMultiTensorChunk - 1) / kMultiTensorChunk;
    l.tensors.push_back(static_cast<int>(i));
    l.chunk_end.push_back(l.blocks);
  }
  return launches;
}

// The list of one launch over tensors of `sizes`: counts and chunk ends set,
// the pointers of slot k set by fill(list, k, i) from tensor i.
template <typename Fill>
MultiTensorList LaunchList(const MultiTensorLaunch& launch, const std::vector<int64_t>& sizes, Fill fill) {
  MultiTensorList list;
  list.count = static_cast<int>(launch.tensors.size());
  for (int k = 0; k < list.count; ++k) {
    const int i = launch.tensors[static_cast<size_t>(k)];
    list.n[k] = sizes[static_cast<size_t>(i)];
    list.chunk_end[k] = launch.chunk_end[static_cast<size_t>(k)];
    fill(list, k, i);
  }
  return list;
}

}  // namespace dp
