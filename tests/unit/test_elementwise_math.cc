// Host checks of the elementwise family's shared index math (ops/math): the
// offsets every CUDA thread computes (BroadcastOffsets, a ReduceIndex's and a
// transpose's StridedOffset) read exactly the elements the CPU kernels read,
// so a CUDA kernel can differ from its CPU twin only in float rounding
// (which the parity cases on a GPU bound). The CPU kernels run the shared
// collapsing (Collapse) themselves; these tests cover the per-element half.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "ops/math/activation.h"
#include "ops/math/binary.h"
#include "ops/math/broadcast.h"
#include "ops/math/strided_index.h"
#include "ops/math/transpose.h"
#include "ops/op_utils.h"

namespace dp {
namespace {

using testing::Op;
using testing::RandomF64;
using testing::RunOp;

double Apply(const std::string& type, double a, double b) {
  if (type == "Add") return math::ApplyBinary<math::BinaryOp::kAdd>(a, b);
  if (type == "Sub") return math::ApplyBinary<math::BinaryOp::kSub>(a, b);
  if (type == "Mul") return math::ApplyBinary<math::BinaryOp::kMul>(a, b);
  return math::ApplyBinary<math::BinaryOp::kDiv>(a, b);
}

struct BroadcastShapes {
  Dims a, b;
};
const BroadcastShapes kBroadcasts[] = {
    {{6, 9}, {6, 9}},       {{6, 9}, {9}},          {{7, 5}, {7, 1}},       {{4, 1, 5}, {3, 1}},
    {{3, 11}, {}},          {{}, {3, 11}},          {{1, 9}, {2, 3, 9}},    {{2, 3, 4, 5}, {3, 1, 1}},
    {{1, 1}, {1}},          {{2, 1, 3, 1, 4}, {1, 5, 1, 6, 1}},             {{0, 5}, {5}},
    {{3, 1, 1, 7}, {1, 2, 2, 1}},
};

TEST_CASE("BroadcastOffsets reads the elements the CPU's Add, Sub, Mul and Div read") {
  uint32_t seed = 1;
  for (const auto& s : kBroadcasts) {
    for (const char* type : {"Add", "Sub", "Mul", "Div"}) {
      CAPTURE(type);
      CAPTURE(DimsString(s.a));
      CAPTURE(DimsString(s.b));
      const Tensor a = RandomF64(s.a, seed++), b = RandomF64(s.b, seed++);
      auto ws = RunOp(Op(type, {"A", "B"}, {"C"}), {{"A", a}, {"B", b}});
      const Tensor& c = ws->GetTensor("C");
      const Dims yd = BroadcastDims(s.a, s.b, "A and B");
      REQUIRE(c.dims() == yd);
      math::BroadcastIndex index;
      REQUIRE(math::MakeBroadcastIndex(math::CollapseBroadcast(s.a, s.b, yd), &index));
      for (int64_t i = 0; i < c.numel(); ++i) {
        int64_t oa = -1, ob = -1;
        math::BroadcastOffsets(index, i, &oa, &ob);
        REQUIRE(oa >= 0);
        REQUIRE(oa < a.numel());
        REQUIRE(ob >= 0);
        REQUIRE(ob < b.numel());
        CHECK(c.data<double>()[i] == Apply(type, a.data<double>()[oa], b.data<double>()[ob]));
      }
    }
  }
}

TEST_CASE("collapsing merges what it can and reports layouts a CUDA index cannot carry") {
  // [4, 3, 5] + [3, 1]: B is constant along the last dim, so nothing merges
  // with it; A's dims 1 and 2 stay apart because B's do.
  auto layout = math::CollapseBroadcast({4, 3, 5}, {3, 1}, {4, 3, 5});
  CHECK(layout.dims == Dims{4, 3, 5});
  // A bias over [N, C, H, W] merges H and W.
  layout = math::CollapseBroadcast({2, 3, 4, 5}, {3, 1, 1}, {2, 3, 4, 5});
  CHECK(layout.dims == Dims{2, 3, 20});
  CHECK(layout.strides[1] == std::vector<int64_t>{0, 1, 0});
  // Same shapes: one run.
  CHECK(math::CollapseBroadcast({2, 3, 4}, {2, 3, 4}, {2, 3, 4}).dims == Dims{24});
  // 34 alternating dims do not merge: more than a kernel's index holds.
  Dims a, b;
  for (int i = 0; i < 17; ++i) {
    a.insert(a.end(), {2, 1});
    b.insert(b.end(), {1, 2});
  }
  const Dims y = BroadcastDims(a, b, "A and B");
  math::BroadcastIndex index;
  CHECK_FALSE(math::MakeBroadcastIndex(math::CollapseBroadcast(a, b, y), &index));
}

TEST_CASE("a ReduceIndex visits each element of X once, summing to the CPU's SumReduceLike") {
  struct Shapes {
    Dims x, like;
  };
  const Shapes shapes[] = {
      {{8, 6}, {6}},       {{4, 3, 5}, {3, 1}}, {{33, 65}, {}},    {{1000, 7}, {1, 7}}, {{3, 50}, {3, 1}},
      {{2, 3, 4, 5}, {3, 1, 1}}, {{2, 3, 4, 5}, {2, 1, 4, 1}}, {{0, 6}, {6}}, {{2, 0}, {2, 1}},
  };
  uint32_t seed = 100;
  for (const auto& s : shapes) {
    CAPTURE(DimsString(s.x));
    CAPTURE(DimsString(s.like));
    const Tensor x = RandomF64(s.x, seed++);
    auto ws = RunOp(Op("SumReduceLike", {"X", "like"}, {"Y"}), {{"X", x}, {"like", RandomF64(s.like, seed++)}});
    const Tensor& y = ws->GetTensor("Y");
    REQUIRE(y.dims() == s.like);
    math::ReduceIndex index;
    REQUIRE(math::MakeReduceIndex(s.x, s.like, &index));
    CHECK(index.count * y.numel() == x.numel());
    std::vector<int> visits(static_cast<size_t>(x.numel()), 0);
    for (int64_t o = 0; o < y.numel(); ++o) {
      const int64_t base = math::StridedOffset(index.kept, o);
      double sum = 0;
      for (int64_t r = 0; r < index.count; ++r) {
        const int64_t k = base + math::StridedOffset(index.reduced, r);
        REQUIRE(k >= 0);
        REQUIRE(k < x.numel());
        ++visits[static_cast<size_t>(k)];
        sum += x.data<double>()[k];
      }
      CHECK(sum == doctest::Approx(y.data<double>()[o]).epsilon(1e-12));
    }
    for (int v : visits) CHECK(v == 1);
  }
}

TEST_CASE("a transpose's StridedOffset gathers what the CPU's Transpose writes") {
  struct Case {
    Dims in;
    std::vector<int64_t> axes;
  };
  const Case cases[] = {
      {{5, 7}, {1, 0}},       {{3, 5, 7}, {0, 2, 1}},    {{2, 3, 5, 9}, {0, 2, 3, 1}},
      {{4, 1, 6}, {2, 0, 1}}, {{2, 3, 4}, {0, 1, 2}},    {{6}, {0}},
      {{}, {}},               {{2, 3, 4, 5, 6}, {4, 2, 0, 3, 1}},
  };
  for (const auto& c : cases) {
    CAPTURE(DimsString(c.in));
    Tensor x(c.in, DType::kInt64);
    for (int64_t i = 0; i < x.numel(); ++i) x.mutable_data<int64_t>()[i] = i;
    auto ws = RunOp(Op("Transpose", {"X"}, {"Y"}, {testing::IntsArg("axes", c.axes)}), {{"X", x}});
    const Tensor& y = ws->GetTensor("Y");
    std::vector<int> axes(c.axes.begin(), c.axes.end());
    math::StridedIndex index;
    REQUIRE(math::MakeStridedIndex(math::CollapseTranspose(c.in, axes), 0, &index));
    for (int64_t i = 0; i < y.numel(); ++i) CHECK(y.data<int64_t>()[i] == math::StridedOffset(index, i));
  }
}

TEST_CASE("the stable logistic saturates without overflow in float and double") {
  CHECK(math::Sigmoid(0.0f) == 0.5f);
  CHECK(math::Sigmoid(-200.0f) == 0.0f);
  CHECK(math::Sigmoid(200.0f) == 1.0f);
  CHECK(math::Sigmoid(-1000.0) == 0.0);
  CHECK(math::Sigmoid(3.0) == doctest::Approx(1.0 / (1.0 + std::exp(-3.0))).epsilon(1e-15));
  CHECK(math::ReluGradient(0.0f, 2.0f) == 0.0f);
  CHECK(math::TanhGradient(0.5, 2.0) == doctest::Approx(1.5));
  CHECK(math::SigmoidGradient(0.25, 2.0) == doctest::Approx(0.375));
}

TEST_CASE("Clip keeps NaN and its gradient passes dY strictly between the bounds") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(math::Clip(-7.0f, 0.0f, 6.0f) == 0.0f);
  CHECK(math::Clip(7.0f, 0.0f, 6.0f) == 6.0f);
  CHECK(math::Clip(2.5f, 0.0f, 6.0f) == 2.5f);
  CHECK(std::isnan(math::Clip(nan, 0.0f, 6.0f)));
  CHECK(std::signbit(math::Clip(-0.0f, 0.0f, 6.0f)));  // -0 == 0 is not below the bound: kept
  CHECK(math::Clip(inf, -inf, inf) == inf);               // no bounds: the identity
  const double dinf = std::numeric_limits<double>::infinity();
  CHECK(math::Clip(-dinf, -1.0, 1.0) == -1.0);
  CHECK(math::Clip(5.0, 2.0, 2.0) == 2.0);
  // The gradient from Y = Clip(X): the clipped elements sit at a bound.
  for (float x : {-7.0f, 0.0f, 1e-7f, 2.5f, 5.9999f, 6.0f, 7.0f}) {
    CAPTURE(x);
    const bool inside = x > 0.0f && x < 6.0f;
    CHECK(math::ClipGradient(math::Clip(x, 0.0f, 6.0f), 3.0f, 0.0f, 6.0f) == (inside ? 3.0f : 0.0f));
  }
  CHECK(math::ClipGradient(nan, 3.0f, 0.0f, 6.0f) == 0.0f);
  CHECK(math::ClipGradient(1e300, 2.0, -dinf, dinf) == 2.0);
  CHECK(math::ClipGradient(-dinf, 2.0, -dinf, dinf) == 0.0);  // an infinite Y is no interior point
}

}  // namespace
}  // namespace dp
