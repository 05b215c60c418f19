// CUDA kernels of the synchronised BN ops' per-replica parts (schemas and
// CPU twins in ops/cpu/sync_bn_op.cc; kernels in batchnorm_kernels.cu):
// SpatialBNStats and SpatialBNGradStats produce the float64 [2C + 1] sums
// that Allreduce ops add up across replicas (parallel/sync_bn.cc), and
// SyncSpatialBN / SyncSpatialBNGradient use the allreduced sums where they
// are, on the device. The CPU also checks the allreduced count (at least 1,
// above 1 for training); that needs its value on the host, which would wait
// for the stream, so here a bad count gives non-finite outputs instead.
#include <cstdint>

#include "ops/cuda/batchnorm_forward.h"

namespace dp {
namespace {

using namespace bn;  // NOLINT: the shape rules and kernels of batch norm

class SpatialBNStatsOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = FloatInput(0);
    const BnDims d = BnLayout(InputDesc(0), x.dims(), x.dtype());
    // Scratch: the moments' sums (3C), the partials.
    double* sums = Scratch<double>(3 * d.c + BnPartialsSize(d));
    DP_CUDA_CHECK(cuda::LaunchBnMoments(x.data<float>(), d, sums + 3 * d.c, sums, stream()));
    double* stats = Output(0, {2 * d.c + 1}, DType::kFloat64)->mutable_data<double>();
    DP_CUDA_CHECK(cuda::LaunchBnStatsPack(sums, d.c, d.count(), stats, stream()));
  }
};

class SyncSpatialBNOp final : public CudaBnForwardOp {
 public:
  using CudaBnForwardOp::CudaBnForwardOp;

 private:
  void RunOnDevice() override {
    const BnMode mode = ReadMode(args(), static_cast<size_t>(OutputSize()));
    DP_ENFORCE(!mode.is_test, "SyncSpatialBN is for training; use SpatialBN with is_test=1 for inference");
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = BnLayout(in.names[0], *in.dims[0], in.dtypes[0]);
    CheckChannels(in, 1, 4);
    const Tensor& stats = DeviceInput(5);
    CheckStatsLayout(stats, InputDesc(5), d.c);
    const double* s = stats.data<double>();
    Forward(mode, d, {s, s + d.c, nullptr}, {s + 2 * d.c, 0.0}, Scratch<double>(2 * d.c));
  }
};

class SpatialBNGradStatsOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const InputInfos in = DescribeInputs(0, 4);
    const BnDims d = BnLayout(in.names[0], *in.dims[0], in.dtypes[0]);
    CheckSameDtype(Input(1), InputDesc(1), Input(0), InputDesc(0));
    CheckShapeOfX(in, 1);
    CheckChannels(in, 2, 3);
    const float* x = FloatInput(0).data<float>();
    const float* dy = FloatInput(1).data<float>();
    const float* mean = FloatInput(2).data<float>();
    const float* inv_std = FloatInput(3).data<float>();
    // Scratch: sum_dy (C), sum_dy_xhat (C), the partials.
    double* sums = Scratch<double>(2 * d.c + BnPartialsSize(d));
    DP_CUDA_CHECK(cuda::LaunchBnGradSums(x, dy, mean, inv_std, d, sums + 2 * d.c, sums, stream()));
    float* dscale = Output(0, {d.c}, DType::kFloat32)->mutable_data<float>();
    float* dbias = Output(1, {d.c}, DType::kFloat32)->mutable_data<float>();
    double* gstats = Output(2, {2 * d.c + 1}, DType::kFloat64)->mutable_data<double>();
    DP_CUDA_CHECK(cuda::LaunchBnStoreGradSums(sums, sums + d.c, d.c, d.count(), dscale, dbias, gstats, stream()));
  }
};

class SyncSpatialBNGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const InputInfos in = DescribeInputs(0, 5);
    const BnDims d = CheckGradient(in.names, in.dims, in.dtypes);
    const Tensor& gstats = DeviceInput(5);
    CheckStatsLayout(gstats, InputDesc(5), d.c);
    const double* g = gstats.data<double>();  // [sum_dy_xhat (C), sum_dy (C), count]
    const float* x = FloatInput(0).data<float>();
    const float* scale = FloatInput(1).data<float>();
    const float* dy = FloatInput(2).data<float>();  // before Output: dX may be dY
    const float* mean = FloatInput(3).data<float>();
    const float* inv_std = FloatInput(4).data<float>();
    const Dims xdims = Input(0).dims();
    float* dx = Output(0, xdims, DType::kFloat32)->mutable_data<float>();
    DP_CUDA_CHECK(cuda::LaunchBnBackward(x, dy, scale, mean, inv_std, g + d.c, g, {g + 2 * d.c, 0.0}, d, dx,
                                         stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(SpatialBNStats, SpatialBNStatsOp);
DP_REGISTER_CUDA_OPERATOR(SyncSpatialBN, SyncSpatialBNOp);
DP_REGISTER_CUDA_OPERATOR(SpatialBNGradStats, SpatialBNGradStatsOp);
DP_REGISTER_CUDA_OPERATOR(SyncSpatialBNGradient, SyncSpatialBNGradientOp);

}  // namespace
}  // namespace dp
