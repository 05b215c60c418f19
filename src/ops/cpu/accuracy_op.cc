// Accuracy: the fraction of samples whose label is among the top_k scores.
// Ties count against the sample (a score equal to the label's, at a lower
// index, ranks above it), so results do not depend on sort stability.
#include <algorithm>
#include <vector>

#include "core/parallel_for.h"
#include "ops/cpu/loss_checks.h"
#include "ops/gradient_registry.h"
#include "ops/math/losses.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {

void CheckScoresAndLabels(const OperatorDef& op, const Dims& x, const Dims& label, DType lt) {
  const std::string xn = StrCat("scores '", op.inputs[0], "'"), ln = StrCat("labels '", op.inputs[1], "'");
  DP_ENFORCE_CODE(x.size() == 2, Code::kShape, xn, " must be 2-D [N, D], got ", DimsString(x));
  DP_ENFORCE_CODE(lt == DType::kInt32, Code::kDType, ln, " must be int32, got ", DTypeName(lt));
  DP_ENFORCE_CODE(NumElements(label) == x[0], Code::kShape, ln, " ", DimsString(label), " must hold N = ", x[0],
                  " labels");
}

int64_t AccuracyTopK(const ArgReader& args) {
  const int64_t top_k = args.Int("top_k", 1);
  DP_ENFORCE(top_k >= 1, "argument 'top_k' must be >= 1, got ", top_k);
  return top_k;
}

namespace {

class AccuracyOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    const Tensor& x = Input(0);
    const Tensor& label = Input(1);
    CheckScoresAndLabels(def(), x.dims(), label.dims(), label.dtype());
    const int64_t n = x.dim(0), d = x.dim(1);
    const int64_t top_k = AccuracyTopK(args());
    const int32_t* lp = label.data<int32_t>();
    CheckLabelsInRange(InputDesc(1), lp, n, d);
    // Rows split across the op's threads, each part counting its own hits.
    const int chunks = ParallelChunks(n, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, d)));
    correct_.assign(static_cast<size_t>(chunks), 0);
    DispatchFloat(x.dtype(), InputDesc(0), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      ParallelForChunks(n, chunks, 1, [&](int part, int64_t lo, int64_t hi) {
        int64_t hits = 0;
        for (int64_t i = lo; i < hi; ++i) {
          const int32_t l = lp[i];
          const T* row = xp + i * d;
          int64_t rank = 0;  // number of classes ranked above the label
          for (int64_t c = 0; c < d; ++c)
            if (math::RanksAboveLabel(row[c], row[l], c, l)) ++rank;
          if (rank < top_k) ++hits;
        }
        correct_[static_cast<size_t>(part)] = hits;
      });
    });
    int64_t correct = 0;
    for (int64_t hits : correct_) correct += hits;
    float* out = Output(0, {}, DType::kFloat32)->mutable_data<float>();
    out[0] = math::AccuracyFraction(correct, n);
  }
  // Elements per part: a few microseconds of comparisons.
  static constexpr int64_t kGrainElements = 2048;
  std::vector<int64_t> correct_;  // hits per part
};

DP_OPERATOR_SCHEMA(Accuracy)
    .NumInputs(2)
    .NumOutputs(1)
    .Inputs({"scores", "labels"})
    .Outputs({"accuracy"})
    .Arg("top_k", ArgKind::kInt, 1, "count a sample as correct if its label is among the top k")
    .ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
      CheckScoresAndLabels(op, in[0].dims, in[1].dims, in[1].dtype);
      return std::vector<TensorInfo>{{{}, DType::kFloat32}};
    })
    .Doc("Top-k accuracy of scores [N, D] against int32 labels [N], as a float32 scalar.");

DP_REGISTER_CPU_OPERATOR(Accuracy, AccuracyOp);
DP_NO_GRADIENT(Accuracy);

}  // namespace
}  // namespace dp
