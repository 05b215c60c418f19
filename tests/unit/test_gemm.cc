// ops/cpu/gemm: how a GEMM is cut into blocks for its threads
// (PlanGemmBlocks), and that any grid of blocks, with or without the FC's
// epilogue (bias, relu), computes what one serial BLAS call and a plain
// loop compute. Grids are given explicitly (GemmOnGrid), so that those of
// 16 blocks run on a machine of 2 CPUs too.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "core/parallel_for.h"
#include "ops/cpu/gemm.h"

namespace {

using dp::GemmBlocks;
using dp::PlanGemmBlocks;

}  // namespace

TEST_CASE("GEMM blocks: never more than the threads, none below the minimum size, the longer side cut first") {
  // One thread, or a product too small to share: one block.
  CHECK(PlanGemmBlocks(256, 512, 784, 1).rows * PlanGemmBlocks(256, 512, 784, 1).cols == 1);
  const GemmBlocks tiny = PlanGemmBlocks(16, 16, 16, 16);
  CHECK(tiny.rows * tiny.cols == 1);
  CHECK(PlanGemmBlocks(0, 512, 784, 8).rows * PlanGemmBlocks(0, 512, 784, 8).cols == 1);
  // Two threads: the longer side is halved (each block then packs the
  // shorter side's operand whole).
  const GemmBlocks wide = PlanGemmBlocks(256, 512, 784, 2), tall = PlanGemmBlocks(512, 256, 784, 2);
  CHECK((wide.rows == 1 && wide.cols == 2));
  CHECK((tall.rows == 2 && tall.cols == 1));
  // The MLP's GEMMs at batch 256 on 16 threads: a grid, not 16 thin strips.
  for (const auto& d : std::vector<std::array<int64_t, 3>>{{256, 512, 784}, {512, 784, 256}, {256, 784, 512}}) {
    CAPTURE(d[0]);
    CAPTURE(d[1]);
    const GemmBlocks g = PlanGemmBlocks(d[0], d[1], d[2], 16);
    CHECK(g.rows * g.cols == 16);
    CHECK(g.rows > 1);
    CHECK(g.cols > 1);
  }
  // Fewer than 16 rows are never cut; invariants over many shapes.
  CHECK(PlanGemmBlocks(10, 4096, 4096, 16).rows == 1);
  for (int64_t m : {1, 15, 16, 33, 64, 100, 256, 1024})
    for (int64_t n : {1, 10, 16, 17, 128, 512, 3136})
      for (int64_t k : {0, 1, 25, 800})
        for (int threads : {1, 2, 3, 4, 7, 8, 16, 64}) {
          const GemmBlocks g = PlanGemmBlocks(m, n, k, threads);
          CAPTURE(m);
          CAPTURE(n);
          CAPTURE(k);
          CAPTURE(threads);
          CHECK(g.rows >= 1);
          CHECK(g.cols >= 1);
          CHECK(g.rows * g.cols <= threads);
          CHECK((g.rows == 1 || m / g.rows >= 16));
          CHECK((g.cols == 1 || n / g.cols >= 16));
          // Each block at least the minimum work (2^18 multiply-adds) unless there is one.
          if (g.rows * g.cols > 1) CHECK(m * n * std::max<int64_t>(k, 1) / (g.rows * g.cols) >= (int64_t{1} << 18));
        }
}

TEST_CASE("any grid of GEMM blocks equals one serial call, with the bias and relu epilogue or without") {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // (No structured bindings: clang 14's lambdas, CAPTURE's, cannot capture them.)
  for (const auto& dims : std::vector<std::array<int64_t, 3>>{{64, 96, 40}, {37, 70, 19}, {130, 33, 64}, {16, 16, 0}})
    for (const GemmBlocks grid : {GemmBlocks{1, 1}, GemmBlocks{2, 3}, GemmBlocks{4, 4}, GemmBlocks{3, 1},
                                  GemmBlocks{7, 5}, GemmBlocks{1, 16}})
      for (CBLAS_TRANSPOSE ta : {CblasNoTrans, CblasTrans})
        for (CBLAS_TRANSPOSE tb : {CblasNoTrans, CblasTrans})
          for (int epilogue = 0; epilogue < 4; ++epilogue) {  // none, bias, relu, both
            const int64_t m = dims[0], n = dims[1], k = dims[2];
            CAPTURE(m);
            CAPTURE(n);
            CAPTURE(k);
            CAPTURE(grid.rows);
            CAPTURE(grid.cols);
            CAPTURE(static_cast<int>(ta));
            CAPTURE(static_cast<int>(tb));
            CAPTURE(epilogue);
            const bool bias = epilogue & 1, relu = epilogue & 2;
            const int64_t lda = (ta == CblasNoTrans ? k : m) + 1, ldb = (tb == CblasNoTrans ? n : k) + 2, ldc = n + 3;
            std::vector<float> a(static_cast<size_t>((ta == CblasNoTrans ? m : k) * lda + 1)),
                b(static_cast<size_t>((tb == CblasNoTrans ? k : n) * ldb + 1)), c0(static_cast<size_t>(m * ldc)),
                bv(static_cast<size_t>(n));
            for (auto* v : {&a, &b, &c0, &bv})
              for (auto& x : *v) x = u(gen);
            // The reference: the bias rows (beta 1 then), one serial call, the relu.
            std::vector<float> want = c0, got = c0;
            float beta = 0.25f;
            if (bias) {
              for (int64_t i = 0; i < m; ++i) std::copy(bv.begin(), bv.end(), want.begin() + i * ldc);
              beta = 1.f;
            }
            if (k > 0 || !bias) dp::GemmSerial(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, beta, want.data(), ldc);
            if (relu)
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) want[i * ldc + j] = std::max(want[i * ldc + j], 0.f);
            const dp::GemmEpilogue<float> epi{bias ? bv.data() : nullptr, relu};
            dp::GemmOnGrid(grid, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, got.data(), ldc,
                           epilogue ? &epi : nullptr);
            double err = 0;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j)
                err = std::max(err, std::fabs(static_cast<double>(got[i * ldc + j] - want[i * ldc + j])));
            CHECK(err <= 1e-4 * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))));
            // The padding between rows is never written.
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = n; j < ldc; ++j) CHECK(got[i * ldc + j] == c0[i * ldc + j]);
          }
}

