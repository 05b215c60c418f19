// The index math the nn family's CUDA kernels run (ops/math/conv_geometry.h
// and pool_geometry.h), checked on the host: the per-axis maps against brute
// force, and the CUDA kernels' algorithms (im2col over blocks of images,
// per-group GEMMs in the column layout, col2im and the pooling gradients as
// gathers per input element, the block reduction of a large window's
// winner), written out on the host from that math, against the CPU ops. A GPU
// then only has to run the same functions (test_device_parity_gpu). So is
// LogSoftmax's row algorithm (ops/math/softmax.h), which its CUDA kernels
// share with the loss_norm family's softmax.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ops/cpu/conv_utils.h"
#include "ops/gradient_registry.h"
#include "ops/math/conv_geometry.h"
#include "ops/math/fc_bias.h"
#include "ops/math/pool_geometry.h"
#include "ops/math/softmax.h"
#include "op_test_util.h"

using namespace dp;
using namespace dp::testing;

namespace {

// ---- per-axis maps ----

TEST_CASE("TapOutputCoord finds the one output whose tap reads an input coordinate") {
  for (int64_t stride = 1; stride <= 3; ++stride)
    for (int64_t pad = 0; pad <= 2; ++pad)
      for (int64_t dilation = 1; dilation <= 3; ++dilation)
        for (int64_t tap = 0; tap < 3; ++tap)
          for (int64_t in = 0; in < 9; ++in) {
            const int64_t out_extent = 5;
            int64_t expected = -1;
            for (int64_t o = 0; o < out_extent; ++o)
              if (math::TapInputCoord(o, tap, stride, pad, dilation) == in) expected = o;
            CHECK(math::TapOutputCoord(in, tap, stride, pad, dilation, out_extent) == expected);
          }
}

TEST_CASE("PoolCoveringOutputs lists exactly the windows holding an input coordinate") {
  for (int64_t kernel = 1; kernel <= 4; ++kernel)
    for (int64_t stride = 1; stride <= 3; ++stride)
      for (int64_t pad = 0; pad < kernel; ++pad)
        for (int64_t in_extent = kernel; in_extent <= 8; ++in_extent) {
          const int64_t out_extent = math::ConvOutputExtent(in_extent + 2 * pad, kernel, stride);
          for (int64_t in = 0; in < in_extent; ++in) {
            int64_t lo, hi;
            math::PoolCoveringOutputs(in, kernel, stride, pad, out_extent, &lo, &hi);
            for (int64_t o = 0; o < out_extent; ++o) {
              int64_t a, b;
              math::PoolAxisBounds(o, kernel, stride, pad, in_extent, &a, &b);
              CHECK_MESSAGE((a <= in && in < b) == (lo <= o && o < hi), "kernel ", kernel, " stride ", stride,
                            " pad ", pad, " in ", in, " out ", o);
            }
          }
        }
}

// ---- Conv, as the CUDA kernels compute it ----

struct ConvCase {
  std::string name;
  Dims x, w;
  std::vector<Argument> args;
  bool bias = true;
};

std::vector<ConvCase> ConvCases() {
  return {
      {"3x3 pad 1", {3, 3, 7, 6}, {4, 3, 3, 3}, {IntArg("pad", 1)}},
      {"strides and pads per side", {3, 2, 9, 8}, {5, 2, 3, 2},
       {IntArg("stride_h", 2), IntArg("stride_w", 3), IntArg("pad_t", 1), IntArg("pad_l", 0), IntArg("pad_b", 2),
        IntArg("pad_r", 1)},
       false},
      {"dilation per axis", {2, 2, 9, 8}, {3, 2, 3, 3},
       {IntArg("dilation_h", 2), IntArg("dilation_w", 1), IntArg("pad", 2), IntArg("stride_w", 2)}},
      {"groups", {3, 4, 6, 5}, {6, 2, 3, 3}, {IntArg("group", 2), IntArg("stride", 2), IntArg("pad", 1)}},
      {"depthwise dilated", {2, 3, 7, 7}, {3, 1, 3, 3}, {IntArg("group", 3), IntArg("dilation", 2), IntArg("pad", 2)}},
      {"1x1 stride 2", {3, 5, 5, 4}, {7, 5, 1, 1}, {IntArg("stride", 2)}},
  };
}

// Y, as ops/cuda/conv_op.cc computes it: blocks of `block` images, their
// columns side by side, one GEMM per group, then moved to Y (+ bias).
std::vector<double> CudaStyleConv(const conv::ConvShape& s, const double* x, const double* w, const double* b,
                                  int64_t block) {
  const math::ConvGeometry g = s.Geometry();
  const int64_t ohw = s.out_hw(), chw = s.c * s.in_hw(), K = s.k();
  std::vector<double> y(static_cast<size_t>(s.n * s.m * ohw));
  for (int64_t n0 = 0; n0 < s.n; n0 += block) {
    const int64_t nb = std::min(block, s.n - n0), L = nb * ohw;
    std::vector<double> col(static_cast<size_t>(g.rows() * L)), out(static_cast<size_t>(s.m * L));
    for (int64_t row = 0; row < g.rows(); ++row)
      for (int64_t bi = 0; bi < nb; ++bi)
        for (int64_t o = 0; o < ohw; ++o)
          col[row * L + bi * ohw + o] = math::Im2ColValue(g, x + (n0 + bi) * chw, row, o);
    for (int64_t grp = 0; grp < s.group; ++grp)
      for (int64_t m = 0; m < s.mg; ++m)
        for (int64_t l = 0; l < L; ++l) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += w[(grp * s.mg + m) * K + k] * col[(grp * K + k) * L + l];
          out[(grp * s.mg + m) * L + l] = acc;
        }
    for (int64_t bi = 0; bi < nb; ++bi)
      for (int64_t m = 0; m < s.m; ++m)
        for (int64_t o = 0; o < ohw; ++o)
          y[((n0 + bi) * s.m + m) * ohw + o] =
              out[math::BlockColumnOffset(bi, m, o, nb, ohw)] + (b != nullptr ? b[m] : 0.0);
  }
  return y;
}

