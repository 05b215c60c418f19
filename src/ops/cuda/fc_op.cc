// CUDA kernels of FC and FCGradient (schemas in ops/cpu/fc_op.cc), on cuBLAS,
// and FC's engine CUBLASLT (cuBLASLt: the bias and relu in the GEMM's
// epilogue, one kernel a layer).
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "cuda/op_launchers.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

// Y = X W^T + b, X flattened to [M, K] at `axis`, W [N, K] at `axis_w`, b [N].
// cuBLAS is column-major, where row-major Y [M, N] reads as Y^T [N, M]; so
// compute Y^T = W X^T, with W (row-major [N, K], i.e. column-major W^T)
// transposed and X^T (column-major view of row-major X) as is. Then one
// pass adds the bias and applies the fused relu (ops/math/fc_bias.h): two
// kernels a layer (an engine may fold them into one: FusedGemm).
class FcOp : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 protected:
  // Y^T = act(W X^T + b) as one GEMM with its epilogue, where the engine can
  // (m, n, k > 0); false: the plain GEMM and the bias kernel run instead.
  virtual bool FusedGemm(const float* /*x*/, const float* /*w*/, const float* /*b*/, float* /*y*/, int /*m*/,
                         int /*n*/, int /*k*/) {
    return false;
  }
  // The fused activation, as on the CPU ("none" or "relu").
  const bool relu_ = FcActivationIsRelu(args());

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& w = FloatInput(1);
    const Tensor& b = FloatInput(2);
    FcDims d = ComputeFcDims(def(), x.dims(), w.dims(), b.dims(), args().Int("axis", 1), args().Int("axis_w", 1));
    const int64_t m = d.m, n = d.n, k = d.k;
    Dims out = d.out;

    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b.data<float>();
    float* yp = Output(0, std::move(out), DType::kFloat32)->mutable_data<float>();
    if (m == 0 || n == 0) return;  // empty
    if (k == 0) {  // no products (cuBLAS rejects zero sizes): Y = act(b)
      DP_CUDA_CHECK(cuda::LaunchFill(yp, m * n, 0.0f, stream()));
    } else {
      const int mi = BlasInt(m, "M"), ni = BlasInt(n, "N"), ki = BlasInt(k, "K");
      if (FusedGemm(xp, wp, bp, yp, mi, ni, ki)) return;
      const float one = 1.0f, zero = 0.0f;
      Gemm(CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &one, wp, ki, xp, ki, &zero, yp, ni);
    }
    DP_CUDA_CHECK(cuda::LaunchFcBiasActivation(yp, bp, m, n, relu_, stream()));
  }
};

// FC with engine CUBLASLT: the same Y^T = W X^T, with cuBLASLt adding the
// bias (CUBLASLT_EPILOGUE_BIAS: a vector as long as D's rows, N, broadcast
// over its columns) and applying the relu in the GEMM's epilogue, so a layer
// is one kernel and Y is written once. The plan (descriptors, the
// heuristic's algorithm, the workspace it asks for) is made when the shape,
// the math mode or the buffers' alignment change, and the workspace is the
// op's scratch (bound, as a CUDA graph needs). Where cuBLASLt offers no
// algorithm, the plain GEMM and bias kernel run.
class FcLtOp final : public FcOp {
 public:
  using FcOp::FcOp;
  ~FcLtOp() override { plan_.Release(); }

 private:
  // Workspace cuBLASLt may use (it picks algorithms that fit).
  static constexpr uint64_t kMaxWorkspace = uint64_t{4} << 20;

  struct Plan {
    int m = -1, n = -1, k = -1;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    uint32_t align = 0;  // the least alignment of X, W, b and Y the algorithm was picked for
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    size_t workspace = 0;
    bool usable = false;
    void Release() noexcept {
      if (op != nullptr) cublasLtMatmulDescDestroy(op);
      for (cublasLtMatrixLayout_t l : {a, b, d})
        if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
      op = nullptr;
      a = b = d = nullptr;
      usable = false;
    }
  };

  // The largest power of two up to 256 that divides every address.
  static uint32_t Alignment(std::initializer_list<const void*> ptrs) {
    uintptr_t bits = 256;
    for (const void* p : ptrs) bits |= reinterpret_cast<uintptr_t>(p);
    return static_cast<uint32_t>(bits & ~(bits - 1));
  }

