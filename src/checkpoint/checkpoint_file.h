// The checkpoint file (docs/CHECKPOINT.md): a fixed 64-byte preamble (magic,
// format version, where the header is, its checksum, the file's length, the
// preamble's own checksum), a FlatBuffers header (schemas/checkpoint.fbs:
// metadata and one entry per tensor) and the tensors' raw bytes, each at a
// 64-byte aligned offset with its own XXH3-64 checksum. Readers verify
// everything they use before handing anything out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/storage.h"
#include "core/tensor.h"

namespace dp {

// What a checkpoint says about itself besides its tensors.
struct CheckpointMeta {
  std::string dp_version;   // filled in by the writer
  std::string model_name;
  int64_t iteration = -1;   // -1: unknown
  std::string device_type;  // "cpu", "cuda" or ""
  int32_t replicas = 0;     // 0: unknown
  int32_t shards = 0;       // 0: unknown
};

// The one rule for the iteration a checkpoint records, kept by every writer
// (dp_checkpoint_save, the Save operator, WriteCheckpoint itself) and every
// reader: -1 (unknown) or a count >= 0.
inline bool ValidIteration(int64_t iteration) { return iteration >= -1; }
// Throws `code` ("<where>: iteration <n> is not -1 (unknown) or >= 0")
// unless ValidIteration: writers pass kInvalidArgument, readers kParse.
void CheckIteration(int64_t iteration, Code code, const std::string& where);

struct CheckpointEntry {
  std::string name;
  DType dtype = DType::kUndefined;
  Dims dims;
  uint64_t offset = 0;  // in the file, a multiple of 64
  uint64_t length = 0;  // bytes
  uint64_t xxh3 = 0;
};

inline constexpr uint32_t kCheckpointFormatVersion = 1;
inline constexpr uint64_t kCheckpointAlignment = 64;
inline constexpr uint64_t kCheckpointPreambleSize = 64;

// Writes `tensors` (CPU tensors, defined, distinct names) atomically to
// `path` (atomic_file.h). Each tensor is released as soon as its bytes are
// written, before the fsync: a background save (whose tensors share the
// blobs' storage) then stops holding a blob's storage early, and training
// writes it in place again instead of copying it. Errors name the file and,
// where one is at fault, the tensor. write_share < 1 paces the writing
// (write_pacer.h): each 1 MiB piece is flushed to the device as it is
// written, and the writer rests so that writing takes that share of the time.
void WriteCheckpoint(const std::string& path, std::vector<std::pair<std::string, Tensor>> tensors,
                     const CheckpointMeta& meta, double write_share = 1.0);

// An open, verified checkpoint: preamble and header checked (checksums,
// bounds, entries), tensors not yet read. Errors name the file and tensor:
// kNotFound / kIo when it cannot be read, kParse when it is not a
// checkpoint, kUnimplemented for a newer format version, kDataLoss for a
// truncated or corrupted one.
class CheckpointReader {
 public:
  explicit CheckpointReader(std::string path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const { return path_; }
  const CheckpointMeta& meta() const { return meta_; }
  const std::vector<CheckpointEntry>& entries() const { return entries_; }
  // Index of the entry named `name`, or -1.
  int Find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? -1 : static_cast<int>(it->second);
  }

  // Entry i's tensor on the CPU, its checksum verified unless `verify` is
  // false. Read: copied into memory dp allocates (charged to `budget` when
  // given). Mapped: a read-only view of the file mapped into memory, shared
  // by every tensor of this reader and kept alive by them (copy-on-write: a
  // write to such a tensor copies it first).
  Tensor Load(size_t i, bool verify, bool mapped, const std::shared_ptr<MemoryBudget>& budget = nullptr);

 private:
  struct Mapping;
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  CheckpointMeta meta_;
  std::vector<CheckpointEntry> entries_;
  std::unordered_map<std::string, size_t> index_;  // entry by name
  std::shared_ptr<Mapping> mapping_;  // made on the first mapped load
};

}  // namespace dp
