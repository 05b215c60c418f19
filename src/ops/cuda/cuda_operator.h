// CudaOperator: the base of every CUDA kernel of an op. The schemas live
// with the CPU kernels (ops/cpu); a CUDA kernel checks its inputs the same
// way, then queues its work on the context's stream and returns without
// waiting for it (the executor orders ops through events).
//
// Inputs must already be on the op's device (a Copy op moves them there, and
// the nets dp builds insert those copies); a pointer from another device
// would fault the whole CUDA context, so FloatInput checks first.
#pragma once

#include <optional>

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
  // The cuBLAS compute type of a reduced-precision math mode; none for FP32.
  std::optional<cublasComputeType_t> FastCompute() const {
    switch (math_mode()) {
      case MathMode::kTf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
      case MathMode::kBf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
      case MathMode::kFp16: return CUBLAS_COMPUTE_32F_FAST_16F;
      default: return std::nullopt;
    }
  }

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
  // C = alpha op(A) op(B) + beta C over float32 (cuBLAS's column-major
  // arguments), and its strided batch: computed as the net's math mode says
  // (core/math_mode.h). FP32 is cublasSgemm itself; TF32 and BF16 are
  // cublasGemmEx with float32 data and the FAST_TF32 / FAST_16BF compute
  // types, which round the inputs for tensor cores and accumulate in float32.
  void Gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha, const float* a,
            int lda, const float* b, int ldb, const float* beta, float* c, int ldc) const {
    if (const auto compute = FastCompute())
      DP_CUBLAS_CHECK(cublasGemmEx(cublas(), ta, tb, m, n, k, alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, beta, c,
                                   CUDA_R_32F, ldc, *compute, CUBLAS_GEMM_DEFAULT));
    else
      DP_CUBLAS_CHECK(cublasSgemm(cublas(), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  }
  void GemmStridedBatched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* alpha,
                          const float* a, int lda, long long stride_a, const float* b, int ldb, long long stride_b,
                          const float* beta, float* c, int ldc, long long stride_c, int batch) const {
    if (const auto compute = FastCompute())
      DP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cublas(), ta, tb, m, n, k, alpha, a, CUDA_R_32F, lda, stride_a, b,
                                                 CUDA_R_32F, ldb, stride_b, beta, c, CUDA_R_32F, ldc, stride_c, batch,
                                                 *compute, CUBLAS_GEMM_DEFAULT));
    else
      DP_CUBLAS_CHECK(cublasSgemmStridedBatched(cublas(), ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                                                beta, c, ldc, stride_c, batch));
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
