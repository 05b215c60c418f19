/*
 * Exact resume (strict C11, public API only): training K steps, saving,
 * and training M more gives the same state as loading that checkpoint into a
 * fresh workspace, or a fresh process, and training the same M steps: bit
 * for bit for one device and for cpu:2 (params, BN running statistics, Adam
 * moments, iteration, learning rate). Files do not depend on the device
 * count: cpu:2's checkpoint resumed on cpu:1 and on one device, and one
 * device's on cpu:3, agree with cpu:2 to float tolerance (sync BN makes the
 * replicas' statistics those of the global batch).
 *
 * `test_resume --child CKPT OUT`: loads CKPT into one-device training,
 * trains the M steps and saves the state to OUT (the fresh process).
 *
 * Built with DP_RESUME_GPU (test_resume_gpu, suite gpu) it runs the GPU cases
 * instead, or exits 77 (skipped) without a CUDA device: exact resume on
 * cuda:1 and on cuda:0,cuda:0 (one GPU twice when there is one), and
 * checkpoints moving between cuda:1 and cpu:2 both ways, the loaded state
 * equal bit for bit to the saved one.
 */
#include <dp/dp.h>

#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { kBatch = 12, kIn = 8, kK = 3, kM = 4, kMaxState = 64 };

static const char kModel[] =
    "{\"name\": \"bn\","
    " \"init_net\": {\"ops\": ["
    "  {\"type\": \"XavierFill\", \"outputs\": [\"w1\"], \"args\": [{\"name\": \"shape\", \"ints\": [16, 8]},"
    "   {\"name\": \"seed\", \"i\": 1}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"b1\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"gamma\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]},"
    "   {\"name\": \"value\", \"f\": 1}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"beta\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"rm\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"rv\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]},"
    "   {\"name\": \"value\", \"f\": 1}]},"
    "  {\"type\": \"XavierFill\", \"outputs\": [\"w2\"], \"args\": [{\"name\": \"shape\", \"ints\": [3, 16]},"
    "   {\"name\": \"seed\", \"i\": 2}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"b2\"], \"args\": [{\"name\": \"shape\", \"ints\": [3]}]}]},"
    " \"forward_net\": {\"ops\": ["
    "  {\"type\": \"FC\", \"inputs\": [\"data\", \"w1\", \"b1\"], \"outputs\": [\"h\"]},"
    "  {\"type\": \"SpatialBN\", \"inputs\": [\"h\", \"gamma\", \"beta\", \"rm\", \"rv\"],"
    "   \"outputs\": [\"hn\", \"rm\", \"rv\", \"sm\", \"sv\"]},"
    "  {\"type\": \"Relu\", \"inputs\": [\"hn\"], \"outputs\": [\"hn\"]},"
    "%s"
    "  {\"type\": \"FC\", \"inputs\": [\"%s\", \"w2\", \"b2\"], \"outputs\": [\"logits\"]},"
    "  {\"type\": \"SoftmaxWithLoss\", \"inputs\": [\"logits\", \"label\"], \"outputs\": [\"softmax\", \"loss\"]}]},"
    " \"params\": [\"w1\", \"b1\", \"gamma\", \"beta\", \"w2\", \"b2\"],"
    " \"computed_params\": [\"rm\", \"rv\"],"
    " \"inputs\": [\"data\", \"label\"],"
    " \"losses\": [\"loss\"],"
    " \"optimizer\": ";

/* Adam for the exact cases (its moments are state). Across device counts the
 * sums are ordered differently, and Adam turns the rounding noise of b1's
 * gradient (zero in exact arithmetic: BN removes the mean) into full-size
 * steps, so those cases compare under momentum SGD. */
static const char kAdam[] = "{\"type\": \"adam\", \"lr\": 0.05, \"lr_policy\": \"step\", \"stepsize\": 2, \"gamma\": 0.5}}";
static const char kMomentum[] =
    "{\"type\": \"momentum\", \"lr\": 0.05, \"lr_policy\": \"step\", \"stepsize\": 2, \"gamma\": 0.5}}";

