#include "core/current_stream.h"

namespace dp {
namespace {

thread_local DeviceOption t_device;
thread_local StreamId t_stream = kNoStream;

}  // namespace

StreamId CurrentStream(DeviceOption device) {
  return t_stream != kNoStream && t_device == device ? t_stream : kNoStream;
}

ThreadStream CurrentThreadStream() { return {t_device, t_stream}; }

CurrentStreamScope::CurrentStreamScope(DeviceOption device, StreamId stream)
    : previous_device_(t_device), previous_stream_(t_stream) {
  t_device = device;
  t_stream = stream;
}

CurrentStreamScope::~CurrentStreamScope() {
  t_device = previous_device_;
  t_stream = previous_stream_;
}

}  // namespace dp
