// Optimizer updates as operators, all in place:
//   SGD(param, grad, lr) -> param
//   MomentumSGD(param, grad, momentum, lr) -> param, momentum
//   Adam(param, grad, m, v, lr, iter) -> param, m, v
//   Adagrad(param, grad, h, lr) -> param, h
// param, grad and the state tensors share one float dtype and one shape; lr is
// a one-element float32/float64 tensor (LearningRate's output) and iter the
// one-element int64 step counter (Iter's output, 1 on the first step).
//
// Two options serve replicas that share one param (a shared model):
//   - more gradients after the last input: the update uses grad + grad_1 +
//     ... (summed in input order), so the replicas' gradients need no
//     allreduce within a process;
//   - args part = k and parts = P: the update touches only part k of P
//     contiguous parts of the elements, so P ops (one per replica) update
//     one param together. The task graph lets such ops run at once
//     (graph/task_graph.h); their outputs must be writable in place when
//     they start (MakeWritable before them). With sharded_state = 1 the
//     state tensors hold that part alone (1-D): each replica keeps the
//     state of the part it updates (ZeRO-1, comm/shards.h).
//
// Each update is one pass over memory, split across the op's threads. Decisions (weight decay, Nesterov) are
// template parameters, so the loops carry no branches; SGD and MomentumSGD
// loops are auto-vectorised. Adam and Adagrad need a square root, which GCC
// does not vectorise unless -fno-math-errno (errno needs a branch per
// element), so their loops are written once over a "lane" type: SSE2/AVX
// vectors where available, scalars for the tail and other targets. The
// vector and scalar lanes perform the same IEEE operations in the same order,
// so results do not depend on the element's position.
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__SSE2__) || defined(__AVX__)
#include <immintrin.h>
#endif

#include "core/parallel_for.h"
#include "ops/math/optimizer_updates.h"
#include "ops/optimizer_op_utils.h"
#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

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

// The per-element formulas are ops/math/optimizer_updates.h's (the CUDA
// kernels run them too).

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

// ---- checks shared by kernels and shape inference ----------------------------

OpSchema::InferenceFn InferUpdate(UpdateLayout layout) {
  return [layout](const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
    const OpSchema* schema = OpSchemaRegistry::Find(op.type);
    CheckUpdateInputs(
        layout, static_cast<int>(in.size()), [&](int i) { return in.at(static_cast<size_t>(i)); },
        [&](int i) {
          const std::string role = i < layout.num_inputs() ? schema->InputName(static_cast<size_t>(i)) : "grad";
          return StrCat(role, " '", op.inputs.at(static_cast<size_t>(i)), "'");
        },
        ReadUpdateParts(args));
    std::vector<TensorInfo> out;
    out.push_back(in[0]);
    for (int s = 0; s < layout.num_states; ++s) out.push_back(in[static_cast<size_t>(2 + s)]);
    return out;
  };
}

// ---- operators -----------------------------------------------------------------

// Validates the inputs, reads lr (and iter), and hands Derived::Update<T> the
// parameter and state buffers to update in place. Output(i) is the same
// tensor as its in-place input, so mutable_data keeps its values and copies
// only when the storage is shared (copy-on-write).
template <class Derived>
class UpdateOp : public Operator {
 public:
  UpdateOp(const OpInit& init, UpdateLayout layout)
      : Operator(init),
        layout_(layout),
        parts_(ReadUpdateParts(args())),
        grads_(static_cast<size_t>(1 + std::max(0, InputSize() - layout.num_inputs()))) {}

 protected:
  static constexpr int kMaxStates = 2;
  // Elements per part: tens of microseconds of one core's memory traffic.
  static constexpr int64_t kGrain = int64_t{1} << 15;

  struct Step {
    int64_t n;
    double lr;
    int64_t iter;  // 0 when the optimizer reads none
  };

 private:
  // Elements summed at a time when there are three or more gradients (on the
  // stack, in L1); two are added inside the kernel (TwoGrads).
  static constexpr int64_t kSumBlock = 1024;

