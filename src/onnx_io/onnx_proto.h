// ONNX's protobuf classes (libonnx-dev), as the ONNX floor includes them: the
// build defines ONNX_NAMESPACE=onnx and ONNX_ML=1, as libonnx was built.
#pragma once

#include <onnx/onnx_pb.h>
