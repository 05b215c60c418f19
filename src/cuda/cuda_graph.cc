#include "cuda/cuda_graph.h"

#include <vector>

#include "cuda/cuda_caching_allocator.h"
#include "cuda/cuda_context.h"

namespace dp::cuda {

CudaGraphExec::~CudaGraphExec() {
  // Never throws: at process exit the runtime may already be gone.
  for (cudaEvent_t e : marks_)
    if (e != nullptr) cudaEventDestroy(e);
  cudaGraphExecDestroy(exec_);
  cudaGraphDestroy(graph_);
  cudaGetLastError();
}

void CudaGraphExec::Launch(cudaStream_t stream, bool timed) {
  timed_ = false;
  if (timed) {
    for (cudaEvent_t& e : marks_)
      if (e == nullptr) DP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDefault));
    DP_CUDA_CHECK(cudaEventRecord(marks_[0], stream));
  }
  DP_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  if (timed) {
    DP_CUDA_CHECK(cudaEventRecord(marks_[1], stream));
    timed_ = true;
  }
}

double CudaGraphExec::LastMicros() {
  if (!timed_) return -1;
  float ms = 0;
  DP_CUDA_CHECK(cudaEventSynchronize(marks_[1]));
  DP_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[0], marks_[1]));
  return static_cast<double>(ms) * 1000.0;
}

namespace {

// The kernel nodes of `graph` (kernels a library launched included).
size_t KernelNodes(cudaGraph_t graph, size_t nodes) {
  std::vector<cudaGraphNode_t> all(nodes);
  size_t count = nodes;
  if (nodes == 0 || cudaGraphGetNodes(graph, all.data(), &count) != cudaSuccess) return 0;
  size_t kernels = 0;
  for (size_t i = 0; i < count && i < all.size(); ++i) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(all[i], &type) == cudaSuccess && type == cudaGraphNodeTypeKernel) ++kernels;
  }
  return kernels;
}

}  // namespace

StreamCapture::StreamCapture(cudaStream_t origin) : origin_(origin) {
  DP_CUDA_CHECK(cudaStreamBeginCapture(origin_, cudaStreamCaptureModeThreadLocal));
}

StreamCapture::~StreamCapture() {
  if (!open_) return;
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(origin_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();  // an invalidated capture's error is not this path's to report
}

std::unique_ptr<CudaGraphExec> StreamCapture::Finish() {
  open_ = false;
  cudaGraph_t graph = nullptr;
  DP_CUDA_CHECK(cudaStreamEndCapture(origin_, &graph));
  size_t nodes = 0;
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphGetNodes(graph, nullptr, &nodes);
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  if (err != cudaSuccess) {
    cudaGraphDestroy(graph);
    ThrowCudaError(err, "instantiating the captured graph", __FILE__, __LINE__);
  }
  try {
    return std::make_unique<CudaGraphExec>(graph, exec, nodes, KernelNodes(graph, nodes));
  } catch (...) {
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    throw;
  }
}

namespace {

// The graphs of the device-independent interface (core/context.h).
class CudaDeviceGraph final : public DeviceGraph {
 public:
  explicit CudaDeviceGraph(std::unique_ptr<CudaGraphExec> exec) : exec_(std::move(exec)) {}
  void Launch(DeviceContext& ctx) override { exec_->Launch(StreamOf(ctx)); }
  void LaunchTimed(DeviceContext& ctx) override { exec_->Launch(StreamOf(ctx), /*timed=*/true); }
  double LastLaunchDeviceMicros() override { return exec_->LastMicros(); }
  size_t nodes() const override { return exec_->nodes(); }
  size_t kernel_nodes() const override { return exec_->kernel_nodes(); }

 private:
  static cudaStream_t StreamOf(DeviceContext& ctx) {
    auto* cuda_ctx = dynamic_cast<CudaContext*>(&ctx);
    DP_ENFORCE_CODE(cuda_ctx != nullptr, Code::kInternal, "a CUDA graph cannot be launched on ",
                    DeviceName(ctx.device()));
    return cuda_ctx->stream();
  }

  std::unique_ptr<CudaGraphExec> exec_;
};

class CudaGraphRecording final : public GraphRecording {
 public:
  CudaGraphRecording(int device, std::vector<StreamId> streams, cudaStream_t origin)
      : registration_(device, std::move(streams)), capture_(origin) {}
  std::unique_ptr<DeviceGraph> Finish() override { return std::make_unique<CudaDeviceGraph>(capture_.Finish()); }

 private:
  // Declared first: the device's allocator knows the streams are captured
  // from before the capture starts until after it ended.
  CaptureRegistration registration_;
  StreamCapture capture_;
};

}  // namespace
}  // namespace dp::cuda

namespace dp {

std::unique_ptr<GraphRecording> CudaContext::BeginGraphCapture(const std::vector<DeviceContext*>& joining) {
  SwitchToDevice();
  std::vector<StreamId> streams{stream_id()};
  for (DeviceContext* ctx : joining) {
    DP_ENFORCE_CODE(ctx != nullptr && ctx->device() == device_, Code::kInternal,
                    "a capture on ", DeviceName(device_), " can only be joined by contexts of that device");
    if (ctx->stream_id() != kNoStream) streams.push_back(ctx->stream_id());
  }
  return std::make_unique<cuda::CudaGraphRecording>(device_.id, std::move(streams), stream_);
}

}  // namespace dp
