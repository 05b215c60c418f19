// CUDA kernels of Concat and ConcatGradient (schemas in
// ops/cpu/concat_op.cc): any dtype of 1, 2, 4 or 8 bytes, as on the CPU.
// Each piece moves in one launch, its `outer` rows between the piece's row
// stride and the joined tensor's (ConcatPlan's row layout). Concat's
// split_info output is made on the host: it is shape metadata, like
// Reshape's old_shape (ops/cpu/shape_ops.cc).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/op_launchers.h"
#include "ops/cpu/concat_plan.h"
#include "ops/cuda/cuda_operator.h"

namespace dp {
namespace {

// The item size the row copies move, checked (kDType naming `what`).
int CopyItemsize(DType dtype, const std::string& what) {
  const size_t size = DTypeSize(dtype);
  DP_ENFORCE_CODE(size == 1 || size == 2 || size == 4 || size == 8, Code::kDType, what, ": cannot concatenate ",
                  DTypeName(dtype));
  return static_cast<int>(size);
}

class ConcatOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

  const char* GraphCaptureObstacle() const override {
    return OutputSize() > 1 ? "its split_info output is written on the host" : nullptr;
  }

 private:
  void RunOnDevice() override {
    std::vector<const void*> src;
    for (int i = 0; i < InputSize(); ++i) src.push_back(DeviceInput(i).raw_data());
    const InputInfos in = DescribeInputs(0, InputSize());
    ConcatPlan p = PlanConcat(in.names, in.dims, in.dtypes, args().Int("axis", 1));
    const DType dtype = in.dtypes[0];
    const int itemsize = CopyItemsize(dtype, in.names[0]);
    const std::vector<int64_t> start = RowStarts(p);
    char* joined = static_cast<char*>(Output(0, p.out, dtype)->raw_mutable_data());
    for (size_t i = 0; i < src.size(); ++i) {
      const int64_t piece_row = p.sizes[i] * p.inner;
      DP_CUDA_CHECK(cuda::LaunchCopyRows(src[i], piece_row, joined + start[i] * itemsize, start.back(), p.outer,
                                         piece_row, itemsize, stream()));
    }
    if (OutputSize() > 1) {
      Tensor* info = Output(1);
      info->Resize({static_cast<int64_t>(p.sizes.size())}, DType::kInt64, DeviceOption{});
      std::copy(p.sizes.begin(), p.sizes.end(), info->mutable_data<int64_t>());
    }
  }
};

class ConcatGradientOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& dy = DeviceInput(0);
    const size_t pieces = static_cast<size_t>(InputSize() - 1);
    std::vector<int64_t> which = GradIndices(args(), pieces, static_cast<size_t>(OutputSize()));
    const InputInfos xs = DescribeInputs(1, InputSize());
    ConcatPlan p = PlanConcatGradient(InputDesc(0), dy.dims(), xs.names, xs.dims, args().Int("axis", 1));
    const DType dtype = dy.dtype();
    const int itemsize = CopyItemsize(dtype, InputDesc(0));
    const std::vector<int64_t> start = RowStarts(p);
    const char* joined = static_cast<const char*>(dy.raw_data());
    for (size_t k = 0; k < which.size(); ++k) {
      const size_t i = static_cast<size_t>(which[k]);
      void* piece = Output(static_cast<int>(k), *xs.dims[i], dtype)->raw_mutable_data();
      const int64_t piece_row = p.sizes[i] * p.inner;
      DP_CUDA_CHECK(cuda::LaunchCopyRows(joined + start[i] * itemsize, start.back(), piece, piece_row, p.outer,
                                         piece_row, itemsize, stream()));
    }
  }
};

DP_REGISTER_CUDA_OPERATOR(Concat, ConcatOp);
DP_REGISTER_CUDA_OPERATOR(ConcatGradient, ConcatGradientOp);

}  // namespace
}  // namespace dp
