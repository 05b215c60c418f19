// Storage: one block of device memory, shared between tensors. It is either
// allocated by dp (64-byte aligned on the CPU) or supplied by the caller,
// borrowed (never freed) or transferred (freed once through the caller's
// deleter). dp never writes into caller-supplied memory: a tensor that must
// be written gets fresh storage instead (see Tensor::Resize).
//
// Storage that dp allocates may be charged to a MemoryBudget (a workspace's
// cap on the bytes its blobs hold): the bytes are reserved before the
// allocation, which fails with kOutOfMemory when they would pass the limit,
// and given back when the storage is freed. All of dp's host storage
// together is bounded the same way by the memory the process may use
// (ProcessMemoryLimit, core/memory_limit.h): an allocation that would take
// it past is kOutOfMemory rather than the kernel's OOM kill.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace dp {

inline constexpr size_t kCpuAlignment = 64;

// Bytes charged against an optional limit (0 = unlimited) that applies per
// device: the host (every cpu:N shares it) and each GPU have a budget of
// `limit` bytes each. Shared by the storage allocated on its behalf;
// thread-safe (atomics only).
class MemoryBudget {
 public:
  // GPUs with ids up to this have budgets (kUnavailable past it).
  static constexpr int kMaxCudaDevices = 64;

  explicit MemoryBudget(uint64_t limit = 0) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  uint64_t limit() const { return limit_; }
  // Bytes in use on all devices together, and on one device's memory.
  uint64_t used() const;
  uint64_t used(DeviceOption device) const;
  // The most bytes in use at once on `device` since the last ResetPeak (a
  // net resets it when a run begins: its memory statistics).
  uint64_t peak(DeviceOption device) const;
  void ResetPeak() noexcept;
  // Reserves n bytes of `device`'s memory; throws kOutOfMemory (naming the
  // limit, the device when it is a GPU, the bytes asked and the bytes in use
  // there) when they would pass the limit.
  void Charge(DeviceOption device, size_t n);
  void Release(DeviceOption device, size_t n) noexcept { Slot(device).fetch_sub(n, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t>& Slot(DeviceOption device) noexcept;
  const std::atomic<uint64_t>& Slot(DeviceOption device) const noexcept;
  std::atomic<uint64_t>& PeakSlot(DeviceOption device) noexcept;

  const uint64_t limit_;
  std::atomic<uint64_t> host_{0};
  std::atomic<uint64_t> cuda_[kMaxCudaDevices] = {};
  std::atomic<uint64_t> host_peak_{0};
  std::atomic<uint64_t> cuda_peak_[kMaxCudaDevices] = {};
};

// Bytes of dp-allocated storage alive per device type (all devices of the
// type together), and the most alive at once since the last ResetPeakMemory.
// Caller-supplied (borrowed or adopted) memory is not counted.
struct MemoryStats {
  uint64_t allocated = 0;
  uint64_t peak = 0;
};
MemoryStats GetMemoryStats(DeviceType type);
void ResetPeakMemory(DeviceType type);  // peak := allocated now
// Storage dp allocated on `device`'s memory so far (every cpu:N counts as
// the host): a CUDA graph's capture that allocated recorded memory the graph
// does not own (exec/graph_capture.h). GPUs 64 apart share a count (one
// that moves too often, never one that misses).
uint64_t LibraryAllocations(DeviceOption device);

// One device's memory as dp sees it (dp_device_memory_stats). On the CPU
// (every cpu:N is the host): dp's host storage; allocations go straight to
// the C library or mmap, so reserved equals allocated and the raw counts are
// dp's host allocations and frees. On a GPU: what its caching allocator
// reports (core/caching_allocator.h): blocks handed out (rounded sizes),
// segments held, cudaMalloc and cudaFree calls.
struct DeviceMemoryStats {
  uint64_t allocated = 0;   // bytes of dp's storage alive now
  uint64_t peak = 0;        // most allocated at once since the last reset
  uint64_t reserved = 0;    // bytes dp holds from the device, its cache included
  uint64_t raw_allocs = 0;  // calls to the device's own allocation
  uint64_t raw_frees = 0;   // calls to the device's own free
};

// Raw allocation per device type; CUDA registers its own when built.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* Allocate(DeviceOption device, size_t nbytes) = 0;  // throws kOutOfMemory
  virtual void Free(DeviceOption device, void* ptr) noexcept = 0;
  // An allocator that keeps statistics per device (a caching one) fills
  // *out and returns true; otherwise dp's counters of the type serve.
  virtual bool GetStats(DeviceOption /*device*/, DeviceMemoryStats* /*out*/) { return false; }
  virtual void ResetPeak(DeviceOption /*device*/) {}
};
Allocator* GetAllocator(DeviceType type);  // throws kUnavailable when the type is not built
void RegisterAllocator(DeviceType type, Allocator* allocator);
// Page-locked host memory (Storage::AllocatePinned), which a device copies
// from and to asynchronously (the driver stages pageable memory itself, on
// the calling thread). The CUDA backend registers cudaMallocHost's; its
// Allocate throws when there is no GPU to pin for. Returns the allocator
// registered before (tests put it back).
Allocator* RegisterPinnedAllocator(Allocator* allocator);
// One device's statistics (the device must exist: the caller checks).
// Throws kUnavailable when its type is not built.
DeviceMemoryStats GetDeviceMemoryStats(DeviceOption device);
void ResetPeakDeviceMemory(DeviceOption device);  // peak := allocated now

class Storage;

// A slot of a net's memory plan (graph/memory_plan.h): the storage a blob
// left when its last reader ran, kept for the next blob the plan gives the
// slot, whose tensor takes it on its first Resize (Tensor::set_slot). No
// lock: the net's dependencies order each Park before the Take that follows
// (the plan only gives a slot to blobs that the DAG orders one after another).
//
// A slot made with keeps = false keeps nothing (a memory plan that frees
// after use): what is parked there is freed, Take finds nothing, and any
// number of threads may use it at once.
class StorageSlot {
 public:
  explicit StorageSlot(bool keeps = true) : keeps_(keeps) {}
  std::shared_ptr<Storage> Take() noexcept { return keeps_ ? std::move(parked_) : nullptr; }
  void Park(std::shared_ptr<Storage> storage) noexcept {
    if (keeps_) parked_ = std::move(storage);
  }
  size_t parked_bytes() const noexcept;
  // What is parked now (null: nothing); read between runs (a CUDA graph's
  // bindings: exec/graph_capture.h).
  const std::shared_ptr<Storage>& parked() const noexcept { return parked_; }

