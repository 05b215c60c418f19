// The CPU ops' GEMM: C = alpha op(A) op(B) + beta C, row-major, split into
// blocks of C's rows (or of its columns when it has few rows) that the
// calling thread and dp's compute team run together (core/parallel_for.h),
// each block one single-threaded BLAS call. dp, not BLAS, decides how many
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

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

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
