// The default buffered collectives: a private staging buffer and the
// in-place collective prepared on it (Gloo's registered buffers).
#include "comm/communicator.h"

#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"

namespace dp {
namespace {

class StagedInPlace final : public BufferedCollective {
 public:
  explicit StagedInPlace(size_t nbytes) : bytes_(nbytes) {}
  void Bind(std::unique_ptr<PreparedCollective> run) { run_ = std::move(run); }
  char* data() { return bytes_.data(); }

  void* input() override { return bytes_.data(); }
  void Run(const ResultSink& sink) override {
    run_->Run();
    sink(bytes_.data(), 0, bytes_.size());
  }

 private:
  std::vector<char> bytes_;
  std::unique_ptr<PreparedCollective> run_;
};

class InPlace final : public PreparedCollective {
 public:
  InPlace(std::unique_ptr<BufferedCollective> buffered, void* data, size_t nbytes, bool writes_input)
      : buffered_(std::move(buffered)), data_(static_cast<char*>(data)), nbytes_(nbytes), writes_(writes_input) {}
  void Run() override {
    void* in = buffered_->input();
    if (writes_ && nbytes_ > 0) std::memcpy(in, data_, nbytes_);
    auto copy = [this](const void* piece, size_t off, size_t n) {
      if (data_ + off != piece) std::memcpy(data_ + off, piece, n);
    };
    buffered_->Run(SinkOf(copy));
  }

 private:
  std::unique_ptr<BufferedCollective> buffered_;
  char* data_;
  const size_t nbytes_;
  const bool writes_;
};

// ReduceScatterSum on a private buffer of size() blocks.
class StagedReduceScatter final : public BufferedCollective {
 public:
  StagedReduceScatter(Communicator* comm, int64_t count, DType dtype)
      : comm_(comm), count_(count), dtype_(dtype),
        bytes_(static_cast<size_t>(count) * DTypeSize(dtype) * static_cast<size_t>(comm->size())) {}
  void* input() override { return bytes_.data(); }
  void Run(const ResultSink& sink) override {
    comm_->ReduceScatterSum(bytes_.data(), count_, dtype_);
    const size_t block = static_cast<size_t>(count_) * DTypeSize(dtype_), at = block * static_cast<size_t>(comm_->rank());
    sink(bytes_.data() + at, at, block);
  }

 private:
  Communicator* comm_;  // outlives this
  const int64_t count_;
  const DType dtype_;
  std::vector<char> bytes_;
};

// Allgather from a private input buffer into a private output.
class StagedAllgather final : public BufferedCollective {
 public:
  StagedAllgather(Communicator* comm, size_t nbytes)
      : comm_(comm), nbytes_(nbytes), in_(nbytes), out_(nbytes * static_cast<size_t>(comm->size())) {}
  void* input() override { return in_.data(); }
  void Run(const ResultSink& sink) override {
    comm_->Allgather(in_.data(), out_.data(), nbytes_);
    for (int r = 0; r < comm_->size(); ++r) {
      const size_t at = nbytes_ * static_cast<size_t>(r);
      sink(out_.data() + at, at, nbytes_);
    }
  }

 private:
  Communicator* comm_;
  const size_t nbytes_;
  std::vector<char> in_, out_;
};

}  // namespace

std::unique_ptr<PreparedCollective> InPlaceThrough(std::unique_ptr<BufferedCollective> buffered, void* data,
                                                   size_t nbytes, bool writes_input) {
  return std::make_unique<InPlace>(std::move(buffered), data, nbytes, writes_input);
}

std::unique_ptr<BufferedCollective> Communicator::PrepareBufferedAllreduceSum(int64_t count, DType dtype) {
  auto staged = std::make_unique<StagedInPlace>(static_cast<size_t>(count < 0 ? 0 : count) * DTypeSize(dtype));
  staged->Bind(PrepareAllreduceSum(staged->data(), count, dtype));
  return staged;
}

std::unique_ptr<BufferedCollective> Communicator::PrepareBufferedReduceScatterSum(int64_t count, DType dtype) {
  DP_ENFORCE(count >= 0, "ReduceScatterSum: negative count ", count);
  return std::make_unique<StagedReduceScatter>(this, count, dtype);
}

std::unique_ptr<BufferedCollective> Communicator::PrepareBufferedAllgather(size_t nbytes) {
  return std::make_unique<StagedAllgather>(this, nbytes);
}

std::unique_ptr<BufferedCollective> Communicator::PrepareBufferedBroadcast(size_t nbytes, int root) {
  auto staged = std::make_unique<StagedInPlace>(nbytes);
  staged->Bind(PrepareBroadcast(staged->data(), nbytes, root));
  return staged;
}

}  // namespace dp
