// Net definitions: JSON and FlatBuffer loading, round trips, validation
// against operator schemas, and static shape inference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include <flatbuffers/idl.h>

#include "expect_error.h"
#include "graph/json_printer.h"
#include "graph/net_format.h"
#include "net_generated.h"
#include "net_schema_text.h"
#include "ops/net_validate.h"
#include "ops/op_schema.h"

using namespace dp;
using dp::testing::ExpectError;

namespace {

// No real operator takes a nested net yet.
DP_OPERATOR_SCHEMA(TestNetdefNested).NumInputs(0).NumOutputs(0, 1).Arg("body", ArgKind::kNet, ArgDefault::Described("no net"), "a nested net");

const char* kMlpJson = R"({
  "name": "mlp",
  "external_inputs": ["data", "w1", "b1", "w2", "b2"],
  "external_outputs": ["prob"],
  "executor": "Simple",
  "num_workers": 2,
  "ops": [
    {"type": "FC", "name": "fc1", "inputs": ["data", "w1", "b1"], "outputs": ["h1"],
     "args": [{"name": "axis", "i": 1}]},
    {"type": "Relu", "inputs": ["h1"], "outputs": ["h1"]},
    {"type": "FC", "name": "fc2", "inputs": ["h1", "w2", "b2"], "outputs": ["logits"],
     "device": {"type": "CPU", "id": 1}, "engine": "BLAS", "control_inputs": ["h1"]},
    {"type": "Softmax", "inputs": ["logits"], "outputs": ["prob"]}
  ]
})";

}  // namespace

TEST_CASE("JSON net loads with every field") {
  NetDef n = NetDefFromJson(kMlpJson);
  ValidateNet(n);
  CHECK(n.name == "mlp");
  CHECK(n.ops.size() == 4);
  CHECK(n.executor == ExecutorKind::kSimple);
  CHECK(n.num_workers == 2);
  CHECK(n.external_inputs.size() == 5);
  CHECK(n.ops[0].name == "fc1");
  CHECK(ArgReader(n.ops[0], "").Int("axis") == 1);
  CHECK_FALSE(n.ops[0].device.has_value());
  REQUIRE(n.ops[2].device.has_value());
  CHECK(*n.ops[2].device == DeviceOption{DeviceType::kCPU, 1});
  CHECK(n.ops[2].engine == "BLAS");
  CHECK(n.ops[2].control_inputs == std::vector<std::string>{"h1"});
  CHECK(n.OpDevice(n.ops[0]) == DeviceOption{});
}

TEST_CASE("binary and JSON round trips preserve everything") {
  NetDef n = NetDefFromJson(kMlpJson);
  auto nested = std::make_shared<NetDef>();
  nested->name = "inner";
  nested->ops.push_back(OperatorDef{"ConstantFill", "", {}, {"z"}, {{"shape", std::vector<int64_t>{2}}}, {}, "", {}});
  n.ops[1].args = {
      {"f", 0.25},
      {"i", int64_t{-7}},
      {"s", std::string("hello")},
      {"floats", std::vector<double>{1.5, -2}},
      {"ints", std::vector<int64_t>{}},
      {"strings", std::vector<std::string>{"a", "b"}},
      {"net", std::shared_ptr<const NetDef>(nested)},
      {"nets", std::vector<std::shared_ptr<const NetDef>>{nested, nested}},
  };
  n.device = {DeviceType::kCUDA, 3};
  auto check = [&](const NetDef& m) {
    CHECK(m.name == n.name);
    CHECK(m.device == n.device);
    CHECK(m.executor == n.executor);
    CHECK(m.external_outputs == n.external_outputs);
    REQUIRE(m.ops.size() == n.ops.size());
    const auto& args = m.ops[1].args;
    REQUIRE(args.size() == 8);
    CHECK(std::get<double>(args[0].value) == 0.25);
    CHECK(std::get<int64_t>(args[1].value) == -7);
    CHECK(std::get<std::string>(args[2].value) == "hello");
    CHECK(std::get<std::vector<double>>(args[3].value) == std::vector<double>{1.5, -2});
    CHECK(std::get<std::vector<int64_t>>(args[4].value).empty());  // empty list is still a list
    CHECK(std::get<std::vector<std::string>>(args[5].value) == std::vector<std::string>{"a", "b"});
    CHECK(std::get<std::shared_ptr<const NetDef>>(args[6].value)->name == "inner");
    CHECK(std::get<std::vector<std::shared_ptr<const NetDef>>>(args[7].value).size() == 2);
    CHECK(m.ops[2].engine == "BLAS");
    CHECK(*m.ops[2].device == DeviceOption{DeviceType::kCPU, 1});
  };
  std::string buf = NetDefToBuffer(n);
  check(NetDefFromBuffer(buf.data(), buf.size()));
  std::string json = NetDefToJson(n);
  check(NetDefFromJson(json));
  // Unaligned buffers are accepted (copied before verification).
  std::string shifted = "x" + buf;
  check(NetDefFromBuffer(shifted.data() + 1, buf.size()));
}