// dW and dX, as ops/cuda/conv_op.cc computes them: per block, dY moved to
// the column layout, dW += dY_g col_g^T, dcol = W_g^T dY_g, then col2im as a
// gather per input element.
void CudaStyleConvGradient(const conv::ConvShape& s, const double* x, const double* w, const double* dy,
                           int64_t block, std::vector<double>& dw, std::vector<double>& dx) {
  const math::ConvGeometry g = s.Geometry();
  const int64_t ohw = s.out_hw(), chw = s.c * s.in_hw(), K = s.k();
  dw.assign(static_cast<size_t>(s.m * K), 0.0);
  dx.assign(static_cast<size_t>(s.n * chw), 0.0);
  for (int64_t n0 = 0; n0 < s.n; n0 += block) {
    const int64_t nb = std::min(block, s.n - n0), L = nb * ohw;
    std::vector<double> col(static_cast<size_t>(g.rows() * L)), dyc(static_cast<size_t>(s.m * L)),
        dcol(static_cast<size_t>(g.rows() * L));
    for (int64_t row = 0; row < g.rows(); ++row)
      for (int64_t bi = 0; bi < nb; ++bi)
        for (int64_t o = 0; o < ohw; ++o)
          col[row * L + bi * ohw + o] = math::Im2ColValue(g, x + (n0 + bi) * chw, row, o);
    for (int64_t bi = 0; bi < nb; ++bi)
      for (int64_t m = 0; m < s.m; ++m)
        for (int64_t o = 0; o < ohw; ++o)
          dyc[math::BlockColumnOffset(bi, m, o, nb, ohw)] = dy[((n0 + bi) * s.m + m) * ohw + o];
    for (int64_t grp = 0; grp < s.group; ++grp) {
      for (int64_t m = 0; m < s.mg; ++m)
        for (int64_t k = 0; k < K; ++k) {
          double acc = 0;
          for (int64_t l = 0; l < L; ++l) acc += dyc[(grp * s.mg + m) * L + l] * col[(grp * K + k) * L + l];
          dw[(grp * s.mg + m) * K + k] += acc;
        }
      for (int64_t k = 0; k < K; ++k)
        for (int64_t l = 0; l < L; ++l) {
          double acc = 0;
          for (int64_t m = 0; m < s.mg; ++m) acc += w[(grp * s.mg + m) * K + k] * dyc[(grp * s.mg + m) * L + l];
          dcol[(grp * K + k) * L + l] = acc;
        }
    }
    for (int64_t bi = 0; bi < nb; ++bi)
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t ih = 0; ih < s.h; ++ih)
          for (int64_t iw = 0; iw < s.w; ++iw)
            dx[(n0 + bi) * chw + (c * s.h + ih) * s.w + iw] =
                math::Col2ImValue(g, dcol.data() + bi * ohw, L, c, ih, iw);
  }
}

