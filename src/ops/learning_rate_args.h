// LearningRate's arguments, read and checked once for its CPU and CUDA
// kernels (ops/cpu/learning_rate_op.cc, ops/cuda/schedule_ops.cc) and its
// shape inference. Failures are kInvalidArgument naming the argument (kDType
// for `dtype`).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "graph/net_def.h"
#include "ops/math/learning_rate.h"
#include "ops/op_utils.h"

namespace dp {

struct LrConfig {
  math::LrSchedule schedule;
  DType dtype;
};

inline LrConfig ParseLrConfig(const ArgReader& args) {
  LrConfig config;
  math::LrSchedule& c = config.schedule;
  c.base_lr = args.Float("base_lr");
  DP_ENFORCE(std::isfinite(c.base_lr), "argument 'base_lr' must be finite, got ", c.base_lr);
  const std::string policy = args.String("policy", std::string("fixed"));
  if (policy == "fixed")
    c.policy = math::kLrFixed;
  else if (policy == "step")
    c.policy = math::kLrStep;
  else if (policy == "exp")
    c.policy = math::kLrExp;
  else if (policy == "inv")
    c.policy = math::kLrInv;
  else if (policy == "cosine")
    c.policy = math::kLrCosine;
  else
    DP_THROW(Code::kInvalidArgument, "argument 'policy' must be fixed, step, exp, inv or cosine, got '", policy, "'");
  c.gamma = args.Float("gamma", 0.1);
  c.power = args.Float("power", 1.0);
  c.stepsize = args.Int("stepsize", 1);
  c.max_iter = args.Int("max_iter", 1);
  c.warmup_iters = args.Int("warmup_iters", 0);
  c.warmup_start_factor = args.Float("warmup_start_factor", 0.1);
  DP_ENFORCE(std::isfinite(c.gamma), "argument 'gamma' must be finite, got ", c.gamma);
  DP_ENFORCE(std::isfinite(c.power), "argument 'power' must be finite, got ", c.power);
  DP_ENFORCE(c.stepsize > 0, "argument 'stepsize' must be > 0, got ", c.stepsize);
  DP_ENFORCE(c.max_iter > 0, "argument 'max_iter' must be > 0, got ", c.max_iter);
  DP_ENFORCE(c.warmup_iters >= 0, "argument 'warmup_iters' must be >= 0, got ", c.warmup_iters);
  DP_ENFORCE(std::isfinite(c.warmup_start_factor) && c.warmup_start_factor >= 0,
             "argument 'warmup_start_factor' must be >= 0, got ", c.warmup_start_factor);
  const int64_t dt = args.Int("dtype", static_cast<int64_t>(DType::kFloat32));
  DP_ENFORCE_CODE(dt == static_cast<int64_t>(DType::kFloat32) || dt == static_cast<int64_t>(DType::kFloat64),
                  Code::kDType, "argument 'dtype' must be 1 (float32) or 4 (float64), got ", dt);
  config.dtype = static_cast<DType>(dt);
  return config;
}

}  // namespace dp
