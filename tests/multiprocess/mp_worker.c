/*
 * One process of a multi-process job (strict C11 + POSIX, public API only),
 * started by dp-run or by the failure script with DP_RANK, DP_WORLD_SIZE,
 * DP_STORE (and DP_RUN_ID) set.
 *
 *   mp_worker equivalence --devices D [--model mlp|bn] [--steps K]
 *     trains K steps of a data-parallel model over every process x D CPU
 *     devices, each process feeding its part of the global batch, and checks
 *     that replica 0's params equal one device trained on the whole global
 *     batch in this process (relative error <= 1e-5 of each tensor's largest
 *     value), that the loss seed is 1/(devices x processes) (the step is the
 *     global batch's), that every step's unscoped "loss" is the global
 *     batch's (one device's on it), and that checkpoints are written by rank
 *     0 alone and load back on every rank.
 *   mp_worker kill --victim V --step S [--steps K]
 *     rank V kills itself (SIGKILL) before step S; every other rank must see
 *     that step fail with DP_ERR_UNAVAILABLE or DP_ERR_TIMEOUT naming rank V
 *     within the timeout (DP_TIMEOUT_MS) plus 1 s.
 *   mp_worker stall --victim V --step S
 *     rank V stops itself (SIGSTOP) before step S: the others must fail the
 *     same way (the script kills the stopped process afterwards).
 *   mp_worker accumulate|bmuf|shared --devices D [--steps K]
 *     gradient accumulation (2 batches per update), BMUF (blocks of 2
 *     steps) and a shared model across processes equal the same options
 *     over all the job's devices in one process (relative error <= 1e-5),
 *     params and unscoped loss (but BMUF's: its replicas train on their own
 *     shards, and its loss is this process's).
 *   mp_worker join --devices D [--steps K] [--zero 1|2]
 *     uneven data: rank r has K - r batches, then joins; the params equal
 *     one device trained on the active processes' batches of each step, so
 *     does each step's loss on the active ranks, and rank r's join shadows r
 *     steps (with --zero 1 under a sharded optimizer state; --zero 2 with
 *     dynamic loss scaling too, from 2^16: nothing overflows, so the same
 *     params).
 *   mp_worker zero --devices D [--steps K]
 *     a sharded optimizer state (ZeRO-1) equals the unsharded job over the
 *     same processes (bit for bit through shared memory) and one device on
 *     the global batch; its checkpoint resumes unsharded (over the
 *     processes, and on one device) and one device's resumes sharded.
 *   mp_worker zero_compressed --devices D [--steps K]
 *     the same with gradients compressed to bfloat16 (a 16-bit reduce-scatter):
 *     bit for bit the unsharded job compressed alike over the same processes,
 *     and within bfloat16's rounding of one device on the global batch.
 *   mp_worker zero_scaled --devices D [--steps K]
 *     a sharded optimizer state with dynamic loss scaling from 2^127: the
 *     overflowing steps are skipped as the unsharded job skips them, bit for
 *     bit through shared memory, with the same scale.
 * Exits 0 when every check held.
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include "../capi/check.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kIn = 8, kHidden = 16, kClasses = 3, kPerDevice = 4, kMaxDevices = 8, kMaxProcs = 8 };

static const char kMlp[] =
    "{\"name\": \"mlp\","
    " \"init_net\": {\"ops\": ["
    "  {\"type\": \"XavierFill\", \"outputs\": [\"w1\"], \"args\": [{\"name\": \"shape\", \"ints\": [16, 8]},"
    "   {\"name\": \"seed\", \"i\": %d}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"b1\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]}]},"
    "  {\"type\": \"XavierFill\", \"outputs\": [\"w2\"], \"args\": [{\"name\": \"shape\", \"ints\": [3, 16]},"
    "   {\"name\": \"seed\", \"i\": %d}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"b2\"], \"args\": [{\"name\": \"shape\", \"ints\": [3]}]}]},"
    " \"forward_net\": {\"ops\": ["
    "  {\"type\": \"FC\", \"inputs\": [\"data\", \"w1\", \"b1\"], \"outputs\": [\"h\"]},"
    "  {\"type\": \"Relu\", \"inputs\": [\"h\"], \"outputs\": [\"h\"]},"
    "  {\"type\": \"FC\", \"inputs\": [\"h\", \"w2\", \"b2\"], \"outputs\": [\"logits\"]},"
    "  {\"type\": \"SoftmaxWithLoss\", \"inputs\": [\"logits\", \"label\"], \"outputs\": [\"softmax\", \"loss\"]}]},"
    " \"params\": [\"w1\", \"b1\", \"w2\", \"b2\"],"
    " \"inputs\": [\"data\", \"label\"],"
    " \"losses\": [\"loss\"],"
    " \"optimizer\": {\"type\": \"adam\", \"lr\": 0.05, \"lr_policy\": \"step\", \"stepsize\": 2, \"gamma\": 0.5}}";

/* Batch norm with sync BN (statistics of the whole global batch, over every
 * process) under momentum SGD (see test_resume.c for why not Adam). */
