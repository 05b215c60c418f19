/*
 * train_fashion_mnist: trains a classifier on Fashion-MNIST with dp's public
 * C API only.
 *
 * It reads the IDX files (dp_tensor_from_idx_file), loads a model definition
 * (samples/nets/fashion_mlp.json or fashion_cnn.json), derives the training
 * nets (dp_model_build_training: init, one training step, evaluation; with
 * --devices, dp_model_parallelize: data parallelism over N replicas), then
 * for each epoch runs one step per batch and evaluates the whole test set.
 * The batches come from dp's input pipeline (dp_loader_create): it shuffles
 * the training set every epoch from the seed, drops the last partial batch
 * and gathers the next batches on its own thread while a step runs.
 *
 * With --checkpoint DIR (made if missing) it saves the training state at the
 * end of every epoch as DIR/step-<N>.dpckpt (atomically; the newest --keep K
 * files stay, default 3), and with --resume it continues from the newest
 * checkpoint in DIR that loads: the same seed then gives exactly the run that
 * was not interrupted (the loader seeks to the checkpoint's epoch: its order
 * depends only on the seed and the epoch).
 *
 *   train_fashion_mnist [--model mlp|cnn|PATH.json] [--epochs E] [--batch B]
 *                       [--lr LR] [--seed S] [--data DIR] [--nets DIR]
 *                       [--limit N] [--test-limit N] [--min-acc A] [--devices cpu:N|cuda:N|cuda:I,cuda:J,...]
 *                       [--checkpoint DIR [--resume] [--keep K]] [--trace FILE] [--compress bf16|fp16]
 *                       [--zero] [--export MODEL.onnx] [--math fp32|tf32|bf16|fp16] [--no-graphs]
 *                       [--host-loader]
 *
 * Several processes: `dp-run -n 2 -- train_fashion_mnist` (or with --devices
 * cpu:N, N devices in each) starts two processes that train one model: each
 * feeds its half of every global batch of --batch images (the same shuffled
 * order everywhere, from the seed), gradients are summed over both, so
 * training matches one process; rank 0 writes the checkpoints. The loss
 * printed is the global batch's (every process prints the same).
 *
 * --devices cuda:N trains on GPUs 0..N-1 (under dp-run, process r takes the
 * N GPUs from DP_LOCAL_RANK * N); a list names the GPUs, and may name one
 * twice (cuda:0,cuda:0: two replicas on one GPU, through the copy-and-sum
 * tree rather than NCCL, a way to exercise the replica path on one GPU).
 *
 * --limit N trains on the first N training images, --test-limit N evaluates
 * on the first N test images (the smoke tests' quick runs).
 *
 * After training it serves the model as a deployment would: the inference net
 * (dp_model_build_inference: the forward ops from "data" to "softmax", no
 * labels, loss or metric) runs in a workspace of its own that shares the
 * trained param tensors (fed, not copied), over the test set.
 *
 * Output: one line per epoch
 *   epoch E/EP loss=<mean train loss> test_acc=<acc> samples_per_s=<train samples/s>
 * then the inference net's line
 *   inference: test_acc=<acc> predicted <first 8 classes> labels <their labels>
 * and a last line
 *   final test_acc=<acc> train_loss=<loss> samples_per_s=<mean train samples/s>
 * When stdout is a terminal, a progress line (step, samples/s, time left) is
 * redrawn in place while an epoch trains, a few times a second, and erased
 * before the epoch's line; otherwise nothing but the lines above is printed.
 * --compress bf16|fp16 (data parallelism) sums the gradients in 16 bits
 * (dp_parallel_options.gradient_compression): half the bytes between the
 * processes of dp-run.
 * --zero (data parallelism) shards the optimizer state over every replica of
 * every process (ZeRO-1, dp_parallel_options.shard_optimizer_state): each
 * keeps 1 / replicas of Adam's moments; the training is the same, bit for
 * bit within a host, and checkpoints resume with or without it.
 * --math tf32|bf16|fp16 computes the GEMMs of the GPU nets (FC, Conv and
 * their gradients) with TF32, bfloat16 or half products on tensor cores
 * (dp_net_options.math_mode); tensors, params and optimizer state stay
 * float32. fp16 trains with dynamic loss scaling (dp_parallel_options.
 * loss_scaling: the loss's gradients scaled up so that small ones survive
 * half products, a step that overflows skipped). CPU nets compute in
 * float32 whatever it says.
 * --no-graphs runs the GPU train net op by op on its streams rather than as
 * a CUDA graph (dp_net_options.cuda_graphs; by default a net on one GPU is
 * captured on its third step and replayed after), for comparing the two.
 * On GPUs (--devices cuda:...) the training set lives on the first one
 * (dp_loader_options.device_type: 188 MB for Fashion-MNIST) and every
 * batch is gathered there, a few batches ahead, so no step waits on a host
 * copy; the batches are the host loader's, so training is the same.
 * --host-loader keeps the dataset in host memory (as on CPUs) and stages
 * each batch to the GPU (dp_loader_options.host_dataset: gathered into
 * page-locked buffers, copied on the loader's own stream while the step
 * before runs), for comparing the two; a GPU without room for the dataset
 * falls back to that, saying so.
 * --export MODEL.onnx writes the trained model as ONNX after serving it
 * (dp_model_save_onnx: the inference net from "data" to "logits" and
 * "softmax" with the trained params, the batch dim of its input "data" [N, 1,
 * 28, 28] left free), for ONNX Runtime, TensorRT or samples/onnx_infer; rank
 * 0 writes it when several processes train.
 * --trace FILE writes the per-op timings of the last training step as Chrome
 * trace JSON (chrome://tracing, Perfetto), with the workspace's memory over
 * the step as a "memory" counter track (the train net plans its temporaries'
 * memory: docs/MEMORY.md). Errors print the status message and
 * exit with 1 (2 for bad flags; 1 too when the inference net's accuracy is not
 * the eval net's); with --min-acc, a final test accuracy below A prints why
 * and exits with 3.
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IMAGE_PIXELS (28 * 28)
#define NUM_CLASSES 10
#define EVAL_BATCH 1000
#define PREDICTIONS_SHOWN 8

/* Everything the program owns, so that any failure can free it all. */
typedef struct {
  dp_tensor* raw[4]; /* train images, train labels, test images, test labels */
  float* train_x;
  int32_t* train_y;
  float* test_x;
  int32_t* test_y;
  dp_tensor* train_set[2]; /* the training images and labels the loader reads */
  dp_loader* loader;
  dp_model* model;
  dp_parallel_model* parallel;
  dp_netdef* init_def;
  dp_netdef* train_def;
  dp_netdef* eval_def;
  dp_workspace* ws;
  dp_net* init;
  dp_net* train;
  dp_net* eval;
  /* Serving: the inference net in a workspace of its own. */
  dp_netdef* infer_def;
  dp_workspace* serve_ws;
  dp_net* infer;
} app_t;

