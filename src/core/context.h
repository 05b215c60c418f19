// DeviceContext: how an operator talks to its device. The CPU context is
// trivial; a CUDA context owns a stream and a cuBLAS handle. Operators get
// their context from the executor, so one kernel serves every stream.
// (Caffe2's Context, as a runtime interface rather than a template parameter.)
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/current_stream.h"
#include "core/device.h"
#include "core/event.h"

namespace dp {

// Device work recorded once and launched again as one unit (a CUDA graph):
// every launch repeats the recorded work on the same memory.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Queues the whole graph on ctx's stream (asynchronous, like one kernel).
  virtual void Launch(DeviceContext& ctx) = 0;
  // Its nodes: kernels, copies, event records and waits.
  virtual size_t nodes() const = 0;
  // Of those, the kernels (a library's, cuBLAS's, included): the launches
  // that one launch of the graph stands for.
  virtual size_t kernel_nodes() const { return 0; }
  // Launch, between two timing marks on ctx's stream (a profiled run).
  virtual void LaunchTimed(DeviceContext& ctx) { Launch(ctx); }
  // The device's time between the marks of the last LaunchTimed, in
  // microseconds, once the device has done it (the caller waited); -1 when
  // the last launch was not timed or the device keeps no such marks.
  virtual double LastLaunchDeviceMicros() { return -1; }
};

// A recording in progress (DeviceContext::BeginGraphCapture). Destroyed
// unfinished, it discards what was recorded and leaves the streams usable.
class GraphRecording {
 public:
  virtual ~GraphRecording() = default;
  // Ends the recording; throws when it was invalidated (a synchronisation
  // or an allocation by the recording thread, a stream not joined back).
  virtual std::unique_ptr<DeviceGraph> Finish() = 0;
};

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
  // Starts recording the work queued on this context, and on every context
  // that waits on an event recorded in the recording, into a graph instead
  // of running it; those contexts must be joined back (this one waits on an
  // event each of them records last) before Finish. `joining`: the contexts
  // that will join (the device's allocator must know every stream being
  // recorded). Only the calling thread may queue work while it records.
  // kUnimplemented where the device has no graphs (the CPU).
  virtual std::unique_ptr<GraphRecording> BeginGraphCapture(const std::vector<DeviceContext*>& joining);
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
