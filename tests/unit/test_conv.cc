// Conv, MaxPool, AveragePool and their gradients on the CPU: forward results
// against naive direct references over a grid of configurations (float32 and
// float64), static shape inference against what the kernels write, finite-
// difference gradient checks (float64), the gradient makers' op lists, and
// error reports.
//
// Every net here is run through RunOps, which also runs InferNetShapes on the
// same definition and checks each output's inferred dims and dtype against
// the tensor the kernel wrote.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/gradient_registry.h"
#include "core/parallel_for.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/net_validate.h"
#include "gradient_checker.h"
#include "ops/op_schema.h"
#include "ops/operator.h"
#include "op_test_util.h"
#if DP_HAVE_DNNL
#include "ops/cpu/dnnl_common.h"
#endif

using namespace dp;
using namespace dp::testing;

namespace {

// ---- building ops, nets and tensors ----------------------------------------

template <typename T>
Tensor RandomTensor(Dims dims, uint32_t seed) {
  int64_t n = Prod(dims);
  return Make<T>(std::move(dims), Random<T>(n, seed, -1.0, 1.0));
}

// Distinct values (a shuffled ladder 0.01 apart): max pooling has no ties and
// finite differences of size 1e-6 never change a window's winner.
Tensor DistinctTensor(Dims dims, uint32_t seed) {
  const int64_t n = Prod(dims);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.01 * static_cast<double>(i) - 0.005 * n;
  std::mt19937 gen(seed);
  std::shuffle(v.begin(), v.end(), gen);
  return Make<double>(std::move(dims), v);
}

template <typename To, typename From>
Tensor Cast(const Tensor& t) {
  std::vector<From> v = Values<From>(t);
  return Make<To>(t.dims(), std::vector<To>(v.begin(), v.end()));
}

// ---- references ---------------------------------------------------------------

struct ConvCfg {
  int64_t n = 1, c = 1, h = 5, w = 5, m = 1, kh = 3, kw = 3;
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1, group = 1;
  bool bias = false;
  int kernel_form = 0;  // 0: no kernel argument, 1: kernel (when square), 2: kernel_h and kernel_w

  Dims x() const { return {n, c, h, w}; }
  Dims wd() const { return {m, c / group, kh, kw}; }
  int64_t oh() const { return (h + pt + pb - (dh * (kh - 1) + 1)) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - (dw * (kw - 1) + 1)) / sw + 1; }
  Dims y() const { return {n, m, oh(), ow()}; }
};

std::string Describe(const ConvCfg& g) {
  return StrCat("X [", g.n, ",", g.c, ",", g.h, ",", g.w, "] M ", g.m, " k ", g.kh, "x", g.kw, " s ", g.sh, ",", g.sw,
                " p ", g.pt, ",", g.pl, ",", g.pb, ",", g.pr, " d ", g.dh, ",", g.dw, " g ", g.group, " bias ", g.bias,
                " kernel_form ", g.kernel_form);
}

// The window arguments in the most compact form (one value when both axes or
// all sides agree, per axis / side otherwise).
void AddWindowArgs(std::vector<Argument>& a, int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t pb,
                   int64_t pr) {
  if (sh == sw) {
    if (sh != 1) a.push_back(IntArg("stride", sh));
  } else {
    a.push_back(IntArg("stride_h", sh));
    a.push_back(IntArg("stride_w", sw));
  }
  if (pt == pl && pt == pb && pt == pr) {
    if (pt != 0) a.push_back(IntArg("pad", pt));
  } else {
    a.push_back(IntArg("pad_t", pt));
    a.push_back(IntArg("pad_l", pl));
    a.push_back(IntArg("pad_b", pb));
    a.push_back(IntArg("pad_r", pr));
  }
}

std::vector<Argument> ConvArgs(const ConvCfg& g) {
  std::vector<Argument> a;
  if (g.kernel_form == 1 && g.kh == g.kw) a.push_back(IntArg("kernel", g.kh));
  if (g.kernel_form == 2) {
    a.push_back(IntArg("kernel_h", g.kh));
    a.push_back(IntArg("kernel_w", g.kw));
  }
  AddWindowArgs(a, g.sh, g.sw, g.pt, g.pl, g.pb, g.pr);
  if (g.dh == g.dw) {
    if (g.dh != 1) a.push_back(IntArg("dilation", g.dh));
  } else {
    a.push_back(IntArg("dilation_h", g.dh));
    a.push_back(IntArg("dilation_w", g.dw));
  }
  if (g.group != 1) a.push_back(IntArg("group", g.group));
  return a;
}

OperatorDef ConvOp(const ConvCfg& g) {
  std::vector<std::string> in{"X", "W"};
  if (g.bias) in.push_back("b");
  return Op("Conv", in, {"Y"}, ConvArgs(g));
}

// Direct convolution, in double, reading X through explicit bounds checks.
template <typename T>
std::vector<double> RefConv(const ConvCfg& g, const std::vector<T>& x, const std::vector<T>& w,
                            const std::vector<T>* b) {
  const int64_t oh = g.oh(), ow = g.ow(), cg = g.c / g.group, mg = g.m / g.group;
  std::vector<double> y(static_cast<size_t>(g.n * g.m * oh * ow));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t m = 0; m < g.m; ++m) {
      const int64_t grp = m / mg;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b ? static_cast<double>((*b)[static_cast<size_t>(m)]) : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t p = 0; p < g.kh; ++p)
              for (int64_t q = 0; q < g.kw; ++q) {
                const int64_t ih = i * g.sh - g.pt + p * g.dh, iw = j * g.sw - g.pl + q * g.dw;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const int64_t ci = grp * cg + c;
                acc += static_cast<double>(x[static_cast<size_t>(((n * g.c + ci) * g.h + ih) * g.w + iw)]) *
                       static_cast<double>(w[static_cast<size_t>(((m * cg + c) * g.kh + p) * g.kw + q)]);
              }
          y[static_cast<size_t>(((n * g.m + m) * oh + i) * ow + j)] = acc;
        }
    }
  return y;
}

