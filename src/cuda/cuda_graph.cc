#include "cuda/cuda_graph.h"

#include "cuda/cuda_context.h"

namespace dp::cuda {

CudaGraphExec::~CudaGraphExec() {
  // Never throws: at process exit the runtime may already be gone.
  cudaGraphExecDestroy(exec_);
  cudaGraphDestroy(graph_);
  cudaGetLastError();
}

void CudaGraphExec::Launch(cudaStream_t stream) { DP_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

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
    return std::make_unique<CudaGraphExec>(graph, exec, nodes);
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
  void Launch(DeviceContext& ctx) override {
    auto* cuda_ctx = dynamic_cast<CudaContext*>(&ctx);
    DP_ENFORCE_CODE(cuda_ctx != nullptr, Code::kInternal, "a CUDA graph cannot be launched on ",
                    DeviceName(ctx.device()));
    exec_->Launch(cuda_ctx->stream());
  }
  size_t nodes() const override { return exec_->nodes(); }

 private:
  std::unique_ptr<CudaGraphExec> exec_;
};

class CudaGraphRecording final : public GraphRecording {
 public:
  explicit CudaGraphRecording(cudaStream_t origin) : capture_(origin) {}
  std::unique_ptr<DeviceGraph> Finish() override { return std::make_unique<CudaDeviceGraph>(capture_.Finish()); }

 private:
  StreamCapture capture_;
};

}  // namespace
}  // namespace dp::cuda

namespace dp {

std::unique_ptr<GraphRecording> CudaContext::BeginGraphCapture() {
  SwitchToDevice();
  return std::make_unique<cuda::CudaGraphRecording>(stream_);
}

}  // namespace dp
