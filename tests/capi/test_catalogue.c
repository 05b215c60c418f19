/*
 * Test of the op catalogue of dp's C API (dp_opschema_*): the list of op
 * types, each type's inputs, outputs, arguments with kinds and defaults,
 * in-place rules, kernels per device and gradient; the "did you mean" of
 * unknown types; and Sub, Div and SquaredL2Distance in a model trained
 * through dp_model_build_training. Strict C11, as an embedding application or
 * a binding would use the API.
 *
 * Every check is counted; a failure prints file:line, the expression and the
 * status message. The last line of output is "<passed> passed, <failed>
 * failed"; the exit status is nonzero on any failure.
 */
#include <dp/dp.h>

#include "check.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The schema of `type`, or NULL after a failed check. */
static dp_opschema* schema_of(const char* type) {
  dp_opschema* s = NULL;
  if (!EXPECT_OK(dp_opschema_from_type(type, &s))) return NULL;
  return s;
}

/* The index of argument `name` of `s`, or (size_t)-1. */
static size_t arg_index(const dp_opschema* s, const char* name) {
  size_t i;
  for (i = 0; i < dp_opschema_num_args(s); ++i)
    if (streq(dp_opschema_arg_name(s, i), name)) return i;
  return (size_t)-1;
}

/* ------------------------------------------------------------------------ */

static void test_list_types(void) {
  dp_string_list* types = NULL;
  size_t i, n;
  int relu = 0, sub = 0, div = 0, l2 = 0, l2grad = 0, relu_grad = 0;
  if (!EXPECT_OK(dp_opschema_list_types(&types))) return;
  n = dp_string_list_size(types);
  CHECK(n >= 70);
  for (i = 0; i < n; ++i) {
    const char* t = dp_string_list_get(types, i);
    dp_opschema* s = NULL;
    if (i > 0) CHECK(strcmp(dp_string_list_get(types, i - 1), t) < 0); /* sorted, no duplicates */
    relu += streq(t, "Relu");
    relu_grad += streq(t, "ReluGradient");
    sub += streq(t, "Sub");
    div += streq(t, "Div");
    l2 += streq(t, "SquaredL2Distance");
    l2grad += streq(t, "SquaredL2DistanceGradient");
    /* Every listed type has a schema, a description and a CPU kernel. */
    if (EXPECT_OK(dp_opschema_from_type(t, &s))) {
      CHECK(streq(dp_opschema_type(s), t));
      CHECK(strlen(dp_opschema_doc(s)) > 0);
      CHECK(dp_opschema_has_kernel(s, DP_DEVICE_CPU) == 1);
      CHECK(dp_opschema_min_inputs(s) <= dp_opschema_max_inputs(s));
      CHECK(dp_opschema_min_outputs(s) <= dp_opschema_max_outputs(s));
    }
    dp_opschema_free(s);
  }
  CHECK(relu == 1 && relu_grad == 1 && sub == 1 && div == 1 && l2 == 1 && l2grad == 1);
  dp_string_list_free(types);
  EXPECT_ERR(dp_opschema_list_types(NULL), DP_ERR_INVALID_ARGUMENT, "out");
}

static void test_unknown_types(void) {
  dp_opschema* s = (dp_opschema*)SENTINEL;
  dp_netdef* def = (dp_netdef*)SENTINEL;
  static const char kNet[] =
      "{\"name\":\"n\",\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Relux\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}";
  EXPECT_ERR2(dp_opschema_from_type("Relux", &s), DP_ERR_NOT_FOUND, "dp_opschema_from_type",
              "unknown operator type 'Relux' (did you mean 'Relu'?)");
  EXPECT_ERR(dp_opschema_from_type("softmax", &s), DP_ERR_NOT_FOUND, "did you mean 'Softmax'?");
  EXPECT_ERR(dp_opschema_from_type("Convolution", &s), DP_ERR_NOT_FOUND, "unknown operator type 'Convolution'");
  EXPECT_ERR(dp_opschema_from_type(NULL, &s), DP_ERR_INVALID_ARGUMENT, "type");
  CHECK(s == SENTINEL); /* failures leave the out-parameter untouched */
  EXPECT_ERR(dp_opschema_from_type("Relu", NULL), DP_ERR_INVALID_ARGUMENT, "out");
  /* A net naming the type gets the same suggestion. */
  EXPECT_ERR3(dp_netdef_from_json(kNet, strlen(kNet), &def), DP_ERR_INVALID_NET, "op 0 (Relux)",
              "unknown operator type 'Relux'", "did you mean 'Relu'?");
  CHECK(def == SENTINEL);
}

