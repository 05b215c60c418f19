// IDX reader: zlib's gz* functions read gzip and plain files alike.
#include "data/idx_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace dp {
namespace {

struct TypeInfo {
  uint8_t code;
  const char* name;
  size_t file_size;  // bytes per element in the file
  DType dtype;       // element type of the tensor
};

constexpr TypeInfo kTypes[] = {
    {0x08, "uint8", 1, DType::kUInt8},     {0x09, "int8", 1, DType::kInt32},
    {0x0B, "int16", 2, DType::kInt32},     {0x0C, "int32", 4, DType::kInt32},
    {0x0D, "float32", 4, DType::kFloat32}, {0x0E, "float64", 8, DType::kFloat64},
};

constexpr int kMaxDims = 64;                      // as the C API's tensors
constexpr unsigned kChunk = 1u << 24;             // bytes per gzread call
constexpr size_t kWidenChunkElems = size_t{1} << 20;
// Data whose size the file cannot vouch for (gzip, pipes) is buffered in
// chunks as it arrives: the first of kFirstStreamChunk bytes, each next one
// twice as large up to kStreamChunk (powers of two, so every chunk holds
// whole elements).
constexpr size_t kFirstStreamChunk = size_t{1} << 16;
constexpr size_t kStreamChunk = size_t{1} << 20;

// Owns a gzFile; closes it on every path.
class GzReader {
 public:
  GzReader(const std::string& path, gzFile f) : path_(path), f_(f) {}
  ~GzReader() {
    if (f_) gzclose_r(f_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end
  // of the data). Read errors and corrupt gzip streams throw.
  size_t Read(void* dst, size_t n, const char* what) {
    auto* p = static_cast<unsigned char*>(dst);
    size_t got = 0;
    while (got < n) {
      unsigned want = static_cast<unsigned>(std::min<size_t>(n - got, kChunk));
      int r = gzread(f_, p + got, want);
      if (r < 0) Fail(what);
      if (r == 0) {
        CheckStreamEnd(what);
        break;
      }
      got += static_cast<size_t>(r);
    }
    return got;
  }

  bool direct() const { return gzdirect(f_) != 0; }

  // A read returned 0: fine at a clean end of file, an error otherwise.
  void CheckStreamEnd(const char* what) {
    int err = Z_OK;
    gzerror(f_, &err);
    if (err != Z_OK) Fail(what);
  }

  // Closes the file, reporting a gzip stream that ended early.
  void Close(const char* what) {
    gzFile f = f_;
    f_ = nullptr;
    int r = gzclose_r(f);
    if (r == Z_BUF_ERROR)
      DP_THROW(Code::kDataLoss, "IDX file '", path_, "': the gzip stream is truncated (after ", what, ")");
    if (r == Z_ERRNO) DP_THROW(Code::kIo, "IDX file '", path_, "': closing failed: ", std::strerror(errno));
    if (r != Z_OK) DP_THROW(Code::kDataLoss, "IDX file '", path_, "': gzip error ", r, " on close");
  }

 private:
  [[noreturn]] void Fail(const char* what) {
    int err = Z_OK;
    const char* msg = gzerror(f_, &err);
    std::string m = msg ? msg : "";
    switch (err) {
      case Z_ERRNO:
        DP_THROW(Code::kIo, "IDX file '", path_, "': reading the ", what, " failed: ", std::strerror(errno));
      case Z_MEM_ERROR:
        DP_THROW(Code::kOutOfMemory, "IDX file '", path_, "': out of memory while decompressing the ", what);
      case Z_BUF_ERROR:
        DP_THROW(Code::kDataLoss, "IDX file '", path_, "': the gzip stream is truncated (", m, ") in the ", what);
      default:
        DP_THROW(Code::kDataLoss, "IDX file '", path_, "': corrupt gzip stream (", m, ") in the ", what);
    }
  }

  std::string path_;
  gzFile f_;
};

// Opens the file; *st receives its stat.
GzReader Open(const std::string& path, struct stat* st_out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      DP_THROW(Code::kNotFound, "IDX file '", path, "' not found: ", std::strerror(e));
    DP_THROW(Code::kIo, "IDX file '", path, "' cannot be opened: ", std::strerror(e));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    DP_THROW(Code::kIo, "IDX file '", path, "': stat failed: ", std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    DP_THROW(Code::kIo, "IDX file '", path, "' is a directory");
  }
  *st_out = st;
  errno = 0;
  gzFile f = gzdopen(fd, "rb");
  if (f == nullptr) {
    int e = errno;
    ::close(fd);
    if (e == 0) DP_THROW(Code::kOutOfMemory, "IDX file '", path, "': out of memory opening it");
    DP_THROW(Code::kIo, "IDX file '", path, "' cannot be opened: ", std::strerror(e));
  }
  gzbuffer(f, 1u << 18);
  return GzReader(path, f);
}

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Converts n big-endian elements of `size` bytes in place to host order.
void SwapInPlace(void* data, size_t n, size_t size) {
  if constexpr (std::endian::native == std::endian::big) return;
  auto* b = static_cast<unsigned char*>(data);
  if (size == 4) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t v;
      std::memcpy(&v, b + 4 * i, 4);
      v = __builtin_bswap32(v);
      std::memcpy(b + 4 * i, &v, 4);
    }
  } else if (size == 8) {
    for (size_t i = 0; i < n; ++i) {
      uint64_t v;
      std::memcpy(&v, b + 8 * i, 8);
      v = __builtin_bswap64(v);
      std::memcpy(b + 8 * i, &v, 8);
    }
  }
}

[[noreturn]] void Truncated(const std::string& path, uint64_t want, uint64_t got) {
  DP_THROW(Code::kDataLoss, "IDX file '", path, "': the data is truncated: the header announces ", want,
           " bytes but only ", got, " follow");
}

// Widens n int8 / big-endian int16 elements to int32.
void Widen(const TypeInfo& type, const unsigned char* src, size_t n, int32_t* out) {
  if (type.file_size == 1) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<int8_t>(src[i]);
  } else {
    for (size_t i = 0; i < n; ++i)
      out[i] = static_cast<int16_t>(static_cast<uint16_t>((src[2 * i] << 8) | src[2 * i + 1]));
  }
}

