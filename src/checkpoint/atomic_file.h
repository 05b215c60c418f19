// Writing a file so that a crash at any moment leaves either the old file or
// the complete new one under its name, never a partial one: the bytes go to a
// temporary file in the same directory, which is fsynced, renamed over the
// final name, and the directory is fsynced so that the rename itself is
// durable. A failed or abandoned write removes its temporary file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dp {

class AtomicFileWriter {
 public:
  // Creates the temporary file next to `path` (kIo naming the directory
  // when it cannot, a missing one included; kIo when `path` is a directory).
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();  // not committed: the temporary file is removed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends `size` bytes (kIo naming the file and the errno on failure,
  // "no space left on device" included).
  void Write(const void* data, size_t size);
  // Appends `size` zero bytes.
  void WriteZeros(size_t size);
  // Writes at an absolute offset already written (a header patched after the
  // data it describes).
  void WriteAt(uint64_t offset, const void* data, size_t size);
  uint64_t size() const { return size_; }
  // Sends the bytes at [offset, offset + size) to the device and waits for
  // them (a paced writer's I/O then happens while it works, not all at
  // Commit's fsync, which still makes the file durable).
  void Flush(uint64_t offset, size_t size);

  // fsync, close, rename over the final name, fsync the directory.
  void Commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

  // Whether `name` (a file name, no directory) is one of this class's
  // temporary files: ".<final name>.tmp.<pid>.<n>".
  static bool IsTempName(const std::string& name);

 private:
  void Abandon() noexcept;

  std::string path_;
  std::string temp_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool committed_ = false;
};

// Test hook: when set, every write of AtomicFileWriter calls it first with
// the bytes written so far plus this write's size; a nonzero return is the
// errno the write fails with (ENOSPC to simulate a full disk). Not for
// production use; not thread-safe against concurrent writers.
using WriteFaultHook = int (*)(uint64_t total_after_write);
void SetWriteFaultHookForTesting(WriteFaultHook hook);

}  // namespace dp
