// CPU operators: results against straightforward reference computations,
// in-place runs, copy-on-write of fetched and caller-owned tensors, error
// reports, static shape inference against what the kernels produce, and
// schema validation.
//
// Every net is run through RunOps, which also runs InferNetShapes on the same
// definition and checks each output's inferred dims and dtype against the
// tensor the kernel wrote.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/parallel_for.h"
#include "core/philox.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/net_validate.h"
#include "ops/op_schema.h"
#include "ops/op_utils.h"
#include "ops/operator.h"
#include "op_test_util.h"

using namespace dp;
using namespace dp::testing;

namespace {

// ---- references ---------------------------------------------------------------

template <typename T>
std::vector<double> RefFc(const std::vector<T>& x, const std::vector<T>& w, const std::vector<T>& b, int64_t m,
                          int64_t k, int64_t n) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = static_cast<double>(b[static_cast<size_t>(j)]);
      for (int64_t kk = 0; kk < k; ++kk)
        acc += static_cast<double>(x[static_cast<size_t>(i * k + kk)]) * static_cast<double>(w[static_cast<size_t>(j * k + kk)]);
      y[static_cast<size_t>(i * n + j)] = acc;
    }
  return y;
}

// exp(x) / sum(exp(x)) per row, in long double with the row maximum
// subtracted (exact algebraically; keeps large logits finite).
template <typename T>
std::vector<double> RefSoftmax(const std::vector<T>& x, int64_t rows, int64_t cols) {
  std::vector<double> p(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    long double mx = -std::numeric_limits<long double>::infinity();
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, static_cast<long double>(x[static_cast<size_t>(r * cols + c)]));
    long double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<long double>(x[static_cast<size_t>(r * cols + c)]) - mx);
    for (int64_t c = 0; c < cols; ++c)
      p[static_cast<size_t>(r * cols + c)] =
          static_cast<double>(std::exp(static_cast<long double>(x[static_cast<size_t>(r * cols + c)]) - mx) / sum);
  }
  return p;
}

// x - max - log(sum(exp(x - max))) per row, in long double.
template <typename T>
std::vector<double> RefLogSoftmax(const std::vector<T>& x, int64_t rows, int64_t cols) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x.data() + r * cols;
    long double mx = -std::numeric_limits<long double>::infinity();
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, static_cast<long double>(xr[c]));
    long double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<long double>(xr[c]) - mx);
    for (int64_t c = 0; c < cols; ++c)
      y[static_cast<size_t>(r * cols + c)] = static_cast<double>(static_cast<long double>(xr[c]) - mx - std::log(sum));
  }
  return y;
}

// Whether a and b hold the same bits (NaNs included).
template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Offset of output multi-index `idx` (of rank yd.size()) in an operand of
// dims `d`, aligned to the right, with size-1 dims broadcast.
int64_t BroadcastOffset(const std::vector<int64_t>& idx, const Dims& d) {
  int64_t off = 0;
  size_t lead = idx.size() - d.size();
  for (size_t k = 0; k < d.size(); ++k) off = off * d[k] + (d[k] == 1 ? 0 : idx[lead + k]);
  return off;
}

template <typename T, typename F>
std::vector<T> RefBinary(const std::vector<T>& a, const Dims& ad, const std::vector<T>& b, const Dims& bd,
                         const Dims& yd, F f) {
  std::vector<T> y(static_cast<size_t>(Prod(yd)));
  std::vector<int64_t> idx(yd.size());
  for (int64_t i = 0; i < Prod(yd); ++i) {
    int64_t rem = i;
    for (size_t d = yd.size(); d-- > 0;) {
      idx[d] = rem % yd[d];
      rem /= yd[d];
    }
    y[static_cast<size_t>(i)] =
        f(a[static_cast<size_t>(BroadcastOffset(idx, ad))], b[static_cast<size_t>(BroadcastOffset(idx, bd))]);
  }
  return y;
}

// Fraction of rows whose label is among the top k after a stable sort by
// descending score (ties: the lower index ranks first).
template <typename T>
float RefAccuracy(const std::vector<T>& x, int64_t n, int64_t d, const std::vector<int32_t>& labels, int64_t k) {
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> order(static_cast<size_t>(d));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
      return x[static_cast<size_t>(i * d + p)] > x[static_cast<size_t>(i * d + q)];
    });
    auto pos = std::find(order.begin(), order.end(), labels[static_cast<size_t>(i)]) - order.begin();
    if (pos < k) ++correct;
  }
  return n ? static_cast<float>(static_cast<double>(correct) / static_cast<double>(n)) : 0.0f;
}

double Mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }
double Stdev(const std::vector<double>& v) {
  double m = Mean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}
template <typename T>
std::vector<double> AsDoubles(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Runs `ops` on `feeds` once per thread count (IntraOpThreadsScope): every
// output must equal the first count's bit for bit. Returns the first's.
std::map<std::string, std::vector<float>> SameBitsOnThreads(const std::vector<OperatorDef>& ops, const Feeds& feeds,
                                                            const std::vector<std::string>& outputs,
                                                            const std::vector<int>& threads) {
  std::map<std::string, std::vector<float>> first;
  for (int t : threads) {
    CAPTURE(t);
    IntraOpThreadsScope scope(t);
    auto ws = RunOps(ops, feeds);
    for (const std::string& o : outputs) {
      CAPTURE(o);
      const std::vector<float> got = Values<float>(ws->GetTensor(o));
      if (first.count(o) == 0) first[o] = got;
      else CHECK(got == first[o]);  // bitwise
    }
  }
  return first;
}

const char* const kCpuOps[] = {"ConstantFill", "UniformFill", "GaussianFill", "XavierFill", "GivenTensorFill",
                               "Copy",         "FC",          "Relu",         "Clip",       "Softmax",
                               "LogSoftmax",   "SoftmaxWithLoss", "AveragedLoss", "Add",     "Mul",
                               "Sub",          "Div",         "SquaredL2Distance",
                               "Sum",          "Scale",       "Accuracy",    "Reshape",    "Flatten", "Print"};

}  // namespace

TEST_SUITE_BEGIN("ops");

TEST_CASE("every operator under test has a schema and a CPU kernel") {
  for (const char* type : kCpuOps) {
    CAPTURE(type);
    CHECK(OpSchemaRegistry::Find(type) != nullptr);
    CHECK(OperatorRegistry::Has(DeviceType::kCPU, type));
  }
}

// ============================================================================
// FC
// ============================================================================

TEST_CASE_TEMPLATE("FC matches a naive triple loop with bias, flattening X and W at axis and axis_w", T, float,
                   double) {
  struct Case {
    Dims x, w;
    std::optional<int64_t> axis, axis_w;
    Dims y;
  };
  const Case cases[] = {
      {{4, 5}, {3, 5}, std::nullopt, std::nullopt, {4, 3}},
      {{4, 5}, {3, 5}, 1, 1, {4, 3}},                // the defaults, given explicitly
      {{2, 3, 4, 5}, {7, 60}, std::nullopt, std::nullopt, {2, 7}},
      {{2, 3, 4, 5}, {7, 20}, 2, std::nullopt, {2, 3, 7}},
      {{2, 3, 4, 5}, {6, 5}, -1, std::nullopt, {2, 3, 4, 6}},
      {{2, 3, 4, 5}, {2, 3, 20}, 2, 2, {2, 3, 6}},    // W [N1, N2, K]
      {{2, 3, 4, 5}, {3, 4, 15}, 1, 1, {2, 3}},       // W [N, K1, K2]
      {{2, 3, 4, 5}, {3, 4, 15}, 1, -2, {2, 3}},      // negative axis_w
      {{2, 3}, {4, 1}, 2, std::nullopt, {2, 3, 4}},   // axis == rank: K = 1
      {{3, 70}, {65, 70}, std::nullopt, std::nullopt, {3, 65}},
      {{2, 0}, {3, 0}, std::nullopt, std::nullopt, {2, 3}},  // K = 0: Y is the bias
      {{0, 5}, {3, 5}, std::nullopt, std::nullopt, {0, 3}},  // M = 0
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    CAPTURE(DimsString(c.x));
    CAPTURE(DimsString(c.w));
    int xr = static_cast<int>(c.x.size()), wr = static_cast<int>(c.w.size());
    int axis = static_cast<int>(c.axis.value_or(1)), axis_w = static_cast<int>(c.axis_w.value_or(1));
    if (axis < 0) axis += xr;
    if (axis_w < 0) axis_w += wr;
    const int64_t m = Prod(c.x, 0, static_cast<size_t>(axis)), k = Prod(c.x, static_cast<size_t>(axis), c.x.size());
    const int64_t n = Prod(c.w, 0, static_cast<size_t>(axis_w));
    REQUIRE(Prod(c.w) == n * k);
    auto x = Random<T>(Prod(c.x), seed++, -1, 1);
    auto w = Random<T>(Prod(c.w), seed++, -1, 1);
    auto b = Random<T>(n, seed++, -1, 1);
    std::vector<Argument> args;
    if (c.axis) args.push_back(IntArg("axis", *c.axis));
    if (c.axis_w) args.push_back(IntArg("axis_w", *c.axis_w));
    auto ws = RunOp(Op("FC", {"x", "w", "b"}, {"y"}, args),
                    {{"x", Make<T>(c.x, x)}, {"w", Make<T>(c.w, w)}, {"b", Make<T>({n}, b)}});
    const Tensor& y = ws->GetTensor("y");
    CHECK(y.dims() == c.y);
    CHECK(y.dtype() == DTypeOf<T>());
    CheckClose(Values<T>(y), RefFc(x, w, b, m, k, n), Tol<T>() * 5);
  }
}

TEST_CASE("FC runs repeatedly and gives the same result each time") {
  auto x = Random<float>(12, 3), w = Random<float>(8, 4), b = Random<float>(2, 5);
  auto def = std::make_shared<const NetDef>(MakeNet({Op("FC", {"x", "w", "b"}, {"y"})}, {{"x", Tensor()}, {"w", Tensor()}, {"b", Tensor()}}));
  auto ws = std::make_shared<Workspace>();
  ws->Feed("x", Make<float>({3, 4}, x));
  ws->Feed("w", Make<float>({2, 4}, w));
  ws->Feed("b", Make<float>({2}, b));
  Net net(def, ws);
  net.Run();
  auto first = Values<float>(ws->GetTensor("y"));
  CheckClose(first, RefFc(x, w, b, 3, 4, 2), 1e-5);
  net.Run();  // Y is seeded with the bias each run, not accumulated
  CHECK(Values<float>(ws->GetTensor("y")) == first);
}

TEST_CASE("FC errors name the op and the blob") {
  const Feeds ok = {{"x", Make<float>({2, 5}, Random<float>(10, 1))},
                    {"w", Make<float>({3, 5}, Random<float>(15, 2))},
                    {"b", Make<float>({3}, Random<float>(3, 3))}};
  auto with = [&](const std::string& name, Tensor t) {
    Feeds f = ok;
    for (auto& [n, v] : f)
      if (n == name) v = std::move(t);
    return f;
  };
  const auto fc = Op("FC", {"x", "w", "b"}, {"y"});
  SUBCASE("dtype mismatch") {
    ExpectRunError({fc}, with("w", Make<double>({3, 5}, Random<double>(15, 2))), Code::kDType,
                   {"op 0 (FC", "'w'", "float64"});
    ExpectRunError({fc}, with("b", Make<double>({3}, Random<double>(3, 2))), Code::kDType, {"op 0 (FC", "'b'"});
  }
  SUBCASE("integer inputs") {
    ExpectRunError({fc},
                   {{"x", Make<int32_t>({2, 5}, std::vector<int32_t>(10, 1))},
                    {"w", Make<int32_t>({3, 5}, std::vector<int32_t>(15, 1))},
                    {"b", Make<int32_t>({3}, std::vector<int32_t>(3, 1))}},
                   Code::kDType, {"op 0 (FC", "'x'", "int32"});
  }
  SUBCASE("K mismatch") {
    auto f = with("w", Make<float>({3, 4}, Random<float>(12, 2)));
    ExpectRunError({fc}, f, Code::kShape, {"op 0 (FC", "'x'", "'w'", "[2, 5]", "[3, 4]"});
    ExpectInferError({fc}, f, Code::kShape, {"op 0 (FC", "'x'", "'w'"});
  }
  SUBCASE("K mismatch after flattening at axis") {
    auto f = with("x", Make<float>({2, 3, 5}, Random<float>(30, 2)));
    auto op = Op("FC", {"x", "w", "b"}, {"y"}, {IntArg("axis", 1)});  // K = 15, W has 5
    ExpectRunError({op}, f, Code::kShape, {"op 0 (FC", "'x'", "'w'"});
    ExpectInferError({op}, f, Code::kShape, {"op 0 (FC", "'x'"});
  }
  SUBCASE("bias size") {
    auto f = with("b", Make<float>({4}, Random<float>(4, 2)));
    ExpectRunError({fc}, f, Code::kShape, {"op 0 (FC", "'b'", "[4]", "N = 3"});
    ExpectInferError({fc}, f, Code::kShape, {"op 0 (FC", "'b'"});
  }
  SUBCASE("axis out of range") {
    auto op = Op("FC", {"x", "w", "b"}, {"y"}, {IntArg("axis", 3)});
    ExpectRunError({op}, ok, Code::kOutOfRange, {"op 0 (FC", "'x'", "axis 3"});
    ExpectInferError({op}, ok, Code::kOutOfRange, {"op 0 (FC", "'x'"});
    auto opw = Op("FC", {"x", "w", "b"}, {"y"}, {IntArg("axis_w", -3)});
    ExpectRunError({opw}, ok, Code::kOutOfRange, {"op 0 (FC", "'w'", "axis -3"});
  }
}

// ============================================================================
// Relu
// ============================================================================

TEST_CASE_TEMPLATE("Relu is max(x, 0), out of place and in place", T, float, double) {
  std::vector<T> x = {T(-2), T(-0.5), T(0), T(0.25), T(3), T(-1e-30), T(1e30), T(-0.0)};
  std::vector<double> want;
  for (T v : x) want.push_back(v > T(0) ? static_cast<double>(v) : 0.0);
  auto ws = RunOp(Op("Relu", {"x"}, {"y"}), {{"x", Make<T>({2, 4}, x)}});
  CHECK(ws->GetTensor("y").dims() == Dims{2, 4});
  CheckClose(Values<T>(ws->GetTensor("y")), want, 0);
  CHECK(Values<T>(ws->GetTensor("x")) == x);  // input untouched
  auto wi = RunOp(Op("Relu", {"x"}, {"x"}), {{"x", Make<T>({2, 4}, x)}});
  CHECK(Values<T>(wi->GetTensor("x")) == Values<T>(ws->GetTensor("y")));
  CHECK(wi->GetTensor("x").dims() == Dims{2, 4});

  auto big = Random<T>(1000, 7);
  auto wb = RunOp(Op("Relu", {"x"}, {"y"}), {{"x", Make<T>({10, 10, 10}, big)}});
  std::vector<double> bw;
  for (T v : big) bw.push_back(std::max(static_cast<double>(v), 0.0));
  CheckClose(Values<T>(wb->GetTensor("y")), bw, 0);
}

TEST_CASE("Relu rejects integer tensors") {
  ExpectRunError({Op("Relu", {"x"}, {"y"})}, {{"x", Make<int32_t>({2}, {1, -1})}}, Code::kDType,
                 {"op 0 (Relu", "'x'", "int32"});
}

// ============================================================================
// Clip
// ============================================================================

TEST_CASE_TEMPLATE("Clip limits X to [min, max], keeps NaN, and gives the same bits in place", T, float, double) {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> x = {T(-7),  T(-0.5), T(0),  T(-0.0), T(0.25), T(5.999), T(6),
                            T(6.5), T(1e30), -inf, inf,      nan,     T(-1e-30), T(3)};
  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Bounds {
    std::optional<double> lo, hi;
  };
  // ReLU6, one bound alone, neither (identity), and a point interval.
  for (const Bounds& b : {Bounds{0.0, 6.0}, Bounds{-1.0, std::nullopt}, Bounds{std::nullopt, 0.5},
                          Bounds{std::nullopt, std::nullopt}, Bounds{2.0, 2.0}}) {
    CAPTURE(b.lo.value_or(-kInf));
    CAPTURE(b.hi.value_or(kInf));
    std::vector<Argument> args;
    if (b.lo) args.push_back(FloatArg("min", *b.lo));
    if (b.hi) args.push_back(FloatArg("max", *b.hi));
    const T lo = static_cast<T>(b.lo.value_or(-kInf)), hi = static_cast<T>(b.hi.value_or(kInf));
    std::vector<T> want;
    for (T v : x) want.push_back(std::isnan(v) ? v : std::min(std::max(v, lo), hi));
    auto ws = RunOp(Op("Clip", {"x"}, {"y"}, args), {{"x", Make<T>({2, 7}, x)}});
    CHECK(ws->GetTensor("y").dims() == Dims{2, 7});
    const std::vector<T> y = Values<T>(ws->GetTensor("y"));
    CHECK(SameBits(y, want));
    CHECK(std::isnan(y[11]));
    CHECK(SameBits(Values<T>(ws->GetTensor("x")), x));  // input untouched
    auto wi = RunOp(Op("Clip", {"x"}, {"x"}, args), {{"x", Make<T>({2, 7}, x)}});
    CHECK(SameBits(Values<T>(wi->GetTensor("x")), y));
  }
}