/* One training setup: one device (pm NULL) or data-parallel. */
typedef struct {
  dp_workspace* ws;
  dp_parallel_model* pm;
  dp_net* train;
  const char* scope; /* where replica 0's state lives: "" or "cpu_0/" */
} setup;

/* A state: every checkpoint blob's bytes, by the model's unscoped names. */
typedef struct {
  size_t n;
  char* names[kMaxState];
  unsigned char* bytes[kMaxState];
  size_t size[kMaxState];
} state;

static dp_model* g_model;       /* the model of the current case */
static dp_string_list* g_blobs; /* its dp_model_checkpoint_blobs */

/* Between the hidden layer and the output: nothing, or Dropout (its masks
 * must resume too). */
static const char kDropout[] =
    "  {\"type\": \"Dropout\", \"inputs\": [\"hn\"], \"outputs\": [\"hd\", \"mask\"],"
    "   \"args\": [{\"name\": \"ratio\", \"f\": 0.3}]},";

static int use_model(const char* optimizer, int dropout) {
  char json[8192], body[8192];
  dp_string_list_free(g_blobs);
  dp_model_free(g_model);
  g_blobs = NULL;
  g_model = NULL;
  snprintf(body, sizeof body, kModel, dropout ? kDropout : "", dropout ? "hd" : "hn");
  snprintf(json, sizeof json, "%s%s", body, optimizer);
  return EXPECT_OK(dp_model_from_json(json, strlen(json), &g_model)) &&
         EXPECT_OK(dp_model_checkpoint_blobs(g_model, &g_blobs));
}

static int feed(dp_workspace* ws, const char* name, int32_t dtype, const int64_t* dims, size_t nd, const void* d,
                size_t nbytes) {
  dp_tensor* t = NULL;
  int ok = EXPECT_OK(dp_tensor_create(dtype, dims, nd, d, nbytes, &t)) && EXPECT_OK(dp_workspace_feed(ws, name, t));
  dp_tensor_free(t);
  return ok;
}

/* The global batch of step `step`: deterministic values. */
static int feed_batch(dp_workspace* ws, int step) {
  float x[kBatch * kIn];
  int32_t y[kBatch];
  const int64_t xd[2] = {kBatch, kIn}, yd[1] = {kBatch};
  uint32_t s = 2654435761u * (uint32_t)(step + 1);
  int i;
  for (i = 0; i < kBatch * kIn; ++i) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((double)(s >> 8) / 16777216.0 * 4.0 - 2.0);
  }
  for (i = 0; i < kBatch; ++i) y[i] = (int32_t)((x[i * kIn] > 0) + (x[i * kIn + 1] > 0.5f));
  return feed(ws, "data", DP_DTYPE_FLOAT32, xd, 2, x, sizeof x) &&
         feed(ws, "label", DP_DTYPE_INT32, yd, 1, y, sizeof y);
}

static int run_def(dp_workspace* ws, const dp_netdef* def) {
  dp_net* net = NULL;
  int ok = EXPECT_OK(dp_net_create(ws, def, NULL, &net)) && EXPECT_OK(dp_net_run(net));
  dp_net_free(net);
  return ok;
}

/* The GPUs visible (0 without CUDA). */
static int32_t gpu_count(void) {
  int32_t n = 0;
  dp_status* st = dp_device_count(DP_DEVICE_CUDA, &n);
  dp_status_free(st);
  return n;
}

/* Replica r's scope on `type` ("cpu_1/", "cuda_0/"; one GPU named twice
 * gives its second replica "cuda_0.1/"). */
static void scope_of(char* buf, size_t size, int32_t type, int r) {
  if (type == DP_DEVICE_CUDA && r > 0 && gpu_count() <= r) snprintf(buf, size, "cuda_0.%d/", r);
  else snprintf(buf, size, "%s_%d/", type == DP_DEVICE_CUDA ? "cuda" : "cpu", r);
}

/* replicas 0: one device; else replicas on `type` with sync BN (GPUs 0..n-1,
 * or GPU 0 n times when there are fewer, through the copy-and-sum tree).
 * Runs init. */
