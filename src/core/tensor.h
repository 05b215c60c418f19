// Tensor: shape + dtype + device over shared Storage.
//
// Copies of a Tensor share storage (cheap, like a shared_ptr). Writers never
// change memory somebody else still sees: Resize() keeps the storage only when
// this tensor is its sole owner and dp allocated it, and otherwise gives the
// tensor fresh storage. So a fetched tensor keeps its values while the net
// runs again, and caller-supplied memory is only ever read.
//
// Kernel rule that follows: write outputs only from input pointers, never by
// reading back an output buffer (it may be fresh memory after Resize).
//
// A tensor may carry a MemoryBudget (a workspace's, set by Operator::Output):
// the storage it allocates from then on (Resize, CopyFrom, copy-on-write) is
// charged to it. Copies of the tensor carry the same budget; ShareData keeps
// the tensor's own.
//
// A tensor may also carry a StorageSlot (a net's memory plan sets it on the
// outputs it plans, Operator::Output): a Resize that cannot keep the
// tensor's storage takes the slot's parked storage first when it fits, and
// a tensor with a slot keeps any storage that fits (the plan sized it for
// the slot's largest blob). ShareData keeps the tensor's own slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/storage.h"

namespace dp {

using Dims = std::vector<int64_t>;

int64_t NumElements(const Dims& dims);  // throws kShape on negative dims or overflow
std::string DimsString(const Dims& dims);  // "[2, 3]"
// Bytes of a dense tensor; throws kShape if the size does not fit in size_t.
size_t TensorBytes(const Dims& dims, DType dtype);

class Tensor {
 public:
  Tensor() = default;
  Tensor(Dims dims, DType dtype, DeviceOption device = {});  // fresh, uninitialised
  // A tensor over existing storage; checks that the storage is large enough.
  static Tensor FromStorage(Dims dims, DType dtype, std::shared_ptr<Storage> storage);
  // A fresh CPU tensor of zeros (Storage::AllocateZeroed: large ones take
  // memory only as they are written), charged to `budget` if given.
  static Tensor Zeros(Dims dims, DType dtype, std::shared_ptr<MemoryBudget> budget = nullptr);

  bool defined() const { return dtype_ != DType::kUndefined; }
  const Dims& dims() const { return dims_; }
  int ndim() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const;  // negative i counts from the back; throws kOutOfRange
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  size_t itemsize() const { return DTypeSize(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel_) * DTypeSize(dtype_); }
  DeviceOption device() const { return device_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  // The budget that new storage of this tensor is charged to (nullptr: none).
  const std::shared_ptr<MemoryBudget>& budget() const { return budget_; }
  void set_budget(std::shared_ptr<MemoryBudget> budget) { budget_ = std::move(budget); }
  const std::shared_ptr<StorageSlot>& slot() const { return slot_; }
  void set_slot(std::shared_ptr<StorageSlot> slot) { slot_ = std::move(slot); }

  // Shape and dtype of the next write; see the class comment for sharing.
  void Resize(Dims dims, DType dtype, DeviceOption device);
  void Resize(Dims dims, DType dtype) { Resize(std::move(dims), dtype, device_); }
  void ResizeLike(const Tensor& other) { Resize(other.dims_, other.dtype_, other.device_); }
  // New shape over the same elements and storage (metadata only).
  void Reshape(Dims dims);
  // Becomes a view of other's storage with other's shape (keeps its budget).
  void ShareData(const Tensor& other) {
    std::shared_ptr<MemoryBudget> budget = std::move(budget_);
    std::shared_ptr<StorageSlot> slot = std::move(slot_);
    *this = other;
    budget_ = std::move(budget);
    slot_ = std::move(slot);
  }
  // Deep copy (any devices; asynchronous on ctx's stream for CUDA).
  void CopyFrom(const Tensor& src, DeviceContext* ctx = nullptr);

  const void* raw_data() const { return storage_ ? storage_->data() : nullptr; }
  void* raw_mutable_data();  // makes the storage writable first
  // Whether raw_mutable_data() would write in place (library memory held by
  // this tensor alone, or no storage), i.e. make no copy-on-write copy.
  bool writable_in_place() const;

  template <typename T>
  const T* data() const {
    CheckDType(DTypeOf<T>());
    return static_cast<const T*>(raw_data());
  }
  template <typename T>
  T* mutable_data() {
    CheckDType(DTypeOf<T>());
    return static_cast<T*>(raw_mutable_data());
  }

  std::string DebugString() const;  // "float32[2, 3] on cpu:0"

 private:
  void CheckDType(DType want) const;
  Dims dims_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kUndefined;
  DeviceOption device_;
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<MemoryBudget> budget_;
  std::shared_ptr<StorageSlot> slot_;
};

}  // namespace dp
