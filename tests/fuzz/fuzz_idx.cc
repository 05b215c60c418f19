// Fuzz target: IDX files (dp_tensor_from_idx_file). The first byte picks the form: the
// rest written as is (a plain file, or whatever gzip-like bytes it holds),
// or gzip-compressed first, so that every IDX header also reaches the gzip
// path through a valid stream.
#include <zlib.h>

#include "tests/fuzz/fuzz_util.h"

namespace {

void WriteFile(const std::string& path, const uint8_t* data, size_t size, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb1");
    if (f == nullptr) dp::fuzz::Broken("cannot write", path.c_str());
    if (size > 0 && gzwrite(f, data, static_cast<unsigned>(size)) != static_cast<int>(size))
      dp::fuzz::Broken("cannot write", path.c_str());
    gzclose(f);
    return;
  }
  dp::fuzz::WriteBytes(path, data, size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = dp::fuzz::TempPath("idx");
  const uint8_t* idx = data + 1;
  const size_t idx_size = size - 1;
  const bool gzip = (data[0] & 1) != 0;
  WriteFile(path, idx, idx_size, gzip);
  dp_tensor* t = nullptr;
  if (dp::fuzz::Ok(dp_tensor_from_idx_file(path.c_str(), &t))) {
    // Accepted means exactly whole: header + dims + numel elements of the
    // file's type, no byte missing or left over (unless the bytes were a
    // gzip stream of their own, whose content we do not know here).
    const bool own_gzip = !gzip && idx_size >= 2 && idx[0] == 0x1f && idx[1] == 0x8b;
    if (!own_gzip && idx_size >= 4) {
      size_t file_elem = 0;
      switch (idx[2]) {
        case 0x08: case 0x09: file_elem = 1; break;
        case 0x0B: file_elem = 2; break;
        case 0x0C: case 0x0D: file_elem = 4; break;
        case 0x0E: file_elem = 8; break;
        default: dp::fuzz::Broken("an IDX file with an unknown type code was accepted");
      }
      const size_t ndim = idx[3];
      if (dp_tensor_ndim(t) != ndim ||
          idx_size != 4 + 4 * ndim + static_cast<size_t>(dp_tensor_numel(t)) * file_elem)
        dp::fuzz::Broken("an accepted IDX file's size disagrees with its header");
    }
    dp_tensor_free(t);
  }
  std::remove(path.c_str());
  return 0;
}