template <typename T>
void CheckConvCase(const ConvCfg& g, uint32_t seed) {
  CAPTURE(Describe(g));
  Tensor x = RandomTensor<T>(g.x(), seed), w = RandomTensor<T>(g.wd(), seed + 1), b = RandomTensor<T>({g.m}, seed + 2);
  Feeds feeds{{"X", x}, {"W", w}};
  if (g.bias) feeds.emplace_back("b", b);
  auto ws = RunOp(ConvOp(g), feeds);
  const Tensor& y = ws->GetTensor("Y");
  REQUIRE(y.dims() == g.y());
  std::vector<T> bv = Values<T>(b);
  CheckClose(Values<T>(y), RefConv(g, Values<T>(x), Values<T>(w), g.bias ? &bv : nullptr), Tol<T>(),
             static_cast<double>(g.c / g.group * g.kh * g.kw));
}

struct PoolCfg {
  int64_t n = 1, c = 1, h = 5, w = 5, kh = 2, kw = 2, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  bool global = false;
  int include_pad = -1;  // -1: argument absent (default 0)

  Dims x() const { return {n, c, h, w}; }
  int64_t ekh() const { return global ? h : kh; }
  int64_t ekw() const { return global ? w : kw; }
  int64_t oh() const { return (h + pt + pb - ekh()) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - ekw()) / sw + 1; }
  Dims y() const { return {n, c, oh(), ow()}; }
};

std::string Describe(const PoolCfg& g) {
  return StrCat("X [", g.n, ",", g.c, ",", g.h, ",", g.w, "] k ", g.kh, "x", g.kw, " s ", g.sh, ",", g.sw, " p ",
                g.pt, ",", g.pl, ",", g.pb, ",", g.pr, " global ", g.global, " include_pad ", g.include_pad);
}

std::vector<Argument> PoolArgs(const PoolCfg& g) {
  std::vector<Argument> a;
  if (g.global) {
    a.push_back(IntArg("global_pooling", 1));
  } else {
    if (g.kh == g.kw) {
      a.push_back(IntArg("kernel", g.kh));
    } else {
      a.push_back(IntArg("kernel_h", g.kh));
      a.push_back(IntArg("kernel_w", g.kw));
    }
    AddWindowArgs(a, g.sh, g.sw, g.pt, g.pl, g.pb, g.pr);
  }
  if (g.include_pad >= 0) a.push_back(IntArg("count_include_pad", g.include_pad));
  return a;
}

// Direct pooling: every kernel position in scan order, bounds-checked; max
// keeps the first maximum; the pad-inclusive count is the number of kernel
// positions inside the padded input.
template <typename T>
std::vector<double> RefPool(bool is_max, const PoolCfg& g, const std::vector<T>& x) {
  const int64_t oh = g.oh(), ow = g.ow();
  std::vector<double> y(static_cast<size_t>(g.n * g.c * oh * ow));
  for (int64_t nc = 0; nc < g.n * g.c; ++nc)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t count = 0, padded = 0;
        for (int64_t p = 0; p < g.ekh(); ++p)
          for (int64_t q = 0; q < g.ekw(); ++q) {
            const int64_t ih = i * g.sh - g.pt + p, iw = j * g.sw - g.pl + q;
            if (ih < g.h + g.pb && iw < g.w + g.pr) ++padded;
            if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
            const double v = static_cast<double>(x[static_cast<size_t>((nc * g.h + ih) * g.w + iw)]);
            if (v > best) best = v;
            sum += v;
            ++count;
          }
        y[static_cast<size_t>((nc * oh + i) * ow + j)] =
            is_max ? best : sum / static_cast<double>(g.include_pad == 1 ? padded : count);
      }
  return y;
}

template <typename T>
void CheckPoolCase(bool is_max, const PoolCfg& g, uint32_t seed) {
  CAPTURE(Describe(g));
  CAPTURE(is_max);
  Tensor x = RandomTensor<T>(g.x(), seed);
  auto ws = RunOp(Op(is_max ? "MaxPool" : "AveragePool", {"X"}, {"Y"}, PoolArgs(g)), {{"X", x}});
  const Tensor& y = ws->GetTensor("Y");
  REQUIRE(y.dims() == g.y());
  CheckClose(Values<T>(y), RefPool(is_max, g, Values<T>(x)), Tol<T>());
}

// Gradient makers are asked directly with a hand-made request.
std::vector<OperatorDef> MakerOps(const OperatorDef& op, std::vector<std::string> input_grads) {
  GradientRequest req{op, OpLabel(op, 0), std::vector<std::string>(op.outputs.size()), std::move(input_grads)};
  for (size_t k = 0; k < op.outputs.size(); ++k) req.output_grads[k] = op.outputs[k] + "_grad";
  auto maker = GradientRegistry::Create(req);
  return maker->Get();
}

// Finite differences for every element (the tensors here are small).
testing::GradCheckOptions AllElements() {
  testing::GradCheckOptions opt;
  opt.max_elements = 1 << 20;
  return opt;
}

const Argument* FindArg(const OperatorDef& op, const std::string& name) { return op.FindArg(name); }

}  // namespace

// ---- Conv forward -------------------------------------------------------------

TEST_CASE("the conv and pool operators have schemas, CPU kernels and gradient makers") {
  for (const char* t : {"Conv", "ConvGradient", "MaxPool", "MaxPoolGradient", "AveragePool", "AveragePoolGradient"}) {
    CAPTURE(t);
    CHECK(OpSchemaRegistry::Find(t) != nullptr);
    CHECK(OperatorRegistry::Has(DeviceType::kCPU, t));
  }
  for (const char* t : {"Conv", "MaxPool", "AveragePool"}) {
    CAPTURE(t);
    CHECK(GradientRegistry::Kind(t) == GradientKind::kMaker);
  }
}

TEST_CASE_TEMPLATE("Conv matches a direct convolution over a grid of configurations", T, float, double) {
  struct Kernel {
    int64_t kh, kw;
  };
  struct Pads {
    int64_t t, l, b, r;
  };
  int cases = 0;
  uint32_t seed = 100;
  for (Kernel k : {Kernel{3, 3}, Kernel{1, 1}, Kernel{2, 3}})
    for (int64_t s : {1, 2})
      for (Pads p : {Pads{0, 0, 0, 0}, Pads{1, 1, 1, 1}, Pads{2, 2, 2, 2}, Pads{0, 1, 2, 1}})
        for (int64_t d : {1, 2})
          for (int64_t group : {1, 2})
            for (bool bias : {false, true}) {
              ConvCfg g;
              g.n = 2;
              g.c = 2 * group;
              g.m = 3 * group;
              g.h = 7;
              g.w = 6;
              g.kh = k.kh;
              g.kw = k.kw;
              g.sh = s;
              g.sw = s == 2 && k.kh == 2 ? 1 : s;  // non-square strides too
              g.pt = p.t;
              g.pl = p.l;
              g.pb = p.b;
              g.pr = p.r;
              g.dh = d;
              g.dw = d == 2 && group == 2 ? 1 : d;  // and non-square dilations
              g.group = group;
              g.bias = bias;
              g.kernel_form = cases % 3;
              CheckConvCase<T>(g, seed++);
              ++cases;
            }
  CHECK(cases == 192);
}