TEST_CASE("files: binary or JSON detected from content; errors name the file") {
  std::string dir = std::getenv("DP_BUILD_ROOT") ? std::getenv("DP_BUILD_ROOT") : ".";
  NetDef n = NetDefFromJson(kMlpJson);
  std::string bin = dir + "/test_netdef_file.dpnet", js = dir + "/test_netdef_file.json";
  std::ofstream(bin, std::ios::binary) << NetDefToBuffer(n);
  std::ofstream(js) << kMlpJson;
  CHECK(NetDefFromFile(bin).ops.size() == 4);
  CHECK(NetDefFromFile(js).name == "mlp");
  ExpectError([&] { NetDefFromFile(dir + "/no_such_net.json"); }, Code::kNotFound, {"no_such_net.json"});
  std::ofstream(js) << "{ \"name\": ";
  ExpectError([&] { NetDefFromFile(js); }, Code::kParse, {"test_netdef_file.json"});
  std::remove(bin.c_str());
  std::remove(js.c_str());
}

TEST_CASE("malformed JSON and bad fields are parse errors with a position") {
  ExpectError([] { NetDefFromJson("{\"ops\": [}"); }, Code::kParse, {"net JSON", "1"});
  ExpectError([] { NetDefFromJson("{\"opz\": []}"); }, Code::kParse, {"opz"});
  ExpectError([] { NetDefFromJson(""); }, Code::kParse, {});
  ExpectError([] { NetDefFromJson("{\"ops\":[{\"inputs\":[\"a\"]}]}"); }, Code::kParse, {"type"});
  ExpectError([] { NetDefFromJson(std::string_view("{\"name\":\"a\0b\"}", 14)); }, Code::kParse, {"NUL"});
  ExpectError(
      [] { NetDefFromJson(R"({"ops":[{"type":"Scale","args":[{"name":"scale","f":1,"i":2}]}]})"); },
      Code::kParse, {"argument 'scale'", "exactly one", "op 0 (Scale)"});
  ExpectError([] { NetDefFromJson(R"({"ops":[{"type":"Scale","args":[{"name":"scale"}]}]})"); },
              Code::kParse, {"argument 'scale'"});
  ExpectError([] { NetDefFromJson(R"({"schema_version": 99})"); }, Code::kParse, {"version 99"});
  ExpectError([] { NetDefFromJson(R"({"num_workers": -1})"); }, Code::kParse, {"num_workers"});
  ExpectError([] { NetDefFromJson(R"({"ops":[{"type":"Relu","device":{"type":"CPU","id":-2}}]})"); }, Code::kParse,
              {"device id", "op 0 (Relu)"});
}

