/*
 * mlp_forward: loads the Fashion-MNIST MLP (784-512-512-10, ReLU) from JSON
 * definitions in samples/nets/, initialises its parameters with the init
 * net, feeds one batch of images and prints the class probabilities.
 *
 * It uses only the public C API. The batch is a synthetic, deterministic set
 * of 28x28 images in [0, 1]; the training sample reads the real data.
 *
 * It checks what it prints (the meson test sample_mlp_forward relies on it):
 * "prob" is float32 [batch, 10] and every row is a distribution, each value
 * in [0, 1] and the row summing to 1 within 1e-5. Otherwise it says what is
 * wrong and exits 1.
 *
 *   mlp_forward [--nets DIR] [--batch N]
 */
#include <dp/dp.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUM_CLASSES 10   /* Fashion-MNIST: the MLP's last layer */
#define SUM_TOLERANCE 1e-5

/* Prints a failed status and exits; frees it either way. */
static void check(dp_status* s, const char* what) {
  if (s == NULL) return;
  fprintf(stderr, "mlp_forward: %s failed: [%s] %s\n", what, dp_status_code_name(dp_status_code(s)),
          dp_status_message(s));
  dp_status_free(s);
  exit(1);
}

static dp_netdef* load(const char* dir, const char* file) {
  char path[4096];
  dp_netdef* def = NULL;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  check(dp_netdef_from_file(path, &def), path);
  return def;
}

int main(int argc, char** argv) {
  const char* nets = "samples/nets";
  long batch = 4;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--nets") == 0 && i + 1 < argc) {
      nets = argv[++i];
    } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      batch = strtol(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: %s [--nets DIR] [--batch N]\n", argv[0]);
      return 2;
    }
  }
  if (batch < 1 || batch > 4096) {
    fprintf(stderr, "mlp_forward: --batch must be in 1..4096\n");
    return 2;
  }
  printf("dp %s\n", dp_version());

  dp_workspace* ws = NULL;
  check(dp_workspace_create(&ws), "dp_workspace_create");
  dp_netdef* init_def = load(nets, "mlp_init.json");
  dp_netdef* mlp_def = load(nets, "mlp.json");
  dp_net* init = NULL;
  dp_net* mlp = NULL;
  check(dp_net_create(ws, init_def, NULL, &init), "creating the init net");
  check(dp_net_run(init), "running the init net");
  check(dp_net_create(ws, mlp_def, NULL, &mlp), "creating the MLP net");
  printf("loaded '%s' (%zu ops) and '%s' (%zu ops)\n", dp_netdef_name(init_def), dp_netdef_num_ops(init_def),
         dp_netdef_name(mlp_def), dp_netdef_num_ops(mlp_def));

  /* A batch of images [N, 1, 28, 28]: smooth patterns that differ per image. */
  size_t n = (size_t)batch * 28 * 28;
  float* images = malloc(n * sizeof(float));
  if (images == NULL) return 1;
  for (size_t i = 0; i < n; ++i) {
    size_t img = i / 784, px = i % 784;
    images[i] = (float)((px * (img + 3) + img * 97) % 256) / 255.0f;
  }
  int64_t dims[4] = {batch, 1, 28, 28};
  dp_tensor* data = NULL;
  check(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 4, images, n * sizeof(float), &data), "dp_tensor_create");
  free(images); /* dp copied it */
  check(dp_workspace_feed(ws, "data", data), "feeding 'data'");
  dp_tensor_free(data);

  check(dp_net_run(mlp), "running the MLP");

  dp_tensor* prob = NULL;
  check(dp_workspace_fetch(ws, "prob", &prob), "fetching 'prob'");
  const int64_t* pd = dp_tensor_dims(prob);
  const float* p = dp_tensor_data(prob);
  if (dp_tensor_dtype(prob) != DP_DTYPE_FLOAT32 || dp_tensor_ndim(prob) != 2 || pd[0] != batch ||
      pd[1] != NUM_CLASSES || p == NULL) {
    fprintf(stderr, "mlp_forward: FAILED: 'prob' should be float32 [%ld, %d], got dtype %d with %zu dims", batch,
            NUM_CLASSES, (int)dp_tensor_dtype(prob), dp_tensor_ndim(prob));
    for (size_t i = 0; i < dp_tensor_ndim(prob); ++i) fprintf(stderr, "%s%lld", i ? ", " : " [", (long long)pd[i]);
    fprintf(stderr, "%s\n", dp_tensor_ndim(prob) ? "]" : "");
    return 1;
  }
  printf("prob: float32[%lld, %lld]\n", (long long)pd[0], (long long)pd[1]);
  int bad = 0;
  double worst = 0; /* largest |row sum - 1| */
  for (int64_t r = 0; r < pd[0]; ++r) {
    int64_t best = 0;
    double sum = 0;
    printf("image %lld:", (long long)r);
    for (int64_t c = 0; c < pd[1]; ++c) {
      float v = p[r * pd[1] + c];
      printf(" %.3f", v);
      if (!(v >= 0.0f && v <= 1.0f)) { /* also NaN */
        fprintf(stderr, "mlp_forward: FAILED: prob[%lld, %lld] = %g is not in [0, 1]\n", (long long)r, (long long)c,
                (double)v);
        ++bad;
      }
      sum += v;
      if (v > p[r * pd[1] + best]) best = c;
    }
    printf("  -> class %lld (sum %.4f)\n", (long long)best, sum);
    double err = fabs(sum - 1.0);
    if (!(err <= SUM_TOLERANCE)) {
      fprintf(stderr, "mlp_forward: FAILED: row %lld of prob sums to %.9f, not 1 within %g\n", (long long)r, sum,
              SUM_TOLERANCE);
      ++bad;
    }
    if (err > worst || err != err) worst = err;
  }
  if (bad) {
    fprintf(stderr, "mlp_forward: FAILED: %d check(s) of 'prob' failed\n", bad);
    return 1;
  }
  printf("ok: prob is [%ld, %d], every value in [0, 1], every row sums to 1 (largest |sum - 1| = %.2g)\n", batch,
         NUM_CLASSES, worst);

  dp_tensor_free(prob);
  dp_net_free(mlp);
  dp_net_free(init);
  dp_netdef_free(mlp_def);
  dp_netdef_free(init_def);
  dp_workspace_free(ws);
  return 0;
}
