#include "core/file_bytes.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace dp {

std::string ReadFileBytes(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    DP_THROW(Code::kIo, "cannot read ", what, " file '", path, "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    DP_THROW(err == ENOENT ? Code::kNotFound : Code::kIo, "cannot open ", what, " file '", path, "': ",
             std::strerror(err));
  }
  // One read into a string of the file's size (a model's weights can be
  // hundreds of MB: no growing buffer, no second copy); what is left, if the
  // file grew meanwhile or its size is not known (a pipe), is appended.
  std::string bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    bytes.resize(static_cast<size_t>(size));
    in.read(bytes.data(), size);
    bytes.resize(static_cast<size_t>(in.gcount()));
  }
  if (!in.bad()) {
    in.clear();
    std::ostringstream rest;
    rest << in.rdbuf();
    bytes += rest.str();
  }
  if (in.bad()) DP_THROW(Code::kIo, "cannot read ", what, " file '", path, "'");
  return bytes;
}

}  // namespace dp
