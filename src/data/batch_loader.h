// What every loader shares: the inputs it feeds, its options, the order it
// feeds samples in (BatchOrder) and its interface (BatchLoader). Two
// loaders implement it: Loader (data/loader.h) gathers batches on the host,
// from host memory or a callback, and feeds them there or copies them to a
// GPU ahead of the steps; DeviceLoader (data/device_loader.h) keeps
// the dataset on a GPU and gathers there. Both feed the same samples in the
// same order for the same options, so which one runs never changes training.
//
// Order: epoch e visits the samples in a permutation that depends only on
// (seed, e) (the identity without shuffling), so a run that seeks to (e, s)
// after a restart sees exactly the batches it would have seen. With several
// processes (num_shards) every process computes the same permutation and
// takes its part of each global batch: rows [shard * B / S, (shard + 1) *
// B / S) of global batch k.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace dp {

// One input of every sample: the blob it is fed to, its element type and
// its shape without the batch dimension.
struct LoaderInput {
  std::string blob;
  DType dtype = DType::kFloat32;
  Dims sample_dims;
};

struct LoaderOptions {
  int64_t batch_size = 0;     // global batch (all processes), > 0
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = true;      // a last partial batch is skipped (required with num_shards > 1)
  int num_shards = 1;         // processes sharing each global batch; batch_size divides by it
  int shard = 0;              // this process, in [0, num_shards)
  int prefetch = 2;           // batches gathered ahead, >= 1
  std::chrono::milliseconds timeout{std::chrono::minutes(1)};  // longest Next waits for a batch
  // Where the host loader feeds its batches: the host, or a device it
  // stages them to (data/loader.h, "Staging").
  DeviceOption target;
  // Host loader tests: false starts no thread (Next gathers every batch);
  // chunk_rows > 0 sets the rows of a chunk (0: about 32 KiB of samples);
  // force_staging stages even to a host target (copies on a CPU context),
  // so that the staging's logic runs on machines without a GPU.
  bool gather_ahead = true;
  int64_t chunk_rows = 0;
  bool force_staging = false;
};

// Checks options and inputs (kInvalidArgument naming what is wrong, kDType
// for an input without one).
void CheckLoaderSetup(const LoaderOptions& options, const std::vector<LoaderInput>& inputs);

// Which samples make each batch of a dataset of `samples` samples.
class BatchOrder {
 public:
  // kInvalidArgument when the dataset makes no (full) batch.
  BatchOrder(int64_t samples, const LoaderOptions& options);

  int64_t samples() const { return samples_; }
  int64_t steps() const { return steps_; }  // batches per epoch
  int64_t rows() const { return rows_; }    // this process's rows of a full batch
  // This process's rows of batch `seq` (counted over epochs from 0): rows(),
  // or fewer for the last batch of an epoch kept without drop_last.
  int64_t BatchRows(int64_t seq) const;
  // Where this process's rows of step `step` start in its epoch's permutation.
  int64_t FirstRow(int64_t step) const { return step * batch_size_ + shard_ * rows_; }
  // The permutation of `epoch` into `order` (resized to samples()).
  void Permute(int64_t epoch, std::vector<int64_t>& order) const;

 private:
  int64_t samples_ = 0, batch_size_ = 0, steps_ = 1, rows_ = 0;
  int shard_ = 0;
  bool shuffle_ = true;
  uint64_t seed_ = 0;
};

// A loader, as the C API drives it (dp_loader_*).
class BatchLoader {
 public:
  virtual ~BatchLoader() = default;
  // Feeds the next batch of the epoch into the inputs' blobs and returns
  // true; at the end of an epoch returns false once, feeding nothing (the
  // next call starts the next epoch). kTimeout when the batch is not ready
  // within options.timeout; a failed batch's error.
  virtual bool Next() = 0;
  // The next Next() feeds step `step` of epoch `epoch` (both from 0).
  virtual void Seek(int64_t epoch, int64_t step) = 0;
  virtual int64_t steps_per_epoch() const = 0;
  virtual int64_t epoch() const = 0;  // of the batch the next Next() feeds
  virtual int64_t step() const = 0;
  virtual int64_t batch_rows() const = 0;  // this process's rows per batch
};

// Makes `buffer` a batch buffer of `rows` rows of `input` on `device`, with
// its memory allocated, that only the loader holds: the same memory when
// nobody else holds it (the blob fed with it was fed again, the replicas'
// views of it replaced) and it is large enough, else fresh memory (what
// somebody still holds, a fetched tensor, is theirs now).
void ReadyBatchBuffer(Tensor& buffer, int64_t rows, const LoaderInput& input, DeviceOption device);

// CheckLoaderSetup, then the order of a dataset of `samples` samples.
BatchOrder CheckedBatchOrder(int64_t samples, const LoaderOptions& options, const std::vector<LoaderInput>& inputs);

// Checks a Seek's target against an epoch of `steps` batches (kOutOfRange);
// returns the sequence number of that batch.
int64_t SeekTarget(int64_t epoch, int64_t step, int64_t steps);

}  // namespace dp
