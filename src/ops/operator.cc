#include "ops/operator.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <typeinfo>

namespace dp {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, OperatorFactory> by_key[kNumDeviceTypes];
};

Registry& GetRegistry() {
  static auto* r = new Registry;
  return *r;
}

}  // namespace

Operator::Operator(const OpInit& init)
    : def_(init.def),
      schema_(OpSchemaRegistry::Find(init.def.type)),
      index_(init.index),
      device_(init.device),
      math_(init.math),
      label_(OpLabel(init.def, init.index)),
      args_(def_, std::string()),
      budget_(init.ws->budget()) {
  scratch_.set_budget(budget_);
  for (const auto& name : def_.inputs) inputs_.push_back(init.ws->CreateBlob(name));
  for (const auto& name : def_.outputs) outputs_.push_back(init.ws->CreateBlob(name));
}

namespace {

// The storage of an input that the kernel must hold (see Operator::Run), or
// nullptr.
inline const std::shared_ptr<Storage>* StorageToHold(const Blob* b, DeviceOption device) {
  if (!b->IsType<Tensor>()) return nullptr;
  const auto& s = b->Get<Tensor>().storage();
  return s && (!s->library_owned() || !SameMemory(s->device(), device)) ? &s : nullptr;
}

}  // namespace

void Operator::Run(DeviceContext& ctx) {
  ctx_ = &ctx;
  // Memory allocated and freed by the kernel is ordered on ctx's stream
  // (core/caching_allocator.h).
  CurrentStreamScope stream_scope(device_, ctx.stream_id());
  auto run = [this] {
    try {
      RunOnDevice();
    } catch (Error& e) {
      throw e.Prepend(StrCat(label_, " on ", DeviceName(device_)));
    } catch (const std::bad_alloc&) {
      DP_THROW(Code::kOutOfMemory, label_, " on ", DeviceName(device_), ": out of memory");
    } catch (const std::length_error& e) {  // a container asked for more than it can hold
      DP_THROW(Code::kOutOfMemory, label_, " on ", DeviceName(device_), ": out of memory (", e.what(), ")");
    } catch (const std::exception& e) {
      DP_THROW(Code::kInternal, label_, " on ", DeviceName(device_), ": internal error: ",
               DemangledTypeName(typeid(e)), ": ", e.what());
    } catch (...) {
      DP_THROW(Code::kInternal, label_, " on ", DeviceName(device_), ": internal error: unknown exception");
    }
  };
  // Caller-supplied input memory is never written, so an in-place op's output
  // gets fresh storage and the input's storage could be released mid-kernel;
  // hold it until the kernel returns. The same holds for storage in another
  // memory than this op's device (outputs are resized on the op's device,
  // e.g. an in-place op on cuda:1 over a tensor made on cuda:0): without the
  // hold the kernel read freed memory (found by test_async's multi-device
  // nets). CPU replicas share the host's memory, so storage moves freely
  // between cpu:0 and cpu:1 and needs no hold (an in-place Allreduce over
  // every replica's gradient writes them where they are).
  // Holding costs nothing there: Resize would not reuse such storage anyway.
  // Most runs hold nothing and pay only the check; holds live on the stack
  // (no allocation per run) unless more than kInlineHolds inputs need one.
  size_t i = 0;
  while (i < inputs_.size() && StorageToHold(inputs_[i], device_) == nullptr) ++i;
  if (i == inputs_.size()) {
    run();
    if (scratch_slot_) ReturnScratch();
    if (observer_) observer_->OpFinished(index_);
    return;
  }
  constexpr size_t kInlineHolds = 4;
  std::shared_ptr<Storage> keep[kInlineHolds];
  std::vector<std::shared_ptr<Storage>> keep_more;
  size_t kept = 0;
  for (; i < inputs_.size(); ++i)
    if (const auto* s = StorageToHold(inputs_[i], device_)) {
      if (kept < kInlineHolds)
        keep[kept++] = *s;
      else
        keep_more.push_back(*s);
    }
  run();
  if (scratch_slot_) ReturnScratch();
  // The kernel has returned: the holds go before the memory plan hears of
  // it, so that a block only they still held is parked for the next
  // temporary of its slot rather than freed.
  for (size_t k = 0; k < kept; ++k) keep[k].reset();
  keep_more.clear();
  if (observer_) observer_->OpFinished(index_);
}

void Operator::set_scratch_slot(std::shared_ptr<StorageSlot> slot) {
  scratch_slot_ = std::move(slot);
  scratch_ = Tensor();  // a lent block comes from the slot; an own one is made on first use
  scratch_.set_budget(budget_);
  scratch_.set_slot(scratch_slot_);
}

void Operator::ReturnScratch() noexcept {
  std::shared_ptr<Storage> block = scratch_.storage();
  scratch_ = Tensor();
  scratch_.set_budget(budget_);
  scratch_.set_slot(scratch_slot_);
  if (block && block.use_count() == 1 && block->library_owned() && scratch_slot_->parked_bytes() < block->nbytes())
    scratch_slot_->Park(std::move(block));  // a slot that keeps nothing frees it
}

void Operator::set_output_slot(int i, std::shared_ptr<StorageSlot> slot) {
  DP_ENFORCE_CODE(i >= 0 && i < OutputSize(), Code::kInternal, "output index ", i, " out of range");
  if (output_slots_.empty()) {
    if (!slot) return;
    output_slots_.resize(outputs_.size());
  }
  output_slots_[static_cast<size_t>(i)] = std::move(slot);
}

std::string Operator::InputDesc(int i) const {
  const OpSchema* s = schema_;
  std::string n = s ? s->InputName(static_cast<size_t>(i)) : StrCat("input ", i);
  return StrCat(n, " '", def_.inputs.at(static_cast<size_t>(i)), "'");
}