TEST_CASE("truncated, garbage and corrupted buffers never crash") {
  std::string buf = NetDefToBuffer(NetDefFromJson(kMlpJson));
  const std::string original = NetDefToJson(NetDefFromBuffer(buf.data(), buf.size()));
  ExpectError([] { NetDefFromBuffer(nullptr, 10); }, Code::kInvalidArgument, {"NULL"});
  int rejected = 0;
  for (size_t len = 0; len < buf.size(); ++len) {
    try {
      // Cutting only trailing alignment padding leaves every byte the net
      // refers to: then it must load unchanged.
      std::string loaded = NetDefToJson(NetDefFromBuffer(buf.data(), len));
      CHECK(loaded == original);
    } catch (const Error& e) {
      CHECK(e.code() == Code::kParse);
      ++rejected;
    }
  }
  CHECK(rejected >= static_cast<int>(buf.size()) - 8);
  uint64_t x = 88172645463325252ULL;
  auto next = [&] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
  int accepted = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string g(16 + next() % 300, '\0');
    for (auto& c : g) c = static_cast<char>(next());
    if (trial % 2) std::memcpy(&g[4], "DPNT", 4);  // passes the identifier check
    try {
      NetDefFromBuffer(g.data(), g.size());
      ++accepted;
    } catch (const Error& e) {
      CHECK(e.code() == Code::kParse);
    }
  }
  MESSAGE("random buffers accepted by the verifier: " << accepted << " of 2000");
  // Every single-bit flip either still verifies or fails cleanly.
  for (size_t i = 0; i < buf.size(); ++i)
    for (int bit = 0; bit < 8; bit += 3) {
      std::string c = buf;
      c[i] = static_cast<char>(c[i] ^ (1 << bit));
      try {
        NetDef n = NetDefFromBuffer(c.data(), c.size());
        try {
          ValidateNet(n);
        } catch (const Error& e) {
          // kInvalidArgument: a flipped argument name or kind.
          CHECK((e.code() == Code::kInvalidNet || e.code() == Code::kInvalidArgument));
        }
      } catch (const Error& e) {
        CHECK(e.code() == Code::kParse);
      }
    }
  ExpectError([] { NetDefFromBuffer("garbagegarbage", 14); }, Code::kParse, {"DPNT"});
}

TEST_CASE("validation errors name the op index, type and blob") {
  auto validate = [](const char* json) { ValidateNet(NetDefFromJson(json)); };
  ExpectError([&] { validate(R"({"ops":[{"type":"Bogus","inputs":[],"outputs":["y"]}]})"); }, Code::kInvalidNet,
              {"op 0 (Bogus)", "unknown operator type 'Bogus'"});
  ExpectError([&] { validate(R"({"external_inputs":["x","w"],"ops":[{"type":"FC","name":"f","inputs":["x","w"],"outputs":["y"]}]})"); },
              Code::kInvalidNet, {"op 0 (FC 'f')", "3 inputs, got 2"});
  ExpectError([&] { validate(R"({"external_inputs":["x"],"ops":[{"type":"Relu","inputs":["x"],"outputs":["y","z"]}]})"); },
              Code::kInvalidNet, {"op 0 (Relu)", "1 outputs, got 2"});
  ExpectError([&] { validate(R"({"external_inputs":["x","w","b"],"ops":[{"type":"FC","inputs":["x","w","b"],"outputs":["x"]}]})"); },
              Code::kInvalidNet, {"op 0 (FC)", "blob 'x'", "in place"});
  ExpectError([&] { validate(R"({"external_inputs":["x"],"ops":[{"type":"SoftmaxWithLoss","inputs":["x","x"],"outputs":["p","p"]}]})"); },
              Code::kInvalidNet, {"op 0 (SoftmaxWithLoss)", "twice"});
  ExpectError([&] { validate(R"({"ops":[{"type":"Relu","inputs":["ghost"],"outputs":["y"]}]})"); }, Code::kInvalidNet,
              {"op 0 (Relu)", "'ghost'", "neither an external input"});
  ExpectError([&] { validate(R"({"external_inputs":["x"],"ops":[
                  {"type":"Add","inputs":["x","b"],"outputs":["a"]},
                  {"type":"Relu","inputs":["a"],"outputs":["b"]}]})"); },
              Code::kInvalidNet, {"op 0 (Add)", "'b'", "op 1 (Relu)", "cycle"});
  ExpectError([&] { validate(R"({"ops":[{"type":"Relu","inputs":["y"],"outputs":["y"]}]})"); }, Code::kInvalidNet,
              {"op 0 (Relu)", "'y'", "this op itself"});
  ExpectError([&] { validate(R"({"external_inputs":["x"],"ops":[{"type":"Relu","inputs":["x"],"outputs":["y"],"control_inputs":["later"]},
                  {"type":"Relu","inputs":["x"],"outputs":["later"]}]})"); },
              Code::kInvalidNet, {"control input", "'later'"});
  ExpectError([&] { validate(R"({"external_inputs":["x"],"external_outputs":["nobody"],"ops":[]})"); },
              Code::kInvalidNet, {"external output 'nobody'"});
  ExpectError([&] { validate(R"({"ops":[{"type":"Relu","inputs":[""],"outputs":["y"]}]})"); }, Code::kInvalidNet,
              {"empty blob name"});
  // Nested nets are validated too, and the error says where.
  ExpectError([&] { validate(R"({"ops":[{"type":"TestNetdefNested","outputs":["y"],
                  "args":[{"name":"body","net":{"name":"inner","ops":[{"type":"Nope"}]}}]}]})"); },
              Code::kInvalidNet, {"argument 'body'", "net 'inner'", "Nope"});
  // Legal: in-place where allowed, inputs fed, outputs produced.
  validate(kMlpJson);
}