void CheckNear(const std::string& what, const std::vector<double>& actual, const Tensor& expected) {
  CAPTURE(what);
  REQUIRE(static_cast<int64_t>(actual.size()) == expected.numel());
  for (size_t i = 0; i < actual.size(); ++i) {
    const double e = expected.data<double>()[i];
    if (std::abs(actual[i] - e) > 1e-12 * std::max(1.0, std::abs(e))) {
      FAIL_CHECK("element ", i, ": ", actual[i], " vs the CPU op's ", e);
      return;
    }
  }
}

TEST_CASE("Conv and ConvGradient as the CUDA kernels compute them (im2col, col2im) equal the CPU ops") {
  uint32_t seed = 1;
  for (const ConvCase& cc : ConvCases()) {
    CAPTURE(cc.name);
    Tensor x = RandomF64(cc.x, seed++), w = RandomF64(cc.w, seed++), b = RandomF64({cc.w[0]}, seed++);
    Feeds feeds{{"X", x}, {"W", w}};
    std::vector<std::string> ins{"X", "W"};
    if (cc.bias) {
      feeds.push_back({"b", b});
      ins.push_back("b");
    }
    const OperatorDef fwd = Op("Conv", ins, {"Y"}, cc.args);
    const conv::ConvShape s =
        conv::ComputeConvShape(fwd, ArgReader(fwd, ""), cc.x, cc.w, cc.bias ? &b.dims() : nullptr);
    const Tensor y = RunOp(fwd, feeds)->GetTensor("Y");
    Tensor dy = RandomF64(s.y, seed++);
    std::vector<Argument> grad_args = cc.args;
    grad_args.push_back(IntArg("no_bias", cc.bias ? 0 : 1));
    std::vector<std::string> outs{"dW"};
    if (cc.bias) outs.push_back("db");
    outs.push_back("dX");
    auto ws = RunOp(Op("ConvGradient", {"X", "W", "dY"}, outs, grad_args), {{"X", x}, {"W", w}, {"dY", dy}});
    for (int64_t block : {int64_t{1}, int64_t{2}, s.n}) {
      CAPTURE(block);
      CheckNear("Y", CudaStyleConv(s, x.data<double>(), w.data<double>(), cc.bias ? b.data<double>() : nullptr, block),
                y);
      std::vector<double> dw, dx;
      CudaStyleConvGradient(s, x.data<double>(), w.data<double>(), dy.data<double>(), block, dw, dx);
      CheckNear("dW", dw, ws->GetTensor("dW"));
      CheckNear("dX", dx, ws->GetTensor("dX"));
    }
  }
}

// ---- pooling, as the CUDA kernels compute it ----

struct PoolCase {
  std::string name;
  Dims x;
  std::vector<Argument> args;
};

std::vector<PoolCase> PoolCases() {
  return {
      {"3x3 stride 2 pad 1", {2, 3, 9, 8}, {IntArg("kernel", 3), IntArg("stride", 2), IntArg("pad", 1)}},
      {"3x3 stride 1 pad 1 (every input in up to 9 windows)", {1, 2, 6, 7},
       {IntArg("kernel", 3), IntArg("stride", 1), IntArg("pad", 1)}},
      {"2x2 stride 2, odd sizes", {2, 2, 7, 5}, {IntArg("kernel", 2), IntArg("stride", 2)}},
      {"kernel, stride and pads per side", {1, 2, 7, 9},
       {IntArg("kernel_h", 3), IntArg("kernel_w", 2), IntArg("stride_h", 1), IntArg("stride_w", 2), IntArg("pad_t", 1),
        IntArg("pad_l", 0), IntArg("pad_b", 2), IntArg("pad_r", 1)}},
      {"global", {2, 3, 5, 7}, {IntArg("global_pooling", 1)}},
  };
}

