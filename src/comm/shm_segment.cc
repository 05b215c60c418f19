#include "comm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "core/error.h"
#include "core/logging.h"

namespace dp {
namespace {

constexpr const char* kShmDir = "/dev/shm";
// Segment names: "/dp-<pid namespace>-<maker pid>-<random>", so that a later
// job can tell segments of makers that died (and only of its own namespace).
constexpr const char* kPrefix = "dp-";

std::string Namespace(const char* kind) {
  char buf[128];
  const std::string link = std::string("/proc/self/ns/") + kind;
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "?";
  buf[n] = '\0';
  // "pid:[4026531836]" -> "4026531836"
  std::string s(buf);
  const size_t open = s.find('[');
  const size_t close = s.find(']');
  return open != std::string::npos && close != std::string::npos && close > open ? s.substr(open + 1, close - open - 1)
                                                                                  : s;
}

std::string BootId() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id.empty() ? std::string("?") : id;
}

std::string Hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
  return s;
}

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

void ShmSegment::SweepStale() {
  const std::string pid_ns = Namespace("pid");
  DIR* dir = opendir(kShmDir);
  if (dir == nullptr) return;
  const std::string mine = kPrefix + pid_ns + "-";
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.compare(0, mine.size(), mine) != 0) continue;
    const std::string rest = name.substr(mine.size());
    char* end = nullptr;
    const long pid = std::strtol(rest.c_str(), &end, 10);
    if (pid <= 0 || end == nullptr || *end != '-') continue;
    struct stat st {};
    if (stat((std::string(kShmDir) + "/" + name).c_str(), &st) != 0 || st.st_uid != geteuid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (shm_unlink(("/" + name).c_str()) == 0)
      DP_LOG(kInfo, "dp: removed shared memory ", kShmDir, "/", name, " left by process ", pid, ", which died");
  }
  closedir(dir);
}

std::string ByteSize(double bytes) {
  char buf[32];
  if (bytes < 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.0f KiB", bytes / 1024);
  } else if (bytes < 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  }
  return buf;
}

std::string ShmDomain() {
  struct stat st {};
  if (stat(kShmDir, &st) != 0 || !S_ISDIR(st.st_mode)) return std::string();
  return StrCat("boot ", BootId(), " ipc ", Namespace("ipc"), " pid ", Namespace("pid"), " net ", Namespace("net"),
                " shm ", st.st_dev, ":", st.st_ino);
}

ShmSegment::~ShmSegment() {
  Unlink();
  if (data_ != nullptr) munmap(data_, size_);
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    Unlink();
    if (data_ != nullptr) munmap(data_, size_);
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    owner_ = other.owner_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.owner_ = false;
  }
  return *this;
}

void ShmSegment::Unlink() noexcept {
  if (!owner_) return;
  owner_ = false;
  shm_unlink(name_.c_str());
}

ShmSegment ShmSegment::Create(size_t bytes) {
  DP_ENFORCE(bytes > 0, "shared memory segment of 0 bytes");
  // Once per process: the namespace does not change, and earlier jobs'
  // leftovers need one sweep, not one per collective.
  static const std::string pid_ns = [] {
    SweepStale();
    return Namespace("pid");
  }();
  std::random_device rd;
  ShmSegment seg;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    const uint64_t r = (uint64_t{rd()} << 32) ^ rd();
    seg.name_ = StrCat("/", kPrefix, pid_ns, "-", getpid(), "-", Hex(r));
    fd = shm_open(seg.name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && (errno != EEXIST || attempt > 8))
      DP_THROW(Code::kUnavailable, "shared memory: cannot make ", kShmDir, seg.name_, ": ", ErrnoText(errno));
  }
  seg.owner_ = true;  // unlinked by the destructor should anything below fail
  int err = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  // Reserve every page now: tmpfs would otherwise fail a later write with SIGBUS.
  if (err == 0) err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    struct statvfs vfs {};
    const bool have = statvfs(kShmDir, &vfs) == 0;
    if (err == ENOSPC || err == EFBIG)
      DP_THROW(Code::kOutOfMemory, "shared memory: ", kShmDir, " cannot hold ", ByteSize(static_cast<double>(bytes)),
               " for the collectives between this host's processes",
               have ? StrCat(" (", ByteSize(static_cast<double>(vfs.f_bavail) * vfs.f_frsize), " free of ",
                             ByteSize(static_cast<double>(vfs.f_blocks) * vfs.f_frsize), ")")
                    : std::string(),
               "; enlarge it (docker run --shm-size=...) or let the processes talk over TCP "
               "(local_transport \"tcp\", DP_LOCAL_TRANSPORT=tcp)");
    DP_THROW(Code::kUnavailable, "shared memory: cannot size ", kShmDir, seg.name_, " to ", bytes,
             " bytes: ", ErrnoText(err));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  err = errno;
  close(fd);
  if (p == MAP_FAILED)
    DP_THROW(Code::kUnavailable, "shared memory: cannot map ", kShmDir, seg.name_, " (", bytes, " bytes): ",
             ErrnoText(err));
  seg.data_ = static_cast<char*>(p);
  seg.size_ = bytes;
  return seg;
}

ShmSegment ShmSegment::Open(const std::string& name, size_t bytes) {
  DP_ENFORCE(name.size() > 1 && name[0] == '/' && name.find('/', 1) == std::string::npos,
             "shared memory: bad segment name '", name.substr(0, 64), "'");
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0)
    DP_THROW(Code::kUnavailable, "shared memory: cannot open ", kShmDir, name, ": ", ErrnoText(errno),
             " (is its maker on this host, in the same IPC namespace?)");
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    DP_THROW(Code::kUnavailable, "shared memory: ", kShmDir, name, " holds ", st.st_size, " bytes, not ", bytes);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED)
    DP_THROW(Code::kUnavailable, "shared memory: cannot map ", kShmDir, name, " (", bytes, " bytes): ",
             ErrnoText(err));
  ShmSegment seg;
  seg.name_ = name;
  seg.data_ = static_cast<char*>(p);
  seg.size_ = bytes;
  return seg;
}

}  // namespace dp
