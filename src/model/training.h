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
#include "ops/update_fusion.h"

namespace dp {

// Blob names of the shared optimizer state.
inline const char* kIterBlob = "optimizer/iter";  // int64 [1], on the CPU (or the one GPU of a step)
inline const char* kLrBlob = "optimizer/lr";      // float32 [1]

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