TEST_CASE("shape inference follows the op schemas") {
  NetDef n = NetDefFromJson(kMlpJson);
  auto shapes = InferNetShapes(n, {{"data", {{32, 1, 28, 28}, DType::kFloat32}},
                                   {"w1", {{128, 784}, DType::kFloat32}},
                                   {"b1", {{128}, DType::kFloat32}},
                                   {"w2", {{10, 128}, DType::kFloat32}},
                                   {"b2", {{10}, DType::kFloat32}}});
  CHECK(shapes["h1"].dims == Dims{32, 128});
  CHECK(shapes["logits"].dims == Dims{32, 10});
  CHECK(shapes["prob"].dims == Dims{32, 10});
  CHECK(shapes["prob"].dtype == DType::kFloat32);
  // Unknown inputs leave outputs unknown rather than guessing.
  auto partial = InferNetShapes(n, {});
  CHECK_FALSE(partial["prob"].known());
  ExpectError(
      [&] {
        InferNetShapes(n, {{"data", {{32, 100}, DType::kFloat32}},
                           {"w1", {{128, 784}, DType::kFloat32}},
                           {"b1", {{128}, DType::kFloat32}},
                           {"w2", {{10, 128}, DType::kFloat32}},
                           {"b2", {{10}, DType::kFloat32}}});
      },
      Code::kShape, {"op 0 (FC 'fc1')", "100"});
}

TEST_CASE("typed argument access") {
  OperatorDef op{"X", "", {}, {}, {{"f", 1.5}, {"i", int64_t{3}}, {"l", std::vector<int64_t>{1, 2}}}, {}, "", {}};
  ArgReader a(op, "op 0 (X)");
  CHECK(a.Float("f") == 1.5);
  CHECK(a.Float("i") == 3.0);  // ints widen to floats
  CHECK(a.Int("missing", 9) == 9);
  CHECK(a.Floats("l") == std::vector<double>{1, 2});
  ExpectError([&] { a.Int("f"); }, Code::kInvalidArgument, {"op 0 (X)", "'f'", "an int", "float"});
  ExpectError([&] { a.Int("missing"); }, Code::kInvalidArgument, {"missing required argument 'missing'"});
  ExpectError([&] { a.Strings("l"); }, Code::kInvalidArgument, {"list of strings"});
}

