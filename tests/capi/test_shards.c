/*
 * The several-processes settings of dp_parallel_options (strict C11 + POSIX
 * setenv, public API only), without starting a second process (the jobs of
 * tests/multiprocess do that): explicit fields, their environment fallbacks
 * (DP_WORLD_SIZE, DP_RANK, DP_STORE, DP_TIMEOUT_MS, DP_RUN_ID) and every bad
 * value, refused by dp_model_parallelize with a status naming the option or
 * variable and leaving *out untouched; the accessors; join of a one-process
 * model; a two-process model whose rendezvous nobody else joins fails its
 * init net in bounded time naming the missing rank; and a rank other than 0
 * saves no checkpoint.
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include "check.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char kModel[] =
    "{\"init_net\": {\"ops\": [{\"type\": \"ConstantFill\", \"outputs\": [\"w\"], \"args\": ["
    "  {\"name\": \"shape\", \"ints\": [1, 2]}]}, {\"type\": \"ConstantFill\", \"outputs\": [\"b\"], \"args\": ["
    "  {\"name\": \"shape\", \"ints\": [1]}]}]},"
    " \"forward_net\": {\"ops\": [{\"type\": \"FC\", \"inputs\": [\"x\", \"w\", \"b\"], \"outputs\": [\"y\"]},"
    "  {\"type\": \"AveragedLoss\", \"inputs\": [\"y\"], \"outputs\": [\"loss\"]}]},"
    " \"params\": [\"w\", \"b\"], \"inputs\": [\"x\"], \"losses\": [\"loss\"],"
    " \"optimizer\": {\"type\": \"sgd\", \"lr\": 0.1}}";

static dp_model* g_model;

static void clear_env(void) {
  const char* vars[] = {"DP_WORLD_SIZE", "DP_RANK",   "DP_STORE",
                        "DP_TIMEOUT_MS", "DP_INTERFACE", "DP_RUN_ID", "DP_LOCAL_TRANSPORT"};
  size_t i;
  for (i = 0; i < sizeof vars / sizeof vars[0]; ++i) unsetenv(vars[i]);
}

/* dp_model_parallelize must fail with `code` naming `what`, leaving *out alone. */
static void refused(const dp_parallel_options* o, int32_t code, const char* what) {
  dp_parallel_model* pm = (dp_parallel_model*)SENTINEL;
  EXPECT_ERR(dp_model_parallelize(g_model, o, &pm), code, what);
  CHECK(pm == (dp_parallel_model*)SENTINEL);
}