// Stores n elements in file layout at src as elements [first, first + n) of
// the tensor's data.
void Store(const TypeInfo& type, const unsigned char* src, size_t n, void* data, uint64_t first) {
  const size_t out_size = DTypeSize(type.dtype);
  auto* dst = static_cast<unsigned char*>(data) + first * out_size;
  if (type.file_size == out_size) {
    std::memcpy(dst, src, n * out_size);
    SwapInPlace(dst, n, out_size);
  } else {
    Widen(type, src, n, reinterpret_cast<int32_t*>(dst));
  }
}

// Memory for the file's data: a tensor, or a chunk of the streamed data.
// Sizes that do not fit are parse errors; a failed allocation is out of
// memory, naming the file.
Tensor NewTensor(const std::string& path, const Dims& dims, DType dtype) {
  try {
    return Tensor(dims, dtype);
  } catch (Error& e) {
    if (e.code() == Code::kShape) DP_THROW(Code::kParse, "IDX file '", path, "': ", e.message());
    throw e.Prepend(StrCat("IDX file '", path, "'"));
  }
}

std::shared_ptr<Storage> NewChunk(const std::string& path, size_t nbytes) {
  try {
    return Storage::Allocate({}, nbytes);
  } catch (Error& e) {
    throw e.Prepend(StrCat("IDX file '", path, "'"));
  }
}

// Reads elements [first, numel) of the data straight into the tensor.
void ReadRest(GzReader& in, const std::string& path, const TypeInfo& type, Tensor& t, uint64_t first,
              uint64_t numel) {
  if (first >= numel) return;
  const uint64_t file_bytes = numel * type.file_size;
  const size_t out_size = DTypeSize(type.dtype);
  if (type.file_size == out_size) {
    auto* dst = static_cast<unsigned char*>(t.raw_mutable_data()) + first * out_size;
    const uint64_t want = (numel - first) * type.file_size;
    const size_t got = in.Read(dst, want, "data");
    if (got < want) Truncated(path, file_bytes, first * type.file_size + got);
    SwapInPlace(dst, numel - first, out_size);
    return;
  }
  // int8 / int16, widened to int32 a chunk at a time.
  auto* out = static_cast<int32_t*>(t.raw_mutable_data());
  std::vector<unsigned char> buf(std::min<uint64_t>(numel - first, kWidenChunkElems) * type.file_size);
  for (uint64_t done = first; done < numel;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(numel - done, kWidenChunkElems));
    size_t want = n * type.file_size;
    size_t got = in.Read(buf.data(), want, "data");
    if (got < want) Truncated(path, file_bytes, done * type.file_size + got);
    Widen(type, buf.data(), n, out + done);
    done += n;
  }
}

// For data the file's size cannot vouch for (gzip, pipes): reads it in
// chunks as it arrives until at least half of it is there (all of it when it
// is small), then allocates the tensor, moves the chunks into it and returns
// how many elements it holds. A file announcing more than it has so costs
// memory in proportion to what it has: the tensor is allocated only once
// half of its data arrived, and the chunks grow only as bytes arrive.
uint64_t ReadBuffered(GzReader& in, const std::string& path, const TypeInfo& type, const Dims& dims,
                      uint64_t numel, Tensor* t) {
  const uint64_t file_bytes = numel * type.file_size;
  std::vector<std::pair<std::shared_ptr<Storage>, size_t>> chunks;  // chunk, bytes in it
  uint64_t buffered = 0;
  size_t chunk_size = kFirstStreamChunk;
  while (buffered < file_bytes - file_bytes / 2) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk_size, file_bytes - buffered));
    chunk_size = std::min(2 * chunk_size, kStreamChunk);
    std::shared_ptr<Storage> chunk = NewChunk(path, want);
    const size_t got = in.Read(chunk->data(), want, "data");
    buffered += got;
    if (got < want) Truncated(path, file_bytes, buffered);
    chunks.emplace_back(std::move(chunk), got);
  }
  *t = NewTensor(path, dims, type.dtype);
  void* data = t->raw_mutable_data();
  uint64_t first = 0;
  for (auto& [chunk, bytes] : chunks) {
    const size_t n = bytes / type.file_size;  // whole elements: chunks are multiples of every size
    Store(type, static_cast<const unsigned char*>(chunk->data()), n, data, first);
    first += n;
    chunk.reset();
  }
  return first;
}

}  // namespace