TEST_CASE_TEMPLATE("Conv edge cases: 1x1 pointwise, kernel as large as the padded input, a single pixel", T, float,
                   double) {
  ConvCfg g;
  SUBCASE("1x1 pointwise (no im2col), grouped, with bias") {
    g.n = 3, g.c = 4, g.h = 5, g.w = 3, g.m = 6, g.kh = 1, g.kw = 1, g.group = 2, g.bias = true;
  }
  SUBCASE("1x1 with pads (not pointwise)") {
    g.n = 1, g.c = 3, g.h = 4, g.w = 4, g.m = 2, g.kh = 1, g.kw = 1, g.pt = 1, g.pr = 1;
  }
  SUBCASE("kernel exactly the padded input") {
    g.n = 2, g.c = 2, g.h = 3, g.w = 4, g.m = 3, g.kh = 5, g.kw = 4, g.pt = 1, g.pb = 1, g.bias = true;
  }
  SUBCASE("1x1 input, 3x3 kernel, pad 1") {
    g.n = 2, g.c = 3, g.h = 1, g.w = 1, g.m = 2, g.kh = 3, g.kw = 3, g.pt = g.pl = g.pb = g.pr = 1;
  }
  SUBCASE("depthwise (group = C)") {
    g.n = 2, g.c = 4, g.h = 6, g.w = 5, g.m = 8, g.kh = 3, g.kw = 3, g.group = 4, g.sh = 2, g.sw = 2, g.pt = g.pl = 1,
    g.bias = true;
  }
  SUBCASE("stride larger than the kernel") {
    g.n = 1, g.c = 2, g.h = 9, g.w = 8, g.m = 2, g.kh = 2, g.kw = 2, g.sh = 3, g.sw = 4, g.pl = 1;
  }
  SUBCASE("empty batch") {
    g.n = 0, g.c = 2, g.h = 5, g.w = 5, g.m = 3, g.bias = true;
  }
  CheckConvCase<T>(g, 7);
}

TEST_CASE("Conv on the Fashion-MNIST CNN's shapes (float32, bias, pad 2) matches the direct convolution") {
  ConvCfg c1;
  c1.n = 3, c1.c = 1, c1.h = 28, c1.w = 28, c1.m = 32, c1.kh = 5, c1.kw = 5, c1.pt = c1.pl = c1.pb = c1.pr = 2;
  c1.bias = true;
  CheckConvCase<float>(c1, 11);
  ConvCfg c2 = c1;
  c2.c = 32, c2.h = 14, c2.w = 14, c2.m = 64;
  CheckConvCase<float>(c2, 12);
}

TEST_CASE("Conv reruns with a smaller and a larger input give fresh, correct results (scratch reuse)") {
  ConvCfg g;
  g.c = 2, g.m = 3, g.pt = g.pl = g.pb = g.pr = 1, g.bias = true;
  auto def = std::make_shared<const NetDef>(MakeNet({ConvOp(g)}, {{"X", {}}, {"W", {}}, {"b", {}}}));
  auto ws = std::make_shared<Workspace>();
  Tensor w = RandomTensor<float>(g.wd(), 1), b = RandomTensor<float>({g.m}, 2);
  ws->Feed("W", w);
  ws->Feed("b", b);
  ws->Feed("X", RandomTensor<float>({1, 2, 3, 3}, 0));  // the net must be created with its inputs present
  Net net(def, ws);
  const std::vector<float> bv = Values<float>(b);
  int runs = 0;
  for (auto [n, h, wd] : {std::tuple<int64_t, int64_t, int64_t>{2, 9, 8}, {1, 4, 3}, {3, 11, 12}, {1, 4, 3}}) {
    ConvCfg r = g;
    r.n = n, r.h = h, r.w = wd;
    CAPTURE(Describe(r));
    Tensor x = RandomTensor<float>(r.x(), static_cast<uint32_t>(20 + runs));
    ws->Feed("X", x);
    net.Run();
    const Tensor& y = ws->GetTensor("Y");
    REQUIRE(y.dims() == r.y());
    CheckClose(Values<float>(y), RefConv(r, Values<float>(x), Values<float>(w), &bv), 1e-5, 18.0);
    ++runs;
  }
  CHECK(runs == 4);
}

// ---- pooling forward ------------------------------------------------------------

TEST_CASE_TEMPLATE("MaxPool and AveragePool match direct pooling over a grid of configurations", T, float, double) {
  struct Pads {
    int64_t t, l, b, r;
  };
  int cases = 0;
  uint32_t seed = 300;
  for (bool is_max : {true, false})
    for (auto [kh, kw] : {std::pair<int64_t, int64_t>{2, 2}, {3, 3}, {2, 3}, {1, 1}})
      for (int64_t s : {1, 2, 3})
        for (Pads p : {Pads{0, 0, 0, 0}, Pads{1, 1, 1, 1}, Pads{0, 1, 1, 0}})
          for (int include_pad : {-1, 0, 1}) {
            if (is_max && include_pad >= 0) continue;
            if (p.t >= kh || p.b >= kh || p.l >= kw || p.r >= kw) continue;
            PoolCfg g;
            g.n = 2, g.c = 3, g.h = 7, g.w = 8;
            g.kh = kh, g.kw = kw, g.sh = s, g.sw = s == 3 ? 2 : s;
            g.pt = p.t, g.pl = p.l, g.pb = p.b, g.pr = p.r;
            g.include_pad = include_pad;
            CheckPoolCase<T>(is_max, g, seed++);
            ++cases;
          }
  CHECK(cases == 120);
}

