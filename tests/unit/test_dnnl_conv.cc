// The oneDNN convolution kernels (ops/cpu/dnnl_conv.h, builds with
// DP_HAVE_DNNL) against dp's im2col kernels in the same process
// (dnnl_cpu::DisabledScope), on random shapes covering stride, padding,
// dilation, groups, one input channel, odd sizes and the batch split across
// threads; their gradients against finite differences (exact for a
// convolution, which is linear in X and in W) and the float64 kernels; the
// kernels oneDNN picks for the CNN sample's shapes; dp's thread policy: no
// OpenMP thread is ever started; and the float32 GEMMs (oneDNN's sgemm)
// against OpenBLAS's.
//
// Without oneDNN the file holds one case that says so.
#include <doctest/doctest.h>

#if !DP_HAVE_DNNL

TEST_CASE("oneDNN convolutions: not compiled in") {
  MESSAGE("skipped: built without oneDNN (-Ddnnl=disabled or libdnnl-dev missing); the im2col kernels are tested "
          "by test_conv");
}

#else

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel_for.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "expect_error.h"
#include "op_test_util.h"
#include "ops/cpu/conv_utils.h"
#include "ops/cpu/dnnl_common.h"
#include "ops/cpu/dnnl_conv.h"
#include "ops/cpu/gemm.h"

extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int);
}

using namespace dp;
using namespace dp::testing;

namespace {

struct Cfg {
  int64_t n = 1, c = 1, h = 5, w = 5, m = 1, kh = 3, kw = 3;
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1, group = 1;
  bool bias = true;
  int threads = 1;

  Dims x() const { return {n, c, h, w}; }
  Dims wd() const { return {m, c / group, kh, kw}; }
  int64_t oh() const { return (h + pt + pb - (dh * (kh - 1) + 1)) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - (dw * (kw - 1) + 1)) / sw + 1; }
  Dims y() const { return {n, m, oh(), ow()}; }
  int64_t k() const { return c / group * kh * kw; }
};

std::string Describe(const Cfg& g) {
  return StrCat("X [", g.n, ",", g.c, ",", g.h, ",", g.w, "] M ", g.m, " k ", g.kh, "x", g.kw, " s ", g.sh, ",", g.sw,
                " p ", g.pt, ",", g.pl, ",", g.pb, ",", g.pr, " d ", g.dh, ",", g.dw, " g ", g.group, " bias ", g.bias,
                " threads ", g.threads);
}

std::vector<Argument> Args(const Cfg& g, bool grad) {
  std::vector<Argument> a{IntArg("stride_h", g.sh), IntArg("stride_w", g.sw),   IntArg("pad_t", g.pt),
                          IntArg("pad_l", g.pl),    IntArg("pad_b", g.pb),      IntArg("pad_r", g.pr),
                          IntArg("dilation_h", g.dh), IntArg("dilation_w", g.dw), IntArg("group", g.group)};
  if (grad) a.push_back(IntArg("no_bias", g.bias ? 0 : 1));
  return a;
}

template <typename T>
Tensor Rand(Dims dims, uint32_t seed) {
  const int64_t n = Prod(dims);
  return Make<T>(std::move(dims), Random<T>(n, seed, -1.0, 1.0));
}

template <typename To, typename From>
Tensor Cast(const Tensor& t) {
  std::vector<From> v = Values<From>(t);
  return Make<To>(t.dims(), std::vector<To>(v.begin(), v.end()));
}

// Conv and ConvGradient (dW, db with a bias, dX when asked) on one set of inputs.
template <typename T>
Feeds Inputs(const Cfg& g, uint32_t seed) {
  Feeds f{{"X", Rand<T>(g.x(), seed)}, {"W", Rand<T>(g.wd(), seed + 1)}, {"dY", Rand<T>(g.y(), seed + 2)}};
  if (g.bias) f.emplace_back("b", Rand<T>({g.m}, seed + 3));
  return f;
}

std::vector<OperatorDef> ConvOps(const Cfg& g, bool want_dx) {
  std::vector<std::string> in{"X", "W"}, grads{"dW"};
  if (g.bias) {
    in.push_back("b");
    grads.push_back("db");
  }
  if (want_dx) grads.push_back("dX");
  return {Op("Conv", in, {"Y"}, Args(g, false)), Op("ConvGradient", {"X", "W", "dY"}, grads, Args(g, true))};
}

std::shared_ptr<Workspace> Run(const Cfg& g, const Feeds& f, bool want_dx = true) {
  IntraOpThreadsScope scope(g.threads);
  return RunOps(ConvOps(g, want_dx), f);
}