Tensor ReadIdx(const std::string& path) {
  struct stat st;
  GzReader in = Open(path, &st);

  unsigned char magic[4];
  size_t got = in.Read(magic, 4, "header");
  if (got == 0) DP_THROW(Code::kParse, "IDX file '", path, "' is empty");
  if (got < 4) DP_THROW(Code::kParse, "IDX file '", path, "': the header is truncated (", got, " of 4 bytes)");
  if (magic[0] != 0 || magic[1] != 0)
    DP_THROW(Code::kParse, "IDX file '", path, "': bad magic number (the first two bytes must be zero, got 0x",
             std::hex, int{magic[0]}, " 0x", int{magic[1]}, std::dec, "): not an IDX file");
  const TypeInfo* type = nullptr;
  for (const TypeInfo& t : kTypes)
    if (t.code == magic[2]) type = &t;
  if (type == nullptr)
    DP_THROW(Code::kParse, "IDX file '", path, "': unknown element type code 0x", std::hex, int{magic[2]}, std::dec,
             " (known: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)");
  const int ndims = magic[3];
  if (ndims == 0) DP_THROW(Code::kParse, "IDX file '", path, "': the header declares 0 dimensions");
  if (ndims > kMaxDims)
    DP_THROW(Code::kParse, "IDX file '", path, "': the header declares ", ndims, " dimensions (at most ", kMaxDims,
             " supported)");

  std::vector<unsigned char> dim_bytes(4 * static_cast<size_t>(ndims));
  got = in.Read(dim_bytes.data(), dim_bytes.size(), "header");
  if (got < dim_bytes.size())
    DP_THROW(Code::kParse, "IDX file '", path, "': the header is truncated (", 4 + got, " of ", 4 + dim_bytes.size(),
             " bytes: ", ndims, " dimensions announced)");
  Dims dims(ndims);
  const size_t out_size = DTypeSize(type->dtype);
  for (int i = 0; i < ndims; ++i) dims[i] = BigEndian32(&dim_bytes[4 * static_cast<size_t>(i)]);
  const bool empty = std::find(dims.begin(), dims.end(), 0) != dims.end();
  uint64_t numel = empty ? 0 : 1;
  for (int i = 0; i < ndims && !empty; ++i)
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dims[i]), &numel) || numel > kMaxIdxBytes)
      DP_THROW(Code::kParse, "IDX file '", path, "': the dimensions ", DimsString(dims), " hold more than ",
               kMaxIdxBytes, " elements (the size limit)");
  if (numel * out_size > kMaxIdxBytes)
    DP_THROW(Code::kParse, "IDX file '", path, "': ", type->name, DimsString(dims), " needs ", numel * out_size,
             " bytes, more than the ", kMaxIdxBytes, "-byte limit");

  const uint64_t file_bytes = numel * type->file_size;
  Tensor t;
  if (numel == 0) {
    t = NewTensor(path, dims, type->dtype);
  } else if (in.direct() && S_ISREG(st.st_mode)) {
    // A plain file: its size tells whether the data is all there before
    // any memory is taken for it.
    const uint64_t header_bytes = 4 + dim_bytes.size();
    const uint64_t size = st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0;
    const uint64_t follow = size > header_bytes ? size - header_bytes : 0;
    if (follow < file_bytes) Truncated(path, file_bytes, follow);
    t = NewTensor(path, dims, type->dtype);
    ReadRest(in, path, *type, t, 0, numel);
  } else {
    uint64_t first = ReadBuffered(in, path, *type, dims, numel, &t);
    ReadRest(in, path, *type, t, first, numel);
  }

  unsigned char extra[4096];
  got = in.Read(extra, sizeof extra, "end of the data");
  if (got > 0) {
    // In a gzip file, surplus output may come from a corrupt stream: read on
    // to its end so that a bad checksum is reported as such.
    if (!in.direct())
      while (in.Read(extra, sizeof extra, "end of the data") > 0) {
      }
    DP_THROW(Code::kParse, "IDX file '", path, "': unexpected bytes after the ", type->name, DimsString(dims),
             " data (the header announces ", file_bytes, " data bytes)");
  }
  in.Close("the data");
  return t;
}

}  // namespace dp
