#include "ops/op_schema.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <variant>

namespace dp {
namespace {

std::map<std::string, std::unique_ptr<OpSchema>>& Schemas() {
  static auto* m = new std::map<std::string, std::unique_ptr<OpSchema>>;
  return *m;
}

std::string Range(int min, int max) {
  if (min == max) return std::to_string(min);
  if (max == std::numeric_limits<int>::max()) return StrCat(min, " or more");
  return StrCat(min, " to ", max);
}

// Edits (insertions, deletions, substitutions, swaps of neighbours) turning a
// into b: optimal string alignment, so "scael" is one edit from "scale".
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

const std::string* ClosestName(const std::string& given, const std::vector<std::string>& declared) {
  const size_t limit = std::min<size_t>(2, std::max<size_t>(1, given.size() / 3));
  const std::string* best = nullptr;
  size_t best_distance = limit + 1;
  for (const auto& name : declared) {
    // The distance is at least the length difference; checking that first
    // also keeps a huge name from costing a huge table.
    const size_t diff = given.size() > name.size() ? given.size() - name.size() : name.size() - given.size();
    if (diff >= best_distance) continue;
    const size_t d = EditDistance(given, name);
    if (d < best_distance) {
      best = &name;
      best_distance = d;
    }
  }
  return best;
}

const char* ArgKindName(ArgKind kind) {
  switch (kind) {
    case ArgKind::kFloat: return "a float";
    case ArgKind::kInt: return "an int";
    case ArgKind::kString: return "a string";
    case ArgKind::kFloats: return "a list of floats";
    case ArgKind::kInts: return "a list of ints";
    case ArgKind::kStrings: return "a list of strings";
    case ArgKind::kNet: return "a net";
    case ArgKind::kNets: return "a list of nets";
  }
  return "an unknown kind";
}

bool ArgKindAccepts(ArgKind kind, const Argument::Value& value) {
  switch (kind) {
    case ArgKind::kFloat:
      return std::holds_alternative<double>(value) || std::holds_alternative<int64_t>(value);
    case ArgKind::kInt: return std::holds_alternative<int64_t>(value);
    case ArgKind::kString: return std::holds_alternative<std::string>(value);
    case ArgKind::kFloats:
      return std::holds_alternative<std::vector<double>>(value) || std::holds_alternative<std::vector<int64_t>>(value);
    case ArgKind::kInts: return std::holds_alternative<std::vector<int64_t>>(value);
    case ArgKind::kStrings: return std::holds_alternative<std::vector<std::string>>(value);
    case ArgKind::kNet: return std::holds_alternative<std::shared_ptr<const NetDef>>(value);
    case ArgKind::kNets: return std::holds_alternative<std::vector<std::shared_ptr<const NetDef>>>(value);
  }
  return false;
}

OpSchema& OpSchemaRegistry::New(const std::string& type) {
  auto& slot = Schemas()[type];
  if (slot) {
    // Registration happens in static initialisers, where throwing is fatal; a
    // duplicate is a programming error found by the first test run.
    std::fprintf(stderr, "dp: operator schema '%s' registered twice\n", type.c_str());
    std::abort();
  }
  slot = std::make_unique<OpSchema>(type);
  return *slot;
}

const OpSchema* OpSchemaRegistry::Find(const std::string& type) {
  auto it = Schemas().find(type);
  return it == Schemas().end() ? nullptr : it->second.get();
}

std::vector<std::string> OpSchemaRegistry::Types() {
  std::vector<std::string> out;
  for (const auto& [k, v] : Schemas()) out.push_back(k);
  return out;
}

OpSchema& OpSchema::NumInputs(int min, int max) {
  min_in_ = min;
  max_in_ = max;
  return *this;
}

OpSchema& OpSchema::NumOutputs(int min, int max) {
  min_out_ = min;
  max_out_ = max;
  return *this;
}

OpSchema& OpSchema::AllowInplace(std::vector<std::pair<int, int>> pairs) {
  allow_inplace_ = std::move(pairs);
  return *this;
}

OpSchema& OpSchema::EnforceInplace(std::vector<std::pair<int, int>> pairs) {
  enforce_inplace_ = std::move(pairs);
  return *this;
}

OpSchema& OpSchema::EnforceInplaceAll(int shift) {
  enforce_inplace_shift_ = shift;
  return *this;
}

OpSchema& OpSchema::Arg(std::string name, ArgKind kind, std::string doc, bool required) {
  args_.push_back({std::move(name), kind, std::move(doc), required});
  return *this;
}

const OpSchema::ArgSpec* OpSchema::FindArg(const std::string& name) const {
  for (const auto& spec : args_)
    if (spec.name == name) return &spec;
  return nullptr;
}

OpSchema& OpSchema::IdenticalTypeAndShape() {
  return ShapeInference([](const OperatorDef& op, const ArgReader&, const std::vector<TensorInfo>& in) {
    return std::vector<TensorInfo>(op.outputs.size(), in.at(0));
  });
}

std::string OpSchema::InputName(size_t i) const {
  return i < input_names_.size() ? input_names_[i] : StrCat("input ", i);
}

std::string OpSchema::OutputName(size_t i) const {
  return i < output_names_.size() ? output_names_[i] : StrCat("output ", i);
}

void OpSchema::Verify(const OperatorDef& op, const std::string& label) const {
  int nin = static_cast<int>(op.inputs.size());
  int nout = static_cast<int>(op.outputs.size());
  if (nin < min_in_ || nin > max_in_)
    DP_THROW(Code::kInvalidNet, label, ": takes ", Range(min_in_, max_in_), " inputs, got ", nin);
  if (nout < min_out_ || nout > max_out_)
    DP_THROW(Code::kInvalidNet, label, ": takes ", Range(min_out_, max_out_), " outputs, got ", nout);
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i].empty()) DP_THROW(Code::kInvalidNet, label, ": input ", i, " has an empty blob name");
  // Hash lookups: collectives list thousands of blobs.
  std::unordered_map<std::string_view, size_t> first_output;
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    if (op.outputs[o].empty()) DP_THROW(Code::kInvalidNet, label, ": output ", o, " has an empty blob name");
    auto [it, fresh] = first_output.emplace(op.outputs[o], o);
    if (!fresh)
      DP_THROW(Code::kInvalidNet, label, ": writes blob '", op.outputs[o], "' twice (outputs ", it->second, " and ",
               o, ")");
  }
  auto check_enforced = [&](int i, int o) {
    if (i < nin && o < nout && op.inputs[i] != op.outputs[o])
      DP_THROW(Code::kInvalidNet, label, ": ", OutputName(o), " must be written in place of ", InputName(i),
               " (blob '", op.inputs[i], "'), got blob '", op.outputs[o], "'");
  };
  for (auto [i, o] : enforce_inplace_) check_enforced(i, o);
  if (enforce_inplace_shift_ >= 0)
    for (int o = 0; o < nout; ++o) check_enforced(o + enforce_inplace_shift_, o);
  for (int i = 0; i < nin; ++i) {
    auto it = first_output.find(op.inputs[i]);
    if (it == first_output.end()) continue;
    const int o = static_cast<int>(it->second);
    auto match = [&](const std::pair<int, int>& p) { return p.first == i && p.second == o; };
    bool ok = std::any_of(allow_inplace_.begin(), allow_inplace_.end(), match) ||
              std::any_of(enforce_inplace_.begin(), enforce_inplace_.end(), match) ||
              (enforce_inplace_shift_ >= 0 && i == o + enforce_inplace_shift_);
    if (!ok)
      DP_THROW(Code::kInvalidNet, label, ": blob '", op.outputs[o], "' is both ", InputName(i), " and ",
               OutputName(o), ", but this op cannot run in place there");
  }
  VerifyArgs(op, label);
  for (const auto& spec : args_)
    if (spec.required && op.FindArg(spec.name) == nullptr)
      DP_THROW(Code::kInvalidNet, label, ": missing required argument '", spec.name, "' (", spec.doc, ")");
}

