#include "model/model_format.h"

#include <vector>

#include "graph/flatbuffer_io.h"
#include "graph/net_fb.h"
#include "model_generated.h"
#include "model_schema_text.h"

namespace dp {
namespace {

OptimizerDef OptimizerFromFb(const fb::Optimizer& o, const std::string& where) {
  OptimizerDef d;
  d.type = TextFromFb(o.type(), where, "the optimizer type");
  d.lr = o.lr();
  d.momentum = o.momentum();
  d.nesterov = o.nesterov();
  d.beta1 = o.beta1();
  d.beta2 = o.beta2();
  d.epsilon = o.epsilon();
  d.weight_decay = o.weight_decay();
  if (o.lr_policy() != nullptr && o.lr_policy()->size() > 0)
    d.lr_policy = TextFromFb(o.lr_policy(), where, "the optimizer's lr_policy");
  d.gamma = o.gamma();
  d.stepsize = o.stepsize();
  d.power = o.power();
  d.max_iter = o.max_iter();
  d.warmup_iters = o.warmup_iters();
  d.warmup_start_factor = o.warmup_start_factor();
  return d;
}

FlatBufferFormat ModelFormat() {
  return {"model", fb::ModelDefIdentifier(), generated::kModelSchemaText};
}

}  // namespace

ModelDef ModelFromBuffer(const void* data, size_t size) {
  std::vector<uint64_t> aligned;
  const fb::ModelDef& f = VerifiedRoot<fb::ModelDef>(ModelFormat(), data, size, &aligned);
  ModelDef m;
  m.name = TextFromFb(f.name(), "model", "the name");
  const std::string where = m.name.empty() ? std::string("model") : StrCat("model '", m.name, "'");
  m.init_net = NetDefFromFb(*f.init_net(), where + ": init_net");
  m.forward_net = NetDefFromFb(*f.forward_net(), where + ": forward_net");
  m.params = TextsFromFb(f.params(), where, "param");
  m.computed_params = TextsFromFb(f.computed_params(), where, "computed param");
  m.inputs = TextsFromFb(f.inputs(), where, "input");
  m.losses = TextsFromFb(f.losses(), where, "loss");
  m.metrics = TextsFromFb(f.metrics(), where, "metric");
  if (f.optimizer() != nullptr) m.optimizer = OptimizerFromFb(*f.optimizer(), where);
  CompleteAndValidateModel(m);
  return m;
}

ModelDef ModelFromJson(std::string_view json) {
  std::string buffer = JsonToFlatBuffer(ModelFormat(), json);
  return ModelFromBuffer(buffer.data(), buffer.size());
}

ModelDef ModelFromFile(const std::string& path) {
  return LoadFormatFile(ModelFormat(), path, ModelFromBuffer, ModelFromJson);
}

std::string ModelToBuffer(const ModelDef& m) {
  flatbuffers::FlatBufferBuilder b;
  auto strings = [&](const std::vector<std::string>& v) { return b.CreateVectorOfStrings(v); };
  auto name = b.CreateString(m.name);
  auto init = NetDefToFb(b, m.init_net);
  auto fwd = NetDefToFb(b, m.forward_net);
  auto params = strings(m.params), computed = strings(m.computed_params), inputs = strings(m.inputs),
       losses = strings(m.losses), metrics = strings(m.metrics);
  flatbuffers::Offset<fb::Optimizer> opt;
  if (m.optimizer) {
    const OptimizerDef& o = *m.optimizer;
    auto type = b.CreateString(o.type);
    auto policy = b.CreateString(o.lr_policy);
    const auto w = WrittenDouble;
    opt = fb::CreateOptimizer(b, type, w(o.lr), w(o.momentum), o.nesterov, w(o.beta1), w(o.beta2), w(o.epsilon),
                              w(o.weight_decay), policy, w(o.gamma), o.stepsize, w(o.power), o.max_iter,
                              o.warmup_iters, w(o.warmup_start_factor));
  }
  fb::FinishModelDefBuffer(b, fb::CreateModelDef(b, ModelDef::kSchemaVersion, name, init, fwd, params, computed,
                                                 inputs, losses, metrics, opt));
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

std::string ModelToJson(const ModelDef& m) { return FlatBufferToJson(ModelFormat(), ModelToBuffer(m), m.name); }

}  // namespace dp
