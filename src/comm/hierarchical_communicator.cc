#include "comm/hierarchical_communicator.h"

#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"

namespace dp {
namespace {

// A failure of either part must reach the peers of the other: a process
// whose host peer died stops its Gloo group too (their connections close),
// and one whose Gloo group failed aborts its host's shared memory.
bool IsTransportFailure(const Error& e) { return e.code() == Code::kUnavailable || e.code() == Code::kTimeout; }

class HierarchicalCommunicator;

class GuardedBuffered final : public BufferedCollective {
 public:
  // `allreduce_bytes`: what each run of an allreduce carries (0: a broadcast).
  GuardedBuffered(HierarchicalCommunicator* comm, std::unique_ptr<BufferedCollective> inner, size_t allreduce_bytes)
      : comm_(comm), inner_(std::move(inner)), allreduce_bytes_(allreduce_bytes) {}
  void* input() override;
  void Run(const ResultSink& sink) override;

 private:
  HierarchicalCommunicator* comm_;
  std::unique_ptr<BufferedCollective> inner_;
  size_t allreduce_bytes_;
};

class HierarchicalCommunicator final : public Communicator {
 public:
  HierarchicalCommunicator(int rank, HostLayout layout, std::unique_ptr<ShmCommunicator> local,
                           std::unique_ptr<Communicator> across)
      : rank_(rank), layout_(std::move(layout)), local_(std::move(local)), across_(std::move(across)) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(layout_.host_of.size()); }
  std::chrono::milliseconds timeout() const override { return local_->timeout(); }
  const char* backend() const override { return "shm+gloo"; }

  void AllreduceSum(void* data, int64_t count, DType dtype) override {
    if (count > 0) CountAllreduce(static_cast<size_t>(count) * DTypeSize(dtype));
    Guard([&] {
      local_->AllreduceSum(data, count, dtype,
                           [&](void* slice, int64_t, int64_t n) { across_->AllreduceSum(slice, n, dtype); });
    });
  }

  void Broadcast(void* data, size_t nbytes, int root) override {
    CheckRoot(root);
    const int host = layout_.host_of[static_cast<size_t>(root)];
    Guard([&] {
      // Across the hosts in the root's column (local rank), then inside each host from it.
      local_->Broadcast(data, nbytes, layout_.local_of[static_cast<size_t>(root)],
                        [&](void* d, size_t n) { across_->Broadcast(d, n, host); });
    });
  }

  void Allgather(const void* in, void* out, size_t nbytes) override {
    const size_t hosts = layout_.ranks_of.size(), per_host = layout_.ranks_of[0].size();
    std::vector<char> host_blocks(per_host * nbytes), all(hosts * per_host * nbytes);
    Guard([&] {
      local_->Allgather(in, host_blocks.data(), nbytes);
      across_->Allgather(host_blocks.data(), all.data(), per_host * nbytes);
    });
    // (host, local) order -> rank order.
    for (size_t h = 0; h < hosts; ++h)
      for (size_t l = 0; l < per_host; ++l)
        if (nbytes > 0)
          std::memcpy(static_cast<char*>(out) + static_cast<size_t>(layout_.ranks_of[h][l]) * nbytes,
                      all.data() + (h * per_host + l) * nbytes, nbytes);
  }

  // Each rank's block through its host, then its column: the blocks laid
  // out local rank by local rank (local rank l's part: the blocks of the
  // ranks with local rank l, host by host) are reduce-scattered inside the
  // host, then each column reduce-scatters its part across the hosts, so
  // that rank r gets block r summed over its host's processes (rank order)
  // and then over the hosts (host order). (n - 1) / n of the blocks cross
  // each link, not all of them as by an allreduce of every block.
  void ReduceScatterSum(void* data, int64_t count, DType dtype) override {
    DP_ENFORCE(count >= 0, "ReduceScatterSum: negative count ", count);
    if (count == 0) return;
    const size_t hosts = layout_.ranks_of.size(), per_host = layout_.ranks_of[0].size();
    const size_t block = static_cast<size_t>(count) * DTypeSize(dtype);
    char* blocks = static_cast<char*>(data);
    std::vector<char> by_local(hosts * per_host * block);
    for (size_t l = 0; l < per_host; ++l)
      for (size_t h = 0; h < hosts; ++h)
        std::memcpy(by_local.data() + (l * hosts + h) * block,
                    blocks + static_cast<size_t>(layout_.ranks_of[h][l]) * block, block);
    const auto me = static_cast<size_t>(rank_);
    const auto l = static_cast<size_t>(layout_.local_of[me]), h = static_cast<size_t>(layout_.host_of[me]);
    Guard([&] {
      local_->ReduceScatterSum(by_local.data(), count * static_cast<int64_t>(hosts), dtype);
      across_->ReduceScatterSum(by_local.data() + l * hosts * block, count, dtype);
    });
    std::memcpy(blocks + me * block, by_local.data() + (l * hosts + h) * block, block);
  }

