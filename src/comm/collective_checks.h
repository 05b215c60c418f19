// Argument and replica checks shared by the CPU and CUDA kernels of the
// collectives (Allreduce, Broadcast), so that both give the same messages.
// The k tensors of a call are device-major: num_devices groups of k / N.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/tensor.h"
#include "graph/net_def.h"

namespace dp {

// Devices and tensors per device of a call with k tensors; kInvalidArgument
// when num_devices does not split them.
inline std::pair<int, int> CollectiveDeviceSplit(const ArgReader& args, int k) {
  const int64_t n = args.Int("num_devices", k);
  DP_ENFORCE(n >= 1 && n <= k && k % n == 0, "num_devices ", n, " must be positive and divide the ", k,
             " tensors (device-major: each device's tensors in the same order)");
  return {static_cast<int>(n), static_cast<int>(k / n)};
}

// Allreduce's `compress` argument and the dtype it names: "bf16" kBFloat16,
// "fp16" kFloat16, "" kUndefined (none); kInvalidArgument for anything else.
inline DType AllreduceCompression(const std::string& compress) {
  if (compress.empty()) return DType::kUndefined;
  if (compress == "bf16") return DType::kBFloat16;
  if (compress == "fp16") return DType::kFloat16;
  DP_THROW(Code::kInvalidArgument, "compress '", compress, "' must be \"bf16\", \"fp16\" or \"\" (none)");
}
inline std::string AllreduceCompressionArg(DType dtype) {
  return dtype == DType::kBFloat16 ? "bf16" : dtype == DType::kFloat16 ? "fp16" : "";
}

// Broadcast's root device, in [0, n).
inline int CollectiveRoot(const ArgReader& args, int n) {
  const int64_t root = args.Int("root", 0);
  DP_ENFORCE(root >= 0 && root < n, "root ", root, " is out of range for ", n, " devices");
  return static_cast<int>(root);
}

// Allreduce's inputs: per tensor j, a summable dtype (scale needs floats) and
// the same dtype and shape on every device. `tensor(d, j)` and `desc(d, j)`
// give device d's tensor j and its description ("input 3 'cpu_1/w_grad'").
inline void CheckAllreduceReplicas(int n, int m, double scale, const std::function<const Tensor&(int, int)>& tensor,
                                   const std::function<std::string(int, int)>& desc) {
  for (int j = 0; j < m; ++j) {
    const Tensor& first = tensor(0, j);
    const DType dt = first.dtype();
    DP_ENFORCE_CODE(dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kInt32 || dt == DType::kInt64,
                    Code::kDType, desc(0, j), " is ", first.DebugString(),
                    "; Allreduce sums float32, float64, int32 or int64");
    DP_ENFORCE(scale == 1.0 || dt == DType::kFloat32 || dt == DType::kFloat64, "scale ", scale, " needs float ",
               "tensors, but ", desc(0, j), " is ", first.DebugString());
    for (int d = 1; d < n; ++d) {
      const Tensor& t = tensor(d, j);
      DP_ENFORCE_CODE(t.dtype() == dt, Code::kDType, desc(d, j), " is ", t.DebugString(), " but ", desc(0, j), " is ",
                      first.DebugString());
      DP_ENFORCE_CODE(t.dims() == first.dims(), Code::kShape, desc(d, j), " has shape ", DimsString(t.dims()),
                      " but ", desc(0, j), " has ", DimsString(first.dims()));
    }
  }
}

}  // namespace dp
