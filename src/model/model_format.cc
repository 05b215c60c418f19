#include "model/model_format.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <flatbuffers/idl.h>

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

void LoadSchema(flatbuffers::Parser& parser) {
  std::string schema(generated::kModelSchemaText);
  if (!parser.Parse(schema.c_str()))
    DP_THROW(Code::kInternal, "built-in model schema failed to parse: ", parser.error_);
}

}  // namespace

ModelDef ModelFromBuffer(const void* data, size_t size) {
  if (data == nullptr) DP_THROW(Code::kInvalidArgument, "model buffer is NULL");
  if (size < 8) DP_THROW(Code::kParse, "model buffer of ", size, " bytes is too short to be a FlatBuffer");
  if (size > FLATBUFFERS_MAX_BUFFER_SIZE) DP_THROW(Code::kParse, "model buffer of ", size, " bytes is too large");
  std::vector<uint64_t> aligned;
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  if (reinterpret_cast<uintptr_t>(data) % alignof(uint64_t) != 0) {
    aligned.resize((size + 7) / 8);
    std::memcpy(aligned.data(), data, size);
    bytes = reinterpret_cast<const uint8_t*>(aligned.data());
  }
  if (!fb::ModelDefBufferHasIdentifier(bytes))
    DP_THROW(Code::kParse, "not a dp model buffer: file identifier '", fb::ModelDefIdentifier(), "' missing");
  flatbuffers::Verifier verifier(bytes, size, /*max_depth=*/64, /*max_tables=*/10000000);
  if (!fb::VerifyModelDefBuffer(verifier))
    DP_THROW(Code::kParse, "model buffer of ", size, " bytes failed FlatBuffers verification (truncated or corrupt)");
  const fb::ModelDef& f = *fb::GetModelDef(bytes);
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
  flatbuffers::IDLOptions opts;
  opts.skip_unexpected_fields_in_json = false;
  flatbuffers::Parser parser(opts);
  LoadSchema(parser);
  std::string text(json);
  if (text.find('\0') != std::string::npos) DP_THROW(Code::kParse, "model JSON contains a NUL byte");
  if (!parser.ParseJson(text.c_str())) DP_THROW(Code::kParse, "model JSON: ", parser.error_);
  return ModelFromBuffer(parser.builder_.GetBufferPointer(), parser.builder_.GetSize());
}

ModelDef ModelFromFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    DP_THROW(Code::kIo, "cannot read model file '", path, "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) DP_THROW(errno == ENOENT ? Code::kNotFound : Code::kIo, "cannot open model file '", path, "': ",
                    std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) DP_THROW(Code::kIo, "cannot read model file '", path, "'");
  std::string bytes = ss.str();
  try {
    if (bytes.size() >= 8 && fb::ModelDefBufferHasIdentifier(bytes.data()))
      return ModelFromBuffer(bytes.data(), bytes.size());
    return ModelFromJson(bytes);
  } catch (Error& e) {
    throw e.Prepend(StrCat("file '", path, "'"));
  }
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
    opt = fb::CreateOptimizer(b, type, o.lr, o.momentum, o.nesterov, o.beta1, o.beta2, o.epsilon, o.weight_decay,
                              policy, o.gamma, o.stepsize, o.power, o.max_iter, o.warmup_iters,
                              o.warmup_start_factor);
  }
  fb::FinishModelDefBuffer(b, fb::CreateModelDef(b, ModelDef::kSchemaVersion, name, init, fwd, params, computed,
                                                 inputs, losses, metrics, opt));
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

std::string ModelToJson(const ModelDef& m) {
  flatbuffers::IDLOptions opts;
  opts.strict_json = true;
  opts.indent_step = 2;
  flatbuffers::Parser parser(opts);
  LoadSchema(parser);
  std::string buf = ModelToBuffer(m);
  std::string json;
  if (!flatbuffers::GenerateText(parser, buf.data(), &json))
    DP_THROW(Code::kInternal, "could not print model '", m.name, "' as JSON");
  return json;
}

}  // namespace dp
