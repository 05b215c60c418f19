// Conversion between the in-memory NetDef and its generated FlatBuffers
// tables, for other formats that embed nets (schemas/model.fbs). Internal:
// includes generated code.
#pragma once

#include <string>

#include <flatbuffers/flatbuffers.h>

#include "graph/net_def.h"
#include "net_generated.h"

namespace dp {

// `where` prefixes error messages ("model: forward_net").
NetDef NetDefFromFb(const fb::NetDef& net, const std::string& where);
flatbuffers::Offset<fb::NetDef> NetDefToFb(flatbuffers::FlatBufferBuilder& builder, const NetDef& net);

}  // namespace dp