TEST_CASE_TEMPLATE("ClipGradient passes dY strictly inside (min, max), also after an in-place Clip", T, float, double) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  // Y as Clip(min 0, max 6) leaves it: at the bounds, inside, and NaN.
  const std::vector<T> y = {T(0), T(6), T(0.5), T(5.5), T(1e-7), nan};
  const std::vector<T> dy = {T(1), T(2), T(3), T(4), T(5), T(6)};
  const std::vector<double> want = {0, 0, 3, 4, 5, 0};
  const std::vector<Argument> relu6 = {FloatArg("min", 0), FloatArg("max", 6)};
  const Feeds f = {{"y", Make<T>({3, 2}, y)}, {"dy", Make<T>({3, 2}, dy)}};
  auto ws = RunOp(Op("ClipGradient", {"y", "dy"}, {"dx"}, relu6), f);
  CheckClose(Values<T>(ws->GetTensor("dx")), want, 0);
  auto wi = RunOp(Op("ClipGradient", {"y", "dy"}, {"dy"}, relu6), f);
  CheckClose(Values<T>(wi->GetTensor("dy")), want, 0);
  // Without bounds every finite Y passes its gradient.
  auto wn = RunOp(Op("ClipGradient", {"y", "dy"}, {"dx"}), f);
  CheckClose(Values<T>(wn->GetTensor("dx")), {1, 2, 3, 4, 5, 0}, 0);

  // Clip in place over X, then its gradient from the clipped blob: the
  // clipped elements (and those exactly at a bound) get 0.
  const std::vector<T> x = {T(-3), T(0), T(2), T(6), T(7.5), T(5.25)};
  auto wc = RunOps({Op("Clip", {"x"}, {"x"}, relu6), Op("ClipGradient", {"x", "dy"}, {"dx"}, relu6)},
                   {{"x", Make<T>({6}, x)}, {"dy", Make<T>({6}, dy)}});
  CheckClose(Values<T>(wc->GetTensor("dx")), {0, 0, 3, 0, 0, 6}, 0);
}

TEST_CASE("Clip and ClipGradient errors name the op and the bounds") {
  const Feeds x = {{"x", Make<float>({2}, {1, 2})}};
  // The bounds are read when the net is made, and by shape inference.
  for (const char* type : {"Clip", "ClipGradient"}) {
    CAPTURE(type);
    const std::vector<std::string> in = std::string(type) == "Clip" ? std::vector<std::string>{"x"}
                                                                     : std::vector<std::string>{"x", "x"};
    const OperatorDef op = Op(type, in, {"y"}, {FloatArg("min", 3), FloatArg("max", 1)});
    ExpectBuildError({op}, x, Code::kInvalidArgument, {StrCat("op 0 (", type), "'min' (3)", "'max' (1)"});
    ExpectInferError({op}, x, Code::kInvalidArgument, {StrCat("op 0 (", type), "'min' (3)", "'max' (1)"});
    // A NaN bound satisfies no order.
    ExpectBuildError({Op(type, in, {"y"}, {FloatArg("max", std::nan(""))})}, x, Code::kInvalidArgument,
                     {StrCat("op 0 (", type), "'max' (nan)"});
  }
  ExpectRunError({Op("Clip", {"x"}, {"y"}, {FloatArg("min", 0)})}, {{"x", Make<int32_t>({2}, {1, -1})}}, Code::kDType,
                 {"op 0 (Clip", "'x'", "int32"});
  const Feeds g = {{"y", Make<float>({2, 3}, Random<float>(6, 1))}, {"dy", Make<float>({3, 2}, Random<float>(6, 2))}};
  ExpectRunAndInferError({Op("ClipGradient", {"y", "dy"}, {"dx"})}, g, Code::kShape,
                         {"op 0 (ClipGradient", "'dy'", "[3, 2]", "'y'", "[2, 3]"});
}

// ============================================================================
// Softmax
// ============================================================================

TEST_CASE_TEMPLATE("Softmax rows sum to 1 and match exp / sum", T, float, double) {
  struct Case {
    Dims dims;
    std::optional<int64_t> axis;
  };
  const Case cases[] = {{{3, 5}, std::nullopt}, {{2, 3, 4}, 1}, {{2, 3, 4}, 2}, {{2, 3, 4}, -1},
                        {{2, 3, 4}, 0},         {{1, 1}, 1},    {{4, 1000}, 1}};
  uint32_t seed = 11;
  for (const Case& c : cases) {
    CAPTURE(DimsString(c.dims));
    CAPTURE(c.axis.value_or(1));
    int axis = static_cast<int>(c.axis.value_or(1));
    if (axis < 0) axis += static_cast<int>(c.dims.size());
    int64_t rows = Prod(c.dims, 0, static_cast<size_t>(axis)), cols = Prod(c.dims, static_cast<size_t>(axis), c.dims.size());
    auto x = Random<T>(Prod(c.dims), seed++, -4, 4);
    std::vector<Argument> args;
    if (c.axis) args.push_back(IntArg("axis", *c.axis));
    auto ws = RunOp(Op("Softmax", {"x"}, {"p"}, args), {{"x", Make<T>(c.dims, x)}});
    auto p = Values<T>(ws->GetTensor("p"));
    CHECK(ws->GetTensor("p").dims() == c.dims);
    CheckClose(p, RefSoftmax(x, rows, cols), Tol<T>());
    std::vector<double> sums, ones(static_cast<size_t>(rows), 1.0);
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t k = 0; k < cols; ++k) s += static_cast<double>(p[static_cast<size_t>(r * cols + k)]);
      sums.push_back(s);
    }
    CheckClose(sums, ones, Tol<T>() * 10);
    // In place gives the same values.
    auto wi = RunOp(Op("Softmax", {"x"}, {"x"}, args), {{"x", Make<T>(c.dims, x)}});
    CHECK(Values<T>(wi->GetTensor("x")) == p);
  }
}

TEST_CASE_TEMPLATE("Softmax of large logits stays finite", T, float, double) {
  std::vector<T> x = {T(1000), T(999), T(0), T(-1000), T(1000), T(1000), T(-1000), T(-1001), T(-1000)};
  auto ws = RunOp(Op("Softmax", {"x"}, {"p"}), {{"x", Make<T>({3, 3}, x)}});
  auto p = Values<T>(ws->GetTensor("p"));
  for (T v : p) CHECK(std::isfinite(static_cast<double>(v)));
  const double e = std::exp(-1.0);
  CheckClose(p, {1 / (1 + e), e / (1 + e), 0.0, 0.0, 0.5, 0.5, 1 / (1 + e + 1), e / (2 + e), 1 / (2 + e)},
             Tol<T>());
  CheckClose(p, RefSoftmax(x, 3, 3), Tol<T>());
}

TEST_CASE("Softmax errors") {
  ExpectRunError({Op("Softmax", {"x"}, {"p"})}, {{"x", Make<int64_t>({1, 2}, {1, 2})}}, Code::kDType,
                 {"op 0 (Softmax", "'x'"});
  const Feeds f = {{"x", Make<float>({2, 3}, Random<float>(6, 1))}};
  auto op = Op("Softmax", {"x"}, {"p"}, {IntArg("axis", 2)});
  ExpectRunError({op}, f, Code::kOutOfRange, {"op 0 (Softmax", "'x'", "axis 2"});
  ExpectInferError({op}, f, Code::kOutOfRange, {"op 0 (Softmax", "'x'", "axis 2"});
  // A 1-D input has no axis 1 (the default).
  const Feeds v = {{"x", Make<float>({3}, Random<float>(3, 1))}};
  ExpectRunError({Op("Softmax", {"x"}, {"p"})}, v, Code::kOutOfRange, {"op 0 (Softmax", "'x'"});
  ExpectInferError({Op("Softmax", {"x"}, {"p"})}, v, Code::kOutOfRange, {"op 0 (Softmax", "'x'"});
}

// ============================================================================
// LogSoftmax
// ============================================================================

TEST_CASE_TEMPLATE("LogSoftmax is log(Softmax) over dims [axis:], out of place and in place", T, float, double) {
  struct Case {
    Dims dims;
    std::optional<int64_t> axis;
  };
  const Case cases[] = {{{3, 5}, std::nullopt}, {{2, 3, 4}, 1}, {{2, 3, 4}, 2}, {{2, 3, 4}, -1},
                        {{2, 3, 4}, -3},        {{2, 3, 4}, 0}, {{1, 1}, 1},    {{4, 1000}, 1},
                        {{2, 3, 4, 5}, 3},      {{0, 3}, 1}};
  uint32_t seed = 41;
  for (const Case& c : cases) {
    CAPTURE(DimsString(c.dims));
    CAPTURE(c.axis.value_or(1));
    int axis = static_cast<int>(c.axis.value_or(1));
    if (axis < 0) axis += static_cast<int>(c.dims.size());
    const int64_t rows = Prod(c.dims, 0, static_cast<size_t>(axis)),
                  cols = Prod(c.dims, static_cast<size_t>(axis), c.dims.size());
    const auto x = Random<T>(Prod(c.dims), seed++, -6, 6);
    std::vector<Argument> args;
    if (c.axis) args.push_back(IntArg("axis", *c.axis));
    auto ws = RunOp(Op("LogSoftmax", {"x"}, {"y"}, args), {{"x", Make<T>(c.dims, x)}});
    CHECK(ws->GetTensor("y").dims() == c.dims);
    const auto y = Values<T>(ws->GetTensor("y"));
    CheckClose(y, RefLogSoftmax(x, rows, cols), Tol<T>());
    // exp(Y) is the op Softmax's output.
    auto wp = RunOp(Op("Softmax", {"x"}, {"p"}, args), {{"x", Make<T>(c.dims, x)}});
    const auto p = Values<T>(wp->GetTensor("p"));
    std::vector<double> ey;
    for (T v : y) ey.push_back(std::exp(static_cast<double>(v)));
    CheckClose(p, ey, Tol<T>() * 5);
    auto wi = RunOp(Op("LogSoftmax", {"x"}, {"x"}, args), {{"x", Make<T>(c.dims, x)}});
    CHECK(Values<T>(wi->GetTensor("x")) == y);
  }
}

TEST_CASE_TEMPLATE("LogSoftmax stays exact where Softmax underflows; a NaN makes only its row NaN", T, float, double) {
  // Rows whose other elements' softmax underflows to 0 (log 0 = -inf).
  const std::vector<T> x = {T(1000), T(0), T(-1000), T(-5000), T(-5000), T(-5000)};
  auto ws = RunOp(Op("LogSoftmax", {"x"}, {"y"}), {{"x", Make<T>({2, 3}, x)}});
  const auto y = Values<T>(ws->GetTensor("y"));
  for (T v : y) CHECK(std::isfinite(static_cast<double>(v)));
  CHECK(y[0] == T(0));
  CHECK(y[1] == T(-1000));
  CHECK(y[2] == T(-2000));
  CheckClose(y, RefLogSoftmax(x, 2, 3), Tol<T>());
  CHECK(y[3] == doctest::Approx(-std::log(3.0)).epsilon(Tol<T>()));

  // A NaN first in its row (where it becomes the row's max) or later.
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> xn = {nan, T(1), T(2), T(1), T(2), T(3), T(1), nan, T(2)};
  auto wn = RunOp(Op("LogSoftmax", {"x"}, {"y"}), {{"x", Make<T>({3, 3}, xn)}});
  const auto yn = Values<T>(wn->GetTensor("y"));
  for (int i : {0, 1, 2, 6, 7, 8}) CHECK(std::isnan(static_cast<double>(yn[static_cast<size_t>(i)])));
  CheckClose(std::vector<T>(yn.begin() + 3, yn.begin() + 6), RefLogSoftmax(std::vector<T>{1, 2, 3}, 1, 3), Tol<T>());
}

TEST_CASE_TEMPLATE("LogSoftmaxGradient is dY - exp(Y) * sum(dY) per row, also in place of dY", T, float, double) {
  struct Case {
    Dims dims;
    int64_t axis;
    int64_t rows, cols;
  };
  for (const Case& c : {Case{{4, 7}, 1, 4, 7}, Case{{2, 3, 5}, -1, 6, 5}, Case{{2, 3, 5}, 0, 1, 30}}) {
    CAPTURE(DimsString(c.dims));
    CAPTURE(c.axis);
    const auto x = Random<T>(c.rows * c.cols, 51, -3, 3);
    const auto dy = Random<T>(c.rows * c.cols, 52);
    const std::vector<Argument> axis = {IntArg("axis", c.axis)};
    // Y from the forward op, so that exp(Y) sums to 1 per row as in training.
    const Feeds f = {{"x", Make<T>(c.dims, x)}, {"dy", Make<T>(c.dims, dy)}};
    auto ws = RunOps({Op("LogSoftmax", {"x"}, {"y"}, axis), Op("LogSoftmaxGradient", {"y", "dy"}, {"dx"}, axis)}, f);
    const auto y = Values<T>(ws->GetTensor("y"));
    std::vector<double> want(y.size());
    for (int64_t r = 0; r < c.rows; ++r) {
      double sum = 0;
      for (int64_t k = 0; k < c.cols; ++k) sum += static_cast<double>(dy[static_cast<size_t>(r * c.cols + k)]);
      for (int64_t k = 0; k < c.cols; ++k) {
        const size_t i = static_cast<size_t>(r * c.cols + k);
        want[i] = static_cast<double>(dy[i]) - std::exp(static_cast<double>(y[i])) * sum;
      }
    }
    const auto dx = Values<T>(ws->GetTensor("dx"));
    CheckClose(dx, want, Tol<T>() * 5);
    auto wi = RunOps({Op("LogSoftmax", {"x"}, {"y"}, axis), Op("LogSoftmaxGradient", {"y", "dy"}, {"dy"}, axis)}, f);
    CHECK(Values<T>(wi->GetTensor("dy")) == dx);
  }
}

TEST_CASE("LogSoftmax and LogSoftmaxGradient errors") {
  ExpectRunError({Op("LogSoftmax", {"x"}, {"y"})}, {{"x", Make<int64_t>({1, 2}, {1, 2})}}, Code::kDType,
                 {"op 0 (LogSoftmax", "'x'"});
  const Feeds f = {{"x", Make<float>({2, 3}, Random<float>(6, 1))}};
  for (int64_t axis : {2, -3}) {
    CAPTURE(axis);
    ExpectRunAndInferError({Op("LogSoftmax", {"x"}, {"y"}, {IntArg("axis", axis)})}, f, Code::kOutOfRange,
                           {"op 0 (LogSoftmax", "'x'", StrCat("axis ", axis)});
  }
  const Feeds g = {{"y", Make<float>({2, 3}, Random<float>(6, 1))}, {"dy", Make<float>({3, 2}, Random<float>(6, 2))}};
  ExpectRunError({Op("LogSoftmaxGradient", {"y", "dy"}, {"dx"})}, g, Code::kShape,
                 {"op 0 (LogSoftmaxGradient", "'dy'", "'y'"});
  const Feeds h = {{"y", Make<float>({2, 3}, Random<float>(6, 1))}, {"dy", Make<double>({2, 3}, Random<double>(6, 2))}};
  ExpectRunError({Op("LogSoftmaxGradient", {"y", "dy"}, {"dx"})}, h, Code::kShape,
                 {"op 0 (LogSoftmaxGradient", "'dy'", "float64"});
}

// ============================================================================
// SoftmaxWithLoss
// ============================================================================

TEST_CASE_TEMPLATE("SoftmaxWithLoss: loss is -mean(log p[label]), weighted and scaled", T, float, double) {
  const int64_t n = 4, d = 5;
  auto x = Random<T>(n * d, 21, -3, 3);
  std::vector<int32_t> labels = {0, 4, 2, 2};
  auto p = RefSoftmax(x, n, d);
  std::vector<double> nll;
  for (int64_t i = 0; i < n; ++i) nll.push_back(-std::log(p[static_cast<size_t>(i * d + labels[static_cast<size_t>(i)])]));
  const double mean_nll = Mean(nll);

  auto run = [&](Tensor label, std::vector<Argument> args, const std::vector<T>* weights) {
    Feeds f = {{"x", Make<T>({n, d}, x)}, {"label", std::move(label)}};
    std::vector<std::string> in = {"x", "label"};
    if (weights) {
      f.push_back({"w", Make<T>({n}, *weights)});
      in.push_back("w");
    }
    return RunOp(Op("SoftmaxWithLoss", in, {"p", "loss"}, std::move(args)), f);
  };

  SUBCASE("labels [N]") {
    auto ws = run(Make<int32_t>({n}, labels), {}, nullptr);
    CHECK(ws->GetTensor("loss").dims() == Dims{});
    CHECK(ws->GetTensor("loss").dtype() == DTypeOf<T>());
    CheckClose(Values<T>(ws->GetTensor("loss")), {mean_nll}, Tol<T>());
    CHECK(ws->GetTensor("p").dims() == Dims{n, d});
    CheckClose(Values<T>(ws->GetTensor("p")), p, Tol<T>());
  }
  SUBCASE("labels [N, 1]") {
    auto ws = run(Make<int32_t>({n, 1}, labels), {}, nullptr);
    CheckClose(Values<T>(ws->GetTensor("loss")), {mean_nll}, Tol<T>());
  }
  SUBCASE("scale") {
    auto ws = run(Make<int32_t>({n}, labels), {FloatArg("scale", 0.25)}, nullptr);
    CheckClose(Values<T>(ws->GetTensor("loss")), {0.25 * mean_nll}, Tol<T>());
    CheckClose(Values<T>(ws->GetTensor("p")), p, Tol<T>());  // scale affects only the loss
  }
  SUBCASE("weights and scale") {
    std::vector<T> w = {T(1), T(0.5), T(2), T(0)};
    auto ws = run(Make<int32_t>({n}, labels), {FloatArg("scale", 3.0)}, &w);
    double num = 0, den = 0;
    for (size_t i = 0; i < 4; ++i) {
      num += static_cast<double>(w[i]) * nll[i];
      den += static_cast<double>(w[i]);
    }
    CheckClose(Values<T>(ws->GetTensor("loss")), {3.0 * num / den}, Tol<T>());
  }
  SUBCASE("unit weights equal no weights") {
    std::vector<T> w(4, T(1));
    auto ws = run(Make<int32_t>({n}, labels), {}, &w);
    CheckClose(Values<T>(ws->GetTensor("loss")), {mean_nll}, Tol<T>());
  }
  SUBCASE("all-zero weights give a zero loss") {
    std::vector<T> w(4, T(0));
    auto ws = run(Make<int32_t>({n}, labels), {}, &w);
    CHECK(Values<T>(ws->GetTensor("loss")) == std::vector<T>{T(0)});
  }
}

