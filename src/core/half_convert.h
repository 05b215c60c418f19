// Bulk conversions between float32 and binary16 (Half): bit for bit
// HalfToFloat / FloatToHalf of core/half_float.h (round to nearest even;
// NaN to the quiet NaN of its sign), several at a time. The scalar
// functions' branches keep compilers from vectorising loops of them
// (bfloat16's conversions vectorise as they are), and the compressed
// gradient collectives convert every element of a bucket: on x86-64 these
// run four floats at a time with SSE2, elsewhere the scalar loop. Under the
// default rounding mode (round to nearest), which dp never changes.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace dp {

void HalvesToFloats(const Half* in, float* out, int64_t n);
void FloatsToHalves(const float* in, Half* out, int64_t n);

}  // namespace dp