static const char kBn[] =
    "{\"name\": \"bn\","
    " \"init_net\": {\"ops\": ["
    "  {\"type\": \"XavierFill\", \"outputs\": [\"w1\"], \"args\": [{\"name\": \"shape\", \"ints\": [16, 8]},"
    "   {\"name\": \"seed\", \"i\": %d}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"b1\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"gamma\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]},"
    "   {\"name\": \"value\", \"f\": 1}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"beta\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"rm\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"rv\"], \"args\": [{\"name\": \"shape\", \"ints\": [16]},"
    "   {\"name\": \"value\", \"f\": 1}]},"
    "  {\"type\": \"XavierFill\", \"outputs\": [\"w2\"], \"args\": [{\"name\": \"shape\", \"ints\": [3, 16]},"
    "   {\"name\": \"seed\", \"i\": %d}]},"
    "  {\"type\": \"ConstantFill\", \"outputs\": [\"b2\"], \"args\": [{\"name\": \"shape\", \"ints\": [3]}]}]},"
    " \"forward_net\": {\"ops\": ["
    "  {\"type\": \"FC\", \"inputs\": [\"data\", \"w1\", \"b1\"], \"outputs\": [\"h\"]},"
    "  {\"type\": \"SpatialBN\", \"inputs\": [\"h\", \"gamma\", \"beta\", \"rm\", \"rv\"],"
    "   \"outputs\": [\"hn\", \"rm\", \"rv\", \"sm\", \"sv\"]},"
    "  {\"type\": \"Relu\", \"inputs\": [\"hn\"], \"outputs\": [\"hn\"]},"
    "  {\"type\": \"FC\", \"inputs\": [\"hn\", \"w2\", \"b2\"], \"outputs\": [\"logits\"]},"
    "  {\"type\": \"SoftmaxWithLoss\", \"inputs\": [\"logits\", \"label\"], \"outputs\": [\"softmax\", \"loss\"]}]},"
    " \"params\": [\"w1\", \"b1\", \"gamma\", \"beta\", \"w2\", \"b2\"],"
    " \"computed_params\": [\"rm\", \"rv\"],"
    " \"inputs\": [\"data\", \"label\"],"
    " \"losses\": [\"loss\"],"
    " \"optimizer\": {\"type\": \"momentum\", \"lr\": 0.05, \"lr_policy\": \"step\", \"stepsize\": 2, \"gamma\": 0.5}}";

/* The model with init seeds `seed` and `seed + 1`: every process but rank 0
 * initialises differently, so equality shows that rank 0's params were
 * broadcast by the init net. */
static int load_model(const char* text, int seed, dp_model** out) {
  char json[8192];
  snprintf(json, sizeof json, text, seed, seed + 1);
  return EXPECT_OK(dp_model_from_json(json, strlen(json), out));
}

typedef struct {
  const char* mode;
  const char* model;
  int devices, steps, victim, step;
  int zero; /* join: under a sharded optimizer state (2: with dynamic loss scaling too) */
  int rank, world;
  long long timeout_ms;
  const char* dir; /* checkpoints (DP_TEST_DIR) */
} config;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

/* What the inputs are multiplied by, and kScaled's first loss scale (0: the
 * default, 2^16); zero_scaled: larger gradients, and 2^127. */
static float g_gain = 1.0f;
static double g_initial_scale = 0;

/* Rows [first, first + rows) of step `step`'s global batch: deterministic
 * values that do not depend on how the batch is cut. */
static int feed_rows(dp_workspace* ws, int step, int first, int rows) {
  float x[kMaxProcs * kMaxDevices * kPerDevice * kIn];
  int32_t y[kMaxProcs * kMaxDevices * kPerDevice];
  const int64_t xd[2] = {rows, kIn}, yd[1] = {rows};
  dp_tensor *tx = NULL, *ty = NULL;
  int i, k, ok;
  for (i = 0; i < rows; ++i) {
    uint32_t s = 2654435761u * (uint32_t)(step + 1) + 40503u * (uint32_t)(first + i + 1);
    for (k = 0; k < kIn; ++k) {
      s = s * 1664525u + 1013904223u;
      x[i * kIn + k] = (float)((double)(s >> 8) / 16777216.0 * 4.0 - 2.0) * g_gain;
    }
    y[i] = (int32_t)((x[i * kIn] > 0) + (x[i * kIn + 1] > 0.5f));
  }
  ok = EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, xd, 2, x, sizeof(float) * (size_t)(rows * kIn), &tx)) &&
       EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, yd, 1, y, sizeof(int32_t) * (size_t)rows, &ty)) &&
       EXPECT_OK(dp_workspace_feed(ws, "data", tx)) && EXPECT_OK(dp_workspace_feed(ws, "label", ty));
  dp_tensor_free(tx);
  dp_tensor_free(ty);
  return ok;
}

