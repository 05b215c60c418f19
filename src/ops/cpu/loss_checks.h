// The shape and dtype rules of the softmax, loss and accuracy ops
// (softmax_ops.cc, loss_ops.cc, cross_entropy_op.cc, accuracy_op.cc), shared
// by their CPU kernels, their shape inference and their CUDA kernels
// (ops/cuda), so that every device rejects the same inputs with the same
// messages.
#pragma once

#include <string>
#include <utility>

#include "core/tensor.h"
#include "graph/net_def.h"

namespace dp {

// Softmax(Gradient) over the dims from `axis` (negative counts from the
// back) of a tensor described by `what`: rows * cols.
struct SoftmaxRows {
  int64_t rows, cols;
};
SoftmaxRows SoftmaxRowsAt(const Dims& dims, int64_t axis, const std::string& what);
// SoftmaxGradient's dY (dyd) must match Y (yd) in dtype and shape.
void CheckSoftmaxGradInputs(const Tensor& y, const std::string& yd, const Tensor& dy, const std::string& dyd);

// A loss's gradient input `dl` (described by dld): one value of `dtype`, the
// dtype of the input described by `of` ("X", "P").
void CheckLossGradScalar(const Tensor& dl, const std::string& dld, DType dtype, const char* of);
// AveragedLoss's X: the mean of nothing is undefined.
void CheckAveragedLossInput(const Dims& x, const std::string& xd);

// Rows and elements per row of SquaredL2Distance's X and Y [N, ...] (same
// shape and dtype, at least 1-D); `x` and `y` describe the inputs in messages.
std::pair<int64_t, int64_t> L2Rows(const Dims& xd, DType xt, const std::string& x, const Dims& yd, DType yt,
                                   const std::string& y);
// SquaredL2DistanceGradient's dZ (described by dzd): [n] of X's dtype.
void CheckL2DistanceGrad(const Tensor& dz, const std::string& dzd, int64_t n, DType xt, const std::string& xd);

// SoftmaxWithLoss(Gradient): logits [N, D] and labels int32 [N] or [N, 1];
// `op` names the blobs in messages.
void CheckLogitsAndLabels(const OperatorDef& op, const Dims& x, DType xt, const Dims& label, DType lt, int64_t* rows,
                          int64_t* cols);
// Every label in [0, cols) (the CPU kernels check them before computing any
// row; CUDA cannot read them without a sync); kOutOfRange naming `what` and
// the first sample outside.
void CheckLabelsInRange(const std::string& what, const int32_t* labels, int64_t rows, int64_t cols);
// SoftmaxWithLoss's optional per-sample weights (input `index`): N values of
// the logits' dtype.
void CheckLossWeights(const OperatorDef& op, int index, const Dims& w, DType wt, int64_t rows, DType xt);
// SoftmaxWithLoss with its fused gradient (a third output) takes no weights.
void CheckFusedGradient(const OperatorDef& op, int inputs, int outputs);

// LabelCrossEntropy(Gradient): X [N, D] and label int32 [N] or [N, 1]; xn / ln
// name the blobs in messages.
void CheckXAndLabel(const std::string& xn, const Dims& x, const std::string& ln, const Dims& label, DType lt,
                    int64_t* rows, int64_t* cols);
// LabelCrossEntropyGradient's dY: [N] of X's dtype.
void CheckCrossEntropyGrad(const std::string& dyn, const Dims& dy, DType dyt, const std::string& xn, DType xt,
                           int64_t rows);

// Accuracy: scores [N, D] and N int32 labels.
void CheckScoresAndLabels(const OperatorDef& op, const Dims& x, const Dims& label, DType lt);
// Accuracy's top_k argument, checked to be at least 1.
int64_t AccuracyTopK(const ArgReader& args);

}  // namespace dp
