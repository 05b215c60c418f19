#include "ops/gradient_registry.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/error.h"

namespace dp {
namespace {

struct Entry {
  GradientKind kind = GradientKind::kUnknown;
  GradientMakerFactory factory;
};

std::map<std::string, Entry>& Entries() {
  static auto* m = new std::map<std::string, Entry>;
  return *m;
}

void Add(const std::string& type, Entry e) {
  auto& slot = Entries()[type];
  if (slot.kind != GradientKind::kUnknown) {
    // Static initialisation: a duplicate is a programming error found by the first test run.
    std::fprintf(stderr, "dp: gradient for '%s' registered twice\n", type.c_str());
    std::abort();
  }
  slot = std::move(e);
}

}  // namespace

const std::string& GradientMaker::I(int i) {
  const std::string& name = req_.def.inputs.at(static_cast<size_t>(i));
  reads_.push_back({false, i});
  return name;
}

const std::string& GradientMaker::O(int i) {
  const std::string& name = req_.def.outputs.at(static_cast<size_t>(i));
  reads_.push_back({true, i});
  return name;
}

bool GradientMaker::HasGO(int i) const {
  return i >= 0 && static_cast<size_t>(i) < req_.output_grads.size() && !req_.output_grads[i].empty();
}

const std::string& GradientMaker::GO(int i) const {
  DP_ENFORCE_CODE(HasGO(i), Code::kInvalidNet, req_.label, ": its gradient needs the gradient of output ", i,
                  i < NumOutputs() ? StrCat(" '", req_.def.outputs[i], "'") : std::string(),
                  ", but no gradient flows there");
  return req_.output_grads[i];
}

bool GradientMaker::NeedsGI(int i) const {
  return i >= 0 && static_cast<size_t>(i) < req_.input_grads.size() && !req_.input_grads[i].empty();
}

const std::string& GradientMaker::GI(int i) {
  DP_ENFORCE_CODE(NeedsGI(i), Code::kInternal, req_.label, ": gradient maker wrote the gradient of input ", i,
                  " although it is not wanted (check NeedsGI)");
  produced_[i] = true;
  return req_.input_grads[i];
}

OperatorDef GradientMaker::MakeOp(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                                  std::vector<Argument> args) {
  return MakeOperatorDef(std::move(type), std::move(inputs), std::move(outputs), std::move(args));
}

void GradientRegistry::Register(const std::string& type, GradientMakerFactory factory) {
  Add(type, {GradientKind::kMaker, std::move(factory)});
}
void GradientRegistry::RegisterNone(const std::string& type) { Add(type, {GradientKind::kNone, nullptr}); }
void GradientRegistry::RegisterStop(const std::string& type) { Add(type, {GradientKind::kStop, nullptr}); }

GradientKind GradientRegistry::Kind(const std::string& type) {
  auto it = Entries().find(type);
  return it == Entries().end() ? GradientKind::kUnknown : it->second.kind;
}

std::unique_ptr<GradientMaker> GradientRegistry::Create(const GradientRequest& req) {
  auto it = Entries().find(req.def.type);
  if (it == Entries().end())
    DP_THROW(Code::kInvalidNet, req.label, ": no gradient is registered for op type '", req.def.type, "'");
  if (it->second.kind != GradientKind::kMaker)
    DP_THROW(Code::kInvalidNet, req.label, ": op type '", req.def.type, "' is not differentiable");
  return it->second.factory(req);
}

std::vector<std::string> GradientRegistry::TypesWithMakers() {
  std::vector<std::string> out;
  for (const auto& [type, e] : Entries())
    if (e.kind == GradientKind::kMaker) out.push_back(type);
  return out;
}

}  // namespace dp
