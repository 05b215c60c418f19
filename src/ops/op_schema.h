// OpSchema: what an operator type accepts, independent of device. Nets are
// validated against schemas when loaded (arity, in-place rules, argument names
// and kinds, required arguments) and shapes can be inferred through them
// before anything runs.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/closest_name.h"  // ClosestName: the "did you mean" of schema errors
#include "core/dtype.h"
#include "core/tensor.h"
#include "graph/net_def.h"

namespace dp {

// The kind of value an argument holds. Compatibility follows ArgReader, which
// the kernels read through: a float argument also takes an int, floats take
// ints; every other kind takes only itself.
enum class ArgKind { kFloat, kInt, kString, kFloats, kInts, kStrings, kNet, kNets };

// "a float", "a list of ints", ...: ArgReader's words, for messages.
const char* ArgKindName(ArgKind kind);
// Whether an argument holding `value` may be declared as `kind`.
bool ArgKindAccepts(ArgKind kind, const Argument::Value& value);

// What an optional argument means when an op leaves it out: the value its
// kernel then uses (of the argument's kind), or, where no single value says
// it (a seed hashed from the output's name, another argument's value), a
// description. Every optional argument declares one: docs/OPS.md and
// dp_opschema_arg_default show it. Implicit from values, so that a schema
// reads .Arg("axis", ArgKind::kInt, 1, "...").
class ArgDefault {
 public:
  ArgDefault(double v) : value_(v) {}
  ArgDefault(int v) : value_(int64_t{v}) {}
  ArgDefault(int64_t v) : value_(v) {}
  ArgDefault(const char* v) : value_(std::string(v)) {}  // a string value; descriptions use Described
  ArgDefault(std::vector<int64_t> v) : value_(std::move(v)) {}
  ArgDefault(std::vector<std::string> v) : value_(std::move(v)) {}
  static ArgDefault Described(std::string text) {
    ArgDefault d;
    d.text_ = std::move(text);
    return d;
  }
  const std::optional<Argument::Value>& value() const { return value_; }
  const std::string& text() const { return text_; }

 private:
  ArgDefault() = default;
  std::optional<Argument::Value> value_;
  std::string text_;
};

// A value as JSON text: 0.9, 1, "fixed", [1, 2], ["a"] (doubles in their
// shortest round-trip form); nets as "<net>".
std::string ArgValueJson(const Argument::Value& value);

// What shape inference knows about a blob.
struct TensorInfo {
  Dims dims;
  DType dtype = DType::kUndefined;
  bool known() const { return dtype != DType::kUndefined; }
};

class OpSchema {
 public:
  // (op, label, input infos) -> output infos. Throws kShape/kDType on misuse.
  using InferenceFn = std::function<std::vector<TensorInfo>(const OperatorDef& op, const ArgReader& args,
                                                            const std::vector<TensorInfo>& inputs)>;
  explicit OpSchema(std::string type) : type_(std::move(type)) {}

  OpSchema& NumInputs(int n) { return NumInputs(n, n); }
  OpSchema& NumInputs(int min, int max);
  OpSchema& NumOutputs(int n) { return NumOutputs(n, n); }
  OpSchema& NumOutputs(int min, int max);
  // (input, output) pairs that may name the same blob.
  OpSchema& AllowInplace(std::vector<std::pair<int, int>> pairs);
  // (input, output) pairs that must name the same blob.
  OpSchema& EnforceInplace(std::vector<std::pair<int, int>> pairs);
  // Every output o must name the same blob as input o + shift, however many
  // there are (collectives: the tensors after the communicator, in place).
  OpSchema& EnforceInplaceAll(int shift);
  // Every argument an op of this type may carry; any other is rejected. An
  // optional one says what its absence means (ArgDefault); a required one
  // must be given by every op.
  OpSchema& Arg(std::string name, ArgKind kind, ArgDefault absent, std::string doc);
  OpSchema& RequiredArg(std::string name, ArgKind kind, std::string doc);
  OpSchema& Inputs(std::vector<std::string> names) { input_names_ = std::move(names); return *this; }
  OpSchema& Outputs(std::vector<std::string> names) { output_names_ = std::move(names); return *this; }
  OpSchema& Doc(std::string doc) { doc_ = std::move(doc); return *this; }
  // Applies what several schemas share (a family's inputs and arguments).
  OpSchema& With(OpSchema& (*common)(OpSchema&)) { return common(*this); }
  OpSchema& ShapeInference(InferenceFn fn) { inference_ = std::move(fn); return *this; }
  // Inputs may live on another device than the op (copies between devices).
  // Otherwise Operator::Input rejects a tensor that the kernel cannot address.
  OpSchema& InputsCanCrossDevices() { inputs_can_cross_devices_ = true; return *this; }
  bool inputs_can_cross_devices() const { return inputs_can_cross_devices_; }
  // A host op: it only makes sense on the CPU (a counter, a file, a print),
  // so it has no CUDA kernel and runs on the host in any net; its small
  // outputs are copied to where device ops consume them. `reason` says why
  // (the op catalogue and the CUDA coverage test show it).
  OpSchema& HostOp(std::string reason) { host_op_reason_ = std::move(reason); return *this; }
  bool host_op() const { return !host_op_reason_.empty(); }
  const std::string& host_op_reason() const { return host_op_reason_; }
  // A host op by default that has a CUDA kernel too: where it inherits a
  // GPU from its net's device it runs on the host as above; an op placed on
  // a GPU by its own definition (OperatorDef::device) runs there. (The
  // iteration counter and the learning rate: on the host, unless a training
  // net for one GPU keeps them there, inside its CUDA graph.)
  OpSchema& HostOpUnlessPlaced(std::string reason) {
    host_unless_placed_ = true;
    return HostOp(std::move(reason));
  }
  bool host_unless_placed() const { return host_unless_placed_; }
  // A collective over replicas: its tensors live on several devices, and the
  // kernel checks each against its replica's device itself (Input() would
  // refuse them). Host placement copies nothing for it.
  OpSchema& InputsOnReplicaDevices() { inputs_on_replica_devices_ = true; return *this; }
  bool inputs_on_replica_devices() const { return inputs_on_replica_devices_; }
  // Inputs the kernel reads on the host on every device (a shape given as a
  // tensor): they must be CPU tensors, Operator::Input accepts them for a
  // CUDA op, and host placement leaves them on the host.
  OpSchema& HostInputs(std::vector<int> inputs) { host_inputs_ = std::move(inputs); return *this; }
  bool host_input(int i) const { return std::find(host_inputs_.begin(), host_inputs_.end(), i) != host_inputs_.end(); }
  // Every output has input 0's shape and dtype.
  OpSchema& IdenticalTypeAndShape();

