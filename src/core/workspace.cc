#include "core/workspace.h"

#include <cxxabi.h>

#include <cstdlib>
#include <mutex>

namespace dp {

std::string DemangledTypeName(const std::type_info& info) {
  int status = 0;
  char* name = abi::__cxa_demangle(info.name(), nullptr, nullptr, &status);
  std::string out = (status == 0 && name != nullptr) ? name : info.name();
  std::free(name);
  return out;
}

Blob* Workspace::CreateBlob(const std::string& name) {
  DP_ENFORCE(!name.empty(), "blob names must not be empty");
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = blobs_.find(name);
    if (it != blobs_.end()) return it->second.get();
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto& slot = blobs_[name];
  if (!slot) slot = std::make_unique<Blob>(name);
  return slot.get();
}

Blob* Workspace::GetBlob(const std::string& name) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = blobs_.find(name);
  return it == blobs_.end() ? nullptr : it->second.get();
}

const Blob* Workspace::GetBlob(const std::string& name) const {
  return const_cast<Workspace*>(this)->GetBlob(name);
}

std::vector<std::string> Workspace::Blobs(std::string_view prefix) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::vector<std::string> out;
  for (auto it = blobs_.lower_bound(prefix); it != blobs_.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    if (!it->second->empty()) out.push_back(it->first);
  }
  return out;
}

Blob& Workspace::Feed(const std::string& name, const Tensor& tensor) {
  Blob* b = CreateBlob(name);
  auto fed = std::make_shared<Tensor>(tensor);
  fed->set_slot(nullptr);
  b->Publish(std::move(fed));
  return *b;
}

Tensor Workspace::GetTensor(const std::string& name) const {
  const Blob* b = GetBlob(name);
  if (b == nullptr) DP_THROW(Code::kNotFound, "no blob named '", name, "' in the workspace");
  if (b->empty() && b->transient())  // freed by a net's memory plan after its last use
    DP_THROW(Code::kNotFound, "blob '", name,
             "' is empty: it is a temporary of a net whose memory plan frees it after its last use in a run "
             "(list it among the net's external outputs, or turn the plan off, to keep it)");
  if (b->empty())  // created by a net, or a loader, that has not written it yet
    DP_THROW(Code::kNotFound, "blob '", name, "' is empty: nothing has been fed to it or written to it yet");
  Tensor t = *b->Share<Tensor>();
  t.set_slot(nullptr);  // the caller's copy never draws on a net's plan
  return t;
}

}  // namespace dp