  void RunOnDevice() final {
    CheckUpdateInputs(
        layout_, InputSize(),
        [&](int i) {
          const Tensor& t = Input(i);
          return TensorInfo{t.dims(), t.dtype()};
        },
        [&](int i) { return InputDesc(i); }, parts_);
    Step step{Input(0).numel(), ReadLr(Input(layout_.lr())), 0};
    if (layout_.has_iter) {
      step.iter = Input(layout_.iter()).template data<int64_t>()[0];
      DP_ENFORCE_CODE(step.iter >= 1, Code::kOutOfRange, InputDesc(layout_.iter()), " is ", step.iter,
                      " but must be >= 1 (run Iter before the update)");
    }
    // This op's part of the elements: parts of 64 elements, the last short.
    const ElementRange part = PartOfElements(step.n, parts_.part, parts_.parts);
    const int64_t begin = part.begin, end = part.end;  // plain locals: the lambda below captures them
    DispatchFloat(Input(0).dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      // grad, then the extra gradients (in the op's own array: no allocation per run)
      grads_[0] = Input(1).template data<T>();
      for (int i = layout_.num_inputs(); i < InputSize(); ++i)
        grads_[static_cast<size_t>(1 + i - layout_.num_inputs())] = Input(i).template data<T>();
      auto g = [&](size_t k) { return static_cast<const T*>(grads_[k]); };
      // The ops updating the other parts may be running now: none of them
      // may replace the tensors' storage (copy-on-write), so they must find
      // them writable where they are (MakeWritable before the group).
      if (parts_.parts > 1 && !parts_.sharded_state)
        for (int k = 0; k <= layout_.num_states; ++k) CheckWritableForParts(*Output(k), OutputDesc(k), parts_);
      T* p = Output(0)->template mutable_data<T>();
      T* s[kMaxStates] = {};
      for (int k = 0; k < layout_.num_states; ++k) s[k] = Output(1 + k)->template mutable_data<T>();
      // A sharded state holds the part alone: its element i is the param's begin + i.
      const int64_t state_begin = parts_.sharded_state ? begin : 0;
      // Elementwise: pieces of the part on the op's threads (an update is
      // memory-bound, and the step's tail after the last gradient).
      const int64_t n = end - begin;
      ParallelForChunks(n, ParallelChunks(n, kGrain), 64, [&](int, int64_t lo, int64_t hi) {
        lo += begin;
        hi += begin;
        if (grads_.size() == 1) return UpdateRange<T>(step, lo, hi, p, OneGrad<T>{g(0) + lo}, s, state_begin);
        if (grads_.size() == 2)
          return UpdateRange<T>(step, lo, hi, p, TwoGrads<T>{g(0) + lo, g(1) + lo}, s, state_begin);
        T sum[kSumBlock];
        for (int64_t b = lo; b < hi; b += kSumBlock) {
          const int64_t len = std::min(kSumBlock, hi - b);
          const T* g0 = g(0) + b;
          for (int64_t j = 0; j < len; ++j) sum[j] = g0[j];
          for (size_t k = 1; k < grads_.size(); ++k) {
            const T* gk = g(k) + b;
            for (int64_t j = 0; j < len; ++j) sum[j] += gk[j];
          }
          UpdateRange<T>(step, b, b + len, p, OneGrad<T>{sum}, s, state_begin);
        }
      });
    });
  }

  // Elements [lo, hi), their gradient at g(0 .. hi - lo), the states'
  // element i at s[k][i - state_begin].
  template <typename T, class G>
  void UpdateRange(const Step& step, int64_t lo, int64_t hi, T* p, G g, T* const* s, int64_t state_begin) {
    Step piece = step;
    piece.n = hi - lo;
    T* sp[kMaxStates] = {};
    for (int k = 0; k < layout_.num_states; ++k) sp[k] = s[k] + (lo - state_begin);
    static_cast<Derived*>(this)->template Update<T>(piece, p + lo, g, sp);
  }

  static double ReadLr(const Tensor& t) {
    return t.dtype() == DType::kFloat32 ? static_cast<double>(t.data<float>()[0]) : t.data<double>()[0];
  }

  const UpdateLayout layout_;
  const UpdateParts parts_;
  std::vector<const void*> grads_;
};