// Regression (fuzzing, UBSan): the FlatBuffers verifier accepts an int64 or
// double vector whose elements sit at 4 mod 8; reading them through the
// vector's accessors was a misaligned load. Under UBSan (tools/test.sh) the
// old code fails this test; everywhere it checks the values read.
TEST_CASE("8-byte argument vectors at 4 mod 8 in an accepted buffer are read correctly") {
  const int64_t ints[] = {3, -1, int64_t{1} << 40};
  const double floats[] = {0.5, -2.25};
  bool ints_misaligned = false, floats_misaligned = false;
  for (int pad = 0; pad < 2; ++pad) {
    flatbuffers::FlatBufferBuilder b;
    // Vectors aligned only to 4, as a hostile writer may lay them out.
    auto raw_vector = [&](const void* data, size_t n) {
      if (pad) b.PushElement<uint32_t>(0);
      b.StartVector(n, sizeof(uint32_t));
      b.PushBytes(static_cast<const uint8_t*>(data), n * 8);
      return b.EndVector(n);
    };
    auto ints_vec = flatbuffers::Offset<flatbuffers::Vector<int64_t>>(raw_vector(ints, 3));
    auto floats_vec = flatbuffers::Offset<flatbuffers::Vector<double>>(raw_vector(floats, 2));
    auto a0 = fb::CreateArgument(b, b.CreateString("shape"), flatbuffers::nullopt, flatbuffers::nullopt, 0, 0,
                                 ints_vec);
    auto a1 = fb::CreateArgument(b, b.CreateString("values"), flatbuffers::nullopt, flatbuffers::nullopt, 0,
                                 floats_vec);
    auto op = fb::CreateOperatorDef(b, b.CreateString("Reshape"), 0, 0, 0,
                                    b.CreateVector(std::vector<flatbuffers::Offset<fb::Argument>>{a0, a1}));
    fb::FinishNetDefBuffer(b, fb::CreateNetDef(b, 1, 0, b.CreateVector(std::vector{op})));
    // An 8-aligned copy: the offset inside the buffer decides the alignment.
    std::vector<uint64_t> buf((b.GetSize() + 7) / 8);
    std::memcpy(buf.data(), b.GetBufferPointer(), b.GetSize());
    const auto* base = reinterpret_cast<const uint8_t*>(buf.data());
    const auto* args = fb::GetNetDef(base)->ops()->Get(0)->args();
    const auto offset = [&](const uint8_t* p) { return static_cast<size_t>(p - base) % 8; };
    ints_misaligned |= offset(args->Get(0)->ints()->Data()) == 4;
    floats_misaligned |= offset(args->Get(1)->floats()->Data()) == 4;

    NetDef net = NetDefFromBuffer(buf.data(), b.GetSize());
    REQUIRE(net.ops.size() == 1);
    CHECK(std::get<std::vector<int64_t>>(net.ops[0].args.at(0).value) == std::vector<int64_t>{3, -1, int64_t{1} << 40});
    CHECK(std::get<std::vector<double>>(net.ops[0].args.at(1).value) == std::vector<double>{0.5, -2.25});
  }
  // Otherwise the test would prove nothing.
  CHECK(ints_misaligned);
  CHECK(floats_misaligned);
}

// Regression (fuzzing): a binary net whose names were not UTF-8 loaded, and
// then could not be printed as JSON. Names are UTF-8 without NUL bytes.
TEST_CASE("binary nets with names that are not UTF-8 without NUL are parse errors naming the string") {
  const std::string bad[] = {std::string("a\xff", 2), std::string("a\0b", 3), "\xc0\xaf" /* overlong */,
                             "\xed\xa0\x80" /* surrogate */, "\xf4\x90\x80\x80" /* past U+10FFFF */, "\xe2\x82"};
  for (const std::string& name : bad) {
    CAPTURE(name.size());
    flatbuffers::FlatBufferBuilder b;
    auto op = fb::CreateOperatorDef(b, b.CreateString("Relu"), 0, b.CreateVectorOfStrings({"x"}),
                                    b.CreateVectorOfStrings({"y", name}));
    fb::FinishNetDefBuffer(b, fb::CreateNetDef(b, 1, 0, b.CreateVector(std::vector{op})));
    ExpectError([&] { NetDefFromBuffer(b.GetBufferPointer(), b.GetSize()); }, Code::kParse,
                {"op 0 (Relu)", "output 1 is not UTF-8"});
  }
  // Well-formed multi-byte names are fine and survive JSON.
  flatbuffers::FlatBufferBuilder b;
  const std::string name = "w\xc3\xa4rme_\xe6\x97\xa5_\xf0\x9f\x98\x80";
  auto op = fb::CreateOperatorDef(b, b.CreateString("Relu"), 0, b.CreateVectorOfStrings({"x"}),
                                  b.CreateVectorOfStrings({name}));
  fb::FinishNetDefBuffer(b, fb::CreateNetDef(b, 1, 0, b.CreateVector(std::vector{op})));
  NetDef net = NetDefFromBuffer(b.GetBufferPointer(), b.GetSize());
  CHECK(NetDefFromJson(NetDefToJson(net)).ops.at(0).outputs.at(0) == name);
}

// ---- JSON that reads back bit for bit (graph/json_printer) ------------------

namespace {

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Doubles that fixed-decimal printing lost or mangled, and the edges of the format.
std::vector<double> ExtremeDoubles() {
  using L = std::numeric_limits<double>;
  double payload_nan;
  const uint64_t nan_bits = 0xfff4000000000123;  // negative, signalling, with a payload
  std::memcpy(&payload_nan, &nan_bits, sizeof payload_nan);
  return {0.0, -0.0, L::denorm_min(), -L::denorm_min(), 2.5e-320, L::min(), 1e-300, 1e-13, 4.9e-13,
          1.2345678901234e-7, 0.1, 1.0 / 3, 2.0, -7.0, 1e15, 123456789012345678.0, 1e300, L::max(), -L::max(),
          static_cast<double>(std::numeric_limits<float>::max()),
          static_cast<double>(std::numeric_limits<float>::denorm_min()), L::infinity(), -L::infinity(),
          L::quiet_NaN(), payload_nan};
}

}  // namespace

