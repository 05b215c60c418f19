/*
 * Test of the introspection part of dp's C API: net definitions (external
 * blobs, default device, executor settings, ops with their blobs, device,
 * engine and arguments of every kind), models (name, nets, optimizer) and
 * build information. Strict C11, as an embedding application or a binding
 * would use the API.
 *
 * Every check is counted; a failure prints file:line, the expression and the
 * status message. The last line of output is "<passed> passed, <failed>
 * failed"; the exit status is nonzero on any failure.
 */
#include <dp/dp.h>

#include "check.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Nets                                                                      */
/* ------------------------------------------------------------------------ */

/* Every field a definition can set: a default device and executor settings,
 * an op with its own device and engine, control inputs, and arguments of the
 * kinds that validated nets hold (FLOAT, INT, STRING, INTS; an INT given for
 * a float argument stays INT; an empty INTS list). The engine and the CUDA
 * device are only checked when a net is created, not here. */
static const char* kNetJson =
    "{\"name\":\"intro\","
    "\"external_inputs\":[\"x\",\"w\",\"b\"],"
    "\"external_outputs\":[\"y\",\"z\"],"
    "\"executor\":\"Async\",\"num_workers\":3,"
    "\"device\":{\"type\":\"CPU\",\"id\":2},"
    "\"ops\":["
    "{\"type\":\"FC\",\"name\":\"fc\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"h\"],"
    "\"args\":[{\"name\":\"activation\",\"s\":\"relu\"}],"
    "\"engine\":\"FAST\",\"device\":{\"type\":\"CUDA\",\"id\":1}},"
    "{\"type\":\"Scale\",\"inputs\":[\"h\"],\"outputs\":[\"y\"],\"control_inputs\":[\"h\"],"
    "\"args\":[{\"name\":\"scale\",\"f\":2.5}]},"
    "{\"type\":\"Scale\",\"name\":\"twice\",\"inputs\":[\"y\"],\"outputs\":[\"y2\"],"
    "\"args\":[{\"name\":\"scale\",\"i\":2}]},"
    "{\"type\":\"XavierFill\",\"outputs\":[\"z\"],"
    "\"args\":[{\"name\":\"shape\",\"ints\":[3,-4,5000000000]},{\"name\":\"seed\",\"i\":-7}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"s\"],\"args\":[{\"name\":\"shape\",\"ints\":[]}]}"
    "]}";

static dp_netdef* load_net(const char* json) {
  dp_netdef* def = NULL;
  if (!EXPECT_OK(dp_netdef_from_json(json, strlen(json), &def))) return NULL;
  return def;
}

static void test_net_level(const dp_netdef* def) {
  CHECK(streq(dp_netdef_name(def), "intro"));
  CHECK(dp_netdef_num_ops(def) == 5);
  CHECK(dp_netdef_num_external_inputs(def) == 3);
  CHECK(streq(dp_netdef_external_input(def, 0), "x"));
  CHECK(streq(dp_netdef_external_input(def, 1), "w"));
  CHECK(streq(dp_netdef_external_input(def, 2), "b"));
  CHECK(dp_netdef_external_input(def, 3) == NULL);
  CHECK(dp_netdef_external_input(def, (size_t)-1) == NULL);
  CHECK(dp_netdef_num_external_outputs(def) == 2);
  CHECK(streq(dp_netdef_external_output(def, 0), "y"));
  CHECK(streq(dp_netdef_external_output(def, 1), "z"));
  CHECK(dp_netdef_external_output(def, 2) == NULL);
  CHECK(dp_netdef_device_type(def) == DP_DEVICE_CPU);
  CHECK(dp_netdef_device_id(def) == 2);
  CHECK(dp_netdef_executor(def) == DP_EXECUTOR_ASYNC);
  CHECK(dp_netdef_num_workers(def) == 3);
  CHECK(dp_netdef_op(def, 5) == NULL);
  CHECK(dp_netdef_op(def, (size_t)-1) == NULL);
}

