#include "ops/cpu/gemm.h"

#include <algorithm>
#include <array>
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

// A GEMM and the grid it runs on (clamped to C's dims).
template <typename T>
struct PlannedGemm {
  GemmCall<T> call;
  GemmBlocks grid;
};

template <typename T>
PlannedGemm<T> Planned(const GemmCall<T>& call, GemmBlocks grid) {
  grid.rows = static_cast<int>(std::clamp<int64_t>(grid.rows, 1, std::max<int64_t>(1, call.m)));
  grid.cols = static_cast<int>(std::clamp<int64_t>(grid.cols, 1, std::max<int64_t>(1, call.n)));
  return {call, grid};
}

// Block `id` of a planned GEMM (its grid row-major): seeded with the bias,
// the product added, the relu applied, all while the block is in this
// core's cache.
template <typename T>
void RunBlock(const PlannedGemm<T>& p, int id) {
  const GemmCall<T>& g = p.call;
  const auto [r0, r1] = ChunkRange(g.m, p.grid.rows, kBlockAlign, id / p.grid.cols);
  const auto [c0, c1] = ChunkRange(g.n, p.grid.cols, kBlockAlign, id % p.grid.cols);
  const GemmEpilogue<T>* epilogue = g.epilogue;
  const bool seeded = epilogue != nullptr && epilogue->bias != nullptr;
  T beta = g.beta;
  if (seeded) {
    for (int64_t i = r0; i < r1; ++i) std::copy(epilogue->bias + c0, epilogue->bias + c1, g.c + i * g.ldc + c0);
    beta = T(1);
  }
  // (An empty product adds nothing to a seeded block.)
  if (r1 > r0 && c1 > c0 && !(seeded && g.k == 0)) {
    // Rows r0.. of op(A): row r0 of A, or column r0 of A^T; columns c0.. of
    // op(B): column c0 of B, or row c0 of B^T.
    const T* ab = g.ta == CblasNoTrans ? g.a + r0 * g.lda : g.a + r0;
    const T* bb = g.tb == CblasNoTrans ? g.b + c0 : g.b + c0 * g.ldb;
    Blas(g.ta, g.tb, r1 - r0, c1 - c0, g.k, g.alpha, ab, g.lda, bb, g.ldb, beta, g.c + r0 * g.ldc + c0, g.ldc);
  }
  if (epilogue != nullptr && epilogue->relu)
    for (int64_t i = r0; i < r1; ++i) {
      T* __restrict row = g.c + i * g.ldc;
      for (int64_t j = c0; j < c1; ++j) row[j] = row[j] > T(0) ? row[j] : T(0);
    }
}

// Every block of every GEMM, claimed together by the caller and the compute
// team: one parallel region however many GEMMs.
template <typename T>
void RunGemms(const PlannedGemm<T>* gemms, size_t count) {
  UseSingleThreadedBlas();
  int total = 0;
  for (size_t i = 0; i < count; ++i) total += gemms[i].grid.rows * gemms[i].grid.cols;
  if (total <= 1) {
    for (size_t i = 0; i < count; ++i) RunBlock(gemms[i], 0);
    return;
  }
  ParallelForChunks(total, total, 1, [&](int id, int64_t, int64_t) {
    size_t i = 0;
    for (; id >= gemms[i].grid.rows * gemms[i].grid.cols; ++i) id -= gemms[i].grid.rows * gemms[i].grid.cols;
    RunBlock(gemms[i], id);
  });
}

template <typename T>
void PlanAndRun(const GemmCall<T>& call) {
  const PlannedGemm<T> p = Planned(call, PlanGemmBlocks(call.m, call.n, call.k, IntraOpThreads()));
  RunGemms(&p, 1);
}

template <typename T>
void PlanAndRunBatch(const GemmCall<T>* calls, size_t count) {
  // A few GEMMs (an op's): planned on the stack, no allocation per run.
  constexpr size_t kOnStack = 4;
  std::array<PlannedGemm<T>, kOnStack> small;
  std::vector<PlannedGemm<T>> large(count > kOnStack ? count : 0);
  PlannedGemm<T>* planned = count > kOnStack ? large.data() : small.data();
  for (size_t i = 0; i < count; ++i)
    planned[i] = Planned(calls[i], PlanGemmBlocks(calls[i].m, calls[i].n, calls[i].k, IntraOpThreads()));
  // The largest blocks first: those claimed last are then the short ones.
  std::stable_sort(planned, planned + count, [](const PlannedGemm<T>& x, const PlannedGemm<T>& y) {
    auto block = [](const PlannedGemm<T>& p) {
      return static_cast<double>(p.call.m) * static_cast<double>(p.call.n) * static_cast<double>(p.call.k) /
             (p.grid.rows * p.grid.cols);
    };
    return block(x) > block(y);
  });
  RunGemms(planned, count);
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
  PlanAndRun(GemmCall<float>{ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue});
}
void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc,
          const GemmEpilogue<double>* epilogue) {
  PlanAndRun(GemmCall<double>{ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue});
}

void GemmBatch(const GemmCall<float>* calls, size_t count) { PlanAndRunBatch(calls, count); }
void GemmBatch(const GemmCall<double>* calls, size_t count) { PlanAndRunBatch(calls, count); }

void GemmOnGrid(GemmBlocks grid, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                const GemmEpilogue<float>* epilogue) {
  const PlannedGemm<float> p = Planned(GemmCall<float>{ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue}, grid);
  RunGemms(&p, 1);
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
