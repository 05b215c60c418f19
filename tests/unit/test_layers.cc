// Layer operators: Sigmoid, Tanh, StopGradient, SpatialBN, Dropout, Concat,
// Transpose, LabelCrossEntropy and their gradient ops.
//
// Forward results against straightforward references (computed in double or
// long double), static shape inference against what the kernels wrote (every
// net goes through RunOps), finite-difference checks of every gradient
// (float64), error reports (code and the blob named), and the gradient
// makers inside the AddGradients transform.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autodiff/add_gradients.h"
#include "ops/gradient_registry.h"
#include "ops/math/batchnorm.h"
#include "core/philox.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/net_validate.h"
#include "gradient_checker.h"
#include "op_test_util.h"
#include "ops/op_schema.h"

using namespace dp;
using namespace dp::testing;

namespace {

// ---- references ---------------------------------------------------------------------

// Y of Transpose: y[j] = x[i] with i[axes[k]] = j[k].
template <typename T>
std::vector<T> RefTranspose(const std::vector<T>& x, const Dims& in, const std::vector<int>& axes) {
  const size_t r = in.size();
  Dims out(r);
  for (size_t k = 0; k < r; ++k) out[k] = in[static_cast<size_t>(axes[k])];
  std::vector<T> y(x.size());
  std::vector<int64_t> j(r, 0);
  for (size_t flat = 0; flat < y.size(); ++flat) {
    // j: output multi-index of `flat`
    int64_t rem = static_cast<int64_t>(flat);
    for (size_t k = r; k-- > 0;) {
      j[k] = rem % out[k];
      rem /= out[k];
    }
    std::vector<int64_t> i(r);
    for (size_t k = 0; k < r; ++k) i[static_cast<size_t>(axes[k])] = j[k];
    int64_t off = 0;
    for (size_t k = 0; k < r; ++k) off = off * in[k] + i[k];
    y[flat] = x[static_cast<size_t>(off)];
  }
  return y;
}

// Y of Concat along `axis` by multi-indices.
template <typename T>
std::vector<T> RefConcat(const std::vector<std::vector<T>>& xs, const std::vector<Dims>& dims, size_t axis) {
  Dims out = dims[0];
  out[axis] = 0;
  for (const auto& d : dims) out[axis] += d[axis];
  std::vector<T> y(static_cast<size_t>(Prod(out)));
  const size_t r = out.size();
  for (size_t flat = 0; flat < y.size(); ++flat) {
    std::vector<int64_t> j(r);
    int64_t rem = static_cast<int64_t>(flat);
    for (size_t k = r; k-- > 0;) {
      j[k] = rem % out[k];
      rem /= out[k];
    }
    size_t piece = 0;
    while (j[axis] >= dims[piece][axis]) j[axis] -= dims[piece++][axis];
    int64_t off = 0;
    for (size_t k = 0; k < r; ++k) off = off * dims[piece][k] + j[k];
    y[flat] = xs[piece][static_cast<size_t>(off)];
  }
  return y;
}

// SpatialBN in long double, two-pass, for X viewed as [N, C, S].
struct BnRef {
  std::vector<double> y, mean, inv_std, running_mean, running_var;
};

BnRef RefSpatialBN(const std::vector<double>& x, int64_t n, int64_t c, int64_t s, const std::vector<double>& scale,
                   const std::vector<double>& bias, const std::vector<double>& rm, const std::vector<double>& rv,
                   double eps, double momentum, bool is_test) {
  BnRef r;
  r.y.resize(x.size());
  const long double count = static_cast<long double>(n * s);
  for (int64_t ch = 0; ch < c; ++ch) {
    auto at = [&](int64_t b, int64_t i) {
      return static_cast<long double>(x[static_cast<size_t>((b * c + ch) * s + i)]);
    };
    long double mean = 0, var = 0;
    if (is_test) {
      mean = rm[static_cast<size_t>(ch)];
      var = rv[static_cast<size_t>(ch)];
    } else {
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < s; ++i) mean += at(b, i);
      mean /= count;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < s; ++i) var += (at(b, i) - mean) * (at(b, i) - mean);
      var /= count;
    }
    const long double inv_std = 1.0L / std::sqrt(var + static_cast<long double>(eps));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i)
        r.y[static_cast<size_t>((b * c + ch) * s + i)] = static_cast<double>(
            (at(b, i) - mean) * inv_std * scale[static_cast<size_t>(ch)] + bias[static_cast<size_t>(ch)]);
    r.mean.push_back(static_cast<double>(mean));
    r.inv_std.push_back(static_cast<double>(inv_std));
    r.running_mean.push_back(momentum * rm[static_cast<size_t>(ch)] + (1 - momentum) * static_cast<double>(mean));
    r.running_var.push_back(momentum * rv[static_cast<size_t>(ch)] +
                            (1 - momentum) * static_cast<double>(var * count / (count - 1)));
  }
  return r;
}

OperatorDef BnOp(bool is_test = false, double momentum = 0.9, double eps = 1e-5) {
  std::vector<Argument> args{FloatArg("momentum", momentum), FloatArg("epsilon", eps)};
  if (is_test) {
    args.push_back(IntArg("is_test", 1));
    return Op("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y"}, std::move(args));
  }
  return Op("SpatialBN", {"x", "scale", "bias", "rm", "rv"}, {"y", "rm", "rv", "sm", "siv"}, std::move(args));
}

template <typename T>
Feeds BnFeeds(const Dims& xd, uint32_t seed, double lo = -2.0, double hi = 3.0) {
  const int64_t c = xd[1];
  return {{"x", Make<T>(xd, Random<T>(Prod(xd), seed, lo, hi))},
          {"scale", Make<T>({c}, Random<T>(c, seed + 1, 0.5, 2.0))},
          {"bias", Make<T>({c}, Random<T>(c, seed + 2))},
          {"rm", Make<T>({c}, Random<T>(c, seed + 3))},
          {"rv", Make<T>({c}, Random<T>(c, seed + 4, 0.5, 2.0))}};
}

const Tensor& FeedOf(const Feeds& f, const std::string& name) {
  for (const auto& [n, t] : f)
    if (n == name) return t;
  FAIL("no feed '", name, "'");
  static Tensor none;
  return none;
}

template <typename T>
std::vector<double> FeedValues(const Feeds& f, const std::string& name) {
  return ToDouble(Values<T>(FeedOf(f, name)));
}

// Checks a training-mode SpatialBN run against the reference.
template <typename T>
void CheckBnTraining(const Dims& xd, uint32_t seed, double lo, double hi, double tol) {
  CAPTURE(DimsString(xd));
  Feeds f = BnFeeds<T>(xd, seed, lo, hi);
  const double momentum = 0.8, eps = 1e-4;
  auto ws = RunOp(BnOp(false, momentum, eps), f);
  const int64_t n = xd[0], c = xd[1], s = Prod(xd) / (n * c);
  BnRef r = RefSpatialBN(FeedValues<T>(f, "x"), n, c, s, FeedValues<T>(f, "scale"), FeedValues<T>(f, "bias"),
                         FeedValues<T>(f, "rm"), FeedValues<T>(f, "rv"), eps, momentum, false);
  CheckClose(Values<T>(ws->GetTensor("y")), r.y, tol);
  CheckClose(Values<T>(ws->GetTensor("sm")), r.mean, tol);
  CheckClose(Values<T>(ws->GetTensor("siv")), r.inv_std, tol);
  CheckClose(Values<T>(ws->GetTensor("rm")), r.running_mean, tol);
  CheckClose(Values<T>(ws->GetTensor("rv")), r.running_var, tol);
}