TEST_CASE_TEMPLATE("SoftmaxWithLoss with large logits: -log p stays exact where p underflows", T, float, double) {
  std::vector<T> x = {T(1000), T(0), T(0), T(1000)};
  auto ws = RunOp(Op("SoftmaxWithLoss", {"x", "label"}, {"p", "loss"}),
                  {{"x", Make<T>({2, 2}, x)}, {"label", Make<int32_t>({2}, {1, 1})}});
  auto loss = Values<T>(ws->GetTensor("loss"));
  REQUIRE(loss.size() == 1);
  CHECK(std::isfinite(static_cast<double>(loss[0])));
  CheckClose(loss, {500.0}, Tol<T>());  // (1000 + 0) / 2
  for (T v : Values<T>(ws->GetTensor("p"))) CHECK(std::isfinite(static_cast<double>(v)));
}

TEST_CASE("SoftmaxWithLoss errors name the op and the blob") {
  const auto x = Make<float>({4, 5}, Random<float>(20, 1));
  const auto op = Op("SoftmaxWithLoss", {"x", "label"}, {"p", "loss"});
  SUBCASE("label out of range") {
    ExpectRunError({op}, {{"x", x}, {"label", Make<int32_t>({4}, {0, 5, 1, 1})}}, Code::kOutOfRange,
                   {"op 0 (SoftmaxWithLoss", "'label'", "label 5", "sample 1"});
    ExpectRunError({op}, {{"x", x}, {"label", Make<int32_t>({4}, {0, 1, 1, -1})}}, Code::kOutOfRange,
                   {"op 0 (SoftmaxWithLoss", "'label'", "label -1", "sample 3"});
  }
  SUBCASE("labels not int32") {
    Feeds f = {{"x", x}, {"label", Make<int64_t>({4}, {0, 1, 1, 1})}};
    ExpectRunError({op}, f, Code::kDType, {"op 0 (SoftmaxWithLoss", "'label'", "int64"});
    ExpectInferError({op}, f, Code::kDType, {"op 0 (SoftmaxWithLoss", "'label'", "int64"});
    Feeds g = {{"x", x}, {"label", Make<float>({4}, {0, 1, 1, 1})}};
    ExpectRunError({op}, g, Code::kDType, {"op 0 (SoftmaxWithLoss", "'label'", "float32"});
  }
  SUBCASE("label count") {
    Feeds f = {{"x", x}, {"label", Make<int32_t>({3}, {0, 1, 1})}};
    ExpectRunError({op}, f, Code::kShape, {"op 0 (SoftmaxWithLoss", "'label'", "[3]"});
    ExpectInferError({op}, f, Code::kShape, {"op 0 (SoftmaxWithLoss", "'label'", "[3]"});
    Feeds g = {{"x", x}, {"label", Make<int32_t>({4, 2}, std::vector<int32_t>(8, 0))}};
    ExpectRunError({op}, g, Code::kShape, {"op 0 (SoftmaxWithLoss", "'label'", "[4, 2]"});
  }
  SUBCASE("logits not 2-D") {
    Feeds f = {{"x", Make<float>({4, 5, 1}, Random<float>(20, 1))}, {"label", Make<int32_t>({4}, {0, 1, 1, 1})}};
    ExpectRunError({op}, f, Code::kShape, {"op 0 (SoftmaxWithLoss", "'x'", "[4, 5, 1]"});
    ExpectInferError({op}, f, Code::kShape, {"op 0 (SoftmaxWithLoss", "'x'"});
  }
  SUBCASE("logits not float") {
    Feeds f = {{"x", Make<int32_t>({1, 2}, {1, 2})}, {"label", Make<int32_t>({1}, {0})}};
    ExpectRunError({op}, f, Code::kDType, {"op 0 (SoftmaxWithLoss", "'x'"});
  }
  SUBCASE("weights") {
    auto opw = Op("SoftmaxWithLoss", {"x", "label", "w"}, {"p", "loss"});
    const auto label = Make<int32_t>({4}, {0, 1, 1, 1});
    Feeds count = {{"x", x}, {"label", label}, {"w", Make<float>({3}, {1, 1, 1})}};
    ExpectRunError({opw}, count, Code::kShape, {"op 0 (SoftmaxWithLoss", "'w'"});
    ExpectInferError({opw}, count, Code::kShape, {"op 0 (SoftmaxWithLoss", "'w'"});
    Feeds dtype = {{"x", x}, {"label", label}, {"w", Make<double>({4}, {1, 1, 1, 1})}};
    ExpectRunError({opw}, dtype, Code::kDType, {"op 0 (SoftmaxWithLoss", "'w'", "float64"});
    ExpectInferError({opw}, dtype, Code::kDType, {"op 0 (SoftmaxWithLoss", "'w'"});
  }
}

// ============================================================================
// AveragedLoss
// ============================================================================

TEST_CASE_TEMPLATE("AveragedLoss is the mean of all elements, as a scalar", T, float, double) {
  for (Dims dims : {Dims{3, 4}, Dims{7}, Dims{}, Dims{2, 3, 5}}) {
    CAPTURE(DimsString(dims));
    auto x = Random<T>(Prod(dims), 31, -5, 5);
    auto ws = RunOp(Op("AveragedLoss", {"x"}, {"loss"}), {{"x", Make<T>(dims, x)}});
    const Tensor& loss = ws->GetTensor("loss");
    CHECK(loss.dims() == Dims{});
    CHECK(loss.dtype() == DTypeOf<T>());
    CheckClose(Values<T>(loss), {Mean(AsDoubles(x))}, Tol<T>());
  }
}

TEST_CASE("AveragedLoss errors") {
  Feeds empty = {{"x", Make<float>({0, 3}, {})}};
  ExpectRunError({Op("AveragedLoss", {"x"}, {"loss"})}, empty, Code::kShape, {"op 0 (AveragedLoss", "'x'"});
  ExpectInferError({Op("AveragedLoss", {"x"}, {"loss"})}, empty, Code::kShape, {"op 0 (AveragedLoss", "'x'"});
  ExpectRunError({Op("AveragedLoss", {"x"}, {"loss"})}, {{"x", Make<int32_t>({2}, {1, 2})}}, Code::kDType,
                 {"op 0 (AveragedLoss", "'x'"});
}

// ============================================================================
// SquaredL2Distance
// ============================================================================

TEST_CASE_TEMPLATE("SquaredL2Distance is half the squared distance per row", T, float, double) {
  for (Dims dims : {Dims{3, 4}, Dims{5}, Dims{2, 3, 2}, Dims{0, 3}, Dims{2, 0}}) {
    CAPTURE(DimsString(dims));
    const int64_t n = dims[0], d = Prod(dims, 1, dims.size());
    auto x = Random<T>(Prod(dims), 71, -3, 3), y = Random<T>(Prod(dims), 72, -3, 3);
    auto ws = RunOp(Op("SquaredL2Distance", {"x", "y"}, {"z"}), {{"x", Make<T>(dims, x)}, {"y", Make<T>(dims, y)}});
    const Tensor& z = ws->GetTensor("z");
    CHECK(z.dims() == Dims{n});
    CHECK(z.dtype() == DTypeOf<T>());
    std::vector<double> want;
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < d; ++j) {
        const double diff = double(x[size_t(i * d + j)]) - double(y[size_t(i * d + j)]);
        s += diff * diff;
      }
      want.push_back(0.5 * s);
    }
    CheckClose(Values<T>(z), want, Tol<T>());
  }
  // Hand-checked: rows (3, 4) and (1, 1) against zeros.
  auto ws = RunOp(Op("SquaredL2Distance", {"x", "y"}, {"z"}),
                  {{"x", Make<T>({2, 2}, {3, 4, 1, 1})}, {"y", Make<T>({2, 2}, {0, 0, 0, 0})}});
  CHECK(Values<T>(ws->GetTensor("z")) == std::vector<T>{12.5, 1});
}

TEST_CASE("SquaredL2Distance errors name the op and the blobs") {
  const auto op = Op("SquaredL2Distance", {"x", "y"}, {"z"});
  Feeds shapes = {{"x", Make<float>({2, 3}, Random<float>(6, 1))}, {"y", Make<float>({3, 2}, Random<float>(6, 2))}};
  ExpectRunError({op}, shapes, Code::kShape, {"op 0 (SquaredL2Distance", "'x'", "'y'", "[2, 3]", "[3, 2]"});
  ExpectInferError({op}, shapes, Code::kShape, {"op 0 (SquaredL2Distance", "'x'", "'y'"});
  Feeds scalars = {{"x", Make<float>({}, {1})}, {"y", Make<float>({}, {2})}};
  ExpectRunError({op}, scalars, Code::kShape, {"op 0 (SquaredL2Distance", "'x'", "scalar"});
  Feeds dtypes = {{"x", Make<float>({2}, {1, 2})}, {"y", Make<double>({2}, {1, 2})}};
  ExpectRunError({op}, dtypes, Code::kDType, {"op 0 (SquaredL2Distance", "'x'", "'y'", "float64"});
  ExpectInferError({op}, dtypes, Code::kDType, {"op 0 (SquaredL2Distance", "'x'", "'y'"});
  Feeds ints = {{"x", Make<int32_t>({2}, {1, 2})}, {"y", Make<int32_t>({2}, {1, 2})}};
  ExpectRunError({op}, ints, Code::kDType, {"op 0 (SquaredL2Distance", "'x'", "int32"});
  const auto grad = Op("SquaredL2DistanceGradient", {"x", "y", "dz"}, {"dx"});
  Feeds bad_dz = {{"x", Make<float>({2, 3}, Random<float>(6, 3))}, {"y", Make<float>({2, 3}, Random<float>(6, 4))},
                  {"dz", Make<float>({3}, {1, 2, 3})}};
  ExpectRunError({grad}, bad_dz, Code::kShape, {"op 0 (SquaredL2DistanceGradient", "'dz'", "[2]"});
  ExpectInferError({grad}, bad_dz, Code::kShape, {"op 0 (SquaredL2DistanceGradient", "'dz'", "[2]"});
}

// ============================================================================
// Add, Sub, Mul and Div
// ============================================================================

TEST_CASE_TEMPLATE("Add, Sub and Mul (and Div for floats) broadcast like NumPy", T, float, double, int32_t, int64_t) {
  struct Case {
    Dims a, b, y;
  };
  const Case cases[] = {
      {{2, 3}, {2, 3}, {2, 3}},          // same shape
      {{2, 3}, {}, {2, 3}},              // scalar B
      {{2, 3}, {1}, {2, 3}},             // one-element B
      {{}, {2, 3}, {2, 3}},              // scalar A
      {{}, {}, {}},                      // scalars
      {{2, 3, 4}, {3, 1}, {2, 3, 4}},
      {{4}, {2, 1, 4}, {2, 1, 4}},
      {{2, 3, 4}, {4}, {2, 3, 4}},
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},
      {{1, 3, 1}, {2, 1, 5}, {2, 3, 5}},
      {{5, 1}, {1, 6}, {5, 6}},
      {{3, 1, 2, 1}, {4, 1, 5}, {3, 4, 2, 5}},
      {{2, 3, 1}, {2, 3, 1}, {2, 3, 1}},
      {{1, 1}, {3, 1}, {3, 1}},
      {{0, 3}, {3}, {0, 3}},             // empty
  };
  uint32_t seed = 41;
  for (const Case& c : cases) {
    CAPTURE(DimsString(c.a));
    CAPTURE(DimsString(c.b));
    auto a = Random<T>(Prod(c.a), seed++, -50, 50);
    auto b = Random<T>(Prod(c.b), seed++, -50, 50);
    const Feeds f = {{"a", Make<T>(c.a, a)}, {"b", Make<T>(c.b, b)}};
    auto ws = RunOps({Op("Add", {"a", "b"}, {"sum"}), Op("Mul", {"a", "b"}, {"prod"}), Op("Sub", {"a", "b"}, {"diff"})},
                     f);
    CHECK(ws->GetTensor("sum").dims() == c.y);
    CHECK(ws->GetTensor("prod").dims() == c.y);
    CHECK(ws->GetTensor("diff").dims() == c.y);
    CHECK(Values<T>(ws->GetTensor("sum")) == RefBinary(a, c.a, b, c.b, c.y, [](T p, T q) { return T(p + q); }));
    CHECK(Values<T>(ws->GetTensor("prod")) == RefBinary(a, c.a, b, c.b, c.y, [](T p, T q) { return T(p * q); }));
    CHECK(Values<T>(ws->GetTensor("diff")) == RefBinary(a, c.a, b, c.b, c.y, [](T p, T q) { return T(p - q); }));
    if constexpr (std::is_floating_point_v<T>) {
      auto wd = RunOp(Op("Div", {"a", "b"}, {"quot"}), f);
      CHECK(wd->GetTensor("quot").dims() == c.y);
      CHECK(Values<T>(wd->GetTensor("quot")) == RefBinary(a, c.a, b, c.b, c.y, [](T p, T q) { return T(p / q); }));
    }
    // Operand order does not matter.
    auto ws2 = RunOps({Op("Add", {"b", "a"}, {"sum"}), Op("Mul", {"b", "a"}, {"prod"})}, f);
    CHECK(Values<T>(ws2->GetTensor("sum")) == Values<T>(ws->GetTensor("sum")));
    CHECK(Values<T>(ws2->GetTensor("prod")) == Values<T>(ws->GetTensor("prod")));
  }
}

TEST_CASE("Add, Sub, Mul and Div in place equal out of place, also with broadcasting") {
  struct Case {
    Dims a, b;
    int inplace;  // 0: C is A, 1: C is B
  };
  const Case cases[] = {
      {{2, 3}, {2, 3}, 0}, {{2, 3}, {2, 3}, 1}, {{2, 3, 4}, {3, 1}, 0}, {{2, 3, 4}, {}, 0},
      {{4}, {2, 1, 4}, 1}, {{3, 1}, {2, 3, 4}, 0},  // C is A and grows
      {{2, 3, 4}, {4}, 1},                           // C is B and grows
  };
  uint32_t seed = 61;
  for (const char* type : {"Add", "Sub", "Mul", "Div"}) {
    for (const Case& c : cases) {
      CAPTURE(type);
      CAPTURE(DimsString(c.a));
      CAPTURE(DimsString(c.b));
      CAPTURE(c.inplace);
      auto a = Random<float>(Prod(c.a), seed++), b = Random<float>(Prod(c.b), seed++, 0.5, 2);  // no 0 / 0
      auto out = RunOp(Op(type, {"a", "b"}, {"c"}), {{"a", Make<float>(c.a, a)}, {"b", Make<float>(c.b, b)}});
      const std::string target = c.inplace == 0 ? "a" : "b";
      auto in = RunOp(Op(type, {"a", "b"}, {target}), {{"a", Make<float>(c.a, a)}, {"b", Make<float>(c.b, b)}});
      CHECK(in->GetTensor(target).dims() == out->GetTensor("c").dims());
      CHECK(Values<float>(in->GetTensor(target)) == Values<float>(out->GetTensor("c")));
      // The other operand is untouched.
      const std::string other = c.inplace == 0 ? "b" : "a";
      CHECK(Values<float>(in->GetTensor(other)) == (c.inplace == 0 ? b : a));
    }
  }
  // A op A into A.
  auto a = Random<float>(6, 5);
  auto ws = RunOps({Op("Add", {"a", "a"}, {"a"}), Op("Mul", {"b", "b"}, {"b"})},
                   {{"a", Make<float>({2, 3}, a)}, {"b", Make<float>({2, 3}, a)}});
  std::vector<float> twice, square;
  for (float v : a) {
    twice.push_back(v + v);
    square.push_back(v * v);
  }
  CHECK(Values<float>(ws->GetTensor("a")) == twice);
  CHECK(Values<float>(ws->GetTensor("b")) == square);
}

TEST_CASE_TEMPLATE("Div is IEEE division: x / 0 is +-inf, 0 / 0 NaN", T, float, double) {
  const T inf = std::numeric_limits<T>::infinity();
  auto ws = RunOp(Op("Div", {"a", "b"}, {"c"}),
                  {{"a", Make<T>({5}, {1, -1, 0, 2, -3})}, {"b", Make<T>({5}, {0, 0, 0, inf, -0.0})}});
  const std::vector<T> c = Values<T>(ws->GetTensor("c"));
  CHECK(c[0] == inf);
  CHECK(c[1] == -inf);
  CHECK(std::isnan(c[2]));
  CHECK(c[3] == 0);
  CHECK(c[4] == inf);  // -3 / -0
  // A zero divisor broadcast over a row.
  auto wb = RunOp(Op("Div", {"a", "b"}, {"c"}), {{"a", Make<T>({2, 2}, {1, 2, -3, 0})}, {"b", Make<T>({}, {0})}});
  const std::vector<T> r = Values<T>(wb->GetTensor("c"));
  CHECK(r[0] == inf);
  CHECK(r[1] == inf);
  CHECK(r[2] == -inf);
  CHECK(std::isnan(r[3]));
}

TEST_CASE("Div refuses integers, where division by zero has no IEEE answer") {
  Feeds f = {{"a", Make<int32_t>({2}, {4, 6})}, {"b", Make<int32_t>({2}, {2, 0})}};
  ExpectRunError({Op("Div", {"a", "b"}, {"c"})}, f, Code::kDType, {"op 0 (Div", "'a'", "int32"});
  ExpectInferError({Op("Div", {"a", "b"}, {"c"})}, f, Code::kDType, {"op 0 (Div", "'a'", "int32"});
}

