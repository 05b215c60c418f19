// A build without ONNX (-Donnx=disabled, or libonnx-dev absent): the same
// functions, each saying what is missing.
#include "onnx_io/onnx_model.h"

namespace dp {
namespace {

[[noreturn]] void NotBuilt(const char* what) {
  DP_THROW(Code::kUnimplemented, what, ": this dp was built without ONNX (the Meson feature 'onnx', which needs "
           "libonnx-dev and libprotobuf-dev)");
}

}  // namespace

ModelDef ModelFromOnnx(std::string_view, const OnnxImportOptions&) { NotBuilt("ONNX import"); }
ModelDef ModelFromOnnxFile(const std::string&, const OnnxImportOptions&) { NotBuilt("ONNX import"); }
std::string ModelToOnnx(const ModelDef&, const Workspace&, const OnnxExportOptions&) { NotBuilt("ONNX export"); }
bool OnnxBuilt() { return false; }
const char* OnnxLibraryVersion() { return ""; }

}  // namespace dp
