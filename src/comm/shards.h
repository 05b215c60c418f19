// Which elements of a tensor each replica owns under a sharded optimizer
// state (ZeRO-1: parallel/, the ops of comm/cpu_shard_ops.cc). A tensor of n
// elements is cut into R = devices x processes contiguous parts of whole
// 64-element chunks (the optimizer updates' PartOfElements, the last part
// short or empty); device d of process p owns part p * devices + d. The
// parts of a process's devices are consecutive, so a process owns one
// contiguous range too: what crosses between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "ops/math/optimizer_updates.h"

namespace dp {

class Blob;

struct ShardLayout {
  int64_t devices = 1;    // replicas of each process (N)
  int64_t processes = 1;  // P
  int64_t rank = 0;       // this process, in [0, P)

  int64_t parts() const { return devices * processes; }
  // The part device d of process p owns.
  int64_t part(int64_t d, int64_t p) const { return p * devices + d; }
  // Elements of device d of this process.
  ElementRange OfDevice(int64_t n, int64_t d) const { return PartOfElements(n, part(d, rank), parts()); }
  // Elements of every device of process p together.
  ElementRange OfProcess(int64_t n, int64_t p) const {
    return {PartOfElements(n, part(0, p), parts()).begin, PartOfElements(n, part(devices - 1, p), parts()).end};
  }
};

// A communicator of another device type as the host ops that save and load
// a sharded state need it (GatherShards, ScatterShards, on CPU communicators
// in comm/cpu_shard_ops.cc): its devices, the processes it spans, this one's rank, and
// `allgather`: `block` bytes of this process's (`mine`) and every other's
// into all[q * block] for every process q (the host waits for it).
struct ShardCommunicator {
  int64_t devices = 0;  // of each process (0: not known)
  int64_t processes = 1;
  int64_t rank = 0;
  std::function<void(const void* mine, void* all, size_t block)> allgather;
};
// Fills *out and returns true when `comm` holds such a communicator (CUDA
// registers its own).
using ShardCommunicatorFn = bool (*)(const Blob& comm, ShardCommunicator* out);
void RegisterShardCommunicator(ShardCommunicatorFn fn);

}  // namespace dp
