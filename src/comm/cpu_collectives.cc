#include "comm/cpu_collectives.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "comm/sum_types.h"
#include "core/cpu_budget.h"
#include "core/error.h"

namespace dp {
namespace {

// A thread reduces its slice in chunks this large: the running sum stays in
// L1/L2 while the N input chunks stream through, and the N write-backs hit
// lines that were just read (no extra read-for-ownership traffic), so memory
// sees N reads and N writes, like memcpy. Shorter chunks cut the hardware
// prefetchers' streams too often: 8 KiB ran at ~60% of memcpy's bandwidth for
// 8 buffers, 32 KiB at ~90-100%.
constexpr size_t kChunkBytes = size_t{32} << 10;
// Broadcast copies a slice to every destination chunk by chunk, so that the
// root's chunk is read from memory once and from cache N - 2 times.
constexpr size_t kCopyChunkBytes = size_t{64} << 10;
// Slice boundaries fall on multiples of a cache line (buffers are 64-byte
// aligned when dp allocated them), so no two threads write the same line.
constexpr size_t kSliceAlign = 64;

// [lo, hi) of `total` units cut into `parts` slices whose bounds are multiples of `grain`.
void SliceBounds(int64_t total, int parts, int index, int64_t grain, int64_t* lo, int64_t* hi) {
  int64_t per = (total + parts - 1) / parts;
  per = (per + grain - 1) / grain * grain;
  *lo = std::min(total, per * index);
  *hi = std::min(total, *lo + per);
}

// Buffers [begin, begin + len) of one segment: sum in buffer order, scale, write to all.
template <typename T>
void ReduceRange(void* const* bufs, size_t n, int64_t begin, int64_t len, T scale, bool scaled) {
  if (n == 1) {  // only scaling left to do
    T* p = static_cast<T*>(bufs[0]) + begin;
    for (int64_t k = 0; k < len; ++k) p[k] = p[k] * scale;
    return;
  }
  constexpr int64_t kChunk = static_cast<int64_t>(kChunkBytes / sizeof(T));
  alignas(64) T acc[kChunk];
  for (int64_t done = 0; done < len; done += kChunk) {
    const int64_t c = std::min(kChunk, len - done);
    const int64_t off = begin + done;
    SumInOrder(acc, bufs, n, off, c);
    if (scaled)
      for (int64_t k = 0; k < c; ++k) acc[k] *= scale;
    const size_t bytes = static_cast<size_t>(c) * sizeof(T);
    for (size_t i = 0; i < n; ++i) std::memcpy(static_cast<T*>(bufs[i]) + off, acc, bytes);
  }
}

// Calls fn(segment, begin in it, length, global offset) for the pieces of
// the global range [lo, hi) of the segments laid end to end.
template <typename Fn>
void ForEachPiece(const std::vector<CpuCollectives::Segment>& segments, const std::vector<int64_t>& offsets,
                  int64_t lo, int64_t hi, const Fn& fn) {
  if (lo >= hi) return;
  // The segment holding lo: the last one starting at or before it (empty
  // segments start where the next one does and are skipped by len == 0).
  size_t s = static_cast<size_t>(std::upper_bound(offsets.begin(), offsets.end(), lo) - offsets.begin()) - 1;
  for (int64_t pos = lo; pos < hi; ++s) {
    const int64_t end = std::min(hi, offsets[s + 1]);
    if (end > pos) {
      fn(segments[s], pos - offsets[s], end - pos, pos);
      pos = end;
    }
  }
}

template <typename T>
void ReduceSlice(const std::vector<CpuCollectives::Segment>& segments, const std::vector<int64_t>& offsets,
                 int64_t lo, int64_t hi, T scale, bool scaled) {
  ForEachPiece(segments, offsets, lo, hi, [&](const CpuCollectives::Segment& seg, int64_t begin, int64_t len, int64_t) {
    ReduceRange<T>(seg.buffers.data(), seg.buffers.size(), begin, len, scale, scaled);
  });
}

// out[pos..] = sum of the segment's buffers (buffer order).
template <typename T>
void SumSlice(const std::vector<CpuCollectives::Segment>& segments, const std::vector<int64_t>& offsets, int64_t lo,
              int64_t hi, T* out) {
  ForEachPiece(segments, offsets, lo, hi,
               [&](const CpuCollectives::Segment& seg, int64_t begin, int64_t len, int64_t pos) {
                 if (seg.buffers.size() == 1) {
                   std::memcpy(out + pos, static_cast<const T*>(seg.buffers[0]) + begin,
                               static_cast<size_t>(len) * sizeof(T));
                 } else {
                   SumInOrder(out + pos, seg.buffers.data(), seg.buffers.size(), begin, len);
                 }
               });
}

// Every buffer of the segment = in[pos - origin..] * scale (in holds
// element `origin` of the segments laid end to end).
template <typename T>
void CopyOutSlice(const std::vector<CpuCollectives::Segment>& segments, const std::vector<int64_t>& offsets,
                  int64_t lo, int64_t hi, const T* in, int64_t origin, T scale, bool scaled) {
  ForEachPiece(segments, offsets, lo, hi,
               [&](const CpuCollectives::Segment& seg, int64_t begin, int64_t len, int64_t pos) {
                 const T* src = in + (pos - origin);
                 for (void* buf : seg.buffers) {
                   T* dst = static_cast<T*>(buf) + begin;
                   if (scaled) {
                     for (int64_t k = 0; k < len; ++k) dst[k] = src[k] * scale;
                   } else {
                     std::memcpy(dst, src, static_cast<size_t>(len) * sizeof(T));
                   }
                 }
               });
}

}  // namespace

int CpuCollectives::DefaultThreads(int num_threads, int num_devices_hint) {
  if (num_threads > 0) return num_threads;
  const int cpus = CpuBudget();
  return num_devices_hint > 0 ? std::min(num_devices_hint, cpus) : cpus;
}

CpuCollectives::CpuCollectives(int num_threads, int num_devices_hint)
    : team_(DefaultThreads(num_threads, num_devices_hint)) {}

int CpuCollectives::ThreadsFor(size_t bytes) const {
  if (bytes < kSerialBytes) return 1;
  return static_cast<int>(std::clamp<size_t>(bytes / kMinBytesPerThread, 1, static_cast<size_t>(team_.size())));
}

// The segments' offsets laid end to end (size + 1 entries), after checking
// them and the dtype (`what` names the call in messages).
std::vector<int64_t> CpuCollectives::Layout(const char* what, const std::vector<Segment>& segments, DType dtype,
                                            double scale) {
  const bool is_float = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  const bool is_int = dtype == DType::kInt32 || dtype == DType::kInt64;
  DP_ENFORCE_CODE(is_float || is_int, Code::kDType, what, " supports float32, float64, int32 and int64, got ",
                  DTypeName(dtype));
  DP_ENFORCE(is_float || scale == 1.0, what, ": scale must be 1 for ", DTypeName(dtype),
             " (integers are summed exactly), got ", scale);
  std::vector<int64_t> offsets(segments.size() + 1, 0);
  if (segments.empty()) return offsets;
  const size_t n = segments[0].buffers.size();
  DP_ENFORCE(n >= 1, what, ": segment 0 has no buffers");
  for (size_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    DP_ENFORCE(seg.buffers.size() == n, what, ": segment ", s, " has ", seg.buffers.size(),
               " buffers but segment 0 has ", n, "; every segment needs one buffer per device");
    DP_ENFORCE(seg.count >= 0, what, ": segment ", s, " has a negative count ", seg.count);
    if (seg.count > 0)
      for (size_t i = 0; i < n; ++i)
        DP_ENFORCE(seg.buffers[i] != nullptr, what, ": buffer ", i, " of segment ", s, " is null but holds ",
                   seg.count, " elements");
    DP_ENFORCE(seg.count <= std::numeric_limits<int64_t>::max() - offsets[s], what, ": segments hold more than ",
               std::numeric_limits<int64_t>::max(), " elements");
    offsets[s + 1] = offsets[s] + seg.count;
  }
  return offsets;
}

// Bytes a pass over `total` elements in each of n buffers touches
// (saturating), and the team members it gets.
int CpuCollectives::ThreadsForPass(int64_t total, size_t itemsize, size_t n) const {
  const size_t per_buffer = static_cast<size_t>(total) * itemsize;
  const size_t bytes = per_buffer > std::numeric_limits<size_t>::max() / n ? std::numeric_limits<size_t>::max()
                                                                           : per_buffer * n;
  return ThreadsFor(bytes);
}

template <typename Body>
void CpuCollectives::Split(int64_t total, size_t itemsize, int threads, const Body& body) {
  if (threads == 1) {
    body(int64_t{0}, total);
    return;
  }
  const int64_t grain = static_cast<int64_t>(kSliceAlign / itemsize);
  team_.Run([&](int index, int) {
    if (index >= threads) return;
    int64_t lo, hi;
    SliceBounds(total, threads, index, grain, &lo, &hi);
    body(lo, hi);
  });
}

void CpuCollectives::AllreduceSum(const std::vector<Segment>& segments, DType dtype, double scale) {
  const std::vector<int64_t> offsets = Layout("AllreduceSum", segments, dtype, scale);
  const int64_t total = offsets.back();
  if (total == 0) return;
  const size_t n = segments[0].buffers.size();
  if (n == 1 && scale == 1.0) return;
  const size_t itemsize = DTypeSize(dtype);
  WithSumType(dtype, "AllreduceSum", [&](auto zero) {
    using T = decltype(zero);
    const T s = static_cast<T>(scale);
    Split(total, itemsize, ThreadsForPass(total, itemsize, n),
          [&](int64_t lo, int64_t hi) { ReduceSlice<T>(segments, offsets, lo, hi, s, scale != 1.0); });
  });
}

void CpuCollectives::SumInto(const std::vector<Segment>& segments, DType dtype, void* out) {
  const std::vector<int64_t> offsets = Layout("SumInto", segments, dtype, 1.0);
  const int64_t total = offsets.back();
  if (total == 0) return;
  DP_ENFORCE(out != nullptr, "SumInto: the output is null but ", total, " elements are to be written");
  const size_t n = segments[0].buffers.size();
  const size_t itemsize = DTypeSize(dtype);
  WithSumType(dtype, "SumInto", [&](auto zero) {
    using T = decltype(zero);
    Split(total, itemsize, ThreadsForPass(total, itemsize, n + 1),
          [&](int64_t lo, int64_t hi) { SumSlice<T>(segments, offsets, lo, hi, static_cast<T*>(out)); });
  });
}

void CpuCollectives::CopyOut(const void* in, const std::vector<Segment>& segments, DType dtype, double scale) {
  int64_t total = 0;
  for (const Segment& seg : segments) total += seg.count > 0 ? seg.count : 0;
  CopyOut(in, segments, dtype, scale, 0, total);
}

void CpuCollectives::CopyOut(const void* in, const std::vector<Segment>& segments, DType dtype, double scale,
                             int64_t begin, int64_t count) {
  const std::vector<int64_t> offsets = Layout("CopyOut", segments, dtype, scale);
  const int64_t total = offsets.back();
  DP_ENFORCE(begin >= 0 && count >= 0 && begin <= total && count <= total - begin, "CopyOut: elements [", begin,
             ", ", begin, " + ", count, ") are outside the segments' ", total);
  if (count == 0) return;
  DP_ENFORCE(in != nullptr, "CopyOut: the input is null but ", count, " elements are to be read");
  const size_t n = segments[0].buffers.size();
  const size_t itemsize = DTypeSize(dtype);
  WithSumType(dtype, "CopyOut", [&](auto zero) {
    using T = decltype(zero);
    const T s = static_cast<T>(scale);
    Split(count, itemsize, ThreadsForPass(count, itemsize, n + 1), [&](int64_t lo, int64_t hi) {
      CopyOutSlice<T>(segments, offsets, begin + lo, begin + hi, static_cast<const T*>(in), begin, s, scale != 1.0);
    });
  });
}

void CpuCollectives::Broadcast(const std::vector<void*>& buffers, int root, size_t nbytes) {
  DP_ENFORCE(!buffers.empty(), "Broadcast: no buffers");
  const int n = static_cast<int>(buffers.size());
  DP_ENFORCE(root >= 0 && root < n, "Broadcast: root ", root, " is out of range for ", n, " buffers");
  if (nbytes > 0)
    for (int i = 0; i < n; ++i)
      DP_ENFORCE(buffers[static_cast<size_t>(i)] != nullptr, "Broadcast: buffer ", i, " of ", n, " is null but ",
                 nbytes, " bytes are to be copied");
  if (n == 1 || nbytes == 0) return;
  const char* src = static_cast<const char*>(buffers[static_cast<size_t>(root)]);
  auto copy = [&](size_t lo, size_t hi) {
    for (size_t pos = lo; pos < hi; pos += kCopyChunkBytes) {
      const size_t len = std::min(kCopyChunkBytes, hi - pos);
      for (int i = 0; i < n; ++i) {
        char* dst = static_cast<char*>(buffers[static_cast<size_t>(i)]);
        if (i != root && dst != src) std::memcpy(dst + pos, src + pos, len);
      }
    }
  };
  const size_t bytes = nbytes > std::numeric_limits<size_t>::max() / static_cast<size_t>(n)
                           ? std::numeric_limits<size_t>::max()
                           : nbytes * static_cast<size_t>(n);
  const int threads = ThreadsFor(bytes);
  if (threads == 1) {
    copy(0, nbytes);
    return;
  }
  team_.Run([&](int index, int) {
    if (index >= threads) return;
    int64_t lo, hi;
    SliceBounds(static_cast<int64_t>(nbytes), threads, index, static_cast<int64_t>(kSliceAlign), &lo, &hi);
    copy(static_cast<size_t>(lo), static_cast<size_t>(hi));
  });
}

void CpuCollectives::Barrier() {
  team_.Run([](int, int) {});
}

StagedCollective& StagingCache::Get(const std::string& key, const std::shared_ptr<Communicator>& comm, int64_t count,
                                    DType dtype, int root) {
  return Get(key, comm, root < 0 ? StagedKind::kAllreduce : StagedKind::kBroadcast, count, dtype, root);
}

StagedCollective& StagingCache::Get(const std::string& key, const std::shared_ptr<Communicator>& comm,
                                    StagedKind kind, int64_t count, DType dtype, int root) {
  std::unique_lock<std::mutex> lock(mu_);
  auto& slot = entries_[key];
  if (!slot) slot = std::make_unique<StagedCollective>();
  lock.unlock();  // entries never move or go; one op uses an entry at a time
  StagedCollective& st = *slot;
  if (st.comm != comm || st.kind != kind || st.count != count || st.dtype != dtype || st.root != root ||
      !st.prepared) {
    st.prepared.reset();
    switch (kind) {
      case StagedKind::kAllreduce: st.prepared = comm->PrepareBufferedAllreduceSum(count, dtype); break;
      case StagedKind::kBroadcast:
        st.prepared = comm->PrepareBufferedBroadcast(static_cast<size_t>(count) * DTypeSize(dtype), root);
        break;
      case StagedKind::kReduceScatter: st.prepared = comm->PrepareBufferedReduceScatterSum(count, dtype); break;
      case StagedKind::kAllgather: st.prepared = comm->PrepareBufferedAllgather(static_cast<size_t>(count)); break;
    }
    st.comm = comm;
    st.kind = kind;
    st.count = count;
    st.dtype = dtype;
    st.root = root;
  }
  return st;
}

}  // namespace dp
