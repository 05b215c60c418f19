// The arguments that place a communicator in a job of several processes,
// shared by CreateCpuCollectives and CreateCudaCollectives: world_size,
// rank, store, timeout_ms, run_id (parallel/ sets them from the shard
// options). Parsed and checked when the op is created.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/store.h"
#include "comm/store_address.h"
#include "graph/net_def.h"

namespace dp {

struct ProcessArgs {
  int world_size = 1;
  int rank = 0;
  std::chrono::milliseconds timeout{60000};
  std::string run_id = "dp";
  StoreAddress store;  // set when world_size > 1

  // kInvalidArgument naming the bad argument.
  static ProcessArgs Parse(const ArgReader& args);
  // What a communicator was made from (to tell whether one can be kept).
  std::string Config() const;
  // The store, scoped to the next communicator this rank makes into the
  // blob `name`: every creation in every process gets fresh keys, in the
  // same sequence (ranks that are threads of one process count apart).
  std::shared_ptr<Store> OpenScope(const std::string& name) const;
};

}  // namespace dp
