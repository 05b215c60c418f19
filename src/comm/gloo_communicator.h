// GlooCommunicator: the Communicator of CPU processes, on Gloo's TCP
// transport (Debian's libgloo). Processes meet through a Store: each
// announces itself, waits (bounded) for all others, then Gloo connects a
// full mesh. Collectives are Gloo's algorithms on registered buffers, each
// bounded by the timeout; a failure closes this process's connections, so
// that peers blocked on it fail at once instead of at their timeout, and
// runs a roll call through the store that names the ranks that are gone.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/store.h"

namespace dp {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{60000};
  // Network interface to listen on ("eth0"); empty: the address the host
  // name resolves to (Gloo's default).
  std::string interface;
  // The allreduce's algorithm: "ring" (Gloo's: plain below 64 KiB, chunked
  // above), "halving_doubling", "bcube" (Gloo's), "direct" (dp's: every
  // block sent straight to the rank that sums it, in rank order, then to
  // all; comm/gloo_exchange.h), or "auto" (default: the plain ring below
  // 64 KiB, direct above with up to 8 processes, the chunked ring beyond).
  std::string algorithm = "auto";
  // How messages name rank i (the job's ranks, when this is a group of
  // them: one local rank of every host); empty: i itself.
  std::vector<int> names;
};

// Whether `a` is one of GlooOptions::algorithm's values.
inline bool IsGlooAlgorithm(const std::string& a) {
  return a == "auto" || a == "ring" || a == "halving_doubling" || a == "bcube" || a == "direct";
}

// Rendezvous of `options.size` processes through `store` (scoped to this
// communicator: every process must pass the same scope). kTimeout naming the
// ranks that did not arrive; kUnavailable when Gloo cannot connect;
// kInvalidArgument for bad options.
std::unique_ptr<Communicator> ConnectGloo(std::shared_ptr<Store> store, const GlooOptions& options);

}  // namespace dp
