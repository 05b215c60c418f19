// Collectives between the CPU replicas of a data-parallel net, through a
// CpuCollectives communicator held in a blob:
//   CreateCpuCollectives() -> comm
//   Allreduce(comm, X_0, ..., X_{k-1}) -> (X_0, ..., X_{k-1})   in place
//   Broadcast(comm, X_0, ..., X_{k-1}) -> (X_0, ..., X_{k-1})   in place
//   Barrier(comm)
// The k tensors are device-major: with num_devices = N and m = k / N, inputs
// 1..m are device 0's tensors t_0..t_{m-1}, the next m device 1's, and so on.
// CPU device ids are logical replicas sharing host memory, so the tensors may
// belong to any CPU device; the op runs wherever it is placed.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/gradient_registry.h"
#include "comm/collective_checks.h"
#include "comm/collective_op.h"
#include "ops/op_utils.h"
#include "ops/operator.h"
#include "comm/cpu_collectives.h"

namespace dp {
namespace {

constexpr int kMaxThreads = 1024;

class CreateCpuCollectivesOp final : public Operator {
 public:
  explicit CreateCpuCollectivesOp(const OpInit& init) : Operator(init) {
    const int64_t threads = args().Int("threads", 0);
    DP_ENFORCE(threads >= 0 && threads <= kMaxThreads, "threads ", threads, " must be in [0, ", kMaxThreads,
               "] (0: as many as devices, at most the hardware concurrency)");
    const int64_t devices = args().Int("num_devices", 0);
    DP_ENFORCE(devices >= 0 && devices <= std::numeric_limits<int>::max(), "num_devices ", devices,
               " must be >= 0 (0: unknown)");
    threads_ = CpuCollectives::DefaultThreads(static_cast<int>(threads), static_cast<int>(devices));
  }

 private:
  void RunOnDevice() override {
    Blob* out = output_blobs()[0];
    // Keep a communicator of the right size: its threads stay warm, and ops
    // holding it need not notice a re-run of the init net.
    if (out->IsType<CpuCommunicator>()) {
      const auto& comm = out->Get<CpuCommunicator>().collectives;
      if (comm && comm->num_threads() == threads_) return;
    }
    out->Reset(std::make_shared<CpuCommunicator>(CpuCommunicator{std::make_shared<CpuCollectives>(threads_)}));
  }

  int threads_ = 1;
};

// The communicator a blob (`desc` in messages) holds.
std::shared_ptr<CpuCollectives> CommOf(const Blob& b, const std::string& desc) {
  return CommunicatorIn<CpuCommunicator>(b, desc, "CPU", "CreateCpuCollectives");
}

// Shared by Allreduce and Broadcast (collective_op.h).
class CollectiveOp : public CollectiveOpBase {
 public:
  using CollectiveOpBase::CollectiveOpBase;

 protected:
  std::shared_ptr<CpuCollectives> Comm() const { return CommOf(*input_blobs()[0], InputDesc(0)); }
};

class AllreduceOp final : public CollectiveOp {
 public:
  using CollectiveOp::CollectiveOp;

 private:
  void RunOnDevice() override {
    auto comm = Comm();  // held: the blob may be replaced while this runs
    const double scale = CheckedAllreduceScale([&](int d, int j) -> const Tensor& { return Input(In(d, j)); });
    const int n = num_devices_, m = per_device_;
    // One AllreduceSum per dtype (normally one), tensors in order. Writable
    // pointers are taken first: copy-on-write keeps the values, so reading
    // them back afterwards is safe.
    std::vector<std::pair<DType, std::vector<CpuCollectives::Segment>>> groups;
    for (int j = 0; j < m; ++j) {
      const Tensor& first = Input(In(0, j));
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == first.dtype(); });
      if (it == groups.end()) it = groups.insert(groups.end(), {first.dtype(), {}});
      CpuCollectives::Segment seg;
      seg.count = first.numel();
      seg.buffers.reserve(static_cast<size_t>(n));
      for (int d = 0; d < n; ++d) seg.buffers.push_back(Output(In(d, j) - 1)->raw_mutable_data());
      it->second.push_back(std::move(seg));
    }
    for (const auto& [dtype, segments] : groups) comm->AllreduceSum(segments, dtype, scale);
  }
};

class BroadcastOp final : public CollectiveOp {
 public:
  explicit BroadcastOp(const OpInit& init) : CollectiveOp(init), root_(CollectiveRoot(args(), num_devices_)) {}