static void explicit_fields(void) {
  dp_parallel_options o;
  dp_parallel_model* pm = NULL;
  dp_parallel_options_init(&o, sizeof o);
  o.num_shards = 1;
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) {
    CHECK(dp_parallel_model_num_shards(pm) == 1);
    CHECK(dp_parallel_model_shard_id(pm) == 0);
  }
  dp_parallel_model_free(pm);
  pm = NULL;
  o.num_shards = 3;
  o.shard_id = 2;
  o.store = "file:///tmp/dp-test-shards-unused";
  o.timeout_ms = 1500;
  o.run_id = "x";
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) { /* nothing connects before the init net runs */
    CHECK(dp_parallel_model_num_shards(pm) == 3);
    CHECK(dp_parallel_model_shard_id(pm) == 2);
  }
  dp_parallel_model_free(pm);
  CHECK(dp_parallel_model_num_shards(NULL) == 0);
  CHECK(dp_parallel_model_shard_id(NULL) == -1);

  dp_parallel_options_init(&o, sizeof o);
  o.num_shards = -1;
  refused(&o, DP_ERR_INVALID_ARGUMENT, "num_shards");
  o.num_shards = 2;
  o.shard_id = 2;
  o.store = "file:///tmp/x";
  refused(&o, DP_ERR_INVALID_ARGUMENT, "shard_id");
  o.shard_id = -1;
  refused(&o, DP_ERR_INVALID_ARGUMENT, "shard_id");
  o.shard_id = 0;
  o.store = NULL;
  refused(&o, DP_ERR_INVALID_ARGUMENT, "store");
  o.store = "tcp://host:1";
  refused(&o, DP_ERR_INVALID_ARGUMENT, "store address");
  o.store = "redis://host:99999";
  refused(&o, DP_ERR_INVALID_ARGUMENT, "1..65535");
  o.store = "file:///tmp/x";
  o.timeout_ms = -5;
  refused(&o, DP_ERR_INVALID_ARGUMENT, "timeout_ms");
  o.timeout_ms = 0;
  o.run_id = "a/b";
  refused(&o, DP_ERR_INVALID_ARGUMENT, "run id");
  o.run_id = "";
  refused(&o, DP_ERR_INVALID_ARGUMENT, "run id");
  o.run_id = NULL;
  o.local_transport = "udp";
  refused(&o, DP_ERR_INVALID_ARGUMENT, "local_transport");
  o.num_shards = 1;
  refused(&o, DP_ERR_INVALID_ARGUMENT, "local_transport"); /* explicit: checked with one process too */
  o.num_shards = 2;
  o.local_transport = "tcp";
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) CHECK(dp_parallel_model_num_shards(pm) == 2);
  dp_parallel_model_free(pm);
  pm = NULL;
  {
    /* A caller compiled against 0.3's header: the struct ends at run_id. */
    o.local_transport = "udp"; /* beyond struct_size: never read */
    o.struct_size = (uint32_t)(offsetof(dp_parallel_options, run_id) + sizeof o.run_id);
    if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) CHECK(dp_parallel_model_num_shards(pm) == 2);
    dp_parallel_model_free(pm);
    pm = NULL;
    o.struct_size = (uint32_t)sizeof o;
    o.local_transport = NULL;
  }
  o.uneven_split = 1;
  refused(&o, DP_ERR_INVALID_ARGUMENT, "uneven_split");
  o.uneven_split = 0;
  o.device_type = DP_DEVICE_CUDA;
  o.device_ids = NULL;
  {
    /* CUDA replicas across processes: no GPU here, or no CUDA, or (today) no CUDA kernels for training. */
    dp_parallel_model* pm2 = (dp_parallel_model*)SENTINEL;
    dp_status* st = dp_model_parallelize(g_model, &o, &pm2);
    CHECK(st != NULL);
    CHECK(pm2 == (dp_parallel_model*)SENTINEL);
    dp_status_free(st);
  }
}

static void environment(void) {
  dp_parallel_options o;
  dp_parallel_model* pm = NULL;
  dp_parallel_options_init(&o, sizeof o); /* num_shards 0: from the environment */
  clear_env();
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) CHECK(dp_parallel_model_num_shards(pm) == 1);
  dp_parallel_model_free(pm);
  pm = NULL;
  setenv("DP_WORLD_SIZE", "4", 1);
  setenv("DP_RANK", "3", 1);
  setenv("DP_STORE", "redis://127.0.0.1:1/prefix", 1);
  setenv("DP_TIMEOUT_MS", "2500", 1);
  setenv("DP_RUN_ID", "job-7", 1);
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) {
    CHECK(dp_parallel_model_num_shards(pm) == 4);
    CHECK(dp_parallel_model_shard_id(pm) == 3);
  }
  dp_parallel_model_free(pm);
  setenv("DP_RANK", "4", 1);
  refused(&o, DP_ERR_INVALID_ARGUMENT, "DP_RANK");
  unsetenv("DP_RANK");
  refused(&o, DP_ERR_INVALID_ARGUMENT, "DP_RANK");
  setenv("DP_RANK", "1", 1);
  setenv("DP_WORLD_SIZE", "two", 1);
  refused(&o, DP_ERR_INVALID_ARGUMENT, "DP_WORLD_SIZE");
  setenv("DP_WORLD_SIZE", "2", 1);
  setenv("DP_TIMEOUT_MS", "-1", 1);
  refused(&o, DP_ERR_INVALID_ARGUMENT, "DP_TIMEOUT_MS");
  setenv("DP_TIMEOUT_MS", "1000", 1);
  setenv("DP_STORE", "ftp://x", 1);
  refused(&o, DP_ERR_INVALID_ARGUMENT, "store address");
  setenv("DP_STORE", "file:///tmp/x", 1);
  setenv("DP_RUN_ID", "a/b", 1);
  refused(&o, DP_ERR_INVALID_ARGUMENT, "DP_RUN_ID");
  setenv("DP_RUN_ID", "job-8", 1);
  setenv("DP_LOCAL_TRANSPORT", "udp", 1);
  refused(&o, DP_ERR_INVALID_ARGUMENT, "DP_LOCAL_TRANSPORT");
  o.local_transport = "shm"; /* the field wins */
  pm = NULL;
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) CHECK(dp_parallel_model_num_shards(pm) == 2);
  dp_parallel_model_free(pm);
  o.local_transport = NULL;
  setenv("DP_LOCAL_TRANSPORT", "tcp", 1);
  pm = NULL;
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) CHECK(dp_parallel_model_num_shards(pm) == 2);
  dp_parallel_model_free(pm);
  /* Explicit fields win over the environment. */
  o.num_shards = 1;
  pm = NULL;
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm))) CHECK(dp_parallel_model_num_shards(pm) == 1);
  dp_parallel_model_free(pm);
  clear_env();
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 1 of 2 alone: the init net's rendezvous fails within the timeout
 * (plus a little), naming rank 0; a rank other than 0 writes no checkpoint. */