typedef struct {
  dp_workspace* ws;
  dp_parallel_model* pm;
  dp_net* train;
  dp_net* extra; /* the accumulate net (kAccumulate) or the BMUF block net (kBmuf) */
} job;

enum { kSyncBn = 1, kAccumulate = 2, kBmuf = 4, kShared = 8, kZero = 16, kBf16 = 32, kScaled = 64 };

/* shards 0: the environment's processes (dp-run); 1: this process alone.
 * flags: kSyncBn, kAccumulate (2 steps), kBmuf (blocks of 2 steps), kShared (a shared model), kZero (a
 * sharded optimizer state), kBf16 (bfloat16 gradients), kScaled (dynamic loss scaling from g_initial_scale). */
static int make_job(job* j, dp_model* model, int devices, int shards, int flags) {
  int32_t ids[kMaxDevices] = {0, 1, 2, 3, 4, 5, 6, 7};
  dp_parallel_options o;
  dp_netdef *init = NULL, *train = NULL, *extra = NULL;
  dp_net* init_net = NULL;
  int32_t block = 0;
  int ok;
  memset(j, 0, sizeof *j);
  dp_parallel_options_init(&o, sizeof o);
  o.device_ids = ids;
  o.num_devices = (size_t)devices;
  o.num_shards = shards;
  o.sync_bn = (flags & kSyncBn) != 0;
  o.shared_model = (flags & kShared) != 0;
  o.shard_optimizer_state = (flags & kZero) != 0;
  if (flags & kBf16) o.gradient_compression = DP_GRADIENT_COMPRESSION_BF16;
  if (flags & kScaled) {
    o.loss_scaling = DP_LOSS_SCALING_DYNAMIC;
    o.initial_loss_scale = g_initial_scale;
  }
  if (flags & kAccumulate) o.accumulate_steps = 2;
  if (flags & kBmuf) {
    o.bmuf = 1;
    o.bmuf_block_length = 2;
  }
  ok = EXPECT_OK(dp_workspace_create(&j->ws)) && EXPECT_OK(dp_model_parallelize(model, &o, &j->pm)) &&
       EXPECT_OK(dp_parallel_model_nets(j->pm, &init, &train, NULL)) &&
       EXPECT_OK(dp_net_create(j->ws, init, NULL, &init_net)) && EXPECT_OK(dp_net_run(init_net)) &&
       EXPECT_OK(dp_net_create(j->ws, train, NULL, &j->train));
  if (ok && (flags & kAccumulate)) ok = EXPECT_OK(dp_parallel_model_accumulate_net(j->pm, &extra));
  if (ok && (flags & kBmuf)) ok = EXPECT_OK(dp_parallel_model_block_net(j->pm, &extra, &block)) && CHECK(block == 2);
  if (ok && extra != NULL) ok = EXPECT_OK(dp_net_create(j->ws, extra, NULL, &j->extra));
  dp_net_free(init_net);
  dp_netdef_free(init);
  dp_netdef_free(train);
  dp_netdef_free(extra);
  return ok;
}

static void free_job(job* j) {
  dp_net_free(j->extra);
  dp_net_free(j->train);
  dp_parallel_model_free(j->pm);
  dp_workspace_free(j->ws);
}

/* max |a - b| / max |b| over a tensor. A tensor whose reference values are
 * all tiny is rounding noise around an exact zero (a bias before batch norm
 * has no gradient in exact arithmetic): it is compared absolutely, as if its
 * largest value were 1e-3. */
static double rel_error(const dp_tensor* a, const dp_tensor* b) {
  const float* pa = (const float*)dp_tensor_data(a);
  const float* pb = (const float*)dp_tensor_data(b);
  const int64_t n = dp_tensor_numel(b);
  double diff = 0, scale = 0;
  int64_t i;
  if (dp_tensor_numel(a) != n) return INFINITY;
  for (i = 0; i < n; ++i) {
    const double d = fabs((double)pa[i] - (double)pb[i]);
    if (d > diff || d != d) diff = d != d ? INFINITY : d;
    if (fabs((double)pb[i]) > scale) scale = fabs((double)pb[i]);
  }
  return diff / (scale > 1e-3 ? scale : 1e-3);
}

