#include "core/storage.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/memory_limit.h"

namespace dp {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* Allocate(DeviceOption, size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    if (rounded < nbytes) DP_THROW(Code::kOutOfMemory, "cannot allocate ", nbytes, " bytes on cpu");
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    if (p == nullptr) DP_THROW(Code::kOutOfMemory, "cannot allocate ", nbytes, " bytes on cpu");
    return p;
  }
  void Free(DeviceOption, void* ptr) noexcept override { std::free(ptr); }
};

CpuAllocator g_cpu_allocator;
std::array<std::atomic<Allocator*>, kNumDeviceTypes> g_allocators{&g_cpu_allocator, nullptr};
std::array<std::atomic<CopyFn>, kNumDeviceTypes> g_copies{nullptr, nullptr};
std::array<std::atomic<GatherRowsFn>, kNumDeviceTypes> g_gathers{nullptr, nullptr};
std::atomic<Allocator*> g_pinned{nullptr};

// Library storage alive per device type, and the peak (see MemoryStats).
struct alignas(64) Counters {
  std::atomic<uint64_t> allocated{0};
  std::atomic<uint64_t> peak{0};
  std::atomic<uint64_t> raw_allocs{0};  // library storage of at least one byte made
  std::atomic<uint64_t> raw_frees{0};   // and freed
};
std::array<Counters, kNumDeviceTypes> g_stats;
// Library storage made per device memory (LibraryAllocations).
constexpr size_t kCountedDevices = 64;
std::array<std::array<std::atomic<uint64_t>, kCountedDevices>, kNumDeviceTypes> g_made{};

std::atomic<uint64_t>& MadeOn(DeviceOption device) {
  const size_t id = device.type == DeviceType::kCPU ? 0 : static_cast<size_t>(device.id) % kCountedDevices;
  return g_made[static_cast<size_t>(device.type)][id];
}

