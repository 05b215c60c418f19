/*
 * dp.h's workspace thread rules from strict C11 (+ POSIX mkdtemp): eight
 * threads feed and fetch one shared blob and a blob each, ask for blobs and
 * list them, and one saves checkpoints of the shared blob, while a net that
 * only reads blobs the threads fetch runs over and over. Every fetched
 * tensor is whole (its shape matches its values), every tensor fed with a
 * deleter is released exactly once, and the net computes what it should.
 * Run under ThreadSanitizer by tools/test.sh (POSIX threads: GCC 12's TSan
 * does not see threads started with C11's thrd_create). Also: fetching a
 * blob that exists but is empty says so, and an absent one says it is absent.
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kThreads = 8, kIters = 200, kRuns = 100, kSaves = 4, kWElems = 64 };

/* Reads w and b, writes y and z: the threads fetch w and b meanwhile. */
static const char kReader[] =
    "{\"name\": \"reader\", \"external_inputs\": [\"w\", \"b\"], \"ops\": ["
    " {\"type\": \"Scale\", \"inputs\": [\"w\"], \"outputs\": [\"y\"], \"args\": [{\"name\": \"scale\", \"f\": 2}]},"
    " {\"type\": \"Scale\", \"inputs\": [\"b\"], \"outputs\": [\"z\"], \"args\": [{\"name\": \"scale\", \"f\": 3}]}]}";

static atomic_int g_deleted;

/* The threads start together, so that their calls overlap. */
static pthread_mutex_t g_gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gate_cv = PTHREAD_COND_INITIALIZER;
static int g_gate_open;

static void wait_at_gate(void) {
  pthread_mutex_lock(&g_gate_mu);
  while (!g_gate_open) pthread_cond_wait(&g_gate_cv, &g_gate_mu);
  pthread_mutex_unlock(&g_gate_mu);
}

static void count_deleter(void* data, void* user_data) {
  (void)user_data;
  free(data);
  atomic_fetch_add(&g_deleted, 1);
}

/* A float32 tensor of n elements, all `value`, that dp owns and releases
 * with count_deleter. */
static dp_tensor* owned_tensor(int64_t n, float value) {
  float* data = malloc((size_t)n * sizeof(float));
  dp_tensor* t = NULL;
  dp_status* s;
  int64_t i;
  if (data == NULL) return NULL;
  for (i = 0; i < n; ++i) data[i] = value;
  s = dp_tensor_create_owned(DP_DTYPE_FLOAT32, &n, 1, data, (size_t)n * sizeof(float), count_deleter, NULL, &t);
  if (s != NULL) {
    dp_status_free(s);
    free(data);
    return NULL;
  }
  return t;
}

/* The shared blob's tensors: thread t's k-th holds 1 + (t + k) % 5 elements
 * of value 1000 t + k, so a fetch can tell a whole tensor from a torn one. */
static int64_t shared_numel(int t, int k) { return 1 + (t + k) % 5; }

/* Whether blob `name` holds n float32 elements; their common value goes to
 * *value (all must be equal). */
static int fetch_uniform(dp_workspace* ws, const char* name, int64_t* n, float* value) {
  dp_tensor* t = NULL;
  dp_status* s = dp_workspace_fetch(ws, name, &t);
  const float* v;
  int64_t i;
  int ok;
  if (s != NULL) {
    fprintf(stderr, "fetch %s: %s\n", name, dp_status_message(s));
    dp_status_free(s);
    return 0;
  }
  *n = dp_tensor_numel(t);
  v = dp_tensor_data(t);
  ok = dp_tensor_dtype(t) == DP_DTYPE_FLOAT32 && dp_tensor_ndim(t) == 1 && *n > 0 && v != NULL;
  for (i = 0; ok && i < *n; ++i) ok = v[i] == v[0];
  if (ok) *value = v[0];
  dp_tensor_free(t);
  return ok;
}

struct worker {
  dp_workspace* ws;
  int id;
  const char* dir; /* thread 0 saves checkpoints here */
  int created;     /* owned tensors made */
  int failures;    /* checks that failed (reported by the main thread) */
};

static void* worker_main(void* arg) {
  struct worker* w = arg;
  char own[32];
  int k;
  snprintf(own, sizeof own, "own/%d", w->id);
  wait_at_gate();
  for (k = 0; k < kIters; ++k) {
    dp_tensor* t = owned_tensor(shared_numel(w->id, k), (float)(1000 * w->id + k));
    dp_tensor* mine = owned_tensor(3, (float)k);
    dp_status* s;
    int64_t n = 0;
    float v = 0;
    int32_t has = 0;
    dp_string_list* list = NULL;
    if (t == NULL || mine == NULL) {
      ++w->failures;
      dp_tensor_free(t);
      dp_tensor_free(mine);
      return NULL;
    }
    w->created += 2;
    /* The same blob from every thread, and one of its own. */
    if ((s = dp_workspace_feed(w->ws, "shared", t)) != NULL) ++w->failures, dp_status_free(s);
    if ((s = dp_workspace_feed(w->ws, own, mine)) != NULL) ++w->failures, dp_status_free(s);
    dp_tensor_free(t);
    dp_tensor_free(mine);
    if (!fetch_uniform(w->ws, "shared", &n, &v) || v < 0 || n != shared_numel((int)v / 1000, (int)v % 1000))
      ++w->failures;
    if (!fetch_uniform(w->ws, own, &n, &v) || n != 3 || v != (float)k) ++w->failures;
    /* Blobs the running net reads. */
    if (!fetch_uniform(w->ws, "w", &n, &v) || n != kWElems || v != 0.5f) ++w->failures;
    if (!fetch_uniform(w->ws, "b", &n, &v) || n != 1 || v != -1.0f) ++w->failures;
    if ((s = dp_workspace_has_blob(w->ws, "shared", &has)) != NULL || has != 1) ++w->failures, dp_status_free(s);
    if ((s = dp_workspace_list_blobs(w->ws, "own/", &list)) != NULL || dp_string_list_size(list) < 1)
      ++w->failures, dp_status_free(s);
    dp_string_list_free(list);
    if (w->dir != NULL && k % (kIters / kSaves) == 0) {
      /* Checkpoints read blobs as fetches do. */
      const char* names[] = {"shared", "w"};
      char path[256];
      dp_checkpoint_info* info = NULL;
      snprintf(path, sizeof path, "%s/ckpt-%d.dpckpt", w->dir, k);
      if ((s = dp_checkpoint_save(w->ws, names, 2, path, NULL)) != NULL) ++w->failures, dp_status_free(s);
      if ((s = dp_checkpoint_info_from_file(path, &info)) != NULL || dp_checkpoint_info_num_tensors(info) != 2)
        ++w->failures, dp_status_free(s);
      dp_checkpoint_info_free(info);
      remove(path);
    }
  }
  return NULL;
}

