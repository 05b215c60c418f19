// float32 <-> bfloat16 and IEEE binary16 (Half), round to nearest even, as
// plain bit arithmetic that the host and CUDA kernels share (DP_HD): what a
// compressed gradient allreduce casts to and back (comm/), and what a
// kernel computing in float reads and writes half tensors with.
//
// bfloat16 is float32's top half: the same 8-bit exponent (the same range),
// 8 bits of significand. binary16 has 5 exponent bits (largest finite
// 65504, smallest normal 2^-14, subnormals down to 2^-24) and 11 bits of
// significand. NaN stays NaN (quiet), infinities stay infinite; a float too
// large for binary16 becomes an infinity of its sign.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/host_device.h"

namespace dp {

DP_HD inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

DP_HD inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

DP_HD inline BFloat16 FloatToBFloat16(float f) {
  const uint32_t u = FloatBits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // to nearest, ties to even
  const uint32_t nan = (u >> 16) | 0x0040u;                           // quiet NaN
  // A select, not a branch: loops of conversions vectorise.
  return BFloat16{static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded)};
}

DP_HD inline float BFloat16ToFloat(BFloat16 b) { return BitsFloat(static_cast<uint32_t>(b.bits) << 16); }

DP_HD inline Half FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return Half{static_cast<uint16_t>(sign | 0x7e00u)};  // NaN
  if (a >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds past 65504: infinity
  if (a >= 0x38800000u) {  // a normal binary16 (>= 2^-14): drop 13 significand bits, rebias 127 -> 15
    const uint32_t rounding = 0xfffu + ((a >> 13) & 1u);
    return Half{static_cast<uint16_t>(sign | ((a - 0x38000000u + rounding) >> 13))};
  }
  if (a < 0x33000000u) return Half{sign};  // below half the smallest subnormal (2^-25): zero
  // Subnormal: the significand with its implicit bit, shifted to units of 2^-24, rounded to even.
  const uint32_t exponent = a >> 23;
  const uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24 for exponents 102..112
  const uint32_t half_ulp = 1u << (shift - 1), rest = significand & ((1u << shift) - 1u);
  uint32_t h = significand >> shift;
  if (rest > half_ulp || (rest == half_ulp && (h & 1u))) ++h;
  return Half{static_cast<uint16_t>(sign | h)};
}

DP_HD inline float HalfToFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu, significand = h.bits & 0x3ffu;
  if (exponent == 0x1fu) return BitsFloat(sign | 0x7f800000u | (significand << 13));  // inf, NaN
  if (exponent != 0) return BitsFloat(sign | ((exponent + 112u) << 23) | (significand << 13));
  // Zero or subnormal: significand * 2^-24, exact in float.
  const float magnitude = static_cast<float>(significand) * (1.0f / 16777216.0f);
  return sign ? -magnitude : magnitude;
}

// The two through one name, for code templated on the 16-bit type.
DP_HD inline float ToFloat(BFloat16 b) { return BFloat16ToFloat(b); }
DP_HD inline float ToFloat(Half h) { return HalfToFloat(h); }
template <typename T>
DP_HD T FromFloat(float f);
template <>
DP_HD inline BFloat16 FromFloat<BFloat16>(float f) { return FloatToBFloat16(f); }
template <>
DP_HD inline Half FromFloat<Half>(float f) { return FloatToHalf(f); }

}  // namespace dp
