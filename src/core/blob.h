// Blob: a named, type-erased slot in a Workspace. It usually holds a Tensor,
// but can hold any object an operator needs to keep between runs (counters,
// communicators, RNG state).
#pragma once

#include <memory>
#include <string>
#include <typeinfo>

#include "core/error.h"

namespace dp {

std::string DemangledTypeName(const std::type_info& info);

class Blob {
 public:
  explicit Blob(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  bool empty() const { return ptr_ == nullptr; }
  template <typename T>
  bool IsType() const {
    return ptr_ != nullptr && *type_ == typeid(T);
  }
  std::string TypeName() const { return ptr_ ? DemangledTypeName(*type_) : "nothing"; }

  // The held T; fails with kDType naming the blob if it holds something else.
  template <typename T>
  const T& Get() const {
    if (!IsType<T>())
      DP_THROW(empty() ? Code::kNotFound : Code::kDType, "blob '", name_, "' holds ", TypeName(),
               ", not ", DemangledTypeName(typeid(T)));
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
    type_ = &typeid(T);
    ptr_ = std::move(value);
  }
  void Clear() {
    ptr_.reset();
    type_ = nullptr;
  }

 private:
  std::string name_;
  const std::type_info* type_ = nullptr;
  std::shared_ptr<void> ptr_;
};

}  // namespace dp
