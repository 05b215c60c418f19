#include "ops/cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <vector>

#include "core/parallel_for.h"
#include "ops/op_utils.h"
#if DP_HAVE_DNNL
#include "ops/cpu/dnnl_common.h"
#endif

namespace dp {
namespace {

// A block smaller than this many multiply-adds costs less than handing it
// to another thread (a spinning helper picks a block up in about a
// microsecond; this is ~5 microseconds of one core's sgemm).
constexpr int64_t kMinBlockMacs = 1 << 18;
// Blocks are cut at multiples of this many rows or columns: whole
// micro-kernel tiles of the BLAS kernels.
constexpr int64_t kBlockAlign = 16;
// What a block costs beyond its multiply-adds, per element of the operand
// parts it packs (rows x K of op(A), K x columns of op(B)), in multiply-adds:
// packing, and the micro-kernel's lower speed on thin blocks. From oneDNN's
// sgemm on this project's VM: 32 rows of C run at ~190 GFLOP/s against ~214
// at 64 rows (n = 512), which this cost reproduces (bench/README.md).
constexpr double kPackCost = 8;

// Whole kBlockAlign units of `extent` in `parts` parts: the largest part.
int64_t LargestPart(int64_t extent, int parts) {
  const int64_t units = (extent + kBlockAlign - 1) / kBlockAlign;
  return std::min(extent, (units + parts - 1) / parts * kBlockAlign);
}

#if DP_HAVE_DNNL
std::atomic<int64_t> g_dnnl_sgemm_calls{0};
std::atomic<int64_t> g_dnnl_transposed_calls{0};

// Whether C = A B^T runs faster as C^T = B A^T (then transposed into C).
// Measured on oneDNN's AVX-512 sgemm (bench/README.md): with 16, 32 or 48
// rows in C (a replica's share of a small batch) the direct form runs at
// 60-90% of its large-batch speed, while the transposed form puts the long
// dimension where its kernel blocks best: a replica's forward GEMMs at
// batch 64 on two cores run 1.15-1.4x faster, the transpose included. At 64
// rows and more, or other row counts, the two are even or the direct one
// wins. The scratch for C^T is kept small (it lives on each thread).
bool TransposedIsFaster(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n) {
  constexpr int64_t kMaxScratch = int64_t{1} << 20;  // elements
  return ta == CblasNoTrans && tb == CblasTrans && m % 16 == 0 && m <= 48 && n >= m && n <= kMaxScratch / m;
}

// C [m, n] (ldc) = alpha A B^T + beta C through CT = alpha B A^T [n, m] in
// this thread's scratch. beta == 0 never reads C (it may hold NaN).
void SgemmTransposed(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float beta, float* c, int64_t ldc) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(m * n)) scratch.resize(static_cast<size_t>(m * n));
  float* ct = scratch.data();
  dnnl_cpu::SerialScope serial;
  const dnnl_status_t st = dnnl_sgemm('N', 'T', n, m, k, alpha, b, ldb, a, lda, 0.f, ct, m);
  DP_ENFORCE_CODE(st == dnnl_success, Code::kInternal, "oneDNN sgemm (", n, " x ", m, " x ", k,
                  ", transposed) failed with status ", static_cast<int>(st));
  constexpr int64_t kTile = 16;  // C's rows i and CT's rows j, tile by tile (both stay in L1)
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    const int64_t j1 = std::min(n, j0 + kTile);
    for (int64_t i = 0; i < m; ++i) {
      float* ci = c + i * ldc;
      if (beta == 0.f)
        for (int64_t j = j0; j < j1; ++j) ci[j] = ct[j * m + i];
      else
        for (int64_t j = j0; j < j1; ++j) ci[j] = ct[j * m + i] + beta * ci[j];
    }
  }
}
#endif

