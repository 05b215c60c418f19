// dp_status objects, the version, logging and device queries.
#include "capi/handles.h"
#include "dp_config.h"
#include "core/device.h"
#include "core/logging.h"

namespace dp::capi {

// Returned when even the status object cannot be allocated; never freed.
static dp_status g_out_of_memory{static_cast<int32_t>(Code::kOutOfMemory), "out of memory"};

dp_status* MakeStatus(Code code, const std::string& message) noexcept {
  try {
    return new dp_status{static_cast<int32_t>(code), message};
  } catch (...) {
    return &g_out_of_memory;
  }
}

dp_status* StatusFromCurrentException() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return MakeStatus(e.code(), e.message());
  } catch (const std::bad_alloc&) {
    return &g_out_of_memory;
  } catch (const std::exception& e) {
    return MakeStatus(Code::kInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    return MakeStatus(Code::kInternal, "internal error: unknown exception");
  }
}

}  // namespace dp::capi

extern "C" {

const char* dp_version(void) { return DP_VERSION_STRING; }

uint32_t dp_version_number(void) { return DP_VERSION_NUMBER; }

int32_t dp_status_code(const dp_status* status) { return status ? status->code : DP_OK; }

const char* dp_status_message(const dp_status* status) { return status ? status->message.c_str() : ""; }

void dp_status_free(dp_status* status) {
  if (status != &dp::capi::g_out_of_memory) delete status;
}

const char* dp_status_code_name(int32_t code) {
  if (code < 0 || code > static_cast<int32_t>(dp::Code::kDType)) return "UNKNOWN";
  return dp::CodeName(static_cast<dp::Code>(code));
}

void dp_log_set_callback(dp_log_callback callback, void* user_data, int32_t min_level) {
  if (min_level < DP_LOG_DEBUG) min_level = DP_LOG_DEBUG;
  if (min_level > DP_LOG_ERROR) min_level = DP_LOG_ERROR;
  dp::SetLogSink(callback, user_data, static_cast<dp::LogLevel>(min_level));
}

dp_status* dp_device_count(int32_t device_type, int32_t* out_count) {
  DP_API_BEGIN
  DP_CHECK_NOT_NULL(out_count);
  DP_CHECK_ARG(device_type == DP_DEVICE_CPU || device_type == DP_DEVICE_CUDA, "unknown device_type ",
               device_type);
  *out_count = dp::DeviceCount(static_cast<dp::DeviceType>(device_type));
  DP_API_END
}

}  // extern "C"
