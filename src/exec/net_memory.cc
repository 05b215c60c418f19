#include "exec/net_memory.h"

#include <algorithm>

#include "core/current_stream.h"
#include "core/logging.h"

namespace dp {

NetMemory::NetMemory(const NetDef& def, const TaskGraph& graph, const std::vector<DeviceOption>& devices,
                     Workspace& ws, const std::vector<std::unique_ptr<Operator>>& ops, std::set<std::string> keep)
    : def_(def), graph_(graph), devices_(devices), ws_(ws), ops_(ops), kept_(std::move(keep)) {
  Replan(kept_, nullptr);
  if (def.ops.size() > kMaxPlannedOps)
    DP_LOG(kWarning, "net '", def.name, "' has ", def.ops.size(), " ops, more than the ", kMaxPlannedOps,
           " a memory plan covers: it keeps every blob");
}

NetMemory::~NetMemory() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    ops_[i]->set_observer(nullptr);
    if (i < scratch_lent_.size() && scratch_lent_[i]) ops_[i]->set_scratch_slot(nullptr);
  }
  for (Blob* b : blobs_)
    if (b) b->UnmarkTransient();
}

void NetMemory::Replan(const std::set<std::string>& keep, const std::vector<size_t>* scratch_sizes) {
  std::unordered_map<std::string, size_t> sizes;
  if (scratch_sizes != nullptr)
    for (size_t t = 0; t < plan_.temporaries.size(); ++t)
      if (!plan_.temporaries[t].scratch) sizes[plan_.temporaries[t].blob] = sizes_[t];
  Apply(PlanMemory(def_, graph_, devices_, def_.memory, keep, scratch_sizes != nullptr ? &sizes : nullptr,
                   scratch_sizes));
}

void NetMemory::Apply(MemoryPlan plan) {
  VerifyMemoryPlan(def_, graph_, devices_, plan);
  for (Blob* b : blobs_) b->UnmarkTransient();
  std::vector<std::shared_ptr<StorageSlot>> slots;
  for (int s = 0; s < plan.num_slots; ++s) slots.push_back(std::make_shared<StorageSlot>());
  scratch_lent_.resize(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) {
    Operator& op = *ops_[i];
    op.set_observer(plan.op_temporaries[i].empty() ? nullptr : this);
    for (int o = 0; o < static_cast<int>(op.output_blobs().size()); ++o) op.set_output_slot(o, nullptr);
    // kFree: every op's scratch is freed when its kernel returns.
    const int scratch = plan.op_scratch_slot[i];
    std::shared_ptr<StorageSlot> lend = scratch >= 0                       ? slots[static_cast<size_t>(scratch)]
                                        : plan.mode == MemoryMode::kFree ? free_slot_
                                                                         : nullptr;
    if (lend || scratch_lent_[i]) op.set_scratch_slot(lend);
    scratch_lent_[i] = lend != nullptr;
  }
  std::vector<Blob*> blobs;
  for (const MemoryPlan::Temporary& t : plan.temporaries) {
    Blob* b = t.scratch ? nullptr : ws_.CreateBlob(t.blob);
    if (b) b->MarkTransient();
    blobs.push_back(b);
    if (t.slot < 0 || t.scratch) continue;
    for (int op : t.accessors) {
      const auto& outs = def_.ops[static_cast<size_t>(op)].outputs;
      for (size_t o = 0; o < outs.size(); ++o)
        if (outs[o] == t.blob) ops_[static_cast<size_t>(op)]->set_output_slot(static_cast<int>(o), slots[static_cast<size_t>(t.slot)]);
    }
  }
  const size_t n = plan.temporaries.size();
  remaining_ = std::make_unique<std::atomic<int32_t>[]>(n);
  sizes_.assign(n, 0);
  blobs_ = std::move(blobs);
  slots_ = std::move(slots);  // the old slots' parked storage goes back now
  plan_ = std::move(plan);
  ran_ = false;
  ++generation_;
}

