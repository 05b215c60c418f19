// Inference nets: from a model, the forward ops that map its inputs to chosen
// outputs (the logits, the softmax), in inference mode, without the losses,
// metrics and the labels they read. They read the params under the model's
// names, so that a workspace holding trained (or checkpointed) params runs
// them as they are, and many workspaces can share one copy of the params.
#pragma once

#include <string>
#include <vector>

#include "model/model_def.h"

namespace dp {

struct InferenceOptions {
  bool fuse = true;  // graph/fusion.h (CPU FC + Relu), as the training nets fuse
};

// The outputs an inference net has when none are named: the blobs the
// model's losses and metrics are computed from, i.e. the inputs and the other
// outputs of the ops that write a loss or metric, where the forward net
// writes them (SoftmaxWithLoss + Accuracy: the logits and the softmax); when
// there are none (a model without losses or metrics), the forward net's
// external outputs that it writes (an imported ONNX graph's outputs), else
// the blobs it writes and no op reads. In the order the forward net writes
// them.
std::vector<std::string> DefaultInferenceOutputs(const ModelDef& model, const InferenceOptions& options = {});

// The net computing `outputs` (empty: DefaultInferenceOutputs) from the
// model's inputs, params and computed params: the forward net (fused like
// the training nets unless options.fuse is false) in inference mode (as the
// eval net of BuildTraining: is_test on SpatialBN and Dropout), cut down to
// the ops the outputs need, with each SoftmaxWithLoss whose loss is not asked
// for replaced by a Softmax (the same softmax, bit for bit, without labels).
// Its external inputs are the model inputs and params it reads, its external
// outputs `outputs`. An output may be a loss or a metric: the net then reads
// what that needs (the labels). kNotFound for an output that the forward net
// does not write in inference mode (with the nearest name it writes),
// kInvalidArgument for an empty or repeated one.
NetDef BuildInference(const ModelDef& model, const std::vector<std::string>& outputs,
                      const InferenceOptions& options = {});

}  // namespace dp
