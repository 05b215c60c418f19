// Helpers of the CUDA collectives tests (test_cuda_collectives,
// test_cuda_collectives_gpu, test_cuda_multi_gpu): communicators, Allreduce /
// Broadcast ops on a GPU, replicas fed per device, the copy-and-sum tree's
// reference sums. Only generic dp headers: it compiles without CUDA too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/scope.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "op_test_util.h"

namespace dp::testing {

inline constexpr DeviceType kCuda = DeviceType::kCUDA;

inline OperatorDef CreateComm(const std::vector<int64_t>& devices, int64_t nccl) {
  return Op("CreateCudaCollectives", {}, {"comm"}, {IntsArg("device_ids", devices), IntArg("nccl", nccl)});
}

inline std::string Scoped(int device, const std::string& name) { return ReplicaScope({kCuda, device}) + name; }

inline OperatorDef OnDevice(OperatorDef op, DeviceOption device) {
  op.device = device;
  return op;
}

// Allreduce or Broadcast over `blobs`, in place, on cuda:device.
inline OperatorDef Collective(const std::string& type, const std::vector<std::string>& blobs, int num_devices,
                              int device, std::vector<Argument> args = {}) {
  std::vector<std::string> in = {"comm"};
  in.insert(in.end(), blobs.begin(), blobs.end());
  args.push_back(IntArg("num_devices", num_devices));
  return OnDevice(Op(type, in, blobs, std::move(args)), {kCuda, device});
}

// Runs `ops` once in ws; what they read before writing is an external input.
inline void RunNet(const std::shared_ptr<Workspace>& ws, std::vector<OperatorDef> ops) {
  auto def = std::make_shared<NetDef>();
  std::vector<std::string> written;
  for (const auto& op : ops) {
    for (const auto& in : op.inputs)
      if (std::find(written.begin(), written.end(), in) == written.end() &&
          std::find(def->external_inputs.begin(), def->external_inputs.end(), in) == def->external_inputs.end())
        def->external_inputs.push_back(in);
    written.insert(written.end(), op.outputs.begin(), op.outputs.end());
  }
  def->ops = std::move(ops);
  Net(def, ws).Run();
}

// A workspace holding a communicator over `devices`.
inline std::shared_ptr<Workspace> WithComm(const std::vector<int>& devices, bool nccl) {
  auto ws = std::make_shared<Workspace>();
  RunNet(ws, {CreateComm(std::vector<int64_t>(devices.begin(), devices.end()), nccl ? 1 : 0)});
  return ws;
}

template <typename T>
Tensor OnGpu(int device, Dims dims, const std::vector<T>& values) {
  Tensor gpu(dims, DTypeOf<T>(), {kCuda, device});
  if (!values.empty()) gpu.CopyFrom(Make<T>(std::move(dims), values));
  return gpu;
}

template <typename T>
std::vector<T> HostValues(const Tensor& t) {
  Tensor host;
  host.CopyFrom(t);  // synchronous: waits for the devices involved
  return Values<T>(host);
}

// Integer values in [-50, 50]: sums of a few are exact in every dtype, in any order.
template <typename T>
std::vector<T> IntValued(int64_t n, uint32_t seed) {
  std::vector<int64_t> ints = Random<int64_t>(n, seed, -50, 50);
  return std::vector<T>(ints.begin(), ints.end());
}

// The copy-and-sum tree's order: ((b0 + b1) + (b2 + b3)), then the scale.
template <typename T>
std::vector<T> TreeSum(std::vector<std::vector<T>> bufs, double scale) {
  const size_t n = bufs.size();
  for (size_t step = 1; step < n; step *= 2)
    for (size_t i = 0; i + step < n; i += 2 * step)
      for (size_t k = 0; k < bufs[i].size(); ++k) bufs[i][k] = bufs[i][k] + bufs[i + step][k];
  if (scale != 1.0)
    for (T& v : bufs[0]) v = v * static_cast<T>(scale);
  return bufs[0];
}

template <typename T>
bool BitwiseEqual(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Device lists of 2..min(4, visible) GPUs.
inline std::vector<std::vector<int>> DeviceSets() {
  std::vector<std::vector<int>> sets;
  for (int n = 2; n <= std::min(4, DeviceCount(kCuda)); ++n) {
    std::vector<int> devices(static_cast<size_t>(n));
    for (int d = 0; d < n; ++d) devices[static_cast<size_t>(d)] = d;
    sets.push_back(devices);
  }
  return sets;
}

// Feeds replica d's tensor j (values[d][j], dims[j]) as "cuda_<dev>/t<j>" on
// its GPU; returns the blob names, device-major.
template <typename T>
std::vector<std::string> FeedReplicas(Workspace& ws, const std::vector<int>& devices, const std::vector<Dims>& dims,
                                      const std::vector<std::vector<std::vector<T>>>& values) {
  std::vector<std::string> blobs;
  for (size_t d = 0; d < devices.size(); ++d)
    for (size_t j = 0; j < dims.size(); ++j) {
      std::string name = "t";  // (not "t" + to_string: GCC 12's -Wrestrict false positive)
      name += std::to_string(j);
      blobs.push_back(Scoped(devices[d], name));
      ws.Feed(blobs.back(), OnGpu<T>(devices[d], dims[j], values[d][j]));
    }
  return blobs;
}

// Runs Allreduce over N replicas of tensors shaped `dims` filled by `make`
// and checks every replica bitwise against the tree-order sum (with
// tree_reference) or else against replica 0, and then closely against the sum.
template <typename T, typename Make>
void CheckAllreduce(const std::vector<int>& devices, bool nccl, const std::vector<Dims>& dims, double scale,
                    Make make, bool tree_reference) {
  auto ws = WithComm(devices, nccl);
  const size_t n = devices.size();
  std::vector<std::vector<std::vector<T>>> values(n);  // [device][tensor]
  for (size_t d = 0; d < n; ++d)
    for (size_t j = 0; j < dims.size(); ++j)
      values[d].push_back(make(NumElements(dims[j]), static_cast<uint32_t>(100 * d + j + 1)));
  const std::vector<std::string> blobs = FeedReplicas<T>(*ws, devices, dims, values);
  std::vector<Argument> args;
  if (scale != 1.0) args.push_back(FloatArg("scale", scale));
  RunNet(ws, {Collective("Allreduce", blobs, static_cast<int>(n), devices[0], args)});
  for (size_t j = 0; j < dims.size(); ++j) {
    std::vector<std::vector<T>> replicas;
    for (size_t d = 0; d < n; ++d) replicas.push_back(values[d][j]);
    const std::vector<T> tree = TreeSum(replicas, scale);
    const std::vector<T> first = HostValues<T>(ws->GetTensor(blobs[j]));
    for (size_t d = 0; d < n; ++d) {
      CAPTURE(j);
      CAPTURE(d);
      const Tensor& t = ws->GetTensor(blobs[d * dims.size() + j]);
      CHECK(t.device() == DeviceOption{kCuda, devices[d]});  // reduced where it lives
      CHECK(t.dims() == dims[j]);
      const std::vector<T> got = HostValues<T>(t);
      CHECK(BitwiseEqual(got, tree_reference ? tree : first));
      if (!tree_reference) CheckClose(got, ToDouble(tree), std::is_same_v<T, float> ? 1e-5 : 1e-12);
    }
  }
}

inline const std::vector<Dims>& SeveralTensors() {
  // Empty, tiny, odd, and one large enough for many blocks.
  static const std::vector<Dims> dims = {{0}, {7}, {3, 1001}, {(1 << 18) + 3}};
  return dims;
}

}  // namespace dp::testing