// Inputs with many ties (multiples of 0.25 in [-1, 1]), some NaNs when `nans`.
Tensor TiedInput(const Dims& dims, uint32_t seed, bool nans) {
  std::vector<float> v = Random<float>(Prod(dims), seed, -1.0, 1.0);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::round(v[i] * 4.0f) / 4.0f;
    if (nans && i % 17 == 5) v[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return Make<float>(dims, v);
}

// Bitwise equal, NaNs matching NaNs: the CUDA kernels run the CPU's arithmetic in the CPU's order.
void CheckSame(const std::string& what, const std::vector<float>& actual, const Tensor& expected) {
  CAPTURE(what);
  REQUIRE(static_cast<int64_t>(actual.size()) == expected.numel());
  for (size_t i = 0; i < actual.size(); ++i) {
    const float e = expected.data<float>()[i];
    if (!(actual[i] == e || (std::isnan(actual[i]) && std::isnan(e)))) {
      FAIL_CHECK("element ", i, ": ", actual[i], " vs the CPU op's ", e);
      return;
    }
  }
}

TEST_CASE("pooling and its gradients as the CUDA kernels compute them (gathers per input) equal the CPU ops") {
  uint32_t seed = 100;
  for (const PoolCase& pc : PoolCases()) {
    for (bool include_pad : {false, true}) {
      for (bool nans : {false, true}) {
        CAPTURE(pc.name);
        CAPTURE(include_pad);
        CAPTURE(nans);
        std::vector<Argument> args = pc.args;
        args.push_back(IntArg("count_include_pad", include_pad ? 1 : 0));
        std::vector<Argument> max_args = pc.args;
        const Tensor x = TiedInput(pc.x, seed++, nans);
        const OperatorDef max_pool = Op("MaxPool", {"X"}, {"Y"}, max_args);
        const conv::PoolShape s = conv::ComputePoolShape(max_pool, ArgReader(max_pool, ""), pc.x);
        const math::PoolGeometry g = s.Geometry(include_pad);
        const Tensor dy = Make<float>(s.y, Random<float>(Prod(s.y), seed++, -1.0, 1.0));
        auto ws = RunOps({max_pool,
                          Op("MaxPoolGradient", {"X", "Y", "dY"}, {"dXmax"}, max_args),
                          Op("AveragePool", {"X"}, {"A"}, args),
                          Op("AveragePoolGradient", {"X", "dY"}, {"dXavg"}, args)},
                         {{"X", x}, {"dY", dy}});
        const float* xp = x.data<float>();
        const float* dyp = dy.data<float>();
        const int64_t ohw = g.out_plane(), hw = g.in_plane(), full = g.kernel_h * g.kernel_w;
        std::vector<float> y(static_cast<size_t>(g.planes * ohw)), a(y.size());
        std::vector<int64_t> argmax(y.size());
        for (int64_t p = 0; p < g.planes; ++p)
          for (int64_t o = 0; o < ohw; ++o) {
            const math::PoolWindow win = math::PoolWindowAt(g, o / g.out_w, o % g.out_w);
            y[p * ohw + o] = math::PoolWindowMax(xp + p * hw, g.width, win);
            argmax[p * ohw + o] = math::PoolWindowArgMax(xp + p * hw, g.width, win);
            a[p * ohw + o] = math::PoolWindowSum(xp + p * hw, g.width, win) /
                             static_cast<float>(math::PoolDivisor(win, include_pad, full));
          }
        std::vector<float> dmax(static_cast<size_t>(g.planes * hw)), davg(dmax.size());
        for (int64_t p = 0; p < g.planes; ++p)
          for (int64_t i = 0; i < hw; ++i) {
            dmax[p * hw + i] =
                math::MaxPoolGradientAt(g, argmax.data() + p * ohw, dyp + p * ohw, i / g.width, i % g.width);
            davg[p * hw + i] = math::AveragePoolGradientAt(g, dyp + p * ohw, i / g.width, i % g.width);
          }
        CheckSame("MaxPool", y, ws->GetTensor("Y"));
        CheckSame("MaxPoolGradient", dmax, ws->GetTensor("dXmax"));
        if (!nans) {  // a NaN's gradient share is NaN on both sides but summed in another order
          CheckSame("AveragePool", a, ws->GetTensor("A"));
          CheckSame("AveragePoolGradient", davg, ws->GetTensor("dXavg"));
        }
      }
    }
  }
}

// The block-per-window kernels' reduction: `threads` threads scan the window
// strided, each keeping its preferred element, then pairs combine in a tree.
int64_t BlockArgMax(const float* plane, int64_t width, const math::PoolWindow& w, int threads) {
  const int64_t ww = w.w1 - w.w0, count = (w.h1 - w.h0) * ww;
  std::vector<float> value(static_cast<size_t>(threads), 0.0f);
  std::vector<int64_t> index(static_cast<size_t>(threads), -1);
  for (int t = 0; t < threads; ++t)
    for (int64_t k = t; k < count; k += threads) {
      const int64_t i = (w.h0 + k / ww) * width + w.w0 + k % ww;
      if (index[t] < 0 || math::PoolPrefersFirst(plane[i], i, value[t], index[t])) {
        value[t] = plane[i];
        index[t] = i;
      }
    }
  for (int half = threads / 2; half > 0; half /= 2)
    for (int t = 0; t < half; ++t)
      if (index[t + half] >= 0 &&
          (index[t] < 0 || math::PoolPrefersFirst(value[t + half], index[t + half], value[t], index[t]))) {
        value[t] = value[t + half];
        index[t] = index[t + half];
      }
  return index[0];
}

TEST_CASE("the block reduction of a window's winner picks PoolWindowArgMax's (ties, NaNs, signed zeros)") {
  const int64_t h = 9, w = 11;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::vector<float> plane = Random<float>(h * w, seed, -2.0, 2.0);
    for (size_t i = 0; i < plane.size(); ++i) {
      plane[i] = std::round(plane[i]);  // -2..2: ties everywhere, zeros of both signs below
      if (plane[i] == 0.0f && i % 2 == 1) plane[i] = -0.0f;
      if (seed % 4 == 3 && i % 13 == 4 + seed % 5) plane[i] = std::numeric_limits<float>::quiet_NaN();
    }
    for (const math::PoolWindow& win :
         {math::PoolWindow{0, h, 0, w}, math::PoolWindow{2, 7, 1, 4}, math::PoolWindow{3, 4, 5, 6}})
      for (int threads : {1, 2, 8, 32}) {
        CAPTURE(seed);
        CAPTURE(threads);
        CHECK(BlockArgMax(plane.data(), w, win, threads) == math::PoolWindowArgMax(plane.data(), w, win));
      }
  }
}