/* Replica 0's params of `got` against `want`'s: within `tolerance` (relative, as rel_error). */
static int compare_params_within(const char* label, dp_workspace* got, dp_workspace* want, dp_model* model,
                                 double tolerance) {
  dp_string_list* params = NULL;
  size_t i;
  int ok = EXPECT_OK(dp_model_blobs(model, DP_MODEL_PARAMS, &params));
  for (i = 0; ok && i < dp_string_list_size(params); ++i) {
    char scoped[256];
    dp_tensor *a = NULL, *b = NULL;
    double err;
    snprintf(scoped, sizeof scoped, "cpu_0/%s", dp_string_list_get(params, i));
    ok = EXPECT_OK(dp_workspace_fetch(got, scoped, &a)) &&
         EXPECT_OK(dp_workspace_fetch(want, scoped, &b));
    err = ok ? rel_error(a, b) : INFINITY;
    if (!CHECK(err <= tolerance) && a != NULL && b != NULL)
      fprintf(stderr, "%s: param %s differs from the reference: relative error %g (%g vs %g)\n", label,
              dp_string_list_get(params, i), err, (double)((const float*)dp_tensor_data(a))[0],
              (double)((const float*)dp_tensor_data(b))[0]);
    dp_tensor_free(a);
    dp_tensor_free(b);
  }
  dp_string_list_free(params);
  return ok;
}

static int compare_params(const char* label, dp_workspace* got, dp_workspace* want, dp_model* model) {
  return compare_params_within(label, got, want, model, 1e-5);
}

/* The unscoped loss of a data-parallel train step over several processes is
 * the global batch's: the reference's (one device on the whole global batch,
 * or the same options in one process), to float rounding. */
static int compare_loss(const char* label, int step, dp_workspace* got, dp_workspace* want) {
  dp_tensor *a = NULL, *b = NULL;
  double err;
  int ok = EXPECT_OK(dp_workspace_fetch(got, "loss", &a)) && EXPECT_OK(dp_workspace_fetch(want, "loss", &b)) &&
           CHECK(dp_tensor_numel(a) == 1 && dp_tensor_numel(b) == 1);
  err = ok ? rel_error(a, b) : INFINITY;
  if (ok && !CHECK(err <= 1e-5))
    fprintf(stderr, "%s: step %d's loss %g is not the global batch's %g\n", label, step,
            (double)((const float*)dp_tensor_data(a))[0], (double)((const float*)dp_tensor_data(b))[0]);
  dp_tensor_free(a);
  dp_tensor_free(b);
  return ok && err <= 1e-5;
}

static int equivalence(const config* c) {
  dp_model *model = NULL, *mine = NULL;
  job multi = {0}, single = {0};
  const int sync_bn = strcmp(c->model, "bn") == 0;
  const int local = c->devices * kPerDevice, global = local * c->world;
  int step, ok;
  char path[1024];
  if (!load_model(sync_bn ? kBn : kMlp, 1, &model) || !load_model(sync_bn ? kBn : kMlp, 1 + 10 * c->rank, &mine))
    return 0;
  ok = make_job(&multi, mine, c->devices, 0, sync_bn ? kSyncBn : 0) && make_job(&single, model, 1, 1, 0);
  ok = ok && CHECK(dp_parallel_model_num_shards(multi.pm) == c->world) &&
       CHECK(dp_parallel_model_shard_id(multi.pm) == c->rank) && CHECK(dp_parallel_model_num_shards(single.pm) == 1);
  for (step = 0; ok && step < c->steps; ++step) {
    ok = feed_rows(multi.ws, step, c->rank * local, local) && EXPECT_OK(dp_net_run(multi.train)) &&
         feed_rows(single.ws, step, 0, global) && EXPECT_OK(dp_net_run(single.train)) &&
         compare_loss("equivalence", step, multi.ws, single.ws);
  }
  ok = ok && compare_params("after training", multi.ws, single.ws, model);

  /* Checkpoints: rank 0 writes; every rank loads it (and rank 0's state is
   * broadcast): a fresh job resumed from it equals the trained one. */
  snprintf(path, sizeof path, "%s/%s-%s-%dx%d.dpckpt", c->dir, c->model, getenv("DP_RUN_ID"), c->world, c->devices);
  if (ok) {
    FILE* f;
    job resumed = {0};
    ok = EXPECT_OK(dp_parallel_model_save(multi.pm, multi.ws, path, NULL)) &&
         EXPECT_OK(dp_parallel_model_sync(multi.pm, multi.ws)); /* a barrier: the file is there */
    f = fopen(path, "rb");
    ok = ok && CHECK(f != NULL);
    if (f != NULL) fclose(f);
    ok = ok && make_job(&resumed, mine, c->devices, 0, sync_bn ? kSyncBn : 0) &&
         EXPECT_OK(dp_parallel_model_load(resumed.pm, resumed.ws, path, NULL)) &&
         compare_params("after loading rank 0's checkpoint", resumed.ws, single.ws, model);
    /* One more step on both: still the same. */
    ok = ok && feed_rows(resumed.ws, c->steps, c->rank * local, local) && EXPECT_OK(dp_net_run(resumed.train)) &&
         feed_rows(single.ws, c->steps, 0, global) && EXPECT_OK(dp_net_run(single.train)) &&
         compare_params("a step after resuming", resumed.ws, single.ws, model);
    free_job(&resumed);
  }
  free_job(&multi);
  free_job(&single);
  dp_model_free(model);
  dp_model_free(mine);
  return ok;
}

