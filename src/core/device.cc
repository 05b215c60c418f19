#include "core/device.h"

#include "cuda/cuda_runtime.h"

namespace dp {

const char* DeviceTypeName(DeviceType t) { return t == DeviceType::kCUDA ? "cuda" : "cpu"; }

std::string DeviceName(DeviceOption d) {
  return std::string(DeviceTypeName(d.type)) + ":" + std::to_string(d.id);
}

std::string DeviceScope(DeviceOption d) {
  return std::string(DeviceTypeName(d.type)) + "_" + std::to_string(d.id) + "/";
}

int DeviceCount(DeviceType t) {
  if (t == DeviceType::kCPU) return 1;  // one logical CPU device per process; ids are replicas
  return cuda::DeviceCount();
}

}  // namespace dp