static void alone(void) {
  char dir[] = "/tmp/dp_test_shards_XXXXXX";
  char store[256], path[300];
  dp_parallel_options o;
  dp_parallel_model* pm = NULL;
  dp_workspace* ws = NULL;
  dp_netdef* init = NULL;
  dp_net* net = NULL;
  int64_t steps = -1;
  double start, took;
  if (!CHECK(mkdtemp(dir) != NULL)) return;
  snprintf(store, sizeof store, "file://%s/store", dir);
  snprintf(path, sizeof path, "%s/never.dpckpt", dir);
  dp_parallel_options_init(&o, sizeof o);
  o.num_shards = 2;
  o.shard_id = 1;
  o.store = store;
  o.timeout_ms = 700;
  if (!EXPECT_OK(dp_model_parallelize(g_model, &o, &pm)) || !EXPECT_OK(dp_workspace_create(&ws)) ||
      !EXPECT_OK(dp_parallel_model_nets(pm, &init, NULL, NULL)) || !EXPECT_OK(dp_net_create(ws, init, NULL, &net))) {
    dp_parallel_model_free(pm);
    dp_workspace_free(ws);
    return;
  }
  start = now_s();
  EXPECT_ERR2(dp_net_run(net), DP_ERR_TIMEOUT, "rank 0 did not arrive", store);
  took = now_s() - start;
  CHECK(took >= 0.6 && took < 0.7 + 1.0);
  /* Rank 1 writes nothing (its options are still checked). */
  EXPECT_OK(dp_parallel_model_save(pm, ws, path, NULL));
  CHECK(access(path, F_OK) != 0);
  /* Join needs the communicator that the failed init net never made. */
  EXPECT_CODE(dp_parallel_model_join(pm, ws, &steps), DP_ERR_NOT_FOUND);
  CHECK(steps == -1);
  dp_net_free(net);
  dp_netdef_free(init);
  dp_workspace_free(ws);
  dp_parallel_model_free(pm);
  {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
  }
}

static void join_one_process(void) {
  dp_parallel_options o;
  dp_parallel_model* pm = NULL;
  dp_workspace* ws = NULL;
  int64_t steps = -1;
  dp_parallel_options_init(&o, sizeof o);
  o.num_shards = 1;
  if (EXPECT_OK(dp_model_parallelize(g_model, &o, &pm)) && EXPECT_OK(dp_workspace_create(&ws))) {
    EXPECT_OK(dp_parallel_model_join(pm, ws, &steps));
    CHECK(steps == 0);
    EXPECT_OK(dp_parallel_model_join(pm, ws, NULL));
    EXPECT_ERR(dp_parallel_model_join(NULL, ws, &steps), DP_ERR_INVALID_ARGUMENT, "model");
  }
  dp_workspace_free(ws);
  dp_parallel_model_free(pm);
}

int main(void) {
  clear_env();
  if (!EXPECT_OK(dp_model_from_json(kModel, sizeof kModel - 1, &g_model))) return check_report();
  explicit_fields();
  environment();
  join_one_process();
  alone();
  dp_model_free(g_model);
  return check_report();
}
