// CUDA kernel of Transpose (schema in ops/cpu/transpose_op.cc): any dtype of
// 1, 2, 4 or 8 bytes, as on the CPU. Y is written in order, each element
// gathered from X through the collapsed permutation (ops/math/transpose.h,
// the walk the CPU kernel's odometer takes).
#include "cuda/op_launchers.h"
#include "ops/cpu/transpose_plan.h"
#include "ops/cuda/cuda_operator.h"
#include "ops/cuda/strided_index_check.h"
#include "ops/math/transpose.h"

namespace dp {
namespace {

class TransposeOp final : public CudaOperator {
 public:
  using CudaOperator::CudaOperator;

 private:
  void RunOnDevice() override {
    const Tensor& x = DeviceInput(0);
    TransposePlan p = PlanTranspose(x.dims(), args(), InputDesc(0));
    const size_t itemsize = x.itemsize();
    DP_ENFORCE_CODE(itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8, Code::kDType, InputDesc(0),
                    ": cannot transpose ", DTypeName(x.dtype()));
    math::StridedIndex index;
    EnforceStridedIndexFits(math::MakeStridedIndex(math::CollapseTranspose(x.dims(), p.axes), 0, &index),
                            InputDesc(0));
    const void* xp = x.raw_data();
    const int64_t n = NumElements(p.out);
    void* yp = Output(0, std::move(p.out), x.dtype())->raw_mutable_data();
    DP_CUDA_CHECK(cuda::LaunchGather(xp, yp, index, n, static_cast<int>(itemsize), stream()));
  }
};

DP_REGISTER_CUDA_OPERATOR(Transpose, TransposeOp);

}  // namespace
}  // namespace dp
