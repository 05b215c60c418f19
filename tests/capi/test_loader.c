/*
 * The input pipeline (dp_loader_*) and the thread budget (dp_set_cpu_threads,
 * dp_cpu_threads) from strict C11:
 *   - a tensor loader feeds batches whose rows match across inputs, visits
 *     every sample once per epoch, reports the epoch's end once, gives the
 *     same order for the same seed and a different one for another, seeks
 *     exactly, keeps dataset order with no_shuffle, feeds a short last batch
 *     with keep_last, and splits each global batch between shards;
 *   - steady state allocates nothing: the fed buffers cycle through a ring;
 *   - a callback loader fills what the callback writes; a failing callback
 *     gives INTERNAL naming its value;
 *   - a data-parallel net's replicas read their slices of the fed batch in
 *     place (their blobs point into the loader's buffer);
 *   - bad arguments give INVALID_ARGUMENT / SHAPE / OUT_OF_RANGE;
 *   - a dataset on a GPU: its device fields checked, UNAVAILABLE without
 *     the GPU, and with one the host loader's batches.
 * Needs DP_SOURCE_ROOT (set by meson test) for the sample's model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define N 10
#define F 3

/* data [N, F] with row i = (i, i + 0.25, i + 0.5); labels [N] = 100 + i. */
static void make_dataset(dp_tensor** data, dp_tensor** labels) {
  float x[N * F];
  int32_t y[N];
  int64_t xd[2] = {N, F}, yd[1] = {N};
  int i;
  for (i = 0; i < N; ++i) {
    x[i * F] = (float)i;
    x[i * F + 1] = (float)i + 0.25f;
    x[i * F + 2] = (float)i + 0.5f;
    y[i] = 100 + i;
  }
  *data = NULL;
  *labels = NULL;
  EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, xd, 2, x, sizeof x, data));
  EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, yd, 1, y, sizeof y, labels));
}

/* The sample indices of the batch in blobs "x"/"y" (checks that the rows of
 * both inputs agree); returns the number of rows, or -1. */
static int fetch_batch(dp_workspace* ws, int* idx, int max_rows) {
  dp_tensor* x = NULL;
  dp_tensor* y = NULL;
  int rows = -1, i;
  if (!EXPECT_OK(dp_workspace_fetch(ws, "x", &x)) || !EXPECT_OK(dp_workspace_fetch(ws, "y", &y))) goto done;
  CHECK(dp_tensor_ndim(x) == 2 && dp_tensor_dims(x)[1] == F);
  CHECK(dp_tensor_ndim(y) == 1 && dp_tensor_dims(y)[0] == dp_tensor_dims(x)[0]);
  rows = (int)dp_tensor_dims(x)[0];
  if (!CHECK(rows <= max_rows)) {
    rows = -1;
    goto done;
  }
  for (i = 0; i < rows; ++i) {
    const float* r = (const float*)dp_tensor_data(x) + i * F;
    int32_t label = ((const int32_t*)dp_tensor_data(y))[i];
    idx[i] = (int)r[0];
    CHECK(r[1] == r[0] + 0.25f && r[2] == r[0] + 0.5f);
    CHECK(label == 100 + idx[i]);
  }
done:
  dp_tensor_free(x);
  dp_tensor_free(y);
  return rows;
}

static dp_loader* make_loader(dp_workspace* ws, const dp_loader_options* o) {
  dp_tensor* data;
  dp_tensor* labels;
  const char* names[2] = {"x", "y"};
  const dp_tensor* tensors[2];
  dp_loader* loader = NULL;
  make_dataset(&data, &labels);
  tensors[0] = data;
  tensors[1] = labels;
  EXPECT_OK(dp_loader_create(ws, names, tensors, 2, o, &loader));
  /* The loader shares the tensors: the handles may go. */
  dp_tensor_free(data);
  dp_tensor_free(labels);
  return loader;
}

/* Runs one epoch of `loader`, writing the sample order into order[] (rows
 * per batch `rows`); returns the batches fed before the end. */
static int run_epoch(dp_loader* loader, dp_workspace* ws, int* order, int rows) {
  int batches = 0, fed = 1;
  while (batches < 100) {
    if (!EXPECT_OK(dp_loader_next(loader, &fed)) || !fed) break;
    if (CHECK(fetch_batch(ws, order + batches * rows, rows) == rows)) ++batches;
  }
  return batches;
}