static void test_fc(void) {
  dp_opschema* s = schema_of("FC");
  size_t axis, act;
  const dp_argdef* d;
  int64_t iv = 0;
  double fv = 0;
  const char* sv = NULL;
  if (s == NULL) return;
  CHECK(streq(dp_opschema_type(s), "FC"));
  CHECK(strstr(dp_opschema_doc(s), "X W^T + b") != NULL);
  CHECK(dp_opschema_min_inputs(s) == 3 && dp_opschema_max_inputs(s) == 3);
  CHECK(dp_opschema_min_outputs(s) == 1 && dp_opschema_max_outputs(s) == 1);
  CHECK(dp_opschema_num_named_inputs(s) == 3);
  CHECK(streq(dp_opschema_input_name(s, 0), "X") && streq(dp_opschema_input_name(s, 1), "W") &&
        streq(dp_opschema_input_name(s, 2), "b"));
  CHECK(dp_opschema_input_name(s, 3) == NULL);
  CHECK(dp_opschema_num_named_outputs(s) == 1 && streq(dp_opschema_output_name(s, 0), "Y"));
  CHECK(dp_opschema_output_name(s, 1) == NULL);
  CHECK(dp_opschema_num_args(s) == 3);
  axis = arg_index(s, "axis");
  act = arg_index(s, "activation");
  if (CHECK(axis != (size_t)-1 && act != (size_t)-1)) {
    CHECK(dp_opschema_arg_kind(s, axis) == DP_ARG_INT);
    CHECK(dp_opschema_arg_required(s, axis) == 0);
    CHECK(strlen(dp_opschema_arg_doc(s, axis)) > 0);
    CHECK(streq(dp_opschema_arg_default_text(s, axis), "1"));
    d = dp_opschema_arg_default(s, axis);
    CHECK(d != NULL && streq(dp_argdef_name(d), "axis") && dp_argdef_kind(d) == DP_ARG_INT);
    CHECK(dp_argdef_num_values(d) == 1);
    if (EXPECT_OK(dp_argdef_get_int(d, &iv))) CHECK(iv == 1);
    EXPECT_ERR(dp_argdef_get_float(d, &fv), DP_ERR_INVALID_ARGUMENT, "not float"); /* kinds never converted */
    CHECK(dp_opschema_arg_kind(s, act) == DP_ARG_STRING);
    CHECK(streq(dp_opschema_arg_default_text(s, act), "\"none\""));
    if (EXPECT_OK(dp_argdef_get_string(dp_opschema_arg_default(s, act), &sv))) CHECK(streq(sv, "none"));
  }
  /* Out of range: NULL and 0. */
  CHECK(dp_opschema_arg_name(s, 3) == NULL && dp_opschema_arg_doc(s, 3) == NULL);
  CHECK(dp_opschema_arg_default_text(s, 3) == NULL && dp_opschema_arg_default(s, 3) == NULL);
  CHECK(dp_opschema_arg_kind(s, 3) == 0 && dp_opschema_arg_required(s, 3) == 0);
  CHECK(dp_opschema_num_inplace(s) == 0 && dp_opschema_inplace_shift(s) == -1);
  CHECK(dp_opschema_gradient(s) == DP_GRADIENT_DIFFERENTIABLE);
  dp_opschema_free(s);
}

