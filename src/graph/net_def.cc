#include "graph/net_def.h"

namespace dp {

const char* Argument::KindName() const {
  static const char* const kNames[] = {"float", "int", "string", "floats", "ints", "strings", "net", "nets"};
  return kNames[value.index()];
}

const Argument* OperatorDef::FindArg(const std::string& arg_name) const {
  for (const auto& a : args)
    if (a.name == arg_name) return &a;
  return nullptr;
}

OperatorDef MakeOperatorDef(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                            std::vector<Argument> args) {
  OperatorDef op;
  op.type = std::move(type);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.args = std::move(args);
  return op;
}

std::string OpLabel(const OperatorDef& op, size_t index) {
  std::string s = StrCat("op ", index, " (", op.type);
  if (!op.name.empty()) s += StrCat(" '", op.name, "'");
  return s + ")";
}

const Argument& ArgReader::Require(const std::string& name) const {
  const Argument* a = op_.FindArg(name);
  if (a == nullptr) DP_THROW(Code::kInvalidArgument, prefix_, "missing required argument '", name, "'");
  return *a;
}

void ArgReader::WrongKind(const Argument& a, const char* want) const {
  DP_THROW(Code::kInvalidArgument, prefix_, "argument '", a.name, "' must be ", want, ", got ",
           a.KindName());
}

double ArgReader::Float(const std::string& name, std::optional<double> fallback) const {
  if (fallback && !Has(name)) return *fallback;
  const Argument& a = Require(name);
  if (auto* d = std::get_if<double>(&a.value)) return *d;
  if (auto* i = std::get_if<int64_t>(&a.value)) return static_cast<double>(*i);
  WrongKind(a, "a float");
}

int64_t ArgReader::Int(const std::string& name, std::optional<int64_t> fallback) const {
  if (fallback && !Has(name)) return *fallback;
  const Argument& a = Require(name);
  if (auto* i = std::get_if<int64_t>(&a.value)) return *i;
  WrongKind(a, "an int");
}

std::string ArgReader::String(const std::string& name, std::optional<std::string> fallback) const {
  if (fallback && !Has(name)) return *fallback;
  const Argument& a = Require(name);
  if (auto* s = std::get_if<std::string>(&a.value)) return *s;
  WrongKind(a, "a string");
}

std::vector<double> ArgReader::Floats(const std::string& name, std::optional<std::vector<double>> fallback) const {
  if (fallback && !Has(name)) return *fallback;
  const Argument& a = Require(name);
  if (auto* v = std::get_if<std::vector<double>>(&a.value)) return *v;
  if (auto* v = std::get_if<std::vector<int64_t>>(&a.value)) return {v->begin(), v->end()};
  WrongKind(a, "a list of floats");
}

std::vector<int64_t> ArgReader::Ints(const std::string& name, std::optional<std::vector<int64_t>> fallback) const {
  if (fallback && !Has(name)) return *fallback;
  const Argument& a = Require(name);
  if (auto* v = std::get_if<std::vector<int64_t>>(&a.value)) return *v;
  WrongKind(a, "a list of ints");
}

std::vector<std::string> ArgReader::Strings(const std::string& name,
                                            std::optional<std::vector<std::string>> fallback) const {
  if (fallback && !Has(name)) return *fallback;
  const Argument& a = Require(name);
  if (auto* v = std::get_if<std::vector<std::string>>(&a.value)) return *v;
  WrongKind(a, "a list of strings");
}

const char* MemoryModeName(MemoryMode mode) {
  switch (mode) {
    case MemoryMode::kKeep: return "keep";
    case MemoryMode::kShare: return "share";
    case MemoryMode::kFree: return "free";
    default: return "default";
  }
}

}  // namespace dp
