/*
 * bindings_bench (C): the baseline of bench/bindings/run_bindings_bench.sh.
 * The Go, Rust and Java programs next to this one do exactly the same work
 * through their binding and print the same line, so that the difference is
 * the binding's cost.
 *
 *   bindings_bench call ITERS           per-call cost of a 1-op net
 *   bindings_bench train STEPS MODEL    training steps of a model (mlp_sgd.json)
 *
 * call: a net holding one Copy op (x -> y, x a float32 [16] fed once), the
 *   default (simple) executor, created once. After ITERS/2 warm-up runs it
 *   times ITERS consecutive dp_net_run calls in 5 blocks of ITERS/5 and
 *   reports the median block per call (run_ns). Then, after ITERS/8 warm-up
 *   rounds, ITERS/4 "rounds" in 5 blocks, median block per round (round_ns):
 *   create a tensor from 16 floats (copy), feed it as x, free it, run, fetch
 *   y, copy its 16 floats out, free it. (Runs are timed before any round, so
 *   that the garbage rounds leave in Go and Java cannot fall on them.)
 * train: the model's training nets (dp_model_build_training, default
 *   options), 4 synthetic batches of 256 ([256,1,28,28] uniform in [0,1),
 *   labels 0..9, xorshift64* from a fixed seed: the same numbers in every
 *   language) copied into tensors once; each step feeds "data" and "label"
 *   (batch k mod 4) and runs the train net, timed on its own; 20 warm-up
 *   steps, then STEPS timed ones; reports the median step.
 *
 * Output, one line:
 *   call lang=c iters=N run_ns=X round_ns=Y
 *   train lang=c steps=N batch=256 median_ms=X samples_per_s=Y last_loss=Z
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ONE_OP_NET \
  "{\"name\":\"one_op\",\"external_inputs\":[\"x\"],\"external_outputs\":[\"y\"]," \
  "\"ops\":[{\"type\":\"Copy\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}"
#define N_ELEM 16
#define BLOCKS 5
#define BATCH 256
#define NUM_BATCHES 4
#define PIXELS 784
#define WARMUP_STEPS 20

static void check(dp_status* s, const char* what) {
  if (s == NULL) return;
  fprintf(stderr, "bindings_bench: %s failed: [%s] %s\n", what, dp_status_code_name(dp_status_code(s)),
          dp_status_message(s));
  dp_status_free(s);
  exit(1);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1Dull;
}

/* One feed + run + fetch round. */
static void round_trip(dp_workspace* ws, dp_net* net, const float* in, float* out) {
  static const int64_t dims[1] = {N_ELEM};
  dp_tensor* t = NULL;
  check(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, in, N_ELEM * sizeof(float), &t), "dp_tensor_create");
  check(dp_workspace_feed(ws, "x", t), "dp_workspace_feed");
  dp_tensor_free(t);
  check(dp_net_run(net), "dp_net_run");
  dp_tensor* y = NULL;
  check(dp_workspace_fetch(ws, "y", &y), "dp_workspace_fetch");
  check(dp_tensor_copy_to(y, out, N_ELEM * sizeof(float)), "dp_tensor_copy_to");
  dp_tensor_free(y);
}

static int bench_call(long iters) {
  dp_netdef* def = NULL;
  dp_workspace* ws = NULL;
  dp_net* net = NULL;
  float in[N_ELEM], out[N_ELEM];
  for (int i = 0; i < N_ELEM; ++i) in[i] = (float)i;
  check(dp_netdef_from_json(ONE_OP_NET, strlen(ONE_OP_NET), &def), "dp_netdef_from_json");
  check(dp_workspace_create(&ws), "dp_workspace_create");
  int64_t dims[1] = {N_ELEM};
  dp_tensor* x = NULL;
  check(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, in, sizeof in, &x), "dp_tensor_create");
  check(dp_workspace_feed(ws, "x", x), "dp_workspace_feed");
  dp_tensor_free(x);
  check(dp_net_create(ws, def, NULL, &net), "dp_net_create");

  long per_block = iters / BLOCKS, rounds_per_block = iters / 4 / BLOCKS;
  double run_ns[BLOCKS], round_ns[BLOCKS];
  for (long i = 0; i < iters / 2; ++i) check(dp_net_run(net), "dp_net_run");
  for (int b = 0; b < BLOCKS; ++b) {
    int64_t t0 = now_ns();
    for (long i = 0; i < per_block; ++i) check(dp_net_run(net), "dp_net_run");
    run_ns[b] = (double)(now_ns() - t0) / (double)per_block;
  }
  for (long i = 0; i < iters / 8; ++i) round_trip(ws, net, in, out);
  for (int b = 0; b < BLOCKS; ++b) {
    int64_t t0 = now_ns();
    for (long i = 0; i < rounds_per_block; ++i) round_trip(ws, net, in, out);
    round_ns[b] = (double)(now_ns() - t0) / (double)rounds_per_block;
  }
  if (out[N_ELEM - 1] != (float)(N_ELEM - 1)) {
    fprintf(stderr, "bindings_bench: y[%d] = %g, want %d\n", N_ELEM - 1, out[N_ELEM - 1], N_ELEM - 1);
    return 1;
  }
  printf("call lang=c iters=%ld run_ns=%.1f round_ns=%.1f\n", per_block * BLOCKS, median(run_ns, BLOCKS),
         median(round_ns, BLOCKS));
  dp_net_free(net);
  dp_workspace_free(ws);
  dp_netdef_free(def);
  return 0;
}