static void test_defaults(void) {
  dp_opschema* s = schema_of("LearningRate");
  size_t i;
  double fv = 0;
  if (s != NULL) {
    i = arg_index(s, "base_lr");
    CHECK(dp_opschema_arg_required(s, i) == 1);
    CHECK(dp_opschema_arg_default(s, i) == NULL && streq(dp_opschema_arg_default_text(s, i), ""));
    i = arg_index(s, "gamma");
    CHECK(dp_opschema_arg_kind(s, i) == DP_ARG_FLOAT && dp_opschema_arg_required(s, i) == 0);
    if (EXPECT_OK(dp_argdef_get_float(dp_opschema_arg_default(s, i), &fv))) CHECK(fv == 0.1);
    CHECK(streq(dp_opschema_arg_default_text(s, i), "0.1"));
  }
  dp_opschema_free(s);
  /* A default that is not one value is described. */
  s = schema_of("Dropout");
  if (s != NULL) {
    i = arg_index(s, "seed");
    CHECK(dp_opschema_arg_default(s, i) == NULL);
    CHECK(streq(dp_opschema_arg_default_text(s, i), "a hash of output 0's name"));
  }
  dp_opschema_free(s);
  /* A float argument's default is a FLOAT even where it reads as an integer. */
  s = schema_of("Scale");
  if (s != NULL) {
    i = arg_index(s, "scale");
    CHECK(dp_argdef_kind(dp_opschema_arg_default(s, i)) == DP_ARG_FLOAT);
    if (EXPECT_OK(dp_argdef_get_float(dp_opschema_arg_default(s, i), &fv))) CHECK(fv == 1.0);
  }
  dp_opschema_free(s);
  /* A list default. */
  s = schema_of("ConstantFill");
  if (s != NULL) {
    const int64_t* dims = (const int64_t*)SENTINEL;
    size_t n = 7;
    i = arg_index(s, "shape");
    CHECK(dp_opschema_arg_kind(s, i) == DP_ARG_INTS);
    if (EXPECT_OK(dp_argdef_get_ints(dp_opschema_arg_default(s, i), &dims, &n))) CHECK(n == 0);
    CHECK(streq(dp_opschema_arg_default_text(s, i), "[]"));
  }
  dp_opschema_free(s);
}

static void test_inplace(void) {
  dp_opschema* s = schema_of("Add");
  int32_t in = -5, out = -5;
  if (s != NULL) {
    CHECK(dp_opschema_num_inplace(s) == 2);
    CHECK(dp_opschema_inplace_at(s, 0, &in, &out) == DP_INPLACE_ALLOWED && in == 0 && out == 0);
    CHECK(dp_opschema_inplace_at(s, 1, &in, &out) == DP_INPLACE_ALLOWED && in == 1 && out == 0);
    in = out = -5;
    CHECK(dp_opschema_inplace_at(s, 2, &in, &out) == 0 && in == -5 && out == -5);
    CHECK(dp_opschema_inplace_at(s, 0, NULL, NULL) == DP_INPLACE_ALLOWED);
    CHECK(dp_opschema_inplace_shift(s) == -1);
  }
  dp_opschema_free(s);
  /* Enforced pairs come first. */
  s = schema_of("SpatialBN");
  if (s != NULL) {
    CHECK(dp_opschema_num_inplace(s) == 3);
    CHECK(dp_opschema_inplace_at(s, 0, &in, &out) == DP_INPLACE_ENFORCED && in == 3 && out == 1);
    CHECK(dp_opschema_inplace_at(s, 1, &in, &out) == DP_INPLACE_ENFORCED && in == 4 && out == 2);
    CHECK(dp_opschema_inplace_at(s, 2, &in, &out) == DP_INPLACE_ALLOWED && in == 0 && out == 0);
  }
  dp_opschema_free(s);
  s = schema_of("Allreduce");
  if (s != NULL) {
    CHECK(dp_opschema_num_inplace(s) == 0 && dp_opschema_inplace_shift(s) == 1);
    CHECK(dp_opschema_max_inputs(s) == INT32_MAX);
  }
  dp_opschema_free(s);
}