/* Gradient accumulation (2 global batches per update) and BMUF (blocks of 2
 * local steps) across processes equal the same options over all of the
 * job's devices in one process. */
static int variant(const config* c, int flag, const char* label) {
  dp_model *model = NULL, *mine = NULL;
  job multi = {0}, ref = {0};
  const int local = c->devices * kPerDevice, global = local * c->world;
  int step, ok;
  if (!load_model(kMlp, 1, &model) || !load_model(kMlp, 1 + 10 * c->rank, &mine)) return 0;
  ok = make_job(&multi, mine, c->devices, 0, flag) && make_job(&ref, model, c->devices * c->world, 1, flag);
  for (step = 0; ok && step < c->steps; ++step) {
    if (flag == kAccumulate) { /* batch 2s accumulated, batch 2s + 1 in the update */
      ok = feed_rows(multi.ws, 2 * step, c->rank * local, local) && EXPECT_OK(dp_net_run(multi.extra)) &&
           feed_rows(ref.ws, 2 * step, 0, global) && EXPECT_OK(dp_net_run(ref.extra));
    }
    ok = ok && feed_rows(multi.ws, 2 * step + 1, c->rank * local, local) && EXPECT_OK(dp_net_run(multi.train)) &&
         feed_rows(ref.ws, 2 * step + 1, 0, global) && EXPECT_OK(dp_net_run(ref.train));
    /* (BMUF replicas train on their own shards: its loss is this process's.) */
    if (ok && flag != kBmuf) ok = compare_loss(label, step, multi.ws, ref.ws);
    if (ok && flag == kBmuf && step % 2 == 1)
      ok = EXPECT_OK(dp_net_run(multi.extra)) && EXPECT_OK(dp_net_run(ref.extra));
  }
  ok = ok && compare_params(label, multi.ws, ref.ws, model);
  if (ok && flag == kShared && c->rank != 0) {
    /* A drifted process gets process 0's shared params back from the sync net. */
    dp_tensor *w = NULL, *drift = NULL; /* zeros */
    ok = EXPECT_OK(dp_workspace_fetch(multi.ws, "cpu_0/w1", &w)) &&
         EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dp_tensor_dims(w), dp_tensor_ndim(w), NULL, 0, &drift)) &&
         EXPECT_OK(dp_workspace_feed(multi.ws, "cpu_0/w1", drift));
    dp_tensor_free(w);
    dp_tensor_free(drift);
  }
  if (flag == kShared)
    ok = ok && EXPECT_OK(dp_parallel_model_sync(multi.pm, multi.ws)) &&
         compare_params("after dp_parallel_model_sync", multi.ws, ref.ws, model);
  free_job(&multi);
  free_job(&ref);
  dp_model_free(model);
  dp_model_free(mine);
  return ok;
}

/* One more step of each job (feed and train), at step `step`. */
static int step_all(job* const* jobs, size_t count, int step, const config* c) {
  const int local = c->devices * kPerDevice;
  size_t i;
  int ok = 1;
  for (i = 0; ok && i < count; ++i) {
    const int multi = dp_parallel_model_num_shards(jobs[i]->pm) > 1;
    ok = feed_rows(jobs[i]->ws, step, multi ? c->rank * local : 0, multi ? local : local * c->world) &&
         EXPECT_OK(dp_net_run(jobs[i]->train));
  }
  return ok;
}

