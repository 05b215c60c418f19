// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC11), and the uniforms and
// normals dp's random ops draw from it.
//
// A Philox block is a pure function of a 128-bit counter and a 64-bit key,
// so element i of a random tensor is computed from (seed, stream, i) alone:
// any element on any device in any order, with no generator state to carry.
// The key is the op's seed; the counter is (i's block, stream), the stream
// being 0 for the fills and the iteration for Dropout.
//
// Everything here is DP_HD and gives the same bits on the host and on a
// CUDA device: integer operations, exactly rounded IEEE arithmetic with
// explicit fma, and portable_math.h's log and cosine instead of libm's.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/portable_math.h"

namespace dp::philox {

struct Block {
  uint32_t w[4];
};

namespace detail {

DP_HD inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

}  // namespace detail

// Philox4x32 with 10 rounds (Random123's philox4x32_R(10, ctr, key)).
DP_HD inline Block Philox4x32(Block ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule: golden ratio, sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    detail::MulHiLo(kMul0, ctr.w[0], &hi0, &lo0);
    detail::MulHiLo(kMul1, ctr.w[2], &hi1, &lo1);
    ctr = Block{{hi1 ^ ctr.w[1] ^ key0, lo1, hi0 ^ ctr.w[3] ^ key1, lo0}};
  }
  return ctr;
}

// Block `index` of the stream (seed, stream).
DP_HD inline Block StreamBlock(uint64_t seed, uint64_t stream, uint64_t index) {
  const Block ctr{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), static_cast<uint32_t>(stream),
                   static_cast<uint32_t>(stream >> 32)}};
  return Philox4x32(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// ---- 32-bit words: four per block (Dropout) ------------------------------------

// Word i of a stream: word i % 4 of block i / 4.
DP_HD inline uint32_t StreamWord(uint64_t seed, uint64_t stream, uint64_t i) {
  return StreamBlock(seed, stream, i >> 2).w[i & 3];
}

// A float uniform in [0, 1) from a word: its top 24 bits, exactly.
DP_HD inline float UniformFloat(uint32_t word) { return static_cast<float>(word >> 8) * 0x1p-24f; }

// UniformFloat(word) >= p  <=>  (word >> 8) >= UniformThreshold(p), for p in
// [0, 1]: the comparison in integers (p * 2^24 is exact).
DP_HD inline uint32_t UniformThreshold(double p) {
  const double scaled = p * 0x1p24;
  const uint32_t t = static_cast<uint32_t>(scaled);  // ceil(scaled)
  return static_cast<double>(t) < scaled ? t + 1 : t;
}

// ---- 64-bit draws: two words per element (the fills) -----------------------------

// Element i's 64 random bits: words 2 (i % 2) and 2 (i % 2) + 1 of block i / 2.
DP_HD inline uint64_t StreamBits64(uint64_t seed, uint64_t stream, uint64_t i) {
  const Block b = StreamBlock(seed, stream, i >> 1);
  const int k = static_cast<int>(i & 1) * 2;
  return (static_cast<uint64_t>(b.w[k]) << 32) | b.w[k + 1];
}

// A double uniform in [0, 1) from 64 bits: the top 53, exactly.
DP_HD inline double UniformDouble(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1p-53; }

// lo + (hi - lo) u for element i of the stream, in double; float outputs
// round this value (so a float32 fill is its float64 twin rounded).
DP_HD inline double UniformValue(uint64_t seed, uint64_t i, double lo, double hi) {
  return portable::Fma(hi - lo, UniformDouble(StreamBits64(seed, 0, i)), lo);
}

// A standard normal for element i (Box-Muller on block i / 2: its first two
// words give the radius, the last two the angle; even elements take the
// cosine, odd ones the sine, so a pair shares one block).
DP_HD inline double StandardNormal(uint64_t seed, uint64_t stream, uint64_t i) {
  const Block b = StreamBlock(seed, stream, i >> 1);
  const uint64_t radius_bits = (static_cast<uint64_t>(b.w[0]) << 32) | b.w[1];
  const uint64_t angle_bits = (static_cast<uint64_t>(b.w[2]) << 32) | b.w[3];
  // u in (0, 1], so its log is finite.
  const double u = static_cast<double>((radius_bits >> 11) + 1) * 0x1p-53;
  const double radius = portable::Sqrt(-2.0 * portable::Log(u));
  uint64_t turns = angle_bits >> 11;                          // the angle in 2^-53 turns
  if (i & 1) turns -= uint64_t{1} << 51;                      // sin(a) = cos(a - a quarter turn)
  return radius * portable::CosTurns(turns);
}

// mean + std * z for element i of the stream, in double.
DP_HD inline double NormalValue(uint64_t seed, uint64_t i, double mean, double stdev) {
  return portable::Fma(stdev, StandardNormal(seed, 0, i), mean);
}

}  // namespace dp::philox
