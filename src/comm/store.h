// Store: the key-value store the processes of a job share, over Gloo's
// FileStore (a directory on a shared filesystem) or RedisStore. Gloo's
// rendezvous exchanges the processes' addresses through it, and after a
// failure the survivors report there so that each can name the ranks that
// did not (GlooCommunicator's roll call). Every key lives under a scope
// (the Redis prefix, the job's run id, the communicator's name and
// generation), so jobs and communicators sharing a store never meet.
//
// Thread-safe: calls are serialised (Gloo's stores are not).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/store_address.h"

namespace gloo::rendezvous {
class Store;
}

namespace dp {

class Store {
 public:
  // Opens the store at `address` (a file store's directory is created when
  // missing), with every key under `scope`. kUnavailable when it cannot be
  // reached (Redis refuses or does not answer within connect_timeout, the
  // directory cannot be made), naming the URL.
  static std::shared_ptr<Store> Open(const StoreAddress& address, const std::string& scope,
                                     std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(30000));
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& url() const { return url_; }
  // A store for the keys under scope() + "/" + sub (shares the connection).
  std::shared_ptr<Store> Sub(const std::string& sub) const;

  // Sets `key` once: kAlreadyExists when it was set before (a file store
  // left over from an earlier job with the same run id).
  void Set(const std::string& key, const std::string& value);
  // Whether every key is set now.
  bool Has(const std::vector<std::string>& keys);
  // Waits until every key is set; false when `timeout` passes first.
  bool WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Waits until prefix + r is set for every rank r in [0, size); returns
  // the ranks whose key is still missing when `timeout` passes (empty: all
  // arrived). How rendezvous and roll calls name the ranks that are gone.
  std::vector<int> MissingRanks(const std::string& prefix, int size, std::chrono::milliseconds timeout);
  // The value of a key that is set (check with Has or WaitFor first).
  std::string Get(const std::string& key);

  // The scoped store in Gloo's terms, for its rendezvous. Not thread-safe:
  // only while nothing else uses this store.
  gloo::rendezvous::Store& gloo();

 private:
  struct Backend;
  Store(std::shared_ptr<Backend> backend, std::string scope, std::string url);

  std::shared_ptr<Backend> backend_;
  std::string scope_;
  std::string url_;
  std::unique_ptr<gloo::rendezvous::Store> prefixed_;  // backend_'s store under scope_
};

// "rank 2", "ranks 0, 2": ranks in messages, each shown as names[rank]
// when names are given (a group's ranks as the job's).
std::string RankList(const std::vector<int>& ranks, const std::vector<int>& names = {});

}  // namespace dp
