// The device parity harness: one table of op cases, run on the CPU and on
// CUDA with the same inputs and compared (test_device_parity_gpu.cc, suite
// gpu). Its CPU half (test_device_parity.cc, every build) runs each case on
// the CPU, checks the gradient makers by finite differences where a case
// asks, and checks that every op with a CUDA kernel has a case, so that no
// CUDA kernel goes untested once a GPU runs the table.
//
// Cases live in parity_cases_<family>.cc, one file per family of ops (as
// ops/cpu and ops/cuda group them), each registering its list with
// DP_PARITY_CASES. A case names its tolerance: the tightest that holds,
// written down with the reason when it is looser than float rounding.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "graph/net_def.h"
#include "ops/gradient_registry.h"  // MakeArg, for the case files

namespace dp::parity {

// How an input's values are made (seeded from the case's name).
enum class Init {
  kUniform,   // uniform in [lo, hi)
  kLabels,    // int32 class labels in [0, hi)
  kIota,      // 0, 1, 2, ... (int64 counters, shapes)
  kConstant,  // every element lo
};

struct InputSpec {
  Dims dims;
  DType dtype = DType::kFloat32;
  Init init = Init::kUniform;
  double lo = -1.0;
  double hi = 1.0;
  // Read by the op on the host (a learning rate, an iteration counter, a
  // shape): fed on the CPU on every device instead of copied to the device.
  bool host = false;
};

struct Case {
  std::string name;               // "FC/relu": type, then what the case varies
  OperatorDef op;                 // without a device; op.inputs name the fed blobs
  std::vector<InputSpec> inputs;  // one per op input, in order
  // CUDA against CPU: |cuda - cpu| <= tolerance * max(1, |cpu|) per element.
  double tolerance = 1e-5;
  std::vector<int> outputs;       // outputs compared; empty: all
  // Finite-difference check of the op's gradient maker (CPU in float64, CUDA
  // in float32); grad_inputs empty: every float input.
  bool grad_check = false;
  std::vector<int> grad_inputs;
};

using CaseList = std::vector<Case>;

inline std::vector<CaseList (*)()>& Makers() {
  static std::vector<CaseList (*)()> makers;
  return makers;
}

struct CaseRegistration {
  explicit CaseRegistration(CaseList (*make)()) { Makers().push_back(make); }
};

// Every registered case, in registration order.
inline CaseList AllCases() {
  CaseList all;
  for (auto make : Makers())
    for (auto& c : make()) all.push_back(std::move(c));
  return all;
}

// The case with its op's gradient maker checked by finite differences (over
// `inputs`, or every float input when empty).
inline Case WithGradCheck(Case c, std::vector<int> inputs = {}) {
  c.grad_check = true;
  c.grad_inputs = std::move(inputs);
  return c;
}

// Every element `value`.
inline InputSpec Constant(Dims dims, double value, DType dtype = DType::kFloat32) {
  return {std::move(dims), dtype, Init::kConstant, value, value};
}

// A case of one op: MakeCase("FC/relu", MakeOperatorDef("FC", {...}, {...}, {...}), {{...}, ...}).
inline Case MakeCase(std::string name, OperatorDef op, std::vector<InputSpec> inputs, double tolerance = 1e-5) {
  Case c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.tolerance = tolerance;
  return c;
}

// The case's inputs as CPU tensors; float32 inputs as `float_type` (float32,
// or float64 for the CPU gradient check).
inline std::vector<Tensor> MakeInputs(const Case& c, DType float_type = DType::kFloat32) {
  REQUIRE_MESSAGE(c.inputs.size() == c.op.inputs.size(), c.name, ": ", c.inputs.size(), " input specs for ",
                  c.op.inputs.size(), " inputs");
  std::mt19937_64 gen(std::hash<std::string>{}(c.name));
  std::vector<Tensor> out;
  for (const InputSpec& s : c.inputs) {
    // float32 inputs follow float_type; float64 ones are float64 on every
    // device (statistics an op takes in float64, as SyncSpatialBN's).
    Tensor t(s.dims, s.dtype == DType::kFloat32 ? float_type : s.dtype);
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) {
      double v = 0;
      switch (s.init) {
        case Init::kUniform: v = std::uniform_real_distribution<double>(s.lo, s.hi)(gen); break;
        case Init::kLabels: v = static_cast<double>(gen() % static_cast<uint64_t>(std::max(1.0, s.hi))); break;
        case Init::kIota: v = static_cast<double>(i); break;
        case Init::kConstant: v = s.lo; break;
      }
      switch (t.dtype()) {
        case DType::kFloat32: t.mutable_data<float>()[i] = static_cast<float>(v); break;
        case DType::kFloat64: t.mutable_data<double>()[i] = v; break;
        case DType::kInt32: t.mutable_data<int32_t>()[i] = static_cast<int32_t>(v); break;
        case DType::kInt64: t.mutable_data<int64_t>()[i] = static_cast<int64_t>(v); break;
        case DType::kUInt8: t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(v); break;  // masks
        default:
          FAIL("parity inputs are float32/64, int32, int64 or uint8; ", c.name, " asks for ", DTypeName(t.dtype()));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

inline Tensor ToHost(const Tensor& t) {
  Tensor host;  // default device: cpu:0
  host.CopyFrom(t);
  return host;
}

// Runs the case's op once on `device` with `inputs` (from MakeInputs): host
// inputs are fed on the CPU, the others fed as "<name>@host" and copied to
// the device by Copy ops. Returns every output, copied to the CPU.
inline std::vector<Tensor> RunCase(const Case& c, const std::vector<Tensor>& inputs, DeviceOption device) {
  auto def = std::make_shared<NetDef>();
  def->name = "parity_" + c.name;
  def->device = device;
  auto ws = std::make_shared<Workspace>();
  const bool on_host = device.type == DeviceType::kCPU;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = c.op.inputs[i];
    if (ws->HasBlob(name)) continue;  // one blob fed twice (X as both inputs)
    if (on_host || c.inputs[i].host) {
      ws->Feed(name, inputs[i]);
      def->external_inputs.push_back(name);
      continue;
    }
    ws->Feed(name + "@host", inputs[i]);
    def->external_inputs.push_back(name + "@host");
    OperatorDef copy = MakeOperatorDef("Copy", {name + "@host"}, {name});
    def->ops.push_back(std::move(copy));
  }
  def->ops.push_back(c.op);
  Net net(def, ws);
  net.Run();  // finishes the device work
  std::vector<Tensor> outs;
  for (const auto& name : c.op.outputs) outs.push_back(ToHost(ws->GetTensor(name)));
  return outs;
}

// The indices of the outputs a case compares.
inline std::vector<int> ComparedOutputs(const Case& c) {
  if (!c.outputs.empty()) return c.outputs;
  std::vector<int> all;
  for (size_t k = 0; k < c.op.outputs.size(); ++k) all.push_back(static_cast<int>(k));
  return all;
}

}  // namespace dp::parity

#define DP_PARITY_CONCAT_(a, b) a##b
#define DP_PARITY_CONCAT(a, b) DP_PARITY_CONCAT_(a, b)
// DP_PARITY_CASES(FcCases) { return {MakeCase(...), ...}; }
#define DP_PARITY_CASES(fn)                                                                          \
  static ::dp::parity::CaseList fn();                                                                \
  [[maybe_unused]] static ::dp::parity::CaseRegistration DP_PARITY_CONCAT(dp_parity_reg_, __LINE__)(&fn); \
  static ::dp::parity::CaseList fn()
