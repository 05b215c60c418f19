// Gradient makers: each differentiable operator type says how the operators
// computing its gradient are built (Caffe2's GradientMakerBase is the model).
// Ops that have no gradient say so explicitly (NoGradient); ops that stop
// gradients on purpose (StopGradient) too. The AddGradients transform
// (add_gradients.h) asks the maker of every forward op on a path from the
// parameters to the losses, in reverse order.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/net_def.h"

namespace dp {

// What the transform hands a maker for one forward op.
struct GradientRequest {
  const OperatorDef& def;
  std::string label;                      // "op 3 (FC 'fc1')" for messages
  std::vector<std::string> output_grads;  // per output: its gradient blob, "" if none flows
  std::vector<std::string> input_grads;   // per input: the blob its gradient must be written to, "" if not wanted
};

// A forward blob a gradient op reads: the transform checks that no later
// forward op overwrote it (in place) before the gradient runs.
struct ForwardRead {
  bool is_output;
  int index;
};

class GradientMaker {
 public:
  explicit GradientMaker(const GradientRequest& req) : req_(req) {}
  virtual ~GradientMaker() = default;
  GradientMaker(const GradientMaker&) = delete;
  GradientMaker& operator=(const GradientMaker&) = delete;

  // The gradient ops, in order. Each wanted input gradient that the maker
  // produces is written through GI(i); the transform checks that every wanted
  // one was.
  virtual std::vector<OperatorDef> Get() = 0;

  const std::vector<bool>& produced() const { return produced_; }
  const std::vector<ForwardRead>& reads() const { return reads_; }

 protected:
  const OperatorDef& def() const { return req_.def; }
  const std::string& label() const { return req_.label; }
  int NumInputs() const { return static_cast<int>(req_.def.inputs.size()); }
  int NumOutputs() const { return static_cast<int>(req_.def.outputs.size()); }
  // The forward op's input / output blob, recorded as read by the gradient.
  const std::string& I(int i);
  const std::string& O(int i);
  // The gradient of output i; throws if none flows there (check HasGO first
  // when an output may carry no gradient).
  const std::string& GO(int i) const;
  bool HasGO(int i) const;
  // Whether the transform wants input i's gradient, and the blob to write it to.
  bool NeedsGI(int i) const;
  const std::string& GI(int i);
  // The forward op's arguments (gradient ops usually take the same ones).
  const std::vector<Argument>& Args() const { return req_.def.args; }
  ArgReader Reader() const { return ArgReader(req_.def, req_.label); }

  static OperatorDef MakeOp(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                            std::vector<Argument> args = {});

 private:
  const GradientRequest& req_;
  std::vector<bool> produced_ = std::vector<bool>(req_.def.inputs.size(), false);
  std::vector<ForwardRead> reads_;
};

enum class GradientKind {
  kUnknown,       // nothing registered for this type
  kMaker,         // differentiable
  kNone,          // not differentiable: a gradient through it is an error
  kStop,          // stops gradients on purpose (StopGradient)
};

using GradientMakerFactory = std::function<std::unique_ptr<GradientMaker>(const GradientRequest&)>;

class GradientRegistry {
 public:
  static void Register(const std::string& type, GradientMakerFactory factory);
  static void RegisterNone(const std::string& type);
  static void RegisterStop(const std::string& type);
  static GradientKind Kind(const std::string& type);
  // kInvalidNet naming the op when the type has no maker.
  static std::unique_ptr<GradientMaker> Create(const GradientRequest& req);
  static std::vector<std::string> TypesWithMakers();
};

template <typename Maker>
struct GradientRegistration {
  explicit GradientRegistration(const char* type) {
    GradientRegistry::Register(type, [](const GradientRequest& r) { return std::make_unique<Maker>(r); });
  }
};
struct NoGradientRegistration {
  explicit NoGradientRegistration(const char* type) { GradientRegistry::RegisterNone(type); }
};
struct StopGradientRegistration {
  explicit StopGradientRegistration(const char* type) { GradientRegistry::RegisterStop(type); }
};

// Argument shorthands for makers and transforms.
inline Argument MakeArg(std::string name, double v) { return {std::move(name), Argument::Value{v}}; }
inline Argument MakeArg(std::string name, int64_t v) { return {std::move(name), Argument::Value{v}}; }
inline Argument MakeArg(std::string name, int v) { return {std::move(name), Argument::Value{int64_t{v}}}; }
inline Argument MakeArg(std::string name, std::string v) { return {std::move(name), Argument::Value{std::move(v)}}; }
inline Argument MakeArg(std::string name, std::vector<int64_t> v) {
  return {std::move(name), Argument::Value{std::move(v)}};
}

}  // namespace dp

#define DP_REGISTER_GRADIENT(type, Maker)                                                                  \
  [[maybe_unused]] static ::dp::GradientRegistration<Maker> DP_GRAD_CONCAT(dp_grad_reg_, __COUNTER__)( \
      #type)
#define DP_NO_GRADIENT(type) \
  [[maybe_unused]] static ::dp::NoGradientRegistration DP_GRAD_CONCAT(dp_grad_reg_, __COUNTER__)(#type)
#define DP_STOP_GRADIENT(type) \
  [[maybe_unused]] static ::dp::StopGradientRegistration DP_GRAD_CONCAT(dp_grad_reg_, __COUNTER__)(#type)
#define DP_GRAD_CONCAT_(a, b) a##b
#define DP_GRAD_CONCAT(a, b) DP_GRAD_CONCAT_(a, b)

// A maker whose Get() is one expression over the helpers:
//   DP_SIMPLE_GRADIENT(Relu, { return {MakeOp("ReluGradient", {O(0), GO(0)}, {GI(0)})}; });
#define DP_SIMPLE_GRADIENT(type, ...)                                \
  namespace {                                                        \
  struct type##GradientMaker final : ::dp::GradientMaker {           \
    using GradientMaker::GradientMaker;                              \
    std::vector<::dp::OperatorDef> Get() override __VA_ARGS__        \
  };                                                                 \
  }                                                                  \
  DP_REGISTER_GRADIENT(type, type##GradientMaker)