TEST_CASE("Add and Mul errors name the op and both blobs") {
  const auto op = Op("Add", {"a", "b"}, {"c"});
  SUBCASE("shapes that do not broadcast") {
    for (const auto& dims : std::vector<std::pair<Dims, Dims>>{{{2, 3}, {2}}, {{2, 3, 4}, {3, 2}}, {{4}, {2, 3}}}) {
      const Dims& ad = dims.first;  // not a structured binding: clang 14 cannot capture one (CAPTURE)
      const Dims& bd = dims.second;
      CAPTURE(DimsString(ad));
      CAPTURE(DimsString(bd));
      Feeds f = {{"a", Make<float>(ad, Random<float>(Prod(ad), 1))}, {"b", Make<float>(bd, Random<float>(Prod(bd), 2))}};
      ExpectRunError({op}, f, Code::kShape, {"op 0 (Add", "'a'", "'b'", DimsString(ad), DimsString(bd)});
      ExpectInferError({op}, f, Code::kShape, {"op 0 (Add", "'a'", "'b'"});
      ExpectRunError({Op("Mul", {"a", "b"}, {"c"})}, f, Code::kShape, {"op 0 (Mul", "'a'", "'b'"});
    }
  }
  SUBCASE("dtype mismatch") {
    Feeds f = {{"a", Make<float>({2}, {1, 2})}, {"b", Make<double>({2}, {1, 2})}};
    ExpectRunError({op}, f, Code::kDType, {"op 0 (Add", "'a'", "'b'", "float64"});
    ExpectInferError({op}, f, Code::kDType, {"op 0 (Add", "'a'", "'b'"});
  }
  SUBCASE("unsupported dtype") {
    Tensor u({2}, DType::kUInt8);
    Feeds f = {{"a", u}, {"b", u}};
    ExpectRunError({op}, f, Code::kDType, {"op 0 (Add", "'a'", "uint8"});
  }
}

// ============================================================================
// Sum and Scale
// ============================================================================

TEST_CASE_TEMPLATE("Sum adds 1, 2 or 4 inputs", T, float, double, int32_t, int64_t) {
  const Dims dims = {3, 4};
  const char* const names[] = {"x0", "x1", "x2", "x3"};
  std::vector<std::vector<T>> xs;
  Feeds f;
  for (int i = 0; i < 4; ++i) {
    xs.push_back(Random<T>(12, 71 + static_cast<uint32_t>(i), -100, 100));
    f.push_back({names[i], Make<T>(dims, xs.back())});
  }
  for (int count : {1, 2, 4}) {
    CAPTURE(count);
    std::vector<std::string> in;
    std::vector<T> want(12, T(0));
    for (int i = 0; i < count; ++i) {
      in.push_back(names[i]);
      for (size_t k = 0; k < 12; ++k) want[k] = T(want[k] + xs[static_cast<size_t>(i)][k]);
    }
    auto ws = RunOp(Op("Sum", in, {"y"}), f);
    CHECK(ws->GetTensor("y").dims() == dims);
    if constexpr (std::is_integral_v<T>) {
      CHECK(Values<T>(ws->GetTensor("y")) == want);
    } else {
      CheckClose(Values<T>(ws->GetTensor("y")), AsDoubles(want), Tol<T>());
    }
    // In place into input 0.
    auto wi = RunOp(Op("Sum", in, {"x0"}), f);
    CHECK(Values<T>(wi->GetTensor("x0")) == Values<T>(ws->GetTensor("y")));
  }
  // The same blob twice.
  auto ws = RunOp(Op("Sum", {"x0", "x0", "x1"}, {"y"}), f);
  std::vector<T> want;
  for (size_t k = 0; k < 12; ++k) want.push_back(T(xs[0][k] + xs[0][k] + xs[1][k]));
  if constexpr (std::is_integral_v<T>) {
    CHECK(Values<T>(ws->GetTensor("y")) == want);
  } else {
    CheckClose(Values<T>(ws->GetTensor("y")), AsDoubles(want), Tol<T>());
  }
}

TEST_CASE("Sum errors") {
  const auto op = Op("Sum", {"a", "b", "c"}, {"y"});
  Feeds shape = {{"a", Make<float>({2, 3}, Random<float>(6, 1))},
                 {"b", Make<float>({2, 3}, Random<float>(6, 2))},
                 {"c", Make<float>({3, 2}, Random<float>(6, 3))}};
  ExpectRunError({op}, shape, Code::kShape, {"op 0 (Sum", "'c'", "'a'", "[3, 2]"});
  ExpectInferError({op}, shape, Code::kShape, {"op 0 (Sum", "'c'", "'a'"});
  Feeds dtype = {{"a", Make<float>({2}, {1, 2})}, {"b", Make<double>({2}, {1, 2})}, {"c", Make<float>({2}, {1, 2})}};
  ExpectRunError({op}, dtype, Code::kDType, {"op 0 (Sum", "'b'", "float64"});
  ExpectInferError({op}, dtype, Code::kDType, {"op 0 (Sum", "'b'"});
}

TEST_CASE_TEMPLATE("Scale multiplies by the scale argument", T, float, double) {
  auto x = Random<T>(24, 81);
  for (std::optional<double> s : {std::optional<double>{}, std::optional<double>{2.5}, std::optional<double>{-0.125},
                                  std::optional<double>{0.0}}) {
    CAPTURE(s.value_or(1.0));
    std::vector<Argument> args;
    if (s) args.push_back(FloatArg("scale", *s));
    auto ws = RunOp(Op("Scale", {"x"}, {"y"}, args), {{"x", Make<T>({2, 3, 4}, x)}});
    std::vector<double> want;
    for (T v : x) want.push_back(static_cast<double>(v * static_cast<T>(s.value_or(1.0))));
    CHECK(ws->GetTensor("y").dims() == Dims{2, 3, 4});
    CheckClose(Values<T>(ws->GetTensor("y")), want, 0);
    auto wi = RunOp(Op("Scale", {"x"}, {"x"}, args), {{"x", Make<T>({2, 3, 4}, x)}});
    CHECK(Values<T>(wi->GetTensor("x")) == Values<T>(ws->GetTensor("y")));
  }
  // An integer-valued scale argument is accepted too.
  auto ws = RunOp(Op("Scale", {"x"}, {"y"}, {IntArg("scale", 3)}), {{"x", Make<T>({2, 3, 4}, x)}});
  std::vector<double> want;
  for (T v : x) want.push_back(static_cast<double>(v * T(3)));
  CheckClose(Values<T>(ws->GetTensor("y")), want, 0);
}

TEST_CASE("Scale rejects integer tensors") {
  ExpectRunError({Op("Scale", {"x"}, {"y"}, {FloatArg("scale", 2)})}, {{"x", Make<int32_t>({2}, {1, 2})}},
                 Code::kDType, {"op 0 (Scale", "'x'"});
}

// ============================================================================
// Accuracy
// ============================================================================

TEST_CASE_TEMPLATE("Accuracy: top-k against a stable-sort reference", T, float, double) {
  const int64_t n = 50, d = 7;
  auto x = Random<T>(n * d, 91);
  auto labels = Random<int32_t>(n, 92, 0, d - 1);
  for (int64_t k : {1, 2, 3, 7}) {
    CAPTURE(k);
    std::vector<Argument> args;
    if (k != 1) args.push_back(IntArg("top_k", k));
    auto ws = RunOp(Op("Accuracy", {"x", "label"}, {"acc"}, args),
                    {{"x", Make<T>({n, d}, x)}, {"label", Make<int32_t>({n}, labels)}});
    const Tensor& acc = ws->GetTensor("acc");
    CHECK(acc.dims() == Dims{});
    CHECK(acc.dtype() == DType::kFloat32);
    CHECK(Values<float>(acc) == std::vector<float>{RefAccuracy(x, n, d, labels, k)});
  }
  // top_k = D: everything is correct.
  auto ws = RunOp(Op("Accuracy", {"x", "label"}, {"acc"}, {IntArg("top_k", d)}),
                  {{"x", Make<T>({n, d}, x)}, {"label", Make<int32_t>({n, 1}, labels)}});
  CHECK(Values<float>(ws->GetTensor("acc")) == std::vector<float>{1.0f});
}

TEST_CASE("Accuracy: hand-checked cases with ties") {
  auto acc = [](std::vector<float> x, int64_t d, std::vector<int32_t> labels, int64_t k) {
    const int64_t n = static_cast<int64_t>(labels.size());
    auto ws = RunOp(Op("Accuracy", {"x", "label"}, {"acc"}, {IntArg("top_k", k)}),
                    {{"x", Make<float>({n, d}, x)}, {"label", Make<int32_t>({n}, labels)}});
    float v = Values<float>(ws->GetTensor("acc")).at(0);
    CHECK(v == RefAccuracy(x, n, d, labels, k));  // the reference agrees
    return v;
  };
  // A tie with a lower index ranks above the label.
  CHECK(acc({1, 1, 0}, 3, {1}, 1) == 0.0f);
  CHECK(acc({1, 1, 0}, 3, {1}, 2) == 1.0f);
  // The lowest index among tied scores wins.
  CHECK(acc({1, 1, 0}, 3, {0}, 1) == 1.0f);
  CHECK(acc({2, 2, 2, 2}, 4, {3}, 3) == 0.0f);
  CHECK(acc({2, 2, 2, 2}, 4, {3}, 4) == 1.0f);
  CHECK(acc({0, 5, 5}, 3, {2}, 1) == 0.0f);
  CHECK(acc({0, 5, 5}, 3, {2}, 2) == 1.0f);
  // A higher score at a higher index ranks above too.
  CHECK(acc({3, 1, 4}, 3, {0}, 1) == 0.0f);
  // Several rows: 2 of 4 right at top 1, 3 of 4 at top 2.
  std::vector<float> x = {0.9f, 0.1f, 0.0f,   // argmax 0
                          0.2f, 0.5f, 0.3f,   // argmax 1, second 2
                          0.4f, 0.4f, 0.2f,   // tie 0/1
                          0.1f, 0.2f, 0.7f};  // argmax 2, second 1
  CHECK(acc(x, 3, {0, 2, 1, 2}, 1) == 0.5f);
  CHECK(acc(x, 3, {0, 2, 1, 0}, 2) == 0.75f);
  // No samples.
  auto ws = RunOp(Op("Accuracy", {"x", "label"}, {"acc"}), {{"x", Make<float>({0, 3}, {})}, {"label", Make<int32_t>({0}, {})}});
  CHECK(Values<float>(ws->GetTensor("acc")) == std::vector<float>{0.0f});
}

TEST_CASE("Accuracy errors") {
  const auto op = Op("Accuracy", {"x", "label"}, {"acc"});
  const auto x = Make<float>({2, 3}, Random<float>(6, 1));
  ExpectRunError({op}, {{"x", x}, {"label", Make<int32_t>({2}, {0, 3})}}, Code::kOutOfRange,
                 {"op 0 (Accuracy", "'label'", "label 3", "sample 1"});
  ExpectRunError({op}, {{"x", x}, {"label", Make<int32_t>({2}, {-1, 0})}}, Code::kOutOfRange,
                 {"op 0 (Accuracy", "'label'", "label -1"});
  Feeds i64 = {{"x", x}, {"label", Make<int64_t>({2}, {0, 1})}};
  ExpectRunError({op}, i64, Code::kDType, {"op 0 (Accuracy", "'label'", "int64"});
  ExpectInferError({op}, i64, Code::kDType, {"op 0 (Accuracy", "'label'"});
  Feeds count = {{"x", x}, {"label", Make<int32_t>({3}, {0, 1, 2})}};
  ExpectRunError({op}, count, Code::kShape, {"op 0 (Accuracy", "'label'"});
  ExpectInferError({op}, count, Code::kShape, {"op 0 (Accuracy", "'label'"});
  Feeds rank = {{"x", Make<float>({6}, Random<float>(6, 1))}, {"label", Make<int32_t>({6}, {0, 0, 0, 0, 0, 0})}};
  ExpectRunError({op}, rank, Code::kShape, {"op 0 (Accuracy", "'x'"});
  ExpectInferError({op}, rank, Code::kShape, {"op 0 (Accuracy", "'x'"});
  ExpectRunError({Op("Accuracy", {"x", "label"}, {"acc"}, {IntArg("top_k", 0)})},
                 {{"x", x}, {"label", Make<int32_t>({2}, {0, 1})}}, Code::kInvalidArgument,
                 {"op 0 (Accuracy", "top_k"});
  ExpectRunError({op}, {{"x", Make<int32_t>({1, 2}, {0, 1})}, {"label", Make<int32_t>({1}, {0})}}, Code::kDType,
                 {"op 0 (Accuracy", "'x'"});
}

TEST_CASE("elementwise ops split across threads: the same bits on 1 and 2 threads, the references' values") {
  // Past the parts' size (2^16 elements; 2^14 for Sigmoid, Tanh and Clip), with
  // every broadcast path: same shapes, a scalar, and the general walk whose
  // parts start mid-tensor.
  const Dims big = {3, 257, 181};
  const int64_t n = Prod(big);
  const auto a = Random<float>(n, 31, -2, 2), b = Random<float>(n, 32, -2, 2), c = Random<float>(n, 33, -2, 2);
  const auto row = Random<float>(181, 34, -2, 2), col = Random<float>(3 * 257, 35, -2, 2);
  const Feeds feeds = {{"a", Make<float>(big, a)},           {"b", Make<float>(big, b)},
                       {"c", Make<float>(big, c)},           {"s", Make<float>({1}, {1.5f})},
                       {"row", Make<float>({181}, row)},     {"col", Make<float>({3, 257, 1}, col)}};
  const std::vector<OperatorDef> ops = {
      Op("Add", {"a", "b"}, {"same"}),
      Op("Mul", {"a", "s"}, {"scalar"}),
      Op("Sub", {"a", "row"}, {"rows"}),
      Op("Div", {"col", "a"}, {"cols"}),
      Op("Sum", {"a", "b", "c"}, {"sum3"}),
      Op("Scale", {"a"}, {"scaled"}, {FloatArg("scale", 0.25f)}),
      Op("Sigmoid", {"a"}, {"sig"}),
      Op("SigmoidGradient", {"sig", "b"}, {"dsig"}),
      Op("Tanh", {"a"}, {"tanh"}),
      Op("TanhGradient", {"tanh", "b"}, {"dtanh"}),
      Op("Clip", {"a"}, {"clip"}, {FloatArg("min", -1), FloatArg("max", 0.5)}),
      Op("ClipGradient", {"clip", "b"}, {"dclip"}, {FloatArg("min", -1), FloatArg("max", 0.5)}),
  };
  auto one = SameBitsOnThreads(
      ops, feeds,
      {"same", "scalar", "rows", "cols", "sum3", "scaled", "sig", "dsig", "tanh", "dtanh", "clip", "dclip"}, {1, 2});
  CHECK(one["same"] == RefBinary(a, big, b, big, big, [](float x, float y) { return x + y; }));
  CHECK(one["scalar"] == RefBinary(a, big, std::vector<float>{1.5f}, Dims{1}, big, [](float x, float y) { return x * y; }));
  CHECK(one["rows"] == RefBinary(a, big, row, Dims{181}, big, [](float x, float y) { return x - y; }));
  CHECK(one["cols"] == RefBinary(col, Dims{3, 257, 1}, a, big, big, [](float x, float y) { return x / y; }));
  for (int64_t i = 0; i < n; i += 997) {
    const size_t k = static_cast<size_t>(i);
    CHECK(one["sum3"][k] == (a[k] + b[k]) + c[k]);
    CHECK(one["scaled"][k] == a[k] * 0.25f);
    CHECK(one["sig"][k] == doctest::Approx(1 / (1 + std::exp(-static_cast<double>(a[k])))).epsilon(1e-6));
    CHECK(one["tanh"][k] == doctest::Approx(std::tanh(static_cast<double>(a[k]))).epsilon(1e-6));
    CHECK(one["clip"][k] == std::min(std::max(a[k], -1.0f), 0.5f));
    CHECK(one["dclip"][k] == (a[k] > -1.0f && a[k] < 0.5f ? b[k] : 0.0f));
  }
}

TEST_CASE("row-wise ops split across threads give the bits of one thread, and agree with the references") {
  // Enough rows of 10 classes for several parts (SoftmaxWithLoss, Softmax and
  // LogSoftmax take ~51 rows a part, their gradients ~102, Accuracy ~204).
  const int64_t rows = 1000, cols = 10;
  const auto x = Random<float>(rows * cols, 21, -4, 4);
  const auto dy = Random<float>(rows * cols, 22, -1, 1);
  const auto w = Random<float>(rows, 23, 0, 2);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) labels[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % cols);
  const Feeds feeds = {{"x", Make<float>({rows, cols}, x)},
                       {"dy", Make<float>({rows, cols}, dy)},
                       {"w", Make<float>({rows}, w)},
                       {"label", Make<int32_t>({rows}, labels)},
                       {"dl", Make<float>({}, {0.5f})}};
  const std::vector<OperatorDef> ops = {
      Op("Softmax", {"x"}, {"p"}),
      Op("SoftmaxGradient", {"p", "dy"}, {"dx"}),
      Op("SoftmaxWithLoss", {"x", "label", "w"}, {"pl", "loss"}),
      Op("SoftmaxWithLossGradient", {"pl", "label", "dl", "w"}, {"dxl"}),
      Op("Accuracy", {"x", "label"}, {"acc"}, {IntArg("top_k", 2)}),
      Op("LogSoftmax", {"x"}, {"lp"}),
      Op("LogSoftmaxGradient", {"lp", "dy"}, {"dlx"}),
  };
  auto one = SameBitsOnThreads(ops, feeds, {"p", "dx", "pl", "loss", "dxl", "acc", "lp", "dlx"}, {1, 2, 3, 8});
  CheckClose(AsDoubles(one["p"]), RefSoftmax(x, rows, cols), 1e-6);
  CheckClose(AsDoubles(one["lp"]), RefLogSoftmax(x, rows, cols), 1e-6);
  CHECK(one["pl"] == one["p"]);  // one routine for both softmaxes
  double total = 0, wsum = 0;
  const auto ref = RefSoftmax(x, rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    const size_t k = static_cast<size_t>(i);
    total -= static_cast<double>(w[k]) * std::log(ref[static_cast<size_t>(i * cols + labels[k])]);
    wsum += static_cast<double>(w[k]);
  }
  CHECK(one["loss"][0] == doctest::Approx(total / wsum).epsilon(1e-5));
  CHECK(one["acc"][0] == RefAccuracy(x, rows, cols, labels, 2));
  // A bad label is refused naming the first bad sample, however the rows split.
  std::vector<int32_t> bad = labels;
  bad[700] = 10;
  bad[900] = -1;
  for (int threads : {1, 8}) {
    IntraOpThreadsScope scope(threads);
    ExpectRunError({Op("SoftmaxWithLoss", {"x", "label"}, {"pl", "loss"})},
                   {{"x", Make<float>({rows, cols}, x)}, {"label", Make<int32_t>({rows}, bad)}}, Code::kOutOfRange,
                   {"label 10", "sample 700"});
  }
}

