// What the CPU and CUDA kernels of Allreduce and Broadcast share
// (comm/cpu_collective_ops.cc, comm/cuda_collective_ops.cc): the
// communicator's lookup in its blob and the opening of the op, so that both
// give the same messages. The argument checks are in collective_checks.h.
#pragma once

#include <string>
#include <tuple>

#include "comm/collective_checks.h"
#include "core/error.h"
#include "ops/operator.h"

namespace dp {

// The communicator that a blob (`desc` in messages) holds: Holder is the
// blob's type, with a shared_ptr `collectives`; `kind` ("CPU", "CUDA") and
// `creator` (the op that makes one) name it in the errors. kNotFound when
// the blob is empty, kDType when it holds something else. The caller copies
// the shared_ptrs it uses at once (the blob may be replaced while it runs).
template <typename Holder>
const Holder& CommunicatorIn(const Blob& b, const std::string& desc, const char* kind, const char* creator) {
  if (b.empty()) DP_THROW(Code::kNotFound, desc, " is empty: create the communicator with ", creator, " first");
  if (!b.IsType<Holder>())
    DP_THROW(Code::kDType, desc, " holds ", b.TypeName(), ", not a ", kind, " communicator (", creator,
             " makes one)");
  const Holder& held = b.Get<Holder>();
  DP_ENFORCE_CODE(held.collectives != nullptr, Code::kInternal, desc, " holds a null communicator");
  return held;
}

// Allreduce and Broadcast on either device: input 0 is the communicator,
// inputs 1..k are written in place as outputs 0..k-1, device-major.
class CollectiveOpBase : public Operator {
 public:
  explicit CollectiveOpBase(const OpInit& init) : Operator(init) {
    const int k = OutputSize();
    // Validation enforces the in-place pairs (EnforceInplaceAll); the count is checked here.
    DP_ENFORCE_CODE(InputSize() == k + 1, Code::kInvalidNet, label(), ": takes the communicator and k tensors and ",
                    "writes the same k tensors in place, got ", InputSize(), " inputs and ", k, " outputs");
    for (int i = 0; i < k; ++i)
      DP_ENFORCE_CODE(input_blobs()[static_cast<size_t>(i) + 1] == output_blobs()[static_cast<size_t>(i)],
                      Code::kInvalidNet, label(), ": ", OutputDesc(i), " must be written in place of ",
                      InputDesc(i + 1));
    std::tie(num_devices_, per_device_) = CollectiveDeviceSplit(args(), k);
  }

 protected:
  // Input index of device d's tensor j.
  int In(int d, int j) const { return 1 + d * per_device_ + j; }

  // Allreduce's opening on either device: every replica's tensors checked
  // (tensor_of(d, j) gives device d's tensor j) before anything is written;
  // returns the `scale` argument.
  template <typename TensorOf>
  double CheckedAllreduceScale(const TensorOf& tensor_of) const {
    const double scale = args().Float("scale", 1.0);
    CheckAllreduceReplicas(num_devices_, per_device_, scale, tensor_of,
                           [&](int d, int j) { return InputDesc(In(d, j)); });
    return scale;
  }

  int num_devices_ = 1;
  int per_device_ = 1;
};

}  // namespace dp
