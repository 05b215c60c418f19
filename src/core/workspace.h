// Workspace: the named blobs that nets read and write. Creating, finding and
// listing blobs is safe from many threads at once; the contents of one blob
// are not synchronised (the executor orders ops that touch the same blob).
// Blob addresses are stable for the workspace's lifetime: operators keep
// Blob pointers, so blobs are never removed, only cleared.
#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/blob.h"
#include "core/tensor.h"

namespace dp {

class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  Blob* CreateBlob(const std::string& name);  // returns the existing one if present
  Blob* GetBlob(const std::string& name);     // nullptr if absent
  const Blob* GetBlob(const std::string& name) const;
  bool HasBlob(const std::string& name) const { return GetBlob(name) != nullptr; }
  // Sorted names, optionally only those starting with `prefix` (a name scope).
  std::vector<std::string> Blobs(std::string_view prefix = {}) const;

  // Convenience for tests and the C API.
  void Feed(const std::string& name, const Tensor& tensor);
  const Tensor& GetTensor(const std::string& name) const;  // kNotFound / kDType

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, std::unique_ptr<Blob>, std::less<>> blobs_;
};

// Name scopes: a replica's blobs live under its device scope ("cpu_0/w").
inline std::string ScopedName(std::string_view scope, std::string_view name) {
  std::string s(scope);
  s += name;
  return s;
}

}  // namespace dp
