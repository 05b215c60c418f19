#include "core/device.h"

#include <array>
#include <atomic>

namespace dp {
namespace {

// One logical CPU device per process; replicas are ids on it.
int CountCpus() { return 1; }

std::array<std::atomic<DeviceCounter>, kNumDeviceTypes> g_counters{&CountCpus, nullptr};

DeviceCounter CounterOf(DeviceType t) {
  return g_counters[static_cast<size_t>(t)].load(std::memory_order_acquire);
}

}  // namespace

const char* DeviceTypeName(DeviceType t) { return t == DeviceType::kCUDA ? "cuda" : "cpu"; }

std::string DeviceName(DeviceOption d) {
  return std::string(DeviceTypeName(d.type)) + ":" + std::to_string(d.id);
}

void RegisterDeviceCounter(DeviceType t, DeviceCounter count) {
  g_counters[static_cast<size_t>(t)].store(count, std::memory_order_release);
}

bool DeviceTypeCompiledIn(DeviceType t) { return CounterOf(t) != nullptr; }

int DeviceCount(DeviceType t) {
  DeviceCounter count = CounterOf(t);
  return count == nullptr ? 0 : count();
}

}  // namespace dp
