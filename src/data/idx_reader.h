// IDX files (the MNIST format), gzip-compressed or plain.
//
// Layout: two zero bytes, a type code, the number of dims (1 byte), the dims
// as big-endian uint32, then the elements, big-endian, row-major:
//   0x08 uint8   -> DType::kUInt8
//   0x09 int8    -> DType::kInt32 (widened)
//   0x0B int16   -> DType::kInt32 (widened)
//   0x0C int32   -> DType::kInt32
//   0x0D float32 -> DType::kFloat32
//   0x0E float64 -> DType::kFloat64
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace dp {

// Largest tensor ReadIdx creates (bytes after widening): 4 GiB.
inline constexpr uint64_t kMaxIdxBytes = uint64_t{4} << 30;

// Reads an IDX file into a new CPU tensor of the file's dims. Compression is
// detected from the contents (zlib's gzread reads plain files unchanged).
// Memory follows the file's real size, whatever its header claims: a plain
// file's size is checked against the header before the tensor is allocated;
// gzip data (and data from a pipe) is buffered in chunks as it arrives, and
// the tensor is allocated once half of the announced data is there.
// Errors are dp::Error whose message names the file:
//   kNotFound  the file does not exist;
//   kIo        it cannot be opened or read (permissions, a directory, I/O);
//   kParse     bad header: too short, bad magic, unknown type code, zero
//              dims, a size that overflows or exceeds kMaxIdxBytes, or bytes
//              left over after the data;
//   kDataLoss  the data is truncated, or the gzip stream is corrupt or cut.
Tensor ReadIdx(const std::string& path);

}  // namespace dp