 private:
  const bool keeps_;
  std::shared_ptr<Storage> parked_;
};

// Caller deleter: fn(data, user_data), called exactly once.
struct ExternalDeleter {
  void (*fn)(void* data, void* user_data) = nullptr;
  void* user_data = nullptr;
};

class Storage {
 public:
  // With a budget, the bytes are charged to it first (kOutOfMemory when over
  // its limit) and released when the storage is freed.
  static std::shared_ptr<Storage> Allocate(DeviceOption device, size_t nbytes,
                                           std::shared_ptr<MemoryBudget> budget = nullptr);
  // Like Allocate, filled with zeros, on the CPU only. From 1 MiB up these
  // are fresh anonymous pages (mmap) that the kernel zeroes on first touch:
  // nothing is written here, and pages never written take no memory (reads
  // see the shared zero page). Counted and charged like Allocate.
  static std::shared_ptr<Storage> AllocateZeroed(DeviceOption device, size_t nbytes,
                                                 std::shared_ptr<MemoryBudget> budget = nullptr);
  // Host memory, page-locked when a backend that copies from it registered
  // a pinned allocator and can give it (else ordinary host memory: copies
  // from it are then staged by the driver, slower but the same); pinned()
  // says which. Counted and charged as host memory.
  static std::shared_ptr<Storage> AllocatePinned(size_t nbytes, std::shared_ptr<MemoryBudget> budget = nullptr);
  static std::shared_ptr<Storage> Borrow(DeviceOption device, void* data, size_t nbytes);
  // Takes ownership of caller memory: `deleter` runs once, when the last
  // reference goes. If Adopt throws (std::bad_alloc), the caller keeps
  // ownership and the deleter is never called.
  static std::shared_ptr<Storage> Adopt(DeviceOption device, void* data, size_t nbytes,
                                        ExternalDeleter deleter);
  // Bytes [offset, offset + nbytes) of `parent`, which stays alive while
  // the slice does. Like borrowed memory, a slice is only ever read: a
  // tensor over it that is written gets fresh storage first (so a parent's
  // owner may reuse the parent once it is the sole owner again).
  static std::shared_ptr<Storage> Slice(std::shared_ptr<Storage> parent, size_t offset, size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  DeviceOption device() const { return device_; }
  bool library_owned() const { return kind_ == Kind::kLibrary; }
  bool pinned() const { return pinned_; }  // page-locked host memory (AllocatePinned)
  // Whether the memory lives as long as this storage (not borrowed from a
  // caller who may free it once dp no longer holds the tensor it fed).
  bool keeps_memory_alive() const { return kind_ != Kind::kBorrowed || parent_ != nullptr; }
  // The budget this storage is charged to (nullptr: none).
  const std::shared_ptr<MemoryBudget>& budget() const { return budget_; }

 private:
  enum class Kind { kLibrary, kBorrowed, kAdopted };
  Storage(DeviceOption device, void* data, size_t nbytes, Kind kind, ExternalDeleter deleter)
      : device_(device), data_(data), nbytes_(nbytes), kind_(kind), deleter_(deleter) {}
  enum class Source { kAllocator, kZeroed, kPinned };  // where library memory comes from
  static std::shared_ptr<Storage> AllocateLibrary(DeviceOption device, size_t nbytes,
                                                  std::shared_ptr<MemoryBudget> budget, Source source);
  DeviceOption device_;
  void* data_;
  size_t nbytes_;
  Kind kind_;
  ExternalDeleter deleter_;
  bool mapped_ = false;                   // library storage from mmap (AllocateZeroed), not the allocator
  bool pinned_ = false;                   // library storage from the pinned allocator
  std::shared_ptr<MemoryBudget> budget_;  // charged nbytes_ (library storage only)
  std::shared_ptr<Storage> parent_;       // slices only
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

// Rows by index within one device: row i of dst becomes row indices[i] of
// src (rows of row_bytes bytes; src has src_rows of them), for i < rows; an
// index outside [0, src_rows) gives a row of zeros. src, dst and indices
// all live on `device`. With a context, device work is queued on its stream
// (asynchronous for CUDA); without one it completes before returning. On
// the CPU the caller copies. (A loader's batches from a dataset held on a
// GPU: data/device_loader.h.)
void GatherRows(DeviceOption device, const void* src, int64_t src_rows, size_t row_bytes, const int64_t* indices,
                int64_t rows, void* dst, DeviceContext* ctx = nullptr);

using GatherRowsFn = void (*)(DeviceOption device, const void* src, int64_t src_rows, size_t row_bytes,
                              const int64_t* indices, int64_t rows, void* dst, DeviceContext* ctx);
// Registers the gather of devices of type `type` (the CPU's is built in).
void RegisterGatherRows(DeviceType type, GatherRowsFn fn);

}  // namespace dp