std::vector<std::string> Outputs(const Cfg& g, bool want_dx = true) {
  std::vector<std::string> o{"Y", "dW"};
  if (g.bias) o.push_back("db");
  if (want_dx) o.push_back("dX");
  return o;
}

// How many terms each output's elements sum: the tolerance's scale.
double Terms(const Cfg& g, const std::string& out) {
  if (out == "Y") return static_cast<double>(g.k());
  if (out == "dX") return static_cast<double>(g.m / g.group * g.kh * g.kw);
  return static_cast<double>(g.n * g.oh() * g.ow());  // dW, db
}

// oneDNN (float32) against im2col (float32) and against float64; returns
// whether oneDNN ran both ops.
bool CheckAgainstIm2col(const Cfg& g, uint32_t seed, bool want_dx = true) {
  CAPTURE(Describe(g));
  CAPTURE(want_dx);
  const Feeds f32 = Inputs<float>(g, seed);
  Feeds f64;
  for (const auto& [name, t] : f32) f64.emplace_back(name, Cast<double, float>(t));
  const int64_t before = dnnl_cpu::ConvRuns();
  auto dnnl = Run(g, f32, want_dx);
  const bool ran = dnnl_cpu::ConvRuns() == before + 2;
  std::shared_ptr<Workspace> im2col;
  {
    dnnl_cpu::DisabledScope off;
    im2col = Run(g, f32, want_dx);
  }
  CHECK(dnnl_cpu::ConvRuns() == before + (ran ? 2 : 0));
  auto exact = Run(g, f64, want_dx);
  for (const std::string& out : Outputs(g, want_dx)) {
    CAPTURE(out);
    const std::vector<float> got = Values<float>(dnnl->GetTensor(out));
    // Float32 sums of `terms` products of values in [-1, 1] (|product| 1/4 on average).
    const double scale = Terms(g, out) / 4;
    CheckClose(got, ToDouble(Values<float>(im2col->GetTensor(out))), 1e-6, scale);
    CheckClose(got, Values<double>(exact->GetTensor(out)), 1e-6, scale);
  }
  CHECK(!dnnl->HasBlob("dX") == !want_dx);
  return ran;
}

// A random convolution with at most ~max_macs multiply-adds per image.
Cfg RandomCfg(std::mt19937& gen) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  for (;;) {
    Cfg g;
    g.group = pick(1, 3) == 3 ? pick(2, 4) : 1;
    g.c = g.group * (pick(0, 3) == 0 ? 1 : pick(1, 12));
    g.m = g.group * pick(1, 20);
    g.h = pick(1, 19);
    g.w = pick(1, 19);
    g.kh = pick(1, 5);
    g.kw = pick(0, 2) == 0 ? g.kh : pick(1, 5);
    g.sh = pick(1, 3);
    g.sw = pick(0, 1) ? g.sh : pick(1, 3);
    g.dh = pick(0, 3) == 0 ? pick(2, 3) : 1;
    g.dw = pick(0, 3) == 0 ? pick(2, 3) : 1;
    const int64_t p = pick(0, 2);
    if (pick(0, 1)) {
      g.pt = g.pl = g.pb = g.pr = p;
    } else {
      g.pt = pick(0, 3), g.pl = pick(0, 3), g.pb = pick(0, 3), g.pr = pick(0, 3);
    }
    g.n = pick(1, 9);
    g.bias = pick(0, 3) != 0;
    g.threads = static_cast<int>(pick(1, 3));
    if (g.dh * (g.kh - 1) + 1 > g.h + g.pt + g.pb || g.dw * (g.kw - 1) + 1 > g.w + g.pl + g.pr) continue;
    return g;
  }
}

conv::ConvShape Shape(const Cfg& g) {
  OperatorDef op = Op("Conv", {"X", "W"}, {"Y"}, Args(g, false));
  ArgReader a(op, "");
  return conv::ComputeConvShape(op, a, g.x(), g.wd(), nullptr);
}

// The CNN sample's convolutions (samples/nets/fashion_cnn.json) at batch 64.
Cfg Conv1() {
  Cfg g;
  g.n = 64, g.c = 1, g.h = g.w = 28, g.m = 32, g.kh = g.kw = 5, g.pt = g.pl = g.pb = g.pr = 2;
  return g;
}
Cfg Conv2() {
  Cfg g = Conv1();
  g.c = 32, g.h = g.w = 14, g.m = 64;
  return g;
}

