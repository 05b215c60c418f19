/*
 * Inference nets (dp_model_build_inference) from strict C11: a trained MLP's
 * softmax computed without labels equals the eval net's bit for bit, in a
 * workspace of its own that shares the trained param tensors (same memory,
 * no copy) or loads them from a checkpoint; default outputs, options and
 * errors; and serving: kThreads threads, each with its own workspace and net
 * over the same param tensors, run concurrently and each gets exactly the
 * serial result (tools/test.sh also runs this test under ThreadSanitizer).
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include "check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kIn = 8, kClasses = 3, kBatch = 16, kThreads = 4, kRuns = 25 };

static const char kModel[] =
    "{\"name\": \"tiny\","
    " \"init_net\": {\"ops\": ["
    "  {\"type\": \"XavierFill\", \"outputs\": [\"w1\"], \"args\": [{\"name\": \"shape\", \"ints\": [16, 8]},"
    "   {\"name\": \"seed\", \"i\": 1}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"b1\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]}]},"
    "  {\"type\": \"XavierFill\", \"outputs\": [\"w2\"], \"args\": [{\"name\": \"shape\", \"ints\": [3, 16]},"
    "   {\"name\": \"seed\", \"i\": 2}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"b2\"], \"args\": [{\"name\": \"shape\", \"ints\": [3]}]}]},"
    " \"forward_net\": {\"ops\": ["
    "  {\"type\": \"FC\", \"inputs\": [\"data\", \"w1\", \"b1\"], \"outputs\": [\"h\"]},"
    "  {\"type\": \"Relu\", \"inputs\": [\"h\"], \"outputs\": [\"h\"]},"
    "  {\"type\": \"FC\", \"inputs\": [\"h\", \"w2\", \"b2\"], \"outputs\": [\"logits\"]},"
    "  {\"type\": \"SoftmaxWithLoss\", \"inputs\": [\"logits\", \"label\"], \"outputs\": [\"softmax\", \"loss\"]},"
    "  {\"type\": \"Accuracy\", \"inputs\": [\"softmax\", \"label\"], \"outputs\": [\"accuracy\"]}]},"
    " \"params\": [\"w1\", \"b1\", \"w2\", \"b2\"],"
    " \"inputs\": [\"data\", \"label\"],"
    " \"losses\": [\"loss\"],"
    " \"metrics\": [\"accuracy\"],"
    " \"optimizer\": {\"type\": \"adam\", \"lr\": 0.05}}";

static const char* const kParams[] = {"w1", "b1", "w2", "b2"};

/* Batch `seed`: deterministic features and labels. */
static void make_batch(int seed, float* x, int32_t* y) {
  uint32_t s = 2654435761u * (uint32_t)(seed + 1);
  int i, k;
  for (i = 0; i < kBatch; ++i) {
    for (k = 0; k < kIn; ++k) {
      s = s * 1664525u + 1013904223u;
      x[i * kIn + k] = (float)((double)(s >> 8) / 16777216.0 * 4.0 - 2.0);
    }
    y[i] = (int32_t)((x[i * kIn] > 0) + (x[i * kIn + 1] > 0.5f));
  }
}

static int feed_batch(dp_workspace* ws, int seed, int with_label) {
  float x[kBatch * kIn];
  int32_t y[kBatch];
  const int64_t xd[2] = {kBatch, kIn}, yd[1] = {kBatch};
  dp_tensor *tx = NULL, *ty = NULL;
  dp_status* st;
  make_batch(seed, x, y);
  st = dp_tensor_create(DP_DTYPE_FLOAT32, xd, 2, x, sizeof x, &tx);
  if (st == NULL) st = dp_workspace_feed(ws, "data", tx);
  if (st == NULL && with_label) st = dp_tensor_create(DP_DTYPE_INT32, yd, 1, y, sizeof y, &ty);
  if (st == NULL && with_label) st = dp_workspace_feed(ws, "label", ty);
  dp_tensor_free(tx);
  dp_tensor_free(ty);
  if (st != NULL) fprintf(stderr, "feed_batch: %s\n", dp_status_message(st));
  dp_status_free(st);
  return st == NULL;
}

/* Copies blob `name` (float32, kBatch x kClasses) into out. */
static int fetch_probs(dp_workspace* ws, const char* name, float* out) {
  dp_tensor* t = NULL;
  dp_status* st = dp_workspace_fetch(ws, name, &t);
  if (st == NULL) st = dp_tensor_copy_to(t, out, sizeof(float) * kBatch * kClasses);
  dp_tensor_free(t);
  if (st != NULL) fprintf(stderr, "fetch %s: %s\n", name, dp_status_message(st));
  dp_status_free(st);
  return st == NULL;
}