class SgdOp final : public UpdateOp<SgdOp> {
 public:
  explicit SgdOp(const OpInit& init)
      : UpdateOp(init, kSgdLayout), wd_(args().Float("weight_decay", 0.0)) {}

  template <typename T, class G>
  void Update(const Step& st, T* p, G g, T* const*) {
    const T lr = static_cast<T>(st.lr), wd = static_cast<T>(wd_);
    if (wd_ != 0)
      SgdKernel<T, true, G>(st.n, p, g, lr, wd);
    else
      SgdKernel<T, false, G>(st.n, p, g, lr, wd);
  }

 private:
  const double wd_;
};

class MomentumSgdOp final : public UpdateOp<MomentumSgdOp> {
 public:
  explicit MomentumSgdOp(const OpInit& init)
      : UpdateOp(init, kMomentumLayout),
        args_(ReadMomentumArgs(args())) {}

  template <typename T, class G>
  void Update(const Step& st, T* p, G g, T* const* s) {
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
  const MomentumArgs args_;
};

class AdamOp final : public UpdateOp<AdamOp> {
 public:
  explicit AdamOp(const OpInit& init)
      : UpdateOp(init, kAdamLayout),
        hyper_(ReadAdamArgs(args())) {}

  template <typename T, class G>
  void Update(const Step& st, T* p, G g, T* const* s) {
    const AdamCoeffs<T> c =
        MakeAdamCoeffs<T>(hyper_, st.lr, st.iter, [](double x) { return std::sqrt(x); });
    if (hyper_.weight_decay != 0)
      AdamKernel<T, true, G>(st.n, p, g, s[0], s[1], c);
    else
      AdamKernel<T, false, G>(st.n, p, g, s[0], s[1], c);
  }

 private:
  const AdamHyper hyper_;
};

class AdagradOp final : public UpdateOp<AdagradOp> {
 public:
  explicit AdagradOp(const OpInit& init)
      : UpdateOp(init, kAdagradLayout),
        args_(ReadAdagradArgs(args())) {}

  template <typename T, class G>
  void Update(const Step& st, T* p, G g, T* const* s) {
    const T lr = static_cast<T>(st.lr), eps = static_cast<T>(args_.epsilon), decay = static_cast<T>(args_.decay),
            wd = static_cast<T>(args_.weight_decay);
    if (args_.weight_decay != 0)
      AdagradKernel<T, true, G>(st.n, p, g, s[0], lr, eps, decay, wd);
    else
      AdagradKernel<T, false, G>(st.n, p, g, s[0], lr, eps, decay, wd);
  }

