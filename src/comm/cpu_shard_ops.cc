// The collectives of a sharded optimizer state (ZeRO-1, parallel/) between
// CPU replicas and processes, through a CpuCollectives communicator:
//   ReduceScatter(comm, G_0, ..., G_{k-1}) -> (G_0, ..., G_{k-1})  in place
//   Allgather(comm, W_0, ..., W_{k-1}) -> (W_0, ..., W_{k-1})      in place
//   GatherShards(comm, like, S_0, ..., S_{N-1}) -> full
//   ScatterShards(comm, full) -> (S_0, ..., S_{N-1})
// (GatherShards and ScatterShards are host ops that also take the state of
// CUDA replicas, with their communicator, in one process: shards on GPUs
// are copied to and from the host.)
// Tensors are device-major as for Allreduce; which elements each device
// owns is comm/shards.h's (device d of process p: part p * N + d of N * P).
// ReduceScatter leaves each device's part of every gradient summed over
// every device of every process (the sum Allreduce computes for those
// elements, in the same order: device order inside a process, then the
// communicator's); the optimizer update of that part runs on that device
// with that part of the state (sharded_state); Allgather then copies each
// device's part of the params into every other device. Between processes
// only each process's contiguous range crosses (ShardLayout::OfProcess),
// packed per bucket into one block, blocks padded to the longest.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "comm/active_scale.h"
#include "comm/collective_checks.h"
#include "comm/compression.h"
#include "comm/cpu_collective_op.h"
#include "comm/shards.h"
#include "core/storage.h"
#include "ops/gradient_registry.h"
#include "ops/op_utils.h"
#include "ops/operator.h"

namespace dp {
namespace {

// This op's view of the job: N devices here, the communicator's processes.
ShardLayout LayoutOf(const CpuCommunicator& comm, int devices) {
  ShardLayout l;
  l.devices = devices;
  if (comm.peers) {
    l.processes = comm.peers->size();
    l.rank = comm.peers->rank();
  }
  return l;
}

// dst[i] = src[i] * scale (a plain copy when scale is 1), float types only.
void ScaledCopy(void* dst, const void* src, int64_t n, DType dtype, double scale) {
  if (n <= 0) return;
  if (scale == 1.0) {
    std::memmove(dst, src, static_cast<size_t>(n) * DTypeSize(dtype));
    return;
  }
  DispatchFloat(dtype, "ScaledCopy", [&](auto zero) {
    using T = decltype(zero);
    const T s = static_cast<T>(scale);
    const T* a = static_cast<const T*>(src);
    T* b = static_cast<T*>(dst);
    for (int64_t i = 0; i < n; ++i) b[i] = a[i] * s;
  });
}

class ReduceScatterOp final : public CpuCollectiveOp {
 public:
  explicit ReduceScatterOp(const OpInit& init) : CpuCollectiveOp(init) {
    const int64_t sharded = args().Int("shard_tensors", per_device_);
    DP_ENFORCE(sharded >= 0 && sharded <= per_device_, "shard_tensors ", sharded, " must be in [0, ", per_device_,
               "] (the tensors per device)");
    sharded_ = static_cast<int>(sharded);
    DP_ENFORCE(!average_active_ || sharded_ < per_device_, "average_active needs each device's last tensor to be ",
               "its active flag, reduced whole (shard_tensors < tensors per device)");
  }

