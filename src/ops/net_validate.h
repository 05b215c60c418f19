// Load-time checks of a net against the operator schemas, and static shape
// inference. Each failure is a kInvalidNet error naming the op index, op type
// and the blob concerned.
#pragma once

#include <map>
#include <string>

#include "graph/net_def.h"
#include "ops/op_schema.h"

namespace dp {

// Unknown op types, arity, in-place rules, required arguments, inputs that are
// neither fed nor produced, ops that read what only a later op writes
// (cycles), external outputs nobody writes. Nested nets are checked too.
void ValidateNet(const NetDef& net);

// Shapes and dtypes of every blob the net writes, given those of its inputs.
// Blobs whose shapes cannot be known stay unknown; contradictions throw.
std::map<std::string, TensorInfo> InferNetShapes(const NetDef& net, std::map<std::string, TensorInfo> known);

}  // namespace dp
