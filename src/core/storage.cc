#include "core/storage.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

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

}  // namespace

Allocator* GetAllocator(DeviceType type) {
  Allocator* a = g_allocators[static_cast<size_t>(type)].load(std::memory_order_acquire);
  if (a == nullptr)
    DP_THROW(Code::kUnavailable, "no ", DeviceTypeName(type), " support in this build of dp");
  return a;
}

void RegisterAllocator(DeviceType type, Allocator* allocator) {
  g_allocators[static_cast<size_t>(type)].store(allocator, std::memory_order_release);
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

std::shared_ptr<Storage> Storage::Allocate(DeviceOption device, size_t nbytes) {
  void* p = GetAllocator(device.type)->Allocate(device, nbytes);
  return std::shared_ptr<Storage>(new Storage(device, p, nbytes, Kind::kLibrary, {}));
}

std::shared_ptr<Storage> Storage::Borrow(DeviceOption device, void* data, size_t nbytes) {
  return std::shared_ptr<Storage>(new Storage(device, data, nbytes, Kind::kBorrowed, {}));
}

std::shared_ptr<Storage> Storage::Adopt(DeviceOption device, void* data, size_t nbytes,
                                        ExternalDeleter deleter) {
  return std::shared_ptr<Storage>(new Storage(device, data, nbytes, Kind::kAdopted, deleter));
}

Storage::~Storage() {
  switch (kind_) {
    case Kind::kLibrary:
      if (data_ != nullptr) g_allocators[static_cast<size_t>(device_.type)].load()->Free(device_, data_);
      break;
    case Kind::kAdopted:
      if (deleter_.fn != nullptr) deleter_.fn(data_, deleter_.user_data);
      break;
    case Kind::kBorrowed:
      break;
  }
}

}  // namespace dp