 private:
  void RunOnDevice() override {
    auto comm = Comm();
    const double scale = CheckedAllreduceScale([&](int d, int j) -> const Tensor& { return Input(In(d, j)); });
    const DType dtype = Input(In(0, 0)).dtype();
    for (int j = 0; j < per_device_; ++j)
      DP_ENFORCE_CODE(Input(In(0, j)).dtype() == dtype && (dtype == DType::kFloat32 || dtype == DType::kFloat64),
                      Code::kDType, InputDesc(In(0, j)), " is ", Input(In(0, j)).DebugString(),
                      ": ReduceScatter reduces float32 or float64 tensors, all of one dtype (",
                      InputDesc(In(0, 0)), " is ", DTypeName(dtype), ")");
    DP_ENFORCE_CODE(compress_ == DType::kUndefined || dtype == DType::kFloat32, Code::kDType, InputDesc(In(0, 0)),
                    " is ", Input(In(0, 0)).DebugString(), ": compressed tensors (compress ", DTypeName(compress_),
                    ") must be float32");
    const int flag = average_active_ ? per_device_ - 1 : -1;
    if (average_active_)
      DP_ENFORCE_CODE(dtype == DType::kFloat32 && Input(In(0, flag)).numel() == 1, Code::kShape,
                      InputDesc(In(0, flag)), " is ", Input(In(0, flag)).DebugString(),
                      ": the active flag of average_active must be float32 [1]");
    // The tensors reduced whole (riding along: losses, the flag, last).
    std::vector<CpuCollectives::Segment> whole;
    for (int j = sharded_; j < per_device_; ++j) whole.push_back(Segment(j, 0, Input(In(0, j)).numel()));
    const ShardLayout layout = LayoutOf(comm, num_devices_);
    const size_t item = DTypeSize(dtype);
    if (!comm.peers) {
      // In one process the parts of all devices cover every element: this is
      // the allreduce (each element read from every device once), which
      // writes no scratch; the elements outside a device's part are left
      // summed too.
      std::vector<CpuCollectives::Segment> all;
      for (int j = 0; j < sharded_; ++j) all.push_back(Segment(j, 0, Input(In(0, j)).numel()));
      double s = scale;
      if (average_active_) {
        comm.collectives->AllreduceSum({whole.back()}, dtype, 1.0);
        s = ActiveScale(scale, static_cast<const float*>(whole.back().buffers[0])[0]);
        whole.pop_back();
      }
      if (compress_ != DType::kUndefined) {
        WithCompressionType(compress_, [&](auto zero) {
          AllreduceThroughHalf<decltype(zero)>(*comm.collectives, all, num_devices_, s);
        });
        if (!whole.empty()) comm.collectives->AllreduceSum(whole, dtype, s);
        return;
      }
      all.insert(all.end(), whole.begin(), whole.end());
      comm.collectives->AllreduceSum(all, dtype, s);
      return;
    }
    if (compress_ != DType::kUndefined) {
      WithCompressionType(compress_,
                          [&](auto zero) { AcrossCompressed<decltype(zero)>(comm, layout, std::move(whole), scale); });
      return;
    }
    // Across processes: block q holds the whole tensors' sums over this
    // process's devices, then process q's range of every sharded tensor
    // summed over them, written straight into the communicator's buffer
    // (shared memory); its reduce-scatter sums block `rank` over the
    // processes.
    int64_t head = 0;
    for (const auto& seg : whole) head += seg.count;
    int64_t block = 0;
    for (int64_t q = 0; q < layout.processes; ++q) block = std::max(block, RangesTotal(layout, q));
    block += head;
    if (block == 0) return;
    StagedCollective& st = Stage(comm, StagedKind::kReduceScatter, block, dtype);
    char* buf = static_cast<char*>(st.prepared->input());
    for (int64_t q = 0; q < layout.processes; ++q) {
      char* b = buf + static_cast<size_t>(q * block) * item;
      comm.collectives->SumInto(whole, dtype, b);
      const auto ranges = Ranges(layout, q);
      comm.collectives->SumInto(ranges, dtype, b + static_cast<size_t>(head) * item);
      const int64_t used = head + RangesTotal(layout, q);
      std::memset(b + static_cast<size_t>(used) * item, 0, static_cast<size_t>(block - used) * item);
    }
    // This process's block, summed: the scalars to every device, each
    // device's part from the range.
    auto finish = [&](const char* mine) {
      double s = scale;
      if (average_active_) {
        float active;
        std::memcpy(&active, mine + static_cast<size_t>(head - 1) * item, sizeof active);
        comm.collectives->CopyOut(mine + static_cast<size_t>(head - 1) * item, {whole.back()}, dtype, 1.0);
        s = ActiveScale(scale, active);
        whole.pop_back();
      }
      comm.collectives->CopyOut(mine, whole, dtype, s);
      for (int d = 0; d < num_devices_; ++d) Scatter(mine + static_cast<size_t>(head) * item, layout, d, dtype, s);
    };
    // Handed out whole (shared memory, the default) it is used where it
    // lies; in pieces, gathered first.
    const size_t block_bytes = static_cast<size_t>(block) * item, at = block_bytes * static_cast<size_t>(layout.rank);
    char* pieces = nullptr;
    auto sink = [&](const void* piece, size_t off, size_t n) {
      DP_ENFORCE_CODE(off >= at && n <= block_bytes - (off - at), Code::kInternal, label(),
                      ": the reduce-scatter handed out bytes outside this process's block");
      if (off == at && n == block_bytes) return finish(static_cast<const char*>(piece));
      if (pieces == nullptr) pieces = Scratch<char>(static_cast<int64_t>(block_bytes));
      std::memcpy(pieces + (off - at), piece, n);
    };
    st.prepared->Run(SinkOf(sink));
    if (pieces != nullptr) finish(pieces);
  }