// ============================================================================
// Reshape and Flatten
// ============================================================================

TEST_CASE("Reshape: 0 copies a dim, -1 is inferred; the data is shared, not copied") {
  const auto x = Random<float>(24, 101);
  struct Case {
    std::vector<int64_t> shape;
    Dims want;
  };
  const Case cases[] = {{{0, -1}, {2, 12}},   {{-1, 4}, {6, 4}},        {{4, 0, 2}, {4, 3, 2}},
                        {{-1}, {24}},         {{0, 0, 0}, {2, 3, 4}},   {{2, -1, 2}, {2, 6, 2}},
                        {{24, 1}, {24, 1}},   {{1, 1, 24}, {1, 1, 24}}, {{0, 3, -1, 2}, {2, 3, 2, 2}}};
  for (const Case& c : cases) {
    CAPTURE(DimsString(c.shape));
    auto ws = RunOp(Op("Reshape", {"x"}, {"y", "old"}, {IntsArg("shape", c.shape)}), {{"x", Make<float>({2, 3, 4}, x)}});
    const Tensor& y = ws->GetTensor("y");
    CHECK(y.dims() == c.want);
    CHECK(Values<float>(y) == x);
    CHECK(y.storage() == ws->GetTensor("x").storage());  // metadata only
    CHECK(ws->GetTensor("x").dims() == Dims{2, 3, 4});   // the input keeps its shape
    CHECK(Values<int64_t>(ws->GetTensor("old")) == std::vector<int64_t>{2, 3, 4});
    CHECK(ws->GetTensor("old").dims() == Dims{3});
    // In place.
    auto wi = RunOp(Op("Reshape", {"x"}, {"x"}, {IntsArg("shape", c.shape)}), {{"x", Make<float>({2, 3, 4}, x)}});
    CHECK(wi->GetTensor("x").dims() == c.want);
    CHECK(Values<float>(wi->GetTensor("x")) == x);
    // From a shape tensor; its values are unknown to shape inference.
    auto wt = RunOp(Op("Reshape", {"x", "s"}, {"y", "old"}),
                    {{"x", Make<float>({2, 3, 4}, x)},
                     {"s", Make<int64_t>({static_cast<int64_t>(c.shape.size())}, c.shape)}},
                    Infer::kPartial);
    CHECK(wt->GetTensor("y").dims() == c.want);
    CHECK(Values<float>(wt->GetTensor("y")) == x);
    CHECK(Values<int64_t>(wt->GetTensor("old")) == std::vector<int64_t>{2, 3, 4});
  }
  // Other dtypes and empty tensors.
  auto wi = RunOp(Op("Reshape", {"x"}, {"y"}, {IntsArg("shape", {3, -1})}), {{"x", Make<int64_t>({6}, {1, 2, 3, 4, 5, 6})}});
  CHECK(wi->GetTensor("y").dims() == Dims{3, 2});
  CHECK(Values<int64_t>(wi->GetTensor("y")) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  auto we = RunOp(Op("Reshape", {"x"}, {"y"}, {IntsArg("shape", {-1, 5})}), {{"x", Make<double>({0, 10}, {})}});
  CHECK(we->GetTensor("y").dims() == Dims{0, 5});
  auto ws = RunOp(Op("Reshape", {"x"}, {"y"}, {IntsArg("shape", {})}), {{"x", Make<float>({1, 1}, {7})}});
  CHECK(ws->GetTensor("y").dims() == Dims{});
}

TEST_CASE("Reshape errors name the op and the blob") {
  const Feeds f = {{"x", Make<float>({2, 3, 4}, Random<float>(24, 1))}};
  auto reshape = [](std::vector<int64_t> s) { return Op("Reshape", {"x"}, {"y"}, {IntsArg("shape", std::move(s))}); };
  SUBCASE("two -1") {
    ExpectRunError({reshape({-1, -1})}, f, Code::kShape, {"op 0 (Reshape", "'x'", "-1"});
    ExpectInferError({reshape({-1, -1})}, f, Code::kShape, {"op 0 (Reshape", "'x'"});
  }
  SUBCASE("wrong element count") {
    ExpectRunError({reshape({5, 5})}, f, Code::kShape, {"op 0 (Reshape", "'x'", "24", "25"});
    ExpectInferError({reshape({5, 5})}, f, Code::kShape, {"op 0 (Reshape", "'x'"});
    ExpectRunError({reshape({5, -1})}, f, Code::kShape, {"op 0 (Reshape", "'x'"});
    ExpectInferError({reshape({5, -1})}, f, Code::kShape, {"op 0 (Reshape", "'x'"});
  }
  SUBCASE("other bad entries") {
    ExpectRunError({reshape({2, 3, 4, 0})}, f, Code::kShape, {"op 0 (Reshape", "'x'", "entry 3"});
    ExpectRunError({reshape({-2, -12})}, f, Code::kShape, {"op 0 (Reshape", "'x'", "negative"});
    ExpectInferError({reshape({-2, -12})}, f, Code::kShape, {"op 0 (Reshape", "'x'"});
  }
  SUBCASE("shape tensor") {
    Feeds g = f;
    g.push_back({"s", Make<int32_t>({2}, {6, 4})});
    ExpectRunError({Op("Reshape", {"x", "s"}, {"y"})}, g, Code::kShape, {"op 0 (Reshape", "'s'", "int32"});
    Feeds h = f;
    h.push_back({"s", Make<int64_t>({2}, {-1, -1})});
    ExpectRunError({Op("Reshape", {"x", "s"}, {"y"})}, h, Code::kShape, {"op 0 (Reshape", "'x'"});
    ExpectRunError({Op("Reshape", {"x", "s"}, {"y"}, {IntsArg("shape", {6, 4})})}, h, Code::kInvalidArgument,
                   {"op 0 (Reshape", "shape"});
  }
  SUBCASE("no shape at all") {
    ExpectRunError({Op("Reshape", {"x"}, {"y"})}, f, Code::kInvalidArgument, {"op 0 (Reshape", "shape"});
  }
}

TEST_CASE("Flatten at axis 0, 1, 2, 3 and -1") {
  const auto x = Random<double>(24, 111);
  struct Case {
    std::optional<int64_t> axis;
    Dims want;
  };
  for (const Case& c : {Case{0, {1, 24}}, Case{std::nullopt, {2, 12}}, Case{1, {2, 12}}, Case{2, {6, 4}},
                        Case{3, {24, 1}}, Case{-1, {6, 4}}}) {
    CAPTURE(c.axis.value_or(1));
    std::vector<Argument> args;
    if (c.axis) args.push_back(IntArg("axis", *c.axis));
    auto ws = RunOp(Op("Flatten", {"x"}, {"y"}, args), {{"x", Make<double>({2, 3, 4}, x)}});
    CHECK(ws->GetTensor("y").dims() == c.want);
    CHECK(ws->GetTensor("y").dtype() == DType::kFloat64);
    CHECK(Values<double>(ws->GetTensor("y")) == x);
    CHECK(ws->GetTensor("y").storage() == ws->GetTensor("x").storage());
    auto wi = RunOp(Op("Flatten", {"x"}, {"x"}, args), {{"x", Make<double>({2, 3, 4}, x)}});
    CHECK(wi->GetTensor("x").dims() == c.want);
    CHECK(Values<double>(wi->GetTensor("x")) == x);
  }
  const Feeds f = {{"x", Make<double>({2, 3, 4}, x)}};
  auto op = Op("Flatten", {"x"}, {"y"}, {IntArg("axis", 4)});
  ExpectRunError({op}, f, Code::kOutOfRange, {"op 0 (Flatten", "'x'", "axis 4"});
  ExpectInferError({op}, f, Code::kOutOfRange, {"op 0 (Flatten", "'x'", "axis 4"});
}

// ============================================================================
// Copy
// ============================================================================

TEST_CASE("Copy is a deep copy of any dtype; in place it is a no-op") {
  auto x = Random<float>(6, 121);
  auto ws = RunOps({Op("Copy", {"x"}, {"y"}), Op("Copy", {"i"}, {"j"}), Op("Copy", {"u"}, {"v"}),
                    Op("Copy", {"e"}, {"f"})},
                   {{"x", Make<float>({2, 3}, x)},
                    {"i", Make<int64_t>({3}, {1, -2, 1LL << 40})},
                    {"u", Make<uint8_t>({2}, {0, 255})},
                    {"e", Make<float>({0, 4}, {})}});
  CHECK(ws->GetTensor("y").dims() == Dims{2, 3});
  CHECK(Values<float>(ws->GetTensor("y")) == x);
  CHECK(ws->GetTensor("y").storage() != ws->GetTensor("x").storage());
  CHECK(Values<int64_t>(ws->GetTensor("j")) == std::vector<int64_t>{1, -2, 1LL << 40});
  CHECK(Values<uint8_t>(ws->GetTensor("v")) == std::vector<uint8_t>{0, 255});
  CHECK(ws->GetTensor("f").dims() == Dims{0, 4});
  auto wi = RunOp(Op("Copy", {"x"}, {"x"}), {{"x", Make<float>({2, 3}, x)}});
  CHECK(Values<float>(wi->GetTensor("x")) == x);
  // Writing the source afterwards does not change the copy.
  auto wa = RunOps({Op("Copy", {"x"}, {"y"}), Op("Relu", {"x"}, {"x"})}, {{"x", Make<float>({2, 3}, x)}});
  CHECK(Values<float>(wa->GetTensor("y")) == x);
}

// ============================================================================
// Fill operators
// ============================================================================

TEST_CASE("ConstantFill: value and dtype") {
  SUBCASE("float32 by default") {
    auto ws = RunOp(Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2, 3}), FloatArg("value", 1.5)}), {});
    CHECK(ws->GetTensor("y").dims() == Dims{2, 3});
    CHECK(Values<float>(ws->GetTensor("y")) == std::vector<float>(6, 1.5f));
    auto wz = RunOp(Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {4})}), {});
    CHECK(Values<float>(wz->GetTensor("y")) == std::vector<float>(4, 0.0f));
  }
  SUBCASE("float64") {
    auto ws = RunOp(Op("ConstantFill", {}, {"y"},
                       {IntsArg("shape", {3}), FloatArg("value", 0.1), IntArg("dtype", int64_t(DType::kFloat64))}),
                    {});
    CHECK(Values<double>(ws->GetTensor("y")) == std::vector<double>(3, 0.1));
  }
  SUBCASE("int32") {
    auto ws = RunOp(Op("ConstantFill", {}, {"y"},
                       {IntsArg("shape", {2, 2}), IntArg("value", 7), IntArg("dtype", int64_t(DType::kInt32))}),
                    {});
    CHECK(ws->GetTensor("y").dtype() == DType::kInt32);
    CHECK(Values<int32_t>(ws->GetTensor("y")) == std::vector<int32_t>(4, 7));
    auto wn = RunOp(Op("ConstantFill", {}, {"y"},
                       {IntsArg("shape", {2}), FloatArg("value", -3.0), IntArg("dtype", int64_t(DType::kInt32))}),
                    {});
    CHECK(Values<int32_t>(wn->GetTensor("y")) == std::vector<int32_t>(2, -3));
  }
  SUBCASE("int64, exact beyond 2^53") {
    const int64_t big = (int64_t{1} << 53) + 1;  // not a double
    auto ws = RunOp(Op("ConstantFill", {}, {"y"},
                       {IntsArg("shape", {3}), IntArg("value", big), IntArg("dtype", int64_t(DType::kInt64))}),
                    {});
    CHECK(ws->GetTensor("y").dtype() == DType::kInt64);
    CHECK(Values<int64_t>(ws->GetTensor("y")) == std::vector<int64_t>(3, big));
    auto wn = RunOp(Op("ConstantFill", {}, {"y"},
                       {IntsArg("shape", {1}), IntArg("value", -(int64_t{1} << 40)), IntArg("dtype", int64_t(DType::kInt64))}),
                    {});
    CHECK(Values<int64_t>(wn->GetTensor("y")) == std::vector<int64_t>{-(int64_t{1} << 40)});
  }
  SUBCASE("bool and uint8") {
    auto wt = RunOp(Op("ConstantFill", {}, {"y"},
                       {IntsArg("shape", {3}), IntArg("value", 1), IntArg("dtype", int64_t(DType::kBool))}),
                    {});
    CHECK(wt->GetTensor("y").dtype() == DType::kBool);
    CHECK(Values<bool>(wt->GetTensor("y")) == std::vector<bool>(3, true));
    auto wf = RunOp(Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {3}), IntArg("dtype", int64_t(DType::kBool))}), {});
    CHECK(Values<bool>(wf->GetTensor("y")) == std::vector<bool>(3, false));
    auto wu = RunOp(Op("ConstantFill", {}, {"y"},
                       {IntsArg("shape", {2}), IntArg("value", 200), IntArg("dtype", int64_t(DType::kUInt8))}),
                    {});
    CHECK(Values<uint8_t>(wu->GetTensor("y")) == std::vector<uint8_t>(2, 200));
  }
  SUBCASE("scalar and empty shapes") {
    auto ws = RunOp(Op("ConstantFill", {}, {"y"}, {FloatArg("value", 2)}), {});
    CHECK(ws->GetTensor("y").dims() == Dims{});
    CHECK(Values<float>(ws->GetTensor("y")) == std::vector<float>{2.0f});
    auto we = RunOp(Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {0, 3})}), {});
    CHECK(we->GetTensor("y").dims() == Dims{0, 3});
  }
}

TEST_CASE("fills take their shape from a like-input or, with input_as_shape, from its values") {
  const Feeds like = {{"x", Make<double>({3, 2}, Random<double>(6, 1))}};
  SUBCASE("like: the input's dims, the dtype argument (default: the input's dtype)") {
    auto ws = RunOp(Op("ConstantFill", {"x"}, {"y"}, {FloatArg("value", 4)}), like);
    CHECK(ws->GetTensor("y").dims() == Dims{3, 2});
    CHECK(Values<double>(ws->GetTensor("y")) == std::vector<double>(6, 4.0));
    auto wi = RunOp(Op("ConstantFill", {"x"}, {"y"}, {FloatArg("value", 4), IntArg("dtype", int64_t(DType::kInt32))}), like);
    CHECK(Values<int32_t>(wi->GetTensor("y")) == std::vector<int32_t>(6, 4));
    for (const char* type : {"UniformFill", "GaussianFill", "XavierFill"}) {
      CAPTURE(type);
      auto wr = RunOp(Op(type, {"x"}, {"y"}), like);
      CHECK(wr->GetTensor("y").dims() == Dims{3, 2});
      CHECK(wr->GetTensor("y").dtype() == DType::kFloat64);
      auto wf = RunOp(Op(type, {"x"}, {"y"}, {IntArg("dtype", int64_t(DType::kFloat32))}), like);
      CHECK(wf->GetTensor("y").dtype() == DType::kFloat32);
    }
  }
  SUBCASE("like, in place") {
    auto ws = RunOp(Op("ConstantFill", {"x"}, {"x"}, {FloatArg("value", -1), IntArg("dtype", int64_t(DType::kFloat64))}),
                    like);
    CHECK(ws->GetTensor("x").dims() == Dims{3, 2});
    CHECK(Values<double>(ws->GetTensor("x")) == std::vector<double>(6, -1.0));
  }
  SUBCASE("input_as_shape") {
    const Feeds s = {{"s", Make<int64_t>({3}, {2, 1, 3})}};
    auto ws = RunOp(Op("ConstantFill", {"s"}, {"y"}, {IntArg("input_as_shape", 1), FloatArg("value", 9)}), s,
                    Infer::kPartial);
    CHECK(ws->GetTensor("y").dims() == Dims{2, 1, 3});
    CHECK(Values<float>(ws->GetTensor("y")) == std::vector<float>(6, 9.0f));
    auto wu = RunOp(Op("UniformFill", {"s"}, {"y"}, {IntArg("input_as_shape", 1)}), s, Infer::kPartial);
    CHECK(wu->GetTensor("y").dims() == Dims{2, 1, 3});
    auto wi = RunOp(Op("ConstantFill", {"s"}, {"s"}, {IntArg("input_as_shape", 1), FloatArg("value", 9)}), s,
                    Infer::kPartial);
    CHECK(wi->GetTensor("s").dims() == Dims{2, 1, 3});
    CHECK(wi->GetTensor("s").dtype() == DType::kFloat32);
    // An empty shape tensor gives a scalar.
    auto we = RunOp(Op("ConstantFill", {"s"}, {"y"}, {IntArg("input_as_shape", 1), FloatArg("value", 1)}),
                    {{"s", Make<int64_t>({0}, {})}}, Infer::kPartial);
    CHECK(we->GetTensor("y").dims() == Dims{});
  }
}

