// The device parity harness's CUDA half (device_parity.h): every case on
// cuda:0 against the same case on the CPU, with the case's tolerance; and
// the gradient makers of the cases that ask, checked by finite differences
// on the device in float32. Suite gpu: exits 77 without a GPU (gpu_main.cc).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "device_parity.h"
#include "ops/gradient_registry.h"

namespace dp {
namespace {

using parity::AllCases;
using parity::Case;

const DeviceOption kGpu0{DeviceType::kCUDA, 0};

double At(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[i];
    case DType::kFloat64: return t.data<double>()[i];
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kUInt8: return t.data<uint8_t>()[i];  // Dropout's masks
    default: FAIL("cannot compare ", DTypeName(t.dtype())); return 0;
  }
}

// Per element |actual - expected| <= tolerance * max(1, |expected|); equal
// infinities and NaN against NaN match (a skipped step's rate, an overflow).
void CheckClose(const std::string& what, const Tensor& actual, const Tensor& expected, double tolerance) {
  CAPTURE(what);
  REQUIRE(actual.dtype() == expected.dtype());
  REQUIRE_MESSAGE(actual.dims() == expected.dims(), DimsString(actual.dims()), " vs ", DimsString(expected.dims()));
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double a = At(actual, i), e = At(expected, i);
    if (a == e || (std::isnan(a) && std::isnan(e))) continue;
    const double err = std::abs(a - e) / std::max(1.0, std::abs(e));
    worst = std::max(worst, err);
    if (!(err <= tolerance) && bad++ < 5) MESSAGE("element ", i, ": cuda ", a, ", cpu ", e);
  }
  CHECK_MESSAGE(bad == 0, bad, " of ", actual.numel(), " elements differ (worst relative error ", worst,
                ", tolerance ", tolerance, ")");
}

TEST_CASE("GPU: every parity case on cuda:0 equals the CPU within its tolerance") {
  const auto cases = AllCases();
  REQUIRE(!cases.empty());
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const auto inputs = parity::MakeInputs(c);
    const auto cpu = parity::RunCase(c, inputs, DeviceOption{});
    const auto gpu = parity::RunCase(c, inputs, kGpu0);
    for (int k : parity::ComparedOutputs(c)) CheckClose(c.op.outputs[k], gpu[k], cpu[k], c.tolerance);
  }
}

// Finite differences on the device, float32: L = sum_k <R_k, O_k>; the
// analytic gradient from the op's gradient maker run on cuda:0, the numeric
// one from central differences with a step of 1e-2 (float32 rounding of the
// outputs, ~1e-7 relative, divided by the step, stays far below the
// tolerance), on up to 16 elements per input.
TEST_CASE("GPU: the gradient makers of the parity cases pass finite differences on cuda:0") {
  int checked = 0;
  for (const Case& c : AllCases()) {
    if (!c.grad_check) continue;
    CAPTURE(c.name);
    const auto inputs = parity::MakeInputs(c);
    const auto outs0 = parity::RunCase(c, inputs, kGpu0);

    // The loss weights and the gradient case: forward then backward ops.
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    GradientRequest req{c.op, OpLabel(c.op, 0), std::vector<std::string>(c.op.outputs.size()),
                        std::vector<std::string>(c.op.inputs.size())};
    std::vector<Tensor> weights(c.op.outputs.size());
    std::vector<int> wrt = c.grad_inputs;
    if (wrt.empty())
      for (size_t i = 0; i < c.inputs.size(); ++i)
        if (c.inputs[i].dtype == DType::kFloat32) wrt.push_back(static_cast<int>(i));
    for (size_t k = 0; k < c.op.outputs.size(); ++k) {
      if (outs0[k].dtype() != DType::kFloat32) continue;
      Tensor w(outs0[k].dims(), DType::kFloat32);
      for (int64_t j = 0; j < w.numel(); ++j) w.mutable_data<float>()[j] = dist(gen);
      weights[k] = w;
      req.output_grads[k] = c.op.outputs[k] + "@go";
    }
    for (int i : wrt) req.input_grads[i] = c.op.inputs[i] + "@gi";
    auto maker = GradientRegistry::Create(req);
    auto grads = maker->Get();

    // Analytic: run forward and gradient ops on the device.
    auto def = std::make_shared<NetDef>();
    def->name = "parity_grad_" + c.name;
    def->device = kGpu0;
    auto ws = std::make_shared<Workspace>();
    auto feed = [&](const std::string& name, const Tensor& t, bool host) {
      if (ws->HasBlob(name) || ws->HasBlob(name + "@host")) return;
      if (host) {
        ws->Feed(name, t);
        def->external_inputs.push_back(name);
        return;
      }
      ws->Feed(name + "@host", t);
      def->external_inputs.push_back(name + "@host");
      def->ops.push_back(MakeOperatorDef("Copy", {name + "@host"}, {name}));
    };
    for (size_t i = 0; i < inputs.size(); ++i) feed(c.op.inputs[i], inputs[i], c.inputs[i].host);
    for (size_t k = 0; k < weights.size(); ++k)
      if (!req.output_grads[k].empty()) feed(req.output_grads[k], weights[k], false);
    def->ops.push_back(c.op);
    for (auto& g : grads) def->ops.push_back(std::move(g));
    Net net(def, ws);
    net.Run();

    auto loss_at = [&](const std::vector<Tensor>& in) {
      const auto outs = parity::RunCase(c, in, kGpu0);
      double l = 0;
      for (size_t k = 0; k < outs.size(); ++k) {
        if (req.output_grads[k].empty()) continue;
        for (int64_t j = 0; j < outs[k].numel(); ++j)
          l += static_cast<double>(outs[k].data<float>()[j]) * weights[k].data<float>()[j];
      }
      return l;
    };
    const float eps = 1e-2f;
    for (int i : wrt) {
      CAPTURE(i);
      const Tensor ga = parity::ToHost(ws->GetTensor(req.input_grads[i]));
      REQUIRE(ga.dims() == inputs[i].dims());
      const int64_t n = inputs[i].numel();
      const int64_t step = std::max<int64_t>(1, n / 16);
      for (int64_t j = 0; j < n; j += step) {
        auto in = inputs;
        Tensor x;
        x.CopyFrom(inputs[i]);
        const float orig = x.data<float>()[j];
        x.mutable_data<float>()[j] = orig + eps;
        in[i] = x;
        const double lp = loss_at(in);
        Tensor y;
        y.CopyFrom(inputs[i]);
        y.mutable_data<float>()[j] = orig - eps;
        in[i] = y;
        const double lm = loss_at(in);
        const double numeric = (lp - lm) / (2.0 * eps);
        const double analytic = ga.data<float>()[j];
        CHECK_MESSAGE(std::abs(numeric - analytic) <= 2e-2 + 2e-2 * std::abs(numeric), c.op.type, " input ", i,
                      " element ", j, ": numeric ", numeric, ", analytic ", analytic);
      }
    }
    ++checked;
  }
  MESSAGE(checked, " cases checked");
}

}  // namespace
}  // namespace dp