// ---- Dropout helpers ----------------------------------------------------------------

OperatorDef DropoutOp(double ratio, std::vector<Argument> extra = {}, std::string y = "y") {
  extra.push_back(FloatArg("ratio", ratio));
  return Op("Dropout", {"x"}, {std::move(y), "mask"}, std::move(extra));
}

// The masks of `runs` successive runs of one net.
std::vector<std::vector<uint8_t>> DropoutMasks(const OperatorDef& op, const Tensor& x, int runs) {
  Feeds f{{"x", x}};
  auto ws = std::make_shared<Workspace>();
  ws->Feed("x", x);
  Net net(std::make_shared<const NetDef>(MakeNet({op}, f)), ws);
  std::vector<std::vector<uint8_t>> masks;
  for (int i = 0; i < runs; ++i) {
    net.Run();
    masks.push_back(Values<uint8_t>(ws->GetTensor("mask")));
  }
  return masks;
}

double KeptFraction(const std::vector<uint8_t>& m) {
  int64_t kept = 0;
  for (uint8_t v : m) kept += v;
  return static_cast<double>(kept) / static_cast<double>(m.size());
}

}  // namespace

// ---- Sigmoid, Tanh ----------------------------------------------------------------------

TEST_CASE_TEMPLATE("Sigmoid and Tanh match std references, also for extreme inputs", T, float, double) {
  std::vector<T> xv = Random<T>(40, 11, -6.0, 6.0);
  xv.insert(xv.end(), {T(0), T(-800), T(800), T(-40), T(40), T(1e-8)});
  const Dims d{2, 23};
  Feeds f{{"x", Make<T>(d, xv)}};
  auto ws = RunOps({Op("Sigmoid", {"x"}, {"s"}), Op("Tanh", {"x"}, {"t"})}, f);
  std::vector<double> ws_ref, wt_ref;
  for (T v : xv) {
    const long double lv = v;
    ws_ref.push_back(static_cast<double>(1.0L / (1.0L + std::exp(-lv))));
    wt_ref.push_back(static_cast<double>(std::tanh(lv)));
  }
  const std::vector<T> s = Values<T>(ws->GetTensor("s"));
  CheckClose(s, ws_ref, Tol<T>());
  CheckClose(Values<T>(ws->GetTensor("t")), wt_ref, Tol<T>());
  for (T v : s) CHECK(std::isfinite(static_cast<double>(v)));
  CHECK(s[41] == T(0));  // sigmoid(-800) underflows to 0, not NaN
  CHECK(s[42] == T(1));
}

TEST_CASE_TEMPLATE("Sigmoid and Tanh gradient ops, in place", T, float, double) {
  const Dims d{3, 5};
  std::vector<T> y = Random<T>(15, 3, -0.9, 0.9), dy = Random<T>(15, 4);
  Feeds f{{"y", Make<T>(d, y)}, {"dy", Make<T>(d, dy)}};
  auto ws = RunOps({Op("SigmoidGradient", {"y", "dy"}, {"ds"}), Op("TanhGradient", {"y", "dy"}, {"dt"})}, f);
  std::vector<double> ds, dt;
  for (size_t i = 0; i < y.size(); ++i) {
    ds.push_back(static_cast<double>(dy[i]) * y[i] * (1.0 - y[i]));
    dt.push_back(static_cast<double>(dy[i]) * (1.0 - static_cast<double>(y[i]) * y[i]));
  }
  CheckClose(Values<T>(ws->GetTensor("ds")), ds, Tol<T>());
  CheckClose(Values<T>(ws->GetTensor("dt")), dt, Tol<T>());
  // dX in place of dY, and the forward ops in place of X.
  auto ws2 = RunOps({Op("TanhGradient", {"y", "dy"}, {"dy"})}, f);
  CheckClose(Values<T>(ws2->GetTensor("dy")), dt, Tol<T>());
  auto ws3 = RunOps({Op("Sigmoid", {"y"}, {"y"}), Op("Tanh", {"dy"}, {"dy"})}, f);
  std::vector<double> sy, tdy;
  for (size_t i = 0; i < y.size(); ++i) {
    sy.push_back(1.0 / (1.0 + std::exp(-static_cast<double>(y[i]))));
    tdy.push_back(std::tanh(static_cast<double>(dy[i])));
  }
  CheckClose(Values<T>(ws3->GetTensor("y")), sy, Tol<T>());
  CheckClose(Values<T>(ws3->GetTensor("dy")), tdy, Tol<T>());
}

TEST_CASE("Sigmoid and Tanh: gradient checks") {
  for (const char* type : {"Sigmoid", "Tanh"}) {
    CAPTURE(type);
    GradFeeds f{{"x", Make<double>({3, 4, 2}, Random<double>(24, 5, -3.0, 3.0))}};
    CHECK(CheckGradient(Op(type, {"x"}, {"y"}), f) == 24);
  }
}

TEST_CASE("Sigmoid, Tanh and their gradients: errors name the blobs") {
  ExpectRunError({Op("Sigmoid", {"x"}, {"y"})}, {{"x", Make<int32_t>({2}, {1, 2})}}, Code::kDType,
                 {"op 0 (Sigmoid", "'x'", "int32"});
  Feeds f{{"y", Make<double>({2, 3}, Random<double>(6, 1))}, {"dy", Make<double>({3, 2}, Random<double>(6, 2))}};
  ExpectRunError({Op("TanhGradient", {"y", "dy"}, {"dx"})}, f, Code::kShape,
                 {"op 0 (TanhGradient", "'dy'", "[3, 2]", "'y'", "[2, 3]"});
  ExpectInferError({Op("TanhGradient", {"y", "dy"}, {"dx"})}, f, Code::kShape, {"'dy'", "'y'"});
  Feeds g{{"y", Make<double>({2}, {0.1, 0.2})}, {"dy", Make<float>({2}, {1, 2})}};
  ExpectRunError({Op("SigmoidGradient", {"y", "dy"}, {"dx"})}, g, Code::kDType,
                 {"op 0 (SigmoidGradient", "'dy'", "float32"});
  ExpectInferError({Op("SigmoidGradient", {"y", "dy"}, {"dx"})}, g, Code::kDType, {"'dy'", "float32"});
  // Y may not be overwritten by dX (only dY may).
  ExpectError([&] { ValidateNet(MakeNet({Op("SigmoidGradient", {"y", "dy"}, {"y"})}, f)); }, Code::kInvalidNet,
              {"'y'", "cannot run in place"});
}

// ---- StopGradient --------------------------------------------------------------------------