static app_t app;

static void app_free(void) {
  dp_net_free(app.infer);
  dp_workspace_free(app.serve_ws);
  dp_netdef_free(app.infer_def);
  dp_loader_free(app.loader);
  dp_tensor_free(app.train_set[0]);
  dp_tensor_free(app.train_set[1]);
  dp_net_free(app.eval);
  dp_net_free(app.train);
  dp_net_free(app.init);
  dp_workspace_free(app.ws);
  dp_parallel_model_free(app.parallel);
  dp_netdef_free(app.eval_def);
  dp_netdef_free(app.train_def);
  dp_netdef_free(app.init_def);
  dp_model_free(app.model);
  for (int i = 0; i < 4; ++i) dp_tensor_free(app.raw[i]);
  free(app.test_y);
  free(app.test_x);
  free(app.train_y);
  free(app.train_x);
  memset(&app, 0, sizeof app);
}

static void die(const char* fmt, const char* arg) {
  fprintf(stderr, "train_fashion_mnist: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  app_free();
  exit(1);
}

/* Prints a failed status and exits; frees it either way. */
static void check(dp_status* s, const char* what) {
  if (s == NULL) return;
  fprintf(stderr, "train_fashion_mnist: %s failed: [%s] %s\n", what, dp_status_code_name(dp_status_code(s)),
          dp_status_message(s));
  dp_status_free(s);
  app_free();
  exit(1);
}

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (p == NULL) die("out of memory (%s)", "malloc");
  return p;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int file_exists(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return 0;
  fclose(f);
  return 1;
}

/* Loads one split: images uint8 [N, 28, 28] -> float32 in [0, 1], labels
 * [N] (uint8 or int32) -> int32 in 0..9. Returns N. */
static size_t load_split(const char* dir, const char* split, int slot, float** out_x, int32_t** out_y) {
  char path[4096], what[4200];
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, split);
  snprintf(what, sizeof what, "reading the Fashion-MNIST images '%s' (see --data; Debian: dataset-fashion-mnist)",
           path);
  check(dp_tensor_from_idx_file(path, &app.raw[slot]), what);
  const dp_tensor* images = app.raw[slot];
  const int64_t* d = dp_tensor_dims(images);
  if (dp_tensor_dtype(images) != DP_DTYPE_UINT8 || dp_tensor_ndim(images) != 3 || d[1] != 28 || d[2] != 28)
    die("'%s' is not a uint8 [N, 28, 28] image file", path);
  size_t n = (size_t)d[0];

  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, split);
  snprintf(what, sizeof what, "reading the Fashion-MNIST labels '%s' (see --data; Debian: dataset-fashion-mnist)",
           path);
  check(dp_tensor_from_idx_file(path, &app.raw[slot + 1]), what);
  const dp_tensor* labels = app.raw[slot + 1];
  int32_t ldt = dp_tensor_dtype(labels);
  if ((ldt != DP_DTYPE_UINT8 && ldt != DP_DTYPE_INT32) || dp_tensor_ndim(labels) != 1 ||
      (size_t)dp_tensor_dims(labels)[0] != n)
    die("'%s' is not a label file [N] matching its images", path);

  float* x = xmalloc(n * IMAGE_PIXELS * sizeof(float));
  *out_x = x;
  const uint8_t* px = dp_tensor_data(images);
  /* Standardised with the training set's pixel mean and deviation (0.2860,
   * 0.3530 on the 0..1 scale): zero-centred inputs train faster. */
  const float mean = 0.2860f, inv_std = 1.0f / 0.3530f;
  for (size_t i = 0; i < n * IMAGE_PIXELS; ++i) x[i] = ((float)px[i] * (1.0f / 255.0f) - mean) * inv_std;
  int32_t* y = xmalloc(n * sizeof(int32_t));
  *out_y = y;
  for (size_t i = 0; i < n; ++i) {
    y[i] = ldt == DP_DTYPE_UINT8 ? ((const uint8_t*)dp_tensor_data(labels))[i]
                                 : ((const int32_t*)dp_tensor_data(labels))[i];
    if (y[i] < 0 || y[i] >= NUM_CLASSES) die("'%s' has a label outside 0..9", path);
  }
  /* The raw tensors are no longer needed. */
  dp_tensor_free(app.raw[slot]);
  dp_tensor_free(app.raw[slot + 1]);
  app.raw[slot] = app.raw[slot + 1] = NULL;
  return n;
}