TEST_CASE_TEMPLATE("global pooling pools each whole plane", T, float, double) {
  for (bool is_max : {true, false}) {
    PoolCfg g;
    g.n = 2, g.c = 3, g.h = 4, g.w = 5, g.global = true;
    CheckPoolCase<T>(is_max, g, 9);
    // And by hand: the mean / max of 0..19.
    std::vector<T> v(20);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(i);
    auto ws = RunOp(Op(is_max ? "MaxPool" : "AveragePool", {"X"}, {"Y"}, {IntArg("global_pooling", 1)}),
                    {{"X", Make<T>({1, 1, 4, 5}, v)}});
    CHECK(ws->GetTensor("Y").dims() == Dims{1, 1, 1, 1});
    CHECK(Values<T>(ws->GetTensor("Y"))[0] == (is_max ? T(19) : T(9.5)));
  }
}

TEST_CASE("AveragePool's divisor at pads: count_include_pad 0 counts X's elements, 1 the padded window") {
  // 2x2 plane of ones, kernel 2, pad 1, stride 2: each window holds one
  // element of X (the corners) and three pads.
  std::vector<double> ones(4, 1.0);
  Tensor x = Make<double>({1, 1, 2, 2}, ones);
  auto base = std::vector<Argument>{IntArg("kernel", 2), IntArg("pad", 1), IntArg("stride", 2)};
  auto ws0 = RunOp(Op("AveragePool", {"X"}, {"Y"}, base), {{"X", x}});
  CHECK(Values<double>(ws0->GetTensor("Y")) == std::vector<double>{1, 1, 1, 1});
  auto with = base;
  with.push_back(IntArg("count_include_pad", 1));
  auto ws1 = RunOp(Op("AveragePool", {"X"}, {"Y"}, with), {{"X", x}});
  CHECK(Values<double>(ws1->GetTensor("Y")) == std::vector<double>{0.25, 0.25, 0.25, 0.25});
}

TEST_CASE("MaxPool ignores pads (all-negative input) and routes ties to the first maximum in scan order") {
  // Pads must not act as zeros.
  std::vector<double> neg{-5, -4, -3, -2};
  auto ws = RunOp(Op("MaxPool", {"X"}, {"Y"}, {IntArg("kernel", 2), IntArg("pad", 1), IntArg("stride", 2)}),
                  {{"X", Make<double>({1, 1, 2, 2}, neg)}});
  CHECK(Values<double>(ws->GetTensor("Y")) == neg);

  // One 2x3 window [[1, 7, 7], [7, 2, 7]]: the winner is element 1.
  std::vector<double> xv{1, 7, 7, 7, 2, 7};
  Feeds feeds{{"X", Make<double>({1, 1, 2, 3}, xv)}, {"dY", Make<double>({1, 1, 1, 1}, {3.0})}};
  auto args = std::vector<Argument>{IntArg("kernel_h", 2), IntArg("kernel_w", 3)};
  auto wg = RunOps({Op("MaxPool", {"X"}, {"Y"}, args), Op("MaxPoolGradient", {"X", "Y", "dY"}, {"dX"}, args)}, feeds);
  CHECK(Values<double>(wg->GetTensor("Y")) == std::vector<double>{7});
  CHECK(Values<double>(wg->GetTensor("dX")) == std::vector<double>{0, 3, 0, 0, 0, 0});

  // Overlapping windows (kernel 2, stride 1) over a constant plane: each
  // window's first element wins, so dX counts how many windows start there.
  std::vector<double> same(9, 4.0);
  Feeds f2{{"X", Make<double>({1, 1, 3, 3}, same)}, {"dY", Make<double>({1, 1, 2, 2}, {1.0, 1.0, 1.0, 1.0})}};
  auto a2 = std::vector<Argument>{IntArg("kernel", 2)};
  auto w2 = RunOps({Op("MaxPool", {"X"}, {"Y"}, a2), Op("MaxPoolGradient", {"X", "Y", "dY"}, {"dX"}, a2)}, f2);
  CHECK(Values<double>(w2->GetTensor("dX")) == std::vector<double>{1, 1, 0, 1, 1, 0, 0, 0, 0});
}

TEST_CASE("MaxPool propagates NaN; its gradient goes to the window's first NaN") {
  const double nan = std::nan("");
  // Two windows (kernel 2, stride 2) of a 2x4 plane: [[1, 5], [NaN, NaN]] and [[NaN, 9], [3, NaN]].
  std::vector<double> xv{1, 5, nan, 9, nan, nan, 3, nan};
  Feeds feeds{{"X", Make<double>({1, 1, 2, 4}, xv)}, {"dY", Make<double>({1, 1, 1, 2}, {2.0, 3.0})}};
  auto args = std::vector<Argument>{IntArg("kernel", 2), IntArg("stride", 2)};
  auto ws = RunOps({Op("MaxPool", {"X"}, {"Y"}, args), Op("MaxPoolGradient", {"X", "Y", "dY"}, {"dX"}, args)}, feeds);
  std::vector<double> y = Values<double>(ws->GetTensor("Y"));
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(y[1]));
  CHECK(Values<double>(ws->GetTensor("dX")) == std::vector<double>{0, 0, 3, 0, 2, 0, 0, 0});
}

// ---- gradients ------------------------------------------------------------------

TEST_CASE("Conv gradients (X, W, b) match finite differences") {
  ConvCfg g;
  SUBCASE("3x3, pad 1, bias") {
    g.n = 2, g.c = 2, g.h = 5, g.w = 4, g.m = 3, g.pt = g.pl = g.pb = g.pr = 1, g.bias = true;
  }
  SUBCASE("groups, stride 2, asymmetric pads, dilation 2, bias") {
    g.n = 2, g.c = 4, g.h = 7, g.w = 8, g.m = 4, g.group = 2, g.sh = g.sw = 2, g.pt = 0, g.pl = 1, g.pb = 2, g.pr = 1,
    g.dh = g.dw = 2, g.bias = true;
  }
  SUBCASE("non-square kernel, per-axis stride and dilation, no bias") {
    g.n = 1, g.c = 3, g.h = 6, g.w = 7, g.m = 2, g.kh = 2, g.kw = 3, g.sh = 2, g.sw = 1, g.dh = 1, g.dw = 2;
    g.kernel_form = 2;
  }
  SUBCASE("1x1 pointwise, grouped, bias") {
    g.n = 2, g.c = 4, g.h = 3, g.w = 5, g.m = 6, g.kh = 1, g.kw = 1, g.group = 2, g.bias = true;
  }
  SUBCASE("depthwise, stride larger than the kernel") {
    g.n = 1, g.c = 3, g.h = 8, g.w = 7, g.m = 3, g.kh = 2, g.kw = 2, g.group = 3, g.sh = 3, g.sw = 3, g.pl = 1;
  }
  CAPTURE(Describe(g));
  OperatorDef op = ConvOp(g);
  testing::GradFeeds feeds{{"X", RandomTensor<double>(g.x(), 1)}, {"W", RandomTensor<double>(g.wd(), 2)}};
  if (g.bias) feeds.emplace_back("b", RandomTensor<double>({g.m}, 3));
  int64_t compared = testing::CheckGradient(op, feeds, AllElements());
  CHECK(compared == Prod(g.x()) + Prod(g.wd()) + (g.bias ? g.m : 0));
}

