// StridedIndex: maps the linear index of an element in a row-major shape to
// the offset of the element it reads in a strided tensor (a broadcast
// operand, a permuted input, the rows a reduction visits). The CUDA kernels
// of the elementwise family run it per thread; the host builds it once per
// launch from collapsed dims (Collapse), so that a fixed capacity covers any
// shape whose collapsed rank fits.
#pragma once

#include <cstdint>
#include <vector>

#include "core/host_device.h"

namespace dp::math {

// Collapsed dims a kernel's index can carry (passed by value to a launch).
constexpr int kMaxStridedDims = 16;

struct StridedIndex {
  int rank = 0;                           // 0: a single element at offset 0
  int64_t dims[kMaxStridedDims] = {};     // row-major shape walked
  int64_t strides[kMaxStridedDims] = {};  // element stride of each dim (0: broadcast)
};

// The offset of element i (row-major over s.dims) in the strided tensor.
DP_HD inline int64_t StridedOffset(const StridedIndex& s, int64_t i) {
  int64_t offset = 0;
  for (int d = s.rank - 1; d > 0; --d) {
    const int64_t q = i / s.dims[d];
    offset += (i - q * s.dims[d]) * s.strides[d];
    i = q;
  }
  return s.rank > 0 ? offset + i * s.strides[0] : offset;
}

// A row-major shape walked by several operands at once, each with its own
// strides (strides[k][d] for operand k).
struct CollapsedLayout {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;
};

// `dims` walked with each operand's `strides`, collapsed: size-1 dims go
// (they move no operand) and a dim merges into the one outside it when, for
// every operand, stepping the outer dim equals stepping through all of the
// inner one. Rank 0 remains when every dim has size 1.
inline CollapsedLayout Collapse(const std::vector<int64_t>& dims, const std::vector<std::vector<int64_t>>& strides) {
  CollapsedLayout out;
  out.strides.resize(strides.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool merge = !out.dims.empty();
    for (size_t k = 0; merge && k < strides.size(); ++k)
      merge = out.strides[k].back() == strides[k][d] * dims[d];
    if (merge) {
      out.dims.back() *= dims[d];
      for (size_t k = 0; k < strides.size(); ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.dims.push_back(dims[d]);
      for (size_t k = 0; k < strides.size(); ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  return out;
}

// Operand k's walk of a collapsed layout; false when its rank exceeds
// kMaxStridedDims.
inline bool MakeStridedIndex(const CollapsedLayout& layout, size_t k, StridedIndex* index) {
  const size_t rank = layout.dims.size();
  if (rank > static_cast<size_t>(kMaxStridedDims)) return false;
  *index = StridedIndex{};
  index->rank = static_cast<int>(rank);
  for (size_t d = 0; d < rank; ++d) {
    index->dims[d] = layout.dims[d];
    index->strides[d] = layout.strides[k][d];
  }
  return true;
}

}  // namespace dp::math