void NetMemory::BeginRun() {
  if (plan_.mode == MemoryMode::kKeep) return;
  // The new state is kept only once its plan is in place: a plan that fails
  // its verifier fails this run, and the next one tries again.
  const uint64_t added = ws_.feeds().readers_added();
  std::vector<std::string> read;
  if (added != readers_seen_) {
    std::vector<std::string> names;
    for (const auto& t : plan_.temporaries)
      if (!t.scratch) names.push_back(t.blob);
    read = ws_.feeds().ReadAmong(names);
  }
  // Sizes from a run that completed: every temporary was released.
  bool sizing = false;
  if (plan_.mode == MemoryMode::kShare && ran_ && !sized_) {
    sizing = true;
    for (size_t t = 0; t < plan_.temporaries.size(); ++t)
      sizing = sizing && remaining_[t].load(std::memory_order_relaxed) == 0;
  }
  if (!read.empty() || sizing) {
    std::set<std::string> kept = kept_;
    kept.insert(read.begin(), read.end());
    std::vector<size_t> scratch_sizes;
    if (sizing)
      for (const auto& op : ops_) scratch_sizes.push_back(op->scratch_bytes());  // what each op's own scratch came to
    else
      scratch_sizes = scratch_sizes_;
    Replan(kept, sized_ || sizing ? &scratch_sizes : nullptr);
    if (!read.empty())
      DP_LOG(kInfo, "net '", def_.name, "': ", read.size(), " temporaries are read by another net (first '",
             read.front(), "'): its memory plan keeps them whole");
    kept_ = std::move(kept);
    scratch_sizes_ = std::move(scratch_sizes);
    sized_ = sized_ || sizing;
  }
  readers_seen_ = added;
  for (size_t t = 0; t < plan_.temporaries.size(); ++t)
    remaining_[t].store(plan_.temporaries[t].scratch ? 0 : static_cast<int32_t>(plan_.temporaries[t].accessors.size()),
                        std::memory_order_relaxed);
  ran_ = true;
}

void NetMemory::OpFinished(size_t op_index) noexcept {
  for (int t : plan_.op_temporaries[op_index])
    if (remaining_[static_cast<size_t>(t)].fetch_sub(1, std::memory_order_acq_rel) == 1) Release(t);
}

void NetMemory::CountAgain(const std::vector<size_t>& op_indices) noexcept {
  for (size_t i : op_indices)
    for (int t : plan_.op_temporaries[i]) remaining_[static_cast<size_t>(t)].fetch_add(1, std::memory_order_relaxed);
}

void NetMemory::Release(int temporary) noexcept {
  const size_t t = static_cast<size_t>(temporary);
  std::shared_ptr<Tensor> held = blobs_[t]->Release<Tensor>();
  if (!held) return;  // empty, or not a tensor: left as it is
  std::shared_ptr<Storage> storage = held->storage();
  // What the blob needs, not the block it held: one lent by its slot may be
  // larger (a scalar after a batch of activations), and sized by that it
  // would look as large as the block's first owner in the next plan.
  sizes_[t] = storage ? held->nbytes() : 0;
  const int slot = plan_.temporaries[t].slot;
  const bool sole_tensor = held.use_count() == 1;
  held.reset();
  // Parked only when nobody else sees it; the larger block stays.
  if (slot >= 0 && sole_tensor && storage && storage.use_count() == 1 && storage->library_owned()) {
    StorageSlot& s = *slots_[static_cast<size_t>(slot)];
    if (s.parked_bytes() < storage->nbytes()) s.Park(std::move(storage));
  }
  // Freed (when this was the last reference) as outside any op: the op that
  // counted the temporary's last access finished issuing last, but its
  // stream is not ordered after the other accessors' streams (they ran in
  // whatever order the executor chose), so the block must wait for the
  // events of every stream of its device rather than serve this op's stream
  // at once (core/caching_allocator.h).
  if (storage && CurrentStream(storage->device()) != kNoStream) {
    CurrentStreamScope unordered(storage->device(), kNoStream);
    storage.reset();
  }  // (memory of another device than the op's: its allocator orders the free, cuda_caching_allocator.cc)
}

std::vector<const StorageSlot*> NetMemory::slots(DeviceOption device) const {
  std::vector<bool> on_device(slots_.size(), false);  // a slot serves temporaries of one memory
  for (const MemoryPlan::Temporary& t : plan_.temporaries)
    if (t.slot >= 0 && SameMemory(t.device, device)) on_device[static_cast<size_t>(t.slot)] = true;
  std::vector<const StorageSlot*> out;
  for (size_t s = 0; s < slots_.size(); ++s)
    if (on_device[s]) out.push_back(slots_[s].get());
  return out;
}

uint64_t NetMemory::slot_bytes() const {
  uint64_t total = 0;
  for (const auto& s : slots_) total += s->parked_bytes();
  return total;
}

}  // namespace dp
