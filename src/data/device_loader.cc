#include "data/device_loader.h"

#include "core/error.h"
#include "core/storage.h"

namespace dp {
namespace {

// The inputs the dataset's tensors make (checked: one per blob, sharing dim 0).
std::vector<LoaderInput> DatasetInputs(const std::vector<std::string>& blobs, const std::vector<Tensor>& dataset,
                                  DeviceOption device) {
  DP_ENFORCE_CODE(blobs.size() == dataset.size(), Code::kInvalidArgument, blobs.size(), " blob names for ",
                  dataset.size(), " dataset tensors");
  std::vector<LoaderInput> inputs;
  for (size_t j = 0; j < dataset.size(); ++j) {
    const Tensor& t = dataset[j];
    // tensors[j]: dp_loader_create's name for the dataset's tensors.
    DP_ENFORCE_CODE(t.defined() && t.ndim() >= 1, Code::kShape, "tensors[", j, "] ", t.DebugString(),
                    " has no sample dimension (dim 0)");
    DP_ENFORCE_CODE(t.dim(0) == dataset[0].dim(0), Code::kShape, "tensors[", j, "] ", t.DebugString(), " has ",
                    t.dim(0), " samples but tensors[0] ", dataset[0].DebugString(), " has ", dataset[0].dim(0),
                    "; they must share dim 0");
    DP_ENFORCE_CODE(t.device().type == DeviceType::kCPU || t.device() == device, Code::kInvalidArgument,
                    "tensors[", j, "] is on ", DeviceName(t.device()), "; a dataset for ", DeviceName(device),
                    " starts in host memory or there");
    inputs.push_back({blobs[j], t.dtype(), Dims(t.dims().begin() + 1, t.dims().end())});
  }
  return inputs;
}

}  // namespace

DeviceLoader::DeviceLoader(std::shared_ptr<Workspace> ws, const std::vector<std::string>& blob_names,
                           const std::vector<Tensor>& dataset, DeviceOption device, LoaderOptions options)
    : ws_(std::move(ws)),
      inputs_(DatasetInputs(blob_names, dataset, device)),
      device_(device),
      options_(options),
      batches_(CheckedBatchOrder(dataset.empty() ? 0 : dataset[0].dim(0), options_, inputs_)) {
  DP_ENFORCE_CODE(ws_, Code::kInvalidArgument, "a loader needs a workspace");
  ctx_ = CreateContext(device_);  // kUnavailable without the device
  for (size_t j = 0; j < dataset.size(); ++j) {
    const Tensor& t = dataset[j];
    if (t.device() == device_) {
      dataset_.push_back(t);
      continue;
    }
    Tensor copy(t.dims(), t.dtype(), device_);
    CopyBytes(t.nbytes(), t.raw_data(), t.device(), copy.raw_mutable_data(), device_);
    dataset_.push_back(std::move(copy));
  }
  for (const LoaderInput& in : inputs_) {
    row_bytes_.push_back(TensorBytes(in.sample_dims, in.dtype));
    blobs_.push_back(ws_->CreateBlob(in.blob));
  }
  order_ = Tensor({batches_.samples()}, DType::kInt64, device_);
  order_.raw_mutable_data();
  uploaded_ = ctx_->CreateEvent();
  slots_.resize(static_cast<size_t>(options_.prefetch) + 2);
  for (Slot& slot : slots_) {
    slot.buffers.resize(inputs_.size());
    for (size_t j = 0; j < inputs_.size(); ++j) ReadyBatchBuffer(slot.buffers[j], batches_.rows(), inputs_[j], device_);
    slot.gathered = ctx_->CreateEvent();
  }
}

DeviceLoader::~DeviceLoader() {
  // The buffers and the permutation go back to the allocator: let the
  // gathers that write and read them finish first.
  try {
    if (ctx_) ctx_->FinishDeviceComputation();
  } catch (...) {  // a failed gather was reported by Next, or nobody asked
  }
}

void DeviceLoader::Queue(int64_t seq) {
  const int64_t steps = batches_.steps(), epoch = seq / steps;
  if (order_epoch_ != epoch) {
    // The last upload read host_order_ until its event.
    if (order_epoch_ >= 0 && !uploaded_->Finish(options_.timeout))
      DP_THROW(Code::kTimeout, "the loader's upload of epoch ", order_epoch_, "'s order to ", DeviceName(device_),
               " did not finish after ", options_.timeout.count(), " ms");
    order_epoch_ = -1;
    batches_.Permute(epoch, host_order_);
    // Queued after the gathers that read the last permutation.
    CopyBytes(host_order_.size() * sizeof(int64_t), host_order_.data(), DeviceOption{}, order_.raw_mutable_data(),
              device_, ctx_.get());
    uploaded_->Reset();
    uploaded_->Record(*ctx_);
    if (!ctx_->IsAsync()) uploaded_->SetFinished();
    order_epoch_ = epoch;
  }
  const int64_t rows = batches_.BatchRows(seq);
  const int64_t* indices = order_.data<int64_t>() + batches_.FirstRow(seq % steps);
  Slot& slot = slots_[static_cast<size_t>(seq) % slots_.size()];
  for (size_t j = 0; j < inputs_.size(); ++j) {
    Tensor& buffer = slot.buffers[j];
    ReadyBatchBuffer(buffer, rows, inputs_[j], device_);
    GatherRows(device_, dataset_[j].raw_data(), batches_.samples(), row_bytes_[j], indices, rows,
               buffer.raw_mutable_data(), ctx_.get());
  }
  slot.gathered->Reset();
  slot.gathered->Record(*ctx_);
  if (!ctx_->IsAsync()) slot.gathered->SetFinished();
}

bool DeviceLoader::Next() {
  if (end_pending_) {
    end_pending_ = false;
    return false;
  }
  const int64_t steps = batches_.steps();
  try {
    // The ring holds the batch fed last (its blob still holds it), this one
    // and `prefetch` more.
    for (; queued_ <= next_ + options_.prefetch; ++queued_) Queue(queued_);
    Slot& slot = slots_[static_cast<size_t>(next_) % slots_.size()];
    if (!slot.gathered->Finish(options_.timeout))
      DP_THROW(Code::kTimeout, "the batch was not gathered on ", DeviceName(device_), " after ",
               options_.timeout.count(), " ms");
    // Published as a feed is, and noted like dp_workspace_feed's.
    for (size_t j = 0; j < blobs_.size(); ++j) {
      blobs_[j]->Publish(std::make_shared<Tensor>(slot.buffers[j]));
      ws_->feeds().NoteFed(*blobs_[j]);
    }
  } catch (Error& e) {
    throw e.Prepend(StrCat("loading batch ", next_ % steps, " of epoch ", next_ / steps));
  }
  ++next_;
  end_pending_ = next_ % steps == 0;
  return true;
}

void DeviceLoader::Seek(int64_t epoch, int64_t step) {
  next_ = queued_ = SeekTarget(epoch, step, batches_.steps());
  end_pending_ = false;
}

}  // namespace dp