TEST_CASE("StopGradient is an identity sharing storage and stops gradients") {
  Feeds f{{"x", Make<float>({2, 2}, {1, -2, 3, -4})}};
  auto ws = RunOp(Op("StopGradient", {"x"}, {"y"}), f);
  CHECK(Values<float>(ws->GetTensor("y")) == std::vector<float>{1, -2, 3, -4});
  CHECK(ws->GetTensor("y").storage() == ws->GetTensor("x").storage());
  auto ws2 = RunOp(Op("StopGradient", {"x"}, {"x"}), f);
  CHECK(Values<float>(ws2->GetTensor("x")) == std::vector<float>{1, -2, 3, -4});
  CHECK(GradientRegistry::Kind("StopGradient") == GradientKind::kStop);
  for (const char* t : {"Sigmoid", "Tanh", "SpatialBN", "Dropout", "Concat", "Transpose", "LabelCrossEntropy"})
    CHECK_MESSAGE(GradientRegistry::Kind(t) == GradientKind::kMaker, t);

  // Through StopGradient, the loss does not depend on x.
  NetDef net = MakeNet({Op("StopGradient", {"x"}, {"s"}), Op("Sigmoid", {"s"}, {"loss"})}, f);
  GradientOptions opt;
  opt.losses = {"loss"};
  opt.wrt = {"x"};
  ExpectError([&] { AddGradients(net, opt); }, Code::kInvalidNet, {"StopGradient"});
}

// ---- SpatialBN --------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("SpatialBN training: Y, saved statistics and running statistics", T, float, double) {
  CheckBnTraining<T>({2, 3, 4, 5}, 21, -2.0, 3.0, Tol<T>() * 10);
  CheckBnTraining<T>({7, 4}, 22, -2.0, 3.0, Tol<T>() * 10);
  CheckBnTraining<T>({3, 2, 5}, 23, -2.0, 3.0, Tol<T>() * 10);   // [N, C, L]
  CheckBnTraining<T>({2, 2, 3, 2, 2}, 24, -1.0, 1.0, Tol<T>() * 10);  // [N, C, D, H, W]
}

TEST_CASE("SpatialBN statistics keep their precision for a large mean (two-pass in double)") {
  // A mean of 1e8 with unit spread: E[x^2] - E[x]^2 in double would lose the
  // variance entirely (x^2 ~ 1e16 has a spacing of 2).
  CheckBnTraining<double>({16, 3, 4, 4}, 31, 1e8 - 1.0, 1e8 + 1.0, 3e-7);
  // float32 data with mean 1e3: accumulation in float would drift.
  CheckBnTraining<float>({32, 2, 8, 8}, 32, 999.0, 1001.0, 2e-4);
}

TEST_CASE_TEMPLATE("SpatialBN is_test normalises with the running statistics", T, float, double) {
  const Dims xd{3, 4, 2, 3};
  Feeds f = BnFeeds<T>(xd, 41);
  auto ws = RunOp(BnOp(true, 0.9, 1e-3), f);
  BnRef r = RefSpatialBN(FeedValues<T>(f, "x"), 3, 4, 6, FeedValues<T>(f, "scale"), FeedValues<T>(f, "bias"),
                         FeedValues<T>(f, "rm"), FeedValues<T>(f, "rv"), 1e-3, 0.9, true);
  CheckClose(Values<T>(ws->GetTensor("y")), r.y, Tol<T>() * 10);
  // The running statistics are untouched.
  CHECK(Values<T>(ws->GetTensor("rm")) == Values<T>(FeedOf(f, "rm")));
  CHECK(Values<T>(ws->GetTensor("rv")) == Values<T>(FeedOf(f, "rv")));
  // In place of X.
  OperatorDef inplace = BnOp(true, 0.9, 1e-3);
  inplace.outputs = {"x"};
  auto ws2 = RunOp(inplace, f);
  CheckClose(Values<T>(ws2->GetTensor("x")), r.y, Tol<T>() * 10);
}

TEST_CASE("SpatialBN running statistics accumulate over runs; Y may replace X") {
  const Dims xd{4, 3, 2, 2};
  Feeds f = BnFeeds<double>(xd, 51);
  auto ws = std::make_shared<Workspace>();
  for (const auto& [n, t] : f) FeedOwned(*ws, n, t);
  Net net(std::make_shared<const NetDef>(MakeNet({BnOp(false, 0.7)}, f)), ws);
  std::vector<double> rm = FeedValues<double>(f, "rm"), rv = FeedValues<double>(f, "rv");
  for (int run = 0; run < 3; ++run) {
    CAPTURE(run);
    std::vector<double> x = Random<double>(48, 60 + static_cast<uint32_t>(run));
    ws->Feed("x", Make<double>(xd, x));
    net.Run();
    BnRef r = RefSpatialBN(x, 4, 3, 4, FeedValues<double>(f, "scale"), FeedValues<double>(f, "bias"), rm, rv, 1e-5,
                           0.7, false);
    CheckClose(Values<double>(ws->GetTensor("rm")), r.running_mean, 1e-12);
    CheckClose(Values<double>(ws->GetTensor("rv")), r.running_var, 1e-12);
    CheckClose(Values<double>(ws->GetTensor("y")), r.y, 1e-12);
    rm = r.running_mean;
    rv = r.running_var;
  }
  OperatorDef inplace = BnOp();
  inplace.outputs[0] = "x";
  auto ws2 = RunOp(inplace, f);
  BnRef r = RefSpatialBN(FeedValues<double>(f, "x"), 4, 3, 4, FeedValues<double>(f, "scale"),
                         FeedValues<double>(f, "bias"), FeedValues<double>(f, "rm"), FeedValues<double>(f, "rv"), 1e-5,
                         0.9, false);
  CheckClose(Values<double>(ws2->GetTensor("x")), r.y, 1e-12);
}

TEST_CASE_TEMPLATE("SpatialBNGradient matches the closed form", T, float, double) {
  const int64_t n = 3, c = 2, s = 4;
  const Dims xd{n, c, 2, 2};
  std::vector<T> x = Random<T>(24, 71), dy = Random<T>(24, 72), scale = Random<T>(2, 73, 0.5, 2.0);
  // saved statistics from the forward op
  Feeds ff = BnFeeds<T>(xd, 74);
  ff[0].second = Make<T>(xd, x);
  ff[1].second = Make<T>({c}, scale);
  auto fw = RunOp(BnOp(), ff);
  Feeds f{{"x", Make<T>(xd, x)},
          {"scale", Make<T>({c}, scale)},
          {"dy", Make<T>(xd, dy)},
          {"sm", fw->GetTensor("sm")},
          {"siv", fw->GetTensor("siv")}};
  auto ws = RunOp(Op("SpatialBNGradient", {"x", "scale", "dy", "sm", "siv"}, {"dx", "dscale", "dbias"}), f);
  std::vector<double> dx(24), dscale(2), dbias(2);
  for (int64_t ch = 0; ch < c; ++ch) {
    long double mean = 0, var = 0;
    auto idx = [&](int64_t b, int64_t i) { return static_cast<size_t>((b * c + ch) * s + i); };
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i) mean += x[idx(b, i)];
    mean /= n * s;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i) var += (x[idx(b, i)] - mean) * (x[idx(b, i)] - mean);
    var /= n * s;
    const long double is = 1.0L / std::sqrt(var + 1e-5L);
    long double sdy = 0, sdyx = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i) {
        sdy += dy[idx(b, i)];
        sdyx += dy[idx(b, i)] * (x[idx(b, i)] - mean) * is;
      }
    dscale[static_cast<size_t>(ch)] = static_cast<double>(sdyx);
    dbias[static_cast<size_t>(ch)] = static_cast<double>(sdy);
    const long double m = n * s;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i)
        dx[idx(b, i)] = static_cast<double>(scale[static_cast<size_t>(ch)] * is *
                                            (dy[idx(b, i)] - sdy / m - (x[idx(b, i)] - mean) * is * sdyx / m));
  }
  CheckClose(Values<T>(ws->GetTensor("dx")), dx, Tol<T>() * 20);
  CheckClose(Values<T>(ws->GetTensor("dscale")), dscale, Tol<T>() * 20);
  CheckClose(Values<T>(ws->GetTensor("dbias")), dbias, Tol<T>() * 20);
  // dX in place of dY.
  auto ws2 = RunOp(Op("SpatialBNGradient", {"x", "scale", "dy", "sm", "siv"}, {"dy", "dscale", "dbias"}), f);
  CheckClose(Values<T>(ws2->GetTensor("dy")), dx, Tol<T>() * 20);
}

