// Where the processes of a job meet (rendezvous): a store URL.
//   file:///shared/dir            a directory every process can reach (Gloo's FileStore)
//   redis://host:port[/prefix]    a Redis server (Gloo's RedisStore); keys under prefix
// The URL comes from outside (options, DP_STORE), so it is parsed strictly:
// UTF-8 without control characters, bounded length, absolute paths, host
// names of letters, digits, '.', '-' and '_' (or an IPv6 literal in
// brackets), ports 1..65535. tests/fuzz/fuzz_store_address.cc fuzzes it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dp {

struct StoreAddress {
  enum class Kind { kFile, kRedis };
  Kind kind = Kind::kFile;
  std::string path;    // kFile: the directory (absolute, no "." or ".." parts)
  std::string host;    // kRedis: name or address (IPv6 without brackets)
  int port = 6379;     // kRedis
  std::string prefix;  // kRedis: key prefix ("" when absent)

  // The URL again, normalised (what messages and the store's keys name).
  std::string ToString() const;
};

// Longest URL accepted.
inline constexpr size_t kMaxStoreUrlBytes = 4096;

// Throws kInvalidArgument naming what is wrong with `url`.
StoreAddress ParseStoreAddress(std::string_view url);

}  // namespace dp