/* Feeds "data" [b, 1, 28, 28] and "label" [b], borrowing x/y (they stay
 * unchanged until the workspace is freed). */
static void feed_batch(const float* x, const int32_t* y, size_t b) {
  int64_t xd[4] = {(int64_t)b, 1, 28, 28};
  int64_t yd[1] = {(int64_t)b};
  dp_tensor* tx = NULL;
  dp_tensor* ty = NULL;
  dp_status* s = dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, xd, 4, x, b * IMAGE_PIXELS * sizeof(float), &tx);
  if (s != NULL) check(s, "dp_tensor_create_borrowed (data)");
  s = dp_tensor_create_borrowed(DP_DTYPE_INT32, yd, 1, y, b * sizeof(int32_t), &ty);
  if (s != NULL) {
    dp_tensor_free(tx);
    check(s, "dp_tensor_create_borrowed (label)");
  }
  s = dp_workspace_feed(app.ws, "data", tx);
  if (s == NULL) s = dp_workspace_feed(app.ws, "label", ty);
  dp_tensor_free(tx); /* the workspace keeps what it needs */
  dp_tensor_free(ty);
  check(s, "feeding a batch");
}

/* The float32 scalar in blob `name`. */
static double fetch_scalar(const char* name) {
  dp_tensor* t = NULL;
  check(dp_workspace_fetch(app.ws, name, &t), name);
  int ok = dp_tensor_dtype(t) == DP_DTYPE_FLOAT32 && dp_tensor_numel(t) == 1;
  double v = ok ? *(const float*)dp_tensor_data(t) : 0.0;
  dp_tensor_free(t);
  if (!ok) die("blob '%s' is not a float32 scalar", name);
  return v;
}

/* Accuracy over the whole test set, in batches of EVAL_BATCH. */
static double evaluate(size_t n) {
  double correct = 0;
  for (size_t off = 0; off < n; off += EVAL_BATCH) {
    size_t b = n - off < EVAL_BATCH ? n - off : EVAL_BATCH;
    feed_batch(app.test_x + off * IMAGE_PIXELS, app.test_y + off, b);
    check(dp_net_run(app.eval), "running the eval net");
    correct += fetch_scalar("accuracy") * (double)b;
  }
  return n ? correct / (double)n : 0.0;
}

/* The progress line of an epoch: drawn only when stdout is a terminal,
 * redrawn in place ("\r") at most PROGRESS_PERIOD_S apart, and erased before
 * the epoch's own line, so that the lines printed stay as they are. */
#define PROGRESS_PERIOD_S 0.25
typedef struct {
  int on;          /* stdout is a terminal */
  double drawn_at; /* when the line was last drawn (0: not yet this epoch) */
  int width;       /* characters on the line now */
} progress_t;

static void progress_draw(progress_t* p, long epoch, long epochs, size_t step, size_t steps, long batch, double t0) {
  const double now = now_s();
  if (!p->on || (p->drawn_at > 0 && now - p->drawn_at < PROGRESS_PERIOD_S)) return;
  p->drawn_at = now;
  const double elapsed = now - t0;
  const double rate = elapsed > 0 ? (double)step * (double)batch / elapsed : 0.0;
  const long left = step > 0 ? (long)(elapsed / (double)step * (double)(steps - step) + 0.5) : 0;
  char line[160];
  int n = snprintf(line, sizeof line, "epoch %ld/%ld step %zu/%zu %.1f samples/s %ld:%02ld left", epoch, epochs,
                   step, steps, rate, left / 60, left % 60);
  if (n < 0) return;
  if (n >= (int)sizeof line) n = (int)sizeof line - 1;
  /* Spaces cover what a longer earlier line left. */
  printf("\r%s%*s", line, p->width > n ? p->width - n : 0, "");
  fflush(stdout);
  p->width = n;
}

static void progress_erase(progress_t* p) {
  if (p->on && p->width > 0) printf("\r%*s\r", p->width, "");
  p->width = 0;
  p->drawn_at = 0;
}

/* The inference net for "softmax" in a workspace of its own, fed the trained
 * params from the training workspace (replica 0's for a data-parallel model):
 * the tensors are shared, not copied, as a server's workers would share them.
 * (Params trained on a GPU come back to the host when fetched: the model is
 * then served on the CPU.) */
static void make_inference(void) {
  const char* outputs[1] = {"softmax"};
  check(dp_model_build_inference(app.model, outputs, 1, NULL, &app.infer_def), "dp_model_build_inference");
  check(dp_workspace_create(&app.serve_ws), "dp_workspace_create (serving)");
  const char* scope = app.parallel != NULL ? dp_parallel_model_scope(app.parallel, 0) : "";
  for (size_t i = 0; i < dp_netdef_num_external_inputs(app.infer_def); ++i) {
    const char* name = dp_netdef_external_input(app.infer_def, i);
    if (strcmp(name, "data") == 0) continue; /* fed per batch */
    char trained[512];
    snprintf(trained, sizeof trained, "%s%s", scope, name);
    dp_tensor* t = NULL;
    check(dp_workspace_fetch(app.ws, trained, &t), trained);
    dp_status* s = dp_workspace_feed(app.serve_ws, name, t);
    dp_tensor_free(t);
    check(s, "sharing a param with the serving workspace");
  }
  check(dp_net_create(app.serve_ws, app.infer_def, NULL, &app.infer), "creating the inference net");
}