// ---- LogSoftmax, as the CUDA kernels compute it ----

// Threads of a reducing block (reduce::kThreads in ops/cuda/block_reduce.cuh).
constexpr int64_t kBlockThreads = 256;

// The per-thread partial sums in double of a row's f(c), as a block's
// threads stride over the row, added up in thread order: another order than
// the CPU's loop, as the block reduction's.
template <typename F>
double BlockStyleSum(int64_t cols, F f) {
  std::vector<double> partial(kBlockThreads, 0.0);
  for (int64_t t = 0; t < kBlockThreads; ++t)
    for (int64_t c = t; c < cols; c += kBlockThreads) partial[static_cast<size_t>(t)] += f(c);
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}

// LogSoftmaxKernel's rows: the row's max, its sum of SoftmaxExp, then each
// element from the shared formulas.
std::vector<float> CudaStyleLogSoftmax(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c) mx = mx < xr[c] ? xr[c] : mx;
    const double sum = BlockStyleSum(cols, [&](int64_t c) { return static_cast<double>(math::SoftmaxExp(xr[c], mx)); });
    const float log_sum = math::LogSoftmaxLogSum<float>(sum);
    for (int64_t c = 0; c < cols; ++c) y[static_cast<size_t>(r * cols + c)] = math::LogSoftmax(xr[c], mx, log_sum);
  }
  return y;
}

