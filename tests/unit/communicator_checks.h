// Checks every Communicator must pass, called on each rank (a thread) of a
// communicator of `size` ranks (test_comm: Gloo; test_shm: shared memory and
// hierarchical): exact sums, and the collectives besides allreduce.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/half_float.h"
#include "expect_error.h"

namespace dp::testing {

// AllreduceSum of count elements, (r + 1) * (i % 7 + 1) on rank r: exact in
// every dtype, so every rank must hold the same exact sums.
template <typename T>
void CheckAllreduceOn(Communicator& comm, int r, int size, int64_t count, DType dtype) {
  std::vector<T> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = static_cast<T>((r + 1) * (i % 7 + 1));
  comm.AllreduceSum(v.data(), count, dtype);
  const T ranks_sum = static_cast<T>(size * (size + 1) / 2);
  bool exact = true;
  for (int64_t i = 0; i < count; ++i)
    exact = exact && v[static_cast<size_t>(i)] == ranks_sum * static_cast<T>(i % 7 + 1);
  CHECK(exact);
}

// AllreduceSum of 16-bit floats H (BFloat16, Half: compressed gradients):
// the small integers above are exact in both for up to 4 ranks; values that
// round are within the type's rounding of the exact sum (each partial sum
// rounded once; Gloo's ring rounds at every hop).
template <typename H>
void CheckHalfAllreduceOn(Communicator& comm, int r, int size, int64_t count, DType dtype) {
  std::vector<H> v(static_cast<size_t>(count)), w(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    v[static_cast<size_t>(i)] = FromFloat<H>(static_cast<float>((r + 1) * (i % 7 + 1)));
    w[static_cast<size_t>(i)] = FromFloat<H>(0.1f * static_cast<float>(r + 1) + 0.0137f * static_cast<float>(i % 97));
  }
  const uint64_t before = comm.allreduce_bytes();
  comm.AllreduceSum(v.data(), count, dtype);
  comm.AllreduceSum(w.data(), count, dtype);
  CHECK(comm.allreduce_bytes() - before == static_cast<uint64_t>(2 * count * 2));  // 16 bits each: half of float32
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  const double ulp = dtype == DType::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;  // half the spacing at 1, twice
  bool exact = true, near = true;
  for (int64_t i = 0; i < count; ++i) {
    exact = exact && ToFloat(v[static_cast<size_t>(i)]) == ranks_sum * static_cast<float>(i % 7 + 1);
    double want = 0;
    for (int k = 0; k < size; ++k)
      want += ToFloat(FromFloat<H>(0.1f * static_cast<float>(k + 1) + 0.0137f * static_cast<float>(i % 97)));
    near = near && std::abs(ToFloat(w[static_cast<size_t>(i)]) - want) <= ulp * size * std::abs(want);
  }
  CHECK(exact);
  CHECK(near);
}

// Broadcast from rank 1 (size >= 2) of every length in `lengths`, allgather
// in rank order, reduce-scatter, barrier; argument errors leave the
// communicator usable. rank_order: the reduce-scatter sums each element in
// rank order (shared memory, Gloo); otherwise as its allreduce does.
inline void CheckOtherCollectives(Communicator& comm, int r, int size, const std::vector<size_t>& lengths,
                                  bool rank_order = true) {
  for (size_t n : lengths) {
    std::vector<char> b(n, static_cast<char>(r));
    if (r == 1) std::memcpy(b.data(), "from rank one", 13);
    comm.Broadcast(b.data(), b.size(), 1);
    CHECK(std::memcmp(b.data(), "from rank one", 13) == 0);
    CHECK(b.back() == 1);
  }
  int64_t mine[2] = {r, 10 * r};
  std::vector<int64_t> all(static_cast<size_t>(2 * size));
  comm.Allgather(mine, all.data(), sizeof mine);
  for (int k = 0; k < size; ++k) {
    CHECK(all[static_cast<size_t>(2 * k)] == k);
    CHECK(all[static_cast<size_t>(2 * k + 1)] == 10 * k);
  }
  std::vector<float> blocks(static_cast<size_t>(2 * size));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<float>(i + r);
  comm.ReduceScatterSum(blocks.data(), 2, DType::kFloat32);
  for (int i = 0; i < 2; ++i) {
    const size_t at = static_cast<size_t>(2 * r + i);
    CHECK(blocks[at] == static_cast<float>(size * static_cast<int>(at) + size * (size - 1) / 2));
  }
  // Blocks longer than a communicator's scratch (shared memory's 512 KiB),
  // of values whose sum rounds: this rank's block holds the sums in rank
  // order (or the allreduce's), bit for bit.
  const int64_t count = 150000;
  auto value = [](size_t i, int rank) {
    return std::sin(0.001f * static_cast<float>(i) + 0.7f * static_cast<float>(rank)) * 1e3f + 1e-3f;
  };
  std::vector<float> values(static_cast<size_t>(count * size)), sums(values.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = value(i, r);
  if (rank_order) {
    for (size_t i = 0; i < sums.size(); ++i) {
      sums[i] = value(i, 0);
      for (int k = 1; k < size; ++k) sums[i] += value(i, k);
    }
  } else {
    sums = values;
    comm.AllreduceSum(sums.data(), count * size, DType::kFloat32);
  }
  comm.ReduceScatterSum(values.data(), count, DType::kFloat32);
  CHECK(std::equal(values.begin() + r * count, values.begin() + (r + 1) * count, sums.begin() + r * count));
  comm.Barrier();
  std::vector<char> b(8);
  ExpectError([&] { comm.Broadcast(b.data(), 1, size); }, Code::kInvalidArgument, {"root rank"});
  ExpectError([&] { comm.AllreduceSum(b.data(), 1, DType::kUInt8); }, Code::kDType, {"uint8"});
  ExpectError([&] { comm.PrepareBufferedAllreduceSum(-1, DType::kFloat32); }, Code::kInvalidArgument,
              {"negative count"});
  comm.Barrier();  // still usable after argument errors
}

// Prepared reduce-scatters and all-gathers run again and again on their
// buffers, new values every run, as the ZeRO buckets run them: blocks empty,
// of one element and longer than a message, float32 and bfloat16 (small
// integers: exact sums). A sink that throws on one rank fails that rank's
// call alone; the peers finish, and the next run is exact everywhere.
inline void CheckPreparedShardCollectives(Communicator& comm, int r, int size) {
  auto v = [](int run, int rank, int64_t i) { return static_cast<float>(run + (rank + 1) * (i % 5 + 1)); };
  for (DType dtype : {DType::kFloat32, DType::kBFloat16})
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{70000}}) {
      CAPTURE(count);
      auto rs = comm.PrepareBufferedReduceScatterSum(count, dtype);
      auto ag = comm.PrepareBufferedAllgather(static_cast<size_t>(count) * sizeof(int32_t));
      for (int run = 0; run < 3; ++run) {
        for (int64_t i = 0; i < count * size; ++i) {
          if (dtype == DType::kFloat32) static_cast<float*>(rs->input())[i] = v(run, r, i);
          else static_cast<BFloat16*>(rs->input())[i] = FromFloat<BFloat16>(v(run, r, i));
        }
        size_t at = 0, bytes = 0;
        bool exact = true;
        auto take = [&](const void* piece, size_t offset, size_t n) {
          at = offset;
          bytes = n;
          const size_t item = DTypeSize(dtype), first = offset / item;
          for (size_t k = 0; k < n / item; ++k) {
            float want = 0;
            for (int q = 0; q < size; ++q) want += v(run, q, static_cast<int64_t>(first + k));
            const float got = dtype == DType::kFloat32 ? static_cast<const float*>(piece)[k]
                                                       : ToFloat(static_cast<const BFloat16*>(piece)[k]);
            exact = exact && got == want;
          }
        };
        rs->Run(SinkOf(take));
        CHECK(exact);
        if (count > 0) {
          CHECK(at == static_cast<size_t>(r * count) * DTypeSize(dtype));
          CHECK(bytes == static_cast<size_t>(count) * DTypeSize(dtype));
        }

        auto* mine = static_cast<int32_t*>(ag->input());
        for (int64_t i = 0; i < count; ++i) mine[i] = run * 1000000 + r * 100000 + static_cast<int32_t>(i);
        std::vector<int32_t> all(static_cast<size_t>(count * size), -1);
        auto gather = [&](const void* piece, size_t offset, size_t n) {
          std::memcpy(reinterpret_cast<char*>(all.data()) + offset, piece, n);
        };
        bool fail_here = run == 1 && r == 0 && count > 0;
        auto failing = [&](const void*, size_t, size_t) { throw std::runtime_error("the sink failed"); };
        if (fail_here) {
          CHECK_THROWS(ag->Run(SinkOf(failing)));
          continue;
        }
        ag->Run(SinkOf(gather));
        bool gathered = true;
        for (int q = 0; q < size; ++q)
          for (int64_t i = 0; i < count; ++i)
            gathered = gathered && all[static_cast<size_t>(q * count + i)] ==
                                       run * 1000000 + q * 100000 + static_cast<int32_t>(i);
        CHECK(gathered);
      }
    }
  comm.Barrier();
}

// What a rank sees after a peer left: its next allreduce's error ("CODE:
// message"), how long that took, and a later barrier's error.
struct AfterPeerLeft {
  std::string first, second;
  double seconds = 0;

  explicit AfterPeerLeft(Communicator& comm) {
    std::vector<float> v(100, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    try {
      comm.AllreduceSum(v.data(), 100, DType::kFloat32);
    } catch (const Error& e) {
      first = std::string(CodeName(e.code())) + ": " + e.message();
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    try {
      comm.Barrier();
    } catch (const Error& e) {
      second = e.message();
    }
  }

  // The communicator stays failed: the barrier failed with the same message.
  bool StaysFailed() const { return second == first.substr(first.find(": ") + 2); }
};

}  // namespace dp::testing