static void test_threads(void) {
  int32_t all = dp_cpu_threads();
  CHECK(all >= 1);
  EXPECT_OK(dp_set_cpu_threads(1));
  CHECK(dp_cpu_threads() == 1);
  EXPECT_ERR(dp_set_cpu_threads(-1), DP_ERR_INVALID_ARGUMENT, "max_threads");
  CHECK(dp_cpu_threads() == 1);
  EXPECT_OK(dp_set_cpu_threads(0));
  CHECK(dp_cpu_threads() == all);
}

static void test_epochs_and_order(void) {
  dp_workspace* ws = NULL;
  dp_loader* a;
  dp_loader* b;
  dp_loader_options o = DP_LOADER_OPTIONS_INIT;
  int first[8], second[8], again[8], seen[N], i, fed = 1;
  EXPECT_OK(dp_workspace_create(&ws));
  o.batch_size = 4;
  o.seed = 7;
  a = make_loader(ws, &o);
  CHECK(dp_loader_steps_per_epoch(a) == 2); /* 10 samples, last partial batch dropped */
  CHECK(dp_loader_batch_rows(a) == 4);
  CHECK(dp_loader_epoch(a) == 0 && dp_loader_step(a) == 0);
  CHECK(run_epoch(a, ws, first, 4) == 2);
  memset(seen, 0, sizeof seen);
  for (i = 0; i < 8; ++i) {
    CHECK(first[i] >= 0 && first[i] < N);
    if (first[i] >= 0 && first[i] < N) ++seen[first[i]];
  }
  for (i = 0; i < N; ++i) CHECK(seen[i] <= 1); /* no sample twice in an epoch */
  CHECK(dp_loader_epoch(a) == 1 && dp_loader_step(a) == 0);
  CHECK(run_epoch(a, ws, second, 4) == 2);
  CHECK(memcmp(first, second, sizeof first) != 0); /* a new permutation each epoch */

  /* Same seed: the same two epochs; seek replays any batch. */
  b = make_loader(ws, &o);
  CHECK(run_epoch(b, ws, again, 4) == 2);
  CHECK(memcmp(first, again, sizeof first) == 0);
  EXPECT_OK(dp_loader_seek(b, 1, 1));
  CHECK(dp_loader_epoch(b) == 1 && dp_loader_step(b) == 1);
  EXPECT_OK(dp_loader_next(b, &fed));
  CHECK(fed == 1);
  CHECK(fetch_batch(ws, again, 4) == 4);
  CHECK(memcmp(again, second + 4, 4 * sizeof(int)) == 0);
  EXPECT_OK(dp_loader_next(b, &fed));
  CHECK(fed == 0);
  EXPECT_ERR(dp_loader_seek(b, 0, 2), DP_ERR_OUT_OF_RANGE, "steps 0..1");
  EXPECT_ERR(dp_loader_seek(b, -1, 0), DP_ERR_OUT_OF_RANGE, "epoch -1");
  dp_loader_free(b);

  /* Another seed: another order. */
  o.seed = 8;
  b = make_loader(ws, &o);
  CHECK(run_epoch(b, ws, again, 4) == 2);
  CHECK(memcmp(first, again, sizeof first) != 0);
  dp_loader_free(b);

  /* no_shuffle + keep_last: 0..3, 4..7, then the short batch 8, 9. */
  o.no_shuffle = 1;
  o.keep_last = 1;
  b = make_loader(ws, &o);
  CHECK(dp_loader_steps_per_epoch(b) == 3);
  EXPECT_OK(dp_loader_next(b, &fed));
  CHECK(fetch_batch(ws, again, 4) == 4);
  for (i = 0; i < 4; ++i) CHECK(again[i] == i);
  EXPECT_OK(dp_loader_next(b, &fed));
  EXPECT_OK(dp_loader_next(b, &fed));
  CHECK(fed == 1);
  CHECK(fetch_batch(ws, again, 4) == 2);
  CHECK(again[0] == 8 && again[1] == 9);
  EXPECT_OK(dp_loader_next(b, &fed));
  CHECK(fed == 0);
  /* The next epoch's full batch after the short one. */
  EXPECT_OK(dp_loader_next(b, &fed));
  CHECK(fetch_batch(ws, again, 4) == 4);
  dp_loader_free(b);
  dp_loader_free(a);
  dp_workspace_free(ws);
}

/* Shards: shard s of 2 gets rows [2s, 2s + 2) of every global batch of 4,
 * in the order one process would see. */