static void test_op_fc(const dp_netdef* def) {
  const dp_opdef* op = dp_netdef_op(def, 0);
  const dp_argdef* a;
  const char* s = NULL;
  double f = -1;
  int64_t i = -1;
  if (!CHECK(op != NULL)) return;
  CHECK(dp_netdef_op(def, 0) == op); /* a view of the same op every time */
  CHECK(streq(dp_opdef_type(op), "FC"));
  CHECK(streq(dp_opdef_name(op), "fc"));
  CHECK(streq(dp_opdef_engine(op), "FAST"));
  CHECK(dp_opdef_num_inputs(op) == 3);
  CHECK(streq(dp_opdef_input(op, 0), "x"));
  CHECK(streq(dp_opdef_input(op, 1), "w"));
  CHECK(streq(dp_opdef_input(op, 2), "b"));
  CHECK(dp_opdef_input(op, 3) == NULL);
  CHECK(dp_opdef_num_outputs(op) == 1);
  CHECK(streq(dp_opdef_output(op, 0), "h"));
  CHECK(dp_opdef_output(op, 1) == NULL);
  CHECK(dp_opdef_num_control_inputs(op) == 0);
  CHECK(dp_opdef_control_input(op, 0) == NULL);
  CHECK(dp_opdef_device_type(op) == DP_DEVICE_CUDA);
  CHECK(dp_opdef_device_id(op) == 1);
  CHECK(dp_opdef_num_args(op) == 1);
  CHECK(dp_opdef_arg(op, 1) == NULL);
  a = dp_opdef_arg(op, 0);
  if (!CHECK(a != NULL)) return;
  CHECK(dp_opdef_find_arg(op, "activation") == a);
  CHECK(dp_opdef_find_arg(op, "activatio") == NULL);
  CHECK(dp_opdef_find_arg(op, "") == NULL);
  CHECK(dp_opdef_find_arg(op, NULL) == NULL);
  CHECK(streq(dp_argdef_name(a), "activation"));
  CHECK(dp_argdef_kind(a) == DP_ARG_STRING);
  CHECK(dp_argdef_num_values(a) == 1);
  if (EXPECT_OK(dp_argdef_get_string(a, &s))) CHECK(streq(s, "relu"));
  /* Other kinds are refused, naming the argument and both kinds; outputs untouched. */
  EXPECT_ERR2(dp_argdef_get_float(a, &f), DP_ERR_INVALID_ARGUMENT, "activation", "string");
  EXPECT_ERR2(dp_argdef_get_int(a, &i), DP_ERR_INVALID_ARGUMENT, "'activation' holds string", "not int");
  CHECK(f == -1 && i == -1);
  s = SENTINEL;
  EXPECT_ERR(dp_argdef_get_string_at(a, 0, &s), DP_ERR_INVALID_ARGUMENT, "strings");
  CHECK(s == SENTINEL);
  EXPECT_ERR(dp_argdef_get_string(a, NULL), DP_ERR_INVALID_ARGUMENT, "out");
}

