/*
 * checkpoint_bench: checkpoint save and load through dp's public C API
 * against plain file I/O of the same bytes, and the training step while an
 * asynchronous save runs.
 *
 *   checkpoint_bench io [--dir DIR] [--tensors N] [--mib M] [--rounds R]
 *   checkpoint_bench step [--model PATH] [--dir DIR] [--batch B] [--steps N] [--pairs P] [--share S]
 *
 * io: N tensors of M MiB float32 (default 64 x 16 MiB = 1 GiB) in one
 * workspace. Every round runs, in this order, each on the same bytes:
 *   raw_write   one new file written sequentially from the tensors' memory (write(2)), fsync;
 *               the old file is deleted first
 *   raw_atomic  the same into a temporary file renamed over the old one after the fsync: the
 *               protocol of a crash-safe save, without dp's format and checksums
 *   dp_save     dp_checkpoint_save: XXH3 of every tensor, temp file, fsync, rename, fsync of the dir
 *   raw_read    the raw file read back into new memory (read(2), one malloc per tensor)
 *   dp_load     dp_checkpoint_load, checksums verified, into the existing blobs
 *   dp_mmap     dp_checkpoint_load with mmap, verified (every page read once)
 *   dp_mmap_nv  dp_checkpoint_load with mmap, no_verify (pages mapped, not read)
 * Before every read the file's pages are dropped from the page cache
 * (posix_fadvise DONTNEED after fsync), so reads come from the device.
 * Prints one line per measurement and, per kind, the median over rounds of
 * GiB/s with min..max, and the ratios dp_save/raw_write and dp_load/raw_read.
 *
 * step: the training step of a model (default bench/nets/mlp_sgd.json, momentum
 * SGD, batch 256) alone and while dp_checkpoint_save_async writes its state
 * (params and momentum) over and over, a new save starting as soon as one
 * ends. P pairs of N-step blocks (default 40 x 20), one block of each kind per
 * pair, which goes first alternating, so that both see the same state of a
 * drifting machine; reported: the median and mean step time of each, and the
 * median over pairs of the ratio of the blocks' mean step times.
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>
#include <fcntl.h>
#include <unistd.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ROUNDS 32
#define MIB (1024.0 * 1024.0)

static void check(dp_status* s, const char* what) {
  if (s == NULL) return;
  fprintf(stderr, "checkpoint_bench: %s failed: [%s] %s\n", what, dp_status_code_name(dp_status_code(s)),
          dp_status_message(s));
  dp_status_free(s);
  exit(1);
}

static void die(const char* what, const char* path) {
  fprintf(stderr, "checkpoint_bench: %s '%s' failed\n", what, path);
  exit(1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Median, min and max of n values (sorts them). */
static void stats(double* v, int n, double* med, double* lo, double* hi) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  *lo = v[0];
  *hi = v[n - 1];
}

/* Drops a file's pages from the page cache (they are clean after fsync). */
static void drop_cache(const char* path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) die("opening", path);
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

/* A new file each time, as a checkpoint is (rewriting a file in place would
 * first have to truncate its old blocks), from the workspace's tensors
 * themselves: the same bytes in the same memory as dp_checkpoint_save. */
static void raw_write(const char* path, dp_workspace* ws, char* const* names, int n, size_t bytes, int atomic) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (!atomic) remove(path);
  const char* target = atomic ? tmp : path;
  int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die("creating", path);
  for (int i = 0; i < n; ++i) {
    dp_tensor* t = NULL;
    check(dp_workspace_fetch(ws, names[i], &t), "dp_workspace_fetch");
    const char* p = (const char*)dp_tensor_data(t);
    size_t left = bytes;
    while (left > 0) {
      ssize_t w = write(fd, p, left);
      if (w <= 0) die("writing", path);
      p += w;
      left -= (size_t)w;
    }
    dp_tensor_free(t);
  }
  if (fsync(fd) != 0) die("fsync of", path);
  close(fd);
  /* atomic: the old file stays until the new one is durable, as a checkpoint's does */
  if (atomic && rename(tmp, path) != 0) die("renaming to", path);
}

/* Reads the file back into new memory, one allocation per tensor, all kept
 * until the end (as a loader must: the tensors land in memory the program
 * did not have before, and all of them live at once). */
static void raw_read(const char* path, int n, size_t bytes) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) die("opening", path);
  char** bufs = malloc((size_t)n * sizeof *bufs);
  for (int i = 0; i < n; ++i) {
    bufs[i] = malloc(bytes);
    if (bufs[i] == NULL) die("allocating", "memory");
    size_t done = 0;
    while (done < bytes) {
      ssize_t r = read(fd, bufs[i] + done, bytes - done);
      if (r <= 0) die("reading", path);
      done += (size_t)r;
    }
  }
  close(fd);
  for (int i = 0; i < n; ++i) free(bufs[i]);
  free(bufs);
}

