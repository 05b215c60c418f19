/*
 * Unread feeds (dp_net_run, dp_net_options.unread_feed_error), from strict
 * C11: a run reports a blob fed since the last run that no net of the
 * workspace reads, naming it and the nearest name the nets read:
 *   - as one DP_LOG_WARNING per blob through the log callback, the run going
 *     on; a feed of the same blob again is not reported again;
 *   - with unread_feed_error, as DP_ERR_NOT_FOUND before any op runs, once
 *     per feed (the next run goes on);
 *   - not for correct feeds, feeds that a net created later reads, nor for
 *     a loader feeding training (one device and cpu:2, with an eval net);
 *   - again once the only net reading a blob is freed.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

/* Warnings logged, each kept whole; the callback never runs concurrently
 * with itself, and the count publishes what it wrote. */
#define MAX_LOGGED 16
static char g_logged[MAX_LOGGED][512];
static atomic_int g_num_logged;

static void record(void* user_data, int32_t level, const char* message) {
  int n = atomic_load(&g_num_logged);
  (void)user_data;
  if (level < DP_LOG_WARNING || n >= MAX_LOGGED) return;
  snprintf(g_logged[n], sizeof g_logged[n], "%s", message);
  atomic_store(&g_num_logged, n + 1);
}

/* How many warnings mention a fed blob since `from`; the last one in *last. */
static int feed_warnings(int from, const char** last) {
  int n = atomic_load(&g_num_logged), i, count = 0;
  for (i = from; i < n; ++i)
    if (strstr(g_logged[i], "fed blob") != NULL) {
      ++count;
      if (last != NULL) *last = g_logged[i];
    }
  return count;
}

static const char* kReluJson =
    "{\"name\":\"relu\",\"external_inputs\":[\"x\"],\"ops\":["
    "{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}";
static const char* kOtherJson =
    "{\"name\":\"other\",\"external_inputs\":[\"scale_factor\"],\"ops\":["
    "{\"type\":\"Relu\",\"inputs\":[\"scale_factor\"],\"outputs\":[\"s\"]}]}";

static dp_net* new_net(dp_workspace* ws, const char* json, int32_t unread_feed_error) {
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_net_options o = DP_NET_OPTIONS_INIT;
  o.unread_feed_error = unread_feed_error;
  if (EXPECT_OK(dp_netdef_from_json(json, strlen(json), &def))) EXPECT_OK(dp_net_create(ws, def, &o, &net));
  dp_netdef_free(def);
  return net;
}

static int feed2(dp_workspace* ws, const char* name, float a, float b) {
  const int64_t dims[1] = {2};
  const float v[2] = {a, b};
  dp_tensor* t = NULL;
  int ok = EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, v, sizeof v, &t)) &&
           EXPECT_OK(dp_workspace_feed(ws, name, t));
  dp_tensor_free(t);
  return ok;
}

static float first_of(dp_workspace* ws, const char* name) {
  dp_tensor* t = NULL;
  float v = -999.0f;
  if (EXPECT_OK(dp_workspace_fetch(ws, name, &t))) v = ((const float*)dp_tensor_data(t))[0];
  dp_tensor_free(t);
  return v;
}