 private:
  void RunOnDevice() override {
    auto comm = Comm();
    const int n = num_devices_, m = per_device_;
    std::vector<void*> buffers(static_cast<size_t>(n));
    for (int j = 0; j < m; ++j) {
      const Tensor& src = Input(In(root_, j));
      for (int d = 0; d < n; ++d) {
        if (d == root_) {
          buffers[static_cast<size_t>(d)] = const_cast<void*>(src.raw_data());  // only read
          continue;
        }
        // Replicas may be uninitialised (empty blob or tensor) or shaped
        // differently: they become the root's shape, on their own device.
        const int o = In(d, j) - 1;
        const Blob* b = output_blobs()[static_cast<size_t>(o)];
        DP_ENFORCE_CODE(b->empty() || b->IsType<Tensor>(), Code::kDType, OutputDesc(o), " holds ", b->TypeName(),
                        ", not a tensor");
        Tensor* t = Output(o);
        if (!t->defined()) {
          t = Output(o, src.dims(), src.dtype());
        } else {
          Input(In(d, j));  // rejects a tensor this CPU op cannot address
          if (t->dims() != src.dims() || t->dtype() != src.dtype()) t->Resize(src.dims(), src.dtype());
        }
        buffers[static_cast<size_t>(d)] = t->raw_mutable_data();
      }
      comm->Broadcast(buffers, root_, src.nbytes());
    }
  }

  const int root_;
};

// Barrier(comm): returns once no collective issued before it on the
// communicator is still running.
class BarrierOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override { CommOf(*input_blobs()[0], InputDesc(0))->Barrier(); }
};

// Shape inference's opening: the count, then devices and tensors per device.
std::pair<int, int> InferenceSplit(const OperatorDef& op, const ArgReader& args, const std::vector<TensorInfo>& in) {
  const int k = static_cast<int>(op.outputs.size());
  DP_ENFORCE_CODE(static_cast<int>(in.size()) == k + 1, Code::kInvalidNet, "takes the communicator and k tensors, ",
                  "got ", in.size(), " inputs and ", k, " outputs");
  return CollectiveDeviceSplit(args, k);
}

std::vector<TensorInfo> AllreduceInference(const OperatorDef& op, const ArgReader& args,
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

std::vector<TensorInfo> BroadcastInference(const OperatorDef& op, const ArgReader& args,
                                           const std::vector<TensorInfo>& in) {
  const auto [n, m] = InferenceSplit(op, args, in);
  const int root = CollectiveRoot(args, n);
  std::vector<TensorInfo> out(static_cast<size_t>(n * m));
  for (int d = 0; d < n; ++d)
    for (int j = 0; j < m; ++j) out[static_cast<size_t>(d * m + j)] = in[static_cast<size_t>(1 + root * m + j)];
  return out;
}

DP_OPERATOR_SCHEMA(CreateCpuCollectives)
    .NumInputs(0)
    .NumOutputs(1)
    .Outputs({"comm"})
    .Arg("threads", ArgKind::kInt,
         "threads of the communicator's team; 0 or absent: min(num_devices, hardware concurrency), or the hardware "
         "concurrency without num_devices")
    .Arg("num_devices", ArgKind::kInt, "replicas the communicator serves (sizes the team when threads is 0)")
    .Doc("Creates a communicator for Allreduce and Broadcast between CPU replicas (kept when it exists with the "
         "same thread count).");

DP_OPERATOR_SCHEMA(Allreduce)
    .NumInputs(2, std::numeric_limits<int>::max())
    .NumOutputs(1, std::numeric_limits<int>::max() - 1)
    .EnforceInplaceAll(1)
    .Inputs({"comm"})
    .Arg("num_devices", ArgKind::kInt, "replicas N; the k tensors are N groups of k / N, device-major (default k)")
    .Arg("scale", ArgKind::kFloat, "multiplies the sum, e.g. 1 / N to average (default 1; float tensors only)")
    .ShapeInference(AllreduceInference)
    .Doc("Sums tensor j over the devices, in device order, into every device's tensor j, in place.");

DP_OPERATOR_SCHEMA(Broadcast)
    .NumInputs(2, std::numeric_limits<int>::max())
    .NumOutputs(1, std::numeric_limits<int>::max() - 1)
    .EnforceInplaceAll(1)
    .Inputs({"comm"})
    .Arg("num_devices", ArgKind::kInt, "replicas N; the k tensors are N groups of k / N, device-major (default k)")
    .Arg("root", ArgKind::kInt, "the device whose tensors are copied to the others (default 0)")
    .ShapeInference(BroadcastInference)
    .Doc("Copies the root device's tensors into the other devices' tensors, in place, resizing replicas that differ "
         "(so it can initialise them).");

DP_OPERATOR_SCHEMA(Barrier)
    .NumInputs(1)
    .NumOutputs(0)
    .Inputs({"comm"})
    .Doc("Waits until every collective issued before it on the communicator has finished (with multi-process "
         "communicators: until every process has reached it).");

DP_REGISTER_CPU_OPERATOR(CreateCpuCollectives, CreateCpuCollectivesOp);
DP_REGISTER_CPU_OPERATOR(Barrier, BarrierOp);
DP_REGISTER_CPU_OPERATOR(Allreduce, AllreduceOp);
DP_REGISTER_CPU_OPERATOR(Broadcast, BroadcastOp);
DP_NO_GRADIENT(CreateCpuCollectives);
DP_NO_GRADIENT(Allreduce);
DP_NO_GRADIENT(Broadcast);
DP_NO_GRADIENT(Barrier);

}  // namespace
}  // namespace dp
