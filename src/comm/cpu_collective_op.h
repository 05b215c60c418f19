// What the CPU collective ops share (cpu_collective_ops.cc: Allreduce,
// Broadcast, Barrier; cpu_shard_ops.cc: the sharded optimizer state's
// collectives): the communicator's parts an op holds while it runs, the
// staged collectives by key, and shape inference of in-place collectives.
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "comm/collective_op.h"
#include "comm/cpu_collectives.h"
#include "ops/op_schema.h"
#include "ops/operator.h"

namespace dp {

// The parts of the communicator a blob (`desc` in messages) holds that an
// op uses, held while it runs (the blob may be replaced meanwhile); by value:
// no allocation per run.
inline CpuCommunicator CommOf(const Blob& b, const std::string& desc) {
  const CpuCommunicator& held = CommunicatorIn<CpuCommunicator>(b, desc, "CPU", "CreateCpuCollectives");
  CpuCommunicator comm;
  comm.collectives = held.collectives;
  comm.peers = held.peers;
  comm.staging = held.staging;
  return comm;
}

// The CPU collectives' base (collective_op.h): the communicator and the
// staged collectives of the op's `key`.
class CpuCollectiveOp : public CollectiveOpBase {
 public:
  using CollectiveOpBase::CollectiveOpBase;

 protected:
  CpuCommunicator Comm() const { return CommOf(*input_blobs()[0], InputDesc(0)); }

  // The staged collective of message i of this op (per dtype group): the
  // op's `key` argument names it (the same collective in several nets, or
  // in a net made again: Parallelize keys every collective), else the op
  // itself does (then a net made again prepares its collectives again).
  StagedCollective& Stage(const CpuCommunicator& comm, size_t i, int64_t count, DType dtype, int root = -1) {
    return comm.staging->Get(StrCat(key_, "#", i), comm.peers, count, dtype, root);
  }
  StagedCollective& Stage(const CpuCommunicator& comm, StagedKind kind, int64_t count, DType dtype) {
    return comm.staging->Get(StrCat(key_, "#0"), comm.peers, kind, count, dtype);
  }

  const std::string key_ = args().String("key", StrCat("op@", static_cast<const void*>(this)));
};

// The schema every in-place collective opens with (Allreduce, Broadcast,
// ReduceScatter, Allgather): the communicator, then k tensors device-major
// written in place, and num_devices.
inline OpSchema& InPlaceCollectiveSchema(OpSchema& s) {
  return s.NumInputs(2, std::numeric_limits<int>::max())
      .NumOutputs(1, std::numeric_limits<int>::max() - 1)
      .EnforceInplaceAll(1)
      .InputsOnReplicaDevices()
      .Inputs({"comm"})
      .Arg("num_devices", ArgKind::kInt, ArgDefault::Described("k, the number of tensors (one device)"),
           "replicas N; the k tensors are N groups of k / N, device-major");
}

// Shape inference's opening: the count, then devices and tensors per device.
inline std::pair<int, int> InferenceSplit(const OperatorDef& op, const ArgReader& args,
                                          const std::vector<TensorInfo>& in) {
  const int k = static_cast<int>(op.outputs.size());
  DP_ENFORCE_CODE(static_cast<int>(in.size()) == k + 1, Code::kInvalidNet, "takes the communicator and k tensors, ",
                  "got ", in.size(), " inputs and ", k, " outputs");
  return CollectiveDeviceSplit(args, k);
}

// Every device's tensor j has tensor j's dtype and shape; outputs are the inputs.
inline std::vector<TensorInfo> AllreduceInference(const OperatorDef& op, const ArgReader& args,
                                                  const std::vector<TensorInfo>& in) {
  const auto [n, m] = InferenceSplit(op, args, in);
  for (int j = 0; j < m; ++j) {
    const TensorInfo& first = in[static_cast<size_t>(1 + j)];
    for (int d = 1; d < n; ++d) {
      const TensorInfo& t = in[static_cast<size_t>(1 + d * m + j)];
      DP_ENFORCE_CODE(t.dtype == first.dtype, Code::kDType, "input ", 1 + d * m + j, " '", op.inputs[1 + d * m + j],
                      "' is ", DTypeName(t.dtype), " but input ", 1 + j, " '", op.inputs[1 + j], "' is ",
                      DTypeName(first.dtype));
      DP_ENFORCE_CODE(t.dims == first.dims, Code::kShape, "input ", 1 + d * m + j, " '", op.inputs[1 + d * m + j],
                      "' has shape ", DimsString(t.dims), " but input ", 1 + j, " '", op.inputs[1 + j], "' has ",
                      DimsString(first.dims));
    }
  }
  return std::vector<TensorInfo>(in.begin() + 1, in.end());
}

}  // namespace dp