/* A misspelt feed: one warning naming it and the blob meant; the run goes on. */
static void test_warning(void) {
  dp_workspace* ws = NULL;
  dp_net* relu;
  dp_net* other = NULL;
  const char* msg = NULL;
  int start;
  if (!EXPECT_OK(dp_workspace_create(&ws))) return;
  relu = new_net(ws, kReluJson, 0);
  start = atomic_load(&g_num_logged);
  feed2(ws, "x", 1, -1);
  EXPECT_OK(dp_net_run(relu));
  EXPECT_OK(dp_net_run(relu));
  CHECK(feed_warnings(start, NULL) == 0);

  feed2(ws, "X", 2, 2); /* meant "x": the run uses the stale x */
  EXPECT_OK(dp_net_run(relu));
  CHECK(first_of(ws, "y") == 1.0f);
  if (CHECK(feed_warnings(start, &msg) == 1)) {
    CHECK(strstr(msg, "net 'relu'") != NULL);
    CHECK(strstr(msg, "fed blob 'X' is read by no net of the workspace") != NULL);
    CHECK(strstr(msg, "did you mean 'x'?") != NULL);
  }
  /* Once per blob: the same mistake every step does not flood the log. */
  feed2(ws, "X", 2, 2);
  EXPECT_OK(dp_net_run(relu));
  CHECK(feed_warnings(start, NULL) == 1);
  /* Nothing near: no suggestion. */
  feed2(ws, "unrelated_blob", 0, 0);
  EXPECT_OK(dp_net_run(relu));
  if (CHECK(feed_warnings(start, &msg) == 2)) {
    CHECK(strstr(msg, "'unrelated_blob'") != NULL);
    CHECK(strstr(msg, "did you mean") == NULL);
  }
  /* A blob read by another net of the workspace, created after the feed, is
   * no mistake: several nets share a workspace (init, train, eval). */
  feed2(ws, "scale_factor", 3, 3);
  other = new_net(ws, kOtherJson, 0);
  EXPECT_OK(dp_net_run(relu));
  CHECK(feed_warnings(start, NULL) == 2);
  /* Once the only net reading it is freed, a feed of it reads nothing. */
  dp_net_free(other);
  feed2(ws, "scale_factor", 3, 3);
  EXPECT_OK(dp_net_run(relu));
  if (CHECK(feed_warnings(start, &msg) == 3)) CHECK(strstr(msg, "'scale_factor'") != NULL);
  dp_net_free(relu);
  dp_workspace_free(ws);
}

/* unread_feed_error: NOT_FOUND before any op runs, naming both; once per feed. */
static void test_error(void) {
  dp_workspace* ws = NULL;
  dp_net* strict;
  dp_net* lenient;
  int start = atomic_load(&g_num_logged);
  if (!EXPECT_OK(dp_workspace_create(&ws))) return;
  strict = new_net(ws, kReluJson, 1);
  feed2(ws, "x", 1, -1);
  EXPECT_OK(dp_net_run(strict));
  feed2(ws, "x", 5, 5);
  feed2(ws, "X", 2, 2);
  EXPECT_ERR3(dp_net_run(strict), DP_ERR_NOT_FOUND, "net 'relu'", "fed blob 'X'", "did you mean 'x'?");
  CHECK(first_of(ws, "y") == 1.0f); /* no op ran */
  EXPECT_OK(dp_net_run(strict));    /* reported: the next run goes on */
  CHECK(first_of(ws, "y") == 5.0f);
  /* Every feed is checked again, and each unread blob is named. */
  feed2(ws, "X", 2, 2);
  feed2(ws, "xx", 2, 2);
  EXPECT_ERR2(dp_net_run(strict), DP_ERR_NOT_FOUND, "'X'", "'xx'");
  /* Async runs check as well. */
  feed2(ws, "X", 2, 2);
  EXPECT_ERR(dp_net_run_async(strict), DP_ERR_NOT_FOUND, "'X'");
  EXPECT_CODE(dp_net_wait(strict, -1), DP_ERR_FAILED_PRECONDITION); /* nothing started */
  CHECK(feed_warnings(start, NULL) == 0);
  /* Errors do not use up the warning: a lenient net of the workspace still warns. */
  lenient = new_net(ws, kReluJson, 0);
  feed2(ws, "X", 2, 2);
  EXPECT_OK(dp_net_run(lenient));
  CHECK(feed_warnings(start, NULL) == 1);
  dp_net_free(lenient);
  dp_net_free(strict);
  dp_workspace_free(ws);
}

/* A linear classifier on 4 features, 3 classes. */
static const char* kModelJson =
    "{\"name\":\"lin\","
    "\"init_net\":{\"ops\":["
    "{\"type\":\"XavierFill\",\"outputs\":[\"w\"],\"args\":[{\"name\":\"shape\",\"ints\":[3,4]},{\"name\":\"seed\",\"i\":5}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"b\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]}]}]},"
    "\"forward_net\":{\"ops\":["
    "{\"type\":\"FC\",\"inputs\":[\"data\",\"w\",\"b\"],\"outputs\":[\"logits\"]},"
    "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"logits\",\"label\"],\"outputs\":[\"p\",\"loss\"]},"
    "{\"type\":\"Accuracy\",\"inputs\":[\"p\",\"label\"],\"outputs\":[\"acc\"]}]},"
    "\"params\":[\"w\",\"b\"],\"inputs\":[\"data\",\"label\"],\"losses\":[\"loss\"],\"metrics\":[\"acc\"],"
    "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.1}}";

