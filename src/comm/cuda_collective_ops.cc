// Collectives between the CUDA replicas of a data-parallel net, through a
// CudaCollectives communicator held in a blob:
//   CreateCudaCollectives(device_ids=[...], nccl=1[, world_size, rank, store, ...]) -> comm
//   Allreduce(comm, X_0, ..., X_{k-1}) -> (X_0, ..., X_{k-1})   in place (CUDA kernel);
//     with compress "bf16" / "fp16" its first compress_tensors float32
//     tensors (ReduceScatter: the sharded ones) in 16 bits
//     (CudaCollectives::AllreduceCompressed)
//   Broadcast(comm, X_0, ..., X_{k-1}) -> (X_0, ..., X_{k-1})   in place (CUDA kernel)
//   ReduceScatter, Allgather (comm/cpu_shard_ops.cc): a sharded optimizer
//     state's (ZeRO-1), in one process and across processes: ReduceScatter
//     is the allreduce here, Allgather a broadcast of each replica's part
//     from it (CudaCollectives::Allgather); GatherShards and ScatterShards
//     (host ops) save and load the state through this communicator too
//     (RegisterShardCommunicator: the processes' parts through
//     CudaCollectives::AllgatherHost).
// Same graph as the CPU collectives (comm/cpu_collective_ops.cc, which owns the
// Allreduce and Broadcast schemas): the k tensors are device-major, device d's
// being on cuda:device_ids[d]. The op runs on one of those devices (normally
// the first) and issues the whole collective from its stream; see
// comm/cuda_collectives.h for the ordering. With world_size > 1 the
// communicator spans this device list in every process of the job (NCCL
// across processes, meeting through the store).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/gradient_registry.h"
#include "comm/cuda_collectives.h"
#include "comm/process_args.h"
#include "cuda/cuda_context.h"
#include "comm/collective_op.h"
#include "comm/shards.h"
#include "ops/operator.h"

namespace dp {
namespace {

class CreateCudaCollectivesOp final : public Operator {
 public:
  explicit CreateCudaCollectivesOp(const OpInit& init) : Operator(init) {
    for (int64_t id : args().Ints("device_ids")) {
      DP_ENFORCE(id >= 0 && id <= std::numeric_limits<int>::max(), "device id ", id, " is not a CUDA ordinal");
      devices_.push_back(static_cast<int>(id));
    }
    const int64_t nccl = args().Int("nccl", 1);
    DP_ENFORCE(nccl == 0 || nccl == 1, "nccl ", nccl, " must be 1 (NCCL) or 0 (copy-and-sum tree)");
    nccl_ = nccl == 1;
    // At net creation, like ops placed on a missing device.
    CudaCollectives::CheckDevices(devices_, nccl_);
    DP_ENFORCE(nccl_ || process_.world_size == 1, "nccl 0 (the copy-and-sum tree) works inside one process; with ",
               "world_size ", process_.world_size, " use NCCL (nccl 1)");
  }

 private:
  void RunOnDevice() override {
    Blob* out = output_blobs()[0];
    // Keep a communicator of the same devices and mode: NCCL init is slow, and
    // ops holding it need not notice a re-run of the init net.
    if (out->IsType<CudaCommunicator>()) {
      const auto& held = out->Get<CudaCommunicator>();
      if (held.collectives && held.collectives->devices() == devices_ && held.collectives->nccl() == nccl_ &&
          held.processes_config == process_.Config() && !held.collectives->broken())
        return;  // (an aborted one is made again: the init net's re-run is the way back)
    }
    CudaProcesses processes;
    processes.rank = process_.rank;
    processes.size = process_.world_size;
    processes.timeout = process_.timeout;
    if (process_.world_size > 1) processes.store = process_.OpenScope(def().outputs[0]);
    auto collectives = std::make_shared<CudaCollectives>(devices_, nccl_, std::move(processes));
    out->Reset(std::make_shared<CudaCommunicator>(CudaCommunicator{std::move(collectives), process_.Config()}));
  }

  std::vector<int> devices_;
  bool nccl_ = true;
  const ProcessArgs process_ = ProcessArgs::Parse(args());
};

// Shared by Allreduce and Broadcast (collective_op.h).
class CudaCollectiveOp : public CollectiveOpBase {
 public:
  using CollectiveOpBase::CollectiveOpBase;