static int make_setup_on(setup* s, int32_t type, int replicas) {
  dp_netdef *init = NULL, *train = NULL;
  int ok;
  memset(s, 0, sizeof *s);
  s->scope = "";
  if (!EXPECT_OK(dp_workspace_create(&s->ws))) return 0;
  if (replicas == 0) {
    ok = EXPECT_OK(dp_model_build_training(g_model, NULL, &init, &train, NULL));
  } else {
    int32_t ids[4] = {0, 1, 2, 3};
    int r;
    dp_parallel_options o;
    dp_parallel_options_init(&o, sizeof o);
    if (type == DP_DEVICE_CUDA && gpu_count() < replicas) {
      for (r = 0; r < replicas; ++r) ids[r] = 0;
      o.cuda_collectives = DP_CUDA_COLLECTIVES_TREE;
    }
    o.device_type = type;
    o.device_ids = ids;
    o.num_devices = (size_t)replicas;
    o.sync_bn = 1;
    ok = EXPECT_OK(dp_model_parallelize(g_model, &o, &s->pm)) &&
         EXPECT_OK(dp_parallel_model_nets(s->pm, &init, &train, NULL));
    s->scope = type == DP_DEVICE_CUDA ? "cuda_0/" : "cpu_0/";
  }
  ok = ok && run_def(s->ws, init) && EXPECT_OK(dp_net_create(s->ws, train, NULL, &s->train));
  dp_netdef_free(init);
  dp_netdef_free(train);
  return ok;
}

static int make_setup(setup* s, int replicas) { return make_setup_on(s, DP_DEVICE_CPU, replicas); }

static void free_setup(setup* s) {
  dp_net_free(s->train);
  dp_parallel_model_free(s->pm);
  dp_workspace_free(s->ws);
}

static int train_steps(setup* s, int first, int count) {
  int i;
  for (i = first; i < first + count; ++i)
    if (!feed_batch(s->ws, i) || !EXPECT_OK(dp_net_run(s->train))) return 0;
  return 1;
}

/* The checkpoint blobs' names as a C array (valid while g_blobs lives). */
static size_t blob_names(const char* names[kMaxState]) {
  size_t i, n = dp_string_list_size(g_blobs);
  for (i = 0; i < n && i < kMaxState; ++i) names[i] = dp_string_list_get(g_blobs, i);
  return n;
}

static int save(setup* s, const char* path) {
  const char* names[kMaxState];
  size_t n;
  if (s->pm != NULL) return EXPECT_OK(dp_parallel_model_save(s->pm, s->ws, path, NULL));
  n = blob_names(names);
  return EXPECT_OK(dp_checkpoint_save(s->ws, names, n, path, NULL));
}

static int load(setup* s, const char* path) {
  if (s->pm != NULL) return EXPECT_OK(dp_parallel_model_load(s->pm, s->ws, path, NULL));
  return EXPECT_OK(dp_checkpoint_load(s->ws, path, NULL)); /* strict: every blob exists after init */
}

static void free_state(state* st) {
  size_t i;
  for (i = 0; i < st->n; ++i) {
    free(st->names[i]);
    free(st->bytes[i]);
  }
  st->n = 0;
}

/* Replica `scope`'s state ("" or "cpu_1/"), plus the learning rate. The
 * counter and the learning rate are global. */
static int get_state(dp_workspace* ws, const char* scope, int with_lr, state* st) {
  size_t i, n = dp_string_list_size(g_blobs);
  memset(st, 0, sizeof *st);
  for (i = 0; i < n + (with_lr ? 1 : 0) && i < kMaxState; ++i) {
    const char* name = i < n ? dp_string_list_get(g_blobs, i) : "optimizer/lr";
    const int global = strncmp(name, "optimizer/", 10) == 0;
    char full[256];
    dp_tensor* t = NULL;
    snprintf(full, sizeof full, "%s%s", global ? "" : scope, name);
    if (!EXPECT_OK(dp_workspace_fetch(ws, full, &t))) return 0;
    st->names[st->n] = (char*)malloc(strlen(name) + 1);
    strcpy(st->names[st->n], name);
    st->size[st->n] = dp_tensor_nbytes(t);
    st->bytes[st->n] = (unsigned char*)malloc(st->size[st->n] + 1);
    memcpy(st->bytes[st->n], dp_tensor_data(t), st->size[st->n]);
    ++st->n;
    dp_tensor_free(t);
  }
  return 1;
}