// LogSoftmaxGradientKernel's rows: dY's sum in double, rounded to float.
std::vector<float> CudaStyleLogSoftmaxGradient(const std::vector<float>& y, const std::vector<float>& dy, int64_t rows,
                                               int64_t cols) {
  std::vector<float> dx(y.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y.data() + r * cols;
    const float* gr = dy.data() + r * cols;
    const float sum = static_cast<float>(BlockStyleSum(cols, [&](int64_t c) { return static_cast<double>(gr[c]); }));
    for (int64_t c = 0; c < cols; ++c)
      dx[static_cast<size_t>(r * cols + c)] = math::LogSoftmaxGradient(yr[c], gr[c], sum);
  }
  return dx;
}

// Equal within a few float roundings of max(1, |expected|): the sums' order
// may move log(sum) or sum(dY) by its last bit.
void CheckFloatsNear(const std::string& what, const std::vector<float>& actual, const Tensor& expected) {
  CAPTURE(what);
  REQUIRE(static_cast<int64_t>(actual.size()) == expected.numel());
  for (size_t i = 0; i < actual.size(); ++i) {
    const double e = expected.data<float>()[i];
    if (std::abs(actual[i] - e) > 4 * std::numeric_limits<float>::epsilon() * std::max(1.0, std::abs(e))) {
      FAIL_CHECK("element ", i, ": ", actual[i], " vs the CPU op's ", e);
      return;
    }
  }
}

TEST_CASE("LogSoftmax's formulas: an exact shift, finite where softmax underflows, exp(y) is the softmax") {
  CHECK(math::LogSoftmaxLogSum<float>(1.0) == 0.0f);
  CHECK(math::LogSoftmax(0.0f, 0.0f, 0.0f) == 0.0f);  // the row's max, alone in its row
  CHECK(math::LogSoftmax(-1000.0f, 1000.0f, 0.0f) == -2000.0f);  // exp would underflow; the log does not
  CHECK(math::LogSoftmax(3.0, 5.0, std::log(2.0)) == doctest::Approx(-2.0 - std::log(2.0)).epsilon(1e-15));
  // With y = log(p): dy - p * sum(dy), the softmax gradient through a log.
  const double p = 0.25, dy = 0.7, sum = -1.5;
  CHECK(math::LogSoftmaxGradient(std::log(p), dy, sum) == doctest::Approx(dy - p * sum).epsilon(1e-15));
  // exp(LogSoftmax) against Softmax's own formulas over one row.
  const std::vector<double> row = {0.3, -2.0, 4.5, 1.25};
  const double mx = 4.5;
  double s = 0;
  for (double v : row) s += math::SoftmaxExp(v, mx);
  for (double v : row)
    CHECK(std::exp(math::LogSoftmax(v, mx, math::LogSoftmaxLogSum<double>(s))) ==
          doctest::Approx(math::SoftmaxExp(v, mx) * math::SoftmaxInverse<double>(s)).epsilon(1e-14));
}

TEST_CASE("LogSoftmax and its gradient as the CUDA kernels compute them (strided block sums) equal the CPU ops") {
  struct Case {
    int64_t rows, cols;
    double lo, hi;
  };
  uint32_t seed = 200;
  for (const Case& c : {Case{7, 13, -3, 3}, Case{3, 2049, -5, 5}, Case{5, 1, -1, 1}, Case{2, 300, -1e4, 1e4}}) {
    CAPTURE(c.rows);
    CAPTURE(c.cols);
    const Dims dims{c.rows, c.cols};
    const std::vector<float> x = Random<float>(c.rows * c.cols, seed++, c.lo, c.hi);
    const std::vector<float> dy = Random<float>(c.rows * c.cols, seed++);
    auto ws = RunOps({Op("LogSoftmax", {"x"}, {"y"}), Op("LogSoftmaxGradient", {"y", "dy"}, {"dx"})},
                     {{"x", Make<float>(dims, x)}, {"dy", Make<float>(dims, dy)}});
    const Tensor& y = ws->GetTensor("y");
    CheckFloatsNear("Y", CudaStyleLogSoftmax(x, c.rows, c.cols), y);
    CheckFloatsNear("dX", CudaStyleLogSoftmaxGradient(Values<float>(y), dy, c.rows, c.cols), ws->GetTensor("dx"));
  }
}

// ---- FC's bias and relu around its GEMMs (ops/math/fc_bias.h) ----