// The CUDA kernels index X through BnDims (the CPU kernels loop over n, c,
// s): element(ch, j) must visit each channel's values exactly once, and
// channel_of must invert it, for every layout including 1x1 spatial.
TEST_CASE("bn::BnDims: element and channel_of follow the [N, C, S] layout") {
  for (const bn::BnDims d : {bn::BnDims{3, 4, 5}, bn::BnDims{6, 2, 1}, bn::BnDims{1, 1, 7}, bn::BnDims{2, 3, 0}}) {
    CAPTURE(d.n);
    CAPTURE(d.c);
    CAPTURE(d.s);
    CHECK(d.count() == static_cast<double>(d.values_per_channel()));
    std::vector<int> seen(static_cast<size_t>(d.n * d.c * d.s), 0);
    for (int64_t ch = 0; ch < d.c; ++ch)
      for (int64_t j = 0; j < d.values_per_channel(); ++j) {
        const int64_t i = d.element(ch, j);
        REQUIRE(i >= 0);
        REQUIRE(i < d.n * d.c * d.s);
        CHECK(i == ((j / d.s) * d.c + ch) * d.s + j % d.s);
        CHECK(d.channel_of(i) == ch);
        ++seen[static_cast<size_t>(i)];
      }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
    const int64_t parts = bn::BnPartialsPerChannel(d);
    CHECK(parts >= 1);
    CHECK(parts <= 64);
    CHECK(bn::BnPartialsSize(d) == 2 * d.c * parts);
  }
}

TEST_CASE("SpatialBN: gradient checks of X, scale and bias (4-D and 2-D)") {
  for (const Dims& xd : {Dims{2, 3, 2, 2}, Dims{5, 3}, Dims{2, 2, 3}}) {
    CAPTURE(DimsString(xd));
    Feeds f = BnFeeds<double>(xd, 81);
    GradCheckOptions opt;
    opt.inputs = {0, 1, 2};
    opt.outputs = {0};
    CHECK(CheckGradient(BnOp(), f, opt) == Prod(xd) + 2 * xd[1]);
  }
  // Only X wanted: the maker sends dscale and dbias to scratch blobs.
  Feeds f = BnFeeds<double>({3, 2, 2}, 82);
  GradCheckOptions opt;
  opt.inputs = {0};
  opt.outputs = {0};
  CHECK(CheckGradient(BnOp(), f, opt) == 12);
  opt.inputs = {1};  // only scale
  CHECK(CheckGradient(BnOp(), f, opt) == 2);
}

TEST_CASE("SpatialBN: errors name the blobs") {
  Feeds ok = BnFeeds<float>({2, 3, 2, 2}, 91);
  auto with = [&](const std::string& name, Tensor t) {
    Feeds f = ok;
    for (auto& [n, v] : f)
      if (n == name) v = std::move(t);
    return f;
  };
  Feeds bad_scale = with("scale", Make<float>({4}, {1, 1, 1, 1}));
  ExpectRunError({BnOp()}, bad_scale, Code::kShape, {"op 0 (SpatialBN", "'scale'", "[4]", "C = 3"});
  ExpectInferError({BnOp()}, bad_scale, Code::kShape, {"op 0 (SpatialBN", "'scale'", "C = 3"});
  Feeds bad_rv = with("rv", Make<double>({3}, {1, 1, 1}));
  ExpectRunError({BnOp()}, bad_rv, Code::kDType, {"op 0 (SpatialBN", "'rv'", "float64", "'x'"});
  ExpectInferError({BnOp()}, bad_rv, Code::kDType, {"'rv'", "float64"});
  Feeds one_d = with("x", Make<float>({3}, {1, 2, 3}));
  ExpectRunError({BnOp()}, one_d, Code::kShape, {"op 0 (SpatialBN", "'x'", "[N, C]"});
  ExpectInferError({BnOp()}, one_d, Code::kShape, {"'x'", "[N, C]"});
  Feeds ints = with("x", Make<int32_t>({1, 3}, {1, 2, 3}));
  ExpectRunError({BnOp()}, ints, Code::kDType, {"op 0 (SpatialBN", "'x'", "int32"});
  // One value per channel cannot be normalised in training (is_test can).
  Feeds single = with("x", Make<float>({1, 3}, {1, 2, 3}));
  ExpectRunError({BnOp()}, single, Code::kShape, {"op 0 (SpatialBN", "'x'", "more than one value per channel"});
  RunOp(BnOp(true), single);
  // Output counts per mode.
  OperatorDef train1 = BnOp(true);
  train1.args = {};
  ExpectRunError({train1}, ok, Code::kInvalidArgument, {"op 0 (SpatialBN", "5 outputs"});
  ExpectInferError({train1}, ok, Code::kInvalidArgument, {"5 outputs"});
  OperatorDef test5 = BnOp();
  test5.args.push_back(IntArg("is_test", 1));
  ExpectRunError({test5}, ok, Code::kInvalidArgument, {"op 0 (SpatialBN", "is_test=1", "1 output"});
  OperatorDef bad_momentum = BnOp(false, 1.5);
  ExpectRunError({bad_momentum}, ok, Code::kInvalidArgument, {"op 0 (SpatialBN", "'momentum'"});
  // The running statistics must be updated in place.
  OperatorDef not_inplace = BnOp();
  not_inplace.outputs[1] = "rm_new";
  ExpectError([&] { ValidateNet(MakeNet({not_inplace}, ok)); }, Code::kInvalidNet,
              {"running_mean", "in place", "'rm'", "'rm_new'"});
  // Gradient op.
  Feeds g{{"x", Make<double>({2, 3}, Random<double>(6, 1))},
          {"scale", Make<double>({3}, {1, 1, 1})},
          {"dy", Make<double>({2, 2}, Random<double>(4, 2))},
          {"sm", Make<double>({3}, {0, 0, 0})},
          {"siv", Make<double>({3}, {1, 1, 1})}};
  OperatorDef gop = Op("SpatialBNGradient", {"x", "scale", "dy", "sm", "siv"}, {"dx", "ds", "db"});
  ExpectRunError({gop}, g, Code::kShape, {"op 0 (SpatialBNGradient", "'dy'", "[2, 2]", "'x'"});
  ExpectInferError({gop}, g, Code::kShape, {"'dy'", "'x'"});
  g[2].second = Make<double>({2, 3}, Random<double>(6, 2));
  g[4].second = Make<double>({2}, {1, 1});
  ExpectRunError({gop}, g, Code::kShape, {"op 0 (SpatialBNGradient", "'siv'", "C = 3"});
  // A test-mode SpatialBN has no gradient.
  GradientOptions opt;
  opt.losses = {"y"};
  opt.wrt = {"x"};
  ExpectError([&] { AddGradients(MakeNet({BnOp(true)}, ok), opt); }, Code::kInvalidNet, {"SpatialBN", "is_test=0"});
}

