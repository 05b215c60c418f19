// ConnectProcesses: the communicator of a job's processes, chosen from
// where they run. Each process announces its shared-memory domain
// (ShmDomain: which host it is on) through the store, then
//   - processes alone on their hosts, or local_transport "tcp":
//       Gloo between every pair (GlooCommunicator);
//   - all on one host: shared memory (ShmCommunicator);
//   - several hosts with the same number of processes on each:
//       shared memory inside each host, Gloo across (HierarchicalCommunicator);
//   - hosts with different numbers of processes: Gloo between every pair.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/store.h"

namespace dp {

struct ProcessGroupOptions {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{60000};
  std::string interface;           // Gloo's network interface ("" : the host name's address)
  std::string algorithm = "auto";  // Gloo's allreduce (GlooOptions::algorithm)
  // Between processes of one host: "auto" (shared memory when the host
  // has it, else TCP; a collective that /dev/shm cannot hold falls back to
  // TCP), "shm" (shared memory, an error when unavailable or full) or "tcp"
  // (Gloo over loopback, as between hosts). Every process must pass the same.
  std::string local_transport = "auto";
};

// "auto", "shm" or "tcp" (every layer that takes the setting checks it with this).
inline bool IsLocalTransport(const std::string& t) { return t == "auto" || t == "shm" || t == "tcp"; }

// kTimeout naming the ranks that did not arrive; kInvalidArgument for bad
// options (checked before the rendezvous); errors of the communicator made.
std::unique_ptr<Communicator> ConnectProcesses(std::shared_ptr<Store> store, const ProcessGroupOptions& options);

}  // namespace dp