/* Bitwise equal (tol 0), or float32 blobs within a relative tolerance. */
static int same_state(const state* a, const state* b, double tol) {
  size_t i, k;
  int ok = CHECK(a->n == b->n && a->n > 0);
  for (i = 0; ok && i < a->n; ++i) {
    ok = CHECK(strcmp(a->names[i], b->names[i]) == 0) && CHECK(a->size[i] == b->size[i]);
    if (!ok) break;
    if (tol == 0 || strcmp(a->names[i], "optimizer/iter") == 0) {
      ok = memcmp(a->bytes[i], b->bytes[i], a->size[i]) == 0;
      if (!ok) fprintf(stderr, "state '%s' differs\n", a->names[i]);
    } else {
      for (k = 0; k + 4 <= a->size[i]; k += 4) {
        float x, y;
        memcpy(&x, a->bytes[i] + k, 4);
        memcpy(&y, b->bytes[i] + k, 4);
        if (fabs((double)x - (double)y) > tol * (1.0 + fabs((double)y))) {
          fprintf(stderr, "state '%s'[%zu]: %.9g vs %.9g\n", a->names[i], k / 4, (double)x, (double)y);
          ok = 0;
          break;
        }
      }
    }
    CHECK(ok);
  }
  return ok;
}

static char g_dir[1024];

static const char* path_of(char* buf, size_t size, const char* leaf) {
  snprintf(buf, size, "%s/test_resume_%lx_%s", g_dir, (unsigned long)(uintptr_t)&g_checks, leaf);
  return buf;
}

/* Trains K steps on `from` replicas of `from_type`, saves, trains M more:
 * the reference. Then resumes that file on `to` replicas of `to_type` (fresh
 * workspace): right after the load every replica's state equals the saved
 * one bit for bit; after the same M steps it equals the reference within
 * `tol`. Compares replica 0 (and, with replicas, every replica). */
static void resume_case_on(int32_t from_type, int from, int32_t to_type, int to, double tol) {
  char path[1200];
  setup a, b;
  state saved, want, got;
  int r;
  memset(&saved, 0, sizeof saved);
  memset(&want, 0, sizeof want);
  memset(&got, 0, sizeof got);
  fprintf(stderr, "resume: %d -> %d replicas (0: one device) of %s -> %s\n", from, to,
          from_type == DP_DEVICE_CUDA ? "cuda" : "cpu", to_type == DP_DEVICE_CUDA ? "cuda" : "cpu");
  path_of(path, sizeof path, "case.dpckpt");
  if (make_setup_on(&a, from_type, from) && train_steps(&a, 0, kK) && save(&a, path) &&
      get_state(a.ws, a.scope, 0, &saved) && train_steps(&a, kK, kM) && get_state(a.ws, a.scope, 1, &want) &&
      make_setup_on(&b, to_type, to) && load(&b, path)) {
    for (r = 0; r < (to == 0 ? 1 : to); ++r) {
      char scope[32];
      if (to == 0) snprintf(scope, sizeof scope, "%s", "");
      else scope_of(scope, sizeof scope, to_type, r);
      if (get_state(b.ws, scope, 0, &got)) same_state(&got, &saved, 0);
      free_state(&got);
    }
    if (train_steps(&b, kK, kM))
      for (r = 0; r < (to == 0 ? 1 : to); ++r) {
        char scope[32];
        if (to == 0) snprintf(scope, sizeof scope, "%s", "");
        else scope_of(scope, sizeof scope, to_type, r);
        if (get_state(b.ws, scope, 1, &got)) same_state(&got, &want, tol);
        free_state(&got);
      }
  }
  free_state(&saved);
  free_state(&want);
  free_setup(&a);
  free_setup(&b);
  remove(path);
}