// ---- Dropout -----------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("Dropout keeps about 1 - ratio of the elements and scales them", T, float, double) {
  const int64_t n = 20000;
  for (double ratio : {0.3, 0.75}) {
    CAPTURE(ratio);
    std::vector<T> xv = Random<T>(n, 5, 0.5, 2.0);
    Feeds f{{"x", Make<T>({100, 200}, xv)}};
    auto ws = RunOp(DropoutOp(ratio, {IntArg("seed", 9)}), f);
    const std::vector<uint8_t> mask = Values<uint8_t>(ws->GetTensor("mask"));
    const std::vector<T> y = Values<T>(ws->GetTensor("y"));
    CHECK(ws->GetTensor("mask").dims() == Dims{100, 200});
    const double sigma = std::sqrt(ratio * (1 - ratio) / static_cast<double>(n));
    CHECK(std::abs(KeptFraction(mask) - (1 - ratio)) < 5 * sigma);
    std::vector<double> want;
    bool binary = true;
    for (size_t i = 0; i < xv.size(); ++i) {
      binary = binary && (mask[i] == 0 || mask[i] == 1);
      want.push_back(mask[i] ? static_cast<double>(xv[i]) / (1 - ratio) : 0.0);
    }
    CHECK(binary);
    CheckClose(y, want, Tol<T>());
    // In place of X gives the same result.
    auto ws2 = RunOp(Op("Dropout", {"x"}, {"x", "mask"}, {FloatArg("ratio", ratio), IntArg("seed", 9)}), f);
    CHECK(Values<T>(ws2->GetTensor("x")) == y);
  }
}

TEST_CASE("Dropout masks: reproducible across fresh nets, new for every run, per seed") {
  Tensor x = Make<double>({64, 32}, Random<double>(2048, 7));
  OperatorDef op = DropoutOp(0.5, {IntArg("seed", 1234)});
  auto a = DropoutMasks(op, x, 3);
  auto b = DropoutMasks(op, x, 3);
  CHECK(a == b);  // a fresh net with the same seed: the same sequence
  CHECK(a[0] != a[1]);
  CHECK(a[1] != a[2]);
  for (const auto& m : a) CHECK(std::abs(KeptFraction(m) - 0.5) < 0.06);
  auto c = DropoutMasks(DropoutOp(0.5, {IntArg("seed", 1235)}), x, 1);
  CHECK(c[0] != a[0]);
  // Without a seed: derived from the output name.
  auto d1 = DropoutMasks(DropoutOp(0.5), x, 2);
  auto d2 = DropoutMasks(DropoutOp(0.5), x, 2);
  auto e = DropoutMasks(DropoutOp(0.5, {}, "other"), x, 1);
  CHECK(d1 == d2);
  CHECK(e[0] != d1[0]);
}

// The mask of run k is a function of (seed, k): element i is kept when word
// i of the Philox stream (seed, k) is at least the ratio as a 24-bit uniform
// (what the CUDA kernel draws too). Without a counter, run r uses k = r.
TEST_CASE("Dropout masks are Philox words of (seed, counter)") {
  const int64_t seed = 77;
  const double ratio = 0.4;
  Tensor x = Make<float>({3, 11}, Random<float>(33, 8));  // 33: a last Philox block of one element
  const uint32_t threshold = philox::UniformThreshold(ratio);
  auto want = [&](uint64_t k) {
    std::vector<uint8_t> m;
    for (uint64_t i = 0; i < 33; ++i) m.push_back((philox::StreamWord(seed, k, i) >> 8) >= threshold ? 1 : 0);
    return m;
  };
  for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{1} << 40, int64_t{-3}}) {
    CAPTURE(k);
    Feeds f{{"x", x}, {"it", Make<int64_t>({1}, {k})}};
    auto ws = RunOp(Op("Dropout", {"x", "it"}, {"y", "mask"}, {FloatArg("ratio", ratio), IntArg("seed", seed)}), f);
    CHECK(Values<uint8_t>(ws->GetTensor("mask")) == want(static_cast<uint64_t>(k)));
  }
  const auto runs = DropoutMasks(DropoutOp(ratio, {IntArg("seed", seed)}), x, 3);
  for (uint64_t r = 0; r < 3; ++r) CHECK(runs[r] == want(r));
}

TEST_CASE_TEMPLATE("Dropout is_test and ratio 0 are identities", T, float, double) {
  std::vector<T> xv = Random<T>(12, 3);
  Feeds f{{"x", Make<T>({3, 4}, xv)}};
  auto ws = RunOp(Op("Dropout", {"x"}, {"y"}, {IntArg("is_test", 1), FloatArg("ratio", 0.9)}), f);
  CHECK(Values<T>(ws->GetTensor("y")) == xv);
  CHECK(ws->GetTensor("y").storage() == ws->GetTensor("x").storage());  // no copy
  auto ws2 = RunOp(DropoutOp(0.9, {IntArg("is_test", 1)}), f);
  CHECK(Values<T>(ws2->GetTensor("y")) == xv);
  CHECK(Values<uint8_t>(ws2->GetTensor("mask")) == std::vector<uint8_t>(12, 1));
  auto ws3 = RunOp(DropoutOp(0.0), f);
  CHECK(Values<T>(ws3->GetTensor("y")) == xv);
  CHECK(Values<uint8_t>(ws3->GetTensor("mask")) == std::vector<uint8_t>(12, 1));
}

TEST_CASE_TEMPLATE("DropoutGradient scales by the mask", T, float, double) {
  std::vector<T> dy = Random<T>(6, 4);
  std::vector<uint8_t> mask{1, 0, 0, 1, 1, 0};
  Feeds f{{"dy", Make<T>({2, 3}, dy)}, {"mask", Make<uint8_t>({2, 3}, mask)}};
  auto ws = RunOp(Op("DropoutGradient", {"dy", "mask"}, {"dx"}, {FloatArg("ratio", 0.2)}), f);
  std::vector<double> want;
  for (size_t i = 0; i < dy.size(); ++i) want.push_back(mask[i] ? dy[i] / 0.8 : 0.0);
  CheckClose(Values<T>(ws->GetTensor("dx")), want, Tol<T>());
  auto ws2 = RunOp(Op("DropoutGradient", {"dy", "mask"}, {"dy"}, {FloatArg("ratio", 0.2)}), f);
  CheckClose(Values<T>(ws2->GetTensor("dy")), want, Tol<T>());
  auto ws3 = RunOp(Op("DropoutGradient", {"dy"}, {"dx"}, {FloatArg("ratio", 0.2), IntArg("is_test", 1)}), f);
  CHECK(Values<T>(ws3->GetTensor("dx")) == dy);
}