/* ZeRO-1 across processes: the sharded optimizer state's steps equal the
 * unsharded ones over the same processes bit for bit through shared memory
 * (to 1e-6 over TCP, whose ring sums in its own order), and one device on
 * the global batch to 1e-5; its checkpoint holds the whole state, so an
 * unsharded job over the same processes and one device in one process
 * resume from it, and a sharded job resumes from one device's. */
static int zero(const config* c) {
  dp_model *model = NULL, *mine = NULL;
  job sharded = {0}, plain = {0}, single = {0}, from_sharded = {0}, one_from_sharded = {0}, from_single = {0};
  const char* transport = getenv("DP_LOCAL_TRANSPORT");
  const double exact = transport != NULL && strcmp(transport, "tcp") == 0 ? 1e-6 : 0;
  int step, ok;
  char zpath[1024], spath[1024];
  if (!load_model(kMlp, 1, &model) || !load_model(kMlp, 1 + 10 * c->rank, &mine)) return 0;
  ok = make_job(&sharded, mine, c->devices, 0, kZero) && make_job(&plain, mine, c->devices, 0, 0) &&
       make_job(&single, model, 1, 1, 0);
  for (step = 0; ok && step < c->steps; ++step) {
    job* all[] = {&sharded, &plain, &single};
    ok = step_all(all, 3, step, c) && compare_loss("zero", step, sharded.ws, single.ws) &&
         compare_params_within("zero against unsharded", sharded.ws, plain.ws, model, exact);
  }
  ok = ok && compare_params("zero against one device", sharded.ws, single.ws, model);
  snprintf(zpath, sizeof zpath, "%s/zero-%s-%dx%d.dpckpt", c->dir, getenv("DP_RUN_ID"), c->world, c->devices);
  snprintf(spath, sizeof spath, "%s/zero-%s-%dx%d-single-%d.dpckpt", c->dir, getenv("DP_RUN_ID"), c->world,
           c->devices, c->rank);
  /* Every process saves (the state is gathered); sync: a barrier, the file is there. */
  ok = ok && EXPECT_OK(dp_parallel_model_save(sharded.pm, sharded.ws, zpath, NULL)) &&
       EXPECT_OK(dp_parallel_model_sync(sharded.pm, sharded.ws)) &&
       EXPECT_OK(dp_parallel_model_save(single.pm, single.ws, spath, NULL));
  ok = ok && make_job(&from_sharded, mine, c->devices, 0, 0) && make_job(&one_from_sharded, model, 1, 1, 0) &&
       make_job(&from_single, mine, c->devices, 0, kZero) &&
       EXPECT_OK(dp_parallel_model_load(from_sharded.pm, from_sharded.ws, zpath, NULL)) &&
       EXPECT_OK(dp_parallel_model_load(one_from_sharded.pm, one_from_sharded.ws, zpath, NULL)) &&
       EXPECT_OK(dp_parallel_model_load(from_single.pm, from_single.ws, spath, NULL));
  /* Two more steps of every job: the resumed ones go on as the originals. */
  for (step = c->steps; ok && step < c->steps + 2; ++step) {
    job* all[] = {&sharded, &plain, &single, &from_sharded, &one_from_sharded, &from_single};
    ok = step_all(all, 6, step, c);
  }
  ok = ok && compare_params_within("unsharded, resumed from the sharded checkpoint", from_sharded.ws, sharded.ws,
                                   model, exact) &&
       compare_params("one device, resumed from the sharded checkpoint", one_from_sharded.ws, single.ws, model) &&
       compare_params("sharded, resumed from one device's checkpoint", from_single.ws, single.ws, model) &&
       compare_params("sharded, after 2 more steps", sharded.ws, single.ws, model);
  free_job(&from_single);
  free_job(&one_from_sharded);
  free_job(&from_sharded);
  free_job(&sharded);
  free_job(&plain);
  free_job(&single);
  dp_model_free(model);
  dp_model_free(mine);
  return ok;
}

/* ZeRO-1 with bfloat16 gradients against the unsharded job compressed alike:
 * each process's float sum is rounded to bfloat16 once and the processes'
 * are summed in float in rank order (shared memory; two processes over Gloo
 * likewise), so the same bits; one device in float32 to bfloat16's rounding. */
