#include "exec/graph_capture.h"

#include <unordered_map>
#include <utility>

#include "core/error.h"

namespace dp {
namespace {

std::string ChainOpLabel(const std::vector<std::unique_ptr<Operator>>& ops, const TaskGraph& graph, int chain) {
  return ops[static_cast<size_t>(graph.chains[static_cast<size_t>(chain)].front())]->label();
}

// Per chain, whether it depends on a CUDA chain (`downstream`: runs after one)
// or a CUDA chain depends on it (runs before one), through any path.
std::vector<bool> LinkedToCuda(const TaskGraph& graph, bool downstream) {
  const size_t n = graph.chains.size();
  std::vector<bool> reach(n, false);
  std::vector<int> work;
  for (size_t c = 0; c < n; ++c)
    if (graph.chain_device[c].type == DeviceType::kCUDA) work.push_back(static_cast<int>(c));
  while (!work.empty()) {
    const int c = work.back();
    work.pop_back();
    const auto& next_chains = downstream ? graph.chain_children : graph.chain_parents;
    for (int next : next_chains[static_cast<size_t>(c)]) {
      if (reach[static_cast<size_t>(next)]) continue;
      reach[static_cast<size_t>(next)] = true;
      work.push_back(next);
    }
  }
  return reach;
}

std::string EntryName(const CaptureBindings::Entry& e) {
  if (e.blob != nullptr) return StrCat("blob '", e.blob->name(), "'");
  if (e.slot >= 0) return StrCat("block ", e.slot, " of the net's memory plan");
  return StrCat("the scratch memory of ", e.op != nullptr ? e.op->label() : std::string("an op"));
}

std::string Shape(const CaptureBindings::Entry& e) {
  if (e.dtype == DType::kUndefined) return e.data == nullptr ? "nothing" : StrCat(e.nbytes, " bytes");
  return StrCat(DTypeName(e.dtype), DimsString(e.dims), " on ", DeviceName(e.device));
}

bool SameStorage(const std::weak_ptr<Storage>& a, const std::weak_ptr<Storage>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

// Whether a tensor outside the net holds `buffer` (a graph's buffer for a
// read-only blob): owners beyond the graph's own reference and the net's
// blobs that hold it now (views of it, such as a Reshape's output).
bool HeldOutside(const std::shared_ptr<Storage>& buffer, const std::vector<CaptureBindings::Entry>& now) {
  long inside = 0;
  for (const CaptureBindings::Entry& e : now)
    if (!e.storage.owner_before(buffer) && !buffer.owner_before(e.storage)) ++inside;
  return buffer.use_count() - 1 > inside;
}

// How `now` stands against `then` (bindings of the same ops). `inputs`, per
// entry: the buffer a graph holds for a read-only blob (null: none); without
// one a read-only blob that moved counts as fed again all the same (the
// warm-up's bindings against the next run's: the capture takes the new one).
BindingCheck Compare(const CaptureBindings& then, const std::vector<std::shared_ptr<Storage>>* inputs,
                     const CaptureBindings& now) {
  BindingCheck check;
  auto stale = [&check](std::string reason) {
    check.result = BindingCheck::Result::kStale;
    check.refed.clear();
    check.reason = std::move(reason);
    return check;
  };
  const auto& a = then.entries();
  const auto& b = now.entries();
  if (a.size() != b.size()) {
    const bool planned = (!a.empty() && a.back().slot >= 0) || (!b.empty() && b.back().slot >= 0);
    return stale(planned ? "the net's memory plan was made again (its blocks moved)"
                         : "the net's ops are bound to other blobs");
  }
  std::string shared;
  for (size_t i = 0; i < a.size(); ++i) {
    const CaptureBindings::Entry& x = a[i];
    const CaptureBindings::Entry& y = b[i];
    if (x.blob != y.blob || x.op != y.op || x.written != y.written || x.slot != y.slot)
      return stale("the net's ops are bound to other blobs");
    if (x.plan != y.plan) return stale("the net's memory plan was made again (its blocks moved)");
    if (x.dims != y.dims || x.dtype != y.dtype || x.device != y.device || (x.data == nullptr) != (y.data == nullptr))
      return stale(StrCat(EntryName(y), " is now ", Shape(y), ", not ", Shape(x)));
    const bool moved = x.data != y.data || x.nbytes != y.nbytes || !SameStorage(x.storage, y.storage);
    if (moved) {
      // A blob the ops only read, fed again: copied into the graph's buffer.
      // (A temporary of a memory plan is never fed: its memory is the plan's.)
      const bool feedable = y.blob != nullptr && !y.written && y.data != nullptr && !y.blob->transient();
      if (!feedable) return stale(StrCat(EntryName(y), " holds other memory than when the graph was captured"));
      if (inputs != nullptr && (*inputs)[i] == nullptr)
        return stale(StrCat(EntryName(y), " was fed again, and the graph does not hold its buffer"));
      if (inputs != nullptr && shared.empty() && HeldOutside((*inputs)[i], b))
        shared = StrCat(EntryName(y), " was fed again, and the buffer the graph reads it from is still held by a "
                        "tensor outside the net (a fetch of it): refilling it would change that tensor");
      check.refed.push_back(i);
    }
    if (y.shared && shared.empty())
      shared = StrCat(EntryName(y), " is shared with a tensor outside the net: writing it in place would change "
                      "that tensor too, so its op copies it first");
  }
  if (!shared.empty()) {
    check.result = BindingCheck::Result::kShared;
    check.reason = std::move(shared);
  } else if (!check.refed.empty()) {
    check.result = BindingCheck::Result::kRefed;
  }
  return check;
}

}  // namespace

CapturePlan PlanCapture(const std::vector<std::unique_ptr<Operator>>& ops, const TaskGraph& graph, MemoryMode memory) {
  CapturePlan plan;
  auto refuse = [&plan](std::string reason) {
    plan = CapturePlan{};
    plan.refusal = std::move(reason);
    return plan;
  };
  int gpu = -1;
  for (size_t c = 0; c < graph.chains.size(); ++c) {
    const DeviceOption d = graph.chain_device[c];
    if (d.type != DeviceType::kCUDA) continue;
    if (gpu >= 0 && d.id != gpu)
      return refuse(StrCat("its ops run on cuda:", gpu, " and cuda:", d.id, "; a captured graph covers one GPU"));
    gpu = d.id;
  }
  if (gpu < 0) return refuse("no op of it runs on a CUDA device");
  if (memory == MemoryMode::kFree)
    return refuse("its memory plan is 'free', which returns memory to the allocator as ops finish; a graph needs "
                  "the blocks its kernels use kept (memory mode 'keep' or 'share')");
  // Transfers: Copy ops at the start of a CUDA chain that wait only for host
  // ops and other transfers.
  std::vector<bool> transfer(ops.size(), false);
  std::vector<bool> transfers_only(graph.chains.size(), false);
  for (size_t c = 0; c < graph.chains.size(); ++c) {
    if (graph.chain_device[c].type != DeviceType::kCUDA) continue;
    size_t prefix = 0;
    for (int i : graph.chains[c]) {
      const size_t iu = static_cast<size_t>(i);
      bool from_host = ops[iu]->def().type == "Copy";
      for (int p : graph.parents[iu]) {
        const size_t pu = static_cast<size_t>(p);
        from_host = from_host && (transfer[pu] || graph.chain_device[static_cast<size_t>(graph.chain_of[pu])].type !=
                                                      DeviceType::kCUDA);
      }
      if (!from_host) break;
      transfer[iu] = true;
      ++prefix;
    }
    transfers_only[c] = prefix == graph.chains[c].size();
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (transfer[i]) {
      plan.transfers.push_back(static_cast<int>(i));
      continue;
    }
    if (ops[i]->device().type != DeviceType::kCUDA) continue;
    if (const char* why = ops[i]->GraphCaptureObstacle()) return refuse(StrCat(ops[i]->label(), ": ", why));
  }
  const std::vector<bool> after_cuda = LinkedToCuda(graph, /*downstream=*/true);
  const std::vector<bool> before_cuda = LinkedToCuda(graph, /*downstream=*/false);
  for (size_t c = 0; c < graph.chains.size(); ++c) {
    const int chain = static_cast<int>(c);
    if (graph.chain_device[c].type == DeviceType::kCUDA) {
      if (!transfers_only[c]) plan.graph.push_back(chain);
    } else if (after_cuda[c] && before_cuda[c]) {
      return refuse(StrCat(ChainOpLabel(ops, graph, chain), " runs on the host between CUDA ops; a captured graph "
                           "takes host ops only before or after all of them"));
    } else if (after_cuda[c]) {
      plan.after.push_back(chain);
    } else {
      plan.before.push_back(chain);
    }
  }
  if (plan.graph.empty()) return refuse("its only CUDA ops copy into the GPU; there is nothing to capture");
  return plan;
}

CaptureBindings CaptureBindings::Of(const std::vector<Operator*>& ops, const std::vector<const StorageSlot*>& slots,
                                    uint64_t plan, const std::vector<Operator*>& transfers) {
  CaptureBindings b;
  std::unordered_map<const Blob*, size_t> index;
  auto add = [&](Blob* blob, const Operator* op, bool written) {
    auto [it, fresh] = index.emplace(blob, b.entries_.size());
    if (!fresh) {
      b.entries_[it->second].written |= written;
      return;
    }
    Entry e;
    e.blob = blob;
    e.op = op;
    e.written = written;
    if (!blob->empty() && blob->IsType<Tensor>()) {
      std::shared_ptr<const Tensor> t = blob->Share<Tensor>();
      e.data = t->raw_data();
      e.storage = t->storage();
      e.nbytes = t->storage() ? t->storage()->nbytes() : 0;
      e.dims = t->dims();
      e.dtype = t->dtype();
      e.device = t->device();
    }
    b.entries_.push_back(std::move(e));
  };
  for (const Operator* op : ops) {
    for (Blob* in : op->input_blobs()) add(in, op, false);
    for (Blob* out : op->output_blobs()) add(out, op, true);
  }
  for (const Operator* op : transfers)
    for (Blob* out : op->output_blobs())
      if (auto it = index.find(out); it != index.end()) b.entries_[it->second].written = true;
  // Whether an op writing a blob would copy it first (copy-on-write: its
  // memory is the caller's, or a tensor outside these blobs holds it too),
  // once every op has been seen (a blob read first and written later is
  // written). Blobs of the net may share memory (an in-place view); each
  // holds its storage once, so more owners than such blobs means an outsider.
  std::unordered_map<const Storage*, long> owners_inside;
  for (const Entry& e : b.entries_)
    if (std::shared_ptr<Storage> s = e.storage.lock()) ++owners_inside[s.get()];
  for (Entry& e : b.entries_) {
    if (!e.written) continue;
    std::shared_ptr<Storage> s = e.storage.lock();
    if (s == nullptr) continue;
    // use_count() - 1: not counting `s` itself.
    e.shared = !s->library_owned() || s.use_count() - 1 > owners_inside[s.get()];
  }
  for (const Operator* op : ops) {
    if (op->scratch_bytes() == 0) continue;
    Entry e;
    e.op = op;
    e.written = true;
    e.data = op->scratch_data();
    e.nbytes = op->scratch_bytes();
    e.device = op->device();
    b.entries_.push_back(std::move(e));
  }
  // The memory plan's blocks: between runs its temporaries are empty, and the
  // blocks the graph's kernels used for them wait in the slots.
  for (size_t s = 0; s < slots.size(); ++s) {
    Entry e;
    e.slot = static_cast<int>(s);
    e.plan = plan;
    e.written = true;
    if (const std::shared_ptr<Storage>& block = slots[s]->parked()) {
      e.data = block->data();
      e.storage = block;
      e.nbytes = block->nbytes();
      e.device = block->device();
    }
    b.entries_.push_back(std::move(e));
  }
  return b;
}

BindingCheck CheckBindings(const CapturedBindings& graph, const CaptureBindings& now) {
  return Compare(graph.bindings, &graph.inputs, now);
}

std::vector<std::shared_ptr<const Tensor>> CopyRefedInputs(const CapturedBindings& graph, const BindingCheck& check,
                                                          DeviceContext& ctx) {
  const auto& then = graph.bindings.entries();
  std::vector<std::shared_ptr<const Tensor>> sources;
  sources.reserve(check.refed.size());
  for (size_t i : check.refed) {
    const CaptureBindings::Entry& e = then[i];
    DP_ENFORCE_CODE(graph.inputs[i] != nullptr, Code::kInternal, EntryName(e), ": the graph holds no buffer for it");
    std::shared_ptr<const Tensor> fed = e.blob->Share<Tensor>();
    // Into the graph's buffer itself (Tensor::CopyFrom would find it shared
    // with the graph and copy into fresh memory instead).
    CopyBytes(fed->nbytes(), fed->raw_data(), fed->device(), graph.inputs[i]->data(), e.device, &ctx);
    e.blob->Publish(std::make_shared<Tensor>(Tensor::FromStorage(e.dims, e.dtype, graph.inputs[i])));
    sources.push_back(std::move(fed));
  }
  return sources;
}

CapturePolicy::CapturePolicy(std::string refusal) : refusal_(std::move(refusal)) { reason_ = refusal_; }

void CapturePolicy::Drop(std::string reason) {
  has_graph_ = false;
  graph_ = CapturedBindings{};
  reason_ = std::move(reason);
}

CapturePolicy::Decision CapturePolicy::BeforeRun(const CaptureBindings& now, bool uncaptured) {
  Decision d;
  if (!refusal_.empty()) {
    reason_ = refusal_;
    return d;
  }
  if (has_graph_) {
    d.check = CheckBindings(graph_, now);
    switch (d.check.result) {
      case BindingCheck::Result::kSame:
      case BindingCheck::Result::kRefed:
        if (uncaptured) {
          reason_ = "this run was asked to run op by op (profiling)";
          return d;
        }
        d.action = Action::kReplay;
        reason_.clear();
        return d;
      case BindingCheck::Result::kShared:
        reason_ = d.check.reason;
        return d;
      case BindingCheck::Result::kStale:
        ++stats_.invalidations;
        Drop(StrCat("the captured graph is stale: ", d.check.reason));
        if (stats_.invalidations >= static_cast<uint64_t>(kMaxInvalidations))
          refusal_ = StrCat("its bindings changed ", stats_.invalidations, " times after capture (last: ",
                            d.check.reason, "); it runs on the streams from now on");
        warm_ = false;  // the ops resize what changed on this run first
        return d;
    }
  }
  if (uncaptured) {
    reason_ = "this run was asked to run op by op (profiling)";
    return d;
  }
  if (!warm_) {
    if (reason_.empty()) reason_ = "the first run of its bindings warms up on the streams";
    return d;
  }
  // Capture when nothing moved since the warm-up run but blobs fed again.
  BindingCheck check = Compare(last_, nullptr, now);
  if (check.result == BindingCheck::Result::kStale || check.result == BindingCheck::Result::kShared) {
    reason_ = check.result == BindingCheck::Result::kStale ? StrCat("its bindings changed since the last run: ",
                                                                    check.reason)
                                                           : check.reason;
    return d;
  }
  for (const CaptureBindings::Entry& e : now.entries()) {
    std::shared_ptr<Storage> s = e.storage.lock();
    if (e.blob != nullptr && !e.written && s != nullptr && !s->keeps_memory_alive()) {
      reason_ = StrCat(EntryName(e), " holds memory borrowed from the caller, which a graph cannot keep");
      return d;
    }
  }
  d.action = Action::kCapture;
  capturing_ = now;
  return d;
}

void CapturePolicy::Discard(const std::string& error) {
  Drop(StrCat("the graph failed on the device: ", error));
  warm_ = false;
}

void CapturePolicy::AfterRun(const Decision& decision, bool ok, CaptureBindings after, const std::string& error) {
  switch (decision.action) {
    case Action::kStreams:
      warm_ = ok;
      if (ok) last_ = std::move(after);
      return;
    case Action::kReplay:
      if (ok) {
        ++stats_.replays;
      } else {
        Drop(StrCat("the last replay failed: ", error));
        warm_ = false;
      }
      return;
    case Action::kCapture: {
      if (ok) {
        // The capture must leave every binding where it found it (a block of
        // a memory plan included: a temporary that allocated parks a block
        // of its own, or frees one the graph baked in).
        BindingCheck check = Compare(capturing_, nullptr, after);
        if (check.result == BindingCheck::Result::kSame) {
          graph_.bindings = std::move(capturing_);
          graph_.inputs.assign(graph_.bindings.entries().size(), nullptr);
          for (size_t i = 0; i < graph_.inputs.size(); ++i) {
            const CaptureBindings::Entry& e = graph_.bindings.entries()[i];
            if (e.blob != nullptr && !e.written && e.data != nullptr) graph_.inputs[i] = e.storage.lock();
          }
          has_graph_ = true;
          ++stats_.captures;
          reason_.clear();
          last_ = std::move(after);
          warm_ = true;
          return;
        } else {
          Drop(StrCat("the capture moved memory (", check.reason, "): it allocated while it was recorded"));
        }
      } else {
        Drop(StrCat("the capture failed: ", error));
      }
      capturing_ = CaptureBindings{};
      warm_ = false;
      ++stats_.capture_failures;
      if (stats_.capture_failures >= static_cast<uint64_t>(kMaxCaptureFailures))
        refusal_ = StrCat("capturing it failed ", stats_.capture_failures, " times (last: ", reason_,
                          "); it runs on the streams from now on");
      return;
    }
  }
}

}  // namespace dp