TEST_CASE("Dropout: gradient checks (fresh net per evaluation, training and is_test)") {
  GradFeeds f{{"x", Make<double>({4, 6}, Random<double>(24, 8))}};
  GradCheckOptions opt;
  opt.fresh_net_per_eval = true;
  CHECK(CheckGradient(DropoutOp(0.4, {IntArg("seed", 77)}), f, opt) == 24);
  CHECK(CheckGradient(Op("Dropout", {"x"}, {"y"}, {IntArg("is_test", 1)}), f, opt) == 24);
}

TEST_CASE("Dropout: errors") {
  Feeds f{{"x", Make<float>({2, 2}, {1, 2, 3, 4})}};
  for (double ratio : {1.0, -0.1, 1.5}) {
    CAPTURE(ratio);
    ExpectRunError({DropoutOp(ratio)}, f, Code::kInvalidArgument, {"op 0 (Dropout", "'ratio'", "[0, 1)"});
    ExpectInferError({DropoutOp(ratio)}, f, Code::kInvalidArgument, {"op 0 (Dropout", "'ratio'"});
  }
  ExpectRunError({Op("Dropout", {"x"}, {"y"})}, f, Code::kInvalidArgument, {"op 0 (Dropout", "'mask'", "is_test"});
  ExpectInferError({Op("Dropout", {"x"}, {"y"})}, f, Code::kInvalidArgument, {"'mask'"});
  ExpectRunError({DropoutOp(0.5)}, {{"x", Make<int32_t>({2}, {1, 2})}}, Code::kDType,
                 {"op 0 (Dropout", "'x'", "int32"});
  Feeds g{{"dy", Make<float>({2, 2}, {1, 2, 3, 4})}, {"mask", Make<float>({2, 2}, {1, 1, 1, 1})}};
  OperatorDef gop = Op("DropoutGradient", {"dy", "mask"}, {"dx"});
  ExpectRunError({gop}, g, Code::kDType, {"op 0 (DropoutGradient", "'mask'", "uint8"});
  ExpectInferError({gop}, g, Code::kDType, {"'mask'", "uint8"});
  g[1].second = Make<uint8_t>({4}, {1, 1, 1, 1});
  ExpectRunError({gop}, g, Code::kShape, {"op 0 (DropoutGradient", "'mask'", "[4]", "'dy'"});
  ExpectRunError({Op("DropoutGradient", {"dy"}, {"dx"})}, g, Code::kInvalidArgument, {"mask"});
}

const char* const kPieces[] = {"x0", "x1", "x2"};

// ---- Concat ---------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("Concat along every axis, with split_info", T, float, double, int32_t) {
  const Dims base{2, 3, 4};
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    CAPTURE(axis);
    const size_t a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    std::vector<Dims> dims(3, base);
    dims[0][a] = 1;
    dims[1][a] = 3;
    dims[2][a] = 2;
    std::vector<std::vector<T>> xs;
    Feeds f;
    for (size_t i = 0; i < 3; ++i) {
      xs.push_back(Random<T>(Prod(dims[i]), 200 + static_cast<uint32_t>(i), -50, 50));
      f.emplace_back(kPieces[i], Make<T>(dims[i], xs.back()));
    }
    auto ws = RunOp(Op("Concat", {"x0", "x1", "x2"}, {"y", "split"}, {IntArg("axis", axis)}), f);
    Dims want_dims = base;
    want_dims[a] = 6;
    CHECK(ws->GetTensor("y").dims() == want_dims);
    CHECK(Values<T>(ws->GetTensor("y")) == RefConcat(xs, dims, a));
    CHECK(Values<int64_t>(ws->GetTensor("split")) == std::vector<int64_t>{1, 3, 2});
  }
  // Default axis 1; a single input; an empty piece.
  Feeds f{{"a", Make<T>({2, 1}, {1, 2})}, {"b", Make<T>({2, 0}, {})}, {"c", Make<T>({2, 2}, {3, 4, 5, 6})}};
  auto ws = RunOp(Op("Concat", {"a", "b", "c"}, {"y"}), f);
  CHECK(Values<T>(ws->GetTensor("y")) == std::vector<T>{1, 3, 4, 2, 5, 6});
  auto ws1 = RunOp(Op("Concat", {"c"}, {"y"}), f);
  CHECK(Values<T>(ws1->GetTensor("y")) == std::vector<T>{3, 4, 5, 6});
}

TEST_CASE("ConcatGradient splits dY into the wanted pieces") {
  Feeds f{{"dy", Make<double>({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})},
          {"a", Make<double>({2, 1}, {0, 0})},
          {"b", Make<double>({2, 3}, Random<double>(6, 1))},
          {"c", Make<double>({2, 1}, {0, 0})}};
  auto ws = RunOp(Op("ConcatGradient", {"dy", "a", "b", "c"}, {"da", "db", "dc"}), f);
  CHECK(Values<double>(ws->GetTensor("da")) == std::vector<double>{0, 5});
  CHECK(Values<double>(ws->GetTensor("db")) == std::vector<double>{1, 2, 3, 6, 7, 8});
  CHECK(Values<double>(ws->GetTensor("dc")) == std::vector<double>{4, 9});
  auto ws2 =
      RunOp(Op("ConcatGradient", {"dy", "a", "b", "c"}, {"dc", "da"}, {IntsArg("grad_indices", {2, 0})}), f);
  CHECK(Values<double>(ws2->GetTensor("dc")) == std::vector<double>{4, 9});
  CHECK(Values<double>(ws2->GetTensor("da")) == std::vector<double>{0, 5});
  CHECK(!ws2->HasBlob("db"));
}

TEST_CASE("Concat: gradient checks along several axes, 3 inputs, some not wanted") {
  for (int64_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    const size_t a = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    GradFeeds f;
    int64_t total = 0;
    for (int i = 0; i < 3; ++i) {
      Dims d{2, 3, 2};
      d[a] = i + 1;
      total += Prod(d);
      f.emplace_back(kPieces[i], Make<double>(d, Random<double>(Prod(d), 300 + static_cast<uint32_t>(i))));
    }
    OperatorDef op = Op("Concat", {"x0", "x1", "x2"}, {"y", "split"}, {IntArg("axis", axis)});
    CHECK(CheckGradient(op, f) == total);
    GradCheckOptions opt;
    opt.inputs = {2, 0};
    CHECK(CheckGradient(op, f, opt) == total - Prod(FeedOf(f, "x1").dims()));
  }
}

