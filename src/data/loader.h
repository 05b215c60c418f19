// Loader: the input pipeline. It feeds a workspace one batch per step from
// an in-memory dataset (tensors sharing dim 0) or a callback that fills a
// batch into memory the loader provides, in a seeded shuffled order, and
// gathers the next batches on its own thread while the current step runs.
//
// Order: epoch e visits the samples in a permutation that depends only on
// (seed, e) (the identity without shuffling), so a run that seeks to (e, s)
// after a restart sees exactly the batches it would have seen. With several
// processes (num_shards) every process computes the same permutation and
// takes its part of each global batch: rows [shard * B / S, (shard + 1) *
// B / S) of global batch k.
//
// Memory: a ring of prefetch + 2 batch buffers, allocated once. A buffer is
// refilled only when nothing else holds it (the blob fed with it has been
// fed again, and the replicas' views of it, SplitBatch's parts, have been
// replaced by the next step's); one somebody still holds (a fetched tensor)
// is left to them and replaced by a fresh one. So in steady state a step
// allocates nothing and copies each sample once, from the dataset into the
// buffer that the net reads in place.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/blob.h"
#include "core/tensor.h"
#include "core/workspace.h"

namespace dp {

// One input of every sample: the blob it is fed to, its element type and
// its shape without the batch dimension.
struct LoaderInput {
  std::string blob;
  DType dtype = DType::kFloat32;
  Dims sample_dims;
};

// Where the samples come from.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Samples in the dataset.
  virtual int64_t size() const = 0;
  // Writes sample indices[i] of input j into rows i of buffers[j] (each
  // input's rows are contiguous, row_bytes[j] apart), for i < count. Runs on
  // the loader's thread; throws dp::Error on failure.
  virtual void Fill(const int64_t* indices, size_t count, void* const* buffers, const size_t* row_bytes) = 0;
};

// Rows gathered from tensors that share dim 0 (shared, never copied whole).
std::unique_ptr<BatchSource> MakeTensorSource(std::vector<Tensor> tensors);

struct LoaderOptions {
  int64_t batch_size = 0;     // global batch (all processes), > 0
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = true;      // a last partial batch is skipped (required with num_shards > 1)
  int num_shards = 1;         // processes sharing each global batch; batch_size divides by it
  int shard = 0;              // this process, in [0, num_shards)
  int prefetch = 2;           // batches gathered ahead, >= 1
  std::chrono::milliseconds timeout{std::chrono::minutes(1)};  // longest Next waits for a batch
};

class Loader {
 public:
  // Checks the inputs against the source (kInvalidArgument naming the blob),
  // allocates the buffers and starts the thread (kUnavailable when it cannot).
  Loader(std::shared_ptr<Workspace> ws, std::vector<LoaderInput> inputs, std::unique_ptr<BatchSource> source,
         LoaderOptions options);
  ~Loader();  // stops the thread after the batch it is filling
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Feeds the next batch of the epoch into the inputs' blobs and returns
  // true; at the end of an epoch returns false once, feeding nothing (the
  // next call starts the next epoch). Rethrows what the source threw for
  // this batch; kTimeout when it is not ready within options.timeout.
  bool Next();
  // The next Next() feeds step `step` of epoch `epoch` (both from 0).
  void Seek(int64_t epoch, int64_t step);

  int64_t steps_per_epoch() const { return steps_; }
  int64_t epoch() const { return next_ / steps_; }  // of the batch the next Next() feeds
  int64_t step() const { return next_ % steps_; }
  int64_t batch_rows() const { return rows_; }     // this process's rows per batch

 private:
  struct Slot {
    std::vector<Tensor> tensors;  // one per input: the buffer, shaped [rows, ...]
    int64_t rows = 0;             // rows filled (the last batch may be short)
    std::exception_ptr error;     // what Fill threw for this batch
  };

  void Produce();
  void FillSlot(Slot& slot, int64_t seq);
  // The permutation of `epoch` into order_ (the producer's).
  void Permute(int64_t epoch);
  int64_t BatchRows(int64_t seq) const;

  std::shared_ptr<Workspace> ws_;
  std::vector<LoaderInput> inputs_;
  std::vector<Blob*> blobs_;
  std::vector<size_t> row_bytes_;
  std::unique_ptr<BatchSource> source_;
  LoaderOptions options_;
  int64_t steps_ = 1;  // batches per epoch
  int64_t rows_ = 0;   // this process's rows of a full batch
  std::vector<Slot> slots_;

  // Producer-only state.
  std::vector<int64_t> order_;  // this epoch's permutation; a batch's indices are a run of it
  int64_t order_epoch_ = -1;
  std::vector<void*> buffers_;

  std::mutex mu_;
  std::condition_variable produced_cv_, consumed_cv_;
  int64_t next_ = 0;         // mu_: sequence number of the batch Next feeds next
  int64_t produced_ = 0;     // mu_: batches [next_, produced_) are ready
  uint64_t generation_ = 0;  // mu_: bumped by Seek; fills of older generations are dropped
  bool end_pending_ = false; // consumer only: the last Next fed an epoch's last batch
  bool stop_ = false;        // mu_
  std::thread thread_;
};

}  // namespace dp
