/*
 * train_step: times one training step of a model through dp's public C API.
 *
 * Default model: bench/nets/mlp_sgd.json (the Fashion-MNIST MLP
 * 784-512-512-10, ReLU, softmax cross-entropy, momentum SGD lr 0.01 / 0.9).
 * Data: NUM_BATCHES pre-generated random batches ([B, 1, 28, 28] uniform in
 * [0, 1), labels uniform in 0..9) fed in rotation, zero-copy. Each step
 * (feed + dp_net_run of the train net) is timed on its own after the warm-up;
 * the median is reported. Threads: dp's own (dp_cpu_threads: the CPUs this
 * process may use; taskset limits them).
 *
 *   train_step [--model PATH] [--batch B] [--warmup W] [--steps N] [--peak]
 *              [--devices N] [--shared-model|--auto-layout] [--workers W] [--bucket-kb K] [--trace FILE]
 *              [--memory keep|share|free] [--zero]
 *
 * With --devices N the step is data-parallel over CPU replicas cpu_0..N-1
 * (dp_model_parallelize; the global batch B is split across them; under
 * dp-run the processes share it) run by the async executor: a copy of the
 * model per replica, or one shared model (--shared-model), or what dp picks
 * (--auto-layout: DP_SHARED_MODEL_AUTO). --workers W sets the CPU workers
 * (default: dp's, a runner per replica pinned to its own CPUs when there are
 * CPUs enough). --bucket-kb sets both gradient bucket sizes (default:
 * dp_model_parallelize's 1 MiB first, 25 MiB). --memory sets the train
 * net's memory mode (DP_MEMORY_*; default: the builders', share). --zero
 * shards the optimizer state over the replicas (ZeRO-1).
 *
 * Output (one line each, key=value):
 *   train_step model=... batch=256 steps=N median_ms=... samples_per_s=... gflop_per_step=... gflops=...
 *              memory=share peak_bytes=... state_bytes=... step_bytes=... param_bytes=...
 *     peak_bytes: the workspace's most on the host during the last step (dp_net_memory_stats);
 *     state_bytes: what it held after the init net (params, optimizer state); step_bytes: the
 *     difference, what activations, gradients and op scratch took at most; param_bytes: the
 *     params of every replica (peak_bytes less them: activations, gradients, optimizer state).
 *   sgemm_peak n=1024 gflops=... lib=...    (with --peak: best 1024^3 sgemm, OpenBLAS or oneDNN)
 *   fraction_of_peak=...                    (with --peak)
 */
#define _POSIX_C_SOURCE 200809L

#include <cblas.h>
#include <dp/dp.h>
#if DP_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NUM_BATCHES 4
#define PIXELS 784

static void check(dp_status* s, const char* what) {
  if (s == NULL) return;
  fprintf(stderr, "train_step: %s failed: [%s] %s\n", what, dp_status_code_name(dp_status_code(s)),
          dp_status_message(s));
  dp_status_free(s);
  exit(1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1Dull;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static long parse_long(const char* flag, const char* s, long lo, long hi) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < lo || v > hi) {
    fprintf(stderr, "train_step: %s must be an integer in %ld..%ld, got '%s'\n", flag, lo, hi, s);
    exit(2);
  }
  return v;
}

/* One n^3 sgemm C = A B through library `lib` (0: OpenBLAS, 1: oneDNN);
 * 0 on success, -1 when the library is not built in or fails. */
static int sgemm_once(int lib, int n, const float* a, const float* b, float* c) {
  if (lib == 0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    return 0;
  }
#if DP_HAVE_DNNL
  return dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) == dnnl_success ? 0 : -1;
#else
  return -1;
#endif
}

/* Best GFLOP/s of n^3 sgemm (C = A B), after two warm-up calls, with as
 * many threads as dp's compute uses (dp_cpu_threads: dp itself runs BLAS
 * single-threaded in its own threads, and restores that at its next GEMM):
 * OpenBLAS's, and in builds with oneDNN (which dp's float32 GEMMs then use)
 * oneDNN's if better. *which names the winner. */
