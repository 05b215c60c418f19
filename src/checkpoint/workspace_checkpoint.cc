#include "checkpoint/workspace_checkpoint.h"

#include "checkpoint/write_pacer.h"

#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace dp {
namespace {

// The tensor a blob holds, or nullptr when it holds none (or is absent).
// Shared under the blob's lock, as a fetch: a feed may replace it meanwhile.
std::shared_ptr<const Tensor> TensorIn(const Blob* b) {
  if (b == nullptr || !b->IsType<Tensor>()) return nullptr;
  std::shared_ptr<const Tensor> t = b->Share<Tensor>();
  return t->defined() ? t : nullptr;
}

}  // namespace

std::vector<CheckpointBinding> SameNames(const std::vector<std::string>& names) {
  std::vector<CheckpointBinding> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back({n, n});
  return out;
}

std::vector<std::pair<std::string, Tensor>> SnapshotCheckpoint(const Workspace& ws,
                                                               const std::vector<CheckpointBinding>& bindings,
                                                               const std::string& path) {
  std::vector<CheckpointBinding> list = bindings;
  if (list.empty())
    for (const auto& name : ws.Blobs())
      if (TensorIn(ws.GetBlob(name)) != nullptr) list.push_back({name, name});
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(list.size());
  for (const auto& [name, blob] : list) {
    const Blob* b = ws.GetBlob(blob);
    if (b == nullptr || b->empty())
      DP_THROW(Code::kNotFound, "checkpoint '", path, "': the workspace has no blob '", blob, "'");
    const std::shared_ptr<const Tensor> t = TensorIn(b);
    if (t == nullptr)
      DP_THROW(Code::kDType, "checkpoint '", path, "': blob '", blob, "' holds ", b->TypeName(), ", not a tensor");
    if (t->device().type == DeviceType::kCPU) {
      tensors.emplace_back(name, *t);  // shares the storage: nothing is copied
    } else {
      Tensor host;
      host.CopyFrom(*t);
      tensors.emplace_back(name, std::move(host));
    }
  }
  return tensors;
}

void SaveCheckpoint(const Workspace& ws, const std::vector<CheckpointBinding>& bindings, const std::string& path,
                    const CheckpointMeta& meta) {
  WriteCheckpoint(path, SnapshotCheckpoint(ws, bindings, path), meta);
}

struct AsyncCheckpointSave::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
};

AsyncCheckpointSave::AsyncCheckpointSave(std::vector<std::pair<std::string, Tensor>> tensors, std::string path,
                                         CheckpointMeta meta, double write_share)
    : state_(std::make_shared<State>()) {
  CheckWriteShare(write_share, StrCat("checkpoint '", path, "': the write share"));
  // The writer owns the snapshot and lets each tensor go once written.
  thread_ = std::thread([state = state_, tensors = std::move(tensors), path = std::move(path),
                         meta = std::move(meta), write_share]() mutable {
    // Training comes first: the writer only takes CPU time no other thread
    // of the machine wants (Linux's SCHED_IDLE; where refused, it runs at
    // the normal priority).
    sched_param param{};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
    std::exception_ptr error;
    try {
      WriteCheckpoint(path, std::move(tensors), meta, write_share);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(state->mu);
    state->error = error;
    state->done = true;
    state->cv.notify_all();
  });
}

AsyncCheckpointSave::~AsyncCheckpointSave() {
  if (thread_.joinable()) thread_.join();
}

bool AsyncCheckpointSave::Wait(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(state_->mu);
  if (timeout_ms < 0) {
    state_->cv.wait(lock, [&] { return state_->done; });
  } else if (!state_->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return state_->done; })) {
    return false;
  }
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

std::vector<std::string> LoadCheckpoint(Workspace& ws, const std::string& path,
                                        const LoadCheckpointOptions& options) {
  CheckpointReader reader(path);
  // Which entries go to which blobs.
  std::vector<std::pair<size_t, std::string>> picked;  // entry, blob
  if (options.bindings.empty()) {
    for (size_t i = 0; i < reader.entries().size(); ++i) picked.emplace_back(i, reader.entries()[i].name);
  } else {
    std::set<std::string> seen;
    for (const auto& [name, blob] : options.bindings) {
      if (!seen.insert(blob).second) continue;
      const int i = reader.Find(name);
      if (i >= 0) {
        picked.emplace_back(static_cast<size_t>(i), blob);
      } else if (!options.lenient) {
        DP_THROW(Code::kNotFound, "checkpoint '", path, "' has no tensor '", name, "'");
      }
    }
  }
  // Checked against the workspace, then read and verified: all before any
  // blob changes.
  std::vector<std::pair<std::string, Tensor>> loaded;
  loaded.reserve(picked.size());
  for (const auto& [i, blob] : picked) {
    const CheckpointEntry& e = reader.entries()[i];
    const std::string where = StrCat("checkpoint '", path, "', tensor '", e.name, "'");
    const Blob* b = ws.GetBlob(blob);
    const std::shared_ptr<const Tensor> have = TensorIn(b);
    if (have == nullptr) {
      if (b != nullptr && !b->empty() && !b->IsType<Tensor>())
        DP_THROW(Code::kDType, where, ": blob '", blob, "' holds ", b->TypeName(), ", not a tensor");
      DP_ENFORCE_CODE(options.lenient, Code::kNotFound, where, ": the workspace has no blob '", blob,
                      "' (strict loading replaces existing blobs only; run the init net first, or load leniently)");
    } else {
      DP_ENFORCE_CODE(have->dtype() == e.dtype, Code::kDType, where, " is ", DTypeName(e.dtype), " but blob '",
                      blob, "' is ", have->DebugString());
      DP_ENFORCE_CODE(have->dims() == e.dims, Code::kShape, where, " has shape ", DimsString(e.dims),
                      " but blob '", blob, "' is ", have->DebugString());
    }
    Tensor t = reader.Load(i, options.verify, options.mapped, ws.budget());
    if (have != nullptr && have->device().type != DeviceType::kCPU) {
      Tensor dev(e.dims, e.dtype, have->device());
      dev.CopyFrom(t);
      t = std::move(dev);
    }
    loaded.emplace_back(blob, std::move(t));
  }
  std::vector<std::string> names;
  names.reserve(loaded.size());
  for (auto& [name, t] : loaded) {
    ws.Feed(name, t);
    names.push_back(name);
  }
  return names;
}

}  // namespace dp
