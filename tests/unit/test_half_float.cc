// core/half_float.h (and the bulk conversions of core/half_convert.h)
// against references: every binary16 and every bfloat16
// value back and forth, and floats (boundaries, then random bit patterns)
// rounded to the nearest representable value, ties to even, found in double
// (and, where the compiler has _Float16, against its conversions too).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half_convert.h"
#include "core/half_float.h"

using namespace dp;

namespace {

// The nearer of two neighbours lo < a <= hi (bit patterns down, down + 1 of
// one sign), ties to the even pattern.
uint16_t Nearer(double a, double lo, double hi, uint16_t down) {
  const uint16_t up = static_cast<uint16_t>(down + 1);
  if (a - lo < hi - a) return down;
  if (a - lo > hi - a) return up;
  return (down & 1) ? up : down;
}

// binary16 by search: the largest finite magnitude pattern at or below |f|,
// then the nearer of it and the next (65520, halfway to 2^16, and past:
// infinity).
uint16_t ReferenceHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // HalfToFloat(lo) <= a < HalfToFloat(hi + 1)
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (static_cast<double>(HalfToFloat(Half{mid})) <= a) lo = mid; else hi = static_cast<uint16_t>(mid - 1);
  }
  const double vlo = HalfToFloat(Half{lo});
  if (vlo == a) return sign | lo;
  const double vhi = lo == 0x7bff ? 65536.0 : static_cast<double>(HalfToFloat(Half{static_cast<uint16_t>(lo + 1)}));
  return sign | Nearer(a, vlo, vhi, lo);
}

// bfloat16 by rounding in double: the nearer of the two bfloat16 neighbours
// of f (ties to the even one), inf past the largest finite.
uint16_t ReferenceBf16(float f) {
  const uint32_t u = FloatBits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
  const uint16_t up = static_cast<uint16_t>(down + 1);
  const double a = std::fabs(static_cast<double>(f));
  const double lo = std::fabs(static_cast<double>(BFloat16ToFloat(BFloat16{down})));
  if (lo == a) return down;
  // Past the largest finite the next step is 2^128: halfway to it rounds to infinity.
  const double hi = (up & 0x7fff) == 0x7f80 ? std::ldexp(1.0, 128)
                                            : std::fabs(static_cast<double>(BFloat16ToFloat(BFloat16{up})));
  return Nearer(a, lo, hi, down);
}

[[maybe_unused]] bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || FloatBits(a) == FloatBits(b); }

}  // namespace

TEST_CASE("half floats: every binary16 and bfloat16 value goes to float and back unchanged") {
  int wrong_half = 0, wrong_bf16 = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = HalfToFloat(Half{bits});
#ifdef __FLT16_MAX__
    _Float16 h;
    std::memcpy(&h, &bits, sizeof h);
    if (!SameFloat(f, static_cast<float>(h))) ++wrong_half;
#endif
    const bool nan = ((bits >> 10) & 0x1f) == 0x1f && (bits & 0x3ff) != 0;
    if (!nan && FloatToHalf(f).bits != bits) ++wrong_half;
    if (nan && !std::isnan(HalfToFloat(FloatToHalf(f)))) ++wrong_half;
    const float g = BFloat16ToFloat(BFloat16{bits});
    if (!std::isnan(g) && FloatToBFloat16(g).bits != bits) ++wrong_bf16;
    if (std::isnan(g) && !std::isnan(BFloat16ToFloat(FloatToBFloat16(g)))) ++wrong_bf16;
  }
  CHECK(wrong_half == 0);
  CHECK(wrong_bf16 == 0);
}