struct runner {
  dp_net* net;
  int failures;
};

static void* runner_main(void* arg) {
  struct runner* r = arg;
  int i;
  wait_at_gate();
  for (i = 0; i < kRuns; ++i) {
    dp_status* s = dp_net_run(r->net);
    if (s != NULL) {
      fprintf(stderr, "run %d: %s\n", i, dp_status_message(s));
      ++r->failures;
      dp_status_free(s);
    }
  }
  return NULL;
}

/* Fetches of blobs that do not exist, or exist but are empty, say which. */
static void test_fetch_messages(void) {
  dp_workspace* ws = NULL;
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_tensor* t = SENTINEL;
  EXPECT_OK(dp_workspace_create(&ws));
  EXPECT_OK(dp_netdef_from_json(kReader, sizeof kReader - 1, &def));
  EXPECT_OK(dp_net_create(ws, def, NULL, &net)); /* creates y and z, empty until a run */
  EXPECT_ERR2(dp_workspace_fetch(ws, "y", &t), DP_ERR_NOT_FOUND, "blob 'y' is empty", "nothing has been fed");
  EXPECT_ERR(dp_workspace_fetch(ws, "nope", &t), DP_ERR_NOT_FOUND, "no blob named 'nope'");
  CHECK(t == SENTINEL);
  dp_net_free(net);
  dp_netdef_free(def);
  dp_workspace_free(ws);
}

static void test_concurrent_feeds_and_fetches(void) {
  dp_workspace* ws = NULL;
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_tensor* t;
  struct worker workers[kThreads];
  struct runner runner;
  pthread_t threads[kThreads + 1];
  char dir[] = "/tmp/dp_ws_threads_XXXXXX";
  int created = 0, failures = 0, i;
  int64_t n = 0;
  float v = 0;
  if (!CHECK(mkdtemp(dir) != NULL)) return;
  g_gate_open = 0;
  atomic_store(&g_deleted, 0);
  EXPECT_OK(dp_workspace_create(&ws));
  t = owned_tensor(kWElems, 0.5f);
  EXPECT_OK(dp_workspace_feed(ws, "w", t));
  dp_tensor_free(t);
  t = owned_tensor(1, -1.0f);
  EXPECT_OK(dp_workspace_feed(ws, "b", t));
  dp_tensor_free(t);
  created += 2;
  EXPECT_OK(dp_netdef_from_json(kReader, sizeof kReader - 1, &def));
  EXPECT_OK(dp_net_create(ws, def, NULL, &net));
  runner.net = net;
  runner.failures = 0;
  CHECK(pthread_create(&threads[kThreads], NULL, runner_main, &runner) == 0);
  for (i = 0; i < kThreads; ++i) {
    workers[i].ws = ws;
    workers[i].id = i;
    workers[i].dir = i == 0 ? dir : NULL;
    workers[i].created = 0;
    workers[i].failures = 0;
    CHECK(pthread_create(&threads[i], NULL, worker_main, &workers[i]) == 0);
  }
  pthread_mutex_lock(&g_gate_mu);
  g_gate_open = 1;
  pthread_cond_broadcast(&g_gate_cv);
  pthread_mutex_unlock(&g_gate_mu);
  for (i = 0; i <= kThreads; ++i) CHECK(pthread_join(threads[i], NULL) == 0);
  for (i = 0; i < kThreads; ++i) {
    created += workers[i].created;
    failures += workers[i].failures;
  }
  if (!CHECK(failures == 0)) fprintf(stderr, "%d failed checks in the feeding threads\n", failures);
  CHECK(runner.failures == 0);
  CHECK(created == 2 + 2 * kThreads * kIters);
  /* The net read w and b throughout. */
  CHECK(fetch_uniform(ws, "y", &n, &v) && n == kWElems && v == 1.0f);
  CHECK(fetch_uniform(ws, "z", &n, &v) && n == 1 && v == -3.0f);
  /* Each tensor fed with a deleter is released once: all but the blobs'
   * current ones (w, b, shared and one per thread) by now, those with the
   * workspace (its net keeps it alive). */
  CHECK(atomic_load(&g_deleted) == created - (3 + kThreads));
  dp_net_free(net);
  dp_netdef_free(def);
  dp_workspace_free(ws);
  CHECK(atomic_load(&g_deleted) == created);
  CHECK(rmdir(dir) == 0);
}

int main(void) {
  test_fetch_messages();
  test_concurrent_feeds_and_fetches();
  return check_report();
}
