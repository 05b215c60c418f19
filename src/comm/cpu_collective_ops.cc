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
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/gradient_registry.h"
#include "comm/active_scale.h"
#include "comm/collective_checks.h"
#include "comm/collective_op.h"
#include "comm/compression.h"
#include "comm/cpu_collective_op.h"
#include "ops/op_utils.h"
#include "ops/operator.h"
#include "comm/cpu_collectives.h"
#include "comm/process_args.h"
#include "comm/process_group.h"
#include "core/half_float.h"

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
    group_.size = process_.world_size;
    group_.rank = process_.rank;
    group_.timeout = process_.timeout;
    group_.interface = args().String("interface", "");
    group_.algorithm = args().String("algorithm", "auto");
    group_.local_transport = args().String("local_transport", "auto");
    DP_ENFORCE(IsLocalTransport(group_.local_transport), "local_transport '", group_.local_transport, "' must be auto, shm or tcp");
    config_ = process_.world_size == 1 ? std::string()
                                       : StrCat(process_.Config(), " ", group_.interface, " ", group_.algorithm, " ",
                                                group_.local_transport);
  }

 private:
  void RunOnDevice() override {
    Blob* out = output_blobs()[0];
    // Keep a communicator of the right size: its threads stay warm, and ops
    // holding it need not notice a re-run of the init net.
    if (out->IsType<CpuCommunicator>()) {
      const auto& comm = out->Get<CpuCommunicator>();
      if (comm.collectives && comm.collectives->num_threads() == threads_ && comm.peers_config == config_) return;
    }
    auto comm = std::make_shared<CpuCommunicator>();
    comm->collectives = std::make_shared<CpuCollectives>(threads_);
    comm->staging = std::make_shared<StagingCache>();
    comm->peers_config = config_;
    if (group_.size > 1) comm->peers = ConnectProcesses(process_.OpenScope(def().outputs[0]), group_);
    out->Reset(std::move(comm));
  }

  const ProcessArgs process_ = ProcessArgs::Parse(args());
  int threads_ = 1;
  ProcessGroupOptions group_;
  std::string config_;
};

class AllreduceOp final : public CpuCollectiveOp {
 public:
  explicit AllreduceOp(const OpInit& init) : CpuCollectiveOp(init) {
    DP_ENFORCE(!average_active_ || per_device_ >= 2, "average_active needs each device's tensors followed by its ",
               "active flag (at least 2 tensors per device), got ", per_device_);
  }

