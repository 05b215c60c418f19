// Double-precision log and cosine that give the same bits on the host and
// on a CUDA device. glibc's and CUDA's libm differ in the last bit, so the
// random normals (core/philox.h), which must be bitwise equal on both, use
// these instead: integer operations, IEEE +, -, *, / and explicit fma, each
// rounded exactly on both sides. Every multiply-add is an explicit fma
// because nvcc (and GCC where the target has FMA) would otherwise fuse some
// of them and not others.
//
// Accuracy (tests/unit/test_core.cc, against long double): a few ulp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace dp::portable {

DP_HD inline uint64_t BitsOf(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

DP_HD inline double DoubleOf(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

DP_HD inline double Fma(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// sqrt is exactly rounded on both sides.
DP_HD inline double Sqrt(double x) {
#if defined(__CUDA_ARCH__)
  return sqrt(x);
#else
  return std::sqrt(x);
#endif
}

// Natural log of a positive, normal, finite x. x = 2^e m with m in
// [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <=
// 0.1716, whose odd series through s^21 is exact to ~1e-19; e ln2 adds in
// two parts (ln2's high part has zeros enough for e * hi to be exact).
DP_HD inline double Log(double x) {
  constexpr uint64_t kMantissa = (uint64_t{1} << 52) - 1;
  const uint64_t bits = BitsOf(x);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  double m = DoubleOf((bits & kMantissa) | (uint64_t{1023} << 52));  // [1, 2)
  if (m > 0x1.6a09e667f3bcdp+0) {                                   // sqrt(2)
    m = DoubleOf((bits & kMantissa) | (uint64_t{1022} << 52));       // [0.5, 1)
    e += 1;
  }
  const double s = (m - 1.0) / (m + 1.0);  // m - 1 is exact (Sterbenz)
  const double s2 = s * s;
  // 2/3, 2/5, ..., 2/21: the series 2 s + s * s2 * P(s2).
  double p = 0x1.8618618618618p-4;
  p = Fma(p, s2, 0x1.af286bca1af28p-4);
  p = Fma(p, s2, 0x1.e1e1e1e1e1e1ep-4);
  p = Fma(p, s2, 0x1.1111111111111p-3);
  p = Fma(p, s2, 0x1.3b13b13b13b14p-3);
  p = Fma(p, s2, 0x1.745d1745d1746p-3);
  p = Fma(p, s2, 0x1.c71c71c71c71cp-3);
  p = Fma(p, s2, 0x1.2492492492492p-2);
  p = Fma(p, s2, 0x1.999999999999ap-2);
  p = Fma(p, s2, 0x1.5555555555555p-1);
  const double log_m = Fma(s * s2, p, 2.0 * s);
  const double k = static_cast<double>(e);
  return Fma(k, 0x1.62e42feep-1, Fma(k, 0x1.a39ef35793c76p-33, log_m));  // ln2 = hi + lo
}

// cos(2 pi t) for t = turns / 2^53 (turns taken mod 2^53): the quarter turn
// q nearest t is split off in integers, leaving r = t - q/4 in [-1/8, 1/8]
// exactly, whose cos(2 pi r) (through r^18) or sin(2 pi r) (through r^17)
// Taylor series is exact to ~1e-19. sin(2 pi t) is CosTurns(turns - 2^51).
DP_HD inline double CosTurns(uint64_t turns) {
  constexpr int kBits = 53;
  turns &= (uint64_t{1} << kBits) - 1;
  const uint64_t quarter = (turns + (uint64_t{1} << (kBits - 3))) >> (kBits - 2);  // 0..4
  const int64_t r_int = static_cast<int64_t>(turns) - static_cast<int64_t>(quarter << (kBits - 2));
  const double r = static_cast<double>(r_int) * 0x1p-53;  // exact: |r_int| <= 2^50
  const double r2 = r * r;
  double c = -0x1.2a0c591af8314p-5;  // (-1)^k (2 pi)^2k / (2k)!, k = 9 .. 0
  c = Fma(c, r2, 0x1.20c62c2f2d7f5p-2);
  c = Fma(c, r2, -0x1.b6e24f44b128fp+0);
  c = Fma(c, r2, 0x1.f9d38a3763cc3p+2);
  c = Fma(c, r2, -0x1.a6d1f2a204a8cp+4);
  c = Fma(c, r2, 0x1.e1f506891babbp+5);
  c = Fma(c, r2, -0x1.55d3c7e3cbffap+6);
  c = Fma(c, r2, 0x1.03c1f081b5ac4p+6);
  c = Fma(c, r2, -0x1.3bd3cc9be45dep+4);
  c = Fma(c, r2, 1.0);
  double s = 0x1.aaec32af93359p-4;  // (-1)^k (2 pi)^(2k+1) / (2k+1)!, k = 8 .. 0
  s = Fma(s, r2, -0x1.6fadb9f155744p-1);
  s = Fma(s, r2, 0x1.e8f434d018d63p+1);
  s = Fma(s, r2, -0x1.e3074fde8871fp+3);
  s = Fma(s, r2, 0x1.50783487ee782p+5);
  s = Fma(s, r2, -0x1.32d2cce62bd86p+6);
  s = Fma(s, r2, 0x1.466bc6775aae2p+6);
  s = Fma(s, r2, -0x1.4abbce625be53p+5);
  s = Fma(s, r2, 0x1.921fb54442d18p+2);
  s = s * r;
  // cos(2 pi r + q pi / 2)
  switch (quarter & 3) {
    case 0: return c;
    case 1: return -s;
    case 2: return -c;
    default: return s;
  }
}

}  // namespace dp::portable