Operator::InputInfos Operator::DescribeInputs(int begin, int end) const {
  InputInfos in;
  for (int i = begin; i < end; ++i) {
    const Tensor& t = Input(i);
    in.names.push_back(InputDesc(i));
    in.dims.push_back(&t.dims());
    in.dtypes.push_back(t.dtype());
  }
  return in;
}

std::string Operator::OutputDesc(int i) const {
  const OpSchema* s = schema_;
  std::string n = s ? s->OutputName(static_cast<size_t>(i)) : StrCat("output ", i);
  return StrCat(n, " '", def_.outputs.at(static_cast<size_t>(i)), "'");
}

const Tensor& Operator::Input(int i) const {
  DP_ENFORCE_CODE(i >= 0 && i < InputSize(), Code::kInternal, "input index ", i, " out of range");
  const Blob* b = inputs_[static_cast<size_t>(i)];
  if (b->empty())
    DP_THROW(Code::kNotFound, InputDesc(i), " is empty: it was never fed nor produced by an earlier op");
  if (!b->IsType<Tensor>()) DP_THROW(Code::kDType, InputDesc(i), " holds ", b->TypeName(), ", not a tensor");
  const Tensor& t = b->Get<Tensor>();
  if (!t.defined()) DP_THROW(Code::kNotFound, InputDesc(i), " is an empty tensor");
  // CPU ids are logical replicas sharing host memory; a CUDA kernel can only
  // address its own device.
  DeviceOption d = t.device();
  if (schema_ != nullptr && schema_->host_input(i)) {
    DP_ENFORCE(d.type == DeviceType::kCPU, InputDesc(i), " is on ", DeviceName(d), " but ", def_.type,
               " reads it on the host: give it as a cpu tensor");
    return t;
  }
  bool addressable = d.type == device_.type && (d.type == DeviceType::kCPU || d.id == device_.id);
  if (!addressable && !(schema_ != nullptr && schema_->inputs_can_cross_devices()))
    DP_THROW(Code::kInvalidArgument, InputDesc(i), " is on ", DeviceName(d), " but the op runs on ",
             DeviceName(device_), "; add a Copy op to move it");
  return t;
}

Tensor* Operator::Output(int i) {
  DP_ENFORCE_CODE(i >= 0 && i < OutputSize(), Code::kInternal, "output index ", i, " out of range");
  Tensor* t = outputs_[static_cast<size_t>(i)]->GetMutable<Tensor>();
  if (t->budget() != budget_) t->set_budget(budget_);
  if (!output_slots_.empty() && t->slot() != output_slots_[static_cast<size_t>(i)])
    t->set_slot(output_slots_[static_cast<size_t>(i)]);
  return t;
}

Tensor* Operator::Output(int i, Dims dims, DType dtype) {
  Tensor* t = Output(i);
  try {
    t->Resize(std::move(dims), dtype, device_);
  } catch (Error& e) {
    if (e.code() == Code::kOutOfMemory) throw e.Prepend(OutputDesc(i));
    throw;
  }
  return t;
}

void* Operator::ScratchBytes(size_t bytes) {
  if (scratch_.nbytes() < bytes) {
    try {
      scratch_.Resize({static_cast<int64_t>(bytes)}, DType::kUInt8, device_);
    } catch (Error& e) {
      if (e.code() == Code::kOutOfMemory) throw e.Prepend(StrCat("scratch memory of ", bytes, " bytes"));
      throw;
    }
  }
  return scratch_.raw_mutable_data();
}

void OperatorRegistry::Register(DeviceType device, const std::string& key, OperatorFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& slot = r.by_key[static_cast<size_t>(device)][key];
  if (slot) {
    std::fprintf(stderr, "dp: operator '%s' registered twice for %s\n", key.c_str(), DeviceTypeName(device));
    std::abort();  // static-initialisation bug, found by the first test run
  }
  slot = std::move(factory);
}

static const OperatorFactory* FindFactory(DeviceType device, const std::string& type, const std::string& engine) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& m = r.by_key[static_cast<size_t>(device)];
  if (!engine.empty()) {
    auto it = m.find(type + "_ENGINE_" + engine);
    if (it != m.end()) return &it->second;
  }
  auto it = m.find(type);
  return it == m.end() ? nullptr : &it->second;
}

bool OperatorRegistry::Has(DeviceType device, const std::string& type, const std::string& engine) {
  return FindFactory(device, type, engine) != nullptr;
}

std::unique_ptr<Operator> OperatorRegistry::Create(const OpInit& init) {
  const OperatorFactory* f = FindFactory(init.device.type, init.def.type, init.def.engine);
  if (f == nullptr && OpSchemaRegistry::Find(init.def.type) == nullptr)
    DP_THROW(Code::kInvalidNet, OpLabel(init.def, init.index), ": ",
             OpSchemaRegistry::UnknownTypeMessage(init.def.type));
  if (f == nullptr)
    DP_THROW(Code::kInvalidNet, OpLabel(init.def, init.index), ": no ", DeviceTypeName(init.device.type),
             " kernel for operator type '", init.def.type, "'");
  return (*f)(init);
}

std::vector<std::string> OperatorRegistry::Engines(DeviceType device, const std::string& type) {
  const std::string prefix = type + "_ENGINE_";
  std::vector<std::string> out;
  for (const std::string& key : Keys(device))  // sorted: the registry is a std::map
    if (key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0)
      out.push_back(key.substr(prefix.size()));
  return out;
}

std::vector<std::string> OperatorRegistry::Keys(DeviceType device) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& [k, v] : r.by_key[static_cast<size_t>(device)]) out.push_back(k);
  return out;
}

}  // namespace dp