static void test_shards(void) {
  dp_workspace* ws = NULL;
  dp_loader_options o = DP_LOADER_OPTIONS_INIT;
  dp_loader* whole;
  dp_loader* part[2];
  int all[8], mine[4], s, k;
  EXPECT_OK(dp_workspace_create(&ws));
  o.batch_size = 4;
  o.seed = 3;
  whole = make_loader(ws, &o);
  CHECK(run_epoch(whole, ws, all, 4) == 2);
  o.num_shards = 2;
  for (s = 0; s < 2; ++s) {
    o.shard_id = s;
    part[s] = make_loader(ws, &o);
    CHECK(dp_loader_batch_rows(part[s]) == 2);
    CHECK(run_epoch(part[s], ws, mine, 2) == 2);
    for (k = 0; k < 2; ++k) CHECK(memcmp(mine + 2 * k, all + 4 * k + 2 * s, 2 * sizeof(int)) == 0);
  }
  o.batch_size = 5;
  {
    dp_loader* bad = NULL;
    const char* names[1] = {"x"};
    dp_tensor* data;
    dp_tensor* labels;
    const dp_tensor* tensors[1];
    make_dataset(&data, &labels);
    tensors[0] = data;
    EXPECT_ERR(dp_loader_create(ws, names, tensors, 1, &o, &bad), DP_ERR_INVALID_ARGUMENT, "does not divide");
    o.batch_size = 4;
    o.keep_last = 1;
    EXPECT_ERR(dp_loader_create(ws, names, tensors, 1, &o, &bad), DP_ERR_INVALID_ARGUMENT, "keep_last");
    CHECK(bad == NULL);
    dp_tensor_free(data);
    dp_tensor_free(labels);
  }
  dp_loader_free(part[0]);
  dp_loader_free(part[1]);
  dp_loader_free(whole);
  dp_workspace_free(ws);
}

/* In steady state the fed buffers come from a ring allocated once: over
 * many batches only prefetch + 2 distinct buffers appear. */
static void test_buffers_recycled(void) {
  dp_workspace* ws = NULL;
  dp_loader_options o = DP_LOADER_OPTIONS_INIT;
  dp_loader* loader;
  const void* seen[16];
  int nseen = 0, step, fed, j;
  EXPECT_OK(dp_workspace_create(&ws));
  o.batch_size = 2;
  loader = make_loader(ws, &o);
  for (step = 0; step < 40; ++step) {
    dp_tensor* x = NULL;
    const void* p;
    EXPECT_OK(dp_loader_next(loader, &fed));
    if (!fed) continue;
    /* Peek at the pointer without keeping the tensor (a kept one would be
     * left to its holder and replaced). */
    if (!EXPECT_OK(dp_workspace_fetch(ws, "x", &x))) break;
    p = dp_tensor_data(x);
    dp_tensor_free(x);
    for (j = 0; j < nseen && seen[j] != p; ++j) {
    }
    if (j == nseen && nseen < 16) seen[nseen++] = p;
  }
  CHECK(nseen <= 4); /* prefetch 2 + 2 */
  dp_loader_free(loader);
  dp_workspace_free(ws);
}

/* The callback writes sample i as (i, i + 0.25, i + 0.5) and 100 + i. */
static int32_t fill_rows(void* user_data, const int64_t* indices, size_t count, void* const* buffers,
                         const size_t* row_bytes, size_t num_inputs) {
  size_t i;
  int* calls = (int*)user_data;
  ++*calls;
  if (num_inputs != 2 || row_bytes[0] != F * sizeof(float) || row_bytes[1] != sizeof(int32_t)) return 5;
  for (i = 0; i < count; ++i) {
    float* r = (float*)buffers[0] + i * F;
    r[0] = (float)indices[i];
    r[1] = (float)indices[i] + 0.25f;
    r[2] = (float)indices[i] + 0.5f;
    ((int32_t*)buffers[1])[i] = 100 + (int32_t)indices[i];
  }
  return 0;
}

static int32_t fill_fails(void* user_data, const int64_t* indices, size_t count, void* const* buffers,
                          const size_t* row_bytes, size_t num_inputs) {
  (void)user_data;
  (void)indices;
  (void)count;
  (void)buffers;
  (void)row_bytes;
  (void)num_inputs;
  return 42;
}

