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
//     they start (MakeWritable before them).
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

template <typename T, bool kWD, class G>
void SgdKernel(int64_t n, T* __restrict p, G g, T lr, T wd) {
  for (int64_t i = 0; i < n; ++i) {
    T d = g(i);
    if constexpr (kWD) d += wd * p[i];
    p[i] -= lr * d;
  }
}

template <typename T, bool kWD, bool kNesterov, class G>
void MomentumKernel(int64_t n, T* __restrict p, G g, T* __restrict buf, T lr, T mu, T wd) {
  for (int64_t i = 0; i < n; ++i) {
    T d = g(i);
    if constexpr (kWD) d += wd * p[i];
    const T v = mu * buf[i] + d;
    buf[i] = v;
    if constexpr (kNesterov)
      p[i] -= lr * (d + mu * v);
    else
      p[i] -= lr * v;
  }
}

template <typename T>
struct AdamCoeffs {
  T b1, c1, b2, c2;  // c = 1 - b
  T step;            // lr / (1 - beta1^t)
  T rs;              // 1 / sqrt(1 - beta2^t)
  T eps, wd;
};

template <typename T, bool kWD, class G>
void AdamKernel(int64_t n, T* __restrict p, G g, T* __restrict m, T* __restrict v,
                const AdamCoeffs<T> c) {
  ForLanes<T>(n, [&](auto lane, int64_t i) {
    using L = decltype(lane);
    using V = typename L::V;
    V pv = L::Load(p + i);
    V d = g.template Load<L>(i);
    if constexpr (kWD) d = d + L::Set(c.wd) * pv;
    const V mv = L::Set(c.b1) * L::Load(m + i) + L::Set(c.c1) * d;
    const V vv = L::Set(c.b2) * L::Load(v + i) + L::Set(c.c2) * (d * d);
    pv = pv - L::Set(c.step) * mv / (L::Sqrt(vv) * L::Set(c.rs) + L::Set(c.eps));
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
    V pv = L::Load(p + i);
    V d = g.template Load<L>(i);
    if constexpr (kWD) d = d + L::Set(wd) * pv;
    const V hv = L::Set(decay) * L::Load(h + i) + d * d;
    pv = pv - L::Set(lr) * d / (L::Sqrt(hv) + L::Set(eps));
    L::Store(h + i, hv);
    L::Store(p + i, pv);
  });
}

// ---- checks shared by kernels and shape inference ----------------------------

// Inputs are param, grad, num_states state tensors, lr, then iter if the
// optimizer reads one; outputs are param and the states, each in place.
struct Layout {
  int num_states;
  bool has_iter;
  int lr() const { return 2 + num_states; }
  int iter() const { return 3 + num_states; }
  int num_inputs() const { return has_iter ? 4 + num_states : 3 + num_states; }  // without extra gradients
};

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

// info(i) -> TensorInfo of input i; name(i) -> "grad 'w_grad'".
// `inputs` counts the extra gradients too.
template <typename Info, typename Name>
void CheckUpdateInputs(const Layout& layout, int inputs, Info info, Name name) {
  const TensorInfo p = info(0);
  DP_ENFORCE_CODE(IsFloat(p.dtype), Code::kDType, name(0), " must be float32 or float64, got ", DTypeName(p.dtype));
  std::vector<int> like_param;  // grads and states
  for (int i = 1; i < 2 + layout.num_states; ++i) like_param.push_back(i);
  for (int i = layout.num_inputs(); i < inputs; ++i) like_param.push_back(i);
  for (int i : like_param) {
    const TensorInfo t = info(i);
    DP_ENFORCE_CODE(t.dtype == p.dtype, Code::kDType, name(i), " is ", DTypeName(t.dtype), " but ", name(0), " is ",
                    DTypeName(p.dtype));
    DP_ENFORCE_CODE(t.dims == p.dims, Code::kShape, name(i), " has shape ", DimsString(t.dims), " but ", name(0),
                    " has ", DimsString(p.dims));
  }
  const TensorInfo lr = info(layout.lr());
  DP_ENFORCE_CODE(IsFloat(lr.dtype), Code::kDType, name(layout.lr()), " must be float32 or float64, got ",
                  DTypeName(lr.dtype));
  DP_ENFORCE_CODE(NumElements(lr.dims) == 1, Code::kShape, name(layout.lr()), " must hold one value, got shape ",
                  DimsString(lr.dims));
  if (layout.has_iter) {
    const TensorInfo it = info(layout.iter());
    DP_ENFORCE_CODE(it.dtype == DType::kInt64, Code::kDType, name(layout.iter()), " must be int64, got ",
                    DTypeName(it.dtype));
    DP_ENFORCE_CODE(NumElements(it.dims) == 1, Code::kShape, name(layout.iter()), " must hold one value, got shape ",
                    DimsString(it.dims));
  }
}

