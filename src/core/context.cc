#include "core/context.h"

#include <array>
#include <atomic>

#include "core/error.h"

namespace dp {
namespace {

std::unique_ptr<DeviceContext> MakeCpuContext(DeviceOption device) {
  return std::make_unique<CpuContext>(device);
}

std::array<std::atomic<ContextFactory>, kNumDeviceTypes> g_factories{&MakeCpuContext, nullptr};

}  // namespace

std::unique_ptr<GraphRecording> DeviceContext::BeginGraphCapture(const std::vector<DeviceContext*>&) {
  DP_THROW(Code::kUnimplemented, DeviceName(device()), " cannot record its work into a graph");
}

std::unique_ptr<Event> CpuContext::CreateEvent() { return std::make_unique<CpuEvent>(device_); }

void RegisterContextFactory(DeviceType type, ContextFactory factory) {
  g_factories[static_cast<size_t>(type)].store(factory, std::memory_order_release);
}

std::unique_ptr<DeviceContext> CreateContext(DeviceOption device) {
  ContextFactory f = g_factories[static_cast<size_t>(device.type)].load(std::memory_order_acquire);
  if (f == nullptr)
    DP_THROW(Code::kUnavailable, "no ", DeviceTypeName(device.type), " support in this build of dp");
  return f(device);
}

}  // namespace dp
