#include "core/tensor.h"

#include <atomic>

#include <limits>
#include <sstream>

namespace dp {

int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) DP_THROW(Code::kShape, "negative dimension in shape ", DimsString(dims));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      DP_THROW(Code::kShape, "shape ", DimsString(dims), " has too many elements");
    n *= d;
  }
  return n;
}

std::string DimsString(const Dims& dims) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  os << ']';
  return os.str();
}

size_t TensorBytes(const Dims& dims, DType dtype) {
  int64_t numel = NumElements(dims);
  size_t esize = DTypeSize(dtype);
  if (esize != 0 && static_cast<uint64_t>(numel) > std::numeric_limits<size_t>::max() / esize)
    DP_THROW(Code::kShape, "a ", DTypeName(dtype), DimsString(dims), " tensor does not fit in memory");
  return static_cast<size_t>(numel) * esize;
}

namespace {

// Whether this tensor alone holds `storage` (so it may write it in place).
// Another thread may have just dropped its reference (a background
// checkpoint writer releases each tensor once written): its reads of the
// bytes must happen before our writes, which the acquire fence after seeing
// the count it left provides (shared_ptr's release decrement pairs with it;
// use_count() itself is a relaxed load).
bool SoleOwner(const std::shared_ptr<Storage>& storage) {
  if (storage.use_count() != 1) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

}  // namespace

Tensor::Tensor(Dims dims, DType dtype, DeviceOption device) { Resize(std::move(dims), dtype, device); }

Tensor Tensor::FromStorage(Dims dims, DType dtype, std::shared_ptr<Storage> storage) {
  DP_ENFORCE_CODE(dtype != DType::kUndefined, Code::kDType, "tensor dtype is undefined");
  Tensor t;
  TensorBytes(dims, dtype);  // rejects sizes that overflow
  t.numel_ = NumElements(dims);
  t.dims_ = std::move(dims);
  t.dtype_ = dtype;
  t.device_ = storage->device();
  DP_ENFORCE_CODE(t.nbytes() <= storage->nbytes(), Code::kShape, "tensor ", DTypeName(dtype),
                  DimsString(t.dims_), " needs ", t.nbytes(), " bytes but its buffer has ",
                  storage->nbytes());
  DP_ENFORCE(t.nbytes() == 0 || storage->data() != nullptr, "tensor data pointer is NULL");
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::Zeros(Dims dims, DType dtype, std::shared_ptr<MemoryBudget> budget) {
  DP_ENFORCE_CODE(dtype != DType::kUndefined, Code::kDType, "tensor dtype is undefined");
  const size_t bytes = TensorBytes(dims, dtype);  // rejects sizes that overflow
  Tensor t = FromStorage(std::move(dims), dtype, Storage::AllocateZeroed({}, bytes, budget));
  t.budget_ = std::move(budget);
  return t;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  int j = i < 0 ? i + n : i;
  if (j < 0 || j >= n)
    DP_THROW(Code::kOutOfRange, "dimension ", i, " out of range for a tensor of rank ", n);
  return dims_[static_cast<size_t>(j)];
}

void Tensor::Resize(Dims dims, DType dtype, DeviceOption device) {
  DP_ENFORCE_CODE(dtype != DType::kUndefined, Code::kDType, "tensor dtype is undefined");
  int64_t numel = NumElements(dims);
  size_t need = TensorBytes(dims, dtype);
  bool reuse = storage_ && SoleOwner(storage_) && storage_->library_owned() &&
               SameMemory(storage_->device(), device) && storage_->nbytes() >= need &&
               // Do not pin a large block for a much smaller tensor (unless a
               // memory plan sized the block for this tensor's slot).
               (slot_ || storage_->nbytes() <= 2 * need + 4096);
  if (!reuse) {
    // Memory nobody else sees goes back before the new block is taken, so
    // that a tensor changing size never holds both (a budget counts them).
    // If the allocation then fails, the tensor is left empty (or, when it
    // gave nothing back, unchanged).
    const bool dropped = storage_ && SoleOwner(storage_) && storage_->library_owned();
    if (dropped) storage_.reset();
    std::shared_ptr<Storage> parked = slot_ ? slot_->Take() : nullptr;
    if (parked && SameMemory(parked->device(), device) && parked->nbytes() >= need) {
      storage_ = std::move(parked);
    } else {
      parked.reset();  // too small for this blob: the slot grows to it
      try {
        storage_ = Storage::Allocate(device, need, budget_);
      } catch (...) {
        if (dropped) {
          dims_.clear();
          numel_ = 0;
          dtype_ = DType::kUndefined;
        }
        throw;
      }
    }
  }
  dims_ = std::move(dims);
  numel_ = numel;
  dtype_ = dtype;
  device_ = device;
}

void Tensor::Reshape(Dims dims) {
  int64_t numel = NumElements(dims);
  DP_ENFORCE_CODE(numel == numel_, Code::kShape, "cannot reshape ", DimsString(dims_), " (", numel_,
                  " elements) to ", DimsString(dims), " (", numel, " elements)");
  dims_ = std::move(dims);
}

void Tensor::CopyFrom(const Tensor& src, DeviceContext* ctx) {
  if (this == &src) return;
  DP_ENFORCE_CODE(src.defined(), Code::kDType, "cannot copy from an empty tensor");
  Tensor keep = src;  // src may alias *this's storage; keep it alive across Resize
  Resize(src.dims_, src.dtype_, device_);
  CopyBytes(nbytes(), keep.raw_data(), keep.device_, raw_mutable_data(), device_, ctx);
}

bool Tensor::writable_in_place() const { return !storage_ || (SoleOwner(storage_) && storage_->library_owned()); }

void* Tensor::raw_mutable_data() {
  if (!writable_in_place()) {
    // Copy-on-write: somebody else sees this memory, or the caller owns it.
    auto fresh = Storage::Allocate(device_, nbytes(), budget_);
    CopyBytes(nbytes(), storage_->data(), device_, fresh->data(), device_);
    storage_ = std::move(fresh);
  }
  return storage_ ? storage_->data() : nullptr;
}

void Tensor::CheckDType(DType want) const {
  if (dtype_ != want)
    DP_THROW(Code::kDType, "expected a ", DTypeName(want), " tensor, got ", DebugString());
}

std::string Tensor::DebugString() const {
  if (!defined()) return "empty tensor";
  return StrCat(DTypeName(dtype_), DimsString(dims_), " on ", DeviceName(device_));
}

}  // namespace dp
