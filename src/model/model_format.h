// Model definitions on the wire: FlatBuffer binary (schemas/model.fbs,
// identifier "DPMD", verified) and JSON parsed with the same schema. Every
// loader completes and validates the model (model_def.h).
#pragma once

#include <string>
#include <string_view>

#include "model/model_def.h"

namespace dp {

ModelDef ModelFromBuffer(const void* data, size_t size);
ModelDef ModelFromJson(std::string_view json);
ModelDef ModelFromFile(const std::string& path);  // binary or JSON by content
std::string ModelToBuffer(const ModelDef& model);
std::string ModelToJson(const ModelDef& model);

}  // namespace dp
