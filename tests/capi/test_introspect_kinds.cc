// The argument kinds of the C API's netdef introspection that no validated
// net holds today (no operator's schema takes floats, strings, a net or
// nets): FLOATS, STRINGS, NET and NETS, through the C functions on
// definitions built here, in C++. Links capi/introspect.cc, capi/net.cc and
// capi/status.cc directly (libdp.so exports the C functions only, so the
// definitions could not be made inside it). tests/capi/test_introspect.c
// covers the other kinds, from C, through libdp.so.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>

#include "capi/handles.h"

namespace {

using dp::Argument;
using dp::NetDef;

// Checks the status's code and that its message contains `needle`; frees it.
void ExpectStatus(dp_status* st, int32_t code, const char* needle = nullptr) {
  std::string msg = dp_status_message(st);
  CHECK_MESSAGE(dp_status_code(st) == code, msg);
  if (code != DP_OK) CHECK_MESSAGE(!msg.empty(), "empty message");
  if (needle != nullptr) CHECK_MESSAGE(msg.find(needle) != std::string::npos, msg, " lacks ", needle);
  dp_status_free(st);
}

std::shared_ptr<const NetDef> Body(const std::string& name, const std::string& op_type) {
  NetDef n;
  n.name = name;
  n.ops.push_back(dp::MakeOperatorDef(op_type, {"in"}, {"out"}));
  n.ops.back().device = dp::DeviceOption{dp::DeviceType::kCUDA, 3};
  n.external_inputs = {"in"};
  n.executor = dp::ExecutorKind::kSimple;
  return std::make_shared<const NetDef>(std::move(n));
}

// One op with an argument of every kind.
dp_netdef* MakeNet() {
  NetDef net;
  net.name = "kinds";
  dp::OperatorDef op = dp::MakeOperatorDef("Anything", {"a"}, {"b"});
  op.args.push_back(Argument{"fs", Argument::Value{std::vector<double>{0.5, -1.25, 1e300}}});
  op.args.push_back(Argument{"ss", Argument::Value{std::vector<std::string>{"alpha", "", "\xc3\xa9t\xc3\xa9"}}});
  op.args.push_back(Argument{"body", Argument::Value{Body("inner", "Relu")}});
  op.args.push_back(Argument{
      "branches", Argument::Value{std::vector<std::shared_ptr<const NetDef>>{Body("then", "Sigmoid"), Body("else", "Tanh")}}});
  op.args.push_back(Argument{"no_fs", Argument::Value{std::vector<double>{}}});
  op.args.push_back(Argument{"no_ss", Argument::Value{std::vector<std::string>{}}});
  op.args.push_back(Argument{"no_nets", Argument::Value{std::vector<std::shared_ptr<const NetDef>>{}}});
  net.ops.push_back(std::move(op));
  return dp::capi::NewNetDef(std::move(net));
}

}  // namespace

TEST_CASE("capi introspection: floats") {
  dp_netdef* def = MakeNet();
  const dp_opdef* op = dp_netdef_op(def, 0);
  const dp_argdef* a = dp_opdef_find_arg(op, "fs");
  REQUIRE(a != nullptr);
  CHECK(dp_opdef_num_args(op) == 7);
  CHECK(dp_opdef_arg(op, 0) == a);
  CHECK(std::strcmp(dp_argdef_name(a), "fs") == 0);
  CHECK(dp_argdef_kind(a) == DP_ARG_FLOATS);
  CHECK(dp_argdef_num_values(a) == 3);
  const double* data = nullptr;
  size_t n = 0;
  ExpectStatus(dp_argdef_get_floats(a, &data, &n), DP_OK);
  REQUIRE(n == 3);
  CHECK(data[0] == 0.5);
  CHECK(data[1] == -1.25);
  CHECK(data[2] == 1e300);
  const int64_t* ints = nullptr;
  ExpectStatus(dp_argdef_get_ints(a, &ints, &n), DP_ERR_INVALID_ARGUMENT, "'fs' holds floats, not ints");
  CHECK(ints == nullptr);
  double f = 0;
  ExpectStatus(dp_argdef_get_float(a, &f), DP_ERR_INVALID_ARGUMENT, "floats");

  const dp_argdef* empty = dp_opdef_find_arg(op, "no_fs");
  CHECK(dp_argdef_kind(empty) == DP_ARG_FLOATS);
  CHECK(dp_argdef_num_values(empty) == 0);
  n = 99;
  ExpectStatus(dp_argdef_get_floats(empty, &data, &n), DP_OK);
  CHECK(n == 0);
  dp_netdef_free(def);
}

