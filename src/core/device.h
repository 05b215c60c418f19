// Device identity. A DeviceOption names one device: (CPU, 0), (CUDA, 1), ...
#pragma once

#include <cstdint>
#include <string>

namespace dp {

enum class DeviceType : int32_t { kCPU = 0, kCUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

struct DeviceOption {
  DeviceType type = DeviceType::kCPU;
  int32_t id = 0;
  friend bool operator==(const DeviceOption&, const DeviceOption&) = default;
};

// Whether storage made on `a` can serve `b` as it is: CPU replicas (cpu:0,
// cpu:1, ...) all use the host's memory; each GPU has its own.
inline bool SameMemory(DeviceOption a, DeviceOption b) {
  return a.type == b.type && (a.type == DeviceType::kCPU || a.id == b.id);
}

std::string DeviceName(DeviceOption d);   // "cpu:0", "cuda:1"
// A replica's name scope ("cpu_0/") is ReplicaScope in core/scope.h.
const char* DeviceTypeName(DeviceType t);

// Number of usable devices of a type. CUDA reports 0 when dp was built
// without CUDA, when no driver is installed, or when no GPU is visible.
int DeviceCount(DeviceType t);

// Whether this build of dp has a backend for the type: one registered a
// counter at load time (cuda/ does in CUDA builds; the CPU is built in).
// With DeviceCount it tells "built without CUDA" from "no GPU or driver".
bool DeviceTypeCompiledIn(DeviceType t);

// The backend of a device type registers, at load time, how to count its
// devices. The counter is only called when somebody asks, never at load time.
using DeviceCounter = int (*)();
void RegisterDeviceCounter(DeviceType t, DeviceCounter count);

}  // namespace dp