/* Feeds each param of `from` into `to` under the same name; checks that the
 * blob in `to` holds the very memory of `from`'s (a feed shares, never copies). */
static int share_params(dp_workspace* from, dp_workspace* to) {
  size_t i;
  int ok = 1;
  for (i = 0; ok && i < sizeof kParams / sizeof kParams[0]; ++i) {
    dp_tensor *t = NULL, *back = NULL;
    ok = EXPECT_OK(dp_workspace_fetch(from, kParams[i], &t)) && EXPECT_OK(dp_workspace_feed(to, kParams[i], t)) &&
         EXPECT_OK(dp_workspace_fetch(to, kParams[i], &back)) && CHECK(dp_tensor_data(back) == dp_tensor_data(t));
    dp_tensor_free(t);
    dp_tensor_free(back);
  }
  return ok;
}

static int net_has_input(const dp_netdef* def, const char* name) {
  size_t i;
  for (i = 0; i < dp_netdef_num_external_inputs(def); ++i)
    if (strcmp(dp_netdef_external_input(def, i), name) == 0) return 1;
  return 0;
}

static dp_model* g_model;
static dp_workspace* g_train_ws; /* trained params, and the eval net's blobs of batch 100 */
static float g_eval_softmax[kBatch * kClasses];

static void train(void) {
  dp_netdef *init = NULL, *step = NULL, *eval = NULL;
  dp_net *init_net = NULL, *train_net = NULL, *eval_net = NULL;
  int i, ok = EXPECT_OK(dp_model_from_json(kModel, sizeof kModel - 1, &g_model)) &&
              EXPECT_OK(dp_model_build_training(g_model, NULL, &init, &step, &eval)) &&
              EXPECT_OK(dp_workspace_create(&g_train_ws)) &&
              EXPECT_OK(dp_net_create(g_train_ws, init, NULL, &init_net)) && EXPECT_OK(dp_net_run(init_net)) &&
              EXPECT_OK(dp_net_create(g_train_ws, step, NULL, &train_net)) &&
              EXPECT_OK(dp_net_create(g_train_ws, eval, NULL, &eval_net));
  for (i = 0; ok && i < 8; ++i) ok = feed_batch(g_train_ws, i, 1) && EXPECT_OK(dp_net_run(train_net));
  ok = ok && feed_batch(g_train_ws, 100, 1) && EXPECT_OK(dp_net_run(eval_net)) &&
       fetch_probs(g_train_ws, "softmax", g_eval_softmax);
  CHECK(ok);
  dp_net_free(init_net);
  dp_net_free(train_net);
  dp_net_free(eval_net);
  dp_netdef_free(init);
  dp_netdef_free(step);
  dp_netdef_free(eval);
}

/* The softmax net: no label read, the trained params shared, the eval net's values. */
static void softmax_without_labels(void) {
  const char* outputs[] = {"softmax"};
  dp_netdef* def = NULL;
  dp_workspace* ws = NULL;
  dp_net* net = NULL;
  float got[kBatch * kClasses];
  int32_t has_label = -1;
  if (!EXPECT_OK(dp_model_build_inference(g_model, outputs, 1, NULL, &def))) return;
  CHECK(strcmp(dp_netdef_name(def), "tiny_inference") == 0);
  CHECK(dp_netdef_num_ops(def) == 3); /* FC (with its Relu fused), FC, Softmax */
  CHECK(strcmp(dp_opdef_type(dp_netdef_op(def, 2)), "Softmax") == 0);
  CHECK(dp_netdef_num_external_outputs(def) == 1 && strcmp(dp_netdef_external_output(def, 0), "softmax") == 0);
  CHECK(net_has_input(def, "data") && net_has_input(def, "w1") && !net_has_input(def, "label"));
  if (EXPECT_OK(dp_workspace_create(&ws)) && share_params(g_train_ws, ws) && feed_batch(ws, 100, 0) &&
      EXPECT_OK(dp_net_create(ws, def, NULL, &net)) && EXPECT_OK(dp_net_run(net)) &&
      fetch_probs(ws, "softmax", got)) {
    CHECK(memcmp(got, g_eval_softmax, sizeof got) == 0);
    CHECK(EXPECT_OK(dp_workspace_has_blob(ws, "label", &has_label)) && has_label == 0);
  }
  dp_net_free(net);
  dp_workspace_free(ws);
  dp_netdef_free(def);
}