static void test_callback(void) {
  dp_workspace* ws = NULL;
  dp_loader_options o = DP_LOADER_OPTIONS_INIT;
  dp_loader* loader = NULL;
  int64_t fdims[1] = {F};
  dp_loader_input in[2];
  int calls = 0, order[8], fed = 1;
  EXPECT_OK(dp_workspace_create(&ws));
  in[0].blob = "x";
  in[0].dtype = DP_DTYPE_FLOAT32;
  in[0].sample_dims = fdims;
  in[0].sample_ndim = 1;
  in[1].blob = "y";
  in[1].dtype = DP_DTYPE_INT32;
  in[1].sample_dims = NULL;
  in[1].sample_ndim = 0;
  o.batch_size = 4;
  o.seed = 7;
  EXPECT_OK(dp_loader_create_callback(ws, in, 2, N, fill_rows, &calls, &o, &loader));
  CHECK(run_epoch(loader, ws, order, 4) == 2);
  {
    /* The same order as the tensor loader with the same seed. */
    int expect[8];
    dp_loader* t = make_loader(ws, &o);
    CHECK(run_epoch(t, ws, expect, 4) == 2);
    CHECK(memcmp(order, expect, sizeof order) == 0);
    dp_loader_free(t);
  }
  dp_loader_free(loader); /* joins the loader's thread: `calls` is ours again */
  CHECK(calls >= 2);

  loader = NULL;
  EXPECT_OK(dp_loader_create_callback(ws, in, 2, N, fill_fails, NULL, &o, &loader));
  EXPECT_ERR2(dp_loader_next(loader, &fed), DP_ERR_INTERNAL, "returned 42", "batch 0 of epoch 0");
  EXPECT_ERR(dp_loader_next(loader, &fed), DP_ERR_INTERNAL, "returned 42");
  dp_loader_free(loader);

  loader = SENTINEL;
  EXPECT_ERR(dp_loader_create_callback(ws, in, 2, 0, fill_rows, &calls, &o, (dp_loader**)&loader),
             DP_ERR_INVALID_ARGUMENT, "num_samples");
  EXPECT_ERR(dp_loader_create_callback(ws, in, 2, N, NULL, &calls, &o, (dp_loader**)&loader),
             DP_ERR_INVALID_ARGUMENT, "fill");
  in[1].dtype = 99;
  EXPECT_ERR(dp_loader_create_callback(ws, in, 2, N, fill_rows, &calls, &o, (dp_loader**)&loader), DP_ERR_DTYPE,
             "inputs[1]");
  CHECK(loader == SENTINEL);
  dp_workspace_free(ws);
}

static void test_bad_arguments(void) {
  dp_workspace* ws = NULL;
  dp_loader_options o = DP_LOADER_OPTIONS_INIT;
  dp_loader* loader = SENTINEL;
  dp_tensor* data;
  dp_tensor* labels;
  dp_tensor* short_labels = NULL;
  const char* names[2] = {"x", "y"};
  const char* same[2] = {"x", "x"};
  const dp_tensor* tensors[2];
  int64_t d3[1] = {3};
  int32_t three[3] = {0, 1, 2};
  int fed;
  EXPECT_OK(dp_workspace_create(&ws));
  make_dataset(&data, &labels);
  tensors[0] = data;
  tensors[1] = labels;
  EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, NULL, (dp_loader**)&loader), DP_ERR_INVALID_ARGUMENT,
             "batch_size");
  EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, (dp_loader**)&loader), DP_ERR_INVALID_ARGUMENT,
             "batch_size");
  o.batch_size = 11;
  EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, (dp_loader**)&loader), DP_ERR_INVALID_ARGUMENT,
             "no full batch");
  o.batch_size = 2;
  EXPECT_ERR(dp_loader_create(ws, same, tensors, 2, &o, (dp_loader**)&loader), DP_ERR_INVALID_ARGUMENT,
             "named by two");
  EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, d3, 1, three, sizeof three, &short_labels));
  tensors[1] = short_labels;
  EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, (dp_loader**)&loader), DP_ERR_SHAPE, "share dim 0");
  tensors[1] = labels;
  o.prefetch = 65;
  EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, (dp_loader**)&loader), DP_ERR_INVALID_ARGUMENT,
             "prefetch");
  o.prefetch = 0;
  o.struct_size = 4;
  EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, (dp_loader**)&loader), DP_ERR_INVALID_ARGUMENT,
             "struct_size");
  CHECK(loader == SENTINEL);
  EXPECT_ERR(dp_loader_next(NULL, &fed), DP_ERR_INVALID_ARGUMENT, "loader");
  CHECK(dp_loader_steps_per_epoch(NULL) == 0 && dp_loader_epoch(NULL) == 0 && dp_loader_step(NULL) == 0);
  dp_loader_free(NULL);
  dp_tensor_free(short_labels);
  dp_tensor_free(data);
  dp_tensor_free(labels);
  dp_workspace_free(ws);
}