// The ids of the process's threads (/proc/self/task).
std::set<int> ThreadIds() {
  std::set<int> ids;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ids.insert(std::atoi(e->d_name));
    closedir(d);
  }
  return ids;
}

// The threads that run now and did not in `before`, less `ours` (threads the
// test started itself). A thread that ends meanwhile is no concern: a thread
// just joined may still be listed for a moment after join returns, so the
// checks ask only that nothing new appeared, not that the count is equal.
std::vector<int> NewThreads(const std::set<int>& before, std::initializer_list<int> ours = {}) {
  std::vector<int> fresh;
  for (int id : ThreadIds())
    if (before.count(id) == 0 && std::find(ours.begin(), ours.end(), id) == ours.end()) fresh.push_back(id);
  return fresh;
}

}  // namespace

TEST_CASE("oneDNN Conv and ConvGradient equal the im2col kernels on random shapes") {
  std::mt19937 gen(2024);
  int ran = 0, cases = 0;
  for (int i = 0; i < 150; ++i) {
    const Cfg g = RandomCfg(gen);
    ran += CheckAgainstIm2col(g, 1000 + 7 * i, i % 4 != 3) ? 1 : 0;
    ++cases;
  }
  // oneDNN declines only what it has just a reference kernel for.
  MESSAGE("oneDNN ran ", ran, " of ", cases, " random convolutions");
  CHECK(ran >= cases * 3 / 4);
}

TEST_CASE("oneDNN convolutions on chosen edge shapes") {
  Cfg g;
  SUBCASE("one input channel (the CNN's first layer), odd sizes") {
    g.n = 5, g.c = 1, g.h = 13, g.w = 11, g.m = 7, g.kh = g.kw = 5, g.pt = g.pl = g.pb = g.pr = 2;
  }
  SUBCASE("depthwise, stride 2") {
    g.n = 3, g.c = 6, g.h = 9, g.w = 8, g.m = 6, g.group = 6, g.sh = g.sw = 2, g.pt = g.pl = 1;
  }
  SUBCASE("dilation 2 and 3, asymmetric pads") {
    g.n = 2, g.c = 5, g.h = 12, g.w = 10, g.m = 9, g.dh = 2, g.dw = 3, g.pt = 0, g.pl = 3, g.pb = 2, g.pr = 1;
  }
  SUBCASE("1x1 kernel, 17 channels (not a multiple of the block)") {
    g.n = 4, g.c = 17, g.h = 6, g.w = 7, g.m = 19, g.kh = g.kw = 1;
  }
  SUBCASE("kernel as large as the padded input, 1x1 output") {
    g.n = 2, g.c = 3, g.h = 3, g.w = 4, g.m = 5, g.kh = 5, g.kw = 4, g.pt = g.pb = 1;
  }
  SUBCASE("a pad the floor rule leaves unused") {
    g.n = 2, g.c = 4, g.h = 8, g.w = 8, g.m = 8, g.sh = g.sw = 3, g.pb = g.pr = 2;
  }
  SUBCASE("no bias") {
    g.n = 3, g.c = 8, g.h = 10, g.w = 10, g.m = 16, g.bias = false, g.pt = g.pl = g.pb = g.pr = 1;
  }
  for (bool dx : {true, false}) CHECK(CheckAgainstIm2col(g, 31, dx));
}

TEST_CASE("oneDNN convolutions split across threads: odd batches, parts of unequal size") {
  // 16 x 16 x 9 x 256 multiply-adds per image: every image is worth a
  // thread, so the batch is cut into `threads` parts (of 13: 6 + 7, 4 + 4 + 5).
  for (int threads : {1, 2, 3})
    for (int64_t n : {1, 2, 13}) {
      Cfg g;
      g.n = n, g.c = 16, g.h = g.w = 16, g.m = 16, g.pt = g.pl = g.pb = g.pr = 1, g.group = 2, g.threads = threads;
      CHECK(CheckAgainstIm2col(g, 5, true));
    }
  // The CNN's shapes at batch 64 (and an odd batch), two and three parts.
  for (Cfg g : {Conv1(), Conv2()})
    for (int threads : {2, 3}) {
      g.threads = threads;
      g.n = threads == 3 ? 37 : 64;
      CHECK(CheckAgainstIm2col(g, 9, g.c > 1));
    }
}