  // Across processes with compress: the whole tensors (losses, the active
  // flag: kept exact) by a float32 allreduce of their own, then the ranges
  // through the 16-bit H, as Allreduce compresses them (comm/compression.h):
  // each process's float sum rounded to H once, the processes' summed in
  // float and rounded once (shared memory: the allreduce's bits), and only
  // H's bytes cross.
  template <typename H>
  void AcrossCompressed(const CpuCommunicator& comm, const ShardLayout& layout,
                        std::vector<CpuCollectives::Segment> whole, double scale) {
    double s = scale;
    int64_t head = 0;
    for (const auto& seg : whole) head += seg.count;
    if (head > 0) {
      StagedCollective& st = Stage(comm, 1, head, DType::kFloat32);
      comm.collectives->SumInto(whole, DType::kFloat32, st.prepared->input());
      float* sums = Scratch<float>(head);
      auto sink = [&](const void* piece, size_t off, size_t n) {
        std::memcpy(reinterpret_cast<char*>(sums) + off, piece, n);
      };
      st.prepared->Run(SinkOf(sink));
      if (average_active_) {
        comm.collectives->CopyOut(sums + head - 1, {whole.back()}, DType::kFloat32, 1.0);
        s = ActiveScale(scale, sums[head - 1]);
        whole.pop_back();
      }
      comm.collectives->CopyOut(sums, whole, DType::kFloat32, s);
    }
    int64_t block = 0;
    for (int64_t q = 0; q < layout.processes; ++q) block = std::max(block, RangesTotal(layout, q));
    if (block == 0) return;
    const int processes = static_cast<int>(layout.processes);
    const float pre = CompressionPreScale<H>(processes), post = CompressionPostScale<H>(processes, s);
    StagedCollective& st = Stage(comm, StagedKind::kReduceScatter, block, DTypeOf<H>());
    H* buf = static_cast<H*>(st.prepared->input());
    float* sums = Scratch<float>(block);  // a block's float sums, then this process's result
    for (int64_t q = 0; q < layout.processes; ++q) {
      comm.collectives->SumInto(Ranges(layout, q), DType::kFloat32, sums);
      const int64_t used = RangesTotal(layout, q);
      H* b = buf + q * block;
      CastScaled<H>(sums, pre, b, used);
      for (int64_t i = used; i < block; ++i) b[i] = FromFloat<H>(0.0f);
    }
    const size_t at = static_cast<size_t>(block * layout.rank) * sizeof(H);
    auto sink = [&](const void* piece, size_t off, size_t n) {
      DP_ENFORCE_CODE(off >= at && n <= static_cast<size_t>(block) * sizeof(H) - (off - at), Code::kInternal,
                      label(), ": the reduce-scatter handed out bytes outside this process's block");
      UncastScaled<H>(static_cast<const H*>(piece), post, sums + (off - at) / sizeof(H),
                      static_cast<int64_t>(n / sizeof(H)));
    };
    st.prepared->Run(SinkOf(sink));
    for (int d = 0; d < num_devices_; ++d)
      Scatter(reinterpret_cast<const char*>(sums), layout, d, DType::kFloat32, 1.0);
  }

  // Elements [begin, begin + count) of tensor j, on every device.
  CpuCollectives::Segment Segment(int j, int64_t begin, int64_t count) {
    CpuCollectives::Segment seg;
    seg.count = count;
    for (int d = 0; d < num_devices_; ++d)
      seg.buffers.push_back(static_cast<char*>(Output(In(d, j) - 1)->raw_mutable_data()) +
                            static_cast<size_t>(begin) * DTypeSize(Input(In(0, j)).dtype()));
    return seg;
  }