static int io_bench(const char* dir, int tensors, int mib, int rounds) {
  const size_t bytes = (size_t)mib << 20;
  const size_t total = bytes * (size_t)tensors;
  char raw_path[4096], ck_path[4096];
  snprintf(raw_path, sizeof raw_path, "%s/checkpoint_bench_raw.bin", dir);
  snprintf(ck_path, sizeof ck_path, "%s/checkpoint_bench.dpckpt", dir);
  float** bufs = malloc((size_t)tensors * sizeof *bufs);
  char** names = malloc((size_t)tensors * sizeof *names);
  if (bufs == NULL || names == NULL) die("allocating", "memory");
  dp_workspace* ws = NULL;
  check(dp_workspace_create(&ws), "dp_workspace_create");
  const int64_t dims[1] = {(int64_t)(bytes / sizeof(float))};
  for (int i = 0; i < tensors; ++i) {
    bufs[i] = malloc(bytes);
    if (bufs[i] == NULL) die("allocating", "memory");
    uint32_t s = 0x9E3779B9u * (uint32_t)(i + 1);
    for (size_t k = 0; k < bytes / sizeof(float); ++k) {
      s = s * 1664525u + 1013904223u;
      bufs[i][k] = (float)(s >> 8) * (1.0f / 16777216.0f);
    }
    names[i] = malloc(32);
    snprintf(names[i], 32, "t%03d", i);
    dp_tensor* t = NULL;
    check(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, bufs[i], bytes, &t), "dp_tensor_create");
    check(dp_workspace_feed(ws, names[i], t), "dp_workspace_feed");
    dp_tensor_free(t);
  }
  printf("# io: %d tensors x %d MiB = %.2f GiB in %s, %d rounds\n", tensors, mib, (double)total / (MIB * 1024), dir,
         rounds);
  enum { RAW_W, RAW_ATOMIC, DP_SAVE, RAW_R, DP_LOAD, DP_MMAP, DP_MMAP_NV, KINDS };
  const char* kind_names[KINDS] = {"raw_write", "raw_atomic", "dp_save", "raw_read", "dp_load", "dp_mmap", "dp_mmap_nv"};
  double gibs[KINDS][MAX_ROUNDS];
  const double gib = (double)total / (MIB * 1024);
  dp_checkpoint_load_options lo;
  for (int r = 0; r < rounds; ++r) {
    /* Writes: which goes first alternates, so that the device's state after
     * the previous write (its cache, blocks being freed) falls on both. */
    for (int w = 0; w < 3; ++w) {
      double t0 = now_s();
      const int which = (w + r) % 3;
      if (which < 2) {
        raw_write(raw_path, ws, names, tensors, bytes, which);
        gibs[which == 0 ? RAW_W : RAW_ATOMIC][r] = gib / (now_s() - t0);
      } else {
        check(dp_checkpoint_save(ws, (const char* const*)names, (size_t)tensors, ck_path, NULL),
              "dp_checkpoint_save");
        gibs[DP_SAVE][r] = gib / (now_s() - t0);
      }
    }
    double t0;

    drop_cache(raw_path);
    t0 = now_s();
    raw_read(raw_path, tensors, bytes);
    gibs[RAW_R][r] = gib / (now_s() - t0);

    for (int k = DP_LOAD; k <= DP_MMAP_NV; ++k) {
      dp_checkpoint_load_options_init(&lo, sizeof lo);
      lo.mmap = k != DP_LOAD;
      lo.no_verify = k == DP_MMAP_NV;
      drop_cache(ck_path);
      t0 = now_s();
      check(dp_checkpoint_load(ws, ck_path, &lo), "dp_checkpoint_load");
      gibs[k][r] = gib / (now_s() - t0);
    }
    printf("round %d:", r + 1);
    for (int k = 0; k < KINDS; ++k) printf(" %s=%.3f", kind_names[k], gibs[k][r]);
    printf(" GiB/s\n");
    fflush(stdout);
    /* The next save replaces blobs that map the file now: fresh copies first. */
    for (int i = 0; i < tensors; ++i) {
      dp_tensor* t = NULL;
      check(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, bufs[i], bytes, &t), "dp_tensor_create");
      check(dp_workspace_feed(ws, names[i], t), "dp_workspace_feed");
      dp_tensor_free(t);
    }
  }
  double med[KINDS], lo_v, hi_v;
  for (int k = 0; k < KINDS; ++k) {
    double v[MAX_ROUNDS];
    memcpy(v, gibs[k], (size_t)rounds * sizeof(double));
    stats(v, rounds, &med[k], &lo_v, &hi_v);
    printf("%s median=%.3f min=%.3f max=%.3f GiB/s\n", kind_names[k], med[k], lo_v, hi_v);
  }
  double ratio_w[MAX_ROUNDS], ratio_a[MAX_ROUNDS], ratio_r[MAX_ROUNDS];
  for (int r = 0; r < rounds; ++r) {
    ratio_w[r] = gibs[DP_SAVE][r] / gibs[RAW_W][r];
    ratio_a[r] = gibs[DP_SAVE][r] / gibs[RAW_ATOMIC][r];
    ratio_r[r] = gibs[DP_LOAD][r] / gibs[RAW_R][r];
  }
  double mw, lw, hw, ma, la, ha, mr, lr, hr;
  stats(ratio_w, rounds, &mw, &lw, &hw);
  stats(ratio_a, rounds, &ma, &la, &ha);
  stats(ratio_r, rounds, &mr, &lr, &hr);
  printf("ratio dp_save/raw_write median=%.3f min=%.3f max=%.3f (target >= 0.90)\n", mw, lw, hw);
  printf("ratio dp_save/raw_atomic median=%.3f min=%.3f max=%.3f\n", ma, la, ha);
  printf("ratio dp_load/raw_read median=%.3f min=%.3f max=%.3f (target >= 0.90)\n", mr, lr, hr);
  printf("mmap_load_s median=%.4f (verified) %.4f (not verified)\n", gib / med[DP_MMAP], gib / med[DP_MMAP_NV]);
  remove(raw_path);
  remove(ck_path);
  dp_workspace_free(ws);
  for (int i = 0; i < tensors; ++i) {
    free(bufs[i]);
    free(names[i]);
  }
  free(bufs);
  free(names);
  return 0;
}