 private:
  const AdagradArgs args_;
};

// ---- schemas and registration --------------------------------------------------

// Extra gradients an update sums (replicas of one process sharing a param).
constexpr int kMaxExtraGrads = 1023;

DP_OPERATOR_SCHEMA(SGD)
    .NumInputs(3, 3 + kMaxExtraGrads)
    .NumOutputs(1)
    .EnforceInplace({{0, 0}})
    .Inputs({"param", "grad", "lr"})
    .Outputs({"param"})
    .Arg("weight_decay", ArgKind::kFloat, 0.0, "L2 penalty added to the gradient")
    .Arg("part", ArgKind::kInt, 0, "which of the parts this op updates")
    .Arg("parts", ArgKind::kInt, 1, "contiguous parts of the elements, one updated here (1: all)")
    .Arg("sharded_state", ArgKind::kInt, 0,
         "1: the state tensors hold this part's elements alone, 1-D (a sharded optimizer state, ZeRO-1)")
    .ShapeInference(InferUpdate(kSgdLayout))
    .Doc("param -= lr * (grad + weight_decay * param), in place.");

DP_OPERATOR_SCHEMA(MomentumSGD)
    .NumInputs(4, 4 + kMaxExtraGrads)
    .NumOutputs(2)
    .EnforceInplace({{0, 0}, {2, 1}})
    .Inputs({"param", "grad", "momentum", "lr"})
    .Outputs({"param", "momentum"})
    .Arg("momentum", ArgKind::kFloat, 0.9, "mu")
    .Arg("nesterov", ArgKind::kInt, 0, "1: Nesterov momentum")
    .Arg("weight_decay", ArgKind::kFloat, 0.0, "L2 penalty added to the gradient")
    .Arg("part", ArgKind::kInt, 0, "which of the parts this op updates")
    .Arg("parts", ArgKind::kInt, 1, "contiguous parts of the elements, one updated here (1: all)")
    .Arg("sharded_state", ArgKind::kInt, 0,
         "1: the state tensors hold this part's elements alone, 1-D (a sharded optimizer state, ZeRO-1)")
    .ShapeInference(InferUpdate(kMomentumLayout))
    .Doc("PyTorch SGD with momentum, in place: d = grad + wd * param; buf = mu * buf + d; "
         "param -= lr * (nesterov ? d + mu * buf : buf). The buffer starts at zero.");

DP_OPERATOR_SCHEMA(Adam)
    .NumInputs(6, 6 + kMaxExtraGrads)
    .NumOutputs(3)
    .EnforceInplace({{0, 0}, {2, 1}, {3, 2}})
    .Inputs({"param", "grad", "m", "v", "lr", "iter"})
    .Outputs({"param", "m", "v"})
    .Arg("beta1", ArgKind::kFloat, 0.9, "decay of the first moment m")
    .Arg("beta2", ArgKind::kFloat, 0.999, "decay of the second moment v")
    .Arg("epsilon", ArgKind::kFloat, 1e-8, "added after the bias-corrected square root")
    .Arg("weight_decay", ArgKind::kFloat, 0.0, "L2 penalty added to the gradient")
    .Arg("part", ArgKind::kInt, 0, "which of the parts this op updates")
    .Arg("parts", ArgKind::kInt, 1, "contiguous parts of the elements, one updated here (1: all)")
    .Arg("sharded_state", ArgKind::kInt, 0,
         "1: the state tensors hold this part's elements alone, 1-D (a sharded optimizer state, ZeRO-1)")
    .ShapeInference(InferUpdate(kAdamLayout))
    .Doc("torch.optim.Adam, in place: d = grad + wd * param; m = b1 m + (1-b1) d; v = b2 v + (1-b2) d^2; "
         "param -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) with t = iter (>= 1).");

DP_OPERATOR_SCHEMA(Adagrad)
    .NumInputs(4, 4 + kMaxExtraGrads)
    .NumOutputs(2)
    .EnforceInplace({{0, 0}, {2, 1}})
    .Inputs({"param", "grad", "h", "lr"})
    .Outputs({"param", "h"})
    .Arg("epsilon", ArgKind::kFloat, 1e-10, "added after the square root")
    .Arg("decay", ArgKind::kFloat, 1.0, "factor on the accumulated squares")
    .Arg("weight_decay", ArgKind::kFloat, 0.0, "L2 penalty added to the gradient")
    .Arg("part", ArgKind::kInt, 0, "which of the parts this op updates")
    .Arg("parts", ArgKind::kInt, 1, "contiguous parts of the elements, one updated here (1: all)")
    .Arg("sharded_state", ArgKind::kInt, 0,
         "1: the state tensors hold this part's elements alone, 1-D (a sharded optimizer state, ZeRO-1)")
    .ShapeInference(InferUpdate(kAdagradLayout))
    .Doc("Adagrad, in place: d = grad + wd * param; h = decay * h + d^2; param -= lr * d / (sqrt(h) + eps).");

DP_REGISTER_CPU_OPERATOR(SGD, SgdOp);
DP_REGISTER_CPU_OPERATOR(MomentumSGD, MomentumSgdOp);
DP_REGISTER_CPU_OPERATOR(Adam, AdamOp);
DP_REGISTER_CPU_OPERATOR(Adagrad, AdagradOp);
DP_NO_GRADIENT(SGD);
DP_NO_GRADIENT(MomentumSGD);
DP_NO_GRADIENT(Adam);
DP_NO_GRADIENT(Adagrad);

}  // namespace
}  // namespace dp