  // Process q's range of every sharded tensor.
  std::vector<CpuCollectives::Segment> Ranges(const ShardLayout& l, int64_t q) {
    std::vector<CpuCollectives::Segment> out;
    for (int j = 0; j < sharded_; ++j) {
      const ElementRange r = l.OfProcess(Input(In(0, j)).numel(), q);
      out.push_back(Segment(j, r.begin, r.end - r.begin));
    }
    return out;
  }
  int64_t RangesTotal(const ShardLayout& l, int64_t q) const {
    int64_t total = 0;
    for (int j = 0; j < sharded_; ++j) {
      const ElementRange r = l.OfProcess(Input(In(0, j)).numel(), q);
      total += r.end - r.begin;
    }
    return total;
  }

  // Device d's part of each sharded tensor, times s, from `sums`, which
  // holds this process's range of each tensor, tensor after tensor.
  void Scatter(const char* sums, const ShardLayout& l, int d, DType dtype, double s) {
    const size_t item = DTypeSize(dtype);
    int64_t at = 0;
    for (int j = 0; j < sharded_; ++j) {
      const int64_t n = Input(In(0, j)).numel();
      const ElementRange part = l.OfDevice(n, d);
      const ElementRange span = l.OfProcess(n, l.rank);
      char* dst = static_cast<char*>(Output(In(d, j) - 1)->raw_mutable_data()) + static_cast<size_t>(part.begin) * item;
      ScaledCopy(dst, sums + static_cast<size_t>(at + part.begin - span.begin) * item, part.end - part.begin, dtype,
                 s);
      at += span.end - span.begin;
    }
  }

  const bool average_active_ = args().Int("average_active", 0) != 0;
  // compress "bf16" / "fp16": the sharded tensors through kBFloat16 / kFloat16; "": none.
  const DType compress_ = AllreduceCompression(args().String("compress", ""));
  int sharded_ = 0;
};

class AllgatherOp final : public CpuCollectiveOp {
 public:
  using CpuCollectiveOp::CpuCollectiveOp;

