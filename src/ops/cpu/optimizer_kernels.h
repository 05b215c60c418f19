// The CPU optimizer updates' kernels and rules, shared by the one-param ops
// (optimizer_ops.cc: SGD, MomentumSGD, Adam, Adagrad) and their multi-tensor
// twins (multi_tensor_update_ops.cc), so that both compute the same bits.
//
// Each update is one pass over memory, split across the op's threads
// (UpdateElements). Decisions (weight decay, Nesterov) are template
// parameters, so the loops carry no branches; SGD and MomentumSGD loops are
// auto-vectorised. Adam and Adagrad need a square root, which GCC does not
// vectorise unless -fno-math-errno (errno needs a branch per element), so
// their loops are written once over a "lane" type: SSE2/AVX vectors where
// available, scalars for the tail and other targets. The vector and scalar
// lanes perform the same IEEE operations in the same order, so results do
// not depend on the element's position. The per-element formulas are
// ops/math/optimizer_updates.h's (the CUDA kernels run them too).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__SSE2__) || defined(__AVX__)
#include <immintrin.h>
#endif

#include "core/parallel_for.h"
#include "graph/net_def.h"
#include "ops/math/optimizer_updates.h"
#include "ops/optimizer_op_utils.h"

namespace dp::cpu_update {

// ---- lanes -----------------------------------------------------------------

template <typename T>
struct ScalarLane {
  using V = T;
  static constexpr int kWidth = 1;
  static V Load(const T* p) { return *p; }
  static void Store(T* p, V v) { *p = v; }
  static V Set(T x) { return x; }
  static V Sqrt(V x) { return std::sqrt(x); }
};

#if defined(__AVX__)
#define DP_OPT_SIMD 1
template <typename T>
struct SimdLane;
template <>
struct SimdLane<float> {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V Set(float x) { return _mm256_set1_ps(x); }
  static V Sqrt(V x) { return _mm256_sqrt_ps(x); }
};
template <>
struct SimdLane<double> {
  using V = __m256d;
  static constexpr int kWidth = 4;
  static V Load(const double* p) { return _mm256_loadu_pd(p); }
  static void Store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V Set(double x) { return _mm256_set1_pd(x); }
  static V Sqrt(V x) { return _mm256_sqrt_pd(x); }
};
#elif defined(__SSE2__)
#define DP_OPT_SIMD 1
template <typename T>
struct SimdLane;
template <>
struct SimdLane<float> {
  using V = __m128;
  static constexpr int kWidth = 4;
  static V Load(const float* p) { return _mm_loadu_ps(p); }
  static void Store(float* p, V v) { _mm_storeu_ps(p, v); }
  static V Set(float x) { return _mm_set1_ps(x); }
  static V Sqrt(V x) { return _mm_sqrt_ps(x); }
};
template <>
struct SimdLane<double> {
  using V = __m128d;
  static constexpr int kWidth = 2;
  static V Load(const double* p) { return _mm_loadu_pd(p); }
  static void Store(double* p, V v) { _mm_storeu_pd(p, v); }
  static V Set(double x) { return _mm_set1_pd(x); }
  static V Sqrt(V x) { return _mm_sqrt_pd(x); }
};
#endif

// body(Lane{}, i) handles elements [i, i + Lane::kWidth). Vector arithmetic
// uses the GNU vector extension operators (+ - * /), which GCC and Clang
// provide for the intrinsic types.
template <typename T, typename Body>
inline void ForLanes(int64_t n, Body&& body) {
  int64_t i = 0;
#if defined(DP_OPT_SIMD)
  constexpr int64_t w = SimdLane<T>::kWidth;
  for (; i + w <= n; i += w) body(SimdLane<T>{}, i);
#endif
  for (; i < n; ++i) body(ScalarLane<T>{}, i);
}

// ---- gradient sources --------------------------------------------------------

// The gradient a kernel reads at element i: one tensor, or the sum of two
// (two replicas sharing a param) added as the kernel loads them, so the sum
// costs no pass of its own. Both give T(i) for scalar loops and Load<Lane>(i)
// for lanes; two gradients add in the same order either way.
template <typename T>
struct OneGrad {
  const T* __restrict g;
  T operator()(int64_t i) const { return g[i]; }
  template <typename L>
  typename L::V Load(int64_t i) const { return L::Load(g + i); }
};

template <typename T>
struct TwoGrads {
  const T* __restrict a;
  const T* __restrict b;
  T operator()(int64_t i) const { return a[i] + b[i]; }
  template <typename L>
  typename L::V Load(int64_t i) const { return L::Load(a + i) + L::Load(b + i); }
};

// ---- kernels ---------------------------------------------------------------

template <typename T, bool kWD, class G>
void SgdKernel(int64_t n, T* __restrict p, G g, T lr, T wd) {
  for (int64_t i = 0; i < n; ++i) p[i] = SgdStep<kWD>(p[i], g(i), lr, wd);
}

template <typename T, bool kWD, bool kNesterov, class G>
void MomentumKernel(int64_t n, T* __restrict p, G g, T* __restrict buf, T lr, T mu, T wd) {
  for (int64_t i = 0; i < n; ++i) MomentumStep<kWD, kNesterov>(p + i, buf + i, g(i), lr, mu, wd);
}

// The lane's square root, as the formulas take it.
template <typename L>
struct LaneSqrt {
  typename L::V operator()(typename L::V x) const { return L::Sqrt(x); }
};

template <typename L, typename T>
AdamCoeffs<typename L::V> SplatAdamCoeffs(const AdamCoeffs<T>& c) {
  return {L::Set(c.b1), L::Set(c.c1), L::Set(c.b2), L::Set(c.c2), L::Set(c.step), L::Set(c.rs), L::Set(c.eps),
          L::Set(c.wd)};
}

template <typename T, bool kWD, class G>
void AdamKernel(int64_t n, T* __restrict p, G g, T* __restrict m, T* __restrict v, const AdamCoeffs<T> c) {
  ForLanes<T>(n, [&](auto lane, int64_t i) {
    using L = decltype(lane);
    using V = typename L::V;
    V pv = L::Load(p + i), mv = L::Load(m + i), vv = L::Load(v + i);
    AdamStep<kWD>(&pv, &mv, &vv, g.template Load<L>(i), SplatAdamCoeffs<L>(c), LaneSqrt<L>{});
    L::Store(m + i, mv);
    L::Store(v + i, vv);
    L::Store(p + i, pv);
  });
}

template <typename T, bool kWD, class G>
void AdagradKernel(int64_t n, T* __restrict p, G g, T* __restrict h, T lr, T eps, T decay, T wd) {
  ForLanes<T>(n, [&](auto lane, int64_t i) {
    using L = decltype(lane);
    using V = typename L::V;
    V pv = L::Load(p + i), hv = L::Load(h + i);
    AdagradStep<kWD>(&pv, &hv, g.template Load<L>(i), L::Set(lr), L::Set(eps), L::Set(decay), L::Set(wd),
                     LaneSqrt<L>{});
    L::Store(h + i, hv);
    L::Store(p + i, pv);
  });
}

// ---- rules -------------------------------------------------------------------

// What one update applies to n elements: the step's learning rate and
// iteration (0 when the optimizer reads none).
struct Step {
  int64_t n;
  double lr;
  int64_t iter;
};

inline constexpr int kMaxStates = 2;

// Each rule reads its op's arguments once and applies its kernel to a piece
// of the elements: param p, gradient source g, states s.
class SgdRule {
 public:
  static constexpr UpdateLayout kLayout = kSgdLayout;
  explicit SgdRule(const ArgReader& args) : wd_(args.Float("weight_decay", 0.0)) {}

