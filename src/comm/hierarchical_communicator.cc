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

// A reduce-scatter through the host, then the column (see
// HierarchicalCommunicator::ReduceScatterSum), prepared once: the caller's
// blocks (rank order) go, laid out local rank by local rank, into the
// host's shared-memory reduce-scatter, whose result for this process (its
// column's blocks summed over the host) goes straight into the column's
// reduce-scatter across the hosts.
class HierarchicalReduceScatter final : public BufferedCollective {
 public:
  HierarchicalReduceScatter(HierarchicalCommunicator* comm, std::unique_ptr<BufferedCollective> local,
                            std::unique_ptr<BufferedCollective> across, const HostLayout& layout, int rank,
                            size_t block)
      : comm_(comm), local_(std::move(local)), across_(std::move(across)), block_(block),
        blocks_(block * layout.host_of.size()) {
    const size_t hosts = layout.ranks_of.size();
    for (size_t r = 0; r < layout.host_of.size(); ++r)
      position_.push_back(static_cast<size_t>(layout.local_of[r]) * hosts + static_cast<size_t>(layout.host_of[r]));
    const auto me = static_cast<size_t>(rank);
    column_at_ = static_cast<size_t>(layout.local_of[me]) * hosts * block;
    host_at_ = static_cast<size_t>(layout.host_of[me]) * block;
    rank_at_ = me * block;
  }
  void* input() override { return blocks_.data(); }
  void Run(const ResultSink& sink) override;

 private:
  HierarchicalCommunicator* comm_;
  std::unique_ptr<BufferedCollective> local_, across_;
  const size_t block_;
  std::vector<char> blocks_;     // the caller's, rank order
  std::vector<size_t> position_;  // rank r's block in the host's layout
  size_t column_at_ = 0;          // this process's part of the host's layout
  size_t host_at_ = 0;            // this process's block in the column's
  size_t rank_at_ = 0;            // and in the caller's
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
    InPlaceThrough(PrepareBufferedReduceScatterSum(count, dtype), data,
                   static_cast<size_t>(count) * DTypeSize(dtype) * layout_.host_of.size(), true)
        ->Run();
  }

  std::unique_ptr<BufferedCollective> PrepareBufferedReduceScatterSum(int64_t count, DType dtype) override {
    DP_ENFORCE(count >= 0, "ReduceScatterSum: negative count ", count);
    const auto hosts = static_cast<int64_t>(layout_.ranks_of.size());
    std::unique_ptr<BufferedCollective> local, across;
    Guard([&] {
      local = local_->PrepareBufferedReduceScatterSum(count * hosts, dtype);
      across = across_->PrepareBufferedReduceScatterSum(count, dtype);
    });
    return std::make_unique<HierarchicalReduceScatter>(this, std::move(local), std::move(across), layout_, rank_,
                                                       static_cast<size_t>(count) * DTypeSize(dtype));
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

void HierarchicalReduceScatter::Run(const ResultSink& sink) {
  if (block_ == 0) return;
  comm_->Guard([&] {
    char* host_in = static_cast<char*>(local_->input());
    for (size_t r = 0; r < position_.size(); ++r)
      std::memcpy(host_in + position_[r] * block_, blocks_.data() + r * block_, block_);
    char* column_in = static_cast<char*>(across_->input());
    auto to_column = [&](const void* piece, size_t off, size_t n) {
      std::memcpy(column_in + (off - column_at_), piece, n);
    };
    local_->Run(SinkOf(to_column));
    auto out = [&](const void* piece, size_t off, size_t n) { sink(piece, rank_at_ + (off - host_at_), n); };
    across_->Run(SinkOf(out));
  });
}

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