 private:
  void RunOnDevice() override {
    auto comm = Comm();
    const int n = num_devices_, m = per_device_;
    for (int j = 0; j < m; ++j)
      for (int d = 1; d < n; ++d) {
        const Tensor &a = Input(In(0, j)), &t = Input(In(d, j));
        DP_ENFORCE_CODE(t.dtype() == a.dtype() && t.dims() == a.dims(), Code::kShape, InputDesc(In(d, j)), " is ",
                        t.DebugString(), " but ", InputDesc(In(0, j)), " is ", a.DebugString());
      }
    const ShardLayout l = LayoutOf(comm, n);
    std::vector<char*> data(static_cast<size_t>(n * m));
    for (int d = 0; d < n; ++d)
      for (int j = 0; j < m; ++j)
        data[static_cast<size_t>(d * m + j)] = static_cast<char*>(Output(In(d, j) - 1)->raw_mutable_data());
    auto item = [&](int j) { return DTypeSize(Input(In(0, j)).dtype()); };
    // This process's devices: each one's part to the others.
    std::vector<void*> buffers(static_cast<size_t>(n));
    for (int j = 0; j < m; ++j)
      for (int d = 0; d < n; ++d) {
        const ElementRange r = l.OfDevice(Input(In(0, j)).numel(), d);
        for (int e = 0; e < n; ++e) buffers[static_cast<size_t>(e)] = data[static_cast<size_t>(e * m + j)] + r.begin * item(j);
        comm.collectives->Broadcast(buffers, d, static_cast<size_t>(r.end - r.begin) * item(j));
      }
    if (!comm.peers) return;
    // The processes' ranges, packed into a block each (padded to the longest).
    auto range_bytes = [&](int64_t q) {
      size_t total = 0;
      for (int j = 0; j < m; ++j) {
        const ElementRange r = l.OfProcess(Input(In(0, j)).numel(), q);
        total += static_cast<size_t>(r.end - r.begin) * item(j);
      }
      return total;
    };
    size_t block = 0;
    for (int64_t q = 0; q < l.processes; ++q) block = std::max(block, range_bytes(q));
    if (block == 0) return;
    // Packed straight into the communicator's buffer (shared memory).
    StagedCollective& st = Stage(comm, StagedKind::kAllgather, static_cast<int64_t>(block), DType::kUInt8);
    char* in = static_cast<char*>(st.prepared->input());
    size_t at = 0;
    for (int j = 0; j < m; ++j) {
      const ElementRange r = l.OfProcess(Input(In(0, j)).numel(), l.rank);
      const size_t nb = static_cast<size_t>(r.end - r.begin) * item(j);
      if (nb > 0) std::memcpy(in + at, data[static_cast<size_t>(j)] + r.begin * item(j), nb);
      at += nb;
    }
    // Process q's block into every device.
    auto unpack = [&](int64_t q, const char* src) {
      size_t off = 0;
      for (int j = 0; j < m; ++j) {
        const ElementRange r = l.OfProcess(Input(In(0, j)).numel(), q);
        const size_t nb = static_cast<size_t>(r.end - r.begin) * item(j);
        for (int d = 0; d < n && nb > 0; ++d)
          std::memcpy(data[static_cast<size_t>(d * m + j)] + r.begin * item(j), src + off, nb);
        off += nb;
      }
    };
    // Blocks handed out whole are unpacked where they lie; pieces are gathered first.
    char* pieces = nullptr;
    std::vector<bool> in_pieces(static_cast<size_t>(l.processes), false);
    auto sink = [&](const void* piece, size_t off, size_t nbytes) {
      const int64_t q = static_cast<int64_t>(off / block);
      DP_ENFORCE_CODE(q < l.processes && nbytes <= block - off % block, Code::kInternal, label(),
                      ": the allgather handed out a piece across blocks");
      if (q == l.rank) return;
      if (off % block == 0 && nbytes == block) return unpack(q, static_cast<const char*>(piece));
      if (pieces == nullptr) pieces = Scratch<char>(static_cast<int64_t>(block) * l.processes);
      std::memcpy(pieces + off, piece, nbytes);
      in_pieces[static_cast<size_t>(q)] = true;
    };
    st.prepared->Run(SinkOf(sink));
    for (int64_t q = 0; q < l.processes; ++q)
      if (in_pieces[static_cast<size_t>(q)]) unpack(q, pieces + q * block);
  }
};

std::atomic<ShardCommunicatorFn> g_other_communicator{nullptr};

// The layout of a saved or loaded sharded state, and how its processes'
// parts cross (unset in one process): a CPU communicator's, or another
// device type's (RegisterShardCommunicator).
ShardLayout CheckpointLayout(const Blob& comm, const std::string& desc, int devices,
                             std::function<void(const void*, void*, size_t)>* allgather) {
  ShardCommunicator other;
  ShardCommunicatorFn other_fn = g_other_communicator.load(std::memory_order_acquire);
  ShardLayout l;
  if (!comm.IsType<CpuCommunicator>() && other_fn != nullptr && other_fn(comm, &other)) {
    DP_ENFORCE_CODE(other.devices == 0 || other.devices == devices, Code::kInvalidArgument, desc, " serves ",
                    other.devices, " devices a process, but the op has ", devices, " shards");
    l.devices = devices;
    l.processes = other.processes;
    l.rank = other.rank;
    if (l.processes > 1) *allgather = std::move(other.allgather);
    return l;
  }
  CpuCommunicator cpu = CommOf(comm, desc);
  l = LayoutOf(cpu, devices);
  if (cpu.peers)
    *allgather = [peers = cpu.peers](const void* mine, void* all, size_t block) {
      peers->Allgather(mine, all, block);
    };
  return l;
}

// The op's devices from the count of its shards (inputs or outputs).
int ShardDevices(const ArgReader& args, int shards) {
  const int64_t n = args.Int("num_devices", shards);
  DP_ENFORCE(n == shards && n >= 1, "num_devices ", n, " must equal the ", shards, " shards (one per device)");
  return static_cast<int>(n);
}

// GatherShards(comm, like, S_0..S_{N-1}) -> full: like's dims and dtype,
// each device's part from its shard, the other processes' through the
// communicator.
class GatherShardsOp final : public Operator {
 public:
  explicit GatherShardsOp(const OpInit& init)
      : Operator(init), devices_(ShardDevices(args(), InputSize() - 2)) {}

