// DeviceLoader: the input pipeline for a dataset that fits in a GPU's memory
// (Fashion-MNIST is 188 MB as float32). The dataset is copied to the device
// once; each epoch's permutation (data/batch_loader.h: the host loader's,
// sample for sample) is uploaded once, and every batch is gathered there by
// one kernel per input, into a ring of prefetch + 2 device buffers allocated
// once. So a step waits on no host copy, and training sees exactly the
// batches the host loader would have fed.
//
// Streams: the uploads and gathers are queued, in order, on the loader's own
// stream, `prefetch` batches ahead of the one Next feeds: while a step runs
// on the net's streams, the next batches are gathered beside it. Next waits
// (on the host, bounded by options.timeout) for the event recorded after
// its batch's gather, which in steady state has long passed, and feeds the
// buffer as dp_workspace_feed would a tensor on the device. A buffer is
// gathered into again only when nobody holds it (as the host loader's) and
// the run that read it has returned, so no stream ordering with the nets is
// needed. Seek just moves the queue: later gathers on the same stream
// overwrite whatever was queued before.
//
// Any device type with a context, events and GatherRows (core/storage.h)
// works; the CPU too (gathers on the caller), which is how its logic is
// tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/blob.h"
#include "core/context.h"
#include "core/event.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "data/batch_loader.h"

namespace dp {

class DeviceLoader final : public BatchLoader {
 public:
  // dataset[i] (tensors sharing dim 0, on the host or already on `device`)
  // is fed to blob blob_names[i]. Copies the dataset to `device` (shares
  // what is already there) and allocates the buffers: kOutOfMemory when the
  // device cannot hold them, kUnavailable when there is no such device;
  // kShape / kInvalidArgument for a bad dataset or options.
  DeviceLoader(std::shared_ptr<Workspace> ws, const std::vector<std::string>& blob_names,
               const std::vector<Tensor>& dataset, DeviceOption device, LoaderOptions options);
  ~DeviceLoader() override;  // waits for the gathers queued
  DeviceLoader(const DeviceLoader&) = delete;
  DeviceLoader& operator=(const DeviceLoader&) = delete;

  bool Next() override;
  void Seek(int64_t epoch, int64_t step) override;
  int64_t steps_per_epoch() const override { return batches_.steps(); }
  int64_t epoch() const override { return next_ / batches_.steps(); }
  int64_t step() const override { return next_ % batches_.steps(); }
  int64_t batch_rows() const override { return batches_.rows(); }
  DeviceOption device() const { return device_; }

 private:
  struct Slot {
    std::vector<Tensor> buffers;      // one per input, on the device: [rows, ...]
    std::unique_ptr<Event> gathered;  // recorded after the batch's gathers
  };
  // Queues the gathers of batch `seq` into its slot (uploading its epoch's
  // permutation first when another one is on the device).
  void Queue(int64_t seq);

  std::shared_ptr<Workspace> ws_;
  std::vector<LoaderInput> inputs_;
  std::vector<Blob*> blobs_;
  std::vector<size_t> row_bytes_;
  DeviceOption device_;
  LoaderOptions options_;
  BatchOrder batches_;
  std::unique_ptr<DeviceContext> ctx_;  // the loader's stream
  std::vector<Tensor> dataset_;         // on device_
  std::vector<int64_t> host_order_;     // the permutation of order_epoch_, uploaded from here
  Tensor order_;                        // ... to here (int64 [samples], on device_)
  int64_t order_epoch_ = -1;
  std::unique_ptr<Event> uploaded_;     // recorded after the upload: host_order_ may change after it
  std::vector<Slot> slots_;
  int64_t next_ = 0;    // the batch Next feeds next
  int64_t queued_ = 0;  // batches [next_, queued_) are queued
  bool end_pending_ = false;
};

}  // namespace dp
