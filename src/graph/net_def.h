// In-memory net definition: what the loaders produce, what validation,
// transforms (gradients, parallelize) and executors consume. Independent of
// the wire format (schemas/net.fbs), to which it converts both ways.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/device.h"
#include "core/error.h"

namespace dp {

struct NetDef;

enum class ExecutorKind : int32_t { kDefault = 0, kSimple = 1, kAsync = 2 };

// What a net does with the memory of its temporaries (graph/memory_plan.h):
// keep every blob for the life of the workspace, share blocks between
// temporaries whose lives never overlap, or free each after its last use.
// kDefault is kKeep for a net as written; the training builders ask for
// kShare.
enum class MemoryMode : int32_t { kDefault = 0, kKeep = 1, kShare = 2, kFree = 3 };
const char* MemoryModeName(MemoryMode mode);  // "keep", "share", "free" ("default")

struct Argument {
  using Value = std::variant<double, int64_t, std::string, std::vector<double>, std::vector<int64_t>,
                             std::vector<std::string>, std::shared_ptr<const NetDef>,
                             std::vector<std::shared_ptr<const NetDef>>>;
  std::string name;
  Value value;
  const char* KindName() const;  // "float", "int", "string", "floats", ...
};

struct OperatorDef {
  std::string type;
  std::string name;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<Argument> args;
  std::optional<DeviceOption> device;  // unset: the net's default device
  std::string engine;
  std::vector<std::string> control_inputs;

  const Argument* FindArg(const std::string& arg_name) const;
};

struct NetDef {
  static constexpr int32_t kSchemaVersion = 1;
  std::string name;
  std::vector<OperatorDef> ops;
  std::vector<std::string> external_inputs;
  std::vector<std::string> external_outputs;
  ExecutorKind executor = ExecutorKind::kDefault;
  int32_t num_workers = 0;
  DeviceOption device;
  MemoryMode memory = MemoryMode::kDefault;

  DeviceOption OpDevice(const OperatorDef& op) const { return op.device.value_or(device); }
};

// An op of `type` reading `inputs` and writing `outputs`; what transforms
// (gradients, training, parallelize) and tests build nets from.
OperatorDef MakeOperatorDef(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                            std::vector<Argument> args = {});

// "op 3 (FC 'fc1')": how errors name an operator.
std::string OpLabel(const OperatorDef& op, size_t index);

// Typed argument access for operators and transforms. Wrong kinds fail with
// kInvalidArgument naming the argument and the op.
class ArgReader {
 public:
  // `label` starts every message ("op 3 (FC)"); empty when the caller adds it.
  ArgReader(const OperatorDef& op, std::string label)
      : op_(op), prefix_(label.empty() ? label : label + ": ") {}
  bool Has(const std::string& name) const { return op_.FindArg(name) != nullptr; }
  double Float(const std::string& name, std::optional<double> fallback = std::nullopt) const;
  int64_t Int(const std::string& name, std::optional<int64_t> fallback = std::nullopt) const;
  std::string String(const std::string& name, std::optional<std::string> fallback = std::nullopt) const;
  std::vector<double> Floats(const std::string& name, std::optional<std::vector<double>> fallback = std::nullopt) const;
  std::vector<int64_t> Ints(const std::string& name, std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  std::vector<std::string> Strings(const std::string& name,
                                   std::optional<std::vector<std::string>> fallback = std::nullopt) const;

 private:
  const Argument& Require(const std::string& name) const;
  [[noreturn]] void WrongKind(const Argument& a, const char* want) const;
  const OperatorDef& op_;
  std::string prefix_;
};

}  // namespace dp
