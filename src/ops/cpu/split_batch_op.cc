// SplitBatch(X) -> Y_0, ..., Y_{N-1}: the data-parallel scatter. A global
// batch fed once is cut along dim 0 into one contiguous part per device
// replica (parallelize places output i on device i's scope).
//
// By default dim 0 must divide by N: an uneven split would silently change
// the weight of each sample in the averaged loss. With uneven=1 the first
// (dim0 mod N) parts get one row more; every part must get at least one row.
// Works for every dtype (rows are copied as bytes) and a batch on any device
// (the parts stay there).
//
// BatchShares(X) -> S_0, ..., S_{N-1}: the float32 scalar share rows_i / rows
// of each part of the same split: the weight of replica i's mean loss in
// the global mean loss (exact loss scaling for uneven splits).
#include <cstring>
#include <limits>

#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

// Rows of part i of a batch of `rows` split `n` ways.
int64_t PartRows(int64_t rows, int64_t n, int64_t i) { return rows / n + (i < rows % n ? 1 : 0); }

void CheckSplit(const std::string& x, const Dims& dims, int64_t n, bool uneven) {
  DP_ENFORCE_CODE(!dims.empty(), Code::kShape, x, " is a scalar; SplitBatch needs a batch dimension");
  const int64_t rows = dims[0];
  DP_ENFORCE_CODE(rows >= n, Code::kShape, x, " ", DimsString(dims), ": a batch of ", rows,
                  " cannot give each of ", n, " devices a sample");
  DP_ENFORCE_CODE(uneven || rows % n == 0, Code::kShape, x, " ", DimsString(dims), ": a batch of ", rows,
                  " does not split evenly over ", n, " devices (use a multiple of ", n,
                  " or enable uneven splitting)");
}

class SplitBatchOp final : public Operator {
 public:
  explicit SplitBatchOp(const OpInit& init) : Operator(init), uneven_(args().Int("uneven", 0) != 0) {}

  void RunOnDevice() final {
    const Tensor& x = Input(0);
    const int64_t n = OutputSize();
    CheckSplit(InputDesc(0), x.dims(), n, uneven_);
    const int64_t rows = x.dims()[0];
    const size_t row_bytes = rows == 0 ? 0 : x.nbytes() / static_cast<size_t>(rows);
    const char* src = static_cast<const char*>(x.raw_data());
    // Parts of memory that lives as long as its storage are views (no copy:
    // the batch a loader or a caller wrote is read by the replicas in place;
    // a view is never written, see Storage::Slice); borrowed memory is
    // copied, since its owner may free it once the fed tensor is replaced.
    // A batch on a GPU (a loader's there) is split there: its parts are on
    // that device, and each replica's Copy moves its part on (or within) it.
    const bool view = x.storage() != nullptr && x.storage()->keeps_memory_alive();
    const DeviceOption where = x.device();
    size_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      Dims d = x.dims();
      d[0] = PartRows(rows, n, i);
      const size_t bytes = static_cast<size_t>(d[0]) * row_bytes;
      if (view) {
        Output(static_cast<int>(i))
            ->ShareData(Tensor::FromStorage(std::move(d), x.dtype(), Storage::Slice(x.storage(), offset, bytes)));
      } else if (where.type == DeviceType::kCPU) {
        Tensor* y = Output(static_cast<int>(i), d, x.dtype());
        if (bytes > 0) std::memcpy(y->raw_mutable_data(), src + offset, bytes);
      } else {
        Tensor part(std::move(d), x.dtype(), where);
        CopyBytes(bytes, src + offset, where, part.raw_mutable_data(), where);  // done before returning
        Output(static_cast<int>(i))->ShareData(part);
      }
      offset += bytes;
    }
  }

 private:
  const bool uneven_;
};

class BatchSharesOp final : public Operator {
 public:
  explicit BatchSharesOp(const OpInit& init) : Operator(init), uneven_(args().Int("uneven", 0) != 0) {}

  void RunOnDevice() final {
    const Tensor& x = Input(0);
    const int64_t n = OutputSize();
    CheckSplit(InputDesc(0), x.dims(), n, uneven_);
    const int64_t rows = x.dims()[0];
    for (int64_t i = 0; i < n; ++i)
      *Output(static_cast<int>(i), {}, DType::kFloat32)->mutable_data<float>() =
          static_cast<float>(static_cast<double>(PartRows(rows, n, i)) / static_cast<double>(rows));
  }

 private:
  const bool uneven_;
};

std::vector<TensorInfo> InferSplitBatch(const OperatorDef& op, const ArgReader& args,
                                        const std::vector<TensorInfo>& in) {
  const int64_t n = static_cast<int64_t>(op.outputs.size());
  CheckSplit(StrCat("input 0 '", op.inputs[0], "'"), in[0].dims, n, args.Int("uneven", 0) != 0);
  std::vector<TensorInfo> out;
  for (int64_t i = 0; i < n; ++i) {
    Dims d = in[0].dims;
    d[0] = PartRows(in[0].dims[0], n, i);
    out.push_back({d, in[0].dtype});
  }
  return out;
}

std::vector<TensorInfo> InferBatchShares(const OperatorDef& op, const ArgReader& args,
                                         const std::vector<TensorInfo>& in) {
  const int64_t n = static_cast<int64_t>(op.outputs.size());
  CheckSplit(StrCat("input 0 '", op.inputs[0], "'"), in[0].dims, n, args.Int("uneven", 0) != 0);
  return std::vector<TensorInfo>(static_cast<size_t>(n), TensorInfo{{}, DType::kFloat32});
}

}  // namespace

DP_OPERATOR_SCHEMA(SplitBatch)
    .NumInputs(1)
    .NumOutputs(1, std::numeric_limits<int>::max())
    .Inputs({"X"})
    .Arg("uneven", ArgKind::kInt, 0,
         "1: allow a batch that does not divide by the number of outputs (the first parts get a row more)")
    .ShapeInference(InferSplitBatch)
    .InputsCanCrossDevices()
    .HostOp("scatters the host batch (or cuts a batch on a GPU there); each part is then copied to its replica's device")
    .Doc("Cuts X along dim 0 into one contiguous part per output (the data-parallel scatter).");

DP_OPERATOR_SCHEMA(BatchShares)
    .NumInputs(1)
    .NumOutputs(1, std::numeric_limits<int>::max())
    .Inputs({"X"})
    .Arg("uneven", ArgKind::kInt, 0, "as SplitBatch's")
    .ShapeInference(InferBatchShares)
    .InputsCanCrossDevices()
    .HostOp("host scalars from the split of the batch (which only its shape decides)")
    .Doc("The share rows_i / rows of each part of SplitBatch's cut of X, as float32 scalars.");

DP_REGISTER_CPU_OPERATOR(SplitBatch, SplitBatchOp);
DP_REGISTER_CPU_OPERATOR(BatchShares, BatchSharesOp);
DP_NO_GRADIENT(SplitBatch);
DP_NO_GRADIENT(BatchShares);

}  // namespace dp