/* Classifies the test set with the inference net (no labels fed): the share
 * whose most probable class (the first, on ties, as Accuracy ranks them) is
 * the label; the first PREDICTIONS_SHOWN predictions go to `predicted`. */
static double infer_test_set(size_t n, int32_t* predicted) {
  size_t correct = 0;
  for (size_t off = 0; off < n; off += EVAL_BATCH) {
    const size_t b = n - off < EVAL_BATCH ? n - off : EVAL_BATCH;
    int64_t xd[4] = {(int64_t)b, 1, 28, 28};
    dp_tensor* x = NULL;
    check(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, xd, 4, app.test_x + off * IMAGE_PIXELS,
                                    b * IMAGE_PIXELS * sizeof(float), &x),
          "dp_tensor_create_borrowed (test images)");
    dp_status* s = dp_workspace_feed(app.serve_ws, "data", x);
    dp_tensor_free(x);
    check(s, "feeding test images");
    check(dp_net_run(app.infer), "running the inference net");
    dp_tensor* probs = NULL;
    check(dp_workspace_fetch(app.serve_ws, "softmax", &probs), "softmax");
    const float* p = dp_tensor_data(probs);
    for (size_t i = 0; i < b; ++i) {
      int32_t best = 0;
      for (int32_t c = 1; c < NUM_CLASSES; ++c)
        if (p[i * NUM_CLASSES + (size_t)c] > p[i * NUM_CLASSES + (size_t)best]) best = c;
      if (off + i < PREDICTIONS_SHOWN) predicted[off + i] = best;
      correct += best == app.test_y[off + i];
    }
    dp_tensor_free(probs);
  }
  return n ? (double)correct / (double)n : 0.0;
}

/* The trained model as ONNX: the serving workspace holds the params under
 * the model's names and the last test batch, the example whose dims (the
 * batch dim left free) the graph's input "data" takes. */
static void export_onnx(const char* path) {
  char what[4200];
  snprintf(what, sizeof what, "exporting the model as ONNX to '%s'", path);
  check(dp_model_save_onnx(app.model, app.serve_ws, NULL, path), what);
  printf("exported ONNX model: %s\n", path);
}

/* The last training step's per-op timings (the train net was created with
 * profiling on). */
static void write_trace(const char* path) {
  dp_buffer* json = NULL;
  check(dp_net_trace_json(app.train, &json), "dp_net_trace_json");
  FILE* f = fopen(path, "wb");
  int ok = f != NULL && fwrite(dp_buffer_data(json), 1, dp_buffer_size(json), f) == dp_buffer_size(json);
  if (f != NULL && fclose(f) != 0) ok = 0;
  dp_buffer_free(json);
  if (!ok) {
    fprintf(stderr, "could not write the trace to %s\n", path);
    app_free();
    exit(1);
  }
}

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [--model mlp|cnn|PATH.json] [--epochs E] [--batch B] [--lr LR] [--seed S]\n"
          "          [--data DIR] [--nets DIR] [--limit N] [--test-limit N] [--min-acc A]\n"
          "          [--devices cpu:N|cuda:N|cuda:I,cuda:J,...]\n"
          "          [--checkpoint DIR [--resume] [--keep K]] [--trace FILE] [--compress bf16|fp16] [--zero]\n"
          "          [--export MODEL.onnx] [--math fp32|tf32|bf16|fp16] [--no-graphs] [--host-loader]\n",
          argv0);
  exit(2);
}

/* --devices cuda:0,cuda:1 (one type, up to 64 entries): the type, the ids and
 * their count. Returns 0, or prints why not and returns -1. */
static int parse_device_list(const char* argv0, const char* list, int32_t* type, int32_t ids[64], long* count) {
  long n = 0;
  int32_t first_type = -1;
  for (const char* p = list; *p != '\0';) {
    const char* end = strchr(p, ',');
    const size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    int32_t t = -1;
    const char* id = NULL;
    if (len > 4 && strncmp(p, "cpu:", 4) == 0) {
      t = DP_DEVICE_CPU;
      id = p + 4;
    } else if (len > 5 && strncmp(p, "cuda:", 5) == 0) {
      t = DP_DEVICE_CUDA;
      id = p + 5;
    }
    char* id_end = NULL;
    const long value = id != NULL ? strtol(id, &id_end, 10) : -1;
    if (t < 0 || id_end != p + len || value < 0 || value > 1023 || (first_type >= 0 && t != first_type) || n == 64) {
      fprintf(stderr, "%s: --devices lists devices of one type as type:id,type:id (at most 64), got '%s'\n",
              argv0, list);
      return -1;
    }
    first_type = t;
    ids[n++] = (int32_t)value;
    p += len;
    if (*p == ',') ++p;
  }
  *type = first_type;
  *count = n;
  return 0;
}

static long parse_long(const char* argv0, const char* flag, const char* s, long lo, long hi) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || end == s || v < lo || v > hi) {
    fprintf(stderr, "%s: %s must be an integer in %ld..%ld, got '%s'\n", argv0, flag, lo, hi, s);
    exit(2);
  }
  return v;
}

/* Saves the training state after `iteration` steps as DIR/step-<N>.dpckpt
 * and keeps the newest `keep`. */
