// NumPy broadcasting as index math, shared by the CPU and CUDA kernels of
// Add, Sub, Mul, Div and SumReduceLike. The host collapses a broadcast into
// the fewest dims that walk the same elements (size-1 dims dropped,
// neighbours merged where every operand walks them as one run), which the
// CPU kernels' odometers and the CUDA kernels' per-thread offsets
// (BroadcastOffsets, ReduceIndex) then use.
#pragma once

#include <cstdint>
#include <vector>

#include "core/host_device.h"
#include "ops/math/strided_index.h"

namespace dp::math {

// Strides of `in` (right-aligned, row-major) inside the broadcast shape
// `out`: 0 along the dims where `in` is broadcast (size 1 or missing).
inline std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t s = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t k = in.size() - 1 - i;
    const size_t o = out.size() - 1 - i;
    strides[o] = in[k] == 1 ? 0 : s;
    s *= in[k];
  }
  return strides;
}

// C = A op B with C's shape y (a and b broadcast to it): C's dims with the
// strides of A (strides[0]) and B (strides[1]), collapsed.
inline CollapsedLayout CollapseBroadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                         const std::vector<int64_t>& y) {
  return Collapse(y, {BroadcastStrides(a, y), BroadcastStrides(b, y)});
}

// The collapsed broadcast of a binary op, as a CUDA thread reads it.
struct BroadcastIndex {
  int rank = 0;
  int64_t dims[kMaxStridedDims] = {};
  int64_t a_strides[kMaxStridedDims] = {};
  int64_t b_strides[kMaxStridedDims] = {};
};

// False when the collapsed rank exceeds kMaxStridedDims.
inline bool MakeBroadcastIndex(const CollapsedLayout& layout, BroadcastIndex* index) {
  const size_t rank = layout.dims.size();
  if (rank > static_cast<size_t>(kMaxStridedDims)) return false;
  index->rank = static_cast<int>(rank);
  for (size_t d = 0; d < rank; ++d) {
    index->dims[d] = layout.dims[d];
    index->a_strides[d] = layout.strides[0][d];
    index->b_strides[d] = layout.strides[1][d];
  }
  return true;
}

// The offsets in A and B of the operands of output element i.
DP_HD inline void BroadcastOffsets(const BroadcastIndex& g, int64_t i, int64_t* a, int64_t* b) {
  int64_t oa = 0, ob = 0;
  for (int d = g.rank - 1; d > 0; --d) {
    const int64_t q = i / g.dims[d];
    const int64_t r = i - q * g.dims[d];
    oa += r * g.a_strides[d];
    ob += r * g.b_strides[d];
    i = q;
  }
  if (g.rank > 0) {
    oa += i * g.a_strides[0];
    ob += i * g.b_strides[0];
  }
  *a = oa;
  *b = ob;
}

// SumReduceLike's sum of X back to the shape of `like` (which broadcasts to
// X): output element o sums the elements of X at
// StridedOffset(kept, o) + StridedOffset(reduced, r), r in [0, count), with
// both walks in X's strides (kept over like's non-broadcast dims, reduced
// over the rest), r in X's row-major order.
struct ReduceIndex {
  StridedIndex kept;
  StridedIndex reduced;
  int64_t count = 1;  // elements summed per output
};

// False when either walk exceeds kMaxStridedDims dims.
inline bool MakeReduceIndex(const std::vector<int64_t>& x, const std::vector<int64_t>& like, ReduceIndex* index) {
  std::vector<int64_t> x_strides(x.size(), 1);
  for (size_t d = x.size(); d-- > 1;) x_strides[d - 1] = x_strides[d] * x[d];
  const CollapsedLayout layout = Collapse(x, {x_strides, BroadcastStrides(like, x)});
  *index = ReduceIndex{};
  for (size_t d = 0; d < layout.dims.size(); ++d) {
    StridedIndex& walk = layout.strides[1][d] == 0 ? index->reduced : index->kept;
    if (walk.rank == kMaxStridedDims) return false;
    walk.dims[walk.rank] = layout.dims[d];
    walk.strides[walk.rank] = layout.strides[0][d];
    ++walk.rank;
    if (&walk == &index->reduced) index->count *= layout.dims[d];
  }
  return true;
}

}  // namespace dp::math