  void Prepare(int m, int n, int k, cublasComputeType_t compute, uint32_t align, const float* b) {
    plan_.Release();
    plan_.m = m;
    plan_.n = n;
    plan_.k = k;
    plan_.compute = compute;
    plan_.align = align;
    DP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan_.op, compute, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epilogue = relu_ ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    DP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    DP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    DP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                   sizeof epilogue));
    // The heuristic reads the bias pointer's alignment.
    DP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b));
    // Column-major, as stored: W is K x N (transposed by the op), X^T K x M, Y^T N x M.
    DP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan_.a, CUDA_R_32F, static_cast<uint64_t>(k),
                                               static_cast<uint64_t>(n), k));
    DP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan_.b, CUDA_R_32F, static_cast<uint64_t>(k),
                                               static_cast<uint64_t>(m), k));
    DP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan_.d, CUDA_R_32F, static_cast<uint64_t>(n),
                                               static_cast<uint64_t>(m), n));
    cublasLtHandle_t lt = cuda_context().cublas_lt();  // (may throw: before the preference is made)
    cublasLtMatmulPreference_t pref = nullptr;
    DP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &kMaxWorkspace, sizeof kMaxWorkspace);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(lt, plan_.op, plan_.a, plan_.b, plan_.d, plan_.d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    // No algorithm for this shape, epilogue and compute type (or none it
    // accepts these arguments for): the plain path serves it.
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE ||
        (st == CUBLAS_STATUS_SUCCESS && found == 0))
      return;
    DP_CUBLAS_CHECK(st);
    plan_.algo = result.algo;
    plan_.workspace = result.workspaceSize;
    plan_.usable = true;
  }

  bool FusedGemm(const float* x, const float* w, const float* b, float* y, int m, int n, int k) override {
    const cublasComputeType_t compute = FastCompute().value_or(CUBLAS_COMPUTE_32F);
    const uint32_t align = Alignment({x, w, b, y});
    // Planned again when the shape or math mode change, when a buffer is less
    // aligned than the algorithm was picked for, or when a plan that found
    // none may find one for better-aligned buffers.
    if (plan_.m != m || plan_.n != n || plan_.k != k || plan_.compute != compute || align < plan_.align ||
        (!plan_.usable && align > plan_.align)) {
      try {
        Prepare(m, n, k, compute, align, b);
      } catch (...) {
        plan_.Release();
        plan_.m = -1;  // made again next run
        throw;
      }
    }
    if (!plan_.usable) return false;
    DP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan_.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b));
    void* workspace = plan_.workspace > 0 ? Scratch<char>(static_cast<int64_t>(plan_.workspace)) : nullptr;
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t st = cublasLtMatmul(cuda_context().cublas_lt(), plan_.op, &one, w, plan_.a, x, plan_.b,
                                             &zero, y, plan_.d, y, plan_.d, &plan_.algo, workspace, plan_.workspace,
                                             stream());
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH) {
      plan_.usable = false;  // this GPU refuses the algorithm: the plain path from now on (for this plan)
      return false;
    }
    DP_CUBLAS_CHECK(st);
    return true;
  }

  Plan plan_;
};

// dW = dZ^T X, db = column sums of dZ, dX = dZ W (with three outputs), where
// dZ is dY, or with a fused relu dY masked by Y > 0, as on the CPU. One
// kernel makes dZ and db (ops/math/fc_bias.h: deterministic, unlike
// atomics), then the GEMMs; row-major matrices are their transposes to
// column-major cuBLAS:
//   dW^T [K, N] = X^T [K, M] dZ [M, N]    (dZ^T read transposed)
//   dX^T [K, M] = W^T [K, N] dZ^T [N, M]
class FcGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const Tensor& w = FloatInput(1);
    const Tensor& dy = FloatInput(2);
    const bool has_y = InputSize() == 4;
    const Tensor* y = has_y ? &FloatInput(3) : nullptr;
    const FcGradientDims checked = CheckFcGradientInputs(def(), args(), x.dims(), w.dims(), dy, y, InputDesc(2),
                                                         has_y ? InputDesc(3) : std::string());
    const int64_t m = checked.d.m, n = checked.d.n, k = checked.d.k;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* dyp = dy.data<float>();
    float* dw = Output(0, w.dims(), DType::kFloat32)->mutable_data<float>();
    float* db = Output(1, {n}, DType::kFloat32)->mutable_data<float>();
    float* dx = OutputSize() > 2 ? Output(2, x.dims(), DType::kFloat32)->mutable_data<float>() : nullptr;
    // Scratch: the masked dY (relu).
    float* dz = checked.relu ? Scratch<float>(m * n) : nullptr;
    DP_CUDA_CHECK(cuda::LaunchFcBiasGradient(dyp, checked.relu ? y->data<float>() : nullptr, dz, db, m, n, stream()));
    if (checked.relu) dyp = dz;
    const int mi = BlasInt(m, "M"), ni = BlasInt(n, "N"), ki = BlasInt(k, "K");
    const float one = 1.0f, zero = 0.0f;
    if (m == 0 || n == 0 || k == 0) {  // cuBLAS rejects zero sizes: dW and dX are zero (or empty)
      DP_CUDA_CHECK(cuda::LaunchFill(dw, n * k, 0.0f, stream()));
      if (dx) DP_CUDA_CHECK(cuda::LaunchFill(dx, m * k, 0.0f, stream()));
    } else {
      Gemm(CUBLAS_OP_N, CUBLAS_OP_T, ki, ni, mi, &one, xp, ki, dyp, ni, &zero, dw, ki);
      if (dx) Gemm(CUBLAS_OP_N, CUBLAS_OP_N, ki, mi, ni, &one, wp, ki, dyp, ni, &zero, dx, ki);
    }
  }
};

DP_REGISTER_CUDA_OPERATOR(FC, FcOp);
DP_REGISTER_CUDA_OPERATOR(FC_ENGINE_CUBLASLT, FcLtOp);
DP_REGISTER_CUDA_OPERATOR(FCGradient, FcGradientOp);

}  // namespace
}  // namespace dp