static double sgemm_peak(int n, int reps, const char** which) {
  static const char* const names[2] = {"openblas", "onednn"};
  openblas_set_num_threads((int)dp_cpu_threads());
#if DP_HAVE_DNNL
  omp_set_num_threads((int)dp_cpu_threads());
#endif
  size_t nn = (size_t)n * (size_t)n;
  float* a = malloc(nn * sizeof(float));
  float* b = malloc(nn * sizeof(float));
  float* c = malloc(nn * sizeof(float));
  if (!a || !b || !c) {
    fprintf(stderr, "train_step: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < nn; ++i) {
    a[i] = (float)(next_u64() >> 40) / (float)(1 << 24) - 0.5f;
    b[i] = (float)(next_u64() >> 40) / (float)(1 << 24) - 0.5f;
  }
  double best = 0;
  *which = names[0];
  for (int lib = 0; lib < 2; ++lib) {
    for (int r = -2; r < reps; ++r) {
      double t0 = now_s();
      if (sgemm_once(lib, n, a, b, c) != 0) break;
      double dt = now_s() - t0;
      double g = 2.0 * n * (double)n * n / dt * 1e-9;
      if (r >= 0 && g > best) {
        best = g;
        *which = names[lib];
      }
    }
  }
  free(a);
  free(b);
  free(c);
  return best;
}

int main(int argc, char** argv) {
#ifdef DP_BENCH_NETS_DIR
  const char* model_path = DP_BENCH_NETS_DIR "/mlp_sgd.json";
#else
  const char* model_path = "bench/nets/mlp_sgd.json";
#endif
  long batch = 256, warmup = 20, steps = 100, devices = 0, workers = 0, bucket_kb = 0;
  const char* trace = NULL;
  int peak = 0, shared_model = 0, zero = 0;
  int32_t memory = DP_MEMORY_DEFAULT;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--zero") == 0) {
      zero = 1;
    } else if (strcmp(argv[i], "--peak") == 0) {
      peak = 1;
    } else if (strcmp(argv[i], "--shared-model") == 0) {
      shared_model = DP_SHARED_MODEL_ON;
    } else if (strcmp(argv[i], "--auto-layout") == 0) {
      shared_model = DP_SHARED_MODEL_AUTO;
    } else if (i + 1 < argc && strcmp(argv[i], "--model") == 0) {
      model_path = argv[++i];
    } else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0) {
      batch = parse_long("--batch", argv[++i], 1, 65536);
    } else if (i + 1 < argc && strcmp(argv[i], "--warmup") == 0) {
      warmup = parse_long("--warmup", argv[++i], 0, 1000000);
    } else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) {
      steps = parse_long("--steps", argv[++i], 1, 1000000);
    } else if (i + 1 < argc && strcmp(argv[i], "--devices") == 0) {
      devices = parse_long("--devices", argv[++i], 1, 64);
    } else if (i + 1 < argc && strcmp(argv[i], "--trace") == 0) {
      trace = argv[++i];
    } else if (i + 1 < argc && strcmp(argv[i], "--workers") == 0) {
      workers = parse_long("--workers", argv[++i], 1, 256);
    } else if (i + 1 < argc && strcmp(argv[i], "--bucket-kb") == 0) {
      bucket_kb = parse_long("--bucket-kb", argv[++i], 1, 1L << 20);
    } else if (i + 1 < argc && strcmp(argv[i], "--memory") == 0) {
      const char* m = argv[++i];
      memory = strcmp(m, "keep") == 0 ? DP_MEMORY_KEEP : strcmp(m, "share") == 0 ? DP_MEMORY_SHARE
               : strcmp(m, "free") == 0 ? DP_MEMORY_FREE : -1;
      if (memory < 0) {
        fprintf(stderr, "train_step: --memory must be keep, share or free, not '%s'\n", m);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: %s [--model PATH] [--batch B] [--warmup W] [--steps N] [--peak] [--devices N] [--shared-model|--auto-layout] [--workers W] [--bucket-kb K] [--trace FILE] [--memory keep|share|free] [--zero]\n",
              argv[0]);
      return 2;
    }
  }

  /* The sgemm peak first, before dp has threads: its compute helpers spin a
   * few milliseconds after each op, which would take a core from OpenBLAS. */
  const char* peak_lib = "";
  const double peak_gflops = peak ? sgemm_peak(1024, 10, &peak_lib) : 0;
  dp_model* model = NULL;
  dp_netdef *init_def = NULL, *train_def = NULL;
  dp_workspace* ws = NULL;
  dp_net *init = NULL, *train = NULL;
  check(dp_model_from_file(model_path, &model), model_path);
  dp_parallel_model* parallel = NULL;
  int32_t shards = 1; /* processes (dp-run) */
  dp_net_options nopts = DP_NET_OPTIONS_INIT;
  if (devices == 0) {
    dp_training_options topts = DP_TRAINING_OPTIONS_INIT;
    topts.memory = memory;
    check(dp_model_build_training(model, &topts, &init_def, &train_def, NULL), "dp_model_build_training");
  } else {
    int32_t ids[64];
    for (long d = 0; d < devices; ++d) ids[d] = (int32_t)d;
    dp_parallel_options popts = DP_PARALLEL_OPTIONS_INIT;
    popts.device_ids = ids;
    popts.num_devices = (size_t)devices;
    popts.shared_model = shared_model;
    popts.shard_optimizer_state = zero;
    popts.memory = memory;
    if (bucket_kb > 0) popts.first_bucket_bytes = popts.bucket_bytes = (int64_t)bucket_kb << 10;
    check(dp_model_parallelize(model, &popts, &parallel), "dp_model_parallelize");
    /* Under dp-run the processes share the global batch B. */
    shards = dp_parallel_model_num_shards(parallel);
    if (batch % shards != 0) {
      fprintf(stderr, "train_step: --batch %ld does not divide by the %d processes\n", batch, (int)shards);
      return 2;
    }
    check(dp_parallel_model_nets(parallel, &init_def, &train_def, NULL), "dp_parallel_model_nets");
    nopts.num_workers = (int32_t)workers; /* 0: dp's default */
  }
  nopts.profile = trace != NULL; /* per-op timings of the last run, as Chrome trace JSON */
  check(dp_workspace_create(&ws), "dp_workspace_create");
  check(dp_net_create(ws, init_def, NULL, &init), "creating the init net");
  check(dp_net_create(ws, train_def, &nopts, &train), "creating the train net");
  check(dp_net_run(init), "running the init net");
  dp_net_memory state = {.struct_size = sizeof state};
  check(dp_net_memory_stats(init, DP_DEVICE_CPU, 0, &state), "dp_net_memory_stats");

  /* Random batches (this process's part), owned here and borrowed by dp. */
  const long local = batch / shards;
  size_t xn = (size_t)local * PIXELS;
  float* xs = malloc(NUM_BATCHES * xn * sizeof(float));
  int32_t* ys = malloc(NUM_BATCHES * (size_t)local * sizeof(int32_t));
  if (!xs || !ys) {
    fprintf(stderr, "train_step: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < NUM_BATCHES * xn; ++i) xs[i] = (float)(next_u64() >> 40) / (float)(1 << 24);
  for (size_t i = 0; i < NUM_BATCHES * (size_t)local; ++i) ys[i] = (int32_t)(next_u64() % 10);
  dp_tensor* tx[NUM_BATCHES];
  dp_tensor* ty[NUM_BATCHES];
  int64_t xd[4] = {local, 1, 28, 28}, yd[1] = {local};
  for (int k = 0; k < NUM_BATCHES; ++k) {
    check(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, xd, 4, xs + k * xn, xn * sizeof(float), &tx[k]), "data");
    check(dp_tensor_create_borrowed(DP_DTYPE_INT32, yd, 1, ys + k * (size_t)local, (size_t)local * sizeof(int32_t),
                                    &ty[k]),
          "label");
  }

  double* times = malloc((size_t)steps * sizeof(double));
  if (!times) return 1;
  for (long s = -warmup; s < steps; ++s) {
    int k = (int)((s + warmup) % NUM_BATCHES);
    double t0 = now_s();
    check(dp_workspace_feed(ws, "data", tx[k]), "feeding 'data'");
    check(dp_workspace_feed(ws, "label", ty[k]), "feeding 'label'");
    check(dp_net_run(train), "running the train net");
    double dt = now_s() - t0;
    if (s >= 0) times[s] = dt;
  }
  dp_tensor* loss = NULL;
  check(dp_workspace_fetch(ws, "loss", &loss), "fetching 'loss'");
  double last_loss = dp_tensor_dtype(loss) == DP_DTYPE_FLOAT32 ? *(const float*)dp_tensor_data(loss) : 0.0;
  dp_tensor_free(loss);

  /* FLOPs of the MLP step (the default model): forward GEMMs, dW of every
   * layer, dX of every layer but the first. */
  const double b = (double)batch;
  const double fwd = 2.0 * b * (784.0 * 512 + 512.0 * 512 + 512.0 * 10);
  const double flop = fwd + fwd + (fwd - 2.0 * b * 784.0 * 512);
  double med = median(times, (size_t)steps);
  /* The params of every replica (their scopes), or of the one device. */
  unsigned long long param_bytes = 0;
  {
    dp_string_list* params = NULL;
    check(dp_model_blobs(model, DP_MODEL_PARAMS, &params), "dp_model_blobs");
    const size_t replicas = parallel != NULL ? dp_parallel_model_num_replicas(parallel) : 1;
    for (size_t r = 0; r < replicas; ++r)
      for (size_t i = 0; i < dp_string_list_size(params); ++i) {
        char name[512];
        snprintf(name, sizeof name, "%s%s", parallel != NULL ? dp_parallel_model_scope(parallel, r) : "",
                 dp_string_list_get(params, i));
        dp_tensor* t = NULL;
        check(dp_workspace_fetch(ws, name, &t), name);
        param_bytes += dp_tensor_nbytes(t);
        dp_tensor_free(t);
      }
    dp_string_list_free(params);
  }
  dp_net_memory mem = {.struct_size = sizeof mem};
  check(dp_net_memory_stats(train, DP_DEVICE_CPU, 0, &mem), "dp_net_memory_stats");
  static const char* const kModes[] = {"default", "keep", "share", "free"};
  printf("train_step model=%s devices=%ld processes=%d batch=%ld steps=%ld median_ms=%.3f samples_per_s=%.1f "
         "gflop_per_step=%.4f gflops=%.2f last_loss=%.4f memory=%s peak_bytes=%llu state_bytes=%llu "
         "step_bytes=%llu param_bytes=%llu\n",
         model_path, devices, (int)shards, batch, steps, med * 1e3, b / med, flop * 1e-9, flop / med * 1e-9, last_loss,
         kModes[mem.mode >= 0 && mem.mode <= 3 ? mem.mode : 0], (unsigned long long)mem.peak_bytes,
         (unsigned long long)state.bytes_in_use, (unsigned long long)(mem.peak_bytes - state.bytes_in_use), param_bytes);
  if (peak) {
    printf("sgemm_peak n=1024 gflops=%.2f lib=%s\n", peak_gflops, peak_lib);
    printf("fraction_of_peak=%.3f\n", flop / med * 1e-9 / peak_gflops);
  }

  if (trace != NULL) {
    dp_buffer* json = NULL;
    check(dp_net_trace_json(train, &json), "dp_net_trace_json");
    FILE* f = fopen(trace, "wb");
    if (f == NULL || fwrite(dp_buffer_data(json), 1, dp_buffer_size(json), f) != dp_buffer_size(json) || fclose(f) != 0)
      fprintf(stderr, "train_step: could not write %s\n", trace);
    dp_buffer_free(json);
  }
  for (int k = 0; k < NUM_BATCHES; ++k) {
    dp_tensor_free(tx[k]);
    dp_tensor_free(ty[k]);
  }
  free(times);
  dp_net_free(train);
  dp_net_free(init);
  dp_workspace_free(ws); /* frees the blobs borrowing xs/ys */
  dp_netdef_free(train_def);
  dp_netdef_free(init_def);
  dp_parallel_model_free(parallel);
  dp_model_free(model);
  free(xs);
  free(ys);
  return 0;
}
