#include "comm/store.h"

#include <sys/stat.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>

#include "core/error.h"

namespace dp {
namespace {

// Gloo's FileStore keeps `check` protected; a job's stores need it public.
class FileStore final : public gloo::rendezvous::FileStore {
 public:
  using gloo::rendezvous::FileStore::FileStore;
  using gloo::rendezvous::FileStore::check;
};

// How often a waiting store looks again (FileStore polls the same way).
constexpr auto kPollInterval = std::chrono::milliseconds(5);

// mkdir -p: kUnavailable naming the URL when a part cannot be made.
void MakeDirs(const std::string& path, const std::string& url) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string part = path.substr(0, pos);
    if (mkdir(part.c_str(), 0777) != 0 && errno != EEXIST)
      DP_THROW(Code::kUnavailable, "store ", url, ": cannot create ", part, ": ", std::strerror(errno));
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    DP_THROW(Code::kUnavailable, "store ", url, ": ", path, " is not a directory");
}

}  // namespace

// One connection (or directory) that every scope of it shares, behind a lock.
struct Store::Backend {
  std::mutex mu;
  std::unique_ptr<FileStore> file;
  std::unique_ptr<gloo::rendezvous::RedisStore> redis;

  gloo::rendezvous::Store& raw() {
    if (file) return *file;
    return *redis;
  }
  bool Check(const std::vector<std::string>& keys) {
    std::lock_guard<std::mutex> lock(mu);
    return file ? file->check(keys) : redis->check(keys);
  }
};

namespace {

// Gloo's view of one scope: keys prefixed, every call under the backend's
// lock, waits polling so that the lock is never held while waiting.
class ScopedGlooStore final : public gloo::rendezvous::Store {
 public:
  ScopedGlooStore(dp::Store* owner) : owner_(owner) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    owner_->Set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    if (!owner_->WaitFor({key}, kDefaultTimeout))
      DP_THROW(Code::kTimeout, "store ", owner_->url(), ": no key '", key, "' after ", kDefaultTimeout.count(), " ms");
    const std::string v = owner_->Get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    if (!owner_->WaitFor(keys, timeout))
      DP_THROW(Code::kTimeout, "store ", owner_->url(), ": the other processes did not arrive within ",
               timeout.count(), " ms (rendezvous)");
  }

 private:
  dp::Store* owner_;
};

}  // namespace

std::shared_ptr<Store> Store::Open(const StoreAddress& address, const std::string& scope,
                                   std::chrono::milliseconds connect_timeout) {
  auto backend = std::make_shared<Backend>();
  const std::string url = address.ToString();
  std::string full_scope = scope;
  try {
    if (address.kind == StoreAddress::Kind::kFile) {
      MakeDirs(address.path, url);
      backend->file = std::make_unique<FileStore>(address.path);
    } else {
      // Reachable within the timeout first: Gloo's RedisStore connects
      // without one (an unreachable host would block for minutes) and leaks
      // its connection when the connect fails.
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(connect_timeout);
      timeval tv{};
      tv.tv_sec = static_cast<time_t>(seconds.count());
      tv.tv_usec = static_cast<suseconds_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(connect_timeout - seconds).count());
      redisContext* probe = redisConnectWithTimeout(address.host.c_str(), address.port, tv);
      const std::string error = probe == nullptr ? std::string("out of memory")
                                : probe->err != 0 ? std::string(probe->errstr)
                                                  : std::string();
      if (probe != nullptr) redisFree(probe);
      if (!error.empty())
        DP_THROW(Code::kUnavailable, "store ", url, " cannot be reached within ", connect_timeout.count(), " ms: ", error);
      backend->redis = std::make_unique<gloo::rendezvous::RedisStore>(address.host, address.port);
      if (!address.prefix.empty()) full_scope = address.prefix + "/" + scope;
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    DP_THROW(Code::kUnavailable, "store ", url, " cannot be reached: ", e.what());
  }
  return std::shared_ptr<Store>(new Store(std::move(backend), full_scope, url));
}

Store::Store(std::shared_ptr<Backend> backend, std::string scope, std::string url)
    : backend_(std::move(backend)), scope_(std::move(scope)), url_(std::move(url)),
      prefixed_(std::make_unique<ScopedGlooStore>(this)) {}

Store::~Store() = default;

std::shared_ptr<Store> Store::Sub(const std::string& sub) const {
  return std::shared_ptr<Store>(new Store(backend_, scope_ + "/" + sub, url_));
}

void Store::Set(const std::string& key, const std::string& value) {
  const std::string k = scope_ + "/" + key;
  if (backend_->Check({k}))
    DP_THROW(Code::kAlreadyExists, "store ", url_, " already holds key '", k,
             "': another job used the same store and run id (use an empty directory or prefix, or a new "
             "DP_RUN_ID; dp-run makes one per launch)");
  std::lock_guard<std::mutex> lock(backend_->mu);
  try {
    backend_->raw().set(k, std::vector<char>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    DP_THROW(Code::kUnavailable, "store ", url_, ": cannot set '", k, "': ", e.what());
  }
}

bool Store::Has(const std::vector<std::string>& keys) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(scope_ + "/" + k);
  try {
    return backend_->Check(full);
  } catch (const std::exception& e) {
    DP_THROW(Code::kUnavailable, "store ", url_, ": cannot look up keys: ", e.what());
  }
}

bool Store::WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (Has(keys)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);  // polling a directory or server: no event to wait on
  }
}

std::vector<int> Store::MissingRanks(const std::string& prefix, int size, std::chrono::milliseconds timeout) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + std::to_string(r));
  std::vector<int> missing;
  if (WaitFor(keys, timeout)) return missing;
  for (int r = 0; r < size; ++r)
    if (!Has({keys[static_cast<size_t>(r)]})) missing.push_back(r);
  return missing;
}

std::string RankList(const std::vector<int>& ranks, const std::vector<int>& names) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + std::to_string(names.empty() ? ranks[i] : names[static_cast<size_t>(ranks[i])]);
  return s;
}

std::string Store::Get(const std::string& key) {
  const std::string k = scope_ + "/" + key;
  std::lock_guard<std::mutex> lock(backend_->mu);
  try {
    const std::vector<char> v = backend_->raw().get(k);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    DP_THROW(Code::kUnavailable, "store ", url_, ": cannot get '", k, "': ", e.what());
  }
}

gloo::rendezvous::Store& Store::gloo() { return *prefixed_; }

}  // namespace dp
