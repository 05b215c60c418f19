#include "comm/process_args.h"

#include <map>
#include <mutex>

#include "core/error.h"

namespace dp {
namespace {

constexpr int64_t kMaxProcesses = 1 << 20;
constexpr int64_t kMaxTimeoutMs = int64_t{24} * 3600 * 1000;

// Communicators made so far per (store, run id, blob, rank), process-wide.
int NextGeneration(const std::string& key) {
  static std::mutex mu;
  static std::map<std::string, int>* generations = new std::map<std::string, int>();
  std::lock_guard<std::mutex> lock(mu);
  return (*generations)[key]++;
}

}  // namespace

ProcessArgs ProcessArgs::Parse(const ArgReader& args) {
  ProcessArgs p;
  const int64_t world = args.Int("world_size", 1);
  DP_ENFORCE(world >= 1 && world <= kMaxProcesses, "world_size ", world, " must be in [1, ", kMaxProcesses, "]");
  const int64_t rank = args.Int("rank", 0);
  DP_ENFORCE(rank >= 0 && rank < world, "rank ", rank, " must be in [0, world_size ", world, ")");
  p.world_size = static_cast<int>(world);
  p.rank = static_cast<int>(rank);
  const int64_t timeout = args.Int("timeout_ms", p.timeout.count());
  DP_ENFORCE(timeout > 0 && timeout <= kMaxTimeoutMs, "timeout_ms ", timeout, " must be in [1, ", kMaxTimeoutMs,
             "]");
  p.timeout = std::chrono::milliseconds(timeout);
  p.run_id = args.String("run_id", "dp");
  DP_ENFORCE(!p.run_id.empty() && p.run_id.size() <= 200 && p.run_id.find('/') == std::string::npos, "run_id '",
             p.run_id, "' must be 1 to 200 bytes without '/'");
  if (world > 1) {
    const std::string url = args.String("store", "");
    DP_ENFORCE(!url.empty(), "world_size ", world, " needs a store (file:///dir or redis://host:port) where the ",
               "processes meet");
    p.store = ParseStoreAddress(url);
  }
  return p;
}

std::string ProcessArgs::Config() const {
  return world_size == 1 ? std::string()
                         : StrCat(store.ToString(), " ", run_id, " ", rank, "/", world_size, " ", timeout.count());
}

std::shared_ptr<Store> ProcessArgs::OpenScope(const std::string& name) const {
  const std::string key = StrCat(store.ToString(), "|", run_id, "|", name, "|", rank);
  return Store::Open(store, StrCat(run_id, "/", name, "/", NextGeneration(key)), timeout);
}

}  // namespace dp