 private:
  void RunOnDevice() override {
    std::function<void(const void*, void*, size_t)> allgather;
    const ShardLayout l = CheckpointLayout(*input_blobs()[0], InputDesc(0), devices_, &allgather);
    const Tensor& like = Input(1);
    const int64_t n = like.numel();
    const size_t item = DTypeSize(like.dtype());
    for (int d = 0; d < devices_; ++d) {
      const Tensor& s = Input(2 + d);
      const ElementRange r = l.OfDevice(n, d);
      DP_ENFORCE_CODE(s.dtype() == like.dtype() && s.numel() == r.end - r.begin, Code::kShape, InputDesc(2 + d),
                      " is ", s.DebugString(), " but device ", d, "'s shard of ", InputDesc(1), " (",
                      like.DebugString(), ") holds ", r.end - r.begin, " elements of ", DTypeName(like.dtype()));
    }
    char* out = static_cast<char*>(Output(0, like.dims(), like.dtype())->raw_mutable_data());
    for (int d = 0; d < devices_; ++d) {
      const ElementRange r = l.OfDevice(n, d);
      const Tensor& s = Input(2 + d);
      // From a GPU: a copy done before returning (the state is not being written).
      if (r.end > r.begin)
        CopyBytes(static_cast<size_t>(r.end - r.begin) * item, s.raw_data(), s.device(), out + r.begin * item,
                  DeviceOption{});
    }
    if (allgather) {
      size_t block = 0;
      for (int64_t q = 0; q < l.processes; ++q) {
        const ElementRange r = l.OfProcess(n, q);
        block = std::max(block, static_cast<size_t>(r.end - r.begin) * item);
      }
      if (block > 0) {
        char* in = Scratch<char>(static_cast<int64_t>(block) * (l.processes + 1));
        const ElementRange mine = l.OfProcess(n, l.rank);
        std::memcpy(in, out + mine.begin * item, static_cast<size_t>(mine.end - mine.begin) * item);
        allgather(in, in + block, block);
        for (int64_t q = 0; q < l.processes; ++q) {
          const ElementRange r = l.OfProcess(n, q);
          if (q != l.rank && r.end > r.begin)
            std::memcpy(out + r.begin * item, in + block * (q + 1), static_cast<size_t>(r.end - r.begin) * item);
        }
      }
    }
  }

  const int devices_;
};

// ScatterShards(comm, full) -> S_0..S_{N-1}: device d's part of full, 1-D.
class ScatterShardsOp final : public Operator {
 public:
  explicit ScatterShardsOp(const OpInit& init) : Operator(init), devices_(ShardDevices(args(), OutputSize())) {}

 private:
  void RunOnDevice() override {
    std::function<void(const void*, void*, size_t)> unused;
    const ShardLayout l = CheckpointLayout(*input_blobs()[0], InputDesc(0), devices_, &unused);
    const Tensor full = Input(1);  // held: an output may replace the blob
    const size_t item = DTypeSize(full.dtype());
    for (int d = 0; d < devices_; ++d) {
      const ElementRange r = l.OfDevice(full.numel(), d);
      // On the host (GPU replicas' nets copy them to their devices).
      Tensor* s = Output(d, {r.end - r.begin}, full.dtype());
      const char* from = static_cast<const char*>(full.raw_data()) + r.begin * item;
      if (r.end > r.begin)
        CopyBytes(static_cast<size_t>(r.end - r.begin) * item, from, full.device(), s->raw_mutable_data(),
                  DeviceOption{});
    }
  }