void RaiseTo(std::atomic<uint64_t>& peak, uint64_t now) {
  uint64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void RaisePeak(Counters& c, uint64_t now) { RaiseTo(c.peak, now); }

void CountAllocation(DeviceType type, size_t n) {
  Counters& c = g_stats[static_cast<size_t>(type)];
  RaisePeak(c, c.allocated.fetch_add(n, std::memory_order_relaxed) + n);
}

// Counts n more bytes of host storage, unless all of dp's host storage would
// then pass the memory the process may use (kOutOfMemory).
void CountHostAllocation(size_t n) {
  Counters& c = g_stats[static_cast<size_t>(DeviceType::kCPU)];
  const MemoryLimit& limit = ProcessMemoryLimit();
  uint64_t used = c.allocated.load(std::memory_order_relaxed);
  do {
    if (n > limit.bytes || used > limit.bytes - n)
      DP_THROW(Code::kOutOfMemory, "cannot allocate ", n, " bytes on cpu: with the ", used,
               " bytes dp holds there it would pass the ", limit.bytes, " bytes this process may use (",
               limit.source, ")");
  } while (!c.allocated.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  RaisePeak(c, used + n);
}

void CountFree(DeviceType type, size_t n) {
  g_stats[static_cast<size_t>(type)].allocated.fetch_sub(n, std::memory_order_relaxed);
}

// One raw allocation or free of a library storage's memory (none for 0 bytes).
void CountRaw(DeviceType type, size_t n, bool alloc) {
  if (n == 0) return;
  Counters& c = g_stats[static_cast<size_t>(type)];
  (alloc ? c.raw_allocs : c.raw_frees).fetch_add(1, std::memory_order_relaxed);
}

// Zeroed storage of at least this size is mapped rather than cleared.
constexpr size_t kMapZeroedFrom = size_t{1} << 20;

size_t MappedLength(size_t nbytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (nbytes + page - 1) / page * page;  // a sum that wraps is below a page: 0, which mmap refuses
}

// Fresh anonymous pages: page-aligned (so 64-byte aligned) and zero.
void* MapZeroed(size_t nbytes) {
  void* p = ::mmap(nullptr, MappedLength(nbytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    DP_THROW(Code::kOutOfMemory, "cannot allocate ", nbytes, " zeroed bytes on cpu: ", std::strerror(errno));
  return p;
}

void Unmap(void* p, size_t nbytes) noexcept { ::munmap(p, MappedLength(nbytes)); }

}  // namespace

std::atomic<uint64_t>& MemoryBudget::Slot(DeviceOption device) noexcept {
  return device.type == DeviceType::kCPU ? host_ : cuda_[device.id];  // Charge checked the id
}

const std::atomic<uint64_t>& MemoryBudget::Slot(DeviceOption device) const noexcept {
  return const_cast<MemoryBudget*>(this)->Slot(device);
}

std::atomic<uint64_t>& MemoryBudget::PeakSlot(DeviceOption device) noexcept {
  return device.type == DeviceType::kCPU ? host_peak_ : cuda_peak_[device.id];  // Charge checked the id
}

uint64_t MemoryBudget::peak(DeviceOption device) const {
  if (device.type != DeviceType::kCPU && (device.id < 0 || device.id >= kMaxCudaDevices)) return 0;
  auto& self = const_cast<MemoryBudget&>(*this);
  return std::max(self.PeakSlot(device).load(std::memory_order_relaxed), used(device));
}

void MemoryBudget::ResetPeak() noexcept {
  host_peak_.store(host_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  for (int i = 0; i < kMaxCudaDevices; ++i)
    cuda_peak_[i].store(cuda_[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
}

size_t StorageSlot::parked_bytes() const noexcept { return parked_ ? parked_->nbytes() : 0; }

uint64_t MemoryBudget::used() const {
  uint64_t total = host_.load(std::memory_order_relaxed);
  for (const auto& c : cuda_) total += c.load(std::memory_order_relaxed);
  return total;
}

uint64_t MemoryBudget::used(DeviceOption device) const {
  if (device.type != DeviceType::kCPU && (device.id < 0 || device.id >= kMaxCudaDevices)) return 0;
  return Slot(device).load(std::memory_order_relaxed);
}

void MemoryBudget::Charge(DeviceOption device, size_t n) {
  const bool host = device.type == DeviceType::kCPU;
  if (!host && (device.id < 0 || device.id >= kMaxCudaDevices))
    DP_THROW(Code::kUnavailable, "a workspace's memory budget covers ", DeviceTypeName(device.type), " devices 0 to ",
             kMaxCudaDevices - 1, ", not ", DeviceName(device));
  std::atomic<uint64_t>& slot = Slot(device);
  std::atomic<uint64_t>& peak = PeakSlot(device);
  if (limit_ == 0) {
    RaiseTo(peak, slot.fetch_add(n, std::memory_order_relaxed) + n);
    return;
  }
  uint64_t used = slot.load(std::memory_order_relaxed);
  do {
    if (n > limit_ || used > limit_ - n)
      DP_THROW(Code::kOutOfMemory, "the workspace's memory limit of ", limit_, " bytes",
               host ? std::string() : StrCat(" on ", DeviceName(device)), " is exceeded: ", n, " bytes asked with ",
               used, " bytes in use");
  } while (!slot.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  RaiseTo(peak, used + n);
}

uint64_t LibraryAllocations(DeviceOption device) { return MadeOn(device).load(std::memory_order_relaxed); }

MemoryStats GetMemoryStats(DeviceType type) {
  const Counters& c = g_stats[static_cast<size_t>(type)];
  return {c.allocated.load(std::memory_order_relaxed), c.peak.load(std::memory_order_relaxed)};
}

void ResetPeakMemory(DeviceType type) {
  Counters& c = g_stats[static_cast<size_t>(type)];
  c.peak.store(c.allocated.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

DeviceMemoryStats GetDeviceMemoryStats(DeviceOption device) {
  DeviceMemoryStats out;
  if (GetAllocator(device.type)->GetStats(device, &out)) return out;
  const Counters& c = g_stats[static_cast<size_t>(device.type)];
  out.raw_allocs = c.raw_allocs.load(std::memory_order_relaxed);
  out.raw_frees = c.raw_frees.load(std::memory_order_relaxed);
  out.allocated = c.allocated.load(std::memory_order_relaxed);
  out.peak = c.peak.load(std::memory_order_relaxed);
  out.reserved = out.allocated;  // nothing cached: freed memory goes back at once
  return out;
}

void ResetPeakDeviceMemory(DeviceOption device) {
  Allocator* a = GetAllocator(device.type);
  DeviceMemoryStats ignored;
  if (a->GetStats(device, &ignored))
    a->ResetPeak(device);
  else
    ResetPeakMemory(device.type);
}

Allocator* GetAllocator(DeviceType type) {
  Allocator* a = g_allocators[static_cast<size_t>(type)].load(std::memory_order_acquire);
  if (a == nullptr)
    DP_THROW(Code::kUnavailable, "no ", DeviceTypeName(type), " support in this build of dp");
  return a;
}

void RegisterAllocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<size_t>(type)].store(allocator, std::memory_order_release);
}

Allocator* RegisterPinnedAllocator(Allocator* allocator) {
  return g_pinned.exchange(allocator, std::memory_order_acq_rel);
}

void RegisterCopy(DeviceType type, CopyFn fn) {
  g_copies[static_cast<size_t>(type)].store(fn, std::memory_order_release);
}

void CopyBytes(size_t n, const void* src, DeviceOption src_device, void* dst, DeviceOption dst_device,
               DeviceContext* ctx) {
  if (n == 0) return;
  if (src_device.type == DeviceType::kCPU && dst_device.type == DeviceType::kCPU) {
    std::memcpy(dst, src, n);
    return;
  }
  DeviceType other = src_device.type != DeviceType::kCPU ? src_device.type : dst_device.type;
  CopyFn fn = g_copies[static_cast<size_t>(other)].load(std::memory_order_acquire);
  if (fn == nullptr)
    DP_THROW(Code::kUnavailable, "no ", DeviceTypeName(other), " support in this build of dp");
  fn(n, src, src_device, dst, dst_device, ctx);
}

void RegisterGatherRows(DeviceType type, GatherRowsFn fn) {
  g_gathers[static_cast<size_t>(type)].store(fn, std::memory_order_release);
}

void GatherRows(DeviceOption device, const void* src, int64_t src_rows, size_t row_bytes, const int64_t* indices,
                int64_t rows, void* dst, DeviceContext* ctx) {
  if (rows <= 0 || row_bytes == 0) return;
  if (device.type == DeviceType::kCPU) {
    const char* from = static_cast<const char*>(src);
    char* to = static_cast<char*>(dst);
    for (int64_t i = 0; i < rows; ++i, to += row_bytes) {
      const int64_t r = indices[i];
      if (r >= 0 && r < src_rows)
        std::memcpy(to, from + static_cast<size_t>(r) * row_bytes, row_bytes);
      else
        std::memset(to, 0, row_bytes);
    }
    return;
  }
  GatherRowsFn fn = g_gathers[static_cast<size_t>(device.type)].load(std::memory_order_acquire);
  if (fn == nullptr)
    DP_THROW(Code::kUnavailable, "no ", DeviceTypeName(device.type), " support in this build of dp");
  fn(device, src, src_rows, row_bytes, indices, rows, dst, ctx);
}

std::shared_ptr<Storage> Storage::Allocate(DeviceOption device, size_t nbytes,
                                           std::shared_ptr<MemoryBudget> budget) {
  return AllocateLibrary(device, nbytes, std::move(budget), Source::kAllocator);
}

std::shared_ptr<Storage> Storage::AllocatePinned(size_t nbytes, std::shared_ptr<MemoryBudget> budget) {
  return AllocateLibrary(DeviceOption{}, nbytes, std::move(budget), Source::kPinned);
}

std::shared_ptr<Storage> Storage::AllocateZeroed(DeviceOption device, size_t nbytes,
                                                 std::shared_ptr<MemoryBudget> budget) {
  DP_ENFORCE_CODE(device.type == DeviceType::kCPU, Code::kInternal, "zero-filled storage is allocated on the cpu only, not ",
                  DeviceName(device));
  return AllocateLibrary(device, nbytes, std::move(budget), Source::kZeroed);
}

std::shared_ptr<Storage> Storage::AllocateLibrary(DeviceOption device, size_t nbytes,
                                                  std::shared_ptr<MemoryBudget> budget, Source source) {
  Allocator* allocator = GetAllocator(device.type);
  const bool host = device.type == DeviceType::kCPU;
  const bool zeroed = source == Source::kZeroed;
  const bool mapped = zeroed && nbytes >= kMapZeroedFrom;
  bool pinned = false;
  if (budget) budget->Charge(device, nbytes);
  if (host) {
    try {
      CountHostAllocation(nbytes);
    } catch (...) {
      if (budget) budget->Release(device, nbytes);
      throw;
    }
  }
  void* p = nullptr;
  Storage* raw = nullptr;
  try {
    if (Allocator* pin = g_pinned.load(std::memory_order_acquire); source == Source::kPinned && nbytes > 0 && pin) {
      try {
        p = pin->Allocate(device, nbytes);
        pinned = true;
      } catch (const Error&) {  // no GPU to pin for, or no page-locked memory left: ordinary memory
      }
    }
    if (!pinned) p = mapped ? MapZeroed(nbytes) : allocator->Allocate(device, nbytes);
    if (zeroed && !mapped && nbytes > 0) std::memset(p, 0, nbytes);
    raw = new Storage(device, p, nbytes, Kind::kLibrary, {});
    raw->mapped_ = mapped;
    raw->pinned_ = pinned;
  } catch (...) {
    if (p != nullptr) {
      if (pinned)
        g_pinned.load()->Free(device, p);
      else
        mapped ? Unmap(p, nbytes) : allocator->Free(device, p);
    }
    if (host) CountFree(device.type, nbytes);
    if (budget) budget->Release(device, nbytes);
    throw;
  }
  if (!host) CountAllocation(device.type, nbytes);
  CountRaw(device.type, nbytes, /*alloc=*/true);
  MadeOn(device).fetch_add(1, std::memory_order_relaxed);
  raw->budget_ = std::move(budget);
  return std::shared_ptr<Storage>(raw);  // if this throws, it deletes raw: ~Storage undoes all of the above
}

std::shared_ptr<Storage> Storage::Borrow(DeviceOption device, void* data, size_t nbytes) {
  return std::shared_ptr<Storage>(new Storage(device, data, nbytes, Kind::kBorrowed, {}));
}

std::shared_ptr<Storage> Storage::Slice(std::shared_ptr<Storage> parent, size_t offset, size_t nbytes) {
  DP_ENFORCE_CODE(parent != nullptr && offset <= parent->nbytes() && nbytes <= parent->nbytes() - offset,
                  Code::kInternal, "a slice of ", nbytes, " bytes at ", offset, " is outside its storage of ",
                  parent ? parent->nbytes() : 0, " bytes");
  auto s = std::shared_ptr<Storage>(new Storage(parent->device(), static_cast<char*>(parent->data()) + offset,
                                                nbytes, Kind::kBorrowed, {}));
  s->parent_ = std::move(parent);
  return s;
}

std::shared_ptr<Storage> Storage::Adopt(DeviceOption device, void* data, size_t nbytes,
                                        ExternalDeleter deleter) {
  // The deleter is set only once nothing can fail: if an allocation here
  // throws, the caller still owns `data` and the deleter has not run.
  auto s = std::shared_ptr<Storage>(new Storage(device, data, nbytes, Kind::kAdopted, ExternalDeleter{}));
  s->deleter_ = deleter;
  return s;
}

Storage::~Storage() {
  switch (kind_) {
    case Kind::kLibrary:
      if (mapped_)
        Unmap(data_, nbytes_);
      else if (pinned_)
        g_pinned.load()->Free(device_, data_);
      else if (data_ != nullptr)
        g_allocators[static_cast<size_t>(device_.type)].load()->Free(device_, data_);
      CountFree(device_.type, nbytes_);
      CountRaw(device_.type, nbytes_, /*alloc=*/false);
      if (budget_) budget_->Release(device_, nbytes_);
      break;
    case Kind::kAdopted:
      if (deleter_.fn != nullptr) deleter_.fn(data_, deleter_.user_data);
      break;
    case Kind::kBorrowed:
      break;
  }
}

}  // namespace dp
