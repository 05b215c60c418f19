#include "graph/net_format.h"

#include <cstring>

#include "core/utf8.h"
#include "graph/flatbuffer_io.h"
#include "graph/net_fb.h"
#include "net_generated.h"
#include "net_schema_text.h"

namespace dp {
namespace {

namespace fb = ::dp::fb;

std::vector<std::string> Strings(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v,
                                 const std::string& where, const char* what) {
  return TextsFromFb(v, where, what);
}

std::string Str(const flatbuffers::String* s, const std::string& where, const char* what) {
  return TextFromFb(s, where, what);
}

DeviceOption Device(const fb::DeviceOption* d, const std::string& where) {
  DeviceOption out;
  if (d == nullptr) return out;
  if (d->type() != fb::DeviceType::CPU && d->type() != fb::DeviceType::CUDA)
    DP_THROW(Code::kParse, where, ": unknown device type ", static_cast<int>(d->type()));
  out.type = d->type() == fb::DeviceType::CUDA ? DeviceType::kCUDA : DeviceType::kCPU;
  out.id = d->id();
  if (out.id < 0) DP_THROW(Code::kParse, where, ": negative device id ", out.id);
  return out;
}

NetDef FromFb(const fb::NetDef& n, const std::string& where);

Argument ArgFromFb(const fb::Argument& a, const std::string& where) {
  Argument out;
  out.name = Str(a.name(), where, "an argument name");
  std::string at = StrCat(where, ": argument '", out.name, "'");
  int set = 0;
  if (a.f()) { out.value = *a.f(); ++set; }
  if (a.i()) { out.value = *a.i(); ++set; }
  if (a.s()) { out.value = Str(a.s(), at, "the string"); ++set; }
  if (a.floats()) { out.value = ScalarsBytewise(*a.floats()); ++set; }
  if (a.ints()) { out.value = ScalarsBytewise(*a.ints()); ++set; }
  if (a.strings()) { out.value = Strings(a.strings(), at, "string"); ++set; }
  if (a.net()) { out.value = std::make_shared<const NetDef>(FromFb(*a.net(), at)); ++set; }
  if (a.nets()) {
    std::vector<std::shared_ptr<const NetDef>> nets;
    for (const auto* n : *a.nets()) nets.push_back(std::make_shared<const NetDef>(FromFb(*n, at)));
    out.value = std::move(nets);
    ++set;
  }
  if (set != 1)
    DP_THROW(Code::kParse, at, " must set exactly one of f, i, s, floats, ints, strings, net, nets (it sets ",
             set, ")");
  return out;
}

NetDef FromFb(const fb::NetDef& n, const std::string& where) {
  if (n.schema_version() > NetDef::kSchemaVersion || n.schema_version() < 1)
    DP_THROW(Code::kParse, where, ": net schema version ", n.schema_version(), " is not supported (this dp reads 1..",
             NetDef::kSchemaVersion, ")");
  NetDef out;
  out.name = Str(n.name(), where, "the net name");
  std::string net_where = StrCat(where, out.name.empty() ? "" : StrCat(" net '", out.name, "'"));
  if (n.ops() != nullptr) {
    out.ops.reserve(n.ops()->size());
    size_t index = 0;
    for (const auto* o : *n.ops()) {
      OperatorDef op;
      std::string at_index = StrCat(net_where, " op ", index);
      op.type = Str(o->type(), at_index, "the op type");
      op.name = Str(o->name(), at_index, "the op name");
      std::string op_where = StrCat(net_where, " ", OpLabel(op, index++));
      op.inputs = Strings(o->inputs(), op_where, "input");
      op.outputs = Strings(o->outputs(), op_where, "output");
      op.control_inputs = Strings(o->control_inputs(), op_where, "control input");
      op.engine = Str(o->engine(), op_where, "the engine");
      if (o->device() != nullptr) op.device = Device(o->device(), op_where);
      if (o->args() != nullptr)
        for (const auto* a : *o->args()) op.args.push_back(ArgFromFb(*a, op_where));
      out.ops.push_back(std::move(op));
    }
  }
  out.external_inputs = Strings(n.external_inputs(), net_where, "external input");
  out.external_outputs = Strings(n.external_outputs(), net_where, "external output");
  switch (n.executor()) {
    case fb::ExecutorKind::Default: out.executor = ExecutorKind::kDefault; break;
    case fb::ExecutorKind::Simple: out.executor = ExecutorKind::kSimple; break;
    case fb::ExecutorKind::Async: out.executor = ExecutorKind::kAsync; break;
    default: DP_THROW(Code::kParse, net_where, ": unknown executor kind ", static_cast<int>(n.executor()));
  }
  if (n.num_workers() < 0) DP_THROW(Code::kParse, net_where, ": num_workers must be >= 0, got ", n.num_workers());
  out.num_workers = n.num_workers();
  out.device = Device(n.device(), net_where);
  switch (n.memory()) {
    case fb::MemoryMode::Default: out.memory = MemoryMode::kDefault; break;
    case fb::MemoryMode::Keep: out.memory = MemoryMode::kKeep; break;
    case fb::MemoryMode::Share: out.memory = MemoryMode::kShare; break;
    case fb::MemoryMode::Free: out.memory = MemoryMode::kFree; break;
    default: DP_THROW(Code::kParse, net_where, ": unknown memory mode ", static_cast<int>(n.memory()));
  }
  return out;
}

// ---- writing ----

using StrVec = flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>;

// Empty lists are left out, as a person writing the JSON would.
StrVec WriteStrings(flatbuffers::FlatBufferBuilder& b, const std::vector<std::string>& v) {
  return v.empty() ? StrVec() : b.CreateVectorOfStrings(v);
}

flatbuffers::Offset<fb::DeviceOption> WriteDevice(flatbuffers::FlatBufferBuilder& b, DeviceOption d) {
  return fb::CreateDeviceOption(b, d.type == DeviceType::kCUDA ? fb::DeviceType::CUDA : fb::DeviceType::CPU, d.id);
}

flatbuffers::Offset<fb::NetDef> ToFb(flatbuffers::FlatBufferBuilder& b, const NetDef& n);

flatbuffers::Offset<fb::Argument> WriteArg(flatbuffers::FlatBufferBuilder& b, const Argument& a) {
  // Children first: FlatBuffers builds bottom-up.
  auto name = b.CreateString(a.name);
  flatbuffers::Offset<flatbuffers::String> s;
  flatbuffers::Offset<flatbuffers::Vector<double>> floats;
  flatbuffers::Offset<flatbuffers::Vector<int64_t>> ints;
  StrVec strings;
  flatbuffers::Offset<fb::NetDef> net;
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::NetDef>>> nets;
  if (auto* v = std::get_if<std::string>(&a.value)) s = b.CreateString(*v);
  if (auto* v = std::get_if<std::vector<double>>(&a.value)) {
    std::vector<double> written(v->size());
    for (size_t i = 0; i < v->size(); ++i) written[i] = WrittenDouble((*v)[i]);
    floats = b.CreateVector(written);
  }
  if (auto* v = std::get_if<std::vector<int64_t>>(&a.value)) ints = b.CreateVector(*v);
  if (auto* v = std::get_if<std::vector<std::string>>(&a.value)) strings = WriteStrings(b, *v);
  if (auto* v = std::get_if<std::shared_ptr<const NetDef>>(&a.value)) net = ToFb(b, **v);
  if (auto* v = std::get_if<std::vector<std::shared_ptr<const NetDef>>>(&a.value)) {
    std::vector<flatbuffers::Offset<fb::NetDef>> offs;
    for (const auto& n : *v) offs.push_back(ToFb(b, *n));
    nets = b.CreateVector(offs);
  }
  fb::ArgumentBuilder ab(b);
  ab.add_name(name);
  if (auto* v = std::get_if<double>(&a.value)) ab.add_f(WrittenDouble(*v));
  if (auto* v = std::get_if<int64_t>(&a.value)) ab.add_i(*v);
  if (!s.IsNull()) ab.add_s(s);
  if (!floats.IsNull()) ab.add_floats(floats);
  if (!ints.IsNull()) ab.add_ints(ints);
  if (!strings.IsNull()) ab.add_strings(strings);
  if (!net.IsNull()) ab.add_net(net);
  if (!nets.IsNull()) ab.add_nets(nets);
  return ab.Finish();
}

flatbuffers::Offset<fb::NetDef> ToFb(flatbuffers::FlatBufferBuilder& b, const NetDef& n) {
  std::vector<flatbuffers::Offset<fb::OperatorDef>> ops;
  for (const auto& op : n.ops) {
    std::vector<flatbuffers::Offset<fb::Argument>> args;
    for (const auto& a : op.args) args.push_back(WriteArg(b, a));
    auto type = b.CreateString(op.type);
    auto name = op.name.empty() ? 0 : b.CreateString(op.name);
    auto inputs = WriteStrings(b, op.inputs);
    auto outputs = WriteStrings(b, op.outputs);
    auto argv = args.empty() ? 0 : b.CreateVector(args);
    auto device = op.device ? WriteDevice(b, *op.device) : 0;
    auto engine = op.engine.empty() ? 0 : b.CreateString(op.engine);
    auto control = WriteStrings(b, op.control_inputs);
    ops.push_back(fb::CreateOperatorDef(b, type, name, inputs, outputs, argv, device, engine, control));
  }
  auto name = n.name.empty() ? 0 : b.CreateString(n.name);
  auto opv = b.CreateVector(ops);
  auto ext_in = WriteStrings(b, n.external_inputs);
  auto ext_out = WriteStrings(b, n.external_outputs);
  auto device = n.device == DeviceOption{} ? 0 : WriteDevice(b, n.device);
  fb::ExecutorKind kind = n.executor == ExecutorKind::kSimple  ? fb::ExecutorKind::Simple
                          : n.executor == ExecutorKind::kAsync ? fb::ExecutorKind::Async
                                                               : fb::ExecutorKind::Default;
  return fb::CreateNetDef(b, NetDef::kSchemaVersion, name, opv, ext_in, ext_out, kind, n.num_workers, device,
                          static_cast<fb::MemoryMode>(n.memory));
}

// Built per call: no static initialisation order to mind, and it is four words.
FlatBufferFormat NetFormat() { return {"net", fb::NetDefIdentifier(), generated::kNetSchemaText}; }

}  // namespace

std::string TextFromFb(const flatbuffers::String* s, const std::string& where, const char* what) {
  if (s == nullptr) return {};
  std::string_view text = s->string_view();
  size_t bad = FindInvalidUtf8(text);
  if (bad != std::string_view::npos)
    DP_THROW(Code::kParse, where, ": ", what, " is not UTF-8 without NUL bytes (byte ", bad, " of ", text.size(),
             " is 0x", std::hex, static_cast<int>(static_cast<unsigned char>(text[bad])), ")");
  return std::string(text);
}

std::vector<std::string> TextsFromFb(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v,
                                     const std::string& where, const char* what) {
  std::vector<std::string> out;
  if (v == nullptr) return out;
  out.reserve(v->size());
  for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i)
    out.push_back(TextFromFb(v->Get(i), where, StrCat(what, " ", i).c_str()));
  return out;
}

NetDef NetDefFromFb(const fb::NetDef& net, const std::string& where) { return FromFb(net, where); }
flatbuffers::Offset<fb::NetDef> NetDefToFb(flatbuffers::FlatBufferBuilder& builder, const NetDef& net) {
  return ToFb(builder, net);
}

NetDef NetDefFromBuffer(const void* data, size_t size) {
  std::vector<uint64_t> aligned;
  return FromFb(VerifiedRoot<fb::NetDef>(NetFormat(), data, size, &aligned), "net");
}

NetDef NetDefFromJson(std::string_view json) {
  std::string buffer = JsonToFlatBuffer(NetFormat(), json);
  return NetDefFromBuffer(buffer.data(), buffer.size());
}

NetDef NetDefFromFile(const std::string& path) {
  return LoadFormatFile(NetFormat(), path, NetDefFromBuffer, NetDefFromJson);
}

std::string NetDefToBuffer(const NetDef& net) {
  flatbuffers::FlatBufferBuilder b;
  fb::FinishNetDefBuffer(b, ToFb(b, net));
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

std::string NetDefToJson(const NetDef& net) { return FlatBufferToJson(NetFormat(), NetDefToBuffer(net), net.name); }

}  // namespace dp