  template <typename T, class G>
  void operator()(const Step& st, T* p, G g, T* const*) const {
    const T lr = static_cast<T>(st.lr), wd = static_cast<T>(wd_);
    if (wd_ != 0)
      SgdKernel<T, true, G>(st.n, p, g, lr, wd);
    else
      SgdKernel<T, false, G>(st.n, p, g, lr, wd);
  }

 private:
  double wd_;
};

class MomentumRule {
 public:
  static constexpr UpdateLayout kLayout = kMomentumLayout;
  explicit MomentumRule(const ArgReader& args) : args_(ReadMomentumArgs(args)) {}

  template <typename T, class G>
  void operator()(const Step& st, T* p, G g, T* const* s) const {
    const T lr = static_cast<T>(st.lr), mu = static_cast<T>(args_.momentum), wd = static_cast<T>(args_.weight_decay);
    const bool has_wd = args_.weight_decay != 0;
    if (args_.nesterov) {
      if (has_wd)
        MomentumKernel<T, true, true, G>(st.n, p, g, s[0], lr, mu, wd);
      else
        MomentumKernel<T, false, true, G>(st.n, p, g, s[0], lr, mu, wd);
    } else {
      if (has_wd)
        MomentumKernel<T, true, false, G>(st.n, p, g, s[0], lr, mu, wd);
      else
        MomentumKernel<T, false, false, G>(st.n, p, g, s[0], lr, mu, wd);
    }
  }