TEST_CASE("half floats: floats round to nearest even, as the compiler's _Float16 and rounding in double do") {
  std::vector<float> cases = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e10f,
                              std::ldexp(1.0f, -14), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                              std::ldexp(1.5f, -25), std::ldexp(1.0f, -26), std::ldexp(3.0f, -25),
                              INFINITY, -INFINITY, 3.3895314e38f, 3.4028235e38f, 1.0009765625f, 1.00048828125f};
  // Every tie and its neighbours around binary16's and bfloat16's roundings.
  for (int e = -30; e < 17; ++e)
    for (uint32_t m = 0; m < 64; ++m) {
      const float base = std::ldexp(1.0f + static_cast<float>(m) / 64.0f, e);
      for (float f : {base, std::nextafter(base, 0.0f), std::nextafter(base, INFINITY)}) {
        cases.push_back(f);
        cases.push_back(-f);
      }
    }
  std::mt19937 gen(20261202);
  for (int i = 0; i < 2000000; ++i) cases.push_back(BitsFloat(gen()));
  int wrong_half = 0, wrong_bf16 = 0;
  float example = 0;
  for (float f : cases) {
    if (std::isnan(f)) {
      wrong_half += std::isnan(HalfToFloat(FloatToHalf(f))) ? 0 : 1;
      wrong_bf16 += std::isnan(BFloat16ToFloat(FloatToBFloat16(f))) ? 0 : 1;
      continue;
    }
    if (FloatToHalf(f).bits != ReferenceHalf(f) && wrong_half++ == 0) example = f;
#ifdef __FLT16_MAX__
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &h, sizeof bits);
    if (FloatToHalf(f).bits != bits && wrong_half++ == 0) example = f;
#endif
    if (FloatToBFloat16(f).bits != ReferenceBf16(f)) ++wrong_bf16;
  }
  CHECK_MESSAGE(wrong_half == 0, "e.g. ", example, " (bits ", FloatBits(example), ")");
  CHECK(wrong_bf16 == 0);
  CHECK(FloatToHalf(65520.0f).bits == 0x7c00);        // past 65504: infinity
  CHECK(FloatToHalf(std::ldexp(1.0f, -25)).bits == 0);  // the tie below the smallest subnormal: even, zero
  CHECK(FromFloat<BFloat16>(1.0f).bits == 0x3f80);
  CHECK(ToFloat(FromFloat<Half>(0.5f)) == 0.5f);
}

// Every path of the bulk conversions: the one dispatched, the portable one
// (SSE2 on x86-64), and F16C's where the CPU has it.
struct BulkPath {
  const char* name;
  void (*to_floats)(const Half*, float*, int64_t);
  void (*to_halves)(const float*, Half*, int64_t);
};
std::vector<BulkPath> BulkPaths() {
  std::vector<BulkPath> paths = {{"dispatched", &HalvesToFloats, &FloatsToHalves},
                                 {"portable", &half_convert::HalvesToFloatsPortable,
                                  &half_convert::FloatsToHalvesPortable}};
  if (half_convert::F16cAvailable())
    paths.push_back({"f16c", &half_convert::HalvesToFloatsF16c, &half_convert::FloatsToHalvesF16c});
  else
    MESSAGE("no F16C on this CPU: its path is not checked");
  return paths;
}