 protected:
  CudaContext& cuda_context() const { return static_cast<CudaContext&>(context()); }

  std::shared_ptr<CudaCollectives> Comm() const {
    auto comm =
        CommunicatorIn<CudaCommunicator>(*input_blobs()[0], InputDesc(0), "CUDA", "CreateCudaCollectives").collectives;
    DP_ENFORCE(comm->size() == num_devices_, InputDesc(0), " serves ", comm->size(), " devices but num_devices is ",
               num_devices_);
    return comm;
  }

  // Device d's tensor j, which must live on the communicator's device d.
  // Input() would refuse it: a CUDA op may not address another GPU's tensor
  // (the schema does not let inputs cross devices), and a collective is the
  // one op that must, through peer copies or NCCL.
  const Tensor& Replica(const CudaCollectives& comm, int d, int j) const {
    const int i = In(d, j);
    const Blob* b = input_blobs()[static_cast<size_t>(i)];
    if (b->empty() || (b->IsType<Tensor>() && !b->Get<Tensor>().defined()))
      DP_THROW(Code::kNotFound, InputDesc(i), " is empty: it was never fed nor produced by an earlier op");
    if (!b->IsType<Tensor>()) DP_THROW(Code::kDType, InputDesc(i), " holds ", b->TypeName(), ", not a tensor");
    const Tensor& t = b->Get<Tensor>();
    const DeviceOption want{DeviceType::kCUDA, comm.devices()[static_cast<size_t>(d)]};
    DP_ENFORCE(t.device() == want, InputDesc(i), " is on ", DeviceName(t.device()), " but it belongs to device ", d,
               " of the communicator, ", DeviceName(want), "; add a Copy op to move it");
    return t;
  }
};

class CudaAllreduceOp final : public CudaCollectiveOp {
 public:
  explicit CudaAllreduceOp(const OpInit& init) : CudaCollectiveOp(init) {
    DP_ENFORCE(!average_active_ || per_device_ >= 2, "average_active needs each device's tensors followed by its ",
               "active flag (at least 2 tensors per device), got ", per_device_);
    // The compressed tensors: the first compress_tensors (Allreduce), or the
    // sharded ones (ReduceScatter's shard_tensors), never the flag.
    const int tensors = average_active_ ? per_device_ - 1 : per_device_;
    const int64_t asked = def().type == "ReduceScatter" ? args().Int("shard_tensors", per_device_)
                                                         : args().Int("compress_tensors", per_device_);
    DP_ENFORCE(asked >= 0, "the compressed tensors' count ", asked, " must not be negative");
    compressed_ = compress_ == DType::kUndefined ? 0 : static_cast<int>(std::min<int64_t>(asked, tensors));
  }

 private:
  void RunOnDevice() override {
    auto comm = Comm();  // held: the blob may be replaced while this runs
    const double scale =
        CheckedAllreduceScale([&](int d, int j) -> const Tensor& { return Replica(*comm, d, j); });
    const int n = num_devices_, m = per_device_;
    std::vector<CudaCollectives::Segment> segments(static_cast<size_t>(m));
    for (int j = 0; j < m; ++j) {
      segments[static_cast<size_t>(j)].count = Replica(*comm, 0, j).numel();
      segments[static_cast<size_t>(j)].dtype = Replica(*comm, 0, j).dtype();
    }
    // Writable pointers last: copy-on-write keeps the values and the device.
    for (int j = 0; j < m; ++j)
      for (int d = 0; d < n; ++d)
        segments[static_cast<size_t>(j)].buffers.push_back(Output(In(d, j) - 1)->raw_mutable_data());
    if (compressed_ > 0) {
      for (int j = 0; j < compressed_; ++j)
        DP_ENFORCE_CODE(segments[static_cast<size_t>(j)].dtype == DType::kFloat32, Code::kDType,
                        InputDesc(In(0, j)), " is ", Replica(*comm, 0, j).DebugString(), ": compressed tensors ",
                        "(compress ", DTypeName(compress_), ") must be float32");
      std::vector<CudaCollectives::Segment> compressed(segments.begin(), segments.begin() + compressed_);
      std::vector<CudaCollectives::Segment> rest(segments.begin() + compressed_, segments.end());
      CudaCollectives::Segment flags;
      if (average_active_) {
        flags = std::move(rest.back());
        rest.pop_back();
        CheckActiveFlag(*comm, flags, m);
      }
      comm->AllreduceCompressed(compressed, compress_, rest, average_active_ ? &flags : nullptr, scale,
                                cuda_context());
      return;
    }
    if (!average_active_) {
      comm->AllreduceSum(segments, scale, cuda_context());
      return;
    }
    // Each device's last tensor is its active flag (Join): the mean over the
    // replicas that had data, as the CPU op computes it.
    CudaCollectives::Segment flags = std::move(segments.back());
    segments.pop_back();
    CheckActiveFlag(*comm, flags, m);
    comm->AllreduceActive(segments, flags, scale, cuda_context());
  }

