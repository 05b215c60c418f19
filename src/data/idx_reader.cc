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

GzReader Open(const std::string& path) {
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

}  // namespace

Tensor ReadIdx(const std::string& path) {
  GzReader in = Open(path);

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

  Tensor t;
  try {
    t = Tensor(dims, type->dtype);
  } catch (Error& e) {
    if (e.code() != Code::kShape) throw;  // out of memory stays what it is
    DP_THROW(Code::kParse, "IDX file '", path, "': ", e.message());
  }
  const uint64_t file_bytes = numel * type->file_size;
  if (numel > 0) {
    void* dst = t.raw_mutable_data();
    if (type->file_size == out_size) {
      got = in.Read(dst, file_bytes, "data");
      if (got < file_bytes) Truncated(path, file_bytes, got);
      SwapInPlace(dst, numel, out_size);
    } else {
      // int8 / int16, widened to int32 a chunk at a time.
      auto* out = static_cast<int32_t*>(dst);
      std::vector<unsigned char> buf(std::min<uint64_t>(numel, kWidenChunkElems) * type->file_size);
      uint64_t done = 0;
      while (done < numel) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(numel - done, kWidenChunkElems));
        size_t want = n * type->file_size;
        got = in.Read(buf.data(), want, "data");
        if (got < want) Truncated(path, file_bytes, done * type->file_size + got);
        if (type->file_size == 1) {
          for (size_t i = 0; i < n; ++i) out[done + i] = static_cast<int8_t>(buf[i]);
        } else {
          for (size_t i = 0; i < n; ++i)
            out[done + i] = static_cast<int16_t>(static_cast<uint16_t>((buf[2 * i] << 8) | buf[2 * i + 1]));
        }
        done += n;
      }
    }
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