TEST_CASE("oneDNN gradients match finite differences (exact: a convolution is linear in X and in W)") {
  // L = <R, Y>: for a direction V of W (or X, b), (L(W + V) - L(W - V)) / 2
  // = <dW, V> in exact arithmetic, so float32 forward runs check the float32
  // gradients to rounding.
  std::vector<Cfg> cfgs;
  for (Cfg g : {Conv2(), Conv1()}) {
    g.n = 6, g.threads = 2;
    cfgs.push_back(g);  // as the CNN
    g.sh = 2, g.sw = 1, g.dh = 2, g.group = g.c > 1 ? 4 : 1, g.pt = 3, g.pr = 0;
    cfgs.push_back(g);  // strided, dilated, grouped
  }
  for (const Cfg& g : cfgs) {
    CAPTURE(Describe(g));
    const Feeds f = Inputs<float>(g, 77);
    const Tensor r = f[2].second;  // dY = R
    const int64_t before = dnnl_cpu::ConvRuns();
    auto grads = Run(g, f);
    CHECK(dnnl_cpu::ConvRuns() == before + 2);
    auto loss = [&](const std::string& what, const Tensor& v, double sign) {
      Feeds moved = f;
      for (auto& [name, t] : moved) {
        if (name != what) continue;
        std::vector<float> a = Values<float>(t), d = Values<float>(v);
        for (size_t i = 0; i < a.size(); ++i) a[i] += static_cast<float>(sign) * d[i];
        t = Make<float>(t.dims(), a);
      }
      auto ws = Run(g, moved);
      std::vector<float> y = Values<float>(ws->GetTensor("Y")), rv = Values<float>(r);
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * rv[i];
      return l;
    };
    for (const std::string name : {"W", "X", "b"}) {
      CAPTURE(name);
      const std::string grad = name == "W" ? "dW" : name == "X" ? "dX" : "db";
      const Dims dims = name == "W" ? g.wd() : name == "X" ? g.x() : Dims{g.m};
      const Tensor v = Rand<float>(dims, 99);
      const double numeric = (loss(name, v, 1) - loss(name, v, -1)) / 2;
      std::vector<float> gv = Values<float>(grads->GetTensor(grad)), vv = Values<float>(v);
      double analytic = 0, size = 0;
      for (size_t i = 0; i < gv.size(); ++i) {
        analytic += static_cast<double>(gv[i]) * vv[i];
        size += std::abs(static_cast<double>(gv[i]) * vv[i]);
      }
      CHECK_MESSAGE(std::abs(numeric - analytic) <= 1e-4 * (1 + size), "numeric ", numeric, " analytic ", analytic);
    }
  }
}

TEST_CASE("oneDNN picks its JIT kernels for the CNN sample's convolutions") {
  for (const Cfg& g : {Conv1(), Conv2()}) {
    CAPTURE(Describe(g));
    for (int parts : {1, 2}) {
      dnnl_cpu::ConvForward fwd;
      REQUIRE(fwd.Prepare(Shape(g), true, parts));
      dnnl_cpu::ConvBackward bwd;
      REQUIRE(bwd.Prepare(Shape(g), true, g.c > 1, parts));
      MESSAGE("forward ", fwd.impl(), "; ", bwd.impl());
      for (const std::string& impl : {fwd.impl(), bwd.impl()}) {
        CHECK(impl.find("jit") != std::string::npos);
        CHECK(impl.find("gemm") == std::string::npos);
        CHECK(impl.find("ref") == std::string::npos);
      }
    }
  }
}

TEST_CASE("oneDNN runs on dp's threads only: no OpenMP thread is started, the caller's OpenMP setting is kept") {
  Cfg g = Conv2();
  g.threads = 2;
  const Feeds f = Inputs<float>(g, 3);
  {
    // dp's compute team starts with the first split op.
    dnnl_cpu::DisabledScope off;
    Run(g, f);
  }
  const int saved = omp_get_max_threads();
  omp_set_num_threads(3);  // as an application using OpenMP itself might
  const std::set<int> before = ThreadIds();
  const int64_t runs = dnnl_cpu::ConvRuns();
  for (int threads : {1, 2, 3}) {
    g.threads = threads;
    Run(g, f);
  }
  CHECK(dnnl_cpu::ConvRuns() == runs + 6);
  CHECK(NewThreads(before).empty());
  CHECK(omp_get_max_threads() == 3);
  // On another thread of the application too.
  int app_thread = 0;
  std::thread([&] {
    app_thread = static_cast<int>(gettid());
    omp_set_num_threads(2);
    Run(g, f);
    CHECK(omp_get_max_threads() == 2);
  }).join();
  CHECK(NewThreads(before, {app_thread}).empty());
  omp_set_num_threads(saved);
}

