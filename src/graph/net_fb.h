// Conversion between the in-memory NetDef and its generated FlatBuffers
// tables, for other formats that embed nets (schemas/model.fbs). Internal:
// includes generated code.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "graph/net_def.h"
#include "net_generated.h"

namespace dp {

// Text from a verified buffer: the verifier checked its bounds, not its
// encoding. kParse unless UTF-8 without NUL bytes (names cross the C API as C
// strings and are printed as JSON); `where` and `what` name it ("net 'x' op
// 3 (FC)", "input 1"). A missing string is empty.
std::string TextFromFb(const flatbuffers::String* s, const std::string& where, const char* what);
std::vector<std::string> TextsFromFb(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v,
                                     const std::string& where, const char* what);

// What a double is written as: every NaN becomes the quiet NaN that JSON's
// `nan` reads back as (JSON has no NaN payloads or signs), so that what dp
// writes goes binary -> JSON -> binary to the same bytes.
inline double WrittenDouble(double v) { return std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : v; }

// `where` prefixes error messages ("model: forward_net").
NetDef NetDefFromFb(const fb::NetDef& net, const std::string& where);
flatbuffers::Offset<fb::NetDef> NetDefToFb(flatbuffers::FlatBufferBuilder& builder, const NetDef& net);

}  // namespace dp