void OpSchema::VerifyArgs(const OperatorDef& op, const std::string& label) const {
  // Hash lookups: a hostile net may give one op thousands of arguments.
  std::unordered_map<std::string_view, size_t> first;
  for (size_t i = 0; i < op.args.size(); ++i) {
    const Argument& a = op.args[i];
    // A second value would be silently ignored (FindArg returns the first).
    auto [it, fresh] = first.emplace(a.name, i);
    if (!fresh)
      DP_THROW(Code::kInvalidArgument, label, ": argument '", a.name, "' is given twice (arguments ", it->second,
               " and ", i, ")");
    const ArgSpec* spec = FindArg(a.name);
    if (spec == nullptr)
      DP_THROW(Code::kInvalidArgument, label, ": unknown argument '", a.name, "' (", UnknownArgHint(a.name), ")");
    if (!ArgKindAccepts(spec->kind, a.value))
      DP_THROW(Code::kInvalidArgument, label, ": argument '", a.name, "' must be ", ArgKindName(spec->kind), ", got ",
               a.KindName());
  }
}

std::string OpSchema::UnknownArgHint(const std::string& name) const {
  if (args_.empty()) return StrCat(type_, " takes no arguments");
  std::vector<std::string> names;
  for (const auto& spec : args_) names.push_back(spec.name);
  std::string hint;
  if (const std::string* close = ClosestName(name, names)) hint = StrCat("did you mean '", *close, "'? ");
  hint += StrCat(type_, " takes: ");
  for (size_t i = 0; i < names.size(); ++i) hint += StrCat(i == 0 ? "" : ", ", names[i]);
  return hint;
}

std::vector<TensorInfo> OpSchema::InferShapes(const OperatorDef& op, const std::string& label,
                                              const std::vector<TensorInfo>& inputs) const {
  bool all_known = std::all_of(inputs.begin(), inputs.end(), [](const TensorInfo& t) { return t.known(); });
  if (!inference_ || !all_known) return std::vector<TensorInfo>(op.outputs.size());
  try {
    auto out = inference_(op, ArgReader(op, label), inputs);
    out.resize(op.outputs.size());
    return out;
  } catch (Error& e) {
    if (e.message().rfind(label, 0) == 0) throw;
    throw e.Prepend(label);
  }
}

}  // namespace dp