static void test_op_scale(const dp_netdef* def) {
  const dp_opdef* op = dp_netdef_op(def, 1);
  const dp_opdef* twice = dp_netdef_op(def, 2);
  const dp_argdef* a;
  double f = -1;
  int64_t i = -1;
  const char* s = SENTINEL;
  if (!CHECK(op != NULL && twice != NULL)) return;
  CHECK(streq(dp_opdef_type(op), "Scale"));
  CHECK(streq(dp_opdef_name(op), "")); /* unnamed */
  CHECK(streq(dp_opdef_engine(op), ""));
  CHECK(dp_opdef_num_control_inputs(op) == 1);
  CHECK(streq(dp_opdef_control_input(op, 0), "h"));
  CHECK(dp_opdef_control_input(op, 1) == NULL);
  /* No device of its own: DP_DEVICE_NONE, and it runs on the net's. */
  CHECK(dp_opdef_device_type(op) == DP_DEVICE_NONE);
  CHECK(dp_opdef_device_id(op) == DP_DEVICE_NONE);
  a = dp_opdef_find_arg(op, "scale");
  if (!CHECK(a != NULL)) return;
  CHECK(dp_opdef_arg(op, 0) == a);
  CHECK(dp_argdef_kind(a) == DP_ARG_FLOAT);
  CHECK(dp_argdef_num_values(a) == 1);
  if (EXPECT_OK(dp_argdef_get_float(a, &f))) CHECK(f == 2.5);
  EXPECT_ERR2(dp_argdef_get_int(a, &i), DP_ERR_INVALID_ARGUMENT, "float", "int");
  EXPECT_ERR(dp_argdef_get_string(a, &s), DP_ERR_INVALID_ARGUMENT, "scale");
  CHECK(i == -1 && s == SENTINEL);
  EXPECT_ERR(dp_argdef_get_float(a, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  /* The float argument given as an integer keeps its kind: no conversions. */
  CHECK(streq(dp_opdef_name(twice), "twice"));
  a = dp_opdef_find_arg(twice, "scale");
  if (!CHECK(a != NULL)) return;
  CHECK(dp_argdef_kind(a) == DP_ARG_INT);
  if (EXPECT_OK(dp_argdef_get_int(a, &i))) CHECK(i == 2);
  f = -1;
  EXPECT_ERR2(dp_argdef_get_float(a, &f), DP_ERR_INVALID_ARGUMENT, "holds int", "not float");
  CHECK(f == -1);
}

static void test_op_fill(const dp_netdef* def) {
  const dp_opdef* op = dp_netdef_op(def, 3);
  const dp_opdef* empty = dp_netdef_op(def, 4);
  const dp_argdef *shape, *seed;
  const int64_t* ints = SENTINEL;
  const double* floats = SENTINEL;
  size_t n = 99;
  int64_t i = 0;
  if (!CHECK(op != NULL && empty != NULL)) return;
  CHECK(streq(dp_opdef_type(op), "XavierFill"));
  CHECK(dp_opdef_num_inputs(op) == 0);
  CHECK(dp_opdef_input(op, 0) == NULL);
  CHECK(dp_opdef_num_args(op) == 2);
  shape = dp_opdef_arg(op, 0);
  seed = dp_opdef_arg(op, 1);
  CHECK(dp_opdef_find_arg(op, "seed") == seed);
  CHECK(streq(dp_argdef_name(shape), "shape"));
  CHECK(dp_argdef_kind(shape) == DP_ARG_INTS);
  CHECK(dp_argdef_num_values(shape) == 3);
  if (EXPECT_OK(dp_argdef_get_ints(shape, &ints, &n))) {
    CHECK(n == 3);
    CHECK(ints != NULL && ints[0] == 3 && ints[1] == -4 && ints[2] == INT64_C(5000000000));
  }
  n = 99;
  EXPECT_ERR2(dp_argdef_get_floats(shape, &floats, &n), DP_ERR_INVALID_ARGUMENT, "ints", "floats");
  CHECK(floats == SENTINEL && n == 99);
  EXPECT_ERR(dp_argdef_get_ints(shape, NULL, &n), DP_ERR_INVALID_ARGUMENT, "out_data");
  EXPECT_ERR(dp_argdef_get_ints(shape, &ints, NULL), DP_ERR_INVALID_ARGUMENT, "out_count");
  EXPECT_ERR(dp_argdef_get_int(shape, &i), DP_ERR_INVALID_ARGUMENT, "ints");
  CHECK(dp_argdef_kind(seed) == DP_ARG_INT);
  if (EXPECT_OK(dp_argdef_get_int(seed, &i))) CHECK(i == -7);
  /* An empty list: kind INTS, no values. */
  shape = dp_opdef_find_arg(empty, "shape");
  CHECK(dp_argdef_kind(shape) == DP_ARG_INTS);
  CHECK(dp_argdef_num_values(shape) == 0);
  n = 99;
  if (EXPECT_OK(dp_argdef_get_ints(shape, &ints, &n))) CHECK(n == 0);
}

/* The getters of a NULL handle: 0, "", NULL or DP_DEVICE_NONE; those with a
 * status: DP_ERR_INVALID_ARGUMENT naming the parameter. */
static void test_null_handles(void) {
  double f = -1;
  int64_t i = -1;
  const char* s = SENTINEL;
  const double* fd = SENTINEL;
  const int64_t* id = SENTINEL;
  size_t n = 99;
  dp_netdef* nd = SENTINEL;
  CHECK(dp_netdef_num_external_inputs(NULL) == 0);
  CHECK(dp_netdef_external_input(NULL, 0) == NULL);
  CHECK(dp_netdef_num_external_outputs(NULL) == 0);
  CHECK(dp_netdef_external_output(NULL, 0) == NULL);
  CHECK(dp_netdef_device_type(NULL) == DP_DEVICE_NONE);
  CHECK(dp_netdef_device_id(NULL) == DP_DEVICE_NONE);
  CHECK(dp_netdef_executor(NULL) == DP_EXECUTOR_DEFAULT);
  CHECK(dp_netdef_num_workers(NULL) == 0);
  CHECK(dp_netdef_op(NULL, 0) == NULL);
  CHECK(streq(dp_opdef_type(NULL), ""));
  CHECK(streq(dp_opdef_name(NULL), ""));
  CHECK(streq(dp_opdef_engine(NULL), ""));
  CHECK(dp_opdef_num_inputs(NULL) == 0 && dp_opdef_input(NULL, 0) == NULL);
  CHECK(dp_opdef_num_outputs(NULL) == 0 && dp_opdef_output(NULL, 0) == NULL);
  CHECK(dp_opdef_num_control_inputs(NULL) == 0 && dp_opdef_control_input(NULL, 0) == NULL);
  CHECK(dp_opdef_device_type(NULL) == DP_DEVICE_NONE && dp_opdef_device_id(NULL) == DP_DEVICE_NONE);
  CHECK(dp_opdef_num_args(NULL) == 0);
  CHECK(dp_opdef_arg(NULL, 0) == NULL);
  CHECK(dp_opdef_find_arg(NULL, "x") == NULL);
  CHECK(streq(dp_argdef_name(NULL), ""));
  CHECK(dp_argdef_kind(NULL) == 0);
  CHECK(dp_argdef_num_values(NULL) == 0);
  EXPECT_ERR(dp_argdef_get_float(NULL, &f), DP_ERR_INVALID_ARGUMENT, "arg");
  EXPECT_ERR(dp_argdef_get_int(NULL, &i), DP_ERR_INVALID_ARGUMENT, "arg");
  EXPECT_ERR(dp_argdef_get_string(NULL, &s), DP_ERR_INVALID_ARGUMENT, "arg");
  EXPECT_ERR(dp_argdef_get_floats(NULL, &fd, &n), DP_ERR_INVALID_ARGUMENT, "arg");
  EXPECT_ERR(dp_argdef_get_ints(NULL, &id, &n), DP_ERR_INVALID_ARGUMENT, "arg");
  EXPECT_ERR(dp_argdef_get_string_at(NULL, 0, &s), DP_ERR_INVALID_ARGUMENT, "arg");
  EXPECT_ERR(dp_argdef_get_net(NULL, &nd), DP_ERR_INVALID_ARGUMENT, "arg");
  EXPECT_ERR(dp_argdef_get_net_at(NULL, 0, &nd), DP_ERR_INVALID_ARGUMENT, "arg");
  CHECK(f == -1 && i == -1 && s == SENTINEL && fd == SENTINEL && id == SENTINEL && n == 99 && nd == SENTINEL);
  CHECK(streq(dp_model_name(NULL), ""));
  CHECK(dp_model_has_optimizer(NULL) == 0);
}

static void test_netdef_introspection(void) {
  dp_netdef* def = load_net(kNetJson);
  dp_netdef* again = NULL;
  dp_buffer* buf = NULL;
  if (def == NULL) return;
  test_net_level(def);
  test_op_fc(def);
  test_op_scale(def);
  test_op_fill(def);
  /* The same contents after a binary round trip. */
  if (EXPECT_OK(dp_netdef_to_buffer(def, &buf)) &&
      EXPECT_OK(dp_netdef_from_buffer(dp_buffer_data(buf), dp_buffer_size(buf), &again))) {
    test_net_level(again);
    test_op_fc(again);
    test_op_scale(again);
    test_op_fill(again);
  }
  dp_netdef_free(again);
  dp_buffer_free(buf);
  dp_netdef_free(def);
}

/* A definition that sets nothing optional: defaults everywhere. */
static void test_netdef_defaults(void) {
  const char* json = "{\"ops\":[{\"type\":\"ConstantFill\",\"outputs\":[\"y\"]}]}";
  dp_netdef* def = load_net(json);
  const dp_opdef* op;
  if (def == NULL) return;
  CHECK(streq(dp_netdef_name(def), ""));
  CHECK(dp_netdef_num_external_inputs(def) == 0 && dp_netdef_external_input(def, 0) == NULL);
  CHECK(dp_netdef_num_external_outputs(def) == 0);
  CHECK(dp_netdef_device_type(def) == DP_DEVICE_CPU && dp_netdef_device_id(def) == 0);
  CHECK(dp_netdef_executor(def) == DP_EXECUTOR_DEFAULT);
  CHECK(dp_netdef_num_workers(def) == 0);
  op = dp_netdef_op(def, 0);
  CHECK(streq(dp_opdef_type(op), "ConstantFill"));
  CHECK(streq(dp_opdef_name(op), "") && streq(dp_opdef_engine(op), ""));
  CHECK(dp_opdef_num_args(op) == 0 && dp_opdef_arg(op, 0) == NULL);
  CHECK(dp_opdef_device_type(op) == DP_DEVICE_NONE);
  dp_netdef_free(def);
}

/* Views and strings stay valid while the definition lives, whichever
 * handles and nets came from it meanwhile. */
static void test_view_lifetime(void) {
  dp_netdef* def = load_net(kNetJson);
  const dp_opdef* op;
  const char* type;
  const int64_t* ints = NULL;
  size_t n = 0;
  dp_buffer* json = NULL;
  if (def == NULL) return;
  op = dp_netdef_op(def, 3);
  type = dp_opdef_type(op);
  EXPECT_OK(dp_argdef_get_ints(dp_opdef_find_arg(op, "shape"), &ints, &n));
  EXPECT_OK(dp_netdef_to_json(def, &json)); /* other calls do not disturb the views */
  dp_buffer_free(json);
  CHECK(streq(type, "XavierFill") && type == dp_opdef_type(dp_netdef_op(def, 3)));
  CHECK(n == 3 && ints != NULL && ints[0] == 3);
  dp_netdef_free(def);
}

/* ------------------------------------------------------------------------ */
/* Models                                                                    */
/* ------------------------------------------------------------------------ */

static const char* kModelJson =
    "{\"name\":\"lin\","
    "\"init_net\":{\"name\":\"lin_init\",\"ops\":["
    "{\"type\":\"XavierFill\",\"outputs\":[\"w\"],\"args\":[{\"name\":\"shape\",\"ints\":[3,4]},{\"name\":\"seed\",\"i\":5}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"b\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]}]}]},"
    "\"forward_net\":{\"name\":\"lin_forward\",\"ops\":["
    "{\"type\":\"FC\",\"name\":\"fc\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"logits\"]},"
    "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"logits\",\"label\"],\"outputs\":[\"p\",\"loss\"]},"
    "{\"type\":\"Accuracy\",\"inputs\":[\"p\",\"label\"],\"outputs\":[\"acc\"]}]},"
    "\"params\":[\"w\",\"b\"],\"inputs\":[\"x\",\"label\"],\"losses\":[\"loss\"],\"metrics\":[\"acc\"],"
    "\"optimizer\":{\"type\":\"momentum\",\"lr\":0.5,\"momentum\":0.25,\"nesterov\":true,\"weight_decay\":0.001,"
    "\"lr_policy\":\"step\",\"gamma\":0.5,\"stepsize\":100,\"warmup_iters\":10}}";