static void save_checkpoint(const char* dir, long long iteration, long keep) {
  char path[4096];
  snprintf(path, sizeof path, "%s/step-%09lld.dpckpt", dir, iteration);
  if (app.parallel != NULL) {
    check(dp_parallel_model_save(app.parallel, app.ws, path, NULL), "saving a checkpoint");
  } else {
    dp_string_list* blobs = NULL;
    check(dp_model_checkpoint_blobs(app.model, &blobs), "dp_model_checkpoint_blobs");
    size_t n = dp_string_list_size(blobs);
    const char** names = xmalloc((n + 1) * sizeof *names);
    for (size_t i = 0; i < n; ++i) names[i] = dp_string_list_get(blobs, i);
    dp_status* st = dp_checkpoint_save(app.ws, names, n, path, NULL);
    free(names);
    dp_string_list_free(blobs);
    check(st, "saving a checkpoint");
  }
  /* Several processes: rank 0 wrote the file and prunes (the others' save
   * wrote nothing). */
  if (app.parallel == NULL || dp_parallel_model_shard_id(app.parallel) == 0)
    check(dp_checkpoint_prune(dir, (int32_t)keep), "pruning old checkpoints");
}

/* Loads the newest checkpoint of `dir` that loads (a corrupted one is
 * reported and skipped); returns its iteration, or 0 when there is none. */
static long long resume_checkpoint(const char* dir) {
  dp_string_list* files = NULL;
  long long iteration = 0;
  check(dp_checkpoint_list_steps(dir, &files), "listing checkpoints");
  for (size_t i = 0; i < dp_string_list_size(files); ++i) {
    const char* path = dp_string_list_get(files, i);
    dp_checkpoint_info* info = NULL;
    dp_status* st = dp_checkpoint_info_from_file(path, &info);
    if (st == NULL) {
      iteration = dp_checkpoint_info_iteration(info);
      dp_checkpoint_info_free(info);
      st = app.parallel != NULL ? dp_parallel_model_load(app.parallel, app.ws, path, NULL)
                                : dp_checkpoint_load(app.ws, path, NULL);
    }
    if (st == NULL && iteration > 0) {
      printf("resumed from %s (iteration %lld)\n", path, iteration);
      dp_string_list_free(files);
      return iteration;
    }
    if (st == NULL) {
      fprintf(stderr, "train_fashion_mnist: %s records no iteration; skipping it\n", path);
    } else {
      fprintf(stderr, "train_fashion_mnist: cannot resume from %s: [%s] %s; trying an older one\n", path,
              dp_status_code_name(dp_status_code(st)), dp_status_message(st));
      dp_status_free(st);
      /* The state is replaced only by a load that succeeds: nothing to undo. */
    }
    iteration = 0;
  }
  dp_string_list_free(files);
  printf("no checkpoint to resume from in %s; starting afresh\n", dir);
  return 0;
}

/* The directory of the executable (from argv[0]), into buf. */
static void exe_dir(const char* argv0, char* buf, size_t size) {
  const char* slash = strrchr(argv0, '/');
  if (slash == NULL) {
    snprintf(buf, size, ".");
  } else {
    size_t n = (size_t)(slash - argv0);
    snprintf(buf, size, "%.*s", (int)(n < size ? n : size - 1), argv0);
  }
}

