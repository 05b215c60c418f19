// CudaOperator: the base of every CUDA kernel of an op. The schemas live
// with the CPU kernels (ops/cpu); a CUDA kernel checks its inputs the same
// way, then queues its work on the context's stream and returns without
// waiting for it (the executor orders ops through events).
//
// Inputs must already be on the op's device (a Copy op moves them there, and
// the nets dp builds insert those copies); a pointer from another device
// would fault the whole CUDA context, so FloatInput checks first.
#pragma once

#include "cuda/cuda_context.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

class CudaOperator : public Operator {
 public:
  using Operator::Operator;

  // A CUDA kernel only queues work on its stream (above), which is what a
  // CUDA graph records; the kernels that also act on the host say so.
  const char* GraphCaptureObstacle() const override { return nullptr; }

 protected:
  CudaContext& cuda_context() const { return static_cast<CudaContext&>(context()); }
  cudaStream_t stream() const { return cuda_context().stream(); }
  cublasHandle_t cublas() const { return cuda_context().cublas(); }

  // Input i, checked to be on this op's device.
  const Tensor& DeviceInput(int i) const {
    const Tensor& t = Input(i);
    DP_ENFORCE(t.device() == device(), InputDesc(i), " is ", t.DebugString(), " but the op runs on ",
               DeviceName(device()), "; add a Copy op to move it");
    return t;
  }
  // Input i, checked to be float32 and on this op's device.
  const Tensor& FloatInput(int i) const {
    const Tensor& t = Input(i);
    DP_ENFORCE_CODE(t.dtype() == DType::kFloat32, Code::kDType, InputDesc(i), " must be float32 on CUDA, got ",
                    t.DebugString());
    return DeviceInput(i);
  }
};

}  // namespace dp
