// Helpers shared by the operator tests: building ops, nets and tensors,
// running a net once (cross-checking static shape inference against what the
// kernels wrote), expecting errors, and comparing against references.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "core/workspace.h"
#include "exec/net.h"
#include "expect_error.h"
#include "graph/net_def.h"
#include "ops/net_validate.h"

namespace dp::testing {

// ---- building ops, nets and tensors --------------------------------------------

inline Argument IntArg(std::string name, int64_t v) { return Argument{std::move(name), Argument::Value{v}}; }
inline Argument FloatArg(std::string name, double v) { return Argument{std::move(name), Argument::Value{v}}; }
inline Argument StringArg(std::string name, std::string v) {
  return Argument{std::move(name), Argument::Value{std::move(v)}};
}
inline Argument IntsArg(std::string name, std::vector<int64_t> v) {
  return Argument{std::move(name), Argument::Value{std::move(v)}};
}
inline Argument FloatsArg(std::string name, std::vector<double> v) {
  return Argument{std::move(name), Argument::Value{std::move(v)}};
}

inline OperatorDef Op(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                      std::vector<Argument> args = {}) {
  return MakeOperatorDef(std::move(type), std::move(inputs), std::move(outputs), std::move(args));
}

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// A net of `ops` whose external inputs are the fed blobs.
inline NetDef MakeNet(std::vector<OperatorDef> ops, const Feeds& feeds) {
  NetDef net;
  net.ops = std::move(ops);
  for (const auto& f : feeds) net.external_inputs.push_back(f.first);
  return net;
}

template <typename T>
Tensor Make(Dims dims, const std::vector<T>& values) {
  Tensor t(std::move(dims), DTypeOf<T>());
  REQUIRE(static_cast<size_t>(t.numel()) == values.size());
  if (!values.empty()) std::copy(values.begin(), values.end(), t.mutable_data<T>());
  return t;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  REQUIRE(t.dtype() == DTypeOf<T>());
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

// n values uniform in [lo, hi] (integers: inclusive), reproducible per seed.
template <typename T>
std::vector<T> Random(int64_t n, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 gen(seed);
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (auto& x : v) x = static_cast<T>(dist(gen));
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (auto& x : v) x = static_cast<T>(dist(gen));
  }
  return v;
}

// A float64 tensor of values uniform in [lo, hi].
inline Tensor RandomF64(Dims dims, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  const int64_t n = NumElements(dims);
  return Make<double>(std::move(dims), Random<double>(n, seed, lo, hi));
}

// Class labels as an int32 vector tensor.
inline Tensor Labels(const std::vector<int32_t>& v) { return Make<int32_t>({static_cast<int64_t>(v.size())}, v); }

template <typename T>
std::vector<double> ToDouble(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline int64_t Prod(const Dims& d, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= d[i];
  return p;
}
inline int64_t Prod(const Dims& d) { return Prod(d, 0, d.size()); }

// A float32 tensor over caller memory that dp must never write.
inline Tensor Borrowed(Dims dims, std::vector<float>& buf) {
  return Tensor::FromStorage(std::move(dims), DType::kFloat32,
                             Storage::Borrow(DeviceOption{}, buf.data(), buf.size() * sizeof(float)));
}

// ---- running --------------------------------------------------------------------

// kAll: shape inference must know every output; kPartial: outputs it leaves
// unknown (data-dependent shapes) are skipped.
enum class Infer { kAll, kPartial };

// Checks InferNetShapes on `def` against the tensors a run left in `ws`:
// every output whose shape inference knows must match exactly.
inline void CheckInference(const NetDef& def, const Feeds& feeds, const Workspace& ws, Infer infer = Infer::kAll) {
  std::map<std::string, TensorInfo> known;
  for (const auto& [name, t] : feeds) known[name] = TensorInfo{t.dims(), t.dtype()};
  auto inferred = InferNetShapes(def, known);
  for (const auto& op : def.ops) {
    for (const auto& out : op.outputs) {
      CAPTURE(op.type);
      CAPTURE(out);
      REQUIRE(inferred.count(out) == 1);
      const TensorInfo& info = inferred.at(out);
      if (!info.known()) {
        CHECK_MESSAGE(infer == Infer::kPartial, "shape inference left output '", out, "' of ", op.type, " unknown");
        continue;
      }
      const Tensor& t = ws.GetTensor(out);
      CHECK_MESSAGE(info.dims == t.dims(), op.type, " output '", out, "': inferred ", DimsString(info.dims),
                    ", kernel wrote ", DimsString(t.dims()));
      CHECK_MESSAGE(info.dtype == t.dtype(), op.type, " output '", out, "': inferred ", DTypeName(info.dtype),
                    ", kernel wrote ", DTypeName(t.dtype()));
    }
  }
}

// Feeds a deep copy of dp-allocated tensors, so that the blob is the sole
// owner of its storage as in a training loop and in-place ops may reuse it
// (or free it); caller memory (Storage::Borrow) is fed as it is.
inline void FeedOwned(Workspace& ws, const std::string& name, const Tensor& t) {
  if (!t.defined() || !t.storage() || !t.storage()->library_owned()) {
    ws.Feed(name, t);
    return;
  }
  Tensor copy;
  copy.CopyFrom(t);
  ws.Feed(name, copy);
}

// Runs the ops once in a fresh workspace fed with `feeds`; cross-checks shape inference.
inline std::shared_ptr<Workspace> RunOps(std::vector<OperatorDef> ops, const Feeds& feeds,
                                         Infer infer = Infer::kAll) {
  auto def = std::make_shared<const NetDef>(MakeNet(std::move(ops), feeds));
  auto ws = std::make_shared<Workspace>();
  for (const auto& [name, t] : feeds) FeedOwned(*ws, name, t);
  Net net(def, ws);
  net.Run();
  CheckInference(*def, feeds, *ws, infer);
  return ws;
}

inline std::shared_ptr<Workspace> RunOp(OperatorDef op, const Feeds& feeds, Infer infer = Infer::kAll) {
  return RunOps({std::move(op)}, feeds, infer);
}

// ---- errors (ExpectError itself is in expect_error.h) -------------------------

// The net must build; its first run must fail with `code` naming the needles.
inline void ExpectRunError(std::vector<OperatorDef> ops, const Feeds& feeds, Code code,
                           std::initializer_list<std::string> needles, std::vector<std::string> extra_inputs = {}) {
  NetDef d = MakeNet(std::move(ops), feeds);
  for (auto& e : extra_inputs) d.external_inputs.push_back(std::move(e));
  auto def = std::make_shared<const NetDef>(std::move(d));
  auto ws = std::make_shared<Workspace>();
  for (const auto& [name, t] : feeds) ws->Feed(name, t);
  Net net(def, ws);  // errors here are test failures: these are run-time errors
  ExpectError([&] { net.Run(); }, code, needles);
}

// Creating the net must fail (validation or operator construction).
inline void ExpectBuildError(std::vector<OperatorDef> ops, const Feeds& feeds, Code code,
                             std::initializer_list<std::string> needles) {
  auto def = std::make_shared<const NetDef>(MakeNet(std::move(ops), feeds));
  auto ws = std::make_shared<Workspace>();
  for (const auto& [name, t] : feeds) ws->Feed(name, t);
  ExpectError([&] { Net net(def, ws); }, code, needles);
}

// Shape inference over the same feeds must fail likewise.
inline void ExpectInferError(std::vector<OperatorDef> ops, const Feeds& feeds, Code code,
                             std::initializer_list<std::string> needles) {
  NetDef def = MakeNet(std::move(ops), feeds);
  std::map<std::string, TensorInfo> known;
  for (const auto& [name, t] : feeds) known[name] = TensorInfo{t.dims(), t.dtype()};
  ExpectError([&] { InferNetShapes(def, known); }, code, needles);
}

// Both: the run must fail (as ExpectRunError), and shape inference likewise.
inline void ExpectRunAndInferError(const std::vector<OperatorDef>& ops, const Feeds& feeds, Code code,
                                   std::initializer_list<std::string> needles) {
  {
    INFO("running");
    ExpectRunError(ops, feeds, code, needles);
  }
  INFO("shape inference");
  ExpectInferError(ops, feeds, code, needles);
}

// ---- comparing ------------------------------------------------------------------

// Relative tolerance against a double reference: float32 rounding vs float64.
template <typename T>
constexpr double Tol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

// |got - want| <= tol * (scale + |want|) everywhere; reports the first mismatch.
template <typename T>
void CheckClose(const std::vector<T>& got, const std::vector<double>& want, double tol, double scale = 1.0) {
  REQUIRE(got.size() == want.size());
  size_t bad = got.size();
  for (size_t i = 0; i < got.size() && bad == got.size(); ++i)
    if (!(std::abs(static_cast<double>(got[i]) - want[i]) <= tol * (scale + std::abs(want[i])))) bad = i;
  if (bad == got.size()) {
    CHECK(true);
  } else {
    CHECK_MESSAGE(false, "element ", bad, " of ", got.size(), ": got ", static_cast<double>(got[bad]), ", want ",
                  want[bad]);
  }
}

}  // namespace dp::testing