OpSchema::InferenceFn InferUpdate(Layout layout) {
  return [layout](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
    const OpSchema* schema = OpSchemaRegistry::Find(op.type);
    CheckUpdateInputs(
        layout, static_cast<int>(in.size()), [&](int i) { return in.at(static_cast<size_t>(i)); },
        [&](int i) {
          const std::string role = i < layout.num_inputs() ? schema->InputName(static_cast<size_t>(i)) : "grad";
          return StrCat(role, " '", op.inputs.at(static_cast<size_t>(i)), "'");
        });
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
  UpdateOp(const OpInit& init, Layout layout)
      : Operator(init),
        layout_(layout),
        part_(args().Int("part", 0)),
        parts_(args().Int("parts", 1)),
        grads_(static_cast<size_t>(1 + std::max(0, InputSize() - layout.num_inputs()))) {
    DP_ENFORCE(parts_ >= 1 && part_ >= 0 && part_ < parts_, "arguments 'part' and 'parts' must satisfy 0 <= part < ",
               "parts, got part ", part_, " of ", parts_);
  }

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
        [&](int i) { return InputDesc(i); });
    Step step{Input(0).numel(), ReadLr(Input(layout_.lr())), 0};
    if (layout_.has_iter) {
      step.iter = Input(layout_.iter()).template data<int64_t>()[0];
      DP_ENFORCE_CODE(step.iter >= 1, Code::kOutOfRange, InputDesc(layout_.iter()), " is ", step.iter,
                      " but must be >= 1 (run Iter before the update)");
    }
    // This op's part of the elements: parts of 64 elements, the last short.
    const int64_t per_part = (step.n + parts_ * 64 - 1) / (parts_ * 64) * 64;
    const int64_t begin = std::min(step.n, part_ * per_part), end = std::min(step.n, begin + per_part);
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
      if (parts_ > 1)
        for (int k = 0; k <= layout_.num_states; ++k)
          DP_ENFORCE_CODE(Output(k)->writable_in_place(), Code::kFailedPrecondition, OutputDesc(k),
                          " is caller memory or shared with another holder, so part ", part_, " of ", parts_,
                          " cannot update it in place: run MakeWritable on it before the update's parts");
      T* p = Output(0)->template mutable_data<T>();
      T* s[kMaxStates] = {};
      for (int k = 0; k < layout_.num_states; ++k) s[k] = Output(1 + k)->template mutable_data<T>();
      // Elementwise: pieces of the part on the op's threads (an update is
      // memory-bound, and the step's tail after the last gradient).
      const int64_t n = end - begin;
      ParallelForChunks(n, ParallelChunks(n, kGrain), 64, [&](int, int64_t lo, int64_t hi) {
        lo += begin;
        hi += begin;
        if (grads_.size() == 1) return UpdateRange<T>(step, lo, hi, p, OneGrad<T>{g(0) + lo}, s);
        if (grads_.size() == 2) return UpdateRange<T>(step, lo, hi, p, TwoGrads<T>{g(0) + lo, g(1) + lo}, s);
        T sum[kSumBlock];
        for (int64_t b = lo; b < hi; b += kSumBlock) {
          const int64_t len = std::min(kSumBlock, hi - b);
          const T* g0 = g(0) + b;
          for (int64_t j = 0; j < len; ++j) sum[j] = g0[j];
          for (size_t k = 1; k < grads_.size(); ++k) {
            const T* gk = g(k) + b;
            for (int64_t j = 0; j < len; ++j) sum[j] += gk[j];
          }
          UpdateRange<T>(step, b, b + len, p, OneGrad<T>{sum}, s);
        }
      });
    });
  }

  // Elements [lo, hi), their gradient at g(0 .. hi - lo).
  template <typename T, class G>
  void UpdateRange(const Step& step, int64_t lo, int64_t hi, T* p, G g, T* const* s) {
    Step piece = step;
    piece.n = hi - lo;
    T* sp[kMaxStates] = {};
    for (int k = 0; k < layout_.num_states; ++k) sp[k] = s[k] + lo;
    static_cast<Derived*>(this)->template Update<T>(piece, p + lo, g, sp);
  }

  static double ReadLr(const Tensor& t) {
    return t.dtype() == DType::kFloat32 ? static_cast<double>(t.data<float>()[0]) : t.data<double>()[0];
  }

  const Layout layout_;
  const int64_t part_, parts_;
  std::vector<const void*> grads_;
};