  const int devices_;
};

std::vector<TensorInfo> GatherShardsInference(const OperatorDef&, const ArgReader&, const std::vector<TensorInfo>& in) {
  DP_ENFORCE_CODE(in.size() >= 3, Code::kInvalidNet, "takes the communicator, the tensor it is shaped like and a ",
                  "shard per device, got ", in.size(), " inputs");
  return {in[1]};
}

// The shards' lengths depend on the communicator's rank, which a net does
// not say: unknown.
std::vector<TensorInfo> ScatterShardsInference(const OperatorDef& op, const ArgReader& args,
                                               const std::vector<TensorInfo>&) {
  return std::vector<TensorInfo>(static_cast<size_t>(ShardDevices(args, static_cast<int>(op.outputs.size()))));
}

constexpr const char* kShardsDoc =
    "the elements of each tensor are cut into num_devices x processes contiguous parts of whole 64-element chunks "
    "(the last short or empty); device d of process p owns part p x num_devices + d";

DP_OPERATOR_SCHEMA(ReduceScatter)
    .With(InPlaceCollectiveSchema)
    .Arg("scale", ArgKind::kFloat, 1.0, "multiplies the sums")
    .Arg("shard_tensors", ArgKind::kInt, ArgDefault::Described("all"),
         "how many of each device's tensors, from the first, are reduce-scattered; the rest (scalars riding "
         "along: losses, the active flag) are summed whole into every device, as by Allreduce")
    .Arg("average_active", ArgKind::kInt, 0,
         "1: each device's last tensor is its float32 [1] active flag, reduced whole; the other sums are divided by "
         "the flags' sum (Join, as for Allreduce)")
    .Arg("key", ArgKind::kString, ArgDefault::Described("this op's own"), "names the collective (as for Allreduce)")
    .Arg("compress", ArgKind::kString, "",
         "\"bf16\" or \"fp16\": the sharded float32 tensors cross in 16 bits, as Allreduce's compress (the "
         "tensors reduced whole stay float32); \"\": none")
    .ShapeInference(AllreduceInference)
    .Doc(StrCat("Sums each device's part of tensor j over every device of every process into that device's tensor j, "
                "in place (the sums Allreduce gives those elements, in the same order; the other elements are "
                "unspecified afterwards): ",
                kShardsDoc, ". The gradients of a sharded optimizer state (ZeRO-1)."));

DP_OPERATOR_SCHEMA(Allgather)
    .With(InPlaceCollectiveSchema)
    .Arg("key", ArgKind::kString, ArgDefault::Described("this op's own"), "names the collective (as for Allreduce)")
    .ShapeInference(AllreduceInference)
    .Doc(StrCat("Copies each device's part of tensor j into every other device's tensor j, in every process, in "
                "place: ",
                kShardsDoc, ". The params after the updates of a sharded optimizer state (ZeRO-1)."));

DP_OPERATOR_SCHEMA(GatherShards)
    .NumInputs(3, std::numeric_limits<int>::max())
    .NumOutputs(1)
    .Inputs({"comm", "like"})
    .Outputs({"full"})
    .HostOp("assembles a checkpoint's whole tensor on the host (device shards are copied to it first)")
    .InputsCanCrossDevices()
    .Arg("num_devices", ArgKind::kInt, ArgDefault::Described("the shards given"), "replicas N: one shard each")
    .ShapeInference(GatherShardsInference)
    .Doc(StrCat("full (like's dims and dtype) from every device's 1-D shard of it in every process (through the "
                "communicator): ",
                kShardsDoc, ". What a checkpoint of a sharded optimizer state saves."));

DP_OPERATOR_SCHEMA(ScatterShards)
    .NumInputs(2)
    .NumOutputs(1, std::numeric_limits<int>::max())
    .Inputs({"comm", "full"})
    .HostOp("cuts a loaded checkpoint's whole tensor on the host; device readers get copies")
    .InputsCanCrossDevices()
    .Arg("num_devices", ArgKind::kInt, ArgDefault::Described("the shards made"), "replicas N: one shard each")
    .ShapeInference(ScatterShardsInference)
    .Doc(StrCat("Each device's part of full as a 1-D shard, without communication: ", kShardsDoc,
                ". A sharded optimizer state from a loaded checkpoint."));

DP_REGISTER_CPU_OPERATOR(ReduceScatter, ReduceScatterOp);
DP_REGISTER_CPU_OPERATOR(Allgather, AllgatherOp);
DP_REGISTER_CPU_OPERATOR(GatherShards, GatherShardsOp);
DP_REGISTER_CPU_OPERATOR(ScatterShards, ScatterShardsOp);
DP_NO_GRADIENT(ReduceScatter);
DP_NO_GRADIENT(Allgather);
DP_NO_GRADIENT(GatherShards);
DP_NO_GRADIENT(ScatterShards);

}  // namespace

void RegisterShardCommunicator(ShardCommunicatorFn fn) { g_other_communicator.store(fn, std::memory_order_release); }

}  // namespace dp