  const std::string& type() const { return type_; }
  const std::string& doc() const { return doc_; }
  int min_inputs() const { return min_in_; }
  int max_inputs() const { return max_in_; }
  int min_outputs() const { return min_out_; }
  int max_outputs() const { return max_out_; }
  std::string InputName(size_t i) const;   // "X" or "input 3"
  std::string OutputName(size_t i) const;
  const std::vector<std::string>& input_names() const { return input_names_; }   // the named ones
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::vector<std::pair<int, int>>& allow_inplace() const { return allow_inplace_; }
  const std::vector<std::pair<int, int>>& enforce_inplace() const { return enforce_inplace_; }
  int enforce_inplace_shift() const { return enforce_inplace_shift_; }  // -1: none

  struct ArgSpec {
    std::string name;
    ArgKind kind;
    std::string doc;
    bool required;
    // The default of an optional argument: its value, named like the
    // argument (nullopt when required or only described), and as text (the
    // value's JSON or the description; "" when required).
    std::optional<Argument> default_value;
    std::string default_text;
  };
  const std::vector<ArgSpec>& args() const { return args_; }
  const ArgSpec* FindArg(const std::string& name) const;

  // Throws naming `label` on any violation: kInvalidArgument for arguments
  // (see VerifyArgs), kInvalidNet for the rest.
  void Verify(const OperatorDef& op, const std::string& label) const;
  // Each argument declared, of a compatible kind and given once; kInvalidArgument
  // naming the op and the argument (with a "did you mean" for near misses).
  void VerifyArgs(const OperatorDef& op, const std::string& label) const;
  // Output infos; unknown outputs when there is no inference function or an input is unknown.
  std::vector<TensorInfo> InferShapes(const OperatorDef& op, const std::string& label,
                                      const std::vector<TensorInfo>& inputs) const;

 private:
  // "did you mean 'x'? T takes: a, b" for an undeclared name.
  std::string UnknownArgHint(const std::string& name) const;

  std::string type_, doc_;
  int min_in_ = 0, max_in_ = 0, min_out_ = 0, max_out_ = 0;
  std::vector<std::pair<int, int>> allow_inplace_, enforce_inplace_;
  int enforce_inplace_shift_ = -1;  // EnforceInplaceAll; -1: none
  std::vector<ArgSpec> args_;
  std::vector<std::string> input_names_, output_names_;
  InferenceFn inference_;
  bool inputs_can_cross_devices_ = false;
  std::string host_op_reason_;
  bool host_unless_placed_ = false;
  std::vector<int> host_inputs_;
  bool inputs_on_replica_devices_ = false;
};

class OpSchemaRegistry {
 public:
  static OpSchema& New(const std::string& type);   // registration time only
  static const OpSchema* Find(const std::string& type);
  static std::vector<std::string> Types();  // sorted
  // "unknown operator type 'Relux' (did you mean 'Relu'?)": what a lookup of
  // an unregistered type reports.
  static std::string UnknownTypeMessage(const std::string& type);
};

}  // namespace dp

#define DP_SCHEMA_CONCAT_(a, b) a##b
#define DP_SCHEMA_CONCAT(a, b) DP_SCHEMA_CONCAT_(a, b)
// DP_OPERATOR_SCHEMA(Relu).NumInputs(1).NumOutputs(1)...;
#define DP_OPERATOR_SCHEMA(type) \
  [[maybe_unused]] static ::dp::OpSchema& DP_SCHEMA_CONCAT(dp_schema_, __COUNTER__) = ::dp::OpSchemaRegistry::New(#type)