TEST_CASE("fill errors") {
  ExpectRunError({Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2}), IntArg("dtype", 99)})}, {}, Code::kDType,
                 {"op 0 (ConstantFill", "dtype", "99"});
  ExpectInferError({Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2}), IntArg("dtype", 99)})}, {}, Code::kDType,
                   {"op 0 (ConstantFill", "dtype", "99"});
  ExpectRunError({Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2}), IntArg("dtype", 0)})}, {}, Code::kDType,
                 {"op 0 (ConstantFill", "dtype"});
  // A value that would wrap to a valid dtype as int32 (2^32 + 1 -> 1).
  const int64_t wraps = (int64_t{1} << 32) + 1;
  ExpectRunError({Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2}), IntArg("dtype", wraps)})}, {}, Code::kDType,
                 {"op 0 (ConstantFill", "dtype", std::to_string(wraps)});
  ExpectInferError({Op("UniformFill", {"x"}, {"y"}, {IntArg("dtype", wraps)})}, {{"x", Make<float>({1}, {0})}},
                   Code::kDType, {"op 0 (UniformFill", "dtype"});
  ExpectRunError({Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2, -1})})}, {}, Code::kShape,
                 {"op 0 (ConstantFill", "[2, -1]"});
  ExpectInferError({Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2, -1})})}, {}, Code::kShape,
                   {"op 0 (ConstantFill", "[2, -1]"});
  ExpectRunError({Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2}), IntArg("dtype", int64_t(DType::kFloat16))})}, {},
                 Code::kDType, {"op 0 (ConstantFill", "float16"});
  ExpectRunError({Op("ConstantFill", {"s"}, {"y"}, {IntArg("input_as_shape", 1)})}, {{"s", Make<int32_t>({2}, {2, 3})}},
                 Code::kShape, {"op 0 (ConstantFill", "int64"});
  ExpectRunError({Op("ConstantFill", {"s"}, {"y"}, {IntArg("input_as_shape", 1)})}, {{"s", Make<int64_t>({2}, {2, -3})}},
                 Code::kShape, {"op 0 (ConstantFill", "[2, -3]"});
  ExpectRunError({Op("UniformFill", {}, {"y"}, {IntsArg("shape", {2}), FloatArg("min", 1), FloatArg("max", 0)})}, {},
                 Code::kInvalidArgument, {"op 0 (UniformFill", "min"});
  ExpectRunError({Op("UniformFill", {}, {"y"}, {IntsArg("shape", {2}), IntArg("dtype", int64_t(DType::kInt32))})}, {},
                 Code::kDType, {"op 0 (UniformFill", "int32"});
  ExpectRunError({Op("GaussianFill", {}, {"y"}, {IntsArg("shape", {2}), FloatArg("std", -1)})}, {},
                 Code::kInvalidArgument, {"op 0 (GaussianFill", "std"});
  ExpectRunError({Op("XavierFill", {}, {"y"})}, {}, Code::kShape, {"op 0 (XavierFill"});
  ExpectRunError({Op("XavierFill", {}, {"y"}, {IntsArg("shape", {0, 3})})}, {}, Code::kShape, {"op 0 (XavierFill"});
  // The wrong kind: validation rejects it when the net is created.
  ExpectBuildError({Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {2}), FloatArg("dtype", 1.0)})}, {},
                   Code::kInvalidArgument, {"op 0 (ConstantFill", "dtype", "must be an int"});
}

TEST_CASE_TEMPLATE("UniformFill: within [min, max], seeded and deterministic", T, float, double) {
  const int64_t dtype = static_cast<int64_t>(DTypeOf<T>());
  auto fill = [&](std::vector<Argument> args, const std::string& out = "y") {
    args.push_back(IntsArg("shape", {100, 100}));
    args.push_back(IntArg("dtype", dtype));
    auto ws = RunOp(Op("UniformFill", {}, {out}, std::move(args)), {});
    CHECK(ws->GetTensor(out).dims() == Dims{100, 100});
    return Values<T>(ws->GetTensor(out));
  };
  auto v = fill({FloatArg("min", -2), FloatArg("max", 3), IntArg("seed", 7)});
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  CHECK(*lo >= T(-2));
  CHECK(*hi <= T(3));
  CHECK(*lo < T(-1.99));  // spread over the whole range
  CHECK(*hi > T(2.99));
  CHECK(Mean(AsDoubles(v)) == doctest::Approx(0.5).epsilon(0.1));
  CHECK(Stdev(AsDoubles(v)) == doctest::Approx(5.0 / std::sqrt(12.0)).epsilon(0.02));
  CHECK(fill({FloatArg("min", -2), FloatArg("max", 3), IntArg("seed", 7)}) == v);
  auto other = fill({FloatArg("min", -2), FloatArg("max", 3), IntArg("seed", 8)});
  size_t same = 0;
  for (size_t i = 0; i < v.size(); ++i) same += other[i] == v[i];
  CHECK(same < 10);
  // Defaults: [0, 1), seed from the output name.
  auto d = fill({});
  auto [dlo, dhi] = std::minmax_element(d.begin(), d.end());
  CHECK(*dlo >= T(0));
  CHECK(*dhi <= T(1));
  CHECK(fill({}) == d);
  CHECK(fill({}, "z") != d);
  // Degenerate range.
  CHECK(fill({FloatArg("min", 1.5), FloatArg("max", 1.5)}) == std::vector<T>(10000, T(1.5)));
}

// Element i of a random fill is Philox's value for (seed, i), rounded to the
// dtype: independent of the shape (a prefix of a longer fill), and what a
// CUDA kernel computes for it.
TEST_CASE("random fills are pure functions of (seed, index)") {
  const uint64_t seed = 31337;
  auto fill = [&](const char* type, Dims shape, DType dtype, std::vector<Argument> args = {}) {
    args.push_back(IntsArg("shape", shape));
    args.push_back(IntArg("dtype", static_cast<int64_t>(dtype)));
    args.push_back(IntArg("seed", static_cast<int64_t>(seed)));
    auto ws = RunOp(Op(type, {}, {"y"}, std::move(args)), {});
    return ws->GetTensor("y");
  };
  const std::vector<Argument> uniform_args{FloatArg("min", -0.5), FloatArg("max", 2.0)};
  const std::vector<Argument> gauss_args{FloatArg("mean", 1.0), FloatArg("std", 0.25)};
  const double xavier = std::sqrt(3.0 / 7.0);  // [5, 7]: fan_in 7
  struct Kind {
    const char* type;
    std::vector<Argument> args;
    Dims shape;
    std::function<double(uint64_t)> value;
  };
  const Kind kinds[] = {
      {"UniformFill", uniform_args, {13, 11}, [&](uint64_t i) { return philox::UniformValue(seed, i, -0.5, 2.0); }},
      {"GaussianFill", gauss_args, {13, 11}, [&](uint64_t i) { return philox::NormalValue(seed, i, 1.0, 0.25); }},
      {"XavierFill", {}, {5, 7}, [&](uint64_t i) { return philox::UniformValue(seed, i, -xavier, xavier); }},
  };
  for (const Kind& k : kinds) {
    CAPTURE(k.type);
    const Tensor f64 = fill(k.type, k.shape, DType::kFloat64, k.args);
    const Tensor f32 = fill(k.type, k.shape, DType::kFloat32, k.args);
    for (int64_t i = 0; i < f64.numel(); ++i) {
      const double want = k.value(static_cast<uint64_t>(i));
      REQUIRE(f64.data<double>()[i] == want);
      REQUIRE(f32.data<float>()[i] == static_cast<float>(want));  // the float64 fill rounded
    }
  }
  // Another shape: the same elements where the indices overlap.
  const Tensor longer = fill("UniformFill", {1001}, DType::kFloat32, uniform_args);
  const Tensor shorter = fill("UniformFill", {3, 7}, DType::kFloat32, uniform_args);
  for (int64_t i = 0; i < shorter.numel(); ++i) CHECK(longer.data<float>()[i] == shorter.data<float>()[i]);
}

TEST_CASE_TEMPLATE("GaussianFill: mean and std over 100k samples, seeded", T, float, double) {
  auto fill = [&](int64_t seed) {
    auto ws = RunOp(Op("GaussianFill", {}, {"y"},
                       {IntsArg("shape", {100000}), FloatArg("mean", 2), FloatArg("std", 3), IntArg("seed", seed),
                        IntArg("dtype", static_cast<int64_t>(DTypeOf<T>()))}),
                    {});
    return Values<T>(ws->GetTensor("y"));
  };
  auto v = fill(5);
  auto d = AsDoubles(v);
  CHECK(std::abs(Mean(d) - 2.0) < 0.05);  // standard error 0.0095
  CHECK(std::abs(Stdev(d) - 3.0) < 0.04);  // standard error 0.0067
  double within = 0;
  for (double x : d) within += std::abs(x - 2.0) < 3.0;
  CHECK(within / 1e5 == doctest::Approx(0.6827).epsilon(0.02));
  CHECK(std::count_if(d.begin(), d.end(), [](double x) { return !std::isfinite(x); }) == 0);
  CHECK(fill(5) == v);
  CHECK(fill(6) != v);
  // std = 0: exactly the mean.
  auto ws = RunOp(Op("GaussianFill", {}, {"y"}, {IntsArg("shape", {10}), FloatArg("mean", -1), FloatArg("std", 0)}), {});
  CHECK(Values<float>(ws->GetTensor("y")) == std::vector<float>(10, -1.0f));
}

TEST_CASE("XavierFill: uniform within sqrt(3 / fan_in), fan_in = numel / dim 0") {
  struct Case {
    Dims dims;
    double fan_in;
  };
  for (const Case& c : {Case{{500, 40}, 40}, Case{{80, 3, 5, 5}, 75}, Case{{20000}, 1}}) {
    CAPTURE(DimsString(c.dims));
    auto ws = RunOp(Op("XavierFill", {}, {"w"}, {IntsArg("shape", c.dims), IntArg("seed", 3)}), {});
    auto v = AsDoubles(Values<float>(ws->GetTensor("w")));
    const double bound = std::sqrt(3.0 / c.fan_in);
    double mx = 0;
    for (double x : v) mx = std::max(mx, std::abs(x));
    CHECK(mx <= bound * (1 + 1e-6));
    CHECK(mx > bound * 0.99);
    CHECK(std::abs(Mean(v)) < bound * 0.05);
    // Uniform in [-s, s] has variance s^2 / 3 = 1 / fan_in.
    CHECK(Stdev(v) * Stdev(v) == doctest::Approx(1.0 / c.fan_in).epsilon(0.05));
  }
  auto a = RunOp(Op("XavierFill", {}, {"w"}, {IntsArg("shape", {4, 4}), IntArg("seed", 1)}), {});
  auto b = RunOp(Op("XavierFill", {}, {"w"}, {IntsArg("shape", {4, 4}), IntArg("seed", 1)}), {});
  auto c = RunOp(Op("XavierFill", {}, {"w"}, {IntsArg("shape", {4, 4}), IntArg("seed", 2)}), {});
  CHECK(Values<float>(a->GetTensor("w")) == Values<float>(b->GetTensor("w")));
  CHECK(Values<float>(a->GetTensor("w")) != Values<float>(c->GetTensor("w")));
  auto wd = RunOp(Op("XavierFill", {}, {"w"}, {IntsArg("shape", {4, 4}), IntArg("dtype", int64_t(DType::kFloat64))}), {});
  CHECK(wd->GetTensor("w").dtype() == DType::kFloat64);
}

TEST_CASE("GivenTensorFill: its elements in float32, float64, int32 and int64; scalars and empty shapes") {
  SUBCASE("float32 by default, rounded once from the doubles") {
    auto ws = RunOp(
        Op("GivenTensorFill", {}, {"y"}, {IntsArg("shape", {2, 3}), FloatsArg("values", {0.1, -2, 3.5, 1e-3, 0, 7})}),
        {});
    CHECK(ws->GetTensor("y").dims() == Dims{2, 3});
    CHECK(Values<float>(ws->GetTensor("y")) == std::vector<float>{0.1f, -2.0f, 3.5f, 1e-3f, 0.0f, 7.0f});
  }
  SUBCASE("float64, exactly the doubles; a float list may hold ints") {
    auto ws = RunOp(Op("GivenTensorFill", {}, {"y"},
                       {IntsArg("shape", {3}), IntArg("dtype", int64_t(DType::kFloat64)),
                        FloatsArg("values", {0.1, -1e300, 2})}),
                    {});
    CHECK(Values<double>(ws->GetTensor("y")) == std::vector<double>{0.1, -1e300, 2});
    auto wi = RunOp(Op("GivenTensorFill", {}, {"y"}, {IntsArg("shape", {2}), IntsArg("values", {-4, 9})}), {});
    CHECK(Values<float>(wi->GetTensor("y")) == std::vector<float>{-4.0f, 9.0f});
  }
  SUBCASE("int32 and int64 from int_values, int64 exact beyond 2^53") {
    const int64_t big = (int64_t{1} << 53) + 1;
    auto w32 = RunOp(Op("GivenTensorFill", {}, {"y"},
                        {IntsArg("shape", {2, 2}), IntArg("dtype", int64_t(DType::kInt32)),
                         IntsArg("int_values", {INT32_MIN, -1, 0, INT32_MAX})}),
                     {});
    CHECK(w32->GetTensor("y").dtype() == DType::kInt32);
    CHECK(Values<int32_t>(w32->GetTensor("y")) == std::vector<int32_t>{INT32_MIN, -1, 0, INT32_MAX});
    auto w64 = RunOp(Op("GivenTensorFill", {}, {"y"},
                        {IntsArg("shape", {3}), IntArg("dtype", int64_t(DType::kInt64)),
                         IntsArg("int_values", {big, -big, 5})}),
                     {});
    CHECK(Values<int64_t>(w64->GetTensor("y")) == std::vector<int64_t>{big, -big, 5});
  }
  SUBCASE("a scalar takes one element, an empty shape none") {
    auto ws = RunOp(Op("GivenTensorFill", {}, {"y"}, {IntsArg("shape", {}), FloatsArg("values", {2.5})}), {});
    CHECK(ws->GetTensor("y").dims() == Dims{});
    CHECK(Values<float>(ws->GetTensor("y")) == std::vector<float>{2.5f});
    auto we = RunOp(Op("GivenTensorFill", {}, {"y"}, {IntsArg("shape", {0, 3}), FloatsArg("values", {})}), {});
    CHECK(we->GetTensor("y").dims() == Dims{0, 3});
    auto wn = RunOp(Op("GivenTensorFill", {}, {"y"},
                       {IntsArg("shape", {4, 0}), IntArg("dtype", int64_t(DType::kInt64)), IntsArg("int_values", {})}),
                    {});
    CHECK(wn->GetTensor("y").dims() == Dims{4, 0});
  }
}

TEST_CASE("GivenTensorFill copies its elements afresh every run: an in-place op on Y never reaches them") {
  NetDef def = MakeNet({Op("GivenTensorFill", {}, {"w"}, {IntsArg("shape", {3}), FloatsArg("values", {1, -2, 4})}),
                        Op("Scale", {"w"}, {"w"}, {FloatArg("scale", 3)})},
                       {});
  Net net(std::make_shared<const NetDef>(def), std::make_shared<Workspace>());
  for (int run = 0; run < 3; ++run) {
    CAPTURE(run);
    net.Run();
    CHECK(Values<float>(net.workspace().GetTensor("w")) == std::vector<float>{3, -6, 12});
  }
}

TEST_CASE("GivenTensorFill errors: counts, lists and dtypes when the net is made, before any allocation") {
  auto given = [](std::vector<Argument> args) { return Op("GivenTensorFill", {}, {"y"}, std::move(args)); };
  const int64_t i32 = int64_t(DType::kInt32), i64 = int64_t(DType::kInt64), f64 = int64_t(DType::kFloat64);
  auto both = [](const OperatorDef& op, Code code, std::initializer_list<std::string> needles) {
    {
      INFO("making the net");
      ExpectBuildError({op}, {}, code, needles);
    }
    INFO("shape inference");
    ExpectInferError({op}, {}, code, needles);
  };
  both(given({IntsArg("shape", {2, 3}), FloatsArg("values", {1, 2, 3, 4, 5})}), Code::kInvalidArgument,
       {"op 0 (GivenTensorFill", "'values' holds 5 elements", "[2, 3] has 6"});
  both(given({IntsArg("shape", {}), FloatsArg("values", {1, 2})}), Code::kInvalidArgument,
       {"op 0 (GivenTensorFill", "'values' holds 2 elements", "[] has 1"});
  both(given({IntsArg("shape", {2}), IntArg("dtype", i64), IntsArg("int_values", {1, 2, 3})}), Code::kInvalidArgument,
       {"op 0 (GivenTensorFill", "'int_values' holds 3 elements"});
  // A shape of 2^60 elements with two values: refused by the count, not by
  // an allocation of what the shape claims.
  both(given({IntsArg("shape", {int64_t{1} << 40, int64_t{1} << 20}), FloatsArg("values", {1, 2})}),
       Code::kInvalidArgument, {"op 0 (GivenTensorFill", "holds 2 elements"});
  both(given({IntsArg("shape", {int64_t{1} << 40, int64_t{1} << 40}), FloatsArg("values", {1})}), Code::kShape,
       {"op 0 (GivenTensorFill", "too many elements"});
  both(given({IntsArg("shape", {2, -1}), FloatsArg("values", {1, 2})}), Code::kShape,
       {"op 0 (GivenTensorFill", "[2, -1]"});
  // The list of the dtype's kind, and only it.
  both(given({IntsArg("shape", {2}), IntArg("dtype", i32), FloatsArg("values", {1, 2})}), Code::kInvalidArgument,
       {"op 0 (GivenTensorFill", "int32 output takes its elements from 'int_values', not 'values'"});
  both(given({IntsArg("shape", {2}), IntArg("dtype", f64), IntsArg("int_values", {1, 2})}), Code::kInvalidArgument,
       {"op 0 (GivenTensorFill", "float64 output takes its elements from 'values', not 'int_values'"});
  both(given({IntsArg("shape", {2}), FloatsArg("values", {1, 2}), IntsArg("int_values", {1, 2})}),
       Code::kInvalidArgument, {"op 0 (GivenTensorFill", "not 'int_values'"});
  both(given({IntsArg("shape", {2})}), Code::kInvalidArgument, {"op 0 (GivenTensorFill", "needs argument 'values'"});
  both(given({IntsArg("shape", {2}), IntArg("dtype", int64_t(DType::kBool)), IntsArg("int_values", {1, 0})}),
       Code::kDType, {"op 0 (GivenTensorFill", "bool"});
  both(given({IntsArg("shape", {2}), IntArg("dtype", 99), FloatsArg("values", {1, 2})}), Code::kDType,
       {"op 0 (GivenTensorFill", "dtype", "99"});
  // An int that does not fit the dtype, when the op converts its elements.
  ExpectBuildError(
      {given({IntsArg("shape", {3}), IntArg("dtype", i32), IntsArg("int_values", {1, int64_t{1} << 31, 2})})}, {},
      Code::kOutOfRange, {"op 0 (GivenTensorFill", "element 1 (2147483648)", "int32"});
  ExpectBuildError(
      {given({IntsArg("shape", {1}), IntArg("dtype", i32), IntsArg("int_values", {int64_t{INT32_MIN} - 1})})}, {},
      Code::kOutOfRange, {"op 0 (GivenTensorFill", "int32"});
  // shape is required, and the lists have their kinds (validation).
  ExpectBuildError({given({FloatsArg("values", {1})})}, {}, Code::kInvalidNet,
                   {"op 0 (GivenTensorFill", "missing required argument 'shape'"});
  ExpectBuildError({given({IntsArg("shape", {1}), IntArg("dtype", i64), FloatsArg("int_values", {1.5})})}, {},
                   Code::kInvalidArgument, {"op 0 (GivenTensorFill", "int_values"});
}

