// Blob: a named, type-erased slot in a Workspace. It usually holds a Tensor,
// but can hold any object an operator needs to keep between runs (counters,
// communicators, RNG state).
//
// Two kinds of callers, two kinds of access:
// - Ops (Get, GetMutable, Reset, Clear) take no lock: a net binds its ops to
//   Blob pointers and its executor orders the ops that touch one blob, so a
//   run pays nothing per access.
// - Callers outside a run (Publish, Share: the workspace's Feed and
//   GetTensor, hence the C API's feeds and fetches, loaders and checkpoints)
//   are serialised per blob by a mutex of its own, so any number of threads
//   may publish and share the same blob at once, and share it while ops only
//   read it. They are not ordered against ops that write the blob, nor a
//   Publish against ops that read it: nobody may do that while such a net runs.
// - empty, IsType and TypeName read an atomic: any thread, any time (a blob
//   that a running op fills for the first time may look either way).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>

#include "core/error.h"

namespace dp {

std::string DemangledTypeName(const std::type_info& info);

class Blob {
 public:
  explicit Blob(std::string name) : name_(std::move(name)) {}
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;
  const std::string& name() const { return name_; }

  bool empty() const { return held_type() == nullptr; }
  template <typename T>
  bool IsType() const {
    const std::type_info* t = held_type();
    return t != nullptr && *t == typeid(T);
  }
  std::string TypeName() const { return NameOf(held_type()); }

  // --- Op access (ordered by the executor; no lock) ---

  // The held T; fails with kNotFound if the blob is empty, kDType naming the
  // blob if it holds something else.
  template <typename T>
  const T& Get() const {
    if (!IsType<T>()) ThrowNot(typeid(T), held_type());
    return *static_cast<const T*>(ptr_.get());
  }
  // The held T, replacing any other content with a default-constructed T.
  template <typename T>
  T* GetMutable() {
    if (!IsType<T>()) Reset(std::make_shared<T>());
    return static_cast<T*>(ptr_.get());
  }
  template <typename T>
  void Reset(std::shared_ptr<T> value) {
    ptr_ = std::move(value);
    type_.store(&typeid(T), std::memory_order_release);
  }
  void Clear() {
    type_.store(nullptr, std::memory_order_release);
    ptr_.reset();
  }
  // Empties the blob and hands over what it held, if that is a T; otherwise
  // (empty, or another type) returns nullptr and leaves the blob as it is.
  // What a net's memory plan does after a blob's last use.
  template <typename T>
  std::shared_ptr<T> Release() noexcept {
    if (!IsType<T>()) return nullptr;
    type_.store(nullptr, std::memory_order_release);
    return std::static_pointer_cast<T>(std::move(ptr_));
  }
  // Whether a net's memory plan frees this blob after its last use in a run:
  // each such net marks it while it lives (and unmarks it after); an empty
  // blob's error then says why.
  void MarkTransient() noexcept { transient_.fetch_add(1, std::memory_order_relaxed); }
  void UnmarkTransient() noexcept { transient_.fetch_sub(1, std::memory_order_relaxed); }
  bool transient() const noexcept { return transient_.load(std::memory_order_relaxed) > 0; }

  // --- Access from outside a run (serialised per blob) ---

  // Reset, under the blob's lock. What the blob held before is released after
  // the lock (a fed tensor's deleter may run caller code).
  template <typename T>
  void Publish(std::shared_ptr<T> value) {
    std::shared_ptr<void> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = std::move(ptr_);
      ptr_ = std::move(value);
      type_.store(&typeid(T), std::memory_order_release);
    }
  }
  // Clear, under the blob's lock; what it held is released after the lock.
  void Withdraw() {
    std::shared_ptr<void> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = std::move(ptr_);
      type_.store(nullptr, std::memory_order_release);
    }
  }
  // The held T, shared with the blob: it stays valid and unchanged however
  // the blob is published to later. Fails as Get does.
  template <typename T>
  std::shared_ptr<const T> Share() const {
    std::shared_ptr<void> held;
    const std::type_info* type;
    {
      std::lock_guard<std::mutex> lock(mu_);
      held = ptr_;
      type = type_.load(std::memory_order_relaxed);
    }
    if (type == nullptr || *type != typeid(T)) ThrowNot(typeid(T), type);
    const T* value = static_cast<const T*>(held.get());
    return std::shared_ptr<const T>(std::move(held), value);
  }

 private:
  const std::type_info* held_type() const { return type_.load(std::memory_order_acquire); }
  static std::string NameOf(const std::type_info* type) { return type ? DemangledTypeName(*type) : "nothing"; }
  [[noreturn]] void ThrowNot(const std::type_info& want, const std::type_info* held) const {
    DP_THROW(held == nullptr ? Code::kNotFound : Code::kDType, "blob '", name_, "' holds ", NameOf(held), ", not ",
             DemangledTypeName(want));
  }

  const std::string name_;
  std::atomic<const std::type_info*> type_{nullptr};  // what ptr_ holds; nullptr when empty
  std::shared_ptr<void> ptr_;
  std::atomic<int> transient_{0};  // nets whose plan frees it
  mutable std::mutex mu_;  // Publish and Share
};

}  // namespace dp
