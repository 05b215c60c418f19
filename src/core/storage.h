// Storage: one block of device memory, shared between tensors. It is either
// allocated by dp (64-byte aligned on the CPU) or supplied by the caller,
// borrowed (never freed) or transferred (freed once through the caller's
// deleter). dp never writes into caller-supplied memory: a tensor that must
// be written gets fresh storage instead (see Tensor::Resize).
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace dp {

inline constexpr size_t kCpuAlignment = 64;

// Raw allocation per device type; CUDA registers its own when built.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* Allocate(DeviceOption device, size_t nbytes) = 0;  // throws kOutOfMemory
  virtual void Free(DeviceOption device, void* ptr) noexcept = 0;
};
Allocator* GetAllocator(DeviceType type);  // throws kUnavailable when the type is not built
void RegisterAllocator(DeviceType type, Allocator* allocator);

// Caller deleter: fn(data, user_data), called exactly once.
struct ExternalDeleter {
  void (*fn)(void* data, void* user_data) = nullptr;
  void* user_data = nullptr;
};

class Storage {
 public:
  static std::shared_ptr<Storage> Allocate(DeviceOption device, size_t nbytes);
  static std::shared_ptr<Storage> Borrow(DeviceOption device, void* data, size_t nbytes);
  static std::shared_ptr<Storage> Adopt(DeviceOption device, void* data, size_t nbytes,
                                        ExternalDeleter deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  DeviceOption device() const { return device_; }
  bool library_owned() const { return kind_ == Kind::kLibrary; }

 private:
  enum class Kind { kLibrary, kBorrowed, kAdopted };
  Storage(DeviceOption device, void* data, size_t nbytes, Kind kind, ExternalDeleter deleter)
      : device_(device), data_(data), nbytes_(nbytes), kind_(kind), deleter_(deleter) {}
  DeviceOption device_;
  void* data_;
  size_t nbytes_;
  Kind kind_;
  ExternalDeleter deleter_;
};

// Copies n bytes between any two devices. With a context, CUDA copies are
// asynchronous on its stream; without one they complete before returning.
class DeviceContext;
void CopyBytes(size_t n, const void* src, DeviceOption src_device, void* dst, DeviceOption dst_device,
               DeviceContext* ctx = nullptr);

using CopyFn = void (*)(size_t n, const void* src, DeviceOption src_device, void* dst,
                        DeviceOption dst_device, DeviceContext* ctx);
// Registers the copy routine used when either side is of type `type`.
void RegisterCopy(DeviceType type, CopyFn fn);

}  // namespace dp