static void test_kernels_and_gradients(void) {
  dp_build_info info;
  dp_opschema* relu = schema_of("Relu");
  dp_opschema* print = schema_of("Print"); /* a host op: no CUDA kernel in any build */
  dp_string_list* engines = (dp_string_list*)SENTINEL;
  memset(&info, 0, sizeof info);
  info.struct_size = (uint32_t)sizeof info;
  if (relu == NULL || print == NULL || !EXPECT_OK(dp_build_info_get(&info))) goto done;
  CHECK(dp_opschema_has_kernel(relu, DP_DEVICE_CPU) == 1);
  /* CUDA kernels exist for some types in CUDA builds, for none otherwise. */
  CHECK(dp_opschema_has_kernel(relu, DP_DEVICE_CUDA) == (info.cuda ? 1 : 0));
  CHECK(dp_opschema_has_kernel(print, DP_DEVICE_CUDA) == 0);
  CHECK(dp_opschema_has_kernel(relu, 7) == 0 && dp_opschema_has_kernel(relu, DP_DEVICE_NONE) == 0);
  CHECK(dp_opschema_has_kernel(NULL, DP_DEVICE_CPU) == 0);
  if (EXPECT_OK(dp_opschema_engines(relu, DP_DEVICE_CPU, &engines))) {
    CHECK(dp_string_list_size(engines) == 0);
    dp_string_list_free(engines);
  }
  engines = (dp_string_list*)SENTINEL;
  EXPECT_ERR(dp_opschema_engines(relu, 7, &engines), DP_ERR_INVALID_ARGUMENT, "device type 7");
  EXPECT_ERR(dp_opschema_engines(NULL, DP_DEVICE_CPU, &engines), DP_ERR_INVALID_ARGUMENT, "schema");
  EXPECT_ERR(dp_opschema_engines(relu, DP_DEVICE_CPU, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(engines == SENTINEL);
  CHECK(dp_opschema_gradient(relu) == DP_GRADIENT_DIFFERENTIABLE);
done:
  dp_opschema_free(relu);
  dp_opschema_free(print);
  {
    const char* types[4] = {"Accuracy", "StopGradient", "ReluGradient", "SquaredL2Distance"};
    const int32_t kinds[4] = {DP_GRADIENT_NOT_DIFFERENTIABLE, DP_GRADIENT_STOP, DP_GRADIENT_UNDECLARED,
                              DP_GRADIENT_DIFFERENTIABLE};
    size_t i;
    for (i = 0; i < 4; ++i) {
      dp_opschema* s = schema_of(types[i]);
      CHECK(s != NULL && dp_opschema_gradient(s) == kinds[i]);
      dp_opschema_free(s);
    }
  }
}

static void test_null_schema(void) {
  int32_t in = -5, out = -5;
  CHECK(streq(dp_opschema_type(NULL), "") && streq(dp_opschema_doc(NULL), ""));
  CHECK(dp_opschema_min_inputs(NULL) == 0 && dp_opschema_max_inputs(NULL) == 0);
  CHECK(dp_opschema_min_outputs(NULL) == 0 && dp_opschema_max_outputs(NULL) == 0);
  CHECK(dp_opschema_num_named_inputs(NULL) == 0 && dp_opschema_input_name(NULL, 0) == NULL);
  CHECK(dp_opschema_num_named_outputs(NULL) == 0 && dp_opschema_output_name(NULL, 0) == NULL);
  CHECK(dp_opschema_num_args(NULL) == 0 && dp_opschema_arg_name(NULL, 0) == NULL);
  CHECK(dp_opschema_arg_kind(NULL, 0) == 0 && dp_opschema_arg_required(NULL, 0) == 0);
  CHECK(dp_opschema_arg_doc(NULL, 0) == NULL && dp_opschema_arg_default(NULL, 0) == NULL);
  CHECK(dp_opschema_arg_default_text(NULL, 0) == NULL);
  CHECK(dp_opschema_num_inplace(NULL) == 0 && dp_opschema_inplace_at(NULL, 0, &in, &out) == 0);
  CHECK(in == -5 && out == -5);
  CHECK(dp_opschema_inplace_shift(NULL) == -1);
  CHECK(dp_opschema_gradient(NULL) == DP_GRADIENT_UNDECLARED);
  dp_opschema_free(NULL);
}

/* ------------------------------------------------------------------------ */
/* The new ops in a trained model                                            */
/* ------------------------------------------------------------------------ */

/* A linear regression whose prediction goes through Sub and Div, trained on
 * half the mean squared error (SquaredL2Distance + AveragedLoss) with SGD:
 * pred = (x w^T + b - 0.5) / 2 fits y = x . (1.5, -2, 0.5) + 0.3 exactly at
 * w = (3, -4, 1), b = 1.1. */
static const char kRegression[] =
    "{\"name\":\"regression\","
    "\"init_net\":{\"ops\":["
    "{\"type\":\"ConstantFill\",\"outputs\":[\"w\"],\"args\":[{\"name\":\"shape\",\"ints\":[1,3]}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"b\"],\"args\":[{\"name\":\"shape\",\"ints\":[1]}]}]},"
    "\"forward_net\":{\"ops\":["
    "{\"type\":\"ConstantFill\",\"outputs\":[\"offset\"],\"args\":[{\"name\":\"shape\",\"ints\":[1]},"
    "{\"name\":\"value\",\"f\":0.5}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"halve\"],\"args\":[{\"name\":\"shape\",\"ints\":[1]},"
    "{\"name\":\"value\",\"f\":2.0}]},"
    "{\"type\":\"FC\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"h\"]},"
    "{\"type\":\"Sub\",\"inputs\":[\"h\",\"offset\"],\"outputs\":[\"shifted\"]},"
    "{\"type\":\"Div\",\"inputs\":[\"shifted\",\"halve\"],\"outputs\":[\"pred\"]},"
    "{\"type\":\"SquaredL2Distance\",\"inputs\":[\"pred\",\"y\"],\"outputs\":[\"dist\"]},"
    "{\"type\":\"AveragedLoss\",\"inputs\":[\"dist\"],\"outputs\":[\"loss\"]}]},"
    "\"params\":[\"w\",\"b\"],\"inputs\":[\"x\",\"y\"],\"losses\":[\"loss\"],"
    "\"optimizer\":{\"type\":\"sgd\",\"lr\":1.0}}";

enum { kRows = 32, kSteps = 300 };

static float fetch_scalar(dp_workspace* ws, const char* name, size_t i) {
  dp_tensor* t = NULL;
  float v = NAN;
  if (EXPECT_OK(dp_workspace_fetch(ws, name, &t)) && CHECK((size_t)dp_tensor_numel(t) > i))
    v = ((const float*)dp_tensor_data(t))[i];
  dp_tensor_free(t);
  return v;
}

static void test_regression_trains(void) {
  dp_model* model = NULL;
  dp_netdef *init = NULL, *train = NULL;
  dp_workspace* ws = NULL;
  dp_net *init_net = NULL, *train_net = NULL;
  dp_tensor *x = NULL, *y = NULL;
  float xs[kRows * 3], ys[kRows];
  const int64_t xdims[2] = {kRows, 3}, ydims[2] = {kRows, 1};
  uint32_t lcg = 12345u;
  float first = NAN, last = NAN;
  int i, ok = 1;
  for (i = 0; i < kRows * 3; ++i) {
    lcg = lcg * 1664525u + 1013904223u;
    xs[i] = (float)((lcg >> 8) / 16777216.0 * 2.0 - 1.0);
  }
  for (i = 0; i < kRows; ++i) ys[i] = 1.5f * xs[3 * i] - 2.0f * xs[3 * i + 1] + 0.5f * xs[3 * i + 2] + 0.3f;
  ok = EXPECT_OK(dp_model_from_json(kRegression, strlen(kRegression), &model)) &&
       EXPECT_OK(dp_model_build_training(model, NULL, &init, &train, NULL)) && EXPECT_OK(dp_workspace_create(&ws)) &&
       EXPECT_OK(dp_net_create(ws, init, NULL, &init_net)) && EXPECT_OK(dp_net_run(init_net)) &&
       EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, xdims, 2, xs, sizeof xs, &x)) &&
       EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, ydims, 2, ys, sizeof ys, &y)) &&
       EXPECT_OK(dp_workspace_feed(ws, "x", x)) && EXPECT_OK(dp_workspace_feed(ws, "y", y)) &&
       EXPECT_OK(dp_net_create(ws, train, NULL, &train_net));
  for (i = 0; ok && i < kSteps; ++i) {
    ok = EXPECT_OK(dp_net_run(train_net));
    if (i == 0) first = fetch_scalar(ws, "loss", 0);
  }
  if (ok) {
    last = fetch_scalar(ws, "loss", 0);
    printf("regression: loss %g after 1 step, %g after %d\n", first, last, kSteps);
    CHECK(first > 0.1f);
    CHECK(last < 1e-8f);
    CHECK(fabsf(fetch_scalar(ws, "w", 0) - 3.0f) < 1e-3f);
    CHECK(fabsf(fetch_scalar(ws, "w", 1) + 4.0f) < 1e-3f);
    CHECK(fabsf(fetch_scalar(ws, "w", 2) - 1.0f) < 1e-3f);
    CHECK(fabsf(fetch_scalar(ws, "b", 0) - 1.1f) < 1e-3f);
  }
  dp_net_free(train_net);
  dp_net_free(init_net);
  dp_tensor_free(x);
  dp_tensor_free(y);
  dp_workspace_free(ws);
  dp_netdef_free(init);
  dp_netdef_free(train);
  dp_model_free(model);
}

/* ------------------------------------------------------------------------ */

typedef struct {
  const char* name;
  void (*fn)(void);
} test_case;

static const test_case kTests[] = {
    {"list_types", test_list_types},
    {"unknown_types", test_unknown_types},
    {"fc", test_fc},
    {"defaults", test_defaults},
    {"inplace", test_inplace},
    {"kernels_and_gradients", test_kernels_and_gradients},
    {"null_schema", test_null_schema},
    {"regression_trains", test_regression_trains},
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
