// Event: the only synchronisation between operators in a net. Recorded by the
// producer's context, waited on by the consumer's context. A CPU waiter blocks
// the host; a CUDA waiter makes its stream wait (the host does not block).
// An event carries an error state, so a failure travels to its waiters.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "core/device.h"

namespace dp {

class DeviceContext;

enum class EventStatus { kInitialized, kScheduled, kSuccess, kFailed };

class Event {
 public:
  virtual ~Event() = default;
  virtual DeviceOption device() const = 0;
  // Marks the point in ctx's work that waiters wait for.
  virtual void Record(DeviceContext& ctx) = 0;
  // Makes `waiter` wait for the recorded point. Throws if the event failed.
  virtual void Wait(DeviceContext& waiter) = 0;
  // Blocks the host until done; false on timeout. Throws if the event failed.
  virtual bool Finish(std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) = 0;
  virtual EventStatus Query() = 0;
  // Finishes the event from the host, successfully or with an error.
  virtual void SetFinished(const std::string& error = {}) = 0;
  virtual std::string ErrorMessage() = 0;
  // Back to kInitialized, for the next run.
  virtual void Reset() = 0;
};

class CpuEvent final : public Event {
 public:
  explicit CpuEvent(DeviceOption device = {}) : device_(device) {}
  DeviceOption device() const override { return device_; }
  void Record(DeviceContext& ctx) override;
  void Wait(DeviceContext& waiter) override;
  bool Finish(std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) override;
  EventStatus Query() override;
  void SetFinished(const std::string& error = {}) override;
  std::string ErrorMessage() override;
  void Reset() override;

 private:
  DeviceOption device_;
  std::mutex mu_;
  std::condition_variable cv_;
  EventStatus status_ = EventStatus::kInitialized;
  std::string error_;
};

}  // namespace dp