/* ---- the training step with a background save ---------------------------- */

static int step_bench(const char* model_path, const char* dir, int batch, int steps, int pairs, double share) {
  dp_model* model = NULL;
  dp_netdef *init_def = NULL, *train_def = NULL;
  dp_workspace* ws = NULL;
  dp_net *init = NULL, *train = NULL;
  dp_string_list* state = NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/checkpoint_bench_step.dpckpt", dir);
  check(dp_model_from_file(model_path, &model), model_path);
  check(dp_model_build_training(model, NULL, &init_def, &train_def, NULL), "dp_model_build_training");
  check(dp_workspace_create(&ws), "dp_workspace_create");
  check(dp_net_create(ws, init_def, NULL, &init), "creating the init net");
  check(dp_net_create(ws, train_def, NULL, &train), "creating the train net");
  check(dp_net_run(init), "running the init net");
  check(dp_model_checkpoint_blobs(model, &state), "dp_model_checkpoint_blobs");
  const size_t n_state = dp_string_list_size(state);
  const char** names = malloc(n_state * sizeof *names);
  for (size_t i = 0; i < n_state; ++i) names[i] = dp_string_list_get(state, i);

  /* One batch of the model's inputs: data [B, 1, 28, 28], label [B]. */
  const int64_t xd[4] = {batch, 1, 28, 28}, yd[1] = {batch};
  float* x = malloc((size_t)batch * 784 * sizeof(float));
  int32_t* y = malloc((size_t)batch * sizeof(int32_t));
  uint32_t s = 12345;
  for (int i = 0; i < batch * 784; ++i) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)(s >> 8) * (1.0f / 16777216.0f);
  }
  for (int i = 0; i < batch; ++i) y[i] = i % 10;
  dp_tensor *tx = NULL, *ty = NULL;
  check(dp_tensor_create(DP_DTYPE_FLOAT32, xd, 4, x, (size_t)batch * 784 * sizeof(float), &tx), "input");
  check(dp_tensor_create(DP_DTYPE_INT32, yd, 1, y, (size_t)batch * sizeof(int32_t), &ty), "labels");
  check(dp_workspace_feed(ws, "data", tx), "feeding data");
  check(dp_workspace_feed(ws, "label", ty), "feeding labels");
  for (int i = 0; i < 20; ++i) check(dp_net_run(train), "warm-up step");

  /* Pairs of short blocks, one alone and one with saves, which goes first
   * alternating: this machine's speed drifts between modes over seconds, and
   * a pair's two blocks see the same mode. */
  double* alone = malloc((size_t)(steps * pairs) * sizeof(double));
  double* busy = malloc((size_t)(steps * pairs) * sizeof(double));
  double* pair_ratio = malloc((size_t)pairs * sizeof(double));
  int n_alone = 0, n_busy = 0, saves = 0;
  dp_checkpoint_save_options options = DP_CHECKPOINT_SAVE_OPTIONS_INIT;
  options.async_write_share = share; /* 0: dp's default */
  double save_s = 0, total_alone = 0, total_busy = 0;
  for (int p = 0; p < pairs; ++p) {
    double block_sum[2] = {0, 0};
    for (int mode = 0; mode < 2; ++mode) {
      const int with_save = (p + mode) % 2;
      dp_checkpoint_job* job = NULL;
      double job_start = 0;
      for (int i = 0; i < steps; ++i) {
        if (with_save && job == NULL) {
          job_start = now_s();
          check(dp_checkpoint_save_async(ws, names, n_state, path, &options, &job), "dp_checkpoint_save_async");
        }
        const double t0 = now_s();
        check(dp_net_run(train), "train step");
        const double dt = now_s() - t0;
        block_sum[with_save] += dt;
        if (with_save) busy[n_busy++] = dt;
        else alone[n_alone++] = dt;
        if (job != NULL) {
          dp_status* st = dp_checkpoint_wait(job, 0);
          if (st == NULL) {
            save_s += now_s() - job_start;
            dp_checkpoint_job_free(job);
            job = NULL;
            ++saves;
          } else if (dp_status_code(st) == DP_ERR_TIMEOUT) {
            dp_status_free(st);
          } else {
            check(st, "the background save");
          }
        }
      }
      if (job != NULL) { /* not timed: the next block starts without a save in flight */
        check(dp_checkpoint_wait(job, -1), "the background save");
        save_s += now_s() - job_start;
        dp_checkpoint_job_free(job);
        ++saves;
      }
    }
    pair_ratio[p] = block_sum[1] / block_sum[0];
    total_alone += block_sum[0];
    total_busy += block_sum[1];
  }
  double ma, la, ha, mb, lb, hb, mr, lr, hr;
  stats(alone, n_alone, &ma, &la, &ha);
  stats(busy, n_busy, &mb, &lb, &hb);
  stats(pair_ratio, pairs, &mr, &lr, &hr);
  printf("# step: %s batch %d, %d pairs of %d-step blocks, %zu state blobs, %d background saves of %.1f ms on average\n",
         model_path, batch, pairs, steps, n_state, saves, saves ? 1e3 * save_s / saves : 0.0);
  printf("step_alone median_ms=%.3f min_ms=%.3f mean_ms=%.3f\n", ma * 1e3, la * 1e3, 1e3 * total_alone / n_alone);
  printf("step_during_async_save median_ms=%.3f min_ms=%.3f mean_ms=%.3f\n", mb * 1e3, lb * 1e3,
         1e3 * total_busy / n_busy);
  printf("ratio_of_medians during/alone=%.3f ratio_of_means=%.3f\n", mb / ma, total_busy / total_alone);
  printf("ratio during/alone=%.3f (median over pairs of block means, min %.3f max %.3f; target <= 1.05)\n", mr, lr,
         hr);
  free(pair_ratio);
  remove(path);
  free(alone);
  free(busy);
  free(x);
  free(y);
  free(names);
  dp_tensor_free(tx);
  dp_tensor_free(ty);
  dp_string_list_free(state);
  dp_net_free(train);
  dp_net_free(init);
  dp_workspace_free(ws);
  dp_netdef_free(init_def);
  dp_netdef_free(train_def);
  dp_model_free(model);
  return 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: checkpoint_bench io [--dir DIR] [--tensors N] [--mib M] [--rounds R]\n"
          "       checkpoint_bench step [--model PATH] [--dir DIR] [--batch B] [--steps N] [--pairs P] [--share S]\n");
  exit(2);
}

