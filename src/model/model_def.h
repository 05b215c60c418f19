// ModelDef: what a training run needs besides data (schemas/model.fbs).
// The forward net maps inputs (fed per batch) and params (made by the init
// net) to losses and metrics; training nets (training.h) and data-parallel
// nets are derived from it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/net_def.h"

namespace dp {

struct OptimizerDef {
  std::string type;  // "sgd" | "momentum" | "adam" | "adagrad"
  double lr = 0.01;
  double momentum = 0.9;
  bool nesterov = false;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0;
  std::string lr_policy = "fixed";
  double gamma = 0.1;
  int64_t stepsize = 1;
  double power = 1;
  int64_t max_iter = 1;
  int64_t warmup_iters = 0;
  double warmup_start_factor = 0.1;
};

struct ModelDef {
  static constexpr int32_t kSchemaVersion = 1;
  std::string name;
  NetDef init_net;
  NetDef forward_net;
  std::vector<std::string> params;
  std::vector<std::string> computed_params;
  std::vector<std::string> inputs;
  std::vector<std::string> losses;
  std::vector<std::string> metrics;
  std::optional<OptimizerDef> optimizer;
};

// Completes and checks a model: params, computed params and inputs become
// external inputs of the forward net when it does not list them; both nets
// must validate; every param and computed param is made by the init net and
// read by the forward net; inputs are read by the forward net and not made by
// the init net; losses and metrics are written by the forward net; no blob is
// in two lists; the optimizer is known and its numbers make sense.
// Throws kInvalidNet (kInvalidArgument for optimizer values) naming the blob.
void CompleteAndValidateModel(ModelDef& model);

// The optimizer's checks alone (also used when an option overrides it).
void ValidateOptimizer(const OptimizerDef& opt);

}  // namespace dp
