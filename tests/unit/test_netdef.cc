// Net definitions: JSON and FlatBuffer loading, round trips, validation
// against operator schemas, and static shape inference.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "graph/net_format.h"
#include "graph/net_validate.h"

using namespace dp;

namespace {

// Expects fn to throw a dp::Error with `code` whose message contains each needle.
template <typename Fn>
void ExpectError(Fn fn, Code code, std::initializer_list<const char*> needles) {
  try {
    fn();
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK_MESSAGE(e.code() == code, e.message());
    for (const char* n : needles) CHECK_MESSAGE(e.message().find(n) != std::string::npos, e.message(), " lacks ", n);
  }
}

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
  ExpectError([&] { NetDefFromFile(dir + "/no_such_net.json"); }, Code::kIo, {"no_such_net.json"});
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
          CHECK(e.code() == Code::kInvalidNet);
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
  ExpectError([&] { validate(R"({"ops":[{"type":"ConstantFill","outputs":["y"],
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