 private:
  void RunOnDevice() override {
    auto comm = Comm();  // held: the blob may be replaced while this runs
    const double scale = CheckedAllreduceScale([&](int d, int j) -> const Tensor& { return Input(In(d, j)); });
    // Averaging over the active replicas (Join): each device's last tensor is
    // its float32 [1] flag; it is summed with the rest, and the others are
    // divided by that sum.
    const int m = average_active_ ? per_device_ - 1 : per_device_;
    if (average_active_) {
      const Tensor& flag = Input(In(0, m));
      DP_ENFORCE_CODE(flag.dtype() == DType::kFloat32 && flag.numel() == 1, Code::kShape, InputDesc(In(0, m)),
                      " is ", flag.DebugString(), ": the active flag of average_active must be float32 [1]");
    }
    // One AllreduceSum per dtype (normally one), tensors in order, the group
    // with the flag first (the count divides every group). Writable pointers
    // are taken first: copy-on-write keeps the values, so reading them back
    // afterwards is safe.
    // Compressed tensors (the first compress_tensors of a device) form a
    // float32 group of their own.
    std::vector<Group> groups;
    if (average_active_) groups.push_back({DType::kFloat32, false, {}});
    for (int j = 0; j < m; ++j) {
      const Tensor& first = Input(In(0, j));
      const bool compressed = compress_ != DType::kUndefined && j < compress_tensors_;
      DP_ENFORCE_CODE(!compressed || first.dtype() == DType::kFloat32, Code::kDType, InputDesc(In(0, j)), " is ",
                      first.DebugString(), ": compressed tensors (compress ", DTypeName(compress_),
                      ") must be float32");
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return g.dtype == first.dtype() && g.compressed == compressed; });
      if (it == groups.end()) it = groups.insert(groups.end(), {first.dtype(), compressed, {}});
      it->segments.push_back(Segment(j));
    }
    CpuCollectives::Segment flags;
    if (average_active_) flags = Segment(m);
    float count = 0;  // active replicas, once the flags are summed
    for (size_t g = 0; g < groups.size(); ++g) {
      const DType dtype = groups[g].dtype;
      const auto& segments = groups[g].segments;
      const bool with_flags = average_active_ && g == 0;
      const double s = average_active_ && g > 0 ? ActiveScale(scale, count) : scale;
      if (groups[g].compressed) {
        WithCompressionType(compress_,
                            [&](auto zero) { AllreduceCompressed<decltype(zero)>(comm, g, segments, s); });
        continue;
      }
      if (!comm.peers) {
        if (with_flags) {
          comm.collectives->AllreduceSum({flags}, DType::kFloat32, 1.0);
          count = static_cast<const float*>(flags.buffers[0])[0];
          comm.collectives->AllreduceSum(segments, dtype, ActiveScale(scale, count));
        } else {
          comm.collectives->AllreduceSum(segments, dtype, s);
        }
        continue;
      }
      // Hierarchical: this process's devices summed into the collective's
      // buffer (the flags first), the processes' sums combined, the result
      // scaled into every device piece by piece as the pieces are ready.
      int64_t total = 0;
      for (const auto& seg : segments) total += seg.count;
      const int64_t head = with_flags ? 1 : 0;
      if (total + head == 0) continue;
      StagedCollective& st = Stage(comm, g, total + head, dtype);
      const size_t item = DTypeSize(dtype);
      char* in = static_cast<char*>(st.prepared->input());
      if (with_flags) comm.collectives->SumInto({flags}, DType::kFloat32, in);
      comm.collectives->SumInto(segments, dtype, in + head * item);
      double piece_scale = s;
      auto sink = [&](const void* piece, size_t off, size_t n) {
        const char* p = static_cast<const char*>(piece);
        if (with_flags && off == 0) {  // the first piece opens with the flags' sum
          float active;
          std::memcpy(&active, p, sizeof active);
          count = active;
          comm.collectives->CopyOut(p, {flags}, DType::kFloat32, 1.0);
          piece_scale = ActiveScale(scale, count);
          p += item;
          off += item;
          n -= item;
        }
        comm.collectives->CopyOut(p, segments, dtype, piece_scale, static_cast<int64_t>(off / item) - head,
                                  static_cast<int64_t>(n / item));
      };
      st.prepared->Run(SinkOf(sink));
    }
  }

  struct Group {
    DType dtype;
    bool compressed;
    std::vector<CpuCollectives::Segment> segments;
  };

  // A float32 group through the 16-bit type H (comm/compression.h), times
  // `s`. Across processes each process's contribution is its replicas'
  // float sum, and only H's bytes cross: half of float32's.
  template <typename H>
  void AllreduceCompressed(const CpuCommunicator& comm, size_t g, const std::vector<CpuCollectives::Segment>& segments,
                           double s) {
    if (!comm.peers) return AllreduceThroughHalf<H>(*comm.collectives, segments, num_devices_, s);
    int64_t total = 0;
    for (const auto& seg : segments) total += seg.count;
    if (total == 0) return;
    const int processes = comm.peers->size();
    const float pre = CompressionPreScale<H>(processes), post = CompressionPostScale<H>(processes, s);
    StagedCollective& st = Stage(comm, g, total, DTypeOf<H>());
    float* sums = Scratch<float>(total);  // this process's sum, then the result as it arrives
    comm.collectives->SumInto(segments, DType::kFloat32, sums);
    CastScaled<H>(sums, pre, static_cast<H*>(st.prepared->input()), total);
    auto sink = [&](const void* piece, size_t off, size_t n) {
      const int64_t begin = static_cast<int64_t>(off / sizeof(H)), count = static_cast<int64_t>(n / sizeof(H));
      UncastScaled<H>(static_cast<const H*>(piece), post, sums + begin, count);
      comm.collectives->CopyOut(sums + begin, segments, DType::kFloat32, 1.0, begin, count);
    };
    st.prepared->Run(SinkOf(sink));
  }

  // Tensor j of every device, written in place.
  CpuCollectives::Segment Segment(int j) {
    CpuCollectives::Segment seg;
    seg.count = Input(In(0, j)).numel();
    seg.buffers.reserve(static_cast<size_t>(num_devices_));
    for (int d = 0; d < num_devices_; ++d) seg.buffers.push_back(Output(In(d, j) - 1)->raw_mutable_data());
    return seg;
  }

  const bool average_active_ = args().Int("average_active", 0) != 0;
  // compress "bf16" / "fp16": kBFloat16 / kFloat16; "": kUndefined (none).
  const DType compress_ = AllreduceCompression(args().String("compress", ""));
  const int64_t compress_tensors_ = args().Int("compress_tensors", std::numeric_limits<int64_t>::max());
};