TEST_CASE("MaxPool gradient matches finite differences") {
  PoolCfg g;
  SUBCASE("kernel 2, stride 2") { g.n = 2, g.c = 2, g.h = 6, g.w = 4, g.sh = g.sw = 2; }
  SUBCASE("overlapping kernel 3, stride 2, pad 1") { g.n = 1, g.c = 2, g.h = 7, g.w = 6, g.kh = g.kw = 3, g.sh = g.sw = 2, g.pt = g.pl = g.pb = g.pr = 1; }
  SUBCASE("non-square, asymmetric pads") { g.n = 2, g.c = 1, g.h = 5, g.w = 7, g.kh = 2, g.kw = 3, g.sh = 1, g.sw = 2, g.pt = 1, g.pr = 2; }
  SUBCASE("global") { g.n = 2, g.c = 3, g.h = 3, g.w = 4, g.global = true; }
  CAPTURE(Describe(g));
  int64_t compared =
      testing::CheckGradient(Op("MaxPool", {"X"}, {"Y"}, PoolArgs(g)), {{"X", DistinctTensor(g.x(), 5)}}, AllElements());
  CHECK(compared == Prod(g.x()));
}

TEST_CASE("AveragePool gradient matches finite differences") {
  PoolCfg g;
  SUBCASE("kernel 3, stride 2, pad 1") { g.n = 2, g.c = 2, g.h = 7, g.w = 6, g.kh = g.kw = 3, g.sh = g.sw = 2, g.pt = g.pl = g.pb = g.pr = 1; }
  SUBCASE("non-square, asymmetric pads, stride 1") { g.n = 1, g.c = 2, g.h = 5, g.w = 6, g.kh = 3, g.kw = 2, g.pt = 2, g.pl = 1; }
  SUBCASE("global") { g.n = 2, g.c = 2, g.h = 3, g.w = 5, g.global = true; }
  for (int include_pad : {-1, 0, 1}) {
    g.include_pad = include_pad;
    CAPTURE(Describe(g));
    int64_t compared = testing::CheckGradient(Op("AveragePool", {"X"}, {"Y"}, PoolArgs(g)),
                                              {{"X", RandomTensor<double>(g.x(), 6)}}, AllElements());
    CHECK(compared == Prod(g.x()));
  }
}

TEST_CASE("the float32 gradient kernels agree with the float64 ones") {
  ConvCfg g;
  g.n = 2, g.c = 4, g.h = 9, g.w = 8, g.m = 6, g.group = 2, g.sh = 2, g.sw = 1, g.pt = 1, g.pl = 2, g.pb = 0, g.pr = 1,
  g.dh = 2, g.bias = true;
  PoolCfg p;
  p.n = 2, p.c = 6, p.h = 5, p.w = 4, p.kh = p.kw = 3, p.sh = p.sw = 2, p.pt = p.pl = p.pb = p.pr = 1;
  Tensor x = RandomTensor<double>(g.x(), 1), w = RandomTensor<double>(g.wd(), 2), b = RandomTensor<double>({g.m}, 3);
  Tensor dy = RandomTensor<double>(g.y(), 4);
  Tensor px = DistinctTensor(p.x(), 5), pdy = RandomTensor<double>(p.y(), 6);
  auto ops = [&] {
    return std::vector<OperatorDef>{
        Op("ConvGradient", {"X", "W", "dY"}, {"dW", "db", "dX"}, ConvArgs(g)),
        Op("MaxPool", {"PX"}, {"PY"}, PoolArgs(p)),
        Op("MaxPoolGradient", {"PX", "PY", "PdY"}, {"PdX_max"}, PoolArgs(p)),
        Op("AveragePoolGradient", {"PX", "PdY"}, {"PdX_avg"}, PoolArgs(p)),
    };
  };
  auto w64 = RunOps(ops(), {{"X", x}, {"W", w}, {"dY", dy}, {"PX", px}, {"PdY", pdy}});
  auto w32 = RunOps(ops(), {{"X", Cast<float, double>(x)},
                            {"W", Cast<float, double>(w)},
                            {"dY", Cast<float, double>(dy)},
                            {"PX", Cast<float, double>(px)},
                            {"PdY", Cast<float, double>(pdy)}});
  for (const char* name : {"dW", "db", "dX", "PdX_max", "PdX_avg"}) {
    CAPTURE(name);
    CheckClose(Values<float>(w32->GetTensor(name)), Values<double>(w64->GetTensor(name)), 1e-5, 20.0);
  }
}

// ---- gradient makers -------------------------------------------------------------