 private:
  MomentumArgs args_;
};

class AdamRule {
 public:
  static constexpr UpdateLayout kLayout = kAdamLayout;
  explicit AdamRule(const ArgReader& args) : hyper_(ReadAdamArgs(args)) {}

  template <typename T, class G>
  void operator()(const Step& st, T* p, G g, T* const* s) const {
    const AdamCoeffs<T> c = MakeAdamCoeffs<T>(hyper_, st.lr, st.iter, [](double x) { return std::sqrt(x); });
    if (hyper_.weight_decay != 0)
      AdamKernel<T, true, G>(st.n, p, g, s[0], s[1], c);
    else
      AdamKernel<T, false, G>(st.n, p, g, s[0], s[1], c);
  }

 private:
  AdamHyper hyper_;
};

class AdagradRule {
 public:
  static constexpr UpdateLayout kLayout = kAdagradLayout;
  explicit AdagradRule(const ArgReader& args) : args_(ReadAdagradArgs(args)) {}

  template <typename T, class G>
  void operator()(const Step& st, T* p, G g, T* const* s) const {
    const T lr = static_cast<T>(st.lr), eps = static_cast<T>(args_.epsilon), decay = static_cast<T>(args_.decay),
            wd = static_cast<T>(args_.weight_decay);
    if (args_.weight_decay != 0)
      AdagradKernel<T, true, G>(st.n, p, g, s[0], lr, eps, decay, wd);
    else
      AdagradKernel<T, false, G>(st.n, p, g, s[0], lr, eps, decay, wd);
  }

 private:
  AdagradArgs args_;
};

// ---- the pass over a tensor ------------------------------------------------------

// Elements per piece: tens of microseconds of one core's memory traffic.
inline constexpr int64_t kGrain = int64_t{1} << 15;
// Elements summed at a time when there are three or more gradients (on the
// stack, in L1); two are added inside the kernel (TwoGrads).
inline constexpr int64_t kSumBlock = 1024;

// Updates elements [begin, end) of one param in place with `rule`: pieces on
// the op's threads (an update is memory-bound, and the step's tail after the
// last gradient). The gradients grad_arrays[0..num_grads) (T arrays) are summed in
// order; the states' element i is at s[k][i - state_begin] (a sharded state
// holds a part alone).
template <typename T, class Rule>
void UpdateElements(const Rule& rule, const Step& step, int64_t begin, int64_t end, T* p,
                    const void* const* grad_arrays, size_t num_grads, T* const* s, int64_t state_begin) {
  auto grads = [&](size_t k) { return static_cast<const T*>(grad_arrays[k]); };
  auto range = [&](int64_t lo, int64_t hi, auto g) {
    Step piece = step;
    piece.n = hi - lo;
    T* sp[kMaxStates] = {};
    for (int k = 0; k < Rule::kLayout.num_states; ++k) sp[k] = s[k] + (lo - state_begin);
    rule(piece, p + lo, g, sp);
  };
  const int64_t n = end - begin;
  ParallelForChunks(n, ParallelChunks(n, kGrain), 64, [&](int, int64_t lo, int64_t hi) {
    lo += begin;
    hi += begin;
    if (num_grads == 1) return range(lo, hi, OneGrad<T>{grads(0) + lo});
    if (num_grads == 2) return range(lo, hi, TwoGrads<T>{grads(0) + lo, grads(1) + lo});
    T sum[kSumBlock];
    for (int64_t b = lo; b < hi; b += kSumBlock) {
      const int64_t len = std::min(kSumBlock, hi - b);
      const T* g0 = grads(0) + b;
      for (int64_t j = 0; j < len; ++j) sum[j] = g0[j];
      for (size_t k = 1; k < num_grads; ++k) {
        const T* gk = grads(k) + b;
        for (int64_t j = 0; j < len; ++j) sum[j] += gk[j];
      }
      range(b, b + len, OneGrad<T>{sum});
    }
  });
}

// The learning rate input: float32 or float64 [1].
inline double ReadLearningRate(const Tensor& t) {
  return t.dtype() == DType::kFloat32 ? static_cast<double>(t.data<float>()[0]) : t.data<double>()[0];
}

}  // namespace dp::cpu_update