static void resume_case(int from, int to, double tol) { resume_case_on(DP_DEVICE_CPU, from, DP_DEVICE_CPU, to, tol); }

/* A fresh process resumes the one-device checkpoint. */
static void fresh_process_case(const char* self) {
  char path[1200], out[1200], cmd[4096];
  setup a, c;
  state want, got;
  memset(&want, 0, sizeof want);
  memset(&got, 0, sizeof got);
  path_of(path, sizeof path, "proc.dpckpt");
  path_of(out, sizeof out, "proc_out.dpckpt");
  if (make_setup(&a, 0) && train_steps(&a, 0, kK) && save(&a, path) && train_steps(&a, kK, kM) &&
      get_state(a.ws, "", 0, &want)) {
    snprintf(cmd, sizeof cmd, "\"%s\" --child \"%s\" \"%s\"", self, path, out);
    /* The child's final state, loaded into a fresh setup (the learning rate
     * is not state: the next step recomputes it from the counter). */
    if (CHECK(system(cmd) == 0) && make_setup(&c, 0)) {
      if (load(&c, out) && get_state(c.ws, "", 0, &got)) same_state(&got, &want, 0);
      free_setup(&c);
    }
  }
  free_state(&want);
  free_state(&got);
  free_setup(&a);
  remove(path);
  remove(out);
}

static int child(const char* in, const char* out) {
  setup s;
  int ok = make_setup(&s, 0) && load(&s, in) && train_steps(&s, kK, kM) && save(&s, out);
  free_setup(&s);
  return ok && g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const char* dir = getenv("DP_BUILD_ROOT");
  int rc;
  snprintf(g_dir, sizeof g_dir, "%s", dir != NULL && dir[0] != '\0' ? dir : ".");
  if (!use_model(kAdam, 1)) return check_report();
  /* params, computed params, Adam's two moments per param, the counter */
  CHECK(dp_string_list_size(g_blobs) == 6 + 2 + 12 + 1);
  CHECK(streq(dp_string_list_get(g_blobs, dp_string_list_size(g_blobs) - 1), "optimizer/iter"));
#ifdef DP_RESUME_GPU
  (void)argc;
  (void)argv;
  (void)fresh_process_case;
  (void)child;
  (void)resume_case;
  if (gpu_count() < 1) {
    printf("skipped: needs 1 CUDA device, found 0\n");
    rc = 77;
  } else {
    resume_case_on(DP_DEVICE_CUDA, 1, DP_DEVICE_CUDA, 1, 0); /* cuda:1: exact */
    resume_case_on(DP_DEVICE_CUDA, 2, DP_DEVICE_CUDA, 2, 0); /* two replicas on GPUs: exact */
    if (use_model(kMomentum, 0)) {
      resume_case_on(DP_DEVICE_CUDA, 1, DP_DEVICE_CPU, 2, 1e-4); /* cuda:1 -> cpu:2 */
      resume_case_on(DP_DEVICE_CPU, 2, DP_DEVICE_CUDA, 1, 1e-4); /* cpu:2 -> cuda:1 */
    }
    rc = check_report();
  }
#else
  if (argc == 4 && strcmp(argv[1], "--child") == 0) {
    rc = child(argv[2], argv[3]);
  } else {
    resume_case(0, 0, 0); /* one device: exact */
    resume_case(2, 2, 0); /* cpu:2: exact, every replica */
    fresh_process_case(argv[0]);
    if (use_model(kMomentum, 0)) {
      CHECK(dp_string_list_size(g_blobs) == 6 + 2 + 6 + 1);
      resume_case(0, 0, 0);    /* exact with momentum too */
      resume_case(2, 1, 1e-4); /* cpu:2 -> cpu:1 */
      resume_case(2, 0, 1e-4); /* cpu:2 -> one device */
      resume_case(0, 3, 1e-4); /* one device -> cpu:3 */
    }
    rc = check_report();
  }
#endif
  dp_string_list_free(g_blobs);
  dp_model_free(g_model);
  return rc;
}
