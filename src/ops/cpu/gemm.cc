#include "ops/cpu/gemm.h"

#include <algorithm>
#include <atomic>
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

template <typename T>
void SplitGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  UseSingleThreadedBlas();
  // In double: the product of three dims may pass int64 (BlasInt rejects such dims later).
  const double blocks = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(std::max<int64_t>(k, 1)) /
                        static_cast<double>(kMinBlockMacs);
  int chunks = blocks < 2 ? 1 : static_cast<int>(std::min<double>(IntraOpThreads(), blocks));
  // Every block packs its part of one operand and the whole other one (BLAS
  // copies its operands into tiles first): split C's rows when it has more
  // rows than columns (the blocks share op(B)), else its columns (they share
  // op(A)), so that what each block packs whole is the smaller operand. At
  // batch 64, blocks of rows would each pack all of a layer's weights.
  bool by_rows = m >= n;
  if ((by_rows ? m : n) / kBlockAlign < chunks && (by_rows ? n : m) / kBlockAlign >= chunks) by_rows = !by_rows;
  chunks = static_cast<int>(std::min<int64_t>(chunks, std::max<int64_t>(1, (by_rows ? m : n) / kBlockAlign)));
  if (chunks <= 1 || m == 0 || n == 0) {
    Blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  ParallelForChunks(by_rows ? m : n, chunks, kBlockAlign, [&](int, int64_t lo, int64_t hi) {
    if (by_rows) {
      // Rows lo..hi of op(A): row lo of A, or column lo of A^T.
      const T* ab = ta == CblasNoTrans ? a + lo * lda : a + lo;
      Blas(ta, tb, hi - lo, n, k, alpha, ab, lda, b, ldb, beta, c + lo * ldc, ldc);
    } else {
      // Columns lo..hi of op(B).
      const T* bb = tb == CblasNoTrans ? b + lo : b + lo * ldb;
      Blas(ta, tb, m, hi - lo, k, alpha, a, lda, bb, ldb, beta, c + lo, ldc);
    }
  });
}

}  // namespace

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
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  SplitGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  SplitGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
