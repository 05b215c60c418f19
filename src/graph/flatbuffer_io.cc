#include "graph/flatbuffer_io.h"

#include <flatbuffers/idl.h>

#include "core/file_bytes.h"
#include "graph/json_printer.h"

namespace dp {
namespace {

// A parser that knows the schema. Parsers are not thread-safe, so each call
// builds its own; the schemas are small and this is not a hot path.
void LoadSchema(const FlatBufferFormat& format, flatbuffers::Parser& parser) {
  std::string schema(format.schema);
  if (!parser.Parse(schema.c_str()))
    DP_THROW(Code::kInternal, "built-in ", format.what, " schema failed to parse: ", parser.error_);
}

}  // namespace

namespace flatbuffer_io {

const uint8_t* CheckedBytes(const FlatBufferFormat& format, const void* data, size_t size,
                            std::vector<uint64_t>* aligned) {
  if (data == nullptr) DP_THROW(Code::kInvalidArgument, format.what, " buffer is NULL");
  if (size < 8) DP_THROW(Code::kParse, format.what, " buffer of ", size, " bytes is too short to be a FlatBuffer");
  if (size > FLATBUFFERS_MAX_BUFFER_SIZE) DP_THROW(Code::kParse, format.what, " buffer of ", size, " bytes is too large");
  // The verifier needs aligned scalars; copy unaligned buffers (rare).
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  if (reinterpret_cast<uintptr_t>(data) % alignof(uint64_t) != 0) {
    aligned->resize((size + 7) / 8);
    std::memcpy(aligned->data(), data, size);
    bytes = reinterpret_cast<const uint8_t*>(aligned->data());
  }
  if (!flatbuffers::BufferHasIdentifier(bytes, format.identifier))
    DP_THROW(Code::kParse, "not a dp ", format.what, " buffer: file identifier '", format.identifier, "' missing");
  return bytes;
}

void ThrowUnverified(const FlatBufferFormat& format, size_t size) {
  DP_THROW(Code::kParse, format.what, " buffer of ", size,
           " bytes failed FlatBuffers verification (truncated or corrupt)");
}

}  // namespace flatbuffer_io

std::string JsonToFlatBuffer(const FlatBufferFormat& format, std::string_view json) {
  flatbuffers::IDLOptions opts;
  opts.skip_unexpected_fields_in_json = false;
  flatbuffers::Parser parser(opts);
  LoadSchema(format, parser);
  std::string text(json);  // the parser wants a NUL-terminated string
  if (text.find('\0') != std::string::npos) DP_THROW(Code::kParse, format.what, " JSON contains a NUL byte");
  if (!parser.ParseJson(text.c_str())) DP_THROW(Code::kParse, format.what, " JSON: ", parser.error_);
  return std::string(reinterpret_cast<const char*>(parser.builder_.GetBufferPointer()), parser.builder_.GetSize());
}

std::string FlatBufferToJson(const FlatBufferFormat& format, const std::string& buffer, const std::string& name) {
  flatbuffers::Parser parser;
  LoadSchema(format, parser);
  try {
    return FlatBufferRootToJson(parser, buffer.data());
  } catch (Error& e) {
    throw e.Prepend(StrCat("could not print ", format.what, " '", name, "' as JSON"));
  }
}

std::string ReadFormatFile(const FlatBufferFormat& format, const std::string& path) {
  return ReadFileBytes(path, format.what);
}

}  // namespace dp
