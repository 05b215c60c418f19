// Workspace: the named blobs that nets read and write. Creating, finding and
// listing blobs is safe from many threads at once. Ops reach a blob's
// contents through the Blob pointers their net keeps, without locks (the
// executor orders ops that touch the same blob); Feed and GetTensor, what
// callers outside a run use, are serialised per blob (see blob.h): any
// number of threads may feed and fetch the same or different blobs at once,
// and fetch blobs that running nets only read, but nobody may feed a blob a
// running net reads or writes, nor fetch one it writes.
// Blob addresses are stable for the workspace's lifetime: operators keep
// Blob pointers, so blobs are never removed, only cleared.
//
// Memory: the workspace's MemoryBudget counts the bytes of the storage that
// ops allocate for its blobs (Operator::Output charges every output tensor,
// including copy-on-write copies), from when it is allocated until it is
// freed (the blob is overwritten or cleared and no fetched tensor shares it),
// and the scratch ops keep between runs (Operator::Scratch, until the op is
// destroyed). Tensors fed from outside are the caller's allocations and do not count.
// With WorkspaceOptions::max_bytes > 0 an allocation that would pass the
// limit fails with kOutOfMemory instead (the op's error). The limit applies
// per device: the host (every cpu:N) and each GPU may each hold max_bytes. Host storage is
// bounded besides, for all workspaces together, by the memory the process
// may use (Storage, core/memory_limit.h).
#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/blob.h"
#include "core/feed_watch.h"
#include "core/scope.h"  // ScopedName: a replica's blobs live under its scope ("cpu_0/w")
#include "core/tensor.h"

namespace dp {

struct WorkspaceOptions {
  uint64_t max_bytes = 0;  // cap per device on the bytes counted by budget(); 0 = none of its own
};

class Workspace {
 public:
  explicit Workspace(WorkspaceOptions options = {})
      : budget_(std::make_shared<MemoryBudget>(options.max_bytes)) {}
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  Blob* CreateBlob(const std::string& name);  // returns the existing one if present
  Blob* GetBlob(const std::string& name);     // nullptr if absent
  const Blob* GetBlob(const std::string& name) const;
  bool HasBlob(const std::string& name) const { return GetBlob(name) != nullptr; }
  // Sorted names, optionally only those starting with `prefix` (a name scope).
  std::vector<std::string> Blobs(std::string_view prefix = {}) const;

  // Access from outside a run (the C API, loaders, checkpoints, tests).
  // Feed makes blob `name` (created if absent) hold a copy of `tensor`, which
  // shares its storage. GetTensor returns a copy of the tensor blob `name`
  // holds, sharing its storage: kNotFound if the blob is absent or empty,
  // kDType if it holds something else.
  Blob& Feed(const std::string& name, const Tensor& tensor);  // the blob fed
  Tensor GetTensor(const std::string& name) const;

  // What op outputs are charged to (never null; limit 0 = unlimited).
  const std::shared_ptr<MemoryBudget>& budget() const { return budget_; }

  // The caller's feeds and what the nets read (a fed blob no net reads is
  // reported by the next run). Workspace::Feed does not note feeds: the C
  // API's feeds and loaders do, not the library's own (checkpoint loads).
  FeedWatch& feeds() const { return feeds_; }

 private:
  const std::shared_ptr<MemoryBudget> budget_;
  mutable FeedWatch feeds_;
  mutable std::shared_mutex mu_;
  std::map<std::string, std::unique_ptr<Blob>, std::less<>> blobs_;
};

}  // namespace dp