constexpr Layout kSgdLayout{0, false};
constexpr Layout kMomentumLayout{1, false};
constexpr Layout kAdamLayout{2, true};
constexpr Layout kAdagradLayout{1, false};

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
        mu_(args().Float("momentum", 0.9)),
        wd_(args().Float("weight_decay", 0.0)),
        nesterov_(args().Int("nesterov", 0) != 0) {}

  template <typename T, class G>
  void Update(const Step& st, T* p, G g, T* const* s) {
    const T lr = static_cast<T>(st.lr), mu = static_cast<T>(mu_), wd = static_cast<T>(wd_);
    const bool has_wd = wd_ != 0;
    if (nesterov_) {
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
  const double mu_, wd_;
  const bool nesterov_;
};

class AdamOp final : public UpdateOp<AdamOp> {
 public:
  explicit AdamOp(const OpInit& init)
      : UpdateOp(init, kAdamLayout),
        b1_(args().Float("beta1", 0.9)),
        b2_(args().Float("beta2", 0.999)),
        eps_(args().Float("epsilon", 1e-8)),
        wd_(args().Float("weight_decay", 0.0)) {
    DP_ENFORCE(b1_ >= 0 && b1_ < 1, "argument 'beta1' must be in [0, 1), got ", b1_);
    DP_ENFORCE(b2_ >= 0 && b2_ < 1, "argument 'beta2' must be in [0, 1), got ", b2_);
    DP_ENFORCE(eps_ >= 0, "argument 'epsilon' must be >= 0, got ", eps_);
  }

  template <typename T, class G>
  void Update(const Step& st, T* p, G g, T* const* s) {
    const double t = static_cast<double>(st.iter);
    const double bc1 = 1.0 - std::pow(b1_, t), bc2 = 1.0 - std::pow(b2_, t);
    AdamCoeffs<T> c;
    c.b1 = static_cast<T>(b1_);
    c.c1 = static_cast<T>(1.0 - b1_);
    c.b2 = static_cast<T>(b2_);
    c.c2 = static_cast<T>(1.0 - b2_);
    c.step = static_cast<T>(st.lr / bc1);
    c.rs = static_cast<T>(1.0 / std::sqrt(bc2));
    c.eps = static_cast<T>(eps_);
    c.wd = static_cast<T>(wd_);
    if (wd_ != 0)
      AdamKernel<T, true, G>(st.n, p, g, s[0], s[1], c);
    else
      AdamKernel<T, false, G>(st.n, p, g, s[0], s[1], c);
  }

 private:
  const double b1_, b2_, eps_, wd_;
};

class AdagradOp final : public UpdateOp<AdagradOp> {
 public:
  explicit AdagradOp(const OpInit& init)
      : UpdateOp(init, kAdagradLayout),
        eps_(args().Float("epsilon", 1e-10)),
        decay_(args().Float("decay", 1.0)),
        wd_(args().Float("weight_decay", 0.0)) {
    DP_ENFORCE(eps_ >= 0, "argument 'epsilon' must be >= 0, got ", eps_);
    DP_ENFORCE(decay_ >= 0, "argument 'decay' must be >= 0, got ", decay_);
  }

  template <typename T, class G>
  void Update(const Step& st, T* p, G g, T* const* s) {
    const T lr = static_cast<T>(st.lr), eps = static_cast<T>(eps_), decay = static_cast<T>(decay_),
            wd = static_cast<T>(wd_);
    if (wd_ != 0)
      AdagradKernel<T, true, G>(st.n, p, g, s[0], lr, eps, decay, wd);
    else
      AdagradKernel<T, false, G>(st.n, p, g, s[0], lr, eps, decay, wd);
  }

 private:
  const double eps_, decay_, wd_;
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