void Blas(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if DP_HAVE_DNNL
  // oneDNN's sgemm: its JIT kernels use the CPU's widest vectors (AVX-512 at
  // full width on Zen 5: about twice OpenBLAS's AVX2 kernels there), on this
  // thread alone like every dp BLAS call.
  if (dnnl_cpu::Enabled() && m > 0 && n > 0 && k > 0) {  // (oneDNN rejects empty products; BLAS scales C by beta)
    g_dnnl_sgemm_calls.fetch_add(1, std::memory_order_relaxed);
    if (TransposedIsFaster(ta, tb, m, n)) {
      g_dnnl_transposed_calls.fetch_add(1, std::memory_order_relaxed);
      SgemmTransposed(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    dnnl_cpu::SerialScope serial;
    const dnnl_status_t st = dnnl_sgemm(ta == CblasNoTrans ? 'N' : 'T', tb == CblasNoTrans ? 'N' : 'T', m, n, k,
                                        alpha, a, lda, b, ldb, beta, c, ldc);
    DP_ENFORCE_CODE(st == dnnl_success, Code::kInternal, "oneDNN sgemm (", m, " x ", n, " x ", k,
                    ") failed with status ", static_cast<int>(st));
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, ta, tb, BlasInt(m, "GEMM M"), BlasInt(n, "GEMM N"), BlasInt(k, "GEMM K"), alpha, a,
              BlasInt(lda, "GEMM lda"), b, BlasInt(ldb, "GEMM ldb"), beta, c, BlasInt(ldc, "GEMM ldc"));
}
void Blas(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, BlasInt(m, "GEMM M"), BlasInt(n, "GEMM N"), BlasInt(k, "GEMM K"), alpha, a,
              BlasInt(lda, "GEMM lda"), b, BlasInt(ldb, "GEMM ldb"), beta, c, BlasInt(ldc, "GEMM ldc"));
}

// The block [r0, r1) x [c0, c1) of C = alpha op(A) op(B) + beta C.
template <typename T>
void GemmBlock(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t n_k,
               T alpha, const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  // Rows r0.. of op(A): row r0 of A, or column r0 of A^T; columns c0.. of
  // op(B): column c0 of B, or row c0 of B^T.
  const T* ab = ta == CblasNoTrans ? a + r0 * lda : a + r0;
  const T* bb = tb == CblasNoTrans ? b + c0 : b + c0 * ldb;
  Blas(ta, tb, r1 - r0, c1 - c0, n_k, alpha, ab, lda, bb, ldb, beta, c + r0 * ldc + c0, ldc);
}

template <typename T>
void SplitGemm(GemmBlocks grid, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, T alpha,
               const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc,
               const GemmEpilogue<T>* epilogue) {
  UseSingleThreadedBlas();
  grid.rows = static_cast<int>(std::clamp<int64_t>(grid.rows, 1, std::max<int64_t>(1, m)));
  grid.cols = static_cast<int>(std::clamp<int64_t>(grid.cols, 1, std::max<int64_t>(1, n)));
  auto block = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    T block_beta = beta;
    if (epilogue != nullptr && epilogue->bias != nullptr) {
      // C's block seeded with the bias, then the product added.
      for (int64_t i = r0; i < r1; ++i) std::copy(epilogue->bias + c0, epilogue->bias + c1, c + i * ldc + c0);
      block_beta = T(1);
    }
    // (An empty product adds nothing to a seeded block.)
    const bool seeded = epilogue != nullptr && epilogue->bias != nullptr;
    if (r1 > r0 && c1 > c0 && !(seeded && k == 0))
      GemmBlock(ta, tb, r0, r1, c0, c1, k, alpha, a, lda, b, ldb, block_beta, c, ldc);
    if (epilogue != nullptr && epilogue->relu)
      // While the block is still in this core's cache.
      for (int64_t i = r0; i < r1; ++i) {
        T* __restrict row = c + i * ldc;
        for (int64_t j = c0; j < c1; ++j) row[j] = row[j] > T(0) ? row[j] : T(0);
      }
  };
  const int blocks = grid.rows * grid.cols;
  if (blocks <= 1 || m == 0 || n == 0) {
    block(0, m, 0, n);
    return;
  }
  ParallelForChunks(blocks, blocks, 1, [&](int id, int64_t, int64_t) {
    const auto [r0, r1] = ChunkRange(m, grid.rows, kBlockAlign, id / grid.cols);
    const auto [c0, c1] = ChunkRange(n, grid.cols, kBlockAlign, id % grid.cols);
    block(r0, r1, c0, c1);
  });
}

}  // namespace