// ============================================================================
// Copy-on-write: fetched tensors and caller memory
// ============================================================================

namespace {

// In-place ops on float32 blob "x" (other inputs: "b" of shape bdims), for
// the copy-on-write tests; "y" names the out-of-place twin's output.
struct InplaceCase {
  const char* name;
  OperatorDef inplace, twin;  // twin: the same op writing "y"
  Dims xdims, bdims;
};

std::vector<InplaceCase> InplaceCases() {
  auto both = [](const char* name, std::string type, std::vector<std::string> in, std::vector<Argument> args,
                 Dims xd, Dims bd = {}) {
    return InplaceCase{name, Op(type, in, {"x"}, args), Op(type, in, {"y"}, args), std::move(xd), std::move(bd)};
  };
  return {
      both("Relu", "Relu", {"x"}, {}, {3, 4}),
      both("Scale", "Scale", {"x"}, {FloatArg("scale", -1.5)}, {3, 4}),
      both("Softmax", "Softmax", {"x"}, {}, {3, 4}),
      both("LogSoftmax", "LogSoftmax", {"x"}, {}, {3, 4}),
      both("Clip", "Clip", {"x"}, {FloatArg("min", -0.5), FloatArg("max", 0.5)}, {3, 4}),
      both("Add same shape", "Add", {"x", "b"}, {}, {3, 4}, {3, 4}),
      both("Add broadcasting B", "Add", {"x", "b"}, {}, {3, 4}, {4}),
      both("Add scalar B", "Add", {"x", "b"}, {}, {3, 4}, {}),
      both("Add B then A", "Add", {"b", "x"}, {}, {3, 4}, {3, 1}),
      both("Mul broadcasting B", "Mul", {"x", "b"}, {}, {2, 3, 4}, {3, 1}),
      both("Mul same shape", "Mul", {"x", "b"}, {}, {3, 4}, {3, 4}),
      both("Sub broadcasting B", "Sub", {"x", "b"}, {}, {2, 3, 4}, {4}),
      both("Sub B then A", "Sub", {"b", "x"}, {}, {3, 4}, {3, 1}),
      both("Div broadcasting B", "Div", {"x", "b"}, {}, {2, 3, 4}, {3, 1}),
      both("Sum", "Sum", {"x", "b"}, {}, {3, 4}, {3, 4}),
      both("Sum of one", "Sum", {"x"}, {}, {3, 4}),
      both("ConstantFill like", "ConstantFill", {"x"}, {FloatArg("value", 0.5)}, {3, 4}),
      both("UniformFill like", "UniformFill", {"x"}, {IntArg("seed", 1)}, {3, 4}),
  };
}

}  // namespace

TEST_CASE("a tensor fetched before a run keeps its values when the op rewrites the blob in place") {
  for (const InplaceCase& c : InplaceCases()) {
    CAPTURE(c.name);
    auto x0 = Random<float>(Prod(c.xdims), 131);
    auto b = Random<float>(Prod(c.bdims), 132);
    Feeds feeds = {{"x", Make<float>(c.xdims, x0)}};
    bool uses_b = std::count(c.inplace.inputs.begin(), c.inplace.inputs.end(), "b") > 0;
    if (uses_b) feeds.push_back({"b", Make<float>(c.bdims, b)});
    auto def = std::make_shared<const NetDef>(MakeNet({c.inplace}, feeds));
    auto ws = std::make_shared<Workspace>();
    for (const auto& [n, t] : feeds) ws->Feed(n, t);
    Net net(def, ws);
    Tensor fed = ws->GetTensor("x");  // fetched before the first run
    net.Run();
    CHECK(Values<float>(fed) == x0);
    CHECK(fed.dims() == c.xdims);
    Tensor first = ws->GetTensor("x");  // fetched between runs
    const auto first_values = Values<float>(first);
    const Dims first_dims = first.dims();
    net.Run();
    CHECK(Values<float>(first) == first_values);
    CHECK(first.dims() == first_dims);
    CHECK(Values<float>(fed) == x0);
    // The second run computed from the first's values: compare with the
    // out-of-place twin fed with them.
    Feeds twin_feeds = {{"x", Make<float>(first_dims, first_values)}};
    if (uses_b) twin_feeds.push_back({"b", Make<float>(c.bdims, b)});
    auto tw = RunOp(c.twin, twin_feeds);
    CHECK(Values<float>(ws->GetTensor("x")) == Values<float>(tw->GetTensor("y")));
  }
}

TEST_CASE("in-place ops never write caller memory fed through Storage::Borrow") {
  for (const InplaceCase& c : InplaceCases()) {
    CAPTURE(c.name);
    const auto x0 = Random<float>(Prod(c.xdims), 141);
    auto b0 = Random<float>(Prod(c.bdims), 142);
    std::vector<float> xbuf = x0, bbuf = b0;
    bool uses_b = std::count(c.inplace.inputs.begin(), c.inplace.inputs.end(), "b") > 0;
    Feeds borrowed = {{"x", Borrowed(c.xdims, xbuf)}};
    Feeds owned = {{"x", Make<float>(c.xdims, x0)}};
    if (uses_b) {
      borrowed.push_back({"b", Borrowed(c.bdims, bbuf)});
      owned.push_back({"b", Make<float>(c.bdims, b0)});
    }
    auto ws = RunOp(c.inplace, borrowed);
    CHECK(xbuf == x0);
    CHECK(bbuf == b0);
    CHECK(ws->GetTensor("x").storage()->library_owned());
    auto tw = RunOp(c.twin, owned);
    CHECK(Values<float>(ws->GetTensor("x")) == Values<float>(tw->GetTensor("y")));
  }
  // B written in place of a borrowed B, with broadcasting.
  auto a0 = Random<float>(12, 143);
  auto b0 = Random<float>(4, 144);
  std::vector<float> bbuf = b0;
  auto ws = RunOp(Op("Add", {"a", "b"}, {"b"}), {{"a", Make<float>({3, 4}, a0)}, {"b", Borrowed({4}, bbuf)}});
  CHECK(bbuf == b0);
  CHECK(Values<float>(ws->GetTensor("b")) == RefBinary(a0, {3, 4}, b0, {4}, {3, 4}, [](float p, float q) { return p + q; }));
  // Reshape and Flatten in place change only metadata: the caller's memory stays as it was.
  std::vector<float> rbuf = a0;
  auto wr = RunOps({Op("Reshape", {"r"}, {"r"}, {IntsArg("shape", {-1})}), Op("Flatten", {"r"}, {"r"}, {IntArg("axis", 0)})},
                   {{"r", Borrowed({3, 4}, rbuf)}});
  CHECK(rbuf == a0);
  CHECK(wr->GetTensor("r").dims() == Dims{1, 12});
  CHECK(Values<float>(wr->GetTensor("r")) == a0);
}

namespace {
void CountingDeleter(void* data, void* user_data) {
  ++*static_cast<int*>(user_data);
  delete[] static_cast<float*>(data);
}
}  // namespace

TEST_CASE("caller memory handed over with a deleter is released once, after the in-place op is done with it") {
  for (const char* type : {"Relu", "Softmax", "Scale"}) {
    CAPTURE(type);
    int freed = 0;
    const auto x0 = Random<float>(8, 151);
    {
      auto* raw = new float[8];
      std::copy(x0.begin(), x0.end(), raw);
      auto ws = std::make_shared<Workspace>();
      ws->Feed("x", Tensor::FromStorage({2, 4}, DType::kFloat32,
                                        Storage::Adopt(DeviceOption{}, raw, 8 * sizeof(float), {CountingDeleter, &freed})));
      auto def = std::make_shared<const NetDef>(MakeNet({Op(type, {"x"}, {"x"})}, {{"x", Tensor()}}));
      Net net(def, ws);
      net.Run();
      CHECK(freed == 1);  // the blob has fresh storage now; nobody holds the caller's
      auto tw = RunOp(Op(type, {"x"}, {"y"}), {{"x", Make<float>({2, 4}, x0)}});
      CHECK(Values<float>(ws->GetTensor("x")) == Values<float>(tw->GetTensor("y")));
    }
    CHECK(freed == 1);
  }
}

TEST_CASE("in-place runs reuse the blob's storage when nobody else holds it") {
  for (const InplaceCase& c : InplaceCases()) {
    const bool uses_b = std::count(c.inplace.inputs.begin(), c.inplace.inputs.end(), "b") > 0;
    if (uses_b && c.bdims != c.xdims) continue;  // broadcasting holds the inputs through the write
    CAPTURE(c.name);
    auto ws = std::make_shared<Workspace>();
    ws->Feed("x", Make<float>(c.xdims, Random<float>(Prod(c.xdims), 161)));  // the blob is the sole owner
    Feeds feeds = {{"x", Tensor()}};
    if (uses_b) {
      ws->Feed("b", Make<float>(c.bdims, Random<float>(Prod(c.bdims), 162)));
      feeds.push_back({"b", Tensor()});
    }
    Net net(std::make_shared<const NetDef>(MakeNet({c.inplace}, feeds)), ws);
    net.Run();
    const void* before = ws->GetTensor("x").raw_data();
    net.Run();
    CHECK(ws->GetTensor("x").raw_data() == before);
  }
}

TEST_CASE("a view made by Reshape keeps its values when the source blob is then rewritten in place") {
  auto x = Random<float>(12, 171);
  auto ws = RunOps({Op("Reshape", {"x"}, {"v"}, {IntsArg("shape", {-1})}), Op("Flatten", {"x"}, {"f"}),
                    Op("Relu", {"x"}, {"x"}), Op("Scale", {"v"}, {"v"}, {FloatArg("scale", 2)})},
                   {{"x", Make<float>({3, 4}, x)}});
  std::vector<float> relu, twice;
  for (float v : x) {
    relu.push_back(std::max(v, 0.0f));
    twice.push_back(v * 2.0f);
  }
  CHECK(Values<float>(ws->GetTensor("x")) == relu);
  CHECK(Values<float>(ws->GetTensor("v")) == twice);
  CHECK(Values<float>(ws->GetTensor("f")) == x);
  CHECK(ws->GetTensor("f").dims() == Dims{3, 4});
}

// ============================================================================
// Inputs that are missing at run time
// ============================================================================

TEST_CASE("inputs missing at run time") {
  auto def = std::make_shared<const NetDef>(MakeNet({Op("Relu", {"x"}, {"y"})}, {{"x", Tensor()}}));
  SUBCASE("never fed: the net builds, the run fails naming the blob") {
    auto ws = std::make_shared<Workspace>();
    Net net(def, ws);
    ExpectError([&] { net.Run(); }, Code::kNotFound, {"'x'", "never fed"});
  }
  SUBCASE("fed an empty tensor: the op names itself and the blob") {
    auto ws = std::make_shared<Workspace>();
    ws->Feed("x", Tensor());
    Net net(def, ws);
    ExpectError([&] { net.Run(); }, Code::kNotFound, {"op 0 (Relu", "X 'x'", "empty"});
  }
  SUBCASE("a blob that holds no tensor") {
    auto ws = std::make_shared<Workspace>();
    ws->CreateBlob("x")->Reset(std::make_shared<int>(3));
    Net net(def, ws);
    ExpectError([&] { net.Run(); }, Code::kDType, {"op 0 (Relu", "'x'", "int"});
  }
  SUBCASE("the second input of a later op") {
    auto d2 = std::make_shared<const NetDef>(
        MakeNet({Op("Relu", {"x"}, {"y"}), Op("Add", {"y", "b"}, {"z"})}, {{"x", Tensor()}, {"b", Tensor()}}));
    auto ws = std::make_shared<Workspace>();
    ws->Feed("x", Make<float>({2}, {1, 2}));
    ws->Feed("b", Tensor());
    Net net(d2, ws);
    ExpectError([&] { net.Run(); }, Code::kNotFound, {"op 1 (Add", "B 'b'"});
  }
}

// ============================================================================
// Shape inference: one table over every op type
// ============================================================================

TEST_CASE("shape inference gives exactly the dims and dtype each kernel produces") {
  struct Case {
    std::vector<OperatorDef> ops;
    Feeds feeds;
    Infer infer = Infer::kAll;
  };
  const auto f23 = Make<float>({2, 3}, Random<float>(6, 1));
  const auto d234 = Make<double>({2, 3, 4}, Random<double>(24, 2));
  const auto i23 = Make<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto l2 = Make<int32_t>({2}, {0, 2});
  const auto s64 = Make<int64_t>({2}, {3, 2});
  const std::vector<Case> cases = {
      {{Op("ConstantFill", {}, {"y"}, {IntsArg("shape", {4, 1})})}, {}},
      {{Op("ConstantFill", {}, {"y"}, {IntArg("dtype", int64_t(DType::kInt64))})}, {}},
      {{Op("ConstantFill", {"x"}, {"y"}, {IntArg("dtype", int64_t(DType::kBool))})}, {{"x", d234}}},
      {{Op("ConstantFill", {"s"}, {"y"}, {IntArg("input_as_shape", 1)})}, {{"s", s64}}, Infer::kPartial},
      {{Op("UniformFill", {}, {"y"}, {IntsArg("shape", {2, 2}), IntArg("dtype", int64_t(DType::kFloat64))})}, {}},
      {{Op("UniformFill", {"x"}, {"x"})}, {{"x", d234}}},
      {{Op("GaussianFill", {}, {"y"}, {IntsArg("shape", {5})})}, {}},
      {{Op("XavierFill", {"x"}, {"y"})}, {{"x", f23}}},
      {{Op("Copy", {"x"}, {"y"})}, {{"x", i23}}},
      {{Op("FC", {"x", "w", "b"}, {"y"}, {IntArg("axis", 2)})},
       {{"x", d234}, {"w", Make<double>({5, 4}, Random<double>(20, 3))}, {"b", Make<double>({5}, Random<double>(5, 4))}}},
      {{Op("FC", {"x", "w", "b"}, {"y"}, {IntArg("axis_w", 2)})},
       {{"x", f23}, {"w", Make<float>({2, 2, 3}, Random<float>(12, 3))}, {"b", Make<float>({4}, Random<float>(4, 4))}}},
      {{Op("GivenTensorFill", {}, {"y"}, {IntsArg("shape", {2, 1}), IntArg("dtype", int64_t(DType::kInt64)),
                                             IntsArg("int_values", {4, 5})})},
       {}},
      {{Op("Relu", {"x"}, {"y"})}, {{"x", d234}}},
      {{Op("Clip", {"x"}, {"x"}, {FloatArg("max", 0)})}, {{"x", d234}}},
      {{Op("Softmax", {"x"}, {"y"}, {IntArg("axis", 2)})}, {{"x", d234}}},
      {{Op("LogSoftmax", {"x"}, {"y"}, {IntArg("axis", -2)})}, {{"x", f23}}},
      {{Op("SoftmaxWithLoss", {"x", "l"}, {"p", "loss"})}, {{"x", f23}, {"l", l2}}},
      {{Op("SoftmaxWithLoss", {"x", "l", "w"}, {"p", "loss"})},
       {{"x", Make<double>({2, 3}, Random<double>(6, 5))}, {"l", Make<int32_t>({2, 1}, {0, 1})},
        {"w", Make<double>({2}, {1, 2})}}},
      {{Op("AveragedLoss", {"x"}, {"y"})}, {{"x", d234}}},
      {{Op("Add", {"a", "b"}, {"c"})}, {{"a", Make<float>({3, 1}, Random<float>(3, 6))}, {"b", Make<float>({2, 1, 4}, Random<float>(8, 7))}}},
      {{Op("Mul", {"a", "b"}, {"a"})}, {{"a", i23}, {"b", Make<int32_t>({3}, {1, 2, 3})}}},
      {{Op("Sub", {"a", "b"}, {"b"})}, {{"a", Make<float>({2, 1, 4}, Random<float>(8, 11))}, {"b", Make<float>({3, 1}, Random<float>(3, 12))}}},
      {{Op("Div", {"a", "b"}, {"c"})}, {{"a", d234}, {"b", Make<double>({4}, {1, 2, 4, 8})}}},
      {{Op("SquaredL2Distance", {"a", "b"}, {"c"})}, {{"a", d234}, {"b", d234}}},
      {{Op("Sum", {"a", "b", "a"}, {"c"})}, {{"a", i23}, {"b", i23}}},
      {{Op("Scale", {"x"}, {"x"}, {FloatArg("scale", 3)})}, {{"x", f23}}},
      {{Op("Accuracy", {"x", "l"}, {"acc"}, {IntArg("top_k", 2)})},
       {{"x", Make<double>({2, 3}, Random<double>(6, 8))}, {"l", l2}}},
      {{Op("Reshape", {"x"}, {"y", "old"}, {IntsArg("shape", {0, -1})})}, {{"x", d234}}},
      {{Op("Reshape", {"x"}, {"x"}, {IntsArg("shape", {4, -1, 2})})}, {{"x", d234}}},
      {{Op("Reshape", {"x", "s"}, {"y", "old"})}, {{"x", f23}, {"s", s64}}, Infer::kPartial},
      {{Op("Flatten", {"x"}, {"y"}, {IntArg("axis", 0)})}, {{"x", i23}}},
      {{Op("Print", {"x", "y"}, {})}, {{"x", i23}, {"y", f23}}},  // no outputs: nothing to infer
      // A chain: inference threads shapes through in-place ops and later readers.
      {{Op("FC", {"x", "w", "b"}, {"h"}), Op("Relu", {"h"}, {"h"}), Op("Reshape", {"h"}, {"h"}, {IntsArg("shape", {-1})}),
        Op("Softmax", {"h"}, {"p"}, {IntArg("axis", 0)}), Op("AveragedLoss", {"p"}, {"loss"})},
       {{"x", f23}, {"w", Make<float>({4, 3}, Random<float>(12, 9))}, {"b", Make<float>({4}, Random<float>(4, 10))}}},
  };
  std::set<std::string> covered;
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    CAPTURE(cases[i].ops.front().type);
    RunOps(cases[i].ops, cases[i].feeds, cases[i].infer);  // compares inference with the kernels' outputs
    for (const auto& op : cases[i].ops) covered.insert(op.type);
  }
  for (const char* type : kCpuOps) CHECK_MESSAGE(covered.count(type) == 1, type, " has no shape-inference case");
}