/* A dataset on a GPU (options->device_type DP_DEVICE_CUDA), or staged to
 * one (host_dataset, callbacks): bad device fields are INVALID_ARGUMENT
 * naming them; without that GPU the create is UNAVAILABLE and leaves *out
 * alone; with one, every epoch's batches are the host loader's (fetched
 * back to the host), and seeks agree, held there or staged. */
static void test_device_loader(void) {
  dp_workspace* ws = NULL;
  dp_loader_options o = DP_LOADER_OPTIONS_INIT;
  dp_loader* loader = SENTINEL;
  dp_loader_input input = {"x", DP_DTYPE_FLOAT32, NULL, 0};
  int32_t gpus = 0;
  EXPECT_OK(dp_workspace_create(&ws));
  o.batch_size = 4;
  o.seed = 3;
  o.device_type = 7;
  {
    dp_tensor* data;
    dp_tensor* labels;
    const char* names[2] = {"x", "y"};
    const dp_tensor* tensors[2];
    make_dataset(&data, &labels);
    tensors[0] = data;
    tensors[1] = labels;
    EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, &loader), DP_ERR_INVALID_ARGUMENT, "options->device_type");
    o.device_type = DP_DEVICE_CPU;
    o.device_id = 2;
    EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, &loader), DP_ERR_INVALID_ARGUMENT, "options->device_id");
    o.device_type = DP_DEVICE_CUDA;
    o.device_id = -1;
    EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, &loader), DP_ERR_INVALID_ARGUMENT, "options->device_id");
    o.device_id = 0;
    o.host_dataset = 2;
    EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, &loader), DP_ERR_INVALID_ARGUMENT, "options->host_dataset");
    EXPECT_ERR(dp_loader_create_callback(ws, &input, 1, 10, fill_rows, NULL, &o, &loader), DP_ERR_INVALID_ARGUMENT,
               "options->host_dataset");
    o.host_dataset = 1;
    o.device_type = DP_DEVICE_CPU;
    EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, &loader), DP_ERR_INVALID_ARGUMENT, "options->host_dataset");
    o.device_type = DP_DEVICE_CUDA;
    {
      dp_status* st = dp_device_count(DP_DEVICE_CUDA, &gpus);
      if (st != NULL) gpus = 0; /* a status here means none */
      dp_status_free(st);
    }
    if (gpus == 0) {
      /* Held on the GPU, staged to it from the host dataset, or from a callback. */
      EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, &loader), DP_ERR_UNAVAILABLE, "cuda");
      o.host_dataset = 0;
      EXPECT_ERR(dp_loader_create(ws, names, tensors, 2, &o, &loader), DP_ERR_UNAVAILABLE, "cuda");
      EXPECT_ERR(dp_loader_create_callback(ws, &input, 1, 10, fill_rows, NULL, &o, &loader), DP_ERR_UNAVAILABLE,
                 "cuda");
    }
    o.host_dataset = 0;
    CHECK(loader == SENTINEL);
    dp_tensor_free(data);
    dp_tensor_free(labels);
  }
  if (gpus > 0) {
    int staged;
    for (staged = 0; staged < 2; ++staged) { /* held on the GPU, then staged from the host */
      dp_loader* host;
      int want[3][8], got[3][8], e;
      dp_loader_options h = o;
      h.device_type = DP_DEVICE_CPU;
      o.host_dataset = staged;
      loader = make_loader(ws, &o);
      host = make_loader(ws, &h);
      if (CHECK(loader != NULL && loader != SENTINEL && host != NULL)) {
        CHECK(dp_loader_steps_per_epoch(loader) == 2 && dp_loader_batch_rows(loader) == 4);
        for (e = 0; e < 3; ++e) {
          CHECK(run_epoch(host, ws, want[e], 4) == 2);
          CHECK(run_epoch(loader, ws, got[e], 4) == 2);
          CHECK(memcmp(want[e], got[e], sizeof want[e]) == 0);
        }
        EXPECT_OK(dp_loader_seek(loader, 1, 1));
        CHECK(run_epoch(loader, ws, got[0], 4) == 1);
        CHECK(memcmp(got[0], want[1] + 4, 4 * sizeof(int)) == 0);
      }
      dp_loader_free(host);
      dp_loader_free(loader);
    }
  }
  dp_workspace_free(ws);
}

