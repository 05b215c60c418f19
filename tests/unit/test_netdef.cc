// Net definitions: JSON and FlatBuffer loading, round trips, validation
// against operator schemas, and static shape inference.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "expect_error.h"
#include "graph/net_format.h"
#include "net_generated.h"
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