static int zero_compressed(const config* c) {
  dp_model *model = NULL, *mine = NULL;
  job sharded = {0}, plain = {0}, single = {0};
  int step, ok;
  if (!load_model(kMlp, 1, &model) || !load_model(kMlp, 1 + 10 * c->rank, &mine)) return 0;
  ok = make_job(&sharded, mine, c->devices, 0, kZero | kBf16) && make_job(&plain, mine, c->devices, 0, kBf16) &&
       make_job(&single, model, 1, 1, 0);
  for (step = 0; ok && step < c->steps; ++step) {
    job* all[] = {&sharded, &plain, &single};
    ok = step_all(all, 3, step, c) &&
         compare_params_within("compressed zero against compressed unsharded", sharded.ws, plain.ws, model, 0);
  }
  ok = ok && compare_params_within("compressed zero against one device in float32", sharded.ws, single.ws, model,
                                   2e-2);
  free_job(&sharded);
  free_job(&plain);
  free_job(&single);
  dp_model_free(model);
  dp_model_free(mine);
  return ok;
}

/* The first element of a float32 blob. */
static float fetch_first(dp_workspace* ws, const char* blob) {
  dp_tensor* t = NULL;
  float v = NAN;
  if (EXPECT_OK(dp_workspace_fetch(ws, blob, &t)) && CHECK(dp_tensor_numel(t) >= 1))
    v = ((const float*)dp_tensor_data(t))[0];
  dp_tensor_free(t);
  return v;
}

/* ZeRO-1 with dynamic loss scaling from 2^127 (inputs 100 times larger): the
 * first steps overflow. Each replica checks its shard and the flags are
 * summed over every process, so the sharded job skips exactly the steps the
 * unsharded one skips, bit for bit through shared memory, and both cut the
 * scale alike. With 3 processes of 1 device the third owns no element of
 * this small model (every shard of it is empty): on its own flag it would
 * never cut its scale, and the job would part from the unsharded one. */
static int zero_scaled(const config* c) {
  dp_model* mine = NULL;
  job sharded = {0}, plain = {0};
  int step, ok;
  float scale = NAN, before = NAN;
  if (!load_model(kMlp, 1 + 10 * c->rank, &mine)) return 0;
  g_gain = 100.0f; /* gradients up to ~2^7: 2^127 overflows them */
  g_initial_scale = ldexp(1.0, 127);
  ok = make_job(&sharded, mine, c->devices, 0, kZero | kScaled) && make_job(&plain, mine, c->devices, 0, kScaled);
  if (ok) before = fetch_first(sharded.ws, "cpu_0/w2");
  for (step = 0; ok && step < c->steps; ++step) {
    job* all[] = {&sharded, &plain};
    ok = step_all(all, 2, step, c) &&
         compare_params_within("scaled zero against scaled unsharded", sharded.ws, plain.ws, mine, 0);
    scale = ok ? fetch_first(sharded.ws, "optimizer/loss_scale") : NAN;
    ok = ok && CHECK(scale == fetch_first(plain.ws, "optimizer/loss_scale"));
  }
  /* Steps were skipped (the scale was cut) and steps trained. */
  ok = ok && CHECK(scale < (float)ldexp(1.0, 127)) && CHECK(before != fetch_first(sharded.ws, "cpu_0/w2"));
  if (ok && c->rank == 0) printf("zero_scaled: the loss scale after %d steps is 2^%g\n", c->steps, log2(scale));
  free_job(&sharded);
  free_job(&plain);
  dp_model_free(mine);
  return ok;
}

/* Uneven data: rank r runs out after K - r steps and joins. */
static int join(const config* c) {
  dp_model *model = NULL, *mine = NULL;
  job multi = {0}, single = {0};
  const int local = c->devices * kPerDevice;
  int step, ok;
  int64_t shadowed = -1;
  if (!load_model(kMlp, 1, &model) || !load_model(kMlp, 1 + 10 * c->rank, &mine)) return 0;
  ok = make_job(&multi, mine, c->devices, 0, (c->zero ? kZero : 0) | (c->zero == 2 ? kScaled : 0)) &&
       make_job(&single, model, 1, 1, 0);
  for (step = 0; ok && step < c->steps; ++step) {
    const int active = c->steps - step < c->world ? c->steps - step : c->world; /* ranks 0..active-1 */
    if (c->rank < active)
      ok = feed_rows(multi.ws, step, c->rank * local, local) && EXPECT_OK(dp_net_run(multi.train));
    ok = ok && feed_rows(single.ws, step, 0, active * local) && EXPECT_OK(dp_net_run(single.train));
    /* The loss of the active processes' batches. */
    if (ok && c->rank < active) ok = compare_loss("join", step, multi.ws, single.ws);
  }
  ok = ok && EXPECT_OK(dp_parallel_model_join(multi.pm, multi.ws, &shadowed)) && CHECK(shadowed == c->rank) &&
       compare_params("after joining", multi.ws, single.ws, model);
  free_job(&multi);
  free_job(&single);
  dp_model_free(model);
  dp_model_free(mine);
  return ok;
}