TEST_CASE("Concat: errors name the blobs") {
  Feeds f{{"a", Make<float>({2, 3}, Random<float>(6, 1))}, {"b", Make<float>({3, 3}, Random<float>(9, 2))}};
  OperatorDef op = Op("Concat", {"a", "b"}, {"y"});  // axis 1: dim 0 differs
  ExpectRunError({op}, f, Code::kShape, {"op 0 (Concat", "'b'", "[3, 3]", "'a'", "axis 1"});
  ExpectInferError({op}, f, Code::kShape, {"op 0 (Concat", "'b'", "'a'"});
  RunOp(Op("Concat", {"a", "b"}, {"y"}, {IntArg("axis", 0)}), f);
  Feeds g{{"a", Make<float>({2, 3}, Random<float>(6, 1))}, {"b", Make<double>({2, 3}, Random<double>(6, 2))}};
  ExpectRunError({op}, g, Code::kDType, {"op 0 (Concat", "'b'", "float64"});
  ExpectInferError({op}, g, Code::kDType, {"'b'", "float64"});
  Feeds r{{"a", Make<float>({2, 3}, Random<float>(6, 1))}, {"b", Make<float>({2, 3, 1}, Random<float>(6, 2))}};
  ExpectRunError({op}, r, Code::kShape, {"op 0 (Concat", "'b'", "[2, 3, 1]"});
  OperatorDef far = Op("Concat", {"a", "b"}, {"y"}, {IntArg("axis", 2)});
  ExpectRunError({far}, f, Code::kOutOfRange, {"op 0 (Concat", "'a'", "axis 2"});
  ExpectInferError({far}, f, Code::kOutOfRange, {"op 0 (Concat", "'a'", "axis 2"});
  // Gradient op.
  Feeds h{{"dy", Make<float>({2, 5}, Random<float>(10, 3))}, {"a", Make<float>({2, 3}, Random<float>(6, 1))},
          {"b", Make<float>({2, 3}, Random<float>(6, 2))}};
  OperatorDef gop = Op("ConcatGradient", {"dy", "a", "b"}, {"da", "db"});
  ExpectRunError({gop}, h, Code::kShape, {"op 0 (ConcatGradient", "'dy'", "[2, 5]", "[2, 6]"});
  ExpectInferError({gop}, h, Code::kShape, {"'dy'", "[2, 6]"});
  ExpectRunError({Op("ConcatGradient", {"dy", "a", "b"}, {"da"})}, h, Code::kInvalidArgument, {"'grad_indices'"});
  ExpectRunError({Op("ConcatGradient", {"dy", "a", "b"}, {"da"}, {IntsArg("grad_indices", {2})})}, h,
                 Code::kOutOfRange, {"'grad_indices'", "2"});
  ExpectRunError({Op("ConcatGradient", {"dy", "a", "b"}, {"da", "db"}, {IntsArg("grad_indices", {1, 1})})}, h,
                 Code::kInvalidArgument, {"'grad_indices'", "twice"});
}

// ---- Transpose ------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("Transpose permutes dims", T, float, double, int64_t, uint8_t) {
  struct Case {
    Dims in;
    std::vector<int64_t> axes;  // empty: default
    std::vector<int> canonical;
  };
  for (const Case& c : {Case{{2, 3}, {}, {1, 0}}, Case{{2, 3, 4}, {}, {2, 1, 0}}, Case{{2, 3, 4}, {1, 2, 0}, {1, 2, 0}},
                        Case{{2, 3, 4}, {0, -1, 1}, {0, 2, 1}}, Case{{2, 3, 4, 5}, {0, 3, 1, 2}, {0, 3, 1, 2}},
                        Case{{2, 1, 3, 2, 2}, {4, 2, 0, 3, 1}, {4, 2, 0, 3, 1}}, Case{{5}, {}, {0}},
                        Case{{3, 0, 2}, {2, 0, 1}, {2, 0, 1}}}) {
    CAPTURE(DimsString(c.in));
    std::vector<T> xv = Random<T>(Prod(c.in), 17, 0, 100);
    Feeds f{{"x", Make<T>(c.in, xv)}};
    std::vector<Argument> args;
    if (!c.axes.empty()) args.push_back(IntsArg("axes", c.axes));
    auto ws = RunOp(Op("Transpose", {"x"}, {"y"}, args), f);
    Dims want;
    for (int a : c.canonical) want.push_back(c.in[static_cast<size_t>(a)]);
    CHECK(ws->GetTensor("y").dims() == want);
    CHECK(Values<T>(ws->GetTensor("y")) == RefTranspose(xv, c.in, c.canonical));
  }
}

TEST_CASE("Transpose: gradient checks (the inverse permutation)") {
  GradFeeds f3{{"x", Make<double>({2, 3, 4}, Random<double>(24, 41))}};
  CHECK(CheckGradient(Op("Transpose", {"x"}, {"y"}, {IntsArg("axes", {1, 2, 0})}), f3) == 24);
  CHECK(CheckGradient(Op("Transpose", {"x"}, {"y"}, {IntsArg("axes", {-1, 0, 1})}), f3) == 24);
  CHECK(CheckGradient(Op("Transpose", {"x"}, {"y"}), f3) == 24);
  GradFeeds f4{{"x", Make<double>({2, 3, 2, 2}, Random<double>(24, 42))}};
  CHECK(CheckGradient(Op("Transpose", {"x"}, {"y"}, {IntsArg("axes", {3, 0, 1, 2})}), f4) == 24);
}

TEST_CASE("Transpose: errors") {
  Feeds f{{"x", Make<float>({2, 3}, Random<float>(6, 1))}};
  auto op = [](std::vector<int64_t> axes) { return Op("Transpose", {"x"}, {"y"}, {IntsArg("axes", std::move(axes))}); };
  ExpectRunError({op({0, 1, 2})}, f, Code::kShape, {"op 0 (Transpose", "'axes'", "3 entries", "'x'", "[2, 3]"});
  ExpectInferError({op({0, 1, 2})}, f, Code::kShape, {"op 0 (Transpose", "'axes'", "'x'"});
  ExpectRunError({op({1, 1})}, f, Code::kInvalidArgument, {"op 0 (Transpose", "'axes'", "twice", "'x'"});
  ExpectInferError({op({0, -2})}, f, Code::kInvalidArgument, {"'axes'", "twice"});
  ExpectRunError({op({0, 2})}, f, Code::kOutOfRange, {"op 0 (Transpose", "'x'", "axis 2"});
  ExpectError([&] { ValidateNet(MakeNet({Op("Transpose", {"x"}, {"x"})}, f)); }, Code::kInvalidNet,
              {"cannot run in place"});
}

// ---- LabelCrossEntropy ------------------------------------------------------------------------

TEST_CASE_TEMPLATE("LabelCrossEntropy and its gradient against references", T, float, double) {
  const int64_t n = 4, d = 5;
  std::vector<T> x = Random<T>(n * d, 51, 0.05, 1.0);
  x[2 * d + 3] = T(0);  // clamped at 1e-20
  std::vector<int32_t> label{1, 4, 3, 0};
  std::vector<T> dy = Random<T>(n, 52);
  for (const Dims& ld : {Dims{n}, Dims{n, 1}}) {
    CAPTURE(DimsString(ld));
    Feeds f{{"x", Make<T>({n, d}, x)}, {"label", Make<int32_t>(ld, label)}, {"dy", Make<T>({n}, dy)}};
    auto ws = RunOps({Op("LabelCrossEntropy", {"x", "label"}, {"y"}),
                      Op("LabelCrossEntropyGradient", {"x", "label", "dy"}, {"dx"})},
                     f);
    std::vector<double> y, dx(static_cast<size_t>(n * d), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i * d + label[static_cast<size_t>(i)]);
      const double p = std::max(static_cast<double>(x[k]), 1e-20);
      y.push_back(-std::log(p));
      dx[k] = -static_cast<double>(dy[static_cast<size_t>(i)]) / std::max(static_cast<double>(x[k]), 1e-20);
    }
    CHECK(ws->GetTensor("y").dims() == Dims{n});
    CheckClose(Values<T>(ws->GetTensor("y")), y, Tol<T>());
    CHECK(std::abs(static_cast<double>(Values<T>(ws->GetTensor("y"))[2]) - 46.0517) < 1e-3);
    CheckClose(Values<T>(ws->GetTensor("dx")), dx, Tol<T>());  // about -1e20 * dy for the zero probability
    const std::vector<T> got = Values<T>(ws->GetTensor("dx"));
    for (size_t k = 0; k < got.size(); ++k)
      if (dx[k] == 0.0) CHECK(got[k] == T(0));
  }
}

