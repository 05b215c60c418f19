// OpSchema: what an operator type accepts, independent of device. Nets are
// validated against schemas when loaded (arity, in-place rules, argument names
// and kinds, required arguments) and shapes can be inferred through them
// before anything runs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

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

// The name of `candidates` closest to `given` if it is a near miss (for "did
// you mean"): at most 2 edits (insertions, deletions, substitutions, swaps of
// neighbours), and at most one for names under 6 characters (short names are
// all close to each other). Ties go to the first. nullptr when none is close.
const std::string* ClosestName(const std::string& given, const std::vector<std::string>& candidates);

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
  // Every argument an op of this type may carry; any other is rejected.
  OpSchema& Arg(std::string name, ArgKind kind, std::string doc, bool required = false);
  OpSchema& Inputs(std::vector<std::string> names) { input_names_ = std::move(names); return *this; }
  OpSchema& Outputs(std::vector<std::string> names) { output_names_ = std::move(names); return *this; }
  OpSchema& Doc(std::string doc) { doc_ = std::move(doc); return *this; }
  OpSchema& ShapeInference(InferenceFn fn) { inference_ = std::move(fn); return *this; }
  // Inputs may live on another device than the op (copies between devices).
  // Otherwise Operator::Input rejects a tensor that the kernel cannot address.
  OpSchema& InputsCanCrossDevices() { inputs_can_cross_devices_ = true; return *this; }
  bool inputs_can_cross_devices() const { return inputs_can_cross_devices_; }
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

  struct ArgSpec {
    std::string name;
    ArgKind kind;
    std::string doc;
    bool required;
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
};

class OpSchemaRegistry {
 public:
  static OpSchema& New(const std::string& type);   // registration time only
  static const OpSchema* Find(const std::string& type);
  static std::vector<std::string> Types();
};

}  // namespace dp

#define DP_SCHEMA_CONCAT_(a, b) a##b
#define DP_SCHEMA_CONCAT(a, b) DP_SCHEMA_CONCAT_(a, b)
// DP_OPERATOR_SCHEMA(Relu).NumInputs(1).NumOutputs(1)...;
#define DP_OPERATOR_SCHEMA(type) \
  [[maybe_unused]] static ::dp::OpSchema& DP_SCHEMA_CONCAT(dp_schema_, __COUNTER__) = ::dp::OpSchemaRegistry::New(#type)