TEST_CASE("Gemm follows the threads it may use: one block on one thread, the same values on two") {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t m = 64, n = 512, k = 784;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k)), bias(static_cast<size_t>(n));
  for (auto* v : {&a, &b, &bias})
    for (auto& x : *v) x = u(gen);
  const dp::GemmEpilogue<float> epi{bias.data(), true};
  std::vector<float> one(static_cast<size_t>(m * n)), two(one.size());
  {
    dp::IntraOpThreadsScope scope(1);
    dp::Gemm(CblasNoTrans, CblasTrans, m, n, k, 1.f, a.data(), k, b.data(), k, 1.f, one.data(), n, &epi);
  }
  {
    dp::IntraOpThreadsScope scope(2);
    dp::Gemm(CblasNoTrans, CblasTrans, m, n, k, 1.f, a.data(), k, b.data(), k, 1.f, two.data(), n, &epi);
  }
  double err = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(one[i] - two[i])));
    CHECK(one[i] >= 0.f);
  }
  CHECK(err <= 1e-3);
}

TEST_CASE("a batch of GEMMs in one parallel region equals each alone, whatever the threads") {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // FCGradient's pair (dW = dZ^T X, dX = dZ W) at batch 100, and a third of another shape.
  const int64_t m = 100, n = 96, k = 130;
  std::vector<float> dz(static_cast<size_t>(m * n)), x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k)),
      e(static_cast<size_t>(40 * 70)), f(static_cast<size_t>(70 * 50));
  for (auto* v : {&dz, &x, &w, &e, &f})
    for (auto& t : *v) t = u(gen);
  std::vector<float> dw_want(static_cast<size_t>(n * k)), dx_want(static_cast<size_t>(m * k)),
      g_want(static_cast<size_t>(40 * 50), 1.f);
  dp::GemmSerial(CblasTrans, CblasNoTrans, n, k, m, 1.f, dz.data(), n, x.data(), k, 0.f, dw_want.data(), k);
  dp::GemmSerial(CblasNoTrans, CblasNoTrans, m, k, n, 1.f, dz.data(), n, w.data(), k, 0.f, dx_want.data(), k);
  dp::GemmSerial(CblasNoTrans, CblasNoTrans, 40, 50, 70, 2.f, e.data(), 70, f.data(), 50, 0.5f, g_want.data(), 50);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    dp::IntraOpThreadsScope scope(threads);
    std::vector<float> dw(dw_want.size()), dx(dx_want.size()), g(g_want.size(), 1.f);
    const dp::GemmCall<float> calls[3] = {
        {CblasTrans, CblasNoTrans, n, k, m, 1.f, dz.data(), n, x.data(), k, 0.f, dw.data(), k},
        {CblasNoTrans, CblasNoTrans, m, k, n, 1.f, dz.data(), n, w.data(), k, 0.f, dx.data(), k},
        {CblasNoTrans, CblasNoTrans, 40, 50, 70, 2.f, e.data(), 70, f.data(), 50, 0.5f, g.data(), 50}};
    dp::GemmBatch(calls, 3);
    auto worst = [](const std::vector<float>& a, const std::vector<float>& b) {
      double d = 0;
      for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(a[i] - b[i])));
      return d;
    };
    CHECK(worst(dw, dw_want) <= 1e-4 * std::sqrt(double(m)));
    CHECK(worst(dx, dx_want) <= 1e-4 * std::sqrt(double(n)));
    CHECK(worst(g, g_want) <= 1e-4 * std::sqrt(70.0));
  }
}
