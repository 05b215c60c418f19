// HierarchicalCommunicator: processes on several hosts, L on each, the
// processes of a host combined through shared memory (ShmCommunicator) and
// the hosts through Gloo, one Gloo group per local rank ("column"): local
// rank c of every host. An allreduce is the two-dimensional one of
// Horovod's and NCCL's hierarchical modes:
//   reduce-scatter inside each host (shared memory; local rank c owns
//   slice c), allreduce of slice c across the hosts (column c's Gloo group,
//   in place in shared memory: L groups send in parallel, each 1/L of the
//   data), allgather inside each host (the peers read the slices).
// A broadcast from rank R goes across the hosts in R's column, then inside
// each host from that column's process. Ranks are the job's; hosts are
// numbered by their lowest rank, local ranks by rank inside a host.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/shm_communicator.h"

namespace dp {

struct HostLayout {
  // host_of[rank], local_of[rank]; ranks_of[host][local] = rank.
  std::vector<int> host_of, local_of;
  std::vector<std::vector<int>> ranks_of;
};

std::unique_ptr<Communicator> MakeHierarchical(int rank, HostLayout layout, std::unique_ptr<ShmCommunicator> local,
                                               std::unique_ptr<Communicator> across);

}  // namespace dp