TEST_CASE("a net goes binary -> JSON -> binary to the same bytes, extreme values included") {
  using I = std::numeric_limits<int64_t>;
  const std::vector<double> doubles = ExtremeDoubles();
  NetDef n;
  n.name = "extremes \"quoted\" \\ \n\t \xc3\xa4";
  n.num_workers = 1024;
  n.executor = ExecutorKind::kAsync;
  n.device = {DeviceType::kCUDA, std::numeric_limits<int32_t>::max()};
  OperatorDef op{"ConstantFill", "fill", {}, {"y"}, {}, DeviceOption{DeviceType::kCPU, 0}, "", {}};
  for (size_t i = 0; i < doubles.size(); ++i) op.args.push_back({"f" + std::to_string(i), doubles[i]});
  for (int64_t v : {I::min(), I::max(), int64_t{0}, int64_t{-1}}) op.args.push_back({"i" + std::to_string(v), v});
  op.args.push_back({"floats", doubles});
  op.args.push_back({"ints", std::vector<int64_t>{I::min(), -1, 0, 1, I::max()}});
  op.args.push_back({"empty", std::vector<double>{}});
  n.ops.push_back(op);

  const std::string buffer = NetDefToBuffer(n);
  const std::string json = NetDefToJson(n);
  CAPTURE(json);
  const NetDef back = NetDefFromJson(json);
  CHECK(NetDefToBuffer(back) == buffer);
  // Spot checks of what the bytes mean: every double is its own bits, except
  // that every NaN is the quiet NaN (JSON keeps neither sign nor payload).
  const auto& args = back.ops.at(0).args;
  for (size_t i = 0; i < doubles.size(); ++i) {
    CAPTURE(i);
    const double want = std::isnan(doubles[i]) ? std::numeric_limits<double>::quiet_NaN() : doubles[i];
    CHECK(Bits(std::get<double>(args.at(i).value)) == Bits(want));
  }
  CHECK(std::get<int64_t>(args.at(doubles.size()).value) == I::min());
  // What fixed decimals got wrong, now right (and still JSON numbers).
  CHECK(json.find("1.2345678901234e-07") != std::string::npos);
  CHECK(json.find("1e-13") != std::string::npos);
  CHECK(json.find("-0.0") != std::string::npos);
  CHECK(json.find("2.0") != std::string::npos);  // a whole number still reads as a real
}

TEST_CASE("the JSON printer writes what FlatBuffers' GenerateText writes, apart from the digits of floats") {
  // GenerateText's 12 fixed decimals and the shortest form agree on these.
  NetDef n = NetDefFromJson(kMlpJson);
  auto nested = std::make_shared<NetDef>();
  nested->name = "inner";
  nested->ops.push_back(OperatorDef{"ConstantFill", "", {}, {"z"}, {{"shape", std::vector<int64_t>{2}}}, {}, "", {}});
  n.ops[1].args = {{"f", 0.25}, {"g", -2.0}, {"i", int64_t{-7}}, {"s", std::string("h\xc3\xa4llo \"\\\n")},
                   {"floats", std::vector<double>{1.5, -2, 1e6}}, {"ints", std::vector<int64_t>{}},
                   {"strings", std::vector<std::string>{"a", "b"}}, {"net", std::shared_ptr<const NetDef>(nested)},
                   {"nets", std::vector<std::shared_ptr<const NetDef>>{nested, nested}}};
  n.device = {DeviceType::kCUDA, 3};
  const std::string buffer = NetDefToBuffer(n);

  flatbuffers::IDLOptions opts;
  opts.strict_json = true;
  opts.indent_step = 2;
  flatbuffers::Parser parser(opts);
  REQUIRE(parser.Parse(std::string(generated::kNetSchemaText).c_str()));
  std::string theirs;
  REQUIRE(flatbuffers::GenerateText(parser, buffer.data(), &theirs));
  CHECK(NetDefToJson(n) == theirs);
}