  void CheckActiveFlag(const CudaCollectives& comm, const CudaCollectives::Segment& flags, int m) const {
    DP_ENFORCE_CODE(flags.dtype == DType::kFloat32 && flags.count == 1, Code::kShape, InputDesc(In(0, m - 1)),
                    " is ", Replica(comm, 0, m - 1).DebugString(), ": the active flag of average_active must be ",
                    "float32 [1]");
  }

  const bool average_active_ = args().Int("average_active", 0) != 0;
  // compress "bf16" / "fp16": kBFloat16 / kFloat16; "": kUndefined (none).
  const DType compress_ = AllreduceCompression(args().String("compress", ""));
  int compressed_ = 0;  // each device's first tensors that cross compressed
};

class CudaBroadcastOp final : public CudaCollectiveOp {
 public:
  explicit CudaBroadcastOp(const OpInit& init)
      : CudaCollectiveOp(init), root_(CollectiveRoot(args(), num_devices_)) {}

 private:
  void RunOnDevice() override {
    auto comm = Comm();
    const int n = num_devices_, m = per_device_;
    // Across processes NCCL's root is process 0's device root_: the others'
    // device root_ receives too, and is written like any other.
    const bool root_receives = comm->process_rank() != 0;
    std::vector<CudaCollectives::Segment> segments(static_cast<size_t>(m));
    for (int j = 0; j < m; ++j) {
      const Tensor& src = Replica(*comm, root_, j);
      const Dims dims = src.dims();
      CudaCollectives::Segment& seg = segments[static_cast<size_t>(j)];
      seg.count = src.numel();
      seg.dtype = src.dtype();
      seg.buffers.resize(static_cast<size_t>(n));
      for (int d = 0; d < n; ++d) {
        if (d == root_ && !root_receives) {
          seg.buffers[static_cast<size_t>(d)] = const_cast<void*>(src.raw_data());  // only read
          continue;
        }
        // Replicas may be uninitialised (empty blob or tensor) or shaped
        // differently: they become the root's shape on their own GPU. Resize
        // keeps storage only when nobody else sees it, so nothing is copied
        // for copy-on-write just to be overwritten.
        const int o = In(d, j) - 1;
        const Blob* b = output_blobs()[static_cast<size_t>(o)];
        DP_ENFORCE_CODE(b->empty() || b->IsType<Tensor>(), Code::kDType, OutputDesc(o), " holds ", b->TypeName(),
                        ", not a tensor");
        Tensor* t = Output(o);
        if (t->defined()) Replica(*comm, d, j);  // rejects a tensor on another device
        t->Resize(dims, seg.dtype, {DeviceType::kCUDA, comm->devices()[static_cast<size_t>(d)]});
        seg.buffers[static_cast<size_t>(d)] = t->raw_mutable_data();
      }
    }
    comm->Broadcast(segments, root_, cuda_context());
  }

  const int root_;
};

// Allgather: each replica's part (comm/shards.h) from it to every other
// replica, of every process: part p * devices + d is device d of process p,
// which is that device's NCCL rank too (in one process, its index). One
// call for all the op's tensors and parts.
class CudaAllgatherOp final : public CudaCollectiveOp {
 public:
  using CudaCollectiveOp::CudaCollectiveOp;