TEST_CASE("shape inference leaves outputs unknown when an input is unknown") {
  NetDef def = MakeNet({Op("Relu", {"x"}, {"y"}), Op("FC", {"y", "w", "b"}, {"z"})}, {{"x", Tensor()}, {"w", Tensor()}, {"b", Tensor()}});
  auto out = InferNetShapes(def, {{"w", TensorInfo{{2, 3}, DType::kFloat32}}, {"b", TensorInfo{{2}, DType::kFloat32}}});
  CHECK_FALSE(out.at("y").known());
  CHECK_FALSE(out.at("z").known());
  out = InferNetShapes(def, {{"x", TensorInfo{{5, 3}, DType::kFloat32}}});
  CHECK(out.at("y").dims == Dims{5, 3});
  CHECK_FALSE(out.at("z").known());
}

// ============================================================================
// Schema validation
// ============================================================================

TEST_CASE("validation: input and output counts") {
  auto validate = [](std::vector<OperatorDef> ops, std::vector<std::string> ext) {
    NetDef net;
    net.ops = std::move(ops);
    net.external_inputs = std::move(ext);
    return [net] { ValidateNet(net); };
  };
  auto named = [](OperatorDef op, std::string name) {
    op.name = std::move(name);
    return op;
  };
  ExpectError(validate({named(Op("FC", {"x", "w"}, {"y"}), "fc1")}, {"x", "w"}), Code::kInvalidNet,
              {"op 0 (FC 'fc1')", "takes 3 inputs, got 2"});
  ExpectError(validate({Op("Relu", {"x"}, {"y"}), Op("Relu", {"y", "x"}, {"z"})}, {"x"}), Code::kInvalidNet,
              {"op 1 (Relu)", "takes 1 inputs, got 2"});
  ExpectError(validate({Op("Sum", {}, {"y"})}, {}), Code::kInvalidNet, {"op 0 (Sum)", "1 or more"});
  ExpectError(validate({Op("SoftmaxWithLoss", {"x", "l"}, {"p"})}, {"x", "l"}), Code::kInvalidNet,
              {"op 0 (SoftmaxWithLoss)", "takes 2 to 3 outputs, got 1"});
  ExpectError(validate({Op("SoftmaxWithLoss", {"x", "l", "w", "v"}, {"p", "loss"})}, {"x", "l", "w", "v"}),
              Code::kInvalidNet, {"op 0 (SoftmaxWithLoss)", "2 to 3"});
  ExpectError(validate({Op("Reshape", {"x"}, {"y", "o", "p"}, {IntsArg("shape", {-1})})}, {"x"}), Code::kInvalidNet,
              {"op 0 (Reshape)", "1 to 2"});
  ExpectError(validate({Op("ConstantFill", {"a", "b"}, {"y"})}, {"a", "b"}), Code::kInvalidNet,
              {"op 0 (ConstantFill)", "0 to 1"});
  ExpectError(validate({Op("Add", {"a", "b"}, {})}, {"a", "b"}), Code::kInvalidNet, {"op 0 (Add)", "outputs, got 0"});
  // Construction of a Net validates too.
  ExpectError(
      [] {
        NetDef net;
        net.ops = {Op("Accuracy", {"x"}, {"a"})};
        net.external_inputs = {"x"};
        Net n(std::make_shared<const NetDef>(net), std::make_shared<Workspace>());
      },
      Code::kInvalidNet, {"op 0 (Accuracy)", "takes 2 inputs"});
}

TEST_CASE("validation: in place only where the schema allows it") {
  auto check = [](OperatorDef op, std::vector<std::string> ext) {
    NetDef net;
    net.ops = {std::move(op)};
    net.external_inputs = std::move(ext);
    ValidateNet(net);
  };
  // Not allowed.
  ExpectError([&] { check(Op("FC", {"x", "w", "b"}, {"x"}), {"x", "w", "b"}); }, Code::kInvalidNet,
              {"op 0 (FC)", "'x'", "in place"});
  ExpectError([&] { check(Op("FC", {"x", "w", "b"}, {"w"}), {"x", "w", "b"}); }, Code::kInvalidNet,
              {"op 0 (FC)", "'w'", "in place"});
  ExpectError([&] { check(Op("SoftmaxWithLoss", {"x", "l"}, {"x", "loss"}), {"x", "l"}); }, Code::kInvalidNet,
              {"op 0 (SoftmaxWithLoss)", "'x'", "in place"});
  ExpectError([&] { check(Op("SoftmaxWithLoss", {"x", "l"}, {"p", "l"}), {"x", "l"}); }, Code::kInvalidNet,
              {"op 0 (SoftmaxWithLoss)", "'l'"});
  ExpectError([&] { check(Op("AveragedLoss", {"x"}, {"x"}), {"x"}); }, Code::kInvalidNet, {"op 0 (AveragedLoss)", "'x'"});
  ExpectError([&] { check(Op("Accuracy", {"x", "l"}, {"l"}), {"x", "l"}); }, Code::kInvalidNet, {"op 0 (Accuracy)", "'l'"});
  ExpectError([&] { check(Op("Sum", {"a", "b"}, {"b"}), {"a", "b"}); }, Code::kInvalidNet, {"op 0 (Sum)", "'b'"});
  ExpectError([&] { check(Op("Sum", {"a", "b", "a"}, {"a"}), {"a", "b"}); }, Code::kInvalidNet, {"op 0 (Sum)", "'a'"});
  ExpectError([&] { check(Op("Reshape", {"x", "s"}, {"s"}), {"x", "s"}); }, Code::kInvalidNet, {"op 0 (Reshape)", "'s'"});
  ExpectError([&] { check(Op("Reshape", {"x"}, {"y", "x"}, {IntsArg("shape", {-1})}), {"x"}); }, Code::kInvalidNet,
              {"op 0 (Reshape)", "'x'"});
  // Allowed.
  CHECK_NOTHROW(check(Op("Relu", {"x"}, {"x"}), {"x"}));
  CHECK_NOTHROW(check(Op("Softmax", {"x"}, {"x"}), {"x"}));
  CHECK_NOTHROW(check(Op("Scale", {"x"}, {"x"}), {"x"}));
  CHECK_NOTHROW(check(Op("Copy", {"x"}, {"x"}), {"x"}));
  CHECK_NOTHROW(check(Op("Add", {"a", "b"}, {"a"}), {"a", "b"}));
  CHECK_NOTHROW(check(Op("Add", {"a", "b"}, {"b"}), {"a", "b"}));
  CHECK_NOTHROW(check(Op("Mul", {"a", "a"}, {"a"}), {"a"}));
  CHECK_NOTHROW(check(Op("Sum", {"a", "b", "c"}, {"a"}), {"a", "b", "c"}));
  CHECK_NOTHROW(check(Op("Reshape", {"x"}, {"x", "old"}, {IntsArg("shape", {-1})}), {"x"}));
  CHECK_NOTHROW(check(Op("Flatten", {"x"}, {"x"}), {"x"}));
  CHECK_NOTHROW(check(Op("ConstantFill", {"x"}, {"x"}), {"x"}));
}

TEST_CASE("validation: an op may not write one blob twice") {
  auto check = [](OperatorDef op, std::vector<std::string> ext) {
    NetDef net;
    net.ops = {std::move(op)};
    net.external_inputs = std::move(ext);
    ValidateNet(net);
  };
  ExpectError([&] { check(Op("SoftmaxWithLoss", {"x", "l"}, {"p", "p"}), {"x", "l"}); }, Code::kInvalidNet,
              {"op 0 (SoftmaxWithLoss)", "'p'", "twice"});
  ExpectError([&] { check(Op("Reshape", {"x"}, {"y", "y"}, {IntsArg("shape", {-1})}), {"x"}); }, Code::kInvalidNet,
              {"op 0 (Reshape)", "'y'", "twice"});
  ExpectError([&] { check(Op("Relu", {"x"}, {""}), {"x"}); }, Code::kInvalidNet, {"op 0 (Relu)", "empty"});
}

TEST_SUITE_END();

// BLAS and cuBLAS take int sizes: an int64 size beyond INT_MAX is a kShape
// status naming the size, never a silent wrap. The op-level cases use
// zero-sized tensors ([0, 2^31] holds no element), so nothing large is
// allocated: the check comes before any data is touched.
TEST_CASE("BLAS sizes beyond int are a kShape status, not a wrap") {
  const int64_t big = int64_t{1} << 31;  // INT_MAX + 1
  SUBCASE("BlasInt") {
    CHECK(BlasInt(0, "n") == 0);
    CHECK(BlasInt(std::numeric_limits<int>::max(), "n") == std::numeric_limits<int>::max());
    ExpectError([&] { BlasInt(big, "K of X '", "x", "'"); }, Code::kShape,
                {"K of X 'x' = 2147483648", "does not fit BLAS's int", "2147483647"});
    ExpectError([&] { BlasInt(int64_t{1} << 40, "M"); }, Code::kShape, {"M = 1099511627776"});
    ExpectError([&] { BlasInt(-1, "lda"); }, Code::kShape, {"lda = -1"});
  }
  const auto empty = [](Dims dims) { return Tensor(std::move(dims), DType::kFloat32); };
  SUBCASE("FC with K > INT_MAX") {
    const Feeds feeds = {{"x", empty({0, big})}, {"w", empty({0, big})}, {"b", empty({0})}};
    const std::initializer_list<std::string> needles = {"K (features per row of X 'x' [0, 2147483648])",
                                                        "= 2147483648", "does not fit BLAS's int"};
    ExpectRunError({Op("FC", {"x", "w", "b"}, {"y"})}, feeds, Code::kShape, needles);
    ExpectInferError({Op("FC", {"x", "w", "b"}, {"y"})}, feeds, Code::kShape, needles);
  }
  SUBCASE("FC with M > INT_MAX") {
    const Feeds feeds = {{"x", empty({big, 0})}, {"w", empty({3, 0})}, {"b", empty({3})}};
    ExpectRunError({Op("FC", {"x", "w", "b"}, {"y"})}, feeds, Code::kShape,
                   {"op 0 (FC)", "M (rows of X 'x' [2147483648, 0]", "= 2147483648"});
  }
  SUBCASE("FC with N > INT_MAX, in shape inference") {
    // b [N] holds N elements, so only inference (dims without data) gets there cheaply.
    NetDef def = MakeNet({Op("FC", {"x", "w", "b"}, {"y"})}, {});
    def.external_inputs = {"x", "w", "b"};
    const std::map<std::string, TensorInfo> known = {{"x", {{2, 0}, DType::kFloat32}},
                                                     {"w", {{big, 0}, DType::kFloat32}},
                                                     {"b", {{big}, DType::kFloat32}}};
    ExpectError([&] { InferNetShapes(def, known); }, Code::kShape,
                {"N (rows of W 'w' [2147483648, 0])", "= 2147483648"});
  }
  SUBCASE("FCGradient with K > INT_MAX") {
    const Feeds feeds = {{"x", empty({0, big})}, {"w", empty({0, big})}, {"dy", empty({0, 0})}};
    ExpectRunError({Op("FCGradient", {"x", "w", "dy"}, {"dw", "db"})}, feeds, Code::kShape,
                   {"op 0 (FCGradient)", "K (features per row of X 'x'", "= 2147483648"});
  }
  SUBCASE("Conv with C/group * kh * kw > INT_MAX") {
    const Feeds feeds = {{"x", empty({0, big, 1, 1})}, {"w", empty({0, big, 1, 1})}};
    ExpectRunError({Op("Conv", {"x", "w"}, {"y"})}, feeds, Code::kShape,
                   {"op 0 (Conv)", "C/group * kh * kw = 2147483648", "does not fit BLAS's int"});
  }
}

// Regression (fuzzing, UBSan): a Reshape whose shape entries multiply past
// int64 overflowed while counting them.
TEST_CASE("Reshape to a shape whose product overflows int64 is a shape error") {
  Feeds f = {{"x", Make<float>({2, 2}, {1, 2, 3, 4})}};
  ExpectRunError({Op("Reshape", {"x"}, {"y"}, {IntsArg("shape", {int64_t{1} << 40, int64_t{1} << 40})})}, f,
                 Code::kShape, {"op 0 (Reshape)", "more elements than int64 can count"});
  ExpectRunError({Op("Reshape", {"x"}, {"y"}, {IntsArg("shape", {int64_t{1} << 40, -1, int64_t{1} << 40})})}, f,
                 Code::kShape, {"more elements than int64 can count"});
}

// ============================================================================
// Print
// ============================================================================

namespace {

struct PrintSink {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> msgs;
  std::set<std::thread::id> threads;
};

void RecordLog(void* ud, int32_t level, const char* m) {
  auto* s = static_cast<PrintSink*>(ud);
  if (std::string_view(m).find("Print") == std::string_view::npos) return;  // net creation, ...
  std::lock_guard<std::mutex> lock(s->mu);
  s->msgs.emplace_back(level, m);
  s->threads.insert(std::this_thread::get_id());
}

}  // namespace

TEST_CASE("Print logs name, dtype, shape and the first values at its level; with the async executor from workers") {
  PrintSink sink;
  SetLogSink(&RecordLog, &sink, LogLevel::kInfo);
  auto ws = std::make_shared<Workspace>();
  ws->Feed("x", Make<float>({2, 3}, {1.5f, -2, 3, 4, 5, 6}));
  ws->Feed("i", Make<int64_t>({2}, {7, -8}));
  ws->Feed("b", Make<uint8_t>({1}, {200}));
  NetDef def = MakeNet({Op("Print", {"x", "i"}, {}, {IntArg("limit", 4)}), Op("Print", {"b"}, {}),
                        Op("Print", {"x"}, {}, {IntArg("level", 0)})},  // debug: below the sink's level
                       {{"x", {}}, {"i", {}}, {"b", {}}});
  Net(std::make_shared<const NetDef>(def), ws).Run();
  {
    std::lock_guard<std::mutex> lock(sink.mu);
    REQUIRE(sink.msgs.size() == 3);
    CHECK(sink.msgs[0].first == 1);
    CHECK(sink.msgs[0].second.find("'x' float32 [2, 3] = [1.5, -2, 3, 4, ...]") != std::string::npos);
    CHECK(sink.msgs[1].second.find("'i' int64 [2] = [7, -8]") != std::string::npos);
    CHECK(sink.msgs[2].second.find("'b' uint8 [1] = [200]") != std::string::npos);
    CHECK(sink.msgs[0].second.find("Print") != std::string::npos);  // the op's label
    sink.msgs.clear();
    sink.threads.clear();
  }

  // Started with RunAsync (the caller runs no task, and Wait does not help),
  // the async executor runs every Print on its worker threads, and the sink
  // hears them there.
  NetDef wide;
  for (int k = 0; k < 16; ++k) wide.ops.push_back(Op("Print", {"i"}, {}, {IntArg("limit", 0)}));
  wide.external_inputs = {"i"};
  NetOptions options;
  options.executor = ExecutorKind::kAsync;
  options.num_workers = 2;
  Net async(std::make_shared<const NetDef>(wide), ws, options);
  async.RunAsync();
  REQUIRE(async.Wait(std::chrono::seconds(60)));
  SetLogSink(nullptr, nullptr, LogLevel::kWarning);
  std::lock_guard<std::mutex> lock(sink.mu);
  CHECK(sink.msgs.size() == 16);
  CHECK(sink.msgs[0].second.find("'i' int64 [2]") != std::string::npos);
  CHECK(sink.threads.count(std::this_thread::get_id()) == 0);

  ExpectError([&] { Net(std::make_shared<const NetDef>(MakeNet({Op("Print", {"x"}, {}, {IntArg("limit", -1)})},
                                                               {{"x", {}}})),
                        ws); },
              Code::kInvalidArgument, {"limit"});
}