GemmBlocks PlanGemmBlocks(int64_t m, int64_t n, int64_t k, int threads) {
  GemmBlocks best;
  if (m <= 0 || n <= 0) return best;
  // In double: the product of three dims may pass int64 (BlasInt rejects such dims later).
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(std::max<int64_t>(k, 1));
  const double most = std::min<double>(std::max(1, threads), std::floor(macs / static_cast<double>(kMinBlockMacs)));
  const int limit = std::max(1, static_cast<int>(most));
  const int max_rows = static_cast<int>(std::clamp<int64_t>(m / kBlockAlign, 1, limit));
  const int max_cols = static_cast<int>(std::clamp<int64_t>(n / kBlockAlign, 1, limit));
  const double kk = static_cast<double>(std::max<int64_t>(k, 1));
  double best_cost = 0;
  for (int rows = 1; rows <= max_rows; ++rows) {
    for (int cols = 1; cols <= max_cols && rows * cols <= limit; ++cols) {
      // The largest block's time: the GEMM ends with its slowest block.
      const double mb = static_cast<double>(LargestPart(m, rows)), nb = static_cast<double>(LargestPart(n, cols));
      const double cost = mb * nb * kk + kPackCost * kk * (mb + nb);
      // Fewer blocks on a tie: each costs a hand-over.
      if (best_cost == 0 || cost < best_cost * (1 - 1e-9)) {
        best_cost = cost;
        best = {rows, cols};
      }
    }
  }
  return best;
}

#if DP_HAVE_DNNL
int64_t DnnlSgemmCalls() { return g_dnnl_sgemm_calls.load(std::memory_order_relaxed); }
int64_t DnnlTransposedCalls() { return g_dnnl_transposed_calls.load(std::memory_order_relaxed); }
#endif

void UseSingleThreadedBlas() {
  // Checked on every call (a read of OpenBLAS's setting): the application
  // may set BLAS threads itself between dp's GEMMs.
  if (openblas_get_num_threads() == 1) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void PrepareGemmKernels() {
#if DP_HAVE_DNNL
  if (!dnnl_cpu::Enabled()) return;
  static std::once_flag once;
  std::call_once(once, [] {
    // Every transpose with beta 0 and 1: the kernels dp's GEMMs use. Best
    // effort: a failure here shows again, as an error, on the real call.
    constexpr int64_t kN = 16;
    float a[kN * kN] = {}, b[kN * kN] = {}, c[kN * kN] = {};
    dnnl_cpu::SerialScope serial;
    for (char ta : {'N', 'T'})
      for (char tb : {'N', 'T'})
        for (float beta : {0.f, 1.f}) (void)dnnl_sgemm(ta, tb, kN, kN, kN, 1.f, a, kN, b, kN, beta, c, kN);
  });
#endif
}

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          const GemmEpilogue<float>* epilogue) {
  SplitGemm(PlanGemmBlocks(m, n, k, IntraOpThreads()), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue);
}
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc,
          const GemmEpilogue<double>* epilogue) {
  SplitGemm(PlanGemmBlocks(m, n, k, IntraOpThreads()), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue);
}

void GemmOnGrid(GemmBlocks grid, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                const GemmEpilogue<float>* epilogue) {
  SplitGemm(grid, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue);
}

void GemmSerial(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  UseSingleThreadedBlas();
  Blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void GemmSerial(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha,
                const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  UseSingleThreadedBlas();
  Blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace dp
