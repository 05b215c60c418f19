// Checkpoints of a workspace's tensors: what the C API's dp_checkpoint_save
// and dp_checkpoint_load do (and, later, the Save/Load operators).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "core/workspace.h"

namespace dp {

// A tensor's name in the file and the blob it comes from or goes to: they
// differ for data-parallel models, whose files hold replica 0's blobs without
// the replica's scope ("w" for "cpu_0/w"), so that a file does not depend on
// the device count.
struct CheckpointBinding {
  std::string name;  // in the file
  std::string blob;  // in the workspace
};

// Bindings whose names are the blobs' names.
std::vector<CheckpointBinding> SameNames(const std::vector<std::string>& names);

// Saves the blobs of `bindings` (empty: every blob holding a defined tensor,
// sorted, under its own name) to `path`, atomically. CPU tensors are written
// as they are; others are copied to the host first. kNotFound for a missing
// blob, kDType for a blob that holds no tensor.
void SaveCheckpoint(const Workspace& ws, const std::vector<CheckpointBinding>& bindings, const std::string& path,
                    const CheckpointMeta& meta);

// What SaveCheckpoint writes, taken now: the tensors share the blobs'
// storage (nothing is copied; a later write to a blob copies it first), GPU
// tensors are copied to the host. For writing later, on another thread.
std::vector<std::pair<std::string, Tensor>> SnapshotCheckpoint(const Workspace& ws,
                                                               const std::vector<CheckpointBinding>& bindings,
                                                               const std::string& path);

// The share of wall time a background save spends writing unless told
// otherwise (write_pacer.h): on the development VM, training beside it then
// stays within 5% of its step time, and a save takes ~5x as long as flat out.
inline constexpr double kDefaultAsyncWriteShare = 0.2;

// A save running on a thread of its own (dp_checkpoint_save_async).
class AsyncCheckpointSave {
 public:
  // Starts writing `tensors` to `path`, paced to `write_share` of the time
  // (1: as fast as the device goes).
  AsyncCheckpointSave(std::vector<std::pair<std::string, Tensor>> tensors, std::string path, CheckpointMeta meta,
                      double write_share = kDefaultAsyncWriteShare);
  ~AsyncCheckpointSave();  // waits for the write
  AsyncCheckpointSave(const AsyncCheckpointSave&) = delete;
  AsyncCheckpointSave& operator=(const AsyncCheckpointSave&) = delete;

  // Waits up to timeout_ms (< 0: without limit). False when the write still
  // runs; true once it has finished, rethrowing its error if it failed.
  bool Wait(int64_t timeout_ms);

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

struct LoadCheckpointOptions {
  std::vector<CheckpointBinding> bindings;  // empty: every tensor of the file, into blobs of its name
  // Strict (default): every tensor loaded must replace an existing blob of
  // the workspace and every name asked for must be in the file. Lenient:
  // blobs the workspace lacks are created; names the file lacks are skipped.
  bool lenient = false;
  bool verify = true;  // check each tensor's checksum
  bool mapped = false; // tensors are read-only views of the mapped file
};

// Loads `path` into `ws`: everything is read and verified before the first
// blob is replaced, so a failure leaves the workspace as it was. A blob that
// holds a tensor must match the file's dtype and shape (kDType / kShape
// naming the file and the tensor); tensors land on the device of the blob
// they replace. Returns the blobs loaded.
std::vector<std::string> LoadCheckpoint(Workspace& ws, const std::string& path, const LoadCheckpointOptions& options);

}  // namespace dp
