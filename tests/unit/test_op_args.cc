// Operator arguments against their schemas: every argument an op carries must
// be declared by its schema, with a kind the kernels can read, and given once.
// Misspelt names are INVALID_ARGUMENT with a "did you mean" (before, a Scale
// with "scael" ran and scaled by 1).
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graph/net_def.h"
#include "graph/net_format.h"
#include "ops/net_validate.h"
#include "ops/op_schema.h"
#include "op_test_util.h"

using namespace dp;
using namespace dp::testing;

namespace {

// Takes nested nets, which no real operator does yet.
DP_OPERATOR_SCHEMA(TestArgsNested)
    .NumInputs(0)
    .NumOutputs(0)
    .Arg("body", ArgKind::kNet, ArgDefault::Described("no net"), "a net")
    .Arg("branches", ArgKind::kNets, ArgDefault::Described("no nets"), "nets")
    .Doc("test only");

void Validate(const char* json) { ValidateNet(NetDefFromJson(json)); }

// A Scale op reading x into y with `args` (a JSON array).
std::string ScaleJson(const std::string& args) {
  return R"({"external_inputs":["x"],"ops":[{"type":"Scale","name":"s","inputs":["x"],"outputs":["y"],"args":)" +
         args + "}]}";
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The message of the error that validating `op` (alone, inputs fed) throws; "" when it passes.
std::string ValidationMessage(const OperatorDef& op, Code want = Code::kInvalidArgument) {
  NetDef net;
  net.ops.push_back(op);
  net.external_inputs = op.inputs;
  try {
    ValidateNet(net);
  } catch (const Error& e) {
    CHECK_MESSAGE(e.code() == want, e.message());
    return e.message();
  }
  return "";
}

Tensor Floats(Dims dims, std::vector<float> v) { return Make<float>(std::move(dims), v); }

// A value of every kind an argument can hold.
std::vector<Argument::Value> OneOfEachKind() {
  auto net = std::make_shared<const NetDef>();
  return {1.5,
          int64_t{2},
          std::string("s"),
          std::vector<double>{1.5},
          std::vector<int64_t>{2},
          std::vector<std::string>{"s"},
          std::shared_ptr<const NetDef>(net),
          std::vector<std::shared_ptr<const NetDef>>{net}};
}

// Whether ArgReader's accessor for `kind` reads `value` (what kernels do).
bool ReaderReads(ArgKind kind, const Argument::Value& value) {
  OperatorDef op = Op("X", {}, {}, {Argument{"a", value}});
  ArgReader r(op, "");
  try {
    switch (kind) {
      case ArgKind::kFloat: r.Float("a"); break;
      case ArgKind::kInt: r.Int("a"); break;
      case ArgKind::kString: r.String("a"); break;
      case ArgKind::kFloats: r.Floats("a"); break;
      case ArgKind::kInts: r.Ints("a"); break;
      case ArgKind::kStrings: r.Strings("a"); break;
      default: FAIL("no reader for this kind");
    }
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a misspelt argument is rejected, naming the op and the argument, with a suggestion") {
  ExpectError([] { Validate(ScaleJson(R"([{"name":"scael","f":2}])").c_str()); }, Code::kInvalidArgument,
              {"op 0 (Scale 's')", "unknown argument 'scael'", "did you mean 'scale'?", "Scale takes: scale"});
  // Nets refuse it at creation, before any run could scale by the default.
  ExpectBuildError({Op("Scale", {"x"}, {"y"}, {FloatArg("scael", 2)})}, {{"x", Floats({2}, {1, 2})}},
                   Code::kInvalidArgument, {"'scael'", "'scale'"});
}

TEST_CASE("a far-off unknown argument gets the list of known ones but no suggestion") {
  const std::string msg = ValidationMessage(Op("Scale", {"x"}, {"y"}, {FloatArg("factor", 2)}));
  CHECK(Contains(msg, "unknown argument 'factor'"));
  CHECK(Contains(msg, "Scale takes: scale"));
  CHECK_FALSE(Contains(msg, "did you mean"));
  const std::string none = ValidationMessage(Op("Relu", {"x"}, {"y"}, {IntArg("inplace", 1)}));
  CHECK(Contains(none, "unknown argument 'inplace'"));
  CHECK(Contains(none, "Relu takes no arguments"));
  CHECK_FALSE(Contains(none, "did you mean"));
}

TEST_CASE("the suggestion is the closest declared name, and only a near one") {
  const std::vector<std::string> conv_in{"X", "W"};
  auto suggestion = [&](const std::string& type, std::vector<std::string> in, const std::string& name) {
    const std::string msg = ValidationMessage(Op(type, std::move(in), {"y"}, {IntArg(name, 1)}));
    CHECK(Contains(msg, "unknown argument '" + name + "'"));
    const size_t at = msg.find("did you mean '");
    if (at == std::string::npos) return std::string();
    const size_t from = at + 14;
    return msg.substr(from, msg.find('\'', from) - from);
  };
  CHECK(suggestion("Conv", conv_in, "strides") == "stride");    // one insertion, not stride_h (two)
  CHECK(suggestion("Conv", conv_in, "kernal") == "kernel");     // one substitution
  CHECK(suggestion("Conv", conv_in, "gruop") == "group");       // one swap of neighbours
  CHECK(suggestion("Conv", conv_in, "padding") == "");          // 4 edits from "pad"
  CHECK(suggestion("Flatten", {"x"}, "ax") == "");              // short names need to be closer
  CHECK(suggestion("Flatten", {"x"}, "Axis") == "axis");
  CHECK(suggestion("Accuracy", {"p", "l"}, "topk") == "top_k");
}

TEST_CASE("an argument of the wrong kind is rejected") {
  ExpectError([] { Validate(ScaleJson(R"([{"name":"scale","ints":[2]}])").c_str()); }, Code::kInvalidArgument,
              {"op 0 (Scale 's')", "argument 'scale' must be a float, got ints"});
  CHECK(Contains(ValidationMessage(Op("Flatten", {"x"}, {"y"}, {FloatArg("axis", 1)})),
                 "argument 'axis' must be an int, got float"));
  CHECK(Contains(ValidationMessage(Op("Reshape", {"x"}, {"y"}, {StringArg("shape", "2,3")})),
                 "argument 'shape' must be a list of ints, got string"));
  CHECK(Contains(ValidationMessage(Op("FC", {"x", "w", "b"}, {"y"}, {IntArg("activation", 1)})),
                 "argument 'activation' must be a string, got int"));
}

TEST_CASE("an int is a float argument, as the kernels read it") {
  auto ws = RunOp(Op("Scale", {"x"}, {"y"}, {IntArg("scale", 3)}), {{"x", Floats({2}, {1, 2})}});
  CHECK(Values<float>(ws->GetTensor("y")) == std::vector<float>{3, 6});
  Validate(ScaleJson(R"([{"name":"scale","i":3}])").c_str());
}

TEST_CASE("an argument given twice is rejected") {
  ExpectError([] { Validate(ScaleJson(R"([{"name":"scale","f":2},{"name":"scale","f":3}])").c_str()); },
              Code::kInvalidArgument, {"op 0 (Scale 's')", "argument 'scale' is given twice"});
}

TEST_CASE("required arguments are still checked, as invalid nets") {
  const std::string msg = ValidationMessage(Op("LearningRate", {"iter"}, {"lr"}), Code::kInvalidNet);
  CHECK(Contains(msg, "missing required argument 'base_lr'"));
}

TEST_CASE("net arguments are declared like the others") {
  NetDef inner;
  inner.ops.push_back(Op("ConstantFill", {}, {"z"}, {IntsArg("shape", {2})}));
  auto net = std::make_shared<const NetDef>(inner);
  OperatorDef op = Op("TestArgsNested", {}, {});
  op.args = {{"body", Argument::Value{net}}, {"branches", Argument::Value{std::vector{net, net}}}};
  CHECK(ValidationMessage(op) == "");
  op.args = {IntArg("body", 1)};
  CHECK(Contains(ValidationMessage(op), "argument 'body' must be a net, got int"));
}

TEST_CASE("schema argument kinds accept exactly what ArgReader reads") {
  for (ArgKind kind : {ArgKind::kFloat, ArgKind::kInt, ArgKind::kString, ArgKind::kFloats, ArgKind::kInts,
                       ArgKind::kStrings})
    for (const auto& value : OneOfEachKind()) {
      const std::string kind_name = ArgKindName(kind);
      CAPTURE(kind_name);
      const std::string value_kind = Argument{"a", value}.KindName();
      CAPTURE(value_kind);
      CHECK(ArgKindAccepts(kind, value) == ReaderReads(kind, value));
    }
  // Nets have no reader: each kind takes only itself.
  const auto values = OneOfEachKind();
  for (size_t i = 0; i < values.size(); ++i) {
    CHECK(ArgKindAccepts(ArgKind::kNet, values[i]) == (i == 6));
    CHECK(ArgKindAccepts(ArgKind::kNets, values[i]) == (i == 7));
  }
}

TEST_CASE("every registered schema declares each argument once, documented, and accepts its own arguments") {
  const auto values = OneOfEachKind();
  for (const std::string& type : OpSchemaRegistry::Types()) {
    CAPTURE(type);
    const OpSchema* schema = OpSchemaRegistry::Find(type);
    REQUIRE(schema != nullptr);
    std::set<std::string> names;
    OperatorDef all = Op(type, {}, {});
    for (const auto& spec : schema->args()) {
      CAPTURE(spec.name);
      CHECK_MESSAGE(names.insert(spec.name).second, "declared twice");
      CHECK_FALSE(spec.doc.empty());
      for (const auto& value : values) {
        OperatorDef one = Op(type, {}, {}, {Argument{spec.name, value}});
        if (ArgKindAccepts(spec.kind, value)) {
          schema->VerifyArgs(one, type);
          if (all.FindArg(spec.name) == nullptr) all.args.push_back(one.args[0]);
        } else {
          ExpectError([&] { schema->VerifyArgs(one, type); }, Code::kInvalidArgument,
                      {"argument '" + spec.name + "' must be " + ArgKindName(spec.kind)});
        }
      }
    }
    schema->VerifyArgs(all, type);  // every declared argument at once
    ExpectError([&] { schema->VerifyArgs(Op(type, {}, {}, {IntArg("no_such_argument", 1)}), type); },
                Code::kInvalidArgument, {type, "unknown argument 'no_such_argument'"});
  }
}