  void Barrier() override {
    // Every process of the host has arrived, then every host (each column
    // waits for its counterparts, which waited for their hosts).
    Guard([&] {
      local_->Barrier();
      across_->Barrier();
    });
  }

  std::unique_ptr<PreparedCollective> PrepareAllreduceSum(void* data, int64_t count, DType dtype) override {
    return InPlaceThrough(PrepareBufferedAllreduceSum(count, dtype), data,
                          static_cast<size_t>(count < 0 ? 0 : count) * DTypeSize(dtype), true);
  }

  std::unique_ptr<PreparedCollective> PrepareBroadcast(void* data, size_t nbytes, int root) override {
    return InPlaceThrough(PrepareBufferedBroadcast(nbytes, root), data, nbytes, rank_ == root);
  }

  std::unique_ptr<BufferedCollective> PrepareBufferedAllreduceSum(int64_t count, DType dtype) override {
    std::unique_ptr<BufferedCollective> inner;
    Guard([&] {
      // Column c's Gloo allreduce, prepared on this process's slice in shared memory.
      inner = local_->PrepareBufferedAllreduceSum(count, dtype, [&](void* slice, int64_t, int64_t n) {
        return across_->PrepareAllreduceSum(slice, n, dtype);
      });
    });
    return std::make_unique<GuardedBuffered>(this, std::move(inner),
                                             static_cast<size_t>(count < 0 ? 0 : count) * DTypeSize(dtype));
  }

  std::unique_ptr<BufferedCollective> PrepareBufferedBroadcast(size_t nbytes, int root) override {
    CheckRoot(root);
    const int host = layout_.host_of[static_cast<size_t>(root)];
    std::unique_ptr<BufferedCollective> inner;
    Guard([&] {
      inner = local_->PrepareBufferedBroadcast(nbytes, layout_.local_of[static_cast<size_t>(root)],
                                               [&](void* d, size_t n) { return across_->PrepareBroadcast(d, n, host); });
    });
    return std::make_unique<GuardedBuffered>(this, std::move(inner), 0);
  }

  void Abort(const std::string& why) noexcept override {
    local_->Abort(why);
    across_->Abort(why);
  }

  friend class GuardedBuffered;  // counts its runs' bytes

  // Runs body; a transport failure of either part aborts both.
  template <typename Body>
  void Guard(const Body& body) {
    try {
      body();
    } catch (const Error& e) {
      if (IsTransportFailure(e)) Abort(e.message());
      throw;
    }
  }

 private:
  void CheckRoot(int root) const {
    DP_ENFORCE(root >= 0 && root < size(), "Broadcast: root rank ", root, " is out of range for ", size(),
               " processes");
  }

  const int rank_;
  const HostLayout layout_;
  std::unique_ptr<ShmCommunicator> local_;
  std::unique_ptr<Communicator> across_;  // this process's column: the same local rank on every host
};

void* GuardedBuffered::input() {
  void* p = nullptr;
  comm_->Guard([&] { p = inner_->input(); });
  return p;
}

void GuardedBuffered::Run(const ResultSink& sink) {
  comm_->Guard([&] { inner_->Run(sink); });
  if (allreduce_bytes_ > 0) comm_->CountAllreduce(allreduce_bytes_);
}

}  // namespace

std::unique_ptr<Communicator> MakeHierarchical(int rank, HostLayout layout, std::unique_ptr<ShmCommunicator> local,
                                               std::unique_ptr<Communicator> across) {
  DP_ENFORCE(local != nullptr && across != nullptr, "hierarchical communicator: both parts are needed");
  return std::make_unique<HierarchicalCommunicator>(rank, std::move(layout), std::move(local), std::move(across));
}

}  // namespace dp