int main(int argc, char** argv) {
  const char* model_arg = "mlp";
  const char* data_dir = "/usr/share/datasets/fashion-mnist";
  const char* nets_dir = NULL;
  long epochs = 3, batch = 64, limit = 0, test_limit = 0;
  unsigned long long seed = 1;
  double lr = 0, min_acc = -1;
  int32_t device_type = -1; /* -1: one device, no dp_model_parallelize */
  int32_t shards = 1, shard = 0; /* processes of the job (dp-run), and this one */
  long num_devices = 0;
  int32_t compression = DP_GRADIENT_COMPRESSION_NONE; /* --compress */
  int32_t zero = 0;                                   /* --zero */
  int32_t math_mode = DP_MATH_DEFAULT;                /* --math */
  int32_t cuda_graphs = DP_CUDA_GRAPHS_DEFAULT;       /* --no-graphs */
  int host_loader = 0;                                /* --host-loader */
  int32_t ids[64];
  int listed_ids = 0; /* --devices named each device (cuda:0,cuda:1) */
  const char* checkpoint_dir = NULL;
  const char* trace_path = NULL;
  const char* export_path = NULL;
  int resume = 0;
  long keep = 3;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--resume") == 0) {
      resume = 1;
      continue;
    }
    if (strcmp(a, "--no-graphs") == 0) {
      cuda_graphs = DP_CUDA_GRAPHS_OFF;
      continue;
    }
    if (strcmp(a, "--host-loader") == 0) {
      host_loader = 1;
      continue;
    }
    if (strcmp(a, "--zero") == 0) {
      zero = 1;
      continue;
    }
    if (i + 1 >= argc) usage(argv[0]);
    const char* v = argv[++i];
    if (strcmp(a, "--model") == 0) {
      model_arg = v;
    } else if (strcmp(a, "--epochs") == 0) {
      epochs = parse_long(argv[0], a, v, 1, 100000);
    } else if (strcmp(a, "--batch") == 0) {
      batch = parse_long(argv[0], a, v, 1, 65536);
    } else if (strcmp(a, "--limit") == 0) {
      limit = parse_long(argv[0], a, v, 1, 1L << 30);
    } else if (strcmp(a, "--test-limit") == 0) {
      test_limit = parse_long(argv[0], a, v, 1, 1L << 30);
    } else if (strcmp(a, "--seed") == 0) {
      seed = (unsigned long long)parse_long(argv[0], a, v, 0, 0x7FFFFFFFL);
    } else if (strcmp(a, "--lr") == 0) {
      char* end;
      lr = strtod(v, &end);
      if (*end != '\0' || end == v || !(lr > 0) || isinf(lr)) {
        fprintf(stderr, "%s: --lr must be a positive number, got '%s'\n", argv[0], v);
        return 2;
      }
    } else if (strcmp(a, "--min-acc") == 0) {
      char* end;
      min_acc = strtod(v, &end);
      if (*end != '\0' || end == v || !(min_acc >= 0 && min_acc <= 1)) {
        fprintf(stderr, "%s: --min-acc must be a number in [0, 1], got '%s'\n", argv[0], v);
        return 2;
      }
    } else if (strcmp(a, "--devices") == 0 && strchr(v, ',') != NULL) {
      if (parse_device_list(argv[0], v, &device_type, ids, &num_devices) != 0) return 2;
      listed_ids = 1;
    } else if (strcmp(a, "--devices") == 0) {
      const char* colon = strchr(v, ':');
      if (colon != NULL && (size_t)(colon - v) == 3 && strncmp(v, "cpu", 3) == 0) {
        device_type = DP_DEVICE_CPU;
      } else if (colon != NULL && (size_t)(colon - v) == 4 && strncmp(v, "cuda", 4) == 0) {
        device_type = DP_DEVICE_CUDA;
      } else {
        fprintf(stderr, "%s: --devices must be cpu:N or cuda:N, got '%s'\n", argv[0], v);
        return 2;
      }
      num_devices = parse_long(argv[0], a, colon + 1, 1, 64);
    } else if (strcmp(a, "--checkpoint") == 0) {
      checkpoint_dir = v;
    } else if (strcmp(a, "--trace") == 0) {
      trace_path = v;
    } else if (strcmp(a, "--export") == 0) {
      export_path = v;
    } else if (strcmp(a, "--keep") == 0) {
      keep = parse_long(argv[0], a, v, 0, 1000000);
    } else if (strcmp(a, "--data") == 0) {
      data_dir = v;
    } else if (strcmp(a, "--nets") == 0) {
      nets_dir = v;
    } else if (strcmp(a, "--compress") == 0) {
      if (strcmp(v, "bf16") == 0) {
        compression = DP_GRADIENT_COMPRESSION_BF16;
      } else if (strcmp(v, "fp16") == 0) {
        compression = DP_GRADIENT_COMPRESSION_FP16;
      } else {
        fprintf(stderr, "%s: --compress must be bf16 or fp16, got '%s'\n", argv[0], v);
        return 2;
      }
    } else if (strcmp(a, "--math") == 0) {
      if (strcmp(v, "fp32") == 0) {
        math_mode = DP_MATH_FP32;
      } else if (strcmp(v, "tf32") == 0) {
        math_mode = DP_MATH_TF32;
      } else if (strcmp(v, "bf16") == 0) {
        math_mode = DP_MATH_BF16;
      } else if (strcmp(v, "fp16") == 0) {
        math_mode = DP_MATH_FP16;
      } else {
        fprintf(stderr, "%s: --math must be fp32, tf32, bf16 or fp16, got '%s'\n", argv[0], v);
        return 2;
      }
    } else {
      usage(argv[0]);
    }
  }

  if (resume && checkpoint_dir == NULL) {
    fprintf(stderr, "%s: --resume needs --checkpoint DIR\n", argv[0]);
    return 2;
  }
  /* The checkpoint directory is made when missing (not its parents). */
  if (checkpoint_dir != NULL && mkdir(checkpoint_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "%s: cannot create checkpoint directory '%s': %s\n", argv[0], checkpoint_dir, strerror(errno));
    return 1;
  }

  /* The model file: a path, or mlp/cnn from --nets (else the build's source
   * tree, next to the executable, or ./samples/nets). */
  char candidates[4][4200];
  const char* model_path = model_arg;
  const char* file = NULL;
  if (strcmp(model_arg, "mlp") == 0) {
    file = "fashion_mlp.json";
  } else if (strcmp(model_arg, "cnn") == 0) {
    file = "fashion_cnn.json";
  } else if (strlen(model_arg) > 5 && strcmp(model_arg + strlen(model_arg) - 5, ".json") == 0) {
    model_path = model_arg;
  } else {
    fprintf(stderr, "%s: --model must be mlp, cnn or a .json model file, got '%s'\n", argv[0], model_arg);
    return 2;
  }
  if (file != NULL) {
    char here[4096];
    exe_dir(argv[0], here, sizeof here);
    int nc = 0;
    if (nets_dir != NULL) {
      snprintf(candidates[nc++], sizeof candidates[0], "%s/%s", nets_dir, file);
    } else {
#ifdef DP_SAMPLE_NETS_DIR
      snprintf(candidates[nc++], sizeof candidates[0], "%s/%s", DP_SAMPLE_NETS_DIR, file);
#endif
      snprintf(candidates[nc++], sizeof candidates[0], "%s/nets/%s", here, file);
      snprintf(candidates[nc++], sizeof candidates[0], "%s/../../samples/nets/%s", here, file);
      snprintf(candidates[nc++], sizeof candidates[0], "samples/nets/%s", file);
    }
    model_path = candidates[0]; /* when none exists, dp reports the first */
    for (int c = nc - 1; c >= 0; --c)
      if (file_exists(candidates[c])) model_path = candidates[c];
  }

  printf("dp %s\n", dp_version());
  fflush(stdout);

  /* Data. */
  size_t n_train = load_split(data_dir, "train", 0, &app.train_x, &app.train_y);
  size_t n_test = load_split(data_dir, "t10k", 2, &app.test_x, &app.test_y);
  if (limit > 0 && (size_t)limit < n_train) n_train = (size_t)limit;
  if (test_limit > 0 && (size_t)test_limit < n_test) n_test = (size_t)test_limit;
  if (n_train < (size_t)batch) {
    fprintf(stderr, "train_fashion_mnist: %zu training samples make no full batch of %ld\n", n_train, batch);
    app_free();
    return 1;
  }

  /* Model and nets. */
  check(dp_model_from_file(model_path, &app.model), model_path);
  /* Under dp-run without --devices: one CPU device per process. */
  const char* world_env = getenv("DP_WORLD_SIZE");
  if (device_type < 0 && world_env != NULL && atol(world_env) > 1) {
    device_type = DP_DEVICE_CPU;
    num_devices = 1;
  }
  if (device_type < 0) {
    dp_training_options topts = DP_TRAINING_OPTIONS_INIT;
    topts.lr = lr; /* 0: the model's */
    if (math_mode == DP_MATH_FP16) topts.loss_scaling = DP_LOSS_SCALING_DYNAMIC; /* half products need it */
    check(dp_model_build_training(app.model, &topts, &app.init_def, &app.train_def, &app.eval_def),
          "dp_model_build_training");
  } else {
    /* Replicas 0..N-1; the global batch is split across them, so --batch
     * stays the batch of one step and training matches one device. Under
     * dp-run (DP_WORLD_SIZE and DP_RANK set) each process takes its part of
     * every global batch and the gradients are summed over all processes. */
    const char* local_env = getenv("DP_LOCAL_RANK");
    const long first = device_type == DP_DEVICE_CUDA && local_env != NULL ? atol(local_env) * num_devices : 0;
    if (!listed_ids)
      for (long i = 0; i < num_devices; ++i) ids[i] = (int32_t)(first + i);
    dp_parallel_options popts = DP_PARALLEL_OPTIONS_INIT;
    popts.device_type = device_type;
    /* NCCL needs a GPU per rank; one GPU named twice goes through the tree. */
    for (long i = 0; i < num_devices; ++i)
      for (long j = 0; j < i; ++j)
        if (ids[i] == ids[j]) popts.cuda_collectives = DP_CUDA_COLLECTIVES_TREE;
    popts.device_ids = ids;
    popts.num_devices = (size_t)num_devices;
    popts.lr = lr;
    /* CPU replicas: one shared model (each param updated once, the updates
     * spread over the replicas) where their cores share a cache, else a copy
     * each; dp decides. */
    popts.shared_model = DP_SHARED_MODEL_AUTO;
    popts.gradient_compression = compression;
    popts.shard_optimizer_state = zero;
    if (math_mode == DP_MATH_FP16) popts.loss_scaling = DP_LOSS_SCALING_DYNAMIC; /* half products need it */
    check(dp_model_parallelize(app.model, &popts, &app.parallel), "dp_model_parallelize");
    check(dp_parallel_model_nets(app.parallel, &app.init_def, &app.train_def, &app.eval_def),
          "dp_parallel_model_nets");
    printf("data parallel over %zu replicas (%s ... %s)", dp_parallel_model_num_replicas(app.parallel),
           dp_parallel_model_scope(app.parallel, 0),
           dp_parallel_model_scope(app.parallel, dp_parallel_model_num_replicas(app.parallel) - 1));
    shards = dp_parallel_model_num_shards(app.parallel);
    shard = dp_parallel_model_shard_id(app.parallel);
    if (shards > 1) printf(" in each of %d processes (this is rank %d)", (int)shards, (int)shard);
    printf("\n");
    if (batch % shards != 0) {
      fprintf(stderr, "%s: --batch %ld does not divide by the %d processes\n", argv[0], batch, (int)shards);
      app_free();
      return 2;
    }
  }
  check(dp_workspace_create(&app.ws), "dp_workspace_create");
  check(dp_net_create(app.ws, app.init_def, NULL, &app.init), "creating the init net");
  dp_net_options train_opts = DP_NET_OPTIONS_INIT, eval_opts = DP_NET_OPTIONS_INIT;
  train_opts.profile = trace_path != NULL;
  train_opts.math_mode = math_mode;
  train_opts.cuda_graphs = cuda_graphs;
  eval_opts.math_mode = math_mode;
  check(dp_net_create(app.ws, app.train_def, &train_opts, &app.train), "creating the train net");
  check(dp_net_create(app.ws, app.eval_def, &eval_opts, &app.eval), "creating the eval net");
  check(dp_net_run(app.init), "running the init net");

  /* The input pipeline over the (first n_train) training samples, borrowed
   * from app.train_x/train_y, which outlive it. With several processes each
   * is fed its part of every global batch of --batch samples. */
  {
    int64_t xd[4] = {(int64_t)n_train, 1, 28, 28};
    int64_t yd[1] = {(int64_t)n_train};
    const char* blobs[2] = {"data", "label"};
    check(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, xd, 4, app.train_x, n_train * IMAGE_PIXELS * sizeof(float),
                                    &app.train_set[0]),
          "dp_tensor_create_borrowed (training images)");
    check(dp_tensor_create_borrowed(DP_DTYPE_INT32, yd, 1, app.train_y, n_train * sizeof(int32_t),
                                    &app.train_set[1]),
          "dp_tensor_create_borrowed (training labels)");
    dp_loader_options lopts = DP_LOADER_OPTIONS_INIT;
    lopts.batch_size = batch;
    lopts.seed = seed;
    lopts.num_shards = shards;
    lopts.shard_id = shard;
    if (device_type == DP_DEVICE_CUDA) {
      /* Batches fed on the first GPU: the dataset held there and batches
       * gathered there, or (--host-loader) the dataset in host memory and
       * each batch staged there. */
      lopts.device_type = DP_DEVICE_CUDA;
      lopts.device_id = ids[0];
      lopts.host_dataset = host_loader;
      if (!host_loader) {
        dp_status* st =
            dp_loader_create(app.ws, blobs, (const dp_tensor* const*)app.train_set, 2, &lopts, &app.loader);
        if (st != NULL && dp_status_code(st) == DP_ERR_OUT_OF_MEMORY) {
          printf("the training set does not fit on cuda:%d (%s): it stays in host memory, its batches staged\n",
                 (int)ids[0], dp_status_message(st));
          dp_status_free(st);
          lopts.host_dataset = 1;
        } else {
          check(st, "dp_loader_create (the training set on the GPU)");
        }
      }
    }
    if (app.loader == NULL)
      check(dp_loader_create(app.ws, blobs, (const dp_tensor* const*)app.train_set, 2, &lopts, &app.loader),
            "dp_loader_create");
  }
  const size_t steps = (size_t)dp_loader_steps_per_epoch(app.loader);
  char lr_text[64];
  if (lr > 0) snprintf(lr_text, sizeof lr_text, "%g", lr);
  else snprintf(lr_text, sizeof lr_text, "the model's");
  printf("model %s: train %zu (%zu steps of %ld), test %zu, epochs %ld, lr %s, seed %llu\n", model_path, n_train,
         steps, batch, n_test, epochs, lr_text, seed);
  fflush(stdout);

  long first_epoch = 1;
  if (resume) {
    const long long done = resume_checkpoint(checkpoint_dir);
    if (done % (long long)steps != 0) {
      fprintf(stderr, "%s: the checkpoint's iteration %lld is not a whole number of epochs of %zu steps (were "
              "--batch and --limit the same?)\n", argv[0], done, steps);
      app_free();
      return 1;
    }
    /* The loader's order depends only on the seed and the epoch. */
    first_epoch = 1 + (long)(done / (long long)steps);
    check(dp_loader_seek(app.loader, first_epoch - 1, 0), "dp_loader_seek");
    fflush(stdout);
  }
  double total_time = 0, last_loss = 0, last_acc = 0;
  progress_t progress = {isatty(STDOUT_FILENO), 0, 0};
  for (long e = first_epoch; e <= epochs; ++e) {
    double loss_sum = 0;
    double t0 = now_s();
    for (size_t step = 1;; ++step) {
      int32_t fed = 0;
      check(dp_loader_next(app.loader, &fed), "dp_loader_next");
      if (!fed) break; /* the epoch's end */
      check(dp_net_run(app.train), "running the train net");
      loss_sum += fetch_scalar("loss");
      progress_draw(&progress, e, epochs, step, steps, batch, t0);
    }
    double dt = now_s() - t0;
    progress_erase(&progress);
    total_time += dt;
    last_loss = loss_sum / (double)steps;
    last_acc = evaluate(n_test);
    if (checkpoint_dir != NULL) save_checkpoint(checkpoint_dir, (long long)e * (long long)steps, keep);
    printf("epoch %ld/%ld loss=%.4f test_acc=%.4f samples_per_s=%.1f\n", e, epochs, last_loss, last_acc,
           (double)(steps * (size_t)batch) / dt);
    fflush(stdout);
  }
  const long trained = epochs - first_epoch + 1;

  /* Serving: the test set through the inference net, which must classify
   * exactly as the eval net did. */
  make_inference();
  int32_t predicted[PREDICTIONS_SHOWN] = {0};
  const double infer_acc = infer_test_set(n_test, predicted);
  printf("inference: test_acc=%.4f predicted", infer_acc);
  for (size_t i = 0; i < PREDICTIONS_SHOWN && i < n_test; ++i) printf(" %d", (int)predicted[i]);
  printf(" labels");
  for (size_t i = 0; i < PREDICTIONS_SHOWN && i < n_test; ++i) printf(" %d", (int)app.test_y[i]);
  printf("\n");
  if (trained > 0 && fabs(infer_acc - last_acc) > 0.5 / (double)(n_test ? n_test : 1)) {
    fprintf(stderr, "train_fashion_mnist: the inference net's test accuracy %.6f is not the eval net's %.6f\n",
            infer_acc, last_acc);
    app_free();
    return 1;
  }
  if (export_path != NULL && shard == 0) export_onnx(export_path);
  printf("final test_acc=%.4f train_loss=%.4f samples_per_s=%.1f\n", last_acc, last_loss,
         trained > 0 ? (double)(steps * (size_t)batch) * (double)trained / total_time : 0.0);
  if (trace_path != NULL) write_trace(trace_path);
  app_free();
  if (min_acc >= 0 && !(last_acc >= min_acc)) {
    fprintf(stderr, "%s: test accuracy %.4f is below --min-acc %.4f\n", argv[0], last_acc, min_acc);
    return 3;
  }
  return 0;
}