/* Default outputs, no_fuse, and the errors. */
static void options_and_errors(void) {
  const char* typo[] = {"sofmax"};
  const char* twice[] = {"logits", "logits"};
  const char* soft[] = {"softmax"};
  dp_inference_options o = DP_INFERENCE_OPTIONS_INIT;
  dp_inference_options zeroed;
  dp_netdef* def = SENTINEL;
  dp_workspace* ws = NULL;
  dp_net* net = NULL;
  float got[kBatch * kClasses];

  if (EXPECT_OK(dp_model_build_inference(g_model, NULL, 0, NULL, &def))) {
    CHECK(dp_netdef_num_external_outputs(def) == 2);
    CHECK(strcmp(dp_netdef_external_output(def, 0), "logits") == 0);
    CHECK(strcmp(dp_netdef_external_output(def, 1), "softmax") == 0);
    CHECK(!net_has_input(def, "label"));
    dp_netdef_free(def);
  }

  /* Unfused: FC, Relu, FC, Softmax, and the same softmax. */
  o.no_fuse = 1;
  def = NULL;
  if (EXPECT_OK(dp_model_build_inference(g_model, soft, 1, &o, &def))) {
    CHECK(dp_netdef_num_ops(def) == 4);
    CHECK(strcmp(dp_opdef_type(dp_netdef_op(def, 1)), "Relu") == 0);
    if (EXPECT_OK(dp_workspace_create(&ws)) && share_params(g_train_ws, ws) && feed_batch(ws, 100, 0) &&
        EXPECT_OK(dp_net_create(ws, def, NULL, &net)) && EXPECT_OK(dp_net_run(net)) &&
        fetch_probs(ws, "softmax", got))
      CHECK(memcmp(got, g_eval_softmax, sizeof got) == 0);
    dp_net_free(net);
    dp_workspace_free(ws);
    dp_netdef_free(def);
  }

  /* Zero means default: a zeroed struct is the macro's. */
  memset(&zeroed, 0, sizeof zeroed);
  dp_inference_options_init(&zeroed, sizeof zeroed);
  CHECK(zeroed.struct_size == sizeof zeroed && zeroed.no_fuse == 0);

  def = SENTINEL;
  EXPECT_ERR3(dp_model_build_inference(g_model, typo, 1, NULL, &def), DP_ERR_NOT_FOUND, "'sofmax'",
              "did you mean 'softmax'?", "model 'tiny'");
  EXPECT_ERR(dp_model_build_inference(g_model, twice, 2, NULL, &def), DP_ERR_INVALID_ARGUMENT, "twice");
  EXPECT_ERR(dp_model_build_inference(g_model, NULL, 1, NULL, &def), DP_ERR_INVALID_ARGUMENT, "outputs");
  EXPECT_ERR(dp_model_build_inference(NULL, soft, 1, NULL, &def), DP_ERR_INVALID_ARGUMENT, "model");
  EXPECT_ERR(dp_model_build_inference(g_model, soft, 1, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  o.struct_size = 2;
  EXPECT_ERR(dp_model_build_inference(g_model, soft, 1, &o, &def), DP_ERR_INVALID_ARGUMENT, "struct_size");
  CHECK(def == SENTINEL);
}

/* A serving workspace loaded from a checkpoint: only the params the net
 * reads (lenient: the blobs are created), mapped from the file. */
static void from_checkpoint(void) {
  char dir[] = "/tmp/dp_test_inference_XXXXXX";
  char path[256];
  const char* soft[] = {"softmax"};
  const char* names[8];
  size_t n = 0, i;
  dp_netdef* def = NULL;
  dp_workspace* ws = NULL;
  dp_net* net = NULL;
  dp_string_list* inputs = NULL;
  dp_checkpoint_load_options lo = DP_CHECKPOINT_LOAD_OPTIONS_INIT;
  float got[kBatch * kClasses];
  int32_t has = -1;
  if (!CHECK(mkdtemp(dir) != NULL)) return;
  snprintf(path, sizeof path, "%s/model.dpckpt", dir);
  if (EXPECT_OK(dp_checkpoint_save(g_train_ws, kParams, 4, path, NULL)) &&
      EXPECT_OK(dp_model_build_inference(g_model, soft, 1, NULL, &def)) &&
      EXPECT_OK(dp_model_blobs(g_model, DP_MODEL_INPUTS, &inputs))) {
    for (i = 0; i < dp_netdef_num_external_inputs(def) && n < 8; ++i) {
      const char* x = dp_netdef_external_input(def, i);
      size_t k;
      int is_input = 0;
      for (k = 0; k < dp_string_list_size(inputs); ++k) is_input |= strcmp(dp_string_list_get(inputs, k), x) == 0;
      if (!is_input) names[n++] = x;
    }
    CHECK(n == 4);
    lo.names = names;
    lo.num_names = n;
    lo.lenient = 1;
    lo.mmap = 1;
    if (EXPECT_OK(dp_workspace_create(&ws)) && EXPECT_OK(dp_checkpoint_load(ws, path, &lo)) &&
        feed_batch(ws, 100, 0) && EXPECT_OK(dp_net_create(ws, def, NULL, &net)) && EXPECT_OK(dp_net_run(net)) &&
        fetch_probs(ws, "softmax", got)) {
      CHECK(memcmp(got, g_eval_softmax, sizeof got) == 0);
      CHECK(EXPECT_OK(dp_workspace_has_blob(ws, "optimizer/iter", &has)) && has == 0);
    }
  }
  dp_net_free(net);
  dp_workspace_free(ws);
  dp_string_list_free(inputs);
  dp_netdef_free(def);
  unlink(path);
  rmdir(dir);
}

/* Serving from threads: each worker has its own workspace and net, fed the
 * same param tensors; every run must give the serial result of its batch. */
typedef struct {
  const dp_netdef* def;
  int id;
  int mismatches; /* runs whose softmax differed from the serial one */
  int errors;     /* failed calls */
  float want[2][kBatch * kClasses];
} worker;

static void* serve(void* arg) {
  worker* w = arg;
  dp_workspace* ws = NULL;
  dp_net* net = NULL;
  float got[kBatch * kClasses];
  int r;
  size_t i;
  dp_status* st = dp_workspace_create(&ws);
  for (i = 0; st == NULL && i < sizeof kParams / sizeof kParams[0]; ++i) {
    dp_tensor* t = NULL;
    st = dp_workspace_fetch(g_train_ws, kParams[i], &t); /* concurrent fetches of the same blobs */
    if (st == NULL) st = dp_workspace_feed(ws, kParams[i], t);
    dp_tensor_free(t);
  }
  if (st == NULL) st = dp_net_create(ws, w->def, NULL, &net);
  for (r = 0; st == NULL && r < kRuns; ++r) {
    const int which = (r + w->id) % 2;
    if (!feed_batch(ws, 200 + 2 * w->id + which, 0)) {
      ++w->errors;
      break;
    }
    st = dp_net_run(net);
    if (st == NULL && !fetch_probs(ws, "softmax", got)) ++w->errors;
    else if (st == NULL && memcmp(got, w->want[which], sizeof got) != 0) ++w->mismatches;
  }
  if (st != NULL) {
    fprintf(stderr, "worker %d: %s\n", w->id, dp_status_message(st));
    ++w->errors;
  }
  dp_status_free(st);
  dp_net_free(net);
  dp_workspace_free(ws);
  return NULL;
}

static void serving_threads(void) {
  const char* soft[] = {"softmax"};
  dp_netdef* def = NULL;
  dp_workspace* ws = NULL;
  dp_net* net = NULL;
  worker* workers = calloc(kThreads, sizeof *workers);
  pthread_t threads[kThreads];
  int started[kThreads];
  int i, which, ok;
  if (!CHECK(workers != NULL)) return;
  /* The serial results, from one workspace sharing the params. */
  ok = EXPECT_OK(dp_model_build_inference(g_model, soft, 1, NULL, &def)) && EXPECT_OK(dp_workspace_create(&ws)) &&
       share_params(g_train_ws, ws) && EXPECT_OK(dp_net_create(ws, def, NULL, &net));
  for (i = 0; ok && i < kThreads; ++i)
    for (which = 0; ok && which < 2; ++which) {
      workers[i].def = def;
      workers[i].id = i;
      ok = feed_batch(ws, 200 + 2 * i + which, 0) && EXPECT_OK(dp_net_run(net)) &&
           fetch_probs(ws, "softmax", workers[i].want[which]);
    }
  for (i = 0; ok && i < kThreads; ++i) started[i] = CHECK(pthread_create(&threads[i], NULL, serve, &workers[i]) == 0);
  for (i = 0; ok && i < kThreads; ++i) {
    if (started[i]) pthread_join(threads[i], NULL);
    CHECK(workers[i].errors == 0);
    CHECK(workers[i].mismatches == 0);
  }
  /* The workers were distinct: their batches' softmaxes differ. */
  CHECK(!ok || kThreads < 2 || memcmp(workers[0].want[0], workers[1].want[0], sizeof workers[0].want[0]) != 0);
  dp_net_free(net);
  dp_workspace_free(ws);
  dp_netdef_free(def);
  free(workers);
}

int main(void) {
  train();
  if (g_model != NULL && g_train_ws != NULL) {
    softmax_without_labels();
    options_and_errors();
    from_checkpoint();
    serving_threads();
  }
  dp_workspace_free(g_train_ws);
  dp_model_free(g_model);
  return check_report();
}
