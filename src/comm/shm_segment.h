// POSIX shared memory for the processes of one host (ShmCommunicator): a
// segment made by one process under a fresh name, opened by the others
// through the name they read from the store, then unlinked, so that nothing
// is left in /dev/shm once every process has mapped it (the memory lives
// until the last mapping goes). Segments are reserved in full when made
// (posix_fallocate): a full /dev/shm is an error then, never a SIGBUS on a
// later write.
#pragma once

#include <cstddef>
#include <string>

namespace dp {

// Processes whose domains are equal can share segments and watch each
// other's pids: the same kernel boot, IPC, PID and network namespaces and
// the same /dev/shm. Processes in different network namespaces count as
// different hosts (containers on one machine; the two-hosts test). Empty
// when this process cannot use shared memory (no /dev/shm).
std::string ShmDomain();

// "512 KiB", "1.5 MiB", "3.0 GiB": sizes in messages about shared memory.
std::string ByteSize(double bytes);

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // A new segment of `bytes` (zero-filled), under a fresh name.
  // kOutOfMemory when /dev/shm cannot hold it (naming the size and what
  // to do), kUnavailable for other failures. The first one a process makes
  // runs SweepStale.
  static ShmSegment Create(size_t bytes);
  // Unlinks the segments of makers in this PID namespace that no longer run
  // (a maker that died between making a segment and unlinking it).
  static void SweepStale();
  // The segment `name` made by another process, which must be `bytes` long.
  static ShmSegment Open(const std::string& name, size_t bytes);

  const std::string& name() const { return name_; }
  char* data() const { return data_; }
  size_t size() const { return size_; }
  // Removes the name (mappings stay valid); the maker calls it once every
  // process has opened the segment. Idempotent.
  void Unlink() noexcept;

 private:
  std::string name_;
  char* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;  // made it and has not unlinked it yet
};

}  // namespace dp