/* Trains 3 epochs of 16 samples in batches of 4 from a loader with the
 * model's nets (one device, or cpu:2 when parallel), evaluating after each
 * epoch; the nets are created strict, so an unread feed would fail a run. */
static void train_with_loader(int parallel) {
  dp_model* model = NULL;
  dp_parallel_model* pm = NULL;
  dp_netdef *init_def = NULL, *train_def = NULL, *eval_def = NULL;
  dp_workspace* ws = NULL;
  dp_net *init = NULL, *train = NULL, *eval = NULL;
  dp_loader* loader = NULL;
  dp_tensor *x = NULL, *y = NULL;
  dp_loader_options lo = DP_LOADER_OPTIONS_INIT;
  dp_net_options no = DP_NET_OPTIONS_INIT;
  const int64_t xd[2] = {16, 4}, yd[1] = {16};
  float xv[64];
  int32_t yv[16];
  const char* names[2] = {"data", "label"};
  const dp_tensor* tensors[2];
  int i, epoch, fed, start = atomic_load(&g_num_logged);
  for (i = 0; i < 64; ++i) xv[i] = (float)((i * 37) % 11) / 11.0f;
  for (i = 0; i < 16; ++i) yv[i] = i % 3;
  no.unread_feed_error = 1;
  lo.batch_size = 4;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;
  if (parallel) {
    dp_parallel_options po = DP_PARALLEL_OPTIONS_INIT;
    const int32_t ids[2] = {0, 1};
    po.device_ids = ids;
    po.num_devices = 2;
    if (EXPECT_OK(dp_model_parallelize(model, &po, &pm)))
      EXPECT_OK(dp_parallel_model_nets(pm, &init_def, &train_def, &eval_def));
  } else {
    EXPECT_OK(dp_model_build_training(model, NULL, &init_def, &train_def, &eval_def));
  }
  if (init_def == NULL || !EXPECT_OK(dp_workspace_create(&ws))) goto done;
  if (!EXPECT_OK(dp_net_create(ws, init_def, &no, &init)) || !EXPECT_OK(dp_net_create(ws, train_def, &no, &train)) ||
      !EXPECT_OK(dp_net_create(ws, eval_def, &no, &eval)))
    goto done;
  EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, xd, 2, xv, sizeof xv, &x));
  EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, yd, 1, yv, sizeof yv, &y));
  tensors[0] = x;
  tensors[1] = y;
  if (!EXPECT_OK(dp_loader_create(ws, names, tensors, 2, &lo, &loader))) goto done;
  EXPECT_OK(dp_net_run(init));
  for (epoch = 0; epoch < 3; ++epoch) {
    for (;;) {
      if (!EXPECT_OK(dp_loader_next(loader, &fed)) || !fed) break;
      if (!EXPECT_OK(dp_net_run(train))) break;
    }
    EXPECT_OK(dp_loader_next(loader, &fed));
    if (CHECK(fed == 1)) EXPECT_OK(dp_net_run(eval));
  }
  CHECK(feed_warnings(start, NULL) == 0);
done:
  dp_loader_free(loader);
  dp_tensor_free(x);
  dp_tensor_free(y);
  dp_net_free(eval);
  dp_net_free(train);
  dp_net_free(init);
  dp_workspace_free(ws);
  dp_netdef_free(init_def);
  dp_netdef_free(train_def);
  dp_netdef_free(eval_def);
  dp_parallel_model_free(pm);
  dp_model_free(model);
}

int main(void) {
  dp_log_set_callback(record, NULL, DP_LOG_WARNING);
  test_warning();
  test_error();
  train_with_loader(0);
  train_with_loader(1);
  dp_log_set_callback(NULL, NULL, DP_LOG_WARNING);
  return check_report();
}
