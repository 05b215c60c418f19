#include "checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace dp {
namespace {

std::atomic<WriteFaultHook> g_fault_hook{nullptr};
std::atomic<uint64_t> g_temp_counter{0};

constexpr const char* kTempInfix = ".tmp.";

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Every failure to write is kIo, a missing directory included (ENOENT, also
// what a pseudo file system such as /proc answers): for a save, kNotFound
// means a missing blob, and the message names the file and the cause.
[[noreturn]] void ThrowErrno(int err, const std::string& what, const std::string& file) {
  DP_THROW(Code::kIo, what, " '", file, "': ", std::strerror(err));
}

void FsyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) ThrowErrno(errno, "cannot open directory", dir);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL); the rename stands.
  if (rc != 0 && err != EINVAL) ThrowErrno(err, "cannot fsync directory", dir);
}

}  // namespace

void SetWriteFaultHookForTesting(WriteFaultHook hook) { g_fault_hook.store(hook); }

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  DP_ENFORCE_CODE(!path_.empty(), Code::kInvalidArgument, "empty file path");
  const std::string base = BaseName(path_);
  DP_ENFORCE_CODE(!base.empty() && base != "." && base != "..", Code::kIo, "cannot write '", path_,
                  "': it names a directory, not a file");
  struct stat st {};
  DP_ENFORCE_CODE(::stat(path_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode), Code::kIo, "cannot write '", path_,
                  "': it is a directory, not a file");
  const std::string dir = DirName(path_);
  temp_ = (dir == "." && path_.find('/') == std::string::npos ? std::string() : dir + "/") + "." + base +
          kTempInfix + std::to_string(::getpid()) + "." + std::to_string(g_temp_counter.fetch_add(1));
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) ThrowErrno(errno, "cannot create a temporary file in directory", dir);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) Abandon();
}

void AtomicFileWriter::Abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_.c_str());
}

void AtomicFileWriter::WriteAt(uint64_t offset, const void* data, size_t size) {
  DP_ENFORCE_CODE(fd_ >= 0, Code::kFailedPrecondition, "'", path_, "' is already committed");
  if (WriteFaultHook hook = g_fault_hook.load()) {
    if (const int err = hook(offset + size); err != 0) ThrowErrno(err, "cannot write", path_);
  }
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      ThrowErrno(errno, "cannot write", path_);
    }
    if (n == 0) ThrowErrno(EIO, "cannot write", path_);
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  if (offset > size_) size_ = offset;
}

void AtomicFileWriter::Write(const void* data, size_t size) { WriteAt(size_, data, size); }

void AtomicFileWriter::WriteZeros(size_t size) {
  static const char kZeros[4096] = {};
  while (size > 0) {
    const size_t n = size < sizeof kZeros ? size : sizeof kZeros;
    Write(kZeros, n);
    size -= n;
  }
}

void AtomicFileWriter::Flush(uint64_t offset, size_t size) {
  DP_ENFORCE_CODE(fd_ >= 0, Code::kFailedPrecondition, "'", path_, "' is already committed");
#ifdef __linux__
  const unsigned flags = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
  if (::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(size), flags) != 0)
    ThrowErrno(errno, "cannot write", path_);
#else
  (void)offset;
  (void)size;
  if (::fdatasync(fd_) != 0) ThrowErrno(errno, "cannot write", path_);
#endif
}

void AtomicFileWriter::Commit() {
  DP_ENFORCE_CODE(fd_ >= 0, Code::kFailedPrecondition, "'", path_, "' is already committed");
  if (::fsync(fd_) != 0) ThrowErrno(errno, "cannot fsync", path_);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) ThrowErrno(errno, "cannot close", path_);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) ThrowErrno(errno, "cannot rename the temporary file to", path_);
  committed_ = true;
  FsyncDir(DirName(path_));
}

bool AtomicFileWriter::IsTempName(const std::string& name) {
  return !name.empty() && name[0] == '.' && name.find(kTempInfix) != std::string::npos;
}

}  // namespace dp