static int has_name(const dp_netdef* def, const char* name) {
  size_t i;
  for (i = 0; i < dp_netdef_num_external_inputs(def); ++i)
    if (streq(dp_netdef_external_input(def, i), name)) return 1;
  return 0;
}

/* The index of the first op of `type` writing `output`, or -1. */
static long find_op(const dp_netdef* def, const char* type, const char* output) {
  size_t i, k;
  for (i = 0; i < dp_netdef_num_ops(def); ++i) {
    const dp_opdef* op = dp_netdef_op(def, i);
    if (!streq(dp_opdef_type(op), type)) continue;
    for (k = 0; k < dp_opdef_num_outputs(op); ++k)
      if (streq(dp_opdef_output(op, k), output)) return (long)i;
  }
  return -1;
}

static void test_model_nets(void) {
  dp_model* model = NULL;
  dp_netdef *init = NULL, *fwd = NULL, *untouched = SENTINEL;
  const dp_opdef* op;
  int64_t seed = 0;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;
  CHECK(streq(dp_model_name(model), "lin"));
  if (EXPECT_OK(dp_model_net(model, DP_MODEL_INIT_NET, &init))) {
    CHECK(streq(dp_netdef_name(init), "lin_init"));
    CHECK(dp_netdef_num_ops(init) == 2);
    op = dp_netdef_op(init, 0);
    CHECK(streq(dp_opdef_type(op), "XavierFill") && streq(dp_opdef_output(op, 0), "w"));
    if (EXPECT_OK(dp_argdef_get_int(dp_opdef_find_arg(op, "seed"), &seed))) CHECK(seed == 5);
  }
  if (EXPECT_OK(dp_model_net(model, DP_MODEL_FORWARD_NET, &fwd))) {
    CHECK(streq(dp_netdef_name(fwd), "lin_forward"));
    CHECK(dp_netdef_num_ops(fwd) == 3);
    CHECK(streq(dp_opdef_name(dp_netdef_op(fwd, 0)), "fc"));
    CHECK(streq(dp_opdef_type(dp_netdef_op(fwd, 2)), "Accuracy"));
    /* Validation lists params and inputs as the forward net's external inputs. */
    CHECK(has_name(fwd, "x") && has_name(fwd, "label") && has_name(fwd, "w") && has_name(fwd, "b"));
  }
  EXPECT_ERR(dp_model_net(model, 2, &untouched), DP_ERR_INVALID_ARGUMENT, "2");
  EXPECT_ERR(dp_model_net(model, -1, &untouched), DP_ERR_INVALID_ARGUMENT, "-1");
  EXPECT_ERR(dp_model_net(NULL, DP_MODEL_INIT_NET, &untouched), DP_ERR_INVALID_ARGUMENT, "model");
  EXPECT_ERR(dp_model_net(model, DP_MODEL_INIT_NET, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(untouched == SENTINEL);
  /* The nets outlive the model handle and still run. */
  dp_model_free(model);
  if (fwd != NULL) {
    CHECK(streq(dp_opdef_type(dp_netdef_op(fwd, 1)), "SoftmaxWithLoss"));
    CHECK(streq(dp_opdef_output(dp_netdef_op(fwd, 1), 1), "loss"));
  }
  if (init != NULL) {
    dp_workspace* ws = NULL;
    dp_net* net = NULL;
    int32_t has = 0;
    if (EXPECT_OK(dp_workspace_create(&ws)) && EXPECT_OK(dp_net_create(ws, init, NULL, &net)) &&
        EXPECT_OK(dp_net_run(net)) && EXPECT_OK(dp_workspace_has_blob(ws, "w", &has)))
      CHECK(has == 1);
    dp_net_free(net);
    dp_workspace_free(ws);
  }
  dp_netdef_free(init);
  dp_netdef_free(fwd);
}

static void test_model_optimizer(void) {
  dp_model* model = NULL;
  dp_optimizer_info info;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;
  CHECK(dp_model_has_optimizer(model) == 1);
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (EXPECT_OK(dp_model_get_optimizer(model, &info))) {
    CHECK(info.struct_size == sizeof info);
    CHECK(streq(info.type, "momentum"));
    CHECK(info.lr == 0.5);
    CHECK(info.momentum == 0.25);
    CHECK(info.nesterov == 1);
    CHECK(info.weight_decay == 0.001);
    CHECK(streq(info.lr_policy, "step"));
    CHECK(info.gamma == 0.5);
    CHECK(info.stepsize == 100);
    CHECK(info.warmup_iters == 10);
    /* Fields the model leaves out have the format's defaults. */
    CHECK(info.beta1 == 0.9 && info.beta2 == 0.999 && info.epsilon == 1e-8);
    CHECK(info.power == 1 && info.max_iter == 1 && info.warmup_start_factor == 0.1);
  }
  /* A shorter struct (an older caller): only the fields within it are written. */
  memset(&info, 0x5a, sizeof info);
  info.struct_size = (uint32_t)(offsetof(dp_optimizer_info, lr) + sizeof info.lr);
  if (EXPECT_OK(dp_model_get_optimizer(model, &info))) {
    unsigned char after[sizeof info];
    const unsigned char* p = (const unsigned char*)&info;
    size_t k, start = offsetof(dp_optimizer_info, lr) + sizeof info.lr;
    int intact = 1;
    memset(after, 0x5a, sizeof after);
    for (k = start; k < sizeof info; ++k) intact = intact && p[k] == after[k];
    CHECK(streq(info.type, "momentum") && info.lr == 0.5);
    CHECK(intact);
  }
  info.struct_size = 0;
  info.lr = -3;
  EXPECT_ERR(dp_model_get_optimizer(model, &info), DP_ERR_INVALID_ARGUMENT, "struct_size");
  CHECK(info.lr == -3);
  EXPECT_ERR(dp_model_get_optimizer(model, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  info.struct_size = sizeof info;
  EXPECT_ERR(dp_model_get_optimizer(NULL, &info), DP_ERR_INVALID_ARGUMENT, "model");
  dp_model_free(model);

  /* Without an optimizer: DP_ERR_NOT_FOUND naming the model, *out untouched. */
  {
    const char* json =
        "{\"name\":\"plain\",\"init_net\":{\"ops\":[{\"type\":\"ConstantFill\",\"outputs\":[\"w\"],"
        "\"args\":[{\"name\":\"shape\",\"ints\":[2]}]}]},"
        "\"forward_net\":{\"ops\":[{\"type\":\"Mul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"loss\"]}]},"
        "\"params\":[\"w\"],\"inputs\":[\"x\"],\"losses\":[\"loss\"]}";
    model = NULL;
    if (EXPECT_OK(dp_model_from_json(json, strlen(json), &model))) {
      CHECK(dp_model_has_optimizer(model) == 0);
      CHECK(streq(dp_model_name(model), "plain"));
      memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      info.lr = 7;
      EXPECT_ERR2(dp_model_get_optimizer(model, &info), DP_ERR_NOT_FOUND, "plain", "no optimizer");
      CHECK(info.lr == 7 && info.type == NULL);
      dp_model_free(model);
    }
  }
}

/* What dp_model_build_training makes is inspectable: the optimizer's ops
 * with their arguments, the forward ops, and the devices set by training. */
static void test_training_round_trip(void) {
  dp_model* model = NULL;
  dp_netdef *init = NULL, *train = NULL, *eval = NULL;
  dp_training_options topt = DP_TRAINING_OPTIONS_INIT;
  long i;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;
  topt.lr = 0.125;
  if (!EXPECT_OK(dp_model_build_training(model, &topt, &init, &train, &eval))) goto done;
  /* init: the model's init ops, then the iteration counter on the CPU. */
  CHECK(dp_netdef_num_ops(init) > 2);
  CHECK(streq(dp_opdef_type(dp_netdef_op(init, 0)), "XavierFill"));
  i = find_op(init, "ConstantFill", "optimizer/iter");
  if (CHECK(i >= 0)) {
    const dp_opdef* op = dp_netdef_op(init, (size_t)i);
    const int64_t* shape = NULL;
    size_t n = 0;
    CHECK(dp_opdef_device_type(op) == DP_DEVICE_CPU && dp_opdef_device_id(op) == 0);
    if (EXPECT_OK(dp_argdef_get_ints(dp_opdef_find_arg(op, "shape"), &shape, &n))) CHECK(n == 1 && shape[0] == 1);
  }
  /* The momentum buffers, shaped like their params (the param is the input). */
  i = find_op(init, "ConstantFill", "w/momentum");
  if (CHECK(i >= 0)) CHECK(streq(dp_opdef_input(dp_netdef_op(init, (size_t)i), 0), "w"));
  CHECK(find_op(init, "ConstantFill", "b/momentum") >= 0);
  /* train: the learning rate with the overridden base rate and the model's schedule. */
  i = find_op(train, "LearningRate", "optimizer/lr");
  if (CHECK(i >= 0)) {
    const dp_opdef* op = dp_netdef_op(train, (size_t)i);
    double lr = 0, gamma = 0;
    int64_t stepsize = 0;
    const char* policy = NULL;
    CHECK(streq(dp_opdef_input(op, 0), "optimizer/iter"));
    CHECK(dp_opdef_device_type(op) == DP_DEVICE_CPU);
    if (EXPECT_OK(dp_argdef_get_float(dp_opdef_find_arg(op, "base_lr"), &lr))) CHECK(lr == 0.125);
    if (EXPECT_OK(dp_argdef_get_string(dp_opdef_find_arg(op, "policy"), &policy))) CHECK(streq(policy, "step"));
    if (EXPECT_OK(dp_argdef_get_float(dp_opdef_find_arg(op, "gamma"), &gamma))) CHECK(gamma == 0.5);
    if (EXPECT_OK(dp_argdef_get_int(dp_opdef_find_arg(op, "stepsize"), &stepsize))) CHECK(stepsize == 100);
  }
  CHECK(find_op(train, "FC", "logits") >= 0);
  CHECK(find_op(train, "MomentumSGD", "w") >= 0);
  CHECK(find_op(train, "MomentumSGD", "b") >= 0);
  CHECK(find_op(train, "MomentumSGD", "w") > find_op(train, "FC", "logits"));
  /* eval: the forward net, no optimizer. */
  CHECK(find_op(eval, "FC", "logits") >= 0);
  CHECK(find_op(eval, "LearningRate", "optimizer/lr") < 0);
  CHECK(find_op(eval, "MomentumSGD", "w") < 0);
done:
  dp_netdef_free(init);
  dp_netdef_free(train);
  dp_netdef_free(eval);
  dp_model_free(model);
}

/* ------------------------------------------------------------------------ */
/* Build information                                                         */
/* ------------------------------------------------------------------------ */

static void test_build_info(void) {
  dp_build_info info;
  int32_t cuda_devices = -1;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (!EXPECT_OK(dp_build_info_get(&info))) return;
  CHECK(info.struct_size == sizeof info);
  CHECK(streq(info.version, dp_version()));
  CHECK(info.cuda == 0 || info.cuda == 1);
  CHECK(streq(info.blas, "OpenBLAS"));
  CHECK(info.blas_config != NULL && strstr(info.blas_config, "OpenBLAS") != NULL);
  CHECK(info.compiler != NULL && info.compiler[0] != '\0');
  CHECK(info.build_type != NULL && info.build_type[0] != '\0');
  CHECK(info.cuda_archs != NULL);
  EXPECT_OK(dp_device_count(DP_DEVICE_CUDA, &cuda_devices));
  printf("build: dp %s, cuda %d (runtime %d, driver %d, cuBLAS %d, NCCL %d, archs \"%s\"), %d CUDA devices\n"
         "       %s [%s], %s, %s\n",
         info.version, (int)info.cuda, (int)info.cuda_runtime_version, (int)info.cuda_driver_version,
         (int)info.cublas_version, (int)info.nccl_version, info.cuda_archs, (int)cuda_devices, info.blas,
         info.blas_config, info.compiler, info.build_type);
  if (info.cuda) {
    /* Compiled-against versions: CUDA >= 11, cuBLAS >= 11, NCCL >= 2. */
    CHECK(info.cuda_runtime_version >= 11000);
    CHECK(info.cublas_version >= 110000);
    CHECK(info.nccl_version >= 20000);
    CHECK(info.cuda_archs[0] >= '1' && info.cuda_archs[0] <= '9');
    CHECK(info.cuda_driver_version >= 0);
    /* GPUs need a driver; a driver new enough for the runtime is what runs them. */
    if (cuda_devices > 0) CHECK(info.cuda_driver_version > 0);
    if (info.cuda_driver_version == 0) CHECK(cuda_devices == 0);
  } else {
    CHECK(info.cuda_runtime_version == 0);
    CHECK(info.cuda_driver_version == 0);
    CHECK(info.cublas_version == 0);
    CHECK(info.nccl_version == 0);
    CHECK(streq(info.cuda_archs, ""));
    CHECK(cuda_devices == 0);
  }
  /* Strings are static: the same pointers on every call. */
  {
    dp_build_info again;
    memset(&again, 0, sizeof again);
    again.struct_size = sizeof again;
    if (EXPECT_OK(dp_build_info_get(&again)))
      CHECK(again.version == info.version && again.blas_config == info.blas_config &&
            again.compiler == info.compiler && again.cuda_driver_version == info.cuda_driver_version);
  }
  /* A shorter struct (older caller) is written only within struct_size. */
  {
    dp_build_info part;
    const unsigned char* p = (const unsigned char*)&part;
    size_t k, end = offsetof(dp_build_info, cuda) + sizeof part.cuda;
    int intact = 1;
    memset(&part, 0xa5, sizeof part);
    part.struct_size = (uint32_t)end;
    if (EXPECT_OK(dp_build_info_get(&part))) {
      CHECK(streq(part.version, dp_version()) && part.cuda == info.cuda);
      for (k = end; k < sizeof part; ++k) intact = intact && p[k] == 0xa5;
      CHECK(intact);
    }
    /* Only struct_size itself: nothing to write, success. */
    memset(&part, 0xa5, sizeof part);
    part.struct_size = sizeof(uint32_t);
    if (EXPECT_OK(dp_build_info_get(&part))) {
      intact = 1;
      for (k = sizeof(uint32_t); k < sizeof part; ++k) intact = intact && p[k] == 0xa5;
      CHECK(intact);
    }
    memset(&part, 0xa5, sizeof part);
    part.struct_size = 0;
    EXPECT_ERR(dp_build_info_get(&part), DP_ERR_INVALID_ARGUMENT, "struct_size");
    intact = 1;
    for (k = sizeof(uint32_t); k < sizeof part; ++k) intact = intact && p[k] == 0xa5;
    CHECK(intact);
  }
  EXPECT_ERR(dp_build_info_get(NULL), DP_ERR_INVALID_ARGUMENT, "out");
}

/* ------------------------------------------------------------------------ */

typedef struct {
  const char* name;
  void (*fn)(void);
} test_case;

static const test_case kTests[] = {
    {"netdef_introspection", test_netdef_introspection},
    {"netdef_defaults", test_netdef_defaults},
    {"view_lifetime", test_view_lifetime},
    {"null_handles", test_null_handles},
    {"model_nets", test_model_nets},
    {"model_optimizer", test_model_optimizer},
    {"training_round_trip", test_training_round_trip},
    {"build_info", test_build_info},
};

int main(void) {
  size_t i;
  for (i = 0; i < sizeof kTests / sizeof kTests[0]; ++i) {
    int before = g_failures;
    kTests[i].fn();
    if (g_failures != before) fprintf(stderr, "FAILED: %s (%d failed checks)\n", kTests[i].name, g_failures - before);
  }
  return check_report();
}
