// DeviceContext: how an operator talks to its device. The CPU context is
// trivial; a CUDA context owns a stream and a cuBLAS handle. Operators get
// their context from the executor, so one kernel serves every stream.
// (Caffe2's Context, as a runtime interface rather than a template parameter.)
#pragma once

#include <memory>

#include "core/current_stream.h"
#include "core/device.h"
#include "core/event.h"

namespace dp {

class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  virtual DeviceOption device() const = 0;
  // Makes this context's device current on the calling thread.
  virtual void SwitchToDevice() {}
  // Blocks until all work queued on this context is done; throws its error.
  virtual void FinishDeviceComputation() {}
  // True when ops on this context return before their work is done (streams).
  virtual bool IsAsync() const { return false; }
  // The stream its work is ordered on (kNoStream: none, work is synchronous).
  // Operator::Run makes it the thread's CurrentStream while the op runs, so
  // that device memory the op allocates and frees is ordered on it.
  virtual StreamId stream_id() const { return kNoStream; }
  // An event that this context can record.
  virtual std::unique_ptr<Event> CreateEvent() = 0;
};

class CpuContext final : public DeviceContext {
 public:
  explicit CpuContext(DeviceOption device = {}) : device_(device) {}
  DeviceOption device() const override { return device_; }
  std::unique_ptr<Event> CreateEvent() override;

 private:
  DeviceOption device_;
};

// Creates the context of any device type (CUDA throws kUnavailable when absent).
std::unique_ptr<DeviceContext> CreateContext(DeviceOption device);

using ContextFactory = std::unique_ptr<DeviceContext> (*)(DeviceOption device);
void RegisterContextFactory(DeviceType type, ContextFactory factory);

}  // namespace dp