class BroadcastOp final : public CpuCollectiveOp {
 public:
  explicit BroadcastOp(const OpInit& init) : CpuCollectiveOp(init), root_(CollectiveRoot(args(), num_devices_)) {}

 private:
  void RunOnDevice() override {
    auto comm = Comm();
    const int n = num_devices_, m = per_device_;
    if (comm.peers) FromRankZero(comm);
    std::vector<void*> buffers(static_cast<size_t>(n));
    for (int j = 0; j < m; ++j) {
      const Tensor& src = Input(In(root_, j));
      for (int d = 0; d < n; ++d) {
        if (d == root_) continue;
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
      // Read last: a replica's slot may name the root's own blob (a shared
      // model's params), whose storage raw_mutable_data may have just
      // replaced; the copy onto itself is then skipped.
      buffers[static_cast<size_t>(root_)] = const_cast<void*>(src.raw_data());  // only read
      comm.collectives->Broadcast(buffers, root_, src.nbytes());
    }
  }

  // Across processes: rank 0's root tensors, packed into one message, into
  // every process's root tensors (their shapes agree: every process built
  // them with the same nets).
  void FromRankZero(const CpuCommunicator& comm) {
    const int m = per_device_;
    size_t total = 0;
    for (int j = 0; j < m; ++j) total += Input(In(root_, j)).nbytes();
    if (total == 0) return;
    StagedCollective& st = Stage(comm, 0, static_cast<int64_t>(total), DType::kUInt8, 0);
    const bool sender = comm.peers->rank() == 0;
    char* in = static_cast<char*>(st.prepared->input());
    // Where each tensor's bytes start in the message, and where they go.
    std::vector<std::pair<size_t, char*>> to;
    size_t off = 0;
    for (int j = 0; j < m; ++j) {
      const size_t nb = Input(In(root_, j)).nbytes();
      if (sender && nb > 0) std::memcpy(in + off, Input(In(root_, j)).raw_data(), nb);
      if (!sender && nb > 0) to.emplace_back(off, static_cast<char*>(Output(In(root_, j) - 1)->raw_mutable_data()));
      off += nb;
    }
    to.emplace_back(total, nullptr);
    auto sink = [&](const void* piece, size_t at, size_t n) {
      // The tensors overlapping [at, at + n).
      const char* p = static_cast<const char*>(piece);
      for (size_t t = 0; t + 1 < to.size(); ++t) {
        const size_t lo = std::max(at, to[t].first), hi = std::min(at + n, to[t + 1].first);
        if (lo < hi) std::memcpy(to[t].second + (lo - to[t].first), p + (lo - at), hi - lo);
      }
    };
    st.prepared->Run(SinkOf(sink));
  }

  const int root_;
};

// Barrier(comm): returns once no collective issued before it on the
// communicator is still running.
class BarrierOp final : public Operator {
 public:
  using Operator::Operator;

