// Training nets derived from a ModelDef, in pieces that data parallelism
// (parallelize) reuses per device: optimizer state in the init net, the
// iteration counter and learning rate, one optimizer update per param, the
// inference-mode forward net.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autodiff/add_gradients.h"
#include "model/model_def.h"
#include "ops/op_utils.h"  // kLossScaleBlob
#include "ops/update_fusion.h"

namespace dp {

// Blob names of the shared optimizer state.
inline const char* kIterBlob = "optimizer/iter";  // int64 [1], on the CPU (or the one GPU of a step)
inline const char* kLrBlob = "optimizer/lr";      // float32 [1]

// Dynamic loss scaling (ops/math/loss_scaling.h), for fp16 products
// (core/math_mode.h): the loss's gradient seed times the scale, the
// gradients unscaled (UnscaleGradients) before the updates, a step whose
// gradients overflowed skipped (the updates read GateLearningRate's rate,
// NaN then), and the scale updated after them (UpdateLossScale). Its state,
// the scale and its count of good steps, is training state: a checkpoint
// holds it (LossScalingStateBlobs). One per process, global like the
// iteration counter and beside it (on the step's GPU, or the host).
struct LossScaling {
  bool dynamic = false;
  double initial = 65536.0;        // the first scale, > 0 (2^16)
  int64_t growth_interval = 2000;  // good steps before it doubles; it halves after an overflow
};
inline const char* kLossScaleStepsBlob = "optimizer/loss_scale_good_steps";  // float32 []
inline const char* kFoundInfBlob = "optimizer/found_inf";                  // float32 [], this step's
inline const char* kLrStepBlob = "optimizer/lr_step";                      // the rate the updates read
// kLossScaleBlob ("optimizer/loss_scale", ops/op_utils.h) holds the scale.
std::vector<std::string> LossScalingStateBlobs();  // the scale and its good steps
// Checks the options (kInvalidArgument naming `what`'s fields).
void CheckLossScaling(const LossScaling& ls, const std::string& what);
// The init net's part: the scale, its good steps and found_inf, on `where`.
std::vector<OperatorDef> LossScalingInitOps(const LossScaling& ls, DeviceOption where);
// In a gradient net: each loss's gradient seed (autodiff's "<loss>_grad_seed"
// ConstantFill) multiplied by the scale (`scale`: kLossScaleBlob, or a copy
// of it), right after it. kInvalidNet when a loss has no seed there.
void ScaleLossSeeds(NetDef& net, const std::vector<std::string>& losses, const std::string& scale = kLossScaleBlob);
// The ops between the gradients and the updates (UnscaleGradients over
// `grads`, GateLearningRate of `lr` into kLrStepBlob) and the one after them
// (UpdateLossScale), placed on `where`.
std::vector<OperatorDef> UnscaleOps(const std::vector<std::string>& grads, const std::string& lr, DeviceOption where);
OperatorDef LossScaleUpdateOp(const LossScaling& ls, DeviceOption where);

// The state blobs `opt` keeps per param ("w/momentum", "w/adam_m", ...).
std::vector<std::string> OptimizerStateBlobs(const OptimizerDef& opt, const std::string& param);

// Optimizer initialisation, in two parts that an init net makes separately:
//  - the iteration counter kIterBlob (int64 [1] = 0, placed on the CPU, or
//    copied to `where` when the step runs on one GPU): shared by every param
//    and every replica, so made once per training process (the Iter and
//    LearningRate ops of the step read it);
//  - each param's optimizer state OptimizerStateBlobs(opt, p): zeros shaped
//    like p, made after p exists; the ops carry no device (the init net's
//    default applies unless the caller places them on the param's device, as
//    data parallelism does for each replica's set).
// One-device training wants both (AddOptimizerInit); Parallelize makes the
// counter once and the state per replica, without relying on op positions.
std::vector<OperatorDef> IterationCounterInitOps(DeviceOption where = {});
std::vector<OperatorDef> OptimizerStateInitOps(const OptimizerDef& opt, const std::vector<std::string>& params);

// The training state of a model, as one-device training names it: what a
// checkpoint must hold to resume exactly (Caffe2's GetCheckpointParams).
// Params, computed params (BN running statistics), each param's optimizer
// state and, with an optimizer, the iteration counter (the learning rate is
// a function of it, and so are training Dropout's masks: TrainingForwardNet
// wires the counter into them).
std::vector<std::string> TrainingStateBlobs(const ModelDef& model);

// IterationCounterInitOps() (on the CPU), then OptimizerStateInitOps(opt, params), appended to `init`.
void AddOptimizerInit(NetDef& init, const OptimizerDef& opt, const std::vector<std::string>& params);

// Iter and LearningRate ops, the first ops of a training step: on the CPU,
// or placed on `where` (a GPU: a step on one GPU keeps the counter and the
// rate there, so its CUDA graph holds them and no copy crosses from the host).
std::vector<OperatorDef> IterAndLearningRateOps(const OptimizerDef& opt, DeviceOption where = {});

// The op updating `param` from `grad` in place.
OperatorDef OptimizerUpdateOp(const OptimizerDef& opt, const std::string& param, const std::string& grad,
                              const std::string& lr_blob = kLrBlob, const std::string& iter_blob = kIterBlob);

// The forward net the training nets are built from: the model's, with the
// iteration counter wired into training-mode Dropout ops as their `counter`
// (their masks then follow from the counter, which checkpoints hold) and free
// fusions applied when `fuse` (params, inputs, losses, metrics stay observable).
NetDef TrainingForwardNet(const ModelDef& model, bool fuse);

// The forward net in inference mode: is_test=1 on SpatialBN and Dropout.
NetDef InferenceNet(const NetDef& forward);

struct TrainingOptions {
  double loss_scale = 1.0;
  // graph/fusion.h on the forward net (CPU FC + Relu) and on the step
  // (SoftmaxWithLoss with its gradient), and the step's updates as one
  // multi-tensor op (ops/update_fusion.h; CUDA, or every device with
  // update_fusion.cpu).
  bool fuse = true;
  UpdateFusionOptions update_fusion;
  MemoryMode memory = MemoryMode::kShare;  // the train net's (graph/memory_plan.h)
  LossScaling loss_scaling;  // dynamic: for fp16 products (the updates then follow every gradient)
};

struct TrainingNets {
  NetDef init, train, eval;
  std::vector<std::pair<std::string, std::string>> grads;  // param -> gradient blob
};

// The model's optimizer, after checking that the model can be trained: it
// has an optimizer (valid), losses and params (kInvalidArgument otherwise).
const OptimizerDef& CheckTrainable(const ModelDef& model);

// Appends `blob` to the net's external inputs unless it is listed already.
void AddExternalInput(NetDef& net, const std::string& blob);

// One-device training. The model needs an optimizer and at least one loss
// (kInvalidArgument otherwise). Each param's update is placed right after the
// last op that reads the param or writes its gradient.
TrainingNets BuildTraining(const ModelDef& model, const TrainingOptions& options = {});

}  // namespace dp
