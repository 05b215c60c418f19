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

}  // namespace dp::cuda