TEST_CASE("oneDNN reruns: new shapes rebuild the primitives, repeated ones give bitwise the same result") {
  Cfg g;
  g.c = 4, g.m = 8, g.h = g.w = 9, g.pt = g.pl = g.pb = g.pr = 1;
  IntraOpThreadsScope one(1);  // as Run: the same parts, so bitwise the same sums
  auto def = std::make_shared<const NetDef>(MakeNet(ConvOps(g, true), Inputs<float>(g, 1)));
  auto ws = std::make_shared<Workspace>();
  Net net(def, ws);
  const int64_t before = dnnl_cpu::ConvRuns();
  for (int64_t n : {3, 5, 3, 1}) {
    Cfg h = g;
    h.n = n;
    CAPTURE(n);
    const Feeds f = Inputs<float>(h, static_cast<uint32_t>(n));
    for (const auto& [name, t] : f) ws->Feed(name, t);
    net.Run();
    auto want = Run(h, f);  // fresh ops
    std::vector<std::vector<float>> first;
    for (const std::string& out : Outputs(h)) {
      first.push_back(Values<float>(ws->GetTensor(out)));
      CHECK(first.back() == Values<float>(want->GetTensor(out)));
    }
    net.Run();
    for (size_t i = 0; i < first.size(); ++i) CHECK(first[i] == Values<float>(ws->GetTensor(Outputs(h)[i])));
  }
  CHECK(dnnl_cpu::ConvRuns() == before + 4 * 2 * 2 + 4 * 2);
}

TEST_CASE("oneDNN's buffers are charged to the workspace's memory limit; float64 and empty batches use im2col") {
  Cfg g = Conv2();
  g.n = 8;
  const Feeds f = Inputs<float>(g, 4);
  auto def = std::make_shared<const NetDef>(MakeNet(ConvOps(g, true), f));
  WorkspaceOptions wo;
  // Y fits (fed tensors are not charged); the reordered X and Y do not.
  wo.max_bytes = static_cast<size_t>(Prod(g.y()) * 4 + 65536);
  auto ws = std::make_shared<Workspace>(wo);
  for (const auto& [name, t] : f) ws->Feed(name, t);
  Net net(def, ws);
  ExpectError([&] { net.Run(); }, Code::kOutOfMemory, {"op 0 (Conv)", "scratch memory of"});

  const int64_t before = dnnl_cpu::ConvRuns();
  Cfg d;
  d.n = 2, d.c = 3, d.m = 4;
  CheckAgainstIm2col(d, 1);  // float32 runs oneDNN ...
  CHECK(dnnl_cpu::ConvRuns() == before + 2);
  Feeds f64;
  for (const auto& [name, t] : Inputs<float>(d, 1)) f64.emplace_back(name, Cast<double, float>(t));
  Run(d, f64);  // ... float64 does not
  d.n = 0;
  Feeds empty = Inputs<float>(d, 2);
  auto ws0 = Run(d, empty);
  CHECK(ws0->GetTensor("Y").dims() == Dims{0, 4, 3, 3});
  CHECK(Values<float>(ws0->GetTensor("dW")) == std::vector<float>(static_cast<size_t>(Prod(d.wd())), 0.0f));
  CHECK(dnnl_cpu::ConvRuns() == before + 2);
}

// Last in the file: it leaves an OpenMP team behind.
TEST_CASE("the thread check can fail: oneDNN on a thread whose OpenMP count is 2 starts OpenMP threads") {
  std::thread([] {
    omp_set_num_threads(2);
    const std::set<int> before = ThreadIds();
    using dnnl::memory;
    const memory::desc a({64, 32, 14, 14}, memory::data_type::f32, memory::format_tag::nchw);
    const memory::desc b({64, 32, 14, 14}, memory::data_type::f32, memory::format_tag::nhwc);
    memory ma(a, dnnl_cpu::Engine()), mb(b, dnnl_cpu::Engine());
    dnnl::stream st(dnnl_cpu::Engine());
    dnnl::reorder(ma, mb).execute(st, ma, mb);
    CHECK(!NewThreads(before).empty());
  }).join();
}