TEST_CASE("capi introspection: strings") {
  dp_netdef* def = MakeNet();
  const dp_argdef* a = dp_opdef_find_arg(dp_netdef_op(def, 0), "ss");
  REQUIRE(a != nullptr);
  CHECK(dp_argdef_kind(a) == DP_ARG_STRINGS);
  CHECK(dp_argdef_num_values(a) == 3);
  const char* s = nullptr;
  ExpectStatus(dp_argdef_get_string_at(a, 0, &s), DP_OK);
  CHECK(std::string(s) == "alpha");
  ExpectStatus(dp_argdef_get_string_at(a, 1, &s), DP_OK);
  CHECK(std::string(s) == "");
  ExpectStatus(dp_argdef_get_string_at(a, 2, &s), DP_OK);
  CHECK(std::string(s) == "\xc3\xa9t\xc3\xa9");  // UTF-8 as given
  const char* untouched = "untouched";
  s = untouched;
  ExpectStatus(dp_argdef_get_string_at(a, 3, &s), DP_ERR_OUT_OF_RANGE, "index 3 is out of range: argument 'ss' has 3");
  ExpectStatus(dp_argdef_get_string_at(a, static_cast<size_t>(-1), &s), DP_ERR_OUT_OF_RANGE, "'ss'");
  CHECK(s == untouched);
  ExpectStatus(dp_argdef_get_string(a, &s), DP_ERR_INVALID_ARGUMENT, "holds strings, not string");
  ExpectStatus(dp_argdef_get_string_at(a, 0, nullptr), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(s == untouched);

  const dp_argdef* empty = dp_opdef_find_arg(dp_netdef_op(def, 0), "no_ss");
  CHECK(dp_argdef_num_values(empty) == 0);
  ExpectStatus(dp_argdef_get_string_at(empty, 0, &s), DP_ERR_OUT_OF_RANGE, "has 0 elements");
  dp_netdef_free(def);
}

TEST_CASE("capi introspection: nested nets") {
  dp_netdef* def = MakeNet();
  const dp_opdef* op = dp_netdef_op(def, 0);
  const dp_argdef* body = dp_opdef_find_arg(op, "body");
  const dp_argdef* branches = dp_opdef_find_arg(op, "branches");
  REQUIRE(body != nullptr);
  REQUIRE(branches != nullptr);
  CHECK(dp_argdef_kind(body) == DP_ARG_NET);
  CHECK(dp_argdef_num_values(body) == 1);
  CHECK(dp_argdef_kind(branches) == DP_ARG_NETS);
  CHECK(dp_argdef_num_values(branches) == 2);

  dp_netdef* inner = nullptr;
  ExpectStatus(dp_argdef_get_net(body, &inner), DP_OK);
  REQUIRE(inner != nullptr);
  dp_netdef* then_net = nullptr;
  dp_netdef* else_net = nullptr;
  ExpectStatus(dp_argdef_get_net_at(branches, 0, &then_net), DP_OK);
  ExpectStatus(dp_argdef_get_net_at(branches, 1, &else_net), DP_OK);
  dp_netdef* untouched = reinterpret_cast<dp_netdef*>(&untouched);
  dp_netdef* out = untouched;
  ExpectStatus(dp_argdef_get_net_at(branches, 2, &out), DP_ERR_OUT_OF_RANGE, "'branches' has 2 elements");
  ExpectStatus(dp_argdef_get_net(branches, &out), DP_ERR_INVALID_ARGUMENT, "holds nets, not net");
  ExpectStatus(dp_argdef_get_net_at(body, 0, &out), DP_ERR_INVALID_ARGUMENT, "holds net, not nets");
  ExpectStatus(dp_argdef_get_net_at(dp_opdef_find_arg(op, "no_nets"), 0, &out), DP_ERR_OUT_OF_RANGE, "0 elements");
  ExpectStatus(dp_argdef_get_net(body, nullptr), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(out == untouched);

  // The nested handles outlive their parent, and are netdefs like any other.
  dp_netdef_free(def);
  CHECK(std::string(dp_netdef_name(inner)) == "inner");
  CHECK(dp_netdef_num_ops(inner) == 1);
  CHECK(dp_netdef_executor(inner) == DP_EXECUTOR_SIMPLE);
  CHECK(dp_netdef_num_external_inputs(inner) == 1);
  CHECK(std::string(dp_netdef_external_input(inner, 0)) == "in");
  const dp_opdef* iop = dp_netdef_op(inner, 0);
  CHECK(std::string(dp_opdef_type(iop)) == "Relu");
  CHECK(dp_opdef_device_type(iop) == DP_DEVICE_CUDA);
  CHECK(dp_opdef_device_id(iop) == 3);
  CHECK(std::string(dp_netdef_name(then_net)) == "then");
  CHECK(std::string(dp_opdef_type(dp_netdef_op(then_net, 0))) == "Sigmoid");
  CHECK(std::string(dp_netdef_name(else_net)) == "else");
  CHECK(std::string(dp_opdef_type(dp_netdef_op(else_net, 0))) == "Tanh");
  dp_netdef_free(inner);
  dp_netdef_free(then_net);
  dp_netdef_free(else_net);
}