 private:
  void RunOnDevice() override {
    auto comm = Comm();
    const int n = num_devices_, m = per_device_;
    ShardLayout layout;
    layout.devices = n;
    layout.processes = comm->num_processes();
    layout.rank = comm->process_rank();
    for (int j = 0; j < m; ++j) {
      const Tensor& first = Replica(*comm, 0, j);
      for (int d = 1; d < n; ++d) {
        const Tensor& t = Replica(*comm, d, j);
        DP_ENFORCE_CODE(t.dtype() == first.dtype() && t.dims() == first.dims(), Code::kShape, InputDesc(In(d, j)),
                        " is ", t.DebugString(), " but ", InputDesc(In(0, j)), " is ", first.DebugString());
      }
    }
    std::vector<CudaCollectives::Segment> segments;
    std::vector<int> owners;
    for (int j = 0; j < m; ++j) {
      const Tensor& first = Replica(*comm, 0, j);
      const size_t item = DTypeSize(first.dtype());
      std::vector<char*> data;
      for (int d = 0; d < n; ++d) data.push_back(static_cast<char*>(Output(In(d, j) - 1)->raw_mutable_data()));
      for (int64_t part = 0; part < layout.parts(); ++part) {
        const ElementRange r = PartOfElements(first.numel(), part, layout.parts());
        if (r.end == r.begin) continue;
        CudaCollectives::Segment seg;
        seg.count = r.end - r.begin;
        seg.dtype = first.dtype();
        for (int d = 0; d < n; ++d) seg.buffers.push_back(data[static_cast<size_t>(d)] + r.begin * item);
        segments.push_back(std::move(seg));
        owners.push_back(static_cast<int>(part));
      }
    }
    if (!segments.empty()) comm->Allgather(segments, owners, cuda_context());
  }
};

DP_OPERATOR_SCHEMA(CreateCudaCollectives)
    .NumInputs(0)
    .NumOutputs(1)
    .Outputs({"comm"})
    .RequiredArg("device_ids", ArgKind::kInts, "the replicas' CUDA devices, in replica order (distinct GPUs)")
    .Arg("nccl", ArgKind::kInt, 1,
         "1: NCCL group calls; 0: copy-and-sum tree of peer copies (deterministic sum order)")
    .Arg("world_size", ArgKind::kInt, 1, "processes of the job, each with its own device_ids")
    .Arg("rank", ArgKind::kInt, 0, "this process's rank in [0, world_size)")
    .Arg("store", ArgKind::kString, "",
         "where the processes meet: file:///dir or redis://host:port[/prefix]; required when world_size > 1")
    .Arg("timeout_ms", ArgKind::kInt, 60000, "bound of NCCL's initialisation and of every collective")
    .Arg("run_id", ArgKind::kString, "dp", "the job's id: keys in the store live under it")
    .Doc("Creates a communicator for Allreduce and Broadcast between CUDA replicas and, with world_size > 1, "
         "between the processes of a job (NCCL across processes; every call bounded by timeout_ms). Kept when it "
         "exists with the same devices, mode and processes.");

// A host op that only builds the communicator; registered for CUDA too, so
// that an init net whose default device is a GPU can hold it.
DP_REGISTER_CPU_OPERATOR(CreateCudaCollectives, CreateCudaCollectivesOp);
DP_REGISTER_CUDA_OPERATOR(CreateCudaCollectives, CreateCudaCollectivesOp);
DP_REGISTER_CUDA_OPERATOR(Allreduce, CudaAllreduceOp);
DP_REGISTER_CUDA_OPERATOR(Broadcast, CudaBroadcastOp);
// ReduceScatter leaves each device's part summed and the other elements
// unspecified: the whole allreduce is such a result (NCCL's reduce-scatter
// would move half the bytes).
DP_REGISTER_CUDA_OPERATOR(ReduceScatter, CudaAllreduceOp);
DP_REGISTER_CUDA_OPERATOR(Allgather, CudaAllgatherOp);
DP_NO_GRADIENT(CreateCudaCollectives);

// GatherShards and ScatterShards learn the processes of a CUDA
// communicator, and gather the processes' parts through it.
bool CudaShardCommunicator(const Blob& comm, ShardCommunicator* out) {
  if (!comm.IsType<CudaCommunicator>()) return false;
  std::shared_ptr<CudaCollectives> held = comm.Get<CudaCommunicator>().collectives;
  if (!held) return false;
  out->devices = held->size();
  out->processes = held->num_processes();
  out->rank = held->process_rank();
  out->allgather = [held](const void* mine, void* all, size_t block) { held->AllgatherHost(mine, all, block); };
  return true;
}

struct ShardCommunicatorRegistration {
  ShardCommunicatorRegistration() { RegisterShardCommunicator(&CudaShardCommunicator); }
} g_shard_communicator_registration;

}  // namespace
}  // namespace dp