 private:
  void RunOnDevice() override {
    auto comm = CommOf(*input_blobs()[0], InputDesc(0));
    comm.collectives->Barrier();
    if (comm.peers) comm.peers->Barrier();
  }
};

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
    .HostOp("creates the host communicator of CPU replicas (CUDA replicas: CreateCudaCollectives)")
    .Arg("threads", ArgKind::kInt, 0,
         "threads of the communicator's team; 0: min(num_devices, hardware concurrency), or the hardware "
         "concurrency without num_devices")
    .Arg("num_devices", ArgKind::kInt, 0, "replicas the communicator serves (sizes the team when threads is 0; "
         "0: unknown)")
    .Arg("world_size", ArgKind::kInt, 1, "processes of the job (1: this process alone)")
    .Arg("rank", ArgKind::kInt, 0, "this process's rank in [0, world_size)")
    .Arg("store", ArgKind::kString, "",
         "where the processes meet: file:///dir or redis://host:port[/prefix]; required when world_size > 1")
    .Arg("timeout_ms", ArgKind::kInt, 60000, "bound of the rendezvous and of every collective across processes")
    .Arg("interface", ArgKind::kString, "",
         "network interface for Gloo's TCP transport (\"\": the host name's address)")
    .Arg("algorithm", ArgKind::kString, "auto",
         "the allreduce over Gloo: auto, ring, halving_doubling, bcube or direct (comm/gloo_communicator.h)")
    .Arg("local_transport", ArgKind::kString, "auto",
         "between the processes of one host: auto (shared memory where available), shm or tcp (Gloo)")
    .Arg("run_id", ArgKind::kString, "dp", "the job's id: keys in the store live under it")
    .Doc("Creates a communicator for Allreduce, Broadcast and Barrier between CPU replicas and, with world_size > 1, "
         "between the processes of a job (after a rendezvous through the store: shared memory between the "
         "processes of a host, Gloo over TCP between hosts; hierarchical: devices, then processes, then devices). "
         "Kept when it exists with the same settings.");

DP_OPERATOR_SCHEMA(Allreduce)
    .With(InPlaceCollectiveSchema)
    .Arg("scale", ArgKind::kFloat, 1.0, "multiplies the sum, e.g. 1 / N to average (float tensors only)")
    .Arg("average_active", ArgKind::kInt, 0,
         "1: each device's last tensor is its float32 [1] active flag (1 or 0); the flags are summed like the "
         "rest, and the other sums are divided by theirs: the mean over active replicas (Join of processes that "
         "ran out of data, which send zeros with flag 0)")
    .Arg("key", ArgKind::kString, ArgDefault::Described("this op's own"),
         "names the collective across processes when several ops run it (a bucket in the train and join nets)")
    .Arg("compress", ArgKind::kString, "",
         "\"bf16\" or \"fp16\": the float32 tensors cross in 16 bits (each contribution rounded once, summed in "
         "float, the sum rounded once; fp16 scaled by 1 / contributions against overflow): half the bytes between "
         "processes; \"\": none")
    .Arg("compress_tensors", ArgKind::kInt, ArgDefault::Described("all"),
         "how many of each device's tensors, from the first, are compressed (gradients, not the scalars riding along)")
    .ShapeInference(AllreduceInference)
    .Doc("Sums tensor j over the devices, in device order, into every device's tensor j, in place.");

DP_OPERATOR_SCHEMA(Broadcast)
    .With(InPlaceCollectiveSchema)
    .Arg("root", ArgKind::kInt, 0, "the device whose tensors are copied to the others")
    .Arg("key", ArgKind::kString, ArgDefault::Described("this op's own"),
         "names the collective across processes when several ops run it")
    .ShapeInference(BroadcastInference)
    .Doc("Copies the root device's tensors into the other devices' tensors, in place, resizing replicas that differ "
         "(so it can initialise them).");

DP_OPERATOR_SCHEMA(Barrier)
    .NumInputs(1)
    .NumOutputs(0)
    .Inputs({"comm"})
    .HostOp("waits on the host for the communicator")
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
