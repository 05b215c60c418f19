#include "core/half_convert.h"

#include "core/half_float.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define DP_HALF_CONVERT_F16C 1
#endif

namespace dp {
namespace {

#if defined(__SSE2__)
// (mask & a) | (~mask & b), lane by lane.
inline __m128i Select(__m128i mask, __m128i a, __m128i b) {
  return _mm_or_si128(_mm_and_si128(mask, a), _mm_andnot_si128(mask, b));
}

// Four halves (the low 16 bits of each lane) to four floats' bits.
inline __m128i HalfToFloat4(__m128i h) {
  const __m128i sign = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16);
  const __m128i exponent = _mm_and_si128(_mm_srli_epi32(h, 10), _mm_set1_epi32(0x1f));
  const __m128i significand = _mm_and_si128(h, _mm_set1_epi32(0x3ff));
  const __m128i shifted = _mm_slli_epi32(significand, 13);
  const __m128i normal = _mm_or_si128(_mm_slli_epi32(_mm_add_epi32(exponent, _mm_set1_epi32(112)), 23), shifted);
  const __m128i special = _mm_or_si128(_mm_set1_epi32(0x7f800000), shifted);  // inf, NaN
  // Zero or subnormal: significand * 2^-24, exact in float.
  const __m128i subnormal =
      _mm_castps_si128(_mm_mul_ps(_mm_cvtepi32_ps(significand), _mm_set1_ps(1.0f / 16777216.0f)));
  __m128i magnitude = Select(_mm_cmpeq_epi32(exponent, _mm_set1_epi32(0x1f)), special, normal);
  magnitude = Select(_mm_cmpeq_epi32(exponent, _mm_setzero_si128()), subnormal, magnitude);
  return _mm_or_si128(sign, magnitude);
}

// Four floats' bits to four halves (in the low 16 bits of each lane).
inline __m128i FloatToHalf4(__m128i u) {
  const __m128i sign = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(0x8000));
  const __m128i a = _mm_and_si128(u, _mm_set1_epi32(0x7fffffff));  // non-negative: signed compares work
  // A normal binary16 (>= 2^-14): drop 13 significand bits, to nearest
  // even, rebias 127 -> 15.
  const __m128i odd = _mm_and_si128(_mm_srli_epi32(a, 13), _mm_set1_epi32(1));
  const __m128i normal = _mm_srli_epi32(
      _mm_add_epi32(_mm_sub_epi32(a, _mm_set1_epi32(0x38000000)), _mm_add_epi32(_mm_set1_epi32(0xfff), odd)), 13);
  // Below 2^-14: |f| + 0.5 lies where floats are 2^-24 apart, the smallest
  // subnormal, so the addition rounds |f| to a multiple of it, to nearest
  // even (as the scalar function's shifts do); what it added to 0.5's bits
  // is the subnormal. The sum is a normal float: flush-to-zero modes leave
  // it alone, and an input they treat as zero rounds to zero anyway.
  const __m128i subnormal = _mm_sub_epi32(
      _mm_castps_si128(_mm_add_ps(_mm_castsi128_ps(a), _mm_set1_ps(0.5f))), _mm_set1_epi32(0x3f000000));
  __m128i h = Select(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x387fffff)), normal, subnormal);
  h = Select(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x477fefff)), _mm_set1_epi32(0x7c00), h);  // past 65504: inf
  h = Select(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x7f800000)), _mm_set1_epi32(0x7e00), h);  // NaN
  return _mm_or_si128(sign, h);
}
#endif

}  // namespace

namespace half_convert {

void HalvesToFloatsPortable(const Half* in, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), HalfToFloat4(_mm_unpacklo_epi16(h, _mm_setzero_si128())));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 4),
                     HalfToFloat4(_mm_unpackhi_epi16(h, _mm_setzero_si128())));
  }
#endif
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

void FloatsToHalvesPortable(const float* in, Half* out, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 8 <= n; i += 8) {
    // Each lane's half sign-extended to 32 bits, so that the signed
    // saturating pack keeps its 16 bits exactly.
    const __m128i lo = _mm_srai_epi32(
        _mm_slli_epi32(FloatToHalf4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))), 16), 16);
    const __m128i hi = _mm_srai_epi32(
        _mm_slli_epi32(FloatToHalf4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 4))), 16), 16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_packs_epi32(lo, hi));
  }
#endif
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

#if defined(DP_HALF_CONVERT_F16C)
bool F16cAvailable() {
  // AVX2 (which also says the OS saves the AVX registers) and F16C (CPUID
  // leaf 1, ECX; clang's __builtin_cpu_supports does not know "f16c").
  static const bool available = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return available;
}

// Eight at a time with the conversion instructions, which give the scalar
// functions' bits for every number (round to nearest even; subnormals
// exact; DAZ would only zero floats that round to zero anyway) but not for
// NaNs: they set a NaN half's quiet bit and keep a NaN float's payload. Those
// lanes take HalfToFloat's / FloatToHalf's NaNs instead.
__attribute__((target("avx2,f16c"))) void HalvesToFloatsF16c(const Half* in, float* out, int64_t n) {
  int64_t i = 0;
  const __m256i exponent = _mm256_set1_epi32(0x7c00), significand = _mm256_set1_epi32(0x3ff);
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m256 f = _mm256_cvtph_ps(h);
    const __m256i w = _mm256_cvtepu16_epi32(h);
    const __m256i sig = _mm256_and_si256(w, significand);
    const __m256i nan = _mm256_andnot_si256(_mm256_cmpeq_epi32(sig, _mm256_setzero_si256()),
                                            _mm256_cmpeq_epi32(_mm256_and_si256(w, exponent), exponent));
    const __m256i bits = _mm256_or_si256(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                        _mm256_set1_epi32(0x7f800000)),
        _mm256_slli_epi32(sig, 13));
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan)));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

__attribute__((target("avx2,f16c"))) void FloatsToHalvesF16c(const float* in, Half* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_loadu_ps(in + i);
    const __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i u = _mm256_castps_si256(f);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)),
                                          _mm256_set1_epi32(0x7e00));
    // Both to eight 16-bit lanes: the packs work within 128-bit halves, so
    // the 64-bit quarters are put back in order.
    const __m256i packed = _mm256_permute4x64_epi64(
        _mm256_packs_epi32(_mm256_srai_epi32(_mm256_slli_epi32(quiet, 16), 16), nan), 0xd8);
    const __m128i quiet16 = _mm256_castsi256_si128(packed), nan16 = _mm256_extracti128_si256(packed, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_blendv_epi8(h, quiet16, nan16));
  }
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}
#else
bool F16cAvailable() { return false; }
void HalvesToFloatsF16c(const Half* in, float* out, int64_t n) { HalvesToFloatsPortable(in, out, n); }
void FloatsToHalvesF16c(const float* in, Half* out, int64_t n) { FloatsToHalvesPortable(in, out, n); }
#endif

}  // namespace half_convert

void HalvesToFloats(const Half* in, float* out, int64_t n) {
  if (half_convert::F16cAvailable())
    half_convert::HalvesToFloatsF16c(in, out, n);
  else
    half_convert::HalvesToFloatsPortable(in, out, n);
}

void FloatsToHalves(const float* in, Half* out, int64_t n) {
  if (half_convert::F16cAvailable())
    half_convert::FloatsToHalvesF16c(in, out, n);
  else
    half_convert::FloatsToHalvesPortable(in, out, n);
}

}  // namespace dp