/* A data-parallel train step over cpu:2 fed by a loader: each replica's
 * "data" is its half of the fed batch, in the loader's buffer itself. */
static void test_parallel_in_place(void) {
  const char* root = getenv("DP_SOURCE_ROOT");
  char path[4096];
  dp_model* model = NULL;
  dp_parallel_model* pm = NULL;
  dp_netdef* init_def = NULL;
  dp_netdef* train_def = NULL;
  dp_workspace* ws = NULL;
  dp_net* init = NULL;
  dp_net* train = NULL;
  dp_loader* loader = NULL;
  dp_tensor* images = NULL;
  dp_tensor* labels = NULL;
  dp_parallel_options po = DP_PARALLEL_OPTIONS_INIT;
  dp_loader_options lo = DP_LOADER_OPTIONS_INIT;
  int32_t ids[2] = {0, 1};
  const char* names[2] = {"data", "label"};
  const dp_tensor* tensors[2];
  int64_t xd[4] = {32, 1, 28, 28}, yd[1] = {32};
  float* x = malloc(32 * 784 * sizeof(float));
  int32_t y[32];
  int i, step, fed;
  po.memory = DP_MEMORY_KEEP; /* the replicas' shards of the batch are read after the step */
  if (!CHECK(root != NULL && x != NULL)) {
    free(x);
    return;
  }
  for (i = 0; i < 32 * 784; ++i) x[i] = (float)(i % 97) / 97.0f;
  for (i = 0; i < 32; ++i) y[i] = i % 10;
  snprintf(path, sizeof path, "%s/samples/nets/fashion_mlp.json", root);
  EXPECT_OK(dp_model_from_file(path, &model));
  po.device_type = DP_DEVICE_CPU;
  po.device_ids = ids;
  po.num_devices = 2;
  EXPECT_OK(dp_model_parallelize(model, &po, &pm));
  EXPECT_OK(dp_parallel_model_nets(pm, &init_def, &train_def, NULL));
  EXPECT_OK(dp_workspace_create(&ws));
  EXPECT_OK(dp_net_create(ws, init_def, NULL, &init));
  EXPECT_OK(dp_net_create(ws, train_def, NULL, &train));
  EXPECT_OK(dp_net_run(init));
  EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, xd, 4, x, 32 * 784 * sizeof(float), &images));
  EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, yd, 1, y, sizeof y, &labels));
  tensors[0] = images;
  tensors[1] = labels;
  lo.batch_size = 8;
  EXPECT_OK(dp_loader_create(ws, names, tensors, 2, &lo, &loader));
  for (step = 0; step < 3 && loader != NULL; ++step) {
    dp_tensor* whole = NULL;
    dp_tensor* part[2] = {NULL, NULL};
    char blob[64];
    int r;
    EXPECT_OK(dp_loader_next(loader, &fed));
    CHECK(fed == 1);
    EXPECT_OK(dp_net_run(train));
    EXPECT_OK(dp_workspace_fetch(ws, "data", &whole));
    for (r = 0; r < 2; ++r) {
      snprintf(blob, sizeof blob, "%sdata", dp_parallel_model_scope(pm, (size_t)r));
      EXPECT_OK(dp_workspace_fetch(ws, blob, &part[r]));
    }
    if (whole != NULL && part[0] != NULL && part[1] != NULL) {
      const char* base = (const char*)dp_tensor_data(whole);
      CHECK(dp_tensor_dims(part[0])[0] == 4 && dp_tensor_dims(part[1])[0] == 4);
      CHECK((const char*)dp_tensor_data(part[0]) == base);
      CHECK((const char*)dp_tensor_data(part[1]) == base + 4 * 784 * sizeof(float));
    }
    dp_tensor_free(whole);
    dp_tensor_free(part[0]);
    dp_tensor_free(part[1]);
  }
  dp_loader_free(loader);
  dp_tensor_free(images);
  dp_tensor_free(labels);
  dp_net_free(train);
  dp_net_free(init);
  dp_workspace_free(ws);
  dp_netdef_free(train_def);
  dp_netdef_free(init_def);
  dp_parallel_model_free(pm);
  dp_model_free(model);
  free(x);
}

int main(void) {
  test_threads();
  test_epochs_and_order();
  test_shards();
  test_buffers_recycled();
  test_callback();
  test_bad_arguments();
  test_device_loader();
  test_parallel_in_place();
  return check_report();
}
