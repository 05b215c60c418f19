#include "ops/op_schema.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string_view>
#include <unordered_map>

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

}  // namespace

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

OpSchema& OpSchema::Arg(std::string name, std::string doc, bool required) {
  args_.push_back({std::move(name), std::move(doc), required});
  return *this;
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
  for (const auto& spec : args_)
    if (spec.required && op.FindArg(spec.name) == nullptr)
      DP_THROW(Code::kInvalidNet, label, ": missing required argument '", spec.name, "' (", spec.doc, ")");
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