TEST_CASE("FC and FCGradient as the CUDA kernels compute them (bias pass, column tiles of row groups) equal the CPU ops") {
  struct Case {
    int64_t m, n, k;
  };
  uint32_t seed = 300;
  // Tiles of 32 columns and 16 row groups: fewer and more of each, ragged
  // edges, a single row and column, and no rows at all.
  for (const Case& c : {Case{7, 5, 3}, Case{70, 65, 9}, Case{300, 33, 4}, Case{1, 1, 2}, Case{0, 40, 3}})
    for (bool relu : {false, true}) {
      CAPTURE(c.m);
      CAPTURE(c.n);
      CAPTURE(relu);
      const std::vector<float> x = Random<float>(c.m * c.k, seed++, -1.0, 1.0), w = Random<float>(c.n * c.k, seed++, -1.0, 1.0),
                               b = Random<float>(c.n, seed++, -1.0, 1.0), dy = Random<float>(c.m * c.n, seed++, -1.0, 1.0);
      const std::vector<float> zeros(static_cast<size_t>(c.n), 0.0f);
      std::vector<Argument> act;
      if (relu) act.push_back(MakeArg("activation", "relu"));
      auto fwd = RunOps({Op("FC", {"x", "w", "zero"}, {"product"}), Op("FC", {"x", "w", "b"}, {"y"}, act)},
                        {{"x", Make<float>({c.m, c.k}, x)}, {"w", Make<float>({c.n, c.k}, w)},
                         {"b", Make<float>({c.n}, b)}, {"zero", Make<float>({c.n}, zeros)}});
      // Forward: the GEMM's product, then the bias pass over every element.
      std::vector<float> y = Values<float>(fwd->GetTensor("product"));
      for (int64_t i = 0; i < c.m * c.n; ++i)
        y[static_cast<size_t>(i)] = math::FcBiasActivation(y[static_cast<size_t>(i)], b[static_cast<size_t>(i % c.n)], relu);
      CheckFloatsNear("Y", y, fwd->GetTensor("y"));

      // Backward: every block's tiles, every thread's partial, as the kernel.
      const std::vector<float> y_cpu = Values<float>(fwd->GetTensor("y"));
      std::vector<float> dz(static_cast<size_t>(c.m * c.n), std::numeric_limits<float>::quiet_NaN());
      std::vector<float> db(static_cast<size_t>(c.n), std::numeric_limits<float>::quiet_NaN());
      for (int64_t first = 0; first < c.n; first += math::kFcBiasCols)
        for (int col = 0; col < math::kFcBiasCols && first + col < c.n; ++col) {
          float sum = 0.0f;
          for (int g = 0; g < math::kFcBiasRowGroups; ++g)
            sum += math::FcBiasGradientPartial(dy.data(), relu ? y_cpu.data() : nullptr, dz.data(), c.m, c.n,
                                               first + col, g);
          db[static_cast<size_t>(first + col)] = sum;
        }
      std::vector<std::string> grad_in{"x", "w", "dy"};
      if (relu) grad_in.push_back("y");
      auto bwd = RunOps({Op("FCGradient", grad_in, {"dw", "db", "dx"}, act)},
                        {{"x", Make<float>({c.m, c.k}, x)}, {"w", Make<float>({c.n, c.k}, w)},
                         {"dy", Make<float>({c.m, c.n}, dy)}, {"y", Make<float>({c.m, c.n}, y_cpu)}});
      // Sums in another order: within m roundings of the sum of magnitudes.
      const Tensor& db_cpu = bwd->GetTensor("db");
      for (int64_t j = 0; j < c.n; ++j) {
        double magnitude = 0;
        for (int64_t r = 0; r < c.m; ++r) magnitude += std::abs(dy[static_cast<size_t>(r * c.n + j)]);
        CHECK(std::abs(db[static_cast<size_t>(j)] - db_cpu.data<float>()[j]) <=
              static_cast<double>(c.m + 1) * std::numeric_limits<float>::epsilon() * magnitude);
      }
      if (relu)  // every element written once, with the CPU's mask
        for (int64_t i = 0; i < c.m * c.n; ++i)
          CHECK(dz[static_cast<size_t>(i)] == (y_cpu[static_cast<size_t>(i)] > 0 ? dy[static_cast<size_t>(i)] : 0.0f));
    }
}

}  // namespace
