// FlatBuffer → JSON text that reads back to the same values. FlatBuffers'
// own printer (GenerateText, 2.0.x) writes doubles with 12 fixed decimals
// and floats with 6, so small values come back rounded or as 0; this one
// prints the same text (strict JSON, 2-space indent, enum names, fields in
// schema order, only those present) except that floating-point values are
// written in their shortest form that reads back bit for bit (std::to_chars),
// with infinities as inf / -inf and every NaN as nan, the tokens FlatBuffers'
// JSON parser reads. Internal: includes FlatBuffers' parser.
#pragma once

#include <string>

#include <flatbuffers/idl.h>

namespace dp {

// Prints the root table of `buffer` (a verified buffer of the parser's root
// type). Throws kInternal for schema features dp's formats do not use
// (structs, unions, fixed arrays, nested or flex buffers).
std::string FlatBufferRootToJson(const flatbuffers::Parser& parser, const void* buffer);

// A floating-point value as FlatBuffers' JSON parser reads it back exactly:
// the shortest digits that do, plainly written for 1e-6 <= |value| < 1e21
// ("0.1", "-0.0", "1000000.0": a ".0" marks a whole number as real) and with
// an exponent otherwise ("1e-13", "1.2345678901234e-07", "1e+300"), and
// "inf", "-inf", "nan" (a NaN's sign and payload are not kept).
void AppendExactFloat(std::string& out, double value);
void AppendExactFloat(std::string& out, float value);

}  // namespace dp
