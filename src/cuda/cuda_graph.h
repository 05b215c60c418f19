// A CUDA graph recorded from streams (stream capture) and instantiated for
// replay: the CUDA half of whole-net graph capture, whose host half
// (exec/graph_capture.h) decides when a graph may be recorded and replayed.
//
// A capture starts on one origin stream; other streams join it by waiting
// on an event recorded in a captured stream, and must be joined back into
// the origin (the origin waits on an event each of them records last)
// before the capture ends; the event waits become the graph's edges.
// Capture mode is thread-local: only the recording thread's calls into the
// unsafe CUDA APIs (a cudaMalloc, a synchronisation) invalidate the capture,
// which ends in an error rather than a graph that misses them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

namespace dp::cuda {

// An instantiated graph: launched as one unit on any stream of its device.
class CudaGraphExec {
 public:
  CudaGraphExec(cudaGraph_t graph, cudaGraphExec_t exec, size_t nodes, size_t kernel_nodes)
      : graph_(graph), exec_(exec), nodes_(nodes), kernel_nodes_(kernel_nodes) {}
  ~CudaGraphExec();
  CudaGraphExec(const CudaGraphExec&) = delete;
  CudaGraphExec& operator=(const CudaGraphExec&) = delete;

  // Queues the whole graph on `stream` (asynchronous, like a kernel); timed,
  // between two timing events (made on first use), whose interval
  // LastMicros reads once the stream got past the second.
  void Launch(cudaStream_t stream, bool timed = false);
  double LastMicros();
  // Its nodes: kernels, copies, memsets, event records and waits.
  size_t nodes() const { return nodes_; }
  size_t kernel_nodes() const { return kernel_nodes_; }

 private:
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  size_t nodes_, kernel_nodes_;
  cudaEvent_t marks_[2] = {nullptr, nullptr};
  bool timed_ = false;  // the last launch was
};

// A capture in progress on `origin`. Finish ends it and instantiates the
// graph; destroyed unfinished (an op threw while recording), it ends the
// capture and discards what was recorded, so the stream is usable again.
class StreamCapture {
 public:
  explicit StreamCapture(cudaStream_t origin);
  ~StreamCapture();
  StreamCapture(const StreamCapture&) = delete;
  StreamCapture& operator=(const StreamCapture&) = delete;

  // Throws the CUDA error when the capture was invalidated (an unsafe call,
  // a stream not joined back) or cannot be instantiated.
  std::unique_ptr<CudaGraphExec> Finish();

 private:
  cudaStream_t origin_;
  bool open_ = true;
};

}  // namespace dp::cuda
