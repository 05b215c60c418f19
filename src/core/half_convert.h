// Bulk conversions between float32 and binary16 (Half): bit for bit
// HalfToFloat / FloatToHalf of core/half_float.h (round to nearest even;
// NaN to the quiet NaN of its sign), several at a time. The scalar
// functions' branches keep compilers from vectorising loops of them
// (bfloat16's conversions vectorise as they are), and the compressed
// gradient collectives convert every element of a bucket: on x86-64 these
// run eight at a time with F16C's conversion instructions where the CPU has
// them (AVX2 and F16C, checked at run time; NaNs fixed up to the scalar
// functions' bits), else four at a time with SSE2; elsewhere the scalar
// loop. Under the default rounding mode (round to nearest), which dp never
// changes.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace dp {

void HalvesToFloats(const Half* in, float* out, int64_t n);
void FloatsToHalves(const float* in, Half* out, int64_t n);

// The paths behind them, for the tests: the portable one (SSE2 on x86-64,
// else scalar), and F16C's where F16cAvailable().
namespace half_convert {
void HalvesToFloatsPortable(const Half* in, float* out, int64_t n);
void FloatsToHalvesPortable(const float* in, Half* out, int64_t n);
bool F16cAvailable();
void HalvesToFloatsF16c(const Half* in, float* out, int64_t n);  // only where F16cAvailable()
void FloatsToHalvesF16c(const float* in, Half* out, int64_t n);
}  // namespace half_convert

}  // namespace dp
