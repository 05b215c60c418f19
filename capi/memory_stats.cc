// dp_device_memory_stats and dp_device_reset_peak_memory: one device's memory
// as dp uses it (core/storage.h's DeviceMemoryStats; the CUDA figures come
// from its caching allocator, cuda/cuda_caching_allocator).
#include "capi/handles.h"
#include "core/storage.h"
#include "exec/net.h"

namespace {

// The device named by the C arguments, checked for the function `func`:
// INVALID_ARGUMENT for an unknown type or a negative id, UNAVAILABLE for a
// GPU dp_device_count does not report.
dp::DeviceOption CheckedDevice(const char* func, int32_t device_type, int32_t device_id) {
  DP_CHECK_ARG_IN(func, device_type == DP_DEVICE_CPU || device_type == DP_DEVICE_CUDA, "unknown device_type ",
                  device_type);
  DP_CHECK_ARG_IN(func, device_id >= 0, "device_id is ", device_id, " (device ids start at 0)");
  const dp::DeviceOption device{static_cast<dp::DeviceType>(device_type), device_id};
  if (device.type == dp::DeviceType::kCUDA) {
    const int count = dp::DeviceCount(device.type);
    DP_ENFORCE_CODE(device_id < count, dp::Code::kUnavailable, func, ": device ", dp::DeviceName(device),
                    " is not available (dp_device_count reports ", count, " CUDA devices)");
  }
  return device;
}

}  // namespace

extern "C" {

dp_status* dp_device_memory_stats(int32_t device_type, int32_t device_id, dp_memory_stats* out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(out->struct_size >= sizeof(out->struct_size), "out->struct_size is ", out->struct_size,
               " (set it to sizeof(dp_memory_stats))");
  const dp::DeviceMemoryStats s = dp::GetDeviceMemoryStats(CheckedDevice(__func__, device_type, device_id));
  if (DP_OPTIONS_HAVE(out, allocated)) out->allocated = s.allocated;
  if (DP_OPTIONS_HAVE(out, peak)) out->peak = s.peak;
  if (DP_OPTIONS_HAVE(out, reserved)) out->reserved = s.reserved;
  if (DP_OPTIONS_HAVE(out, raw_allocs)) out->raw_allocs = s.raw_allocs;
  if (DP_OPTIONS_HAVE(out, raw_frees)) out->raw_frees = s.raw_frees;
  DP_API_END
}

dp_status* dp_net_memory_stats(const dp_net* net, int32_t device_type, int32_t device_id, dp_net_memory* out) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(net);
  DP_CHECK_NOT_NULL(out);
  DP_CHECK_ARG(out->struct_size >= sizeof(out->struct_size), "out->struct_size is ", out->struct_size,
               " (set it to sizeof(dp_net_memory))");
  const dp::DeviceOption device = CheckedDevice(__func__, device_type, device_id);
  const dp::NetMemoryStats s = net->net->memory_stats();
  const dp::MemoryBudget& budget = *net->net->workspace().budget();
  if (DP_OPTIONS_HAVE(out, mode)) out->mode = static_cast<int32_t>(s.mode);
  if (DP_OPTIONS_HAVE(out, peak_bytes)) out->peak_bytes = budget.peak(device);
  if (DP_OPTIONS_HAVE(out, bytes_in_use)) out->bytes_in_use = budget.used(device);
  if (DP_OPTIONS_HAVE(out, temporaries)) out->temporaries = s.temporaries;
  if (DP_OPTIONS_HAVE(out, slots)) out->slots = s.slots;
  if (DP_OPTIONS_HAVE(out, slot_bytes)) out->slot_bytes = s.slot_bytes;
  DP_API_END
}

dp_status* dp_device_reset_peak_memory(int32_t device_type, int32_t device_id) {
  DP_API_BEGIN
  dp::ResetPeakDeviceMemory(CheckedDevice(__func__, device_type, device_id));
  DP_API_END
}

}  // extern "C"
