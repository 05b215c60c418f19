// What the FlatBuffer formats (nets: graph/net_format.cc, models:
// model/model_format.cc) share: checking and verifying a binary buffer,
// JSON through the schema text, and loading a file of either by content.
// A FlatBufferFormat names the format; every message is written here once.
// Internal: includes FlatBuffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "core/error.h"

namespace dp {

struct FlatBufferFormat {
  const char* what;         // "net", "model": starts the messages ("net buffer of 3 bytes ...")
  const char* identifier;   // the file identifier ("DPNT")
  std::string_view schema;  // the schema text (schemas/*.fbs), for JSON
};

namespace flatbuffer_io {

// The checks before verification: kInvalidArgument on NULL, kParse on a size
// out of bounds or a missing identifier. Returns the bytes, 8-byte aligned
// for the verifier: `data` itself, or a copy in *aligned (rare).
const uint8_t* CheckedBytes(const FlatBufferFormat& format, const void* data, size_t size,
                            std::vector<uint64_t>* aligned);

[[noreturn]] void ThrowUnverified(const FlatBufferFormat& format, size_t size);

}  // namespace flatbuffer_io

// The elements of a scalar vector, copied bytewise. The verifier checks a
// vector's length field but not that 8-byte elements are 8-aligned: a
// hostile (still valid) buffer may place them at 4 mod 8, and reading them
// through Vector<T>'s accessors would be undefined behaviour.
template <typename T>
std::vector<T> ScalarsBytewise(const flatbuffers::Vector<T>& v) {
  std::vector<T> out(v.size());
  if (!out.empty()) std::memcpy(out.data(), v.Data(), out.size() * sizeof(T));
  for (T& x : out) x = flatbuffers::EndianScalar(x);
  return out;
}

// The root table of a buffer in `format`, checked and verified (kParse when
// not); *aligned holds the copy it may need, so it must outlive the root.
template <typename Root>
const Root& VerifiedRoot(const FlatBufferFormat& format, const void* data, size_t size,
                         std::vector<uint64_t>* aligned) {
  const uint8_t* bytes = flatbuffer_io::CheckedBytes(format, data, size, aligned);
  flatbuffers::Verifier verifier(bytes, size, /*max_depth=*/64, /*max_tables=*/10000000);
  if (!verifier.VerifyBuffer<Root>(format.identifier)) flatbuffer_io::ThrowUnverified(format, size);
  return *flatbuffers::GetRoot<Root>(bytes);
}

// JSON text parsed with the format's schema into FlatBuffer bytes (kParse
// with the parser's line:col).
std::string JsonToFlatBuffer(const FlatBufferFormat& format, std::string_view json);

// A buffer built by this dp printed as indented JSON whose numbers read back
// bit for bit (graph/json_printer.h); `name` names it in the kInternal error.
std::string FlatBufferToJson(const FlatBufferFormat& format, const std::string& buffer, const std::string& name);

// A whole file's bytes (kIo; kNotFound when it does not exist).
std::string ReadFormatFile(const FlatBufferFormat& format, const std::string& path);

// Loads a file in either form, by content: from_buffer(data, size) when it
// starts as a buffer with the identifier, else from_json(text). Errors are
// prefixed with the file.
template <typename FromBuffer, typename FromJson>
auto LoadFormatFile(const FlatBufferFormat& format, const std::string& path, FromBuffer&& from_buffer,
                    FromJson&& from_json) {
  std::string bytes = ReadFormatFile(format, path);
  try {
    if (bytes.size() >= 8 && flatbuffers::BufferHasIdentifier(bytes.data(), format.identifier))
      return from_buffer(bytes.data(), bytes.size());
    return from_json(bytes);
  } catch (Error& e) {
    throw e.Prepend(StrCat("file '", path, "'"));
  }
}

}  // namespace dp