TEST_CASE("Conv's gradient maker: outputs dW, db (with a bias), dX only when wanted") {
  OperatorDef fwd = Op("Conv", {"X", "W", "b"}, {"Y"}, {IntArg("stride", 2), IntArg("pad", 1)});
  SUBCASE("everything wanted") {
    auto ops = MakerOps(fwd, {"X_grad", "W_grad", "b_grad"});
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].type == "ConvGradient");
    CHECK(ops[0].inputs == std::vector<std::string>{"X", "W", "Y_grad"});
    CHECK(ops[0].outputs == std::vector<std::string>{"W_grad", "b_grad", "X_grad"});
    REQUIRE(FindArg(ops[0], "no_bias") != nullptr);
    CHECK(std::get<int64_t>(FindArg(ops[0], "no_bias")->value) == 0);
    REQUIRE(FindArg(ops[0], "stride") != nullptr);  // the forward op's arguments are passed on
    CHECK(std::get<int64_t>(FindArg(ops[0], "stride")->value) == 2);
    CHECK(FindArg(ops[0], "pad") != nullptr);
  }
  SUBCASE("first layer: no dX") {
    auto ops = MakerOps(fwd, {"", "W_grad", "b_grad"});
    REQUIRE(ops.size() == 1);
    CHECK(ops[0].outputs == std::vector<std::string>{"W_grad", "b_grad"});
  }
  SUBCASE("no bias") {
    OperatorDef nb = Op("Conv", {"X", "W"}, {"Y"});
    auto with_dx = MakerOps(nb, {"X_grad", "W_grad"});
    REQUIRE(with_dx.size() == 1);
    CHECK(with_dx[0].outputs == std::vector<std::string>{"W_grad", "X_grad"});
    REQUIRE(FindArg(with_dx[0], "no_bias") != nullptr);
    CHECK(std::get<int64_t>(FindArg(with_dx[0], "no_bias")->value) == 1);
    auto no_dx = MakerOps(nb, {"", "W_grad"});
    REQUIRE(no_dx.size() == 1);
    CHECK(no_dx[0].outputs == std::vector<std::string>{"W_grad"});
  }
  SUBCASE("frozen W and b: dX only, the rest to scratch blobs") {
    auto ops = MakerOps(fwd, {"X_grad", "", ""});
    REQUIRE(ops.size() == 1);
    REQUIRE(ops[0].outputs.size() == 3);
    CHECK(ops[0].outputs[2] == "X_grad");
    CHECK(ops[0].outputs[0] != "W_grad");
    CHECK(ops[0].outputs[0] != ops[0].outputs[1]);
  }
  SUBCASE("nothing wanted: no ops") { CHECK(MakerOps(fwd, {"", "", ""}).empty()); }
}

TEST_CASE("Conv gradient ops from the maker run: dW and db agree with and without dX") {
  ConvCfg g;
  g.n = 2, g.c = 3, g.h = 6, g.w = 5, g.m = 4, g.pt = g.pl = g.pb = g.pr = 1, g.bias = true;
  OperatorDef fwd = ConvOp(g);
  Feeds feeds{{"X", RandomTensor<double>(g.x(), 1)},
              {"W", RandomTensor<double>(g.wd(), 2)},
              {"b", RandomTensor<double>({g.m}, 3)},
              {"Y_grad", RandomTensor<double>(g.y(), 4)}};
  auto full_ops = MakerOps(fwd, {"dX", "dW", "db"});
  auto no_dx_ops = MakerOps(fwd, {"", "dW", "db"});
  auto dx_only_ops = MakerOps(fwd, {"dX", "", ""});
  std::vector<OperatorDef> full{fwd}, part{fwd}, dx_only{fwd};
  full.insert(full.end(), full_ops.begin(), full_ops.end());
  part.insert(part.end(), no_dx_ops.begin(), no_dx_ops.end());
  dx_only.insert(dx_only.end(), dx_only_ops.begin(), dx_only_ops.end());
  auto wf = RunOps(full, feeds);
  auto wp = RunOps(part, feeds);
  auto wx = RunOps(dx_only, feeds);
  CHECK(Values<double>(wp->GetTensor("dW")) == Values<double>(wf->GetTensor("dW")));
  CHECK(Values<double>(wp->GetTensor("db")) == Values<double>(wf->GetTensor("db")));
  CHECK(!wp->HasBlob("dX"));
  CHECK(Values<double>(wx->GetTensor("dX")) == Values<double>(wf->GetTensor("dX")));
  // db is the sum of dY over N, OH, OW.
  std::vector<double> dy = Values<double>(feeds[3].second), db(static_cast<size_t>(g.m), 0.0);
  const int64_t ohw = g.oh() * g.ow();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t m = 0; m < g.m; ++m)
      for (int64_t i = 0; i < ohw; ++i) db[static_cast<size_t>(m)] += dy[static_cast<size_t>((n * g.m + m) * ohw + i)];
  CheckClose(Values<double>(wf->GetTensor("db")), db, 1e-12);
}

TEST_CASE("pool gradient makers: dX only when wanted, forward arguments passed on") {
  auto args = std::vector<Argument>{IntArg("kernel", 2), IntArg("stride", 2)};
  auto mx = MakerOps(Op("MaxPool", {"X"}, {"Y"}, args), {"X_grad"});
  REQUIRE(mx.size() == 1);
  CHECK(mx[0].type == "MaxPoolGradient");
  CHECK(mx[0].inputs == std::vector<std::string>{"X", "Y", "Y_grad"});
  CHECK(mx[0].outputs == std::vector<std::string>{"X_grad"});
  CHECK(FindArg(mx[0], "kernel") != nullptr);
  auto av = MakerOps(Op("AveragePool", {"X"}, {"Y"}, args), {"X_grad"});
  REQUIRE(av.size() == 1);
  CHECK(av[0].type == "AveragePoolGradient");
  CHECK(av[0].inputs == std::vector<std::string>{"X", "Y_grad"});
  CHECK(av[0].outputs == std::vector<std::string>{"X_grad"});
  CHECK(FindArg(av[0], "stride") != nullptr);
  CHECK(MakerOps(Op("MaxPool", {"X"}, {"Y"}, args), {""}).empty());
  CHECK(MakerOps(Op("AveragePool", {"X"}, {"Y"}, args), {""}).empty());
}

// ---- errors ---------------------------------------------------------------------