/* kill / stall: survivors must fail within the timeout plus 1 s, naming the victim. */
static int failure(const config* c) {
  dp_model* model = NULL;
  job j = {0};
  const int local = c->devices * kPerDevice;
  int step, ok, failed = 0;
  char victim[32];
  if (!load_model(kMlp, 1, &model)) return 0;
  ok = make_job(&j, model, c->devices, 0, 0);
  snprintf(victim, sizeof victim, "rank %d", c->victim);
  for (step = 0; ok && step < c->steps && !failed; ++step) {
    double start, took;
    dp_status* st;
    if (step == c->step && c->rank == c->victim) {
      fflush(NULL);
      raise(strcmp(c->mode, "kill") == 0 ? SIGKILL : SIGSTOP);
      fprintf(stderr, "rank %d: resumed after SIGSTOP\n", c->rank);
      break;
    }
    ok = feed_rows(j.ws, step, c->rank * local, local);
    start = now_s();
    st = dp_net_run(j.train);
    took = now_s() - start;
    if (st == NULL) continue;
    failed = 1;
    fprintf(stderr, "rank %d: step %d failed after %.3f s: %s\n", c->rank, step, took, dp_status_message(st));
    /* The victim's last step may fail too: data it had written to its
     * sockets but the kernel had not yet sent is dropped with the process. */
    ok = CHECK(step == c->step || step == c->step - 1) &&
         CHECK(dp_status_code(st) == DP_ERR_UNAVAILABLE || dp_status_code(st) == DP_ERR_TIMEOUT) &&
         CHECK(strstr(dp_status_message(st), victim) != NULL) &&
         CHECK(took <= (double)c->timeout_ms / 1000.0 + 1.0);
    if (strcmp(c->mode, "stall") == 0) ok = ok && CHECK(dp_status_code(st) == DP_ERR_TIMEOUT);
    dp_status_free(st);
  }
  ok = ok && CHECK(failed);
  free_job(&j);
  dp_model_free(model);
  return ok;
}

int main(int argc, char** argv) {
  config c;
  int i, ok;
  memset(&c, 0, sizeof c);
  c.mode = argc > 1 ? argv[1] : "equivalence";
  c.model = "mlp";
  c.devices = 1;
  c.steps = 6;
  c.victim = 1;
  c.step = 3;
  for (i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--devices") == 0) c.devices = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--model") == 0) c.model = argv[i + 1];
    else if (strcmp(argv[i], "--steps") == 0) c.steps = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--victim") == 0) c.victim = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--step") == 0) c.step = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--zero") == 0) c.zero = atoi(argv[i + 1]);
  }
  c.rank = env_int("DP_RANK", -1);
  c.world = env_int("DP_WORLD_SIZE", 0);
  c.timeout_ms = env_int("DP_TIMEOUT_MS", 60000);
  c.dir = getenv("DP_TEST_DIR") != NULL ? getenv("DP_TEST_DIR") : "/tmp";
  if (c.rank < 0 || c.world < 1 || c.world > kMaxProcs || c.devices < 1 || c.devices > kMaxDevices) {
    fprintf(stderr, "mp_worker: run under dp-run (DP_RANK, DP_WORLD_SIZE) with 1..%d processes and 1..%d devices\n",
            kMaxProcs, kMaxDevices);
    return 2;
  }
  if (strcmp(c.mode, "equivalence") == 0) {
    ok = equivalence(&c);
  } else if (strcmp(c.mode, "join") == 0) {
    ok = join(&c);
  } else if (strcmp(c.mode, "zero") == 0) {
    ok = zero(&c);
  } else if (strcmp(c.mode, "zero_compressed") == 0) {
    ok = zero_compressed(&c);
  } else if (strcmp(c.mode, "zero_scaled") == 0) {
    ok = zero_scaled(&c);
  } else if (strcmp(c.mode, "accumulate") == 0) {
    ok = variant(&c, kAccumulate, "accumulating 2 batches per update, against one process over all devices");
  } else if (strcmp(c.mode, "shared") == 0) {
    /* Across processes the gradients are allreduced and each update reads its
     * replica's sum; in one process the updates sum the replicas' gradients. */
    ok = variant(&c, kShared, "a shared model in each process, against one process over all devices");
  } else if (strcmp(c.mode, "bmuf") == 0) {
    ok = variant(&c, kBmuf, "BMUF, against one process over all devices");
  } else if (strcmp(c.mode, "kill") == 0 || strcmp(c.mode, "stall") == 0) {
    ok = failure(&c);
  } else {
    fprintf(stderr, "mp_worker: unknown mode %s\n", c.mode);
    return 2;
  }
  (void)ok;
  return check_report();
}
