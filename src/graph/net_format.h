// Net definitions on the wire: FlatBuffer binary (schemas/net.fbs, verified
// before use) and JSON text parsed with the same schema. Loading only parses;
// ValidateNet (net_validate.h) checks the net against the operator schemas.
#pragma once

#include <string>
#include <string_view>

#include "graph/net_def.h"

namespace dp {

NetDef NetDefFromBuffer(const void* data, size_t size);      // kParse on bad bytes
NetDef NetDefFromJson(std::string_view json);                // kParse with line:col
NetDef NetDefFromFile(const std::string& path);              // binary or JSON, by content; kIo
std::string NetDefToBuffer(const NetDef& net);               // binary FlatBuffer bytes
std::string NetDefToJson(const NetDef& net);                 // indented JSON

}  // namespace dp
