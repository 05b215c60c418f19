// Which elements of a tensor each replica owns under a sharded optimizer
// state (ZeRO-1: parallel/, the ops of comm/cpu_shard_ops.cc). A tensor of n
// elements is cut into R = devices x processes contiguous parts of whole
// 64-element chunks (the optimizer updates' PartOfElements, the last part
// short or empty); device d of process p owns part p * devices + d. The
// parts of a process's devices are consecutive, so a process owns one
// contiguous range too: what crosses between processes.
#pragma once

#include <cstdint>

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

// The processes a communicator of another device type spans, for the host
// ops that save and load a sharded state (GatherShards, ScatterShards, on
// CPU communicators in comm/cpu_shard_ops.cc): true when `comm` holds one
// (CUDA registers its own). Those ops take another type's state in one
// process only (nothing crosses processes but through CPU communicators).
using ShardCommunicatorFn = bool (*)(const Blob& comm, int64_t* processes);
void RegisterShardCommunicator(ShardCommunicatorFn fn);

}  // namespace dp
