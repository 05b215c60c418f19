// The CPU ops' GEMM: C = alpha op(A) op(B) + beta C, row-major, split into
// a grid of C's blocks (PlanGemmBlocks: rows x columns, as square as the
// threads allow, since each block packs its rows of op(A) and its columns of
// op(B)) that the calling thread and dp's compute team run together
// (core/parallel_for.h), each block one single-threaded BLAS call, with an
// optional epilogue (a bias row seeding C, a relu after) done by the block's
// thread while the block is in its cache: one parallel region per GEMM. dp, not BLAS, decides how many
// threads a GEMM gets (IntraOpThreads(): the executor's share of the CPU
// budget for the replica that runs the op), so that replicas on separate
// cores never oversubscribe them and no BLAS thread spin-yields between the
// small GEMMs of a step. Sizes are checked against BLAS's int (BlasInt).
// Builds with oneDNN run float32 blocks through its sgemm (its JIT kernels use
// the widest vectors the CPU has); float64 stays on OpenBLAS. A block
// C = A B^T with few rows (16, 32 or 48: a replica's share of a small batch)
// runs as C^T = B A^T, transposed into C, which oneDNN's kernels do faster.
#pragma once

#include <cblas.h>

#include <cstdint>

namespace dp {

// Has oneDNN generate its sgemm kernels now, once per process (in builds
// with oneDNN, unless disabled): its first call of each kind otherwise does
// it, ~20 ms on this project's VM, seven times a step of the sample's MLP.
// The GEMM ops call it when constructed, so a net's creation pays it rather
// than its first run.
void PrepareGemmKernels();

// Makes BLAS run single-threaded in its callers (dp's threads are the
// parallelism); restores that if the application changed it. Called by
// every Gemm; exposed for kernels that call BLAS directly.
void UseSingleThreadedBlas();

// What a block of C does besides its product: with `bias` ([n]), every
// row of the block is first set to the bias and the product added to it
// (beta is then 1 whatever was passed); with `relu`, C = max(C, 0) after.
template <typename T>
struct GemmEpilogue {
  const T* bias = nullptr;
  bool relu = false;
};

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          const GemmEpilogue<float>* epilogue = nullptr);
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc,
          const GemmEpilogue<double>* epilogue = nullptr);

// One GEMM of a batch: C = alpha op(A) op(B) + beta C with its epilogue.
template <typename T>
struct GemmCall {
  CBLAS_TRANSPOSE ta, tb;
  int64_t m, n, k;
  T alpha;
  const T* a;
  int64_t lda;
  const T* b;
  int64_t ldb;
  T beta;
  T* c;
  int64_t ldc;
  const GemmEpilogue<T>* epilogue = nullptr;
};

// Independent GEMMs (no C overlaps another call's A, B or C), each cut as
// Gemm cuts it, all their blocks run in one parallel region (the largest
// blocks claimed first): FCGradient's dW and dX at once.
void GemmBatch(const GemmCall<float>* calls, size_t count);
void GemmBatch(const GemmCall<double>* calls, size_t count);

// How Gemm splits C [m, n] (inner dim k) for `threads`: rows x cols blocks,
// at most `threads` and no smaller than ~5 us of one core each, cut at
// multiples of 16 rows and columns, minimising the largest block's
// multiply-adds plus its packing (rows + columns) x k. With two threads this
// halves one side, the longer one unless cutting it at 16 leaves the halves
// more uneven. Exposed for tests.
struct GemmBlocks {
  int rows = 1;
  int cols = 1;
};
GemmBlocks PlanGemmBlocks(int64_t m, int64_t n, int64_t k, int threads);

// Gemm on a given grid (clamped to C's dims) instead of the planned one:
// for tests, which run grids of more blocks than their machine has CPUs.
void GemmOnGrid(GemmBlocks grid, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                const GemmEpilogue<float>* epilogue = nullptr);

// The same on the calling thread only (a kernel that already splits its
// work across threads calls this inside each part).
void GemmSerial(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void GemmSerial(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha,
                const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

#if DP_HAVE_DNNL
// BLAS calls (GEMM blocks) that ran oneDNN's sgemm in this process, and
// those of them computed transposed (C^T = B A^T, for few rows), for tests.
int64_t DnnlSgemmCalls();
int64_t DnnlTransposedCalls();
#endif

}  // namespace dp