static int bench_train(long steps, const char* model_path) {
  dp_model* model = NULL;
  dp_netdef *init_def = NULL, *train_def = NULL;
  dp_workspace* ws = NULL;
  dp_net *init = NULL, *train = NULL;
  check(dp_model_from_file(model_path, &model), model_path);
  check(dp_model_build_training(model, NULL, &init_def, &train_def, NULL), "dp_model_build_training");
  check(dp_workspace_create(&ws), "dp_workspace_create");
  check(dp_net_create(ws, init_def, NULL, &init), "creating the init net");
  check(dp_net_create(ws, train_def, NULL, &train), "creating the train net");
  check(dp_net_run(init), "running the init net");

  size_t xn = (size_t)BATCH * PIXELS;
  float* xs = malloc(NUM_BATCHES * xn * sizeof(float));
  int32_t* ys = malloc(NUM_BATCHES * (size_t)BATCH * sizeof(int32_t));
  double* times = malloc((size_t)steps * sizeof(double));
  if (!xs || !ys || !times) {
    fprintf(stderr, "bindings_bench: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < NUM_BATCHES * xn; ++i) xs[i] = (float)(next_u64() >> 40) / (float)(1 << 24);
  for (size_t i = 0; i < NUM_BATCHES * (size_t)BATCH; ++i) ys[i] = (int32_t)(next_u64() % 10);
  dp_tensor* tx[NUM_BATCHES];
  dp_tensor* ty[NUM_BATCHES];
  int64_t xd[4] = {BATCH, 1, 28, 28}, yd[1] = {BATCH};
  for (int k = 0; k < NUM_BATCHES; ++k) {
    check(dp_tensor_create(DP_DTYPE_FLOAT32, xd, 4, xs + k * xn, xn * sizeof(float), &tx[k]), "data");
    check(dp_tensor_create(DP_DTYPE_INT32, yd, 1, ys + k * (size_t)BATCH, BATCH * sizeof(int32_t), &ty[k]),
          "label");
  }

  for (long s = -WARMUP_STEPS; s < steps; ++s) {
    int k = (int)((s + WARMUP_STEPS) % NUM_BATCHES);
    int64_t t0 = now_ns();
    check(dp_workspace_feed(ws, "data", tx[k]), "feeding 'data'");
    check(dp_workspace_feed(ws, "label", ty[k]), "feeding 'label'");
    check(dp_net_run(train), "running the train net");
    if (s >= 0) times[s] = (double)(now_ns() - t0) * 1e-9;
  }
  dp_tensor* loss = NULL;
  check(dp_workspace_fetch(ws, "loss", &loss), "fetching 'loss'");
  float last_loss = 0;
  check(dp_tensor_copy_to(loss, &last_loss, sizeof last_loss), "dp_tensor_copy_to");
  dp_tensor_free(loss);

  double med = median(times, (size_t)steps);
  printf("train lang=c steps=%ld batch=%d median_ms=%.3f samples_per_s=%.1f last_loss=%.6f\n", steps, BATCH,
         med * 1e3, BATCH / med, last_loss);
  for (int k = 0; k < NUM_BATCHES; ++k) {
    dp_tensor_free(tx[k]);
    dp_tensor_free(ty[k]);
  }
  free(times);
  free(xs);
  free(ys);
  dp_net_free(train);
  dp_net_free(init);
  dp_workspace_free(ws);
  dp_netdef_free(train_def);
  dp_netdef_free(init_def);
  dp_model_free(model);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "call") == 0) {
    long iters = strtol(argv[2], NULL, 10);
    if (iters >= 20 * BLOCKS) return bench_call(iters);
  } else if (argc >= 4 && strcmp(argv[1], "train") == 0) {
    long steps = strtol(argv[2], NULL, 10);
    if (steps >= 1) return bench_train(steps, argv[3]);
  }
  fprintf(stderr, "usage: %s call ITERS (>= 100) | train STEPS MODEL_JSON\n", argv[0]);
  return 2;
}