int main(int argc, char** argv) {
  if (argc < 2) usage();
  const char* dir = ".";
  const char* model = DP_BENCH_NETS_DIR "/mlp_sgd.json";
  int tensors = 64, mib = 16, rounds = 3, batch = 256, steps = 20, pairs = 40;
  double share = 0;
  for (int i = 2; i < argc; ++i) {
    if (i + 1 >= argc) usage();
    const char* a = argv[i];
    const char* v = argv[++i];
    if (strcmp(a, "--dir") == 0) dir = v;
    else if (strcmp(a, "--model") == 0) model = v;
    else if (strcmp(a, "--tensors") == 0) tensors = atoi(v);
    else if (strcmp(a, "--mib") == 0) mib = atoi(v);
    else if (strcmp(a, "--rounds") == 0) rounds = atoi(v);
    else if (strcmp(a, "--batch") == 0) batch = atoi(v);
    else if (strcmp(a, "--steps") == 0) steps = atoi(v);
    else if (strcmp(a, "--pairs") == 0) pairs = atoi(v);
    else if (strcmp(a, "--share") == 0) share = atof(v);
    else usage();
  }
  if (tensors < 1 || mib < 1 || rounds < 1 || rounds > MAX_ROUNDS || batch < 1 || steps < 1 || pairs < 1) usage();
  if (strcmp(argv[1], "io") == 0) return io_bench(dir, tensors, mib, rounds);
  if (strcmp(argv[1], "step") == 0) return step_bench(model, dir, batch, steps, pairs, share);
  usage();
  return 2;
}
