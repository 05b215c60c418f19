// Loader: the input pipeline on the host. It feeds a workspace one batch
// per step from an in-memory dataset (tensors sharing dim 0) or a callback
// that fills a batch into memory the loader provides, in the seeded order of
// data/batch_loader.h, and gathers the next batches on its own thread while
// the current step runs. (A dataset held on a GPU: data/device_loader.h.)
//
// Who gathers: a batch is gathered in chunks of rows. For an in-memory
// dataset (a memory copy per row) the loader's thread runs at the lowest
// priority (SCHED_IDLE): it gathers ahead on CPU time that nothing else
// wants (a GPU step, spare cores, the gaps of a step), and never preempts
// the threads running the nets. When Next needs a batch the thread has not
// finished, Next gathers the chunks nobody has taken itself, on the caller,
// and while it waits for chunks the thread holds, the thread runs at the
// normal priority (else a busy machine could keep it, and Next, waiting).
// (On a machine whose every core runs dp's nets, a background gather at
// normal priority takes a core from one replica in the middle of a step,
// and the others wait for it at the update: measured 2-7% slower than
// gathering on the caller.) A callback source is filled whole by the
// loader's thread at normal priority (user code may block or do I/O).
//
// Memory: a ring of prefetch + 2 batch buffers, allocated once. A buffer is
// refilled only when nothing else holds it (the blob fed with it has been
// fed again, and the replicas' views of it, SplitBatch's parts, have been
// replaced by the next step's); one somebody still holds (a fetched tensor)
// is left to them and replaced by a fresh one. So in steady state a step
// allocates nothing and copies each sample once, from the dataset into the
// buffer that the net reads in place.
//
// Staging (options.target a GPU): for a dataset that does not fit on the
// device, or batches a callback makes. The ring's host buffers are
// page-locked (Storage::AllocatePinned), and as soon as a batch is
// gathered, whoever finished it queues its copy into the slot's device
// buffers on the loader's own stream (its copy stream) and records an
// event: the copy of batch k + 1 runs while step k computes, and Next waits
// on the host for its batch's event (long passed in steady state) and
// feeds the device buffers, as dp_workspace_feed would tensors on the
// device. A host buffer is gathered into again only after its last copy
// finished (its event); a device buffer, like a host one, only when nobody
// holds it and the run that read it has returned. So no step waits on a
// host copy and no stream of a net needs to wait on the loader's.
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
#include "core/context.h"
#include "core/event.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "data/batch_loader.h"

namespace dp {

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
  // Whether Fill may also run on other threads, several calls at once on
  // distinct rows of one batch (a memory gather may; a user callback not).
  virtual bool fills_in_parts() const { return false; }
};

// Rows gathered from tensors that share dim 0 (shared, never copied whole).
std::unique_ptr<BatchSource> MakeTensorSource(std::vector<Tensor> tensors);

class Loader final : public BatchLoader {
 public:
  // Checks the inputs against the source (kInvalidArgument naming the blob),
  // allocates the buffers and starts the thread (kUnavailable when it cannot).
  Loader(std::shared_ptr<Workspace> ws, std::vector<LoaderInput> inputs, std::unique_ptr<BatchSource> source,
         LoaderOptions options);
  ~Loader() override;  // stops the thread after the batch it is filling
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // BatchLoader's; Next rethrows what the source threw for this batch.
  bool Next() override;
  void Seek(int64_t epoch, int64_t step) override;
  int64_t steps_per_epoch() const override { return steps_; }
  int64_t epoch() const override { return next_ / steps_; }
  int64_t step() const override { return next_ % steps_; }
  int64_t batch_rows() const override { return rows_; }

 private:
  struct Slot {
    std::vector<Tensor> tensors;  // one per input: the buffer, shaped [rows, ...]
    int64_t rows = 0;             // rows filled (the last batch may be short)
    std::exception_ptr error;     // what Fill threw for this batch
    // Staging: the batch on the target, and the copy's event (recorded
    // once copy_queued: the host buffers are read until it).
    std::vector<Tensor> staged;
    std::unique_ptr<Event> copied;
    bool copy_queued = false;
  };
  // The batch being gathered: sequence number produced_, set up under mu_
  // by whichever of the loader's thread and Next comes first (Prepare),
  // its chunks then taken (under mu_) and filled (outside it) by both.
  struct Job {
    int64_t seq = -1;          // -1: none
    uint64_t generation = 0;   // generation_ it was prepared in (a Seek abandons it)
    Slot* slot = nullptr;
    const int64_t* indices = nullptr;  // the batch's samples, a run of order_
    int64_t rows = 0, chunk_rows = 1, chunks = 0;
    int64_t taken = 0, done = 0, in_flight = 0;
    std::exception_ptr error;  // the first chunk's failure
  };

  void Produce();
  // Sets up job_ for batch produced_ unless it is; waits for the chunks of
  // an abandoned job to land first (they write into a ring buffer).
  void Prepare(std::unique_lock<std::mutex>& lock);
  // Takes and fills chunks of job_ until none is left, with `buffers` (this
  // thread's own array) pointing at each chunk's rows; mu_ held on entry
  // and on return, not while copying.
  void FillChunks(std::unique_lock<std::mutex>& lock, std::vector<void*>& buffers);
  // mu_ held: job_'s last chunk landed; publish the batch (queueing its
  // copy to the target when staging).
  void Finish();
  // Staging, mu_ held: queues the copy of `slot`'s host buffers to its
  // device buffers on copy_ctx_, then records slot.copied.
  void QueueCopy(Slot& slot);
  // Staging: waits (bounded) for the last copy out of `slot`'s host buffers.
  void AwaitCopy(Slot& slot);
  // The loader's thread at the lowest priority (SCHED_IDLE) or the normal one.
  void SetThreadIdle(bool idle);

  std::shared_ptr<Workspace> ws_;
  std::vector<LoaderInput> inputs_;
  std::vector<Blob*> blobs_;
  std::vector<size_t> row_bytes_;
  std::unique_ptr<BatchSource> source_;
  LoaderOptions options_;
  BatchOrder batches_;
  int64_t steps_ = 1;  // batches per epoch
  int64_t rows_ = 0;   // this process's rows of a full batch
  bool helped_ = false;  // Next gathers too (source_->fills_in_parts())
  bool staging_ = false;  // batches are copied to options_.target
  std::unique_ptr<DeviceContext> copy_ctx_;  // staging: the copy stream (used under mu_)
  std::vector<Slot> slots_;

  std::vector<int64_t> order_;  // mu_ (read outside it by chunks in flight): this epoch's permutation
  int64_t order_epoch_ = -1;    // mu_
  std::vector<void*> thread_buffers_, caller_buffers_;  // each party's chunk pointers

  std::mutex mu_;
  std::condition_variable produced_cv_, consumed_cv_, landed_cv_;
  Job job_;                  // mu_
  int64_t next_ = 0;         // mu_: sequence number of the batch Next feeds next
  int64_t produced_ = 0;     // mu_: batches [next_, produced_) are ready
  uint64_t generation_ = 0;  // mu_: bumped by Seek; fills of older generations are dropped
  bool end_pending_ = false; // consumer only: the last Next fed an epoch's last batch
  bool stop_ = false;        // mu_
  std::thread thread_;
};

}  // namespace dp