TEST_CASE("the JSON printer keeps every scalar kind bit for bit through FlatBuffers' parser") {
  // Every scalar type FlatBuffers has, as fields and as vectors, with enums.
  const char* schema = R"(
    enum Color : byte { Red = -1, Green = 0, Blue = 7 }
    table All {
      b: bool; i8: byte; u8: ubyte; i16: short; u16: ushort; i32: int; u32: uint; i64: long; u64: ulong;
      f32: float; f64: double; opt: double = null; color: Color = Green; color_unknown: Color;
      f32s: [float]; f64s: [double]; i64s: [long]; u64s: [ulong]; colors: [Color]; bools: [bool];
      s: string; subs: [All]; sub: All;
    }
    root_type All;
  )";
  flatbuffers::Parser parser;
  REQUIRE(parser.Parse(schema));
  auto bytes = [&] {
    return std::string(reinterpret_cast<const char*>(parser.builder_.GetBufferPointer()), parser.builder_.GetSize());
  };
  // The first buffer from JSON of our own printing, then binary -> JSON -> binary.
  std::string f64s, f32s;
  for (double d : ExtremeDoubles()) {
    if (!f64s.empty()) f64s += ", ";
    AppendExactFloat(f64s, d);
  }
  // Floats over their whole range: 4000 bit patterns, denormals and max included.
  std::mt19937 gen(7);
  std::vector<float> floats = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), -0.0f,
                               0.1f, 16777217.0f, 3.4e38f};
  for (int k = 0; k < 4000; ++k) {
    uint32_t bits = static_cast<uint32_t>(gen());
    float f;
    std::memcpy(&f, &bits, sizeof f);
    if (!std::isnan(f)) floats.push_back(f);
  }
  for (float f : floats) {
    if (!f32s.empty()) f32s += ", ";
    AppendExactFloat(f32s, f);
  }
  std::string random_doubles;
  for (int k = 0; k < 4000; ++k) {
    const uint64_t bits = (static_cast<uint64_t>(gen()) << 32) | gen();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (std::isnan(d)) continue;
    random_doubles += ", ";
    AppendExactFloat(random_doubles, d);
  }
  const std::string json = R"({"b": true, "i8": -128, "u8": 255, "i16": -32768, "u16": 65535, "i32": -2147483648,
    "u32": 4294967295, "i64": -9223372036854775808, "u64": 18446744073709551615, "f32": -0.0, "f64": 5e-324,
    "opt": -0.0, "color": "Blue", "color_unknown": 5, "f32s": [)" + f32s + R"(], "f64s": [)" + f64s +
                           random_doubles + R"(], "i64s": [-9223372036854775808, 9223372036854775807],
    "u64s": [0, 18446744073709551615], "colors": ["Red", "Green", 3], "bools": [false, true],
    "s": "\u0001 \"x\" \\ \u00e4", "subs": [{}, {"f64": 1e300}], "sub": {"f32": 3.4028234663852886e38}})";
  REQUIRE_MESSAGE(parser.ParseJson(json.c_str()), parser.error_);
  const std::string first = bytes();
  const std::string printed = FlatBufferRootToJson(parser, first.data());
  CAPTURE(printed.substr(0, 2000));
  REQUIRE_MESSAGE(parser.ParseJson(printed.c_str()), parser.error_);
  CHECK(bytes() == first);
  // Printed again, the same text.
  CHECK(FlatBufferRootToJson(parser, first.data()) == printed);
}

TEST_CASE("exact float text: shortest form, whole numbers marked as real, the parser's tokens for the rest") {
  auto text = [](auto v) {
    std::string s;
    AppendExactFloat(s, v);
    return s;
  };
  CHECK(text(0.0) == "0.0");
  CHECK(text(-0.0) == "-0.0");
  CHECK(text(1e-13) == "1e-13");
  CHECK(text(0.01) == "0.01");
  CHECK(text(100.0) == "100.0");
  CHECK(text(1e300) == "1e+300");
  CHECK(text(1e6) == "1000000.0");
  CHECK(text(1e21) == "1e+21");
  CHECK(text(1.5e-6) == "0.0000015");
  CHECK(text(-1e-7) == "-1e-07");
  CHECK(text(5e-324) == "5e-324");
  CHECK(text(0.1f) == "0.1");
  CHECK(text(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(text(-std::numeric_limits<float>::infinity()) == "-inf");
  CHECK(text(-std::numeric_limits<double>::quiet_NaN()) == "nan");
}