TEST_CASE("LabelCrossEntropy: gradient check of X") {
  GradFeeds f{{"x", Make<double>({5, 4}, Random<double>(20, 61, 0.2, 1.0))},
              {"label", Make<int32_t>({5}, {0, 3, 2, 2, 1})}};
  CHECK(CheckGradient(Op("LabelCrossEntropy", {"x", "label"}, {"y"}), f) == 20);
}

TEST_CASE("LabelCrossEntropy: errors name the sample, the label and the blob") {
  Tensor x = Make<float>({3, 4}, Random<float>(12, 1, 0.1, 1.0));
  OperatorDef op = Op("LabelCrossEntropy", {"x", "label"}, {"y"});
  ExpectRunError({op}, {{"x", x}, {"label", Make<int32_t>({3}, {0, 4, 1})}}, Code::kOutOfRange,
                 {"op 0 (LabelCrossEntropy", "'label'", "label 4", "sample 1", "[0, 4)"});
  ExpectRunError({op}, {{"x", x}, {"label", Make<int32_t>({3}, {0, 1, -1})}}, Code::kOutOfRange,
                 {"'label'", "label -1", "sample 2"});
  Feeds i64{{"x", x}, {"label", Make<int64_t>({3}, {0, 1, 1})}};
  ExpectRunError({op}, i64, Code::kDType, {"op 0 (LabelCrossEntropy", "'label'", "int64"});
  ExpectInferError({op}, i64, Code::kDType, {"'label'", "int64"});
  Feeds short_label{{"x", x}, {"label", Make<int32_t>({2}, {0, 1})}};
  ExpectRunError({op}, short_label, Code::kShape, {"op 0 (LabelCrossEntropy", "'label'", "[2]", "N = 3"});
  ExpectInferError({op}, short_label, Code::kShape, {"'label'", "N = 3"});
  Feeds flat{{"x", Make<float>({4}, {0.1f, 0.2f, 0.3f, 0.4f})}, {"label", Make<int32_t>({4}, {0, 1, 1, 0})}};
  ExpectRunError({op}, flat, Code::kShape, {"op 0 (LabelCrossEntropy", "'x'", "2-D"});
  Feeds g{{"x", x}, {"label", Make<int32_t>({3}, {0, 1, 5})}, {"dy", Make<float>({3}, {1, 1, 1})}};
  OperatorDef gop = Op("LabelCrossEntropyGradient", {"x", "label", "dy"}, {"dx"});
  ExpectRunError({gop}, g, Code::kOutOfRange, {"op 0 (LabelCrossEntropyGradient", "label 5", "sample 2"});
  g[1].second = Make<int32_t>({3}, {0, 1, 2});
  g[2].second = Make<float>({4}, {1, 1, 1, 1});
  ExpectRunError({gop}, g, Code::kShape, {"op 0 (LabelCrossEntropyGradient", "'dy'", "[4]"});
  ExpectInferError({gop}, g, Code::kShape, {"'dy'", "[4]"});
}

// ---- the makers inside AddGradients ----------------------------------------------------------

namespace {

std::shared_ptr<Workspace> RunNet(const NetDef& def, const Feeds& feeds) {
  auto ws = std::make_shared<Workspace>();
  for (const auto& [n, t] : feeds) FeedOwned(*ws, n, t);
  Net(std::make_shared<const NetDef>(def), ws).Run();
  return ws;
}

// AddGradients over `net` against central differences of the sum of every
// loss element (each run in a fresh net, so Dropout masks repeat).
void CheckNetGradients(const NetDef& net, const Feeds& f, const GradientOptions& opt) {
  GradientResult g = AddGradients(net, opt);
  auto ws = RunNet(g.net, f);
  auto total = [&](const Feeds& feeds) {
    auto w = RunNet(net, feeds);
    double s = 0;
    for (const auto& loss : opt.losses)
      for (double v : Values<double>(w->GetTensor(loss))) s += v;
    return s;
  };
  for (const auto& name : opt.wrt) {
    CAPTURE(name);
    const std::vector<double> grad = Values<double>(ws->GetTensor(GradientName(name)));
    const std::vector<double> x = Values<double>(FeedOf(f, name));
    REQUIRE(grad.size() == x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      Feeds fp = f, fm = f;
      for (auto* feeds : {&fp, &fm})
        for (auto& [n, t] : *feeds)
          if (n == name) {
            t = Make<double>(t.dims(), x);
            t.mutable_data<double>()[k] += feeds == &fp ? 1e-6 : -1e-6;
          }
      const double numeric = (total(fp) - total(fm)) / 2e-6;
      CHECK_MESSAGE(std::abs(numeric - grad[k]) <= 1e-6 + 1e-5 * std::abs(numeric), "element ", k, ": numeric ",
                    numeric, ", analytic ", grad[k]);
    }
  }
}

}  // namespace

TEST_CASE("Layer gradients compose through AddGradients") {
  // loss = LabelCrossEntropy(Sigmoid(Transpose(Concat(Tanh(a), Dropout(b)))), label).
  Feeds f{{"a", Make<double>({2, 3}, Random<double>(6, 91))},
          {"b", Make<double>({1, 3}, Random<double>(3, 92))},
          {"label", Make<int32_t>({3}, {0, 2, 1})}};
  OperatorDef drop = DropoutOp(0.3, {IntArg("seed", 5)}, "db");
  drop.inputs = {"b"};
  NetDef net = MakeNet({Op("Tanh", {"a"}, {"ta"}), drop, Op("Concat", {"ta", "db"}, {"c"}, {IntArg("axis", 0)}),
                        Op("Transpose", {"c"}, {"t"}), Op("Sigmoid", {"t"}, {"p"}),
                        Op("LabelCrossEntropy", {"p", "label"}, {"loss"})},
                       f);
  GradientOptions opt;
  opt.losses = {"loss"};
  opt.wrt = {"a", "b"};
  CheckNetGradients(net, f, opt);
  opt.wrt = {"b"};  // Concat's gradient then writes only the second piece
  CheckNetGradients(net, f, opt);
}

TEST_CASE("SpatialBN gradients through AddGradients; none for the running statistics") {
  const Dims xd{3, 2, 2};
  Feeds f = BnFeeds<double>(xd, 101);
  NetDef net = MakeNet({BnOp(), Op("Sigmoid", {"y"}, {"p"})}, f);
  GradientOptions opt;
  opt.losses = {"p"};
  opt.wrt = {"x", "bias"};  // dscale goes to a scratch blob
  CheckNetGradients(net, f, opt);
  opt.wrt = {"scale"};
  CheckNetGradients(net, f, opt);
  opt.wrt = {"rm"};
  ExpectError([&] { AddGradients(net, opt); }, Code::kInvalidNet, {"input 3", "'rm'"});
}