// ops/cpu/gemm: float32 GEMM blocks run oneDNN's sgemm in these builds.
TEST_CASE("float32 GEMMs through oneDNN's sgemm equal OpenBLAS's: every transpose, split and serial, no OpenMP thread") {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  {
    // dp's compute team starts with the first split op.
    std::vector<float> x(512 * 512, 1.f), y(512 * 512);
    dnnl_cpu::DisabledScope off;
    IntraOpThreadsScope scope(2);
    Gemm(CblasNoTrans, CblasNoTrans, 512, 512, 512, 1.f, x.data(), 512, x.data(), 512, 0.f, y.data(), 512);
  }
  const std::set<int> before = ThreadIds();
  // (No structured bindings: clang 14's lambdas, CAPTURE's, cannot capture them.)
  for (const auto& dims : std::vector<std::array<int64_t, 3>>{
           {64, 512, 784}, {512, 784, 64}, {7, 300, 33}, {257, 3, 129}, {1, 1, 1}, {96, 96, 0},
           // rows for which C = A B^T runs transposed (C^T = B A^T)
           {32, 512, 784}, {16, 300, 33}, {48, 100, 7}})
    for (CBLAS_TRANSPOSE ta : {CblasNoTrans, CblasTrans})
      for (CBLAS_TRANSPOSE tb : {CblasNoTrans, CblasTrans})
        for (int threads : {1, 2}) {
          const int64_t m = dims[0], n = dims[1], k = dims[2];
          CAPTURE(m);
          CAPTURE(n);
          CAPTURE(k);
          CAPTURE(static_cast<int>(ta));
          CAPTURE(static_cast<int>(tb));
          CAPTURE(threads);
          // Leading dimensions past the matrices' widths (views into wider rows).
          const int64_t lda = (ta == CblasNoTrans ? k : m) + 3, ldb = (tb == CblasNoTrans ? n : k) + 5, ldc = n + 2;
          std::vector<float> a(static_cast<size_t>((ta == CblasNoTrans ? m : k) * lda)),
              b(static_cast<size_t>((tb == CblasNoTrans ? k : n) * ldb)), c0(static_cast<size_t>(m * ldc));
          for (auto* v : {&a, &b, &c0})
            for (auto& x : *v) x = u(gen);
          std::vector<float> want = c0, got = c0, serial = c0;
          {
            dnnl_cpu::DisabledScope openblas;
            GemmSerial(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, want.data(), ldc);
          }
          const int64_t runs_before = dnnl_cpu::ConvRuns(), calls_before = DnnlSgemmCalls(),
                        transposed_before = DnnlTransposedCalls();
          {
            IntraOpThreadsScope scope(threads);
            Gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, got.data(), ldc);
          }
          GemmSerial(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, serial.data(), ldc);
          CHECK(dnnl_cpu::ConvRuns() == runs_before);  // GEMMs are not convolutions
          // oneDNN ran every block but empty products (OpenBLAS scales C by beta there).
          if (k > 0)
            CHECK(DnnlSgemmCalls() >= calls_before + 2);
          else
            CHECK(DnnlSgemmCalls() == calls_before);
          // A B^T with 16, 32 or 48 rows (and at least as many columns) ran transposed, serial and split.
          const bool transposed = ta == CblasNoTrans && tb == CblasTrans && k > 0 && m % 16 == 0 && m <= 48 && n >= m;
          CHECK((DnnlTransposedCalls() >= transposed_before + 2) == transposed);
          double err = 0;
          for (size_t i = 0; i < want.size(); ++i)
            err = std::max({err, std::fabs(static_cast<double>(got[i] - want[i])),
                            std::fabs(static_cast<double>(serial[i] - want[i]))});
          CHECK(err <= 1e-4 * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))));
          // The padding between rows is never written.
          for (int64_t r = 0; r < m; ++r)
            for (int64_t j = n; j < ldc; ++j) CHECK(got[static_cast<size_t>(r * ldc + j)] == c0[static_cast<size_t>(r * ldc + j)]);
        }
  CHECK(NewThreads(before).empty());
}

TEST_CASE("a transposed sgemm with beta = 0 never reads C") {
  const int64_t m = 32, n = 64, k = 5;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k)), c(static_cast<size_t>(m * n), NAN),
      want(c.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2.f;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[static_cast<size_t>(i * k + p)] * b[static_cast<size_t>(j * k + p)];
      want[static_cast<size_t>(i * n + j)] = 2.f * s;  // small integers: exact in any order
    }
  const int64_t transposed_before = DnnlTransposedCalls();
  GemmSerial(CblasNoTrans, CblasTrans, m, n, k, 2.f, a.data(), k, b.data(), k, 0.f, c.data(), n);
  CHECK(DnnlTransposedCalls() == transposed_before + 1);
  CHECK(c == want);
}

#endif  // DP_HAVE_DNNL