TEST_CASE("Conv errors have the right code and name the blob") {
  auto t = [](Dims d, DType dt = DType::kFloat32) { return Tensor(std::move(d), dt); };
  SUBCASE("X of the wrong rank") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"})}, {{"img", t({1, 3, 5})}, {"filt", t({2, 3, 3, 3})}},
                           Code::kShape, {"'img'", "4-D"});
  }
  SUBCASE("W of the wrong rank") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"})}, {{"img", t({1, 3, 5, 5})}, {"filt", t({2, 27})}},
                           Code::kShape, {"'filt'", "4-D"});
  }
  SUBCASE("C does not match W * group") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("group", 2)})},
                           {{"img", t({1, 3, 5, 5})}, {"filt", t({2, 3, 3, 3})}}, Code::kShape,
                           {"'img'", "'filt'", "C = 3"});
  }
  SUBCASE("M not divisible by group") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("group", 2)})},
                           {{"img", t({1, 4, 5, 5})}, {"filt", t({3, 2, 3, 3})}}, Code::kShape, {"'filt'", "group 2"});
  }
  SUBCASE("kernel larger than the padded input") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("pad", 1)})},
                           {{"img", t({1, 1, 2, 5})}, {"filt", t({1, 1, 5, 3})}}, Code::kShape, {"'img'", "larger"});
  }
  SUBCASE("dilated kernel larger than the input") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("dilation", 3)})},
                           {{"img", t({1, 1, 6, 6})}, {"filt", t({1, 1, 3, 3})}}, Code::kShape, {"'img'", "dilated"});
  }
  SUBCASE("stride 0") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("stride_w", 0)})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3})}}, Code::kInvalidArgument, {"stride"});
  }
  SUBCASE("negative dilation") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("dilation", -1)})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3})}}, Code::kInvalidArgument, {"dilation"});
  }
  SUBCASE("negative pad") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("pad_l", -1)})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3})}}, Code::kInvalidArgument, {"pad"});
  }
  SUBCASE("group 0") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("group", 0)})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3})}}, Code::kInvalidArgument, {"group"});
  }
  SUBCASE("bias of the wrong size") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt", "bias"}, {"Y"})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({2, 1, 3, 3})}, {"bias", t({3})}}, Code::kShape,
                           {"'bias'", "M = 2"});
  }
  SUBCASE("kernel argument disagrees with W") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("kernel", 5)})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3})}}, Code::kShape,
                           {"'filt'", "kernel 5x5"});
  }
  SUBCASE("kernel and kernel_h together") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("kernel", 3), IntArg("kernel_h", 3)})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3})}}, Code::kInvalidArgument, {"kernel_h"});
  }
  SUBCASE("pad and pad_t together") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {IntArg("pad", 1), IntArg("pad_t", 1)})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3})}}, Code::kInvalidArgument, {"pad_t"});
  }
  SUBCASE("NHWC") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"}, {StringArg("order", "NHWC")})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3})}}, Code::kInvalidArgument, {"NHWC"});
  }
  SUBCASE("dtypes differ") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({1, 1, 3, 3}, DType::kFloat64)}}, Code::kDType,
                           {"'filt'"});
  }
  SUBCASE("integer input") {
    ExpectRunAndInferError({Op("Conv", {"img", "filt"}, {"Y"})},
                           {{"img", t({1, 1, 5, 5}, DType::kInt32)}, {"filt", t({1, 1, 3, 3}, DType::kInt32)}},
                           Code::kDType, {"'img'"});
  }
}

TEST_CASE("ConvGradient and pool gradient errors name the blob") {
  auto t = [](Dims d) { return Tensor(std::move(d), DType::kFloat32); };
  SUBCASE("dY of the wrong shape") {
    ExpectRunAndInferError({Op("ConvGradient", {"img", "filt", "gy"}, {"gw", "gb"})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({2, 1, 3, 3})}, {"gy", t({1, 2, 5, 5})}}, Code::kShape,
                           {"'gy'", "[1, 2, 3, 3]"});
  }
  SUBCASE("output count contradicts no_bias") {
    ExpectRunAndInferError({Op("ConvGradient", {"img", "filt", "gy"}, {"gw", "gb", "gx"}, {IntArg("no_bias", 1)})},
                           {{"img", t({1, 1, 5, 5})}, {"filt", t({2, 1, 3, 3})}, {"gy", t({1, 2, 3, 3})}},
                           Code::kInvalidArgument, {"no_bias"});
  }
  SUBCASE("MaxPoolGradient with dY of the wrong shape") {
    ExpectRunAndInferError(
        {Op("MaxPoolGradient", {"img", "py", "gy"}, {"gx"}, {IntArg("kernel", 2), IntArg("stride", 2)})},
        {{"img", t({1, 1, 4, 4})}, {"py", t({1, 1, 2, 2})}, {"gy", t({1, 1, 3, 3})}}, Code::kShape,
        {"'gy'", "[1, 1, 2, 2]"});
  }
  SUBCASE("AveragePoolGradient with dY of the wrong shape") {
    ExpectRunAndInferError({Op("AveragePoolGradient", {"img", "gy"}, {"gx"}, {IntArg("kernel", 2)})},
                           {{"img", t({1, 1, 4, 4})}, {"gy", t({1, 1, 2, 2})}}, Code::kShape, {"'gy'", "[1, 1, 3, 3]"});
  }
}

TEST_CASE("pooling errors have the right code and name the blob") {
  auto t = [](Dims d, DType dt = DType::kFloat32) { return Tensor(std::move(d), dt); };
  for (const char* type : {"MaxPool", "AveragePool"}) {
    CAPTURE(type);
    ExpectRunAndInferError({Op(type, {"img"}, {"Y"}, {IntArg("kernel", 2)})}, {{"img", t({4, 4})}}, Code::kShape,
                           {"'img'", "4-D"});
    ExpectRunAndInferError({Op(type, {"img"}, {"Y"})}, {{"img", t({1, 1, 4, 4})}}, Code::kInvalidArgument, {"kernel"});
    ExpectRunAndInferError({Op(type, {"img"}, {"Y"}, {IntArg("kernel", 2), IntArg("pad", 2)})},
                           {{"img", t({1, 1, 4, 4})}}, Code::kInvalidArgument, {"smaller than the kernel"});
    ExpectRunAndInferError({Op(type, {"img"}, {"Y"}, {IntArg("kernel", 5)})}, {{"img", t({1, 1, 4, 4})}}, Code::kShape,
                           {"'img'", "larger"});
    ExpectRunAndInferError({Op(type, {"img"}, {"Y"}, {IntArg("kernel", 2), IntArg("stride", 0)})},
                           {{"img", t({1, 1, 4, 4})}}, Code::kInvalidArgument, {"stride"});
    ExpectRunAndInferError({Op(type, {"img"}, {"Y"}, {IntArg("kernel", 2), IntArg("pad_b", -1)})},
                           {{"img", t({1, 1, 4, 4})}}, Code::kInvalidArgument, {"pad"});
    ExpectRunAndInferError({Op(type, {"img"}, {"Y"}, {IntArg("global_pooling", 1), IntArg("kernel", 2)})},
                           {{"img", t({1, 1, 4, 4})}}, Code::kInvalidArgument, {"global_pooling"});
    // Not a pooling argument: validation rejects it when the net is created.
    ExpectBuildError({Op(type, {"img"}, {"Y"}, {IntArg("kernel", 2), IntArg("dilation", 2)})},
                     {{"img", t({1, 1, 4, 4})}}, Code::kInvalidArgument, {"unknown argument 'dilation'"});
    ExpectInferError({Op(type, {"img"}, {"Y"}, {IntArg("kernel", 2), IntArg("dilation", 2)})},
                     {{"img", t({1, 1, 4, 4})}}, Code::kInvalidArgument, {"dilation"});
    ExpectRunAndInferError({Op(type, {"img"}, {"Y"}, {IntArg("kernel", 2)})}, {{"img", t({1, 1, 4, 4}, DType::kInt64)}},
                           Code::kDType, {"'img'"});
  }
}

