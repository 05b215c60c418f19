// The forward of SpatialBN and SyncSpatialBN on CUDA (inputs X, scale, bias,
// running_mean, running_var; outputs Y and, in training, running_mean,
// running_var in place, saved_mean, saved_inv_std), as ops/cpu's BnForwardOp:
// they differ only in where the statistics come from (this device's batch,
// or every replica's allreduced sums), which the caller passes as sums on the
// device.
#pragma once

#include "cuda/op_launchers.h"
#include "ops/cpu/batchnorm_kernels.h"
#include "ops/cuda/cuda_operator.h"

namespace dp::bn {

class CudaBnForwardOp : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 protected:
  // Queues the coefficients (from `sums` over `count` in training, from the
  // running statistics in inference) into coeffs (2C doubles of scratch) and
  // the normalisation. Inputs 0-4 must be float32 on this device.
  void Forward(const BnMode& mode, const BnDims& d, BnSums sums, BnCount count, double* coeffs) {
    // Every input pointer before any Output: Y may be X, and the running
    // statistics are written in place.
    const float* x = FloatInput(0).data<float>();
    const float* scale = FloatInput(1).data<float>();
    const float* bias = FloatInput(2).data<float>();
    const float* running_mean = FloatInput(3).data<float>();
    const float* running_var = FloatInput(4).data<float>();
    const Dims xdims = Input(0).dims();
    float* y = Output(0, xdims, DType::kFloat32)->mutable_data<float>();
    if (mode.is_test) {
      DP_CUDA_CHECK(cuda::LaunchBnInferenceCoefficients(running_mean, running_var, d.c, mode.epsilon, coeffs,
                                                        stream()));
    } else {
      float* new_mean = Output(1, {d.c}, DType::kFloat32)->mutable_data<float>();
      float* new_var = Output(2, {d.c}, DType::kFloat32)->mutable_data<float>();
      float* saved_mean = Output(3, {d.c}, DType::kFloat32)->mutable_data<float>();
      float* saved_inv_std = Output(4, {d.c}, DType::kFloat32)->mutable_data<float>();
      DP_CUDA_CHECK(cuda::LaunchBnTrainingFinalize(running_mean, running_var, sums, count, d.c, mode.epsilon,
                                                   mode.momentum, coeffs, new_mean, new_var, saved_mean,
                                                   saved_inv_std, stream()));
    }
    DP_CUDA_CHECK(cuda::LaunchBnNormalize(x, scale, bias, coeffs, d, y, stream()));
  }
};

}  // namespace dp::bn
