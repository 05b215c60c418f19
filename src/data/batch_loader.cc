#include "data/batch_loader.h"

#include <algorithm>
#include <atomic>
#include <unordered_set>

#include "core/error.h"

namespace dp {
namespace {

// splitmix64: the permutations' generator (fixed, so an order is the same
// on every platform and in every release).
uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void CheckLoaderSetup(const LoaderOptions& o, const std::vector<LoaderInput>& inputs) {
  DP_ENFORCE_CODE(!inputs.empty(), Code::kInvalidArgument, "a loader needs at least one input blob");
  DP_ENFORCE_CODE(o.batch_size > 0, Code::kInvalidArgument, "batch_size must be positive, got ", o.batch_size);
  DP_ENFORCE_CODE(o.num_shards >= 1 && o.shard >= 0 && o.shard < o.num_shards, Code::kInvalidArgument, "shard ",
                  o.shard, " of ", o.num_shards, " processes: need 0 <= shard < num_shards");
  DP_ENFORCE_CODE(o.batch_size % o.num_shards == 0, Code::kInvalidArgument, "batch_size ", o.batch_size,
                  " does not divide by the ", o.num_shards, " processes that share each batch");
  DP_ENFORCE_CODE(o.num_shards == 1 || o.drop_last, Code::kInvalidArgument,
                  "with several processes the last partial batch must be dropped (drop_last)");
  DP_ENFORCE_CODE(o.prefetch >= 1 && o.prefetch <= 64, Code::kInvalidArgument, "prefetch must be in 1..64, got ",
                  o.prefetch);
  DP_ENFORCE_CODE(o.timeout.count() > 0, Code::kInvalidArgument, "timeout must be positive");
  std::unordered_set<std::string> names;
  for (const LoaderInput& in : inputs) {
    DP_ENFORCE_CODE(!in.blob.empty(), Code::kInvalidArgument, "an input's blob name is empty");
    DP_ENFORCE_CODE(names.insert(in.blob).second, Code::kInvalidArgument, "blob '", in.blob,
                    "' is named by two inputs");
    DP_ENFORCE_CODE(in.dtype != DType::kUndefined, Code::kDType, "input '", in.blob, "' has no dtype");
  }
}

BatchOrder::BatchOrder(int64_t samples, const LoaderOptions& o)
    : samples_(samples),
      batch_size_(o.batch_size),
      rows_(o.batch_size / o.num_shards),
      shard_(o.shard),
      shuffle_(o.shuffle),
      seed_(o.seed) {
  steps_ = o.drop_last ? samples / o.batch_size : (samples + o.batch_size - 1) / o.batch_size;
  DP_ENFORCE_CODE(steps_ >= 1, Code::kInvalidArgument, "the dataset's ", samples, " samples make no ",
                  o.drop_last ? "full " : "", "batch of batch_size ", o.batch_size);
}

int64_t BatchOrder::BatchRows(int64_t seq) const {
  const int64_t step = seq % steps_;
  const int64_t left = samples_ - step * batch_size_;
  return std::min(rows_, left);  // short only for the last batch without drop_last (one process)
}

void BatchOrder::Permute(int64_t epoch, std::vector<int64_t>& order) const {
  order.resize(static_cast<size_t>(samples_));
  for (int64_t i = 0; i < samples_; ++i) order[static_cast<size_t>(i)] = i;
  if (!shuffle_) return;
  uint64_t state = seed_ ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(epoch + 1));
  for (int64_t i = samples_ - 1; i > 0; --i) {
    // Lemire's multiply-shift: an index in [0, i] from 64 random bits.
    const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(SplitMix(state)) *
                                         static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
}

void ReadyBatchBuffer(Tensor& t, int64_t rows, const LoaderInput& input, DeviceOption device) {
  Dims d{rows};
  d.insert(d.end(), input.sample_dims.begin(), input.sample_dims.end());
  std::shared_ptr<Storage> storage = t.storage();
  const bool sole = storage && storage.use_count() == 2 && storage->library_owned() && storage->device() == device;
  if (sole) std::atomic_thread_fence(std::memory_order_acquire);  // the last holder's reads are done
  if (sole && t.dims() == d && t.dtype() == input.dtype) {
    storage.reset();
  } else if (sole && storage->nbytes() >= TensorBytes(d, input.dtype)) {
    t = Tensor();  // drop this tensor's reference first: the storage stays solely owned
    t = Tensor::FromStorage(std::move(d), input.dtype, std::move(storage));
  } else {
    storage.reset();
    t = Tensor(std::move(d), input.dtype, device);
  }
  t.raw_mutable_data();  // allocated here, before anything writes it
}

BatchOrder CheckedBatchOrder(int64_t samples, const LoaderOptions& options, const std::vector<LoaderInput>& inputs) {
  CheckLoaderSetup(options, inputs);
  return BatchOrder(samples, options);
}

int64_t SeekTarget(int64_t epoch, int64_t step, int64_t steps) {
  DP_ENFORCE_CODE(epoch >= 0 && step >= 0 && step < steps, Code::kOutOfRange, "cannot seek to step ", step,
                  " of epoch ", epoch, ": an epoch has steps 0..", steps - 1);
  DP_ENFORCE_CODE(epoch <= (INT64_MAX - step) / steps, Code::kOutOfRange, "epoch ", epoch, " is too large");
  return epoch * steps + step;
}

}  // namespace dp