// Fuzzing found these: sizes from arguments and from zero-element tensors
// reached allocations and int64 arithmetic unchecked.
TEST_CASE("Conv's im2col scratch is charged to the workspace's memory limit") {
#if DP_HAVE_DNNL
  dnnl_cpu::DisabledScope im2col;  // oneDNN's buffers: test_dnnl_conv
#endif
  // X [1, 1, 64, 64] (16 KiB), W [1, 1, 9, 9], pad 2: the column matrix is
  // 81 x 60 * 60 floats (~1.1 MiB), far more than X, W and Y together.
  Feeds f = {{"x", Make<float>({1, 1, 64, 64}, Random<float>(64 * 64, 1))},
             {"w", Make<float>({1, 1, 9, 9}, Random<float>(81, 2))}};
  auto def = std::make_shared<const NetDef>(MakeNet({Op("Conv", {"x", "w"}, {"y"}, {IntArg("pad", 2)})}, f));
  WorkspaceOptions wo;
  wo.max_bytes = 256 * 1024;
  auto ws = std::make_shared<Workspace>(wo);
  for (const auto& [name, t] : f) ws->Feed(name, t);
  Net net(def, ws);
  ExpectError([&] { net.Run(); }, Code::kOutOfMemory, {"op 0 (Conv)", "scratch memory of", "262144"});
  // Without the limit the same net runs; the scratch is counted while the op keeps it.
  auto free_ws = std::make_shared<Workspace>();
  for (const auto& [name, t] : f) free_ws->Feed(name, t);
  Net free_net(def, free_ws);
  free_net.Run();
  CHECK(free_ws->budget()->used() >= 81 * 60 * 60 * sizeof(float));
}

TEST_CASE("pooling with an empty output and huge other dims reserves nothing and runs") {
  // X [0, 1, 2^40, 1]: no elements, but 2^40 output rows.
  Tensor x({0, 1, int64_t{1} << 40, 1}, DType::kFloat32);
  for (const char* type : {"MaxPool", "AveragePool"}) {
    CAPTURE(type);
    auto ws = RunOp(Op(type, {"x"}, {"y"}, {IntArg("kernel", 1)}), {{"x", x}});
    CHECK(ws->GetTensor("y").dims() == Dims{0, 1, int64_t{1} << 40, 1});
  }
}

TEST_CASE("window sums that overflow int64 are shape errors, not undefined behaviour") {
  Tensor x({0, 1, std::numeric_limits<int64_t>::max() - 1, 1}, DType::kFloat32);
  ExpectRunError({Op("MaxPool", {"x"}, {"y"}, {IntArg("kernel", 16), IntArg("pad", 8)})}, {{"x", x}}, Code::kShape,
                 {"more than int64 can count"});
  Tensor w({0, 1, int64_t{1} << 62, 1}, DType::kFloat32);
  ExpectRunError({Op("Conv", {"x", "w"}, {"y"}, {IntArg("dilation", 4)})}, {{"x", x}, {"w", w}}, Code::kShape,
                 {"more than int64 can count"});
}

TEST_CASE("pooling an input with H or W = 0 is a shape error (its padded windows hold no element)") {
  // Pads smaller than the kernel still let a 3-wide window fit 0 + 2 + 2.
  Tensor x({1, 1, 0, 4}, DType::kFloat32);
  for (const char* type : {"MaxPool", "AveragePool"}) {
    CAPTURE(type);
    ExpectRunError({Op(type, {"x"}, {"y"}, {IntArg("kernel", 3), IntArg("pad", 2)})}, {{"x", x}}, Code::kShape,
                   {"H and W > 0"});
  }
}

TEST_CASE("ConvGradient split across threads and image blocks equals the one-thread result") {
  // 13 images of 2 groups: parts of the batch on up to 3 threads, each in
  // blocks of images side by side, dW partials summed in part order.
  const std::vector<Argument> args{IntArg("kernel", 3), IntArg("pad", 1), IntArg("group", 2)};
  // (16 x 36 x 256 multiply-adds per image: enough for a thread each; 256
  // columns per image: blocks of 8 images.)
  const Feeds feeds{{"X", RandomTensor<double>({13, 8, 16, 16}, 1)},
                    {"W", RandomTensor<double>({16, 4, 3, 3}, 2)},
                    {"b", RandomTensor<double>({16}, 3)},
                    {"dY", RandomTensor<double>({13, 16, 16, 16}, 4)}};
  auto run = [&](int threads) {
    IntraOpThreadsScope scope(threads);
    return RunOps({Op("Conv", {"X", "W", "b"}, {"Y"}, args),
                   Op("ConvGradient", {"X", "W", "dY"}, {"dW", "db", "dX"}, args)},
                  feeds);
  };
  auto one = run(1);
  for (int threads : {2, 3}) {
    auto many = run(threads);
    for (const char* blob : {"Y", "dW", "db", "dX"}) {
      const std::vector<double> a = Values<double>(one->GetTensor(blob)), b = Values<double>(many->GetTensor(blob));
      REQUIRE(a.size() == b.size());
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
      CHECK_MESSAGE(worst < 1e-12, blob, " differs by ", worst, " with ", threads, " threads");
    }
  }
}