// The floats that become binary16 subnormals or the smallest normals (|f| in
// [2^-26, 2^-13]: one bit pattern in 29, every tie (k + 1/2) 2^-24 and its
// float neighbours; both signs) against the rounding rule, by the scalar
// function and the bulk one (which rounds them by a float addition), and
// the halves of the same range back.
TEST_CASE("half floats: the subnormal range, densely, scalar and bulk") {
  int wrong = 0;
  float example = 0;
  const uint32_t lo = FloatBits(std::ldexp(1.0f, -26)), hi = FloatBits(std::ldexp(1.0f, -13));
  std::vector<float> fs;
  for (uint32_t u = lo; u <= hi; u += 29) fs.push_back(BitsFloat(u));
  for (int k = 0; k < 2048; ++k) {
    const float tie = std::ldexp(static_cast<float>(k) + 0.5f, -24);
    for (float f : {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 1.0f)}) fs.push_back(f);
  }
  std::vector<Half> hs(fs.size()), bulk(fs.size());
  for (size_t i = 0; i < fs.size(); ++i) hs[i] = FloatToHalf(fs[i]);
  for (const BulkPath& path : BulkPaths()) {
    path.to_halves(fs.data(), bulk.data(), static_cast<int64_t>(fs.size()));
    for (size_t i = 0; i < fs.size(); ++i)
      if (bulk[i].bits != hs[i].bits && wrong++ == 0) example = fs[i];
  }
  for (size_t i = 0; i < fs.size(); ++i) {
    // The reference's search is slow: the rounding is checked against the two
    // neighbours of the result instead (nearest, ties to even), which is the
    // same property.
    const double a = fs[i];
    const uint16_t h = hs[i].bits;
    const double v = HalfToFloat(hs[i]);
    const double below = h == 0 ? -1.0 : static_cast<double>(HalfToFloat(Half{static_cast<uint16_t>(h - 1)}));
    const double above = HalfToFloat(Half{static_cast<uint16_t>(h + 1)});
    bool ok = std::fabs(v - a) <= std::fabs(below - a) && std::fabs(v - a) <= std::fabs(above - a);
    if (ok && (std::fabs(v - a) == std::fabs(below - a) || std::fabs(v - a) == std::fabs(above - a)))
      ok = (h & 1) == 0;  // a tie: the even one
    ok = ok && FloatToHalf(-fs[i]).bits == (h | 0x8000);
    if (!ok && wrong++ == 0) example = fs[i];
  }
  CHECK_MESSAGE(wrong == 0, "e.g. ", example, " (bits ", FloatBits(example), ")");
  std::vector<Half> small(0x800);
  std::vector<float> back(0x800);
  for (uint32_t b = 0; b < 0x800; ++b) small[b] = Half{static_cast<uint16_t>(b)};
  for (const BulkPath& path : BulkPaths()) {
    CAPTURE(path.name);
    path.to_floats(small.data(), back.data(), 0x800);
    for (uint32_t b = 0; b < 0x800; ++b) {
      const double want = b < 0x400 ? std::ldexp(static_cast<double>(b), -24)
                                    : std::ldexp(1.0 + static_cast<double>(b - 0x400) / 1024.0, -14);
      CHECK(back[b] == want);
      CHECK(HalfToFloat(small[b]) == want);
    }
  }
}

// The bulk conversions give the scalar functions' bits: every binary16, and
// floats of every kind (the boundaries, ties, NaNs of any payload,
// infinities, random patterns), at every alignment and with tails shorter
// than a vector, on every path.
TEST_CASE("half floats: the bulk conversions give the scalar functions' bits") {
  for (const BulkPath& path : BulkPaths()) {
    CAPTURE(path.name);
    std::vector<Half> all(65536);
    for (uint32_t b = 0; b < 65536; ++b) all[b] = Half{static_cast<uint16_t>(b)};
    std::vector<float> f(all.size() + 1);
    int wrong = 0;
    for (size_t skip : {0, 1, 3}) {
      path.to_floats(all.data() + skip, f.data(), static_cast<int64_t>(all.size() - skip));
      for (size_t b = skip; b < all.size(); ++b) wrong += FloatBits(f[b - skip]) != FloatBits(HalfToFloat(all[b]));
    }
    CHECK(wrong == 0);
    std::vector<float> fs = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e10f, INFINITY, -INFINITY,
                             std::ldexp(1.0f, -14), std::nextafter(std::ldexp(1.0f, -14), 0.0f),
                             std::ldexp(1.0f, -25), std::nextafter(std::ldexp(1.0f, -25), 1.0f),
                             std::ldexp(1.0f, -130), BitsFloat(0x7f800001u), BitsFloat(0xffc00000u),
                             BitsFloat(0x7fbfffffu), BitsFloat(0x477fefffu), BitsFloat(0x477ff000u)};
    for (int e = -30; e < 17; ++e)
      for (uint32_t m = 0; m < 64; ++m) {
        const float base = std::ldexp(1.0f + static_cast<float>(m) / 64.0f, e);
        for (float x : {base, std::nextafter(base, 0.0f), std::nextafter(base, INFINITY)}) {
          fs.push_back(x);
          fs.push_back(-x);
        }
      }
    std::mt19937 gen(20261206);
    for (int i = 0; i < 200000; ++i) fs.push_back(BitsFloat(gen()));
    std::vector<Half> hs(fs.size());
    wrong = 0;
    float example = 0;
    for (size_t skip : {0, 1, 5}) {
      path.to_halves(fs.data() + skip, hs.data(), static_cast<int64_t>(fs.size() - skip));
      for (size_t i = skip; i < fs.size(); ++i)
        if (hs[i - skip].bits != FloatToHalf(fs[i]).bits && wrong++ == 0) example = fs[i];
    }
    CHECK_MESSAGE(wrong == 0, "e.g. bits ", FloatBits(example));
  }
}
