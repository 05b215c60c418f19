/*
 * onnx_infer: classifies the Fashion-MNIST test set with an ONNX model,
 * through dp's public C API alone (no Python at run time).
 *
 * It imports the model (dp_model_from_onnx_file: its initializers become the
 * init net's values, its nodes the forward net), runs the init net once,
 * builds the inference net of the graph's outputs (dp_model_build_inference
 * with its defaults), and runs it over the test images in batches, each
 * image's class being the largest score of the graph's last output (logits
 * or probabilities [N, 10]).
 *
 *   onnx_infer MODEL.onnx [--data DIR] [--batch B] [--limit N] [--min-acc A]
 *                         [--dump DIR]
 *
 * The model's first input takes images [N, 1, 28, 28], standardised as
 * train_fashion_mnist feeds them (pixel / 255, minus 0.2860, over 0.3530), so
 * that a model it exported (--export MODEL.onnx) classifies as it did; dp's
 * FC flattens its input, so an MLP whose first layer is a Gemm on [N, 784]
 * takes them as well. --limit N classifies the first N test images;
 * --dump DIR writes the first batch, the model's outputs on it and a manifest
 * (tests/onnx/onnx_reference.py --check-manifest runs the model on its own
 * and compares).
 *
 * Output: one line on the model, then
 *   test_acc=<acc> images=<n> images_per_s=<rate>
 * Errors print the status message and exit with 1 (2 for bad flags); with
 * --min-acc, an accuracy below A exits with 3.
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IMAGE_PIXELS (28 * 28)
#define NUM_CLASSES 10

/* Everything the program owns, so that any failure can free it all. */
static struct {
  dp_model* model;
  dp_netdef* init_def;
  dp_netdef* infer_def;
  dp_workspace* ws;
  dp_net* init;
  dp_net* infer;
  dp_tensor* images;
  dp_tensor* labels;
  float* x;
} app;

static void app_free(void) {
  dp_net_free(app.infer);
  dp_net_free(app.init);
  dp_workspace_free(app.ws);
  dp_netdef_free(app.infer_def);
  dp_netdef_free(app.init_def);
  dp_model_free(app.model);
  dp_tensor_free(app.images);
  dp_tensor_free(app.labels);
  free(app.x);
}

static void check(dp_status* s, const char* what) {
  if (s == NULL) return;
  fprintf(stderr, "onnx_infer: %s failed: [%s] %s\n", what, dp_status_code_name(dp_status_code(s)),
          dp_status_message(s));
  dp_status_free(s);
  app_free();
  exit(1);
}

static void die(const char* message, const char* detail) {
  fprintf(stderr, "onnx_infer: %s%s\n", message, detail);
  app_free();
  exit(1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(const char* argv0) {
  fprintf(stderr, "usage: %s MODEL.onnx [--data DIR] [--batch B] [--limit N] [--min-acc A] [--dump DIR]\n", argv0);
  exit(2);
}

/* The test images, standardised as train_fashion_mnist does, and labels. */
static size_t read_test_set(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
  check(dp_tensor_from_idx_file(path, &app.images), path);
  const int64_t* d = dp_tensor_dims(app.images);
  if (dp_tensor_dtype(app.images) != DP_DTYPE_UINT8 || dp_tensor_ndim(app.images) != 3 || d[1] != 28 || d[2] != 28)
    die("not a uint8 [N, 28, 28] image file: ", path);
  snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
  check(dp_tensor_from_idx_file(path, &app.labels), path);
  if (dp_tensor_dtype(app.labels) != DP_DTYPE_UINT8 || dp_tensor_ndim(app.labels) != 1 ||
      dp_tensor_dims(app.labels)[0] != d[0])
    die("not a uint8 label file [N] matching the images: ", path);
  const size_t n = (size_t)d[0];
  const uint8_t* px = dp_tensor_data(app.images);
  app.x = malloc(n * IMAGE_PIXELS * sizeof(float) + 1);
  if (app.x == NULL) die("out of memory", "");
  const float mean = 0.2860f, inv_std = 1.0f / 0.3530f;
  for (size_t i = 0; i < n * IMAGE_PIXELS; ++i) app.x[i] = ((float)px[i] * (1.0f / 255.0f) - mean) * inv_std;
  return n;
}

/* Writes `size` bytes to dir/name; 0 on failure. */
static int write_dump(const char* dir, const char* name, const void* data, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "wb");
  int ok = f != NULL && fwrite(data, 1, size, f) == size;
  if (f != NULL && fclose(f) != 0) ok = 0;
  return ok;
}

/* The first batch and every output of the model on it, with a manifest in
 * tests/onnx's format ("model NAME FILE OPSET"; opset 0: not checked). */
static void dump_first_batch(const char* dir, const char* model_path, const char* input, const int64_t* xd) {
  char manifest[8192], line[1024];
  int ok = write_dump(dir, "input.f32", app.x, (size_t)(xd[0] * IMAGE_PIXELS) * sizeof(float));
  snprintf(manifest, sizeof manifest, "model onnx_infer %s 0\ninput %s %lld,1,28,28 input.f32\n", model_path, input,
           (long long)xd[0]);
  for (size_t i = 0; ok && i < dp_netdef_num_external_outputs(app.infer_def); ++i) {
    const char* name = dp_netdef_external_output(app.infer_def, i);
    dp_tensor* t = NULL;
    char file[64];
    check(dp_workspace_fetch(app.ws, name, &t), name);
    snprintf(file, sizeof file, "output%zu.f32", i);
    ok = write_dump(dir, file, dp_tensor_data(t), dp_tensor_nbytes(t));
    snprintf(line, sizeof line, "output %s ", name);
    strncat(manifest, line, sizeof manifest - strlen(manifest) - 1);
    for (size_t k = 0; k < dp_tensor_ndim(t); ++k) {
      snprintf(line, sizeof line, "%s%lld", k > 0 ? "," : "", (long long)dp_tensor_dims(t)[k]);
      strncat(manifest, line, sizeof manifest - strlen(manifest) - 1);
    }
    snprintf(line, sizeof line, " %s\n", file);
    strncat(manifest, line, sizeof manifest - strlen(manifest) - 1);
    dp_tensor_free(t);
  }
  strncat(manifest, "end\n", sizeof manifest - strlen(manifest) - 1);
  if (!ok || !write_dump(dir, "manifest.txt", manifest, strlen(manifest))) die("cannot write the dump to ", dir);
}

int main(int argc, char** argv) {
  const char* data_dir = "/usr/share/datasets/fashion-mnist";
  const char* dump_dir = NULL;
  long batch = 1000, limit = -1;
  double min_acc = -1;
  if (argc < 2 || argv[1][0] == '-') usage(argv[0]);
  const char* model_path = argv[1];
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) usage(argv[0]);
    char* end = NULL;
    if (strcmp(argv[i], "--data") == 0) {
      data_dir = argv[i + 1];
    } else if (strcmp(argv[i], "--dump") == 0) {
      dump_dir = argv[i + 1];
    } else if (strcmp(argv[i], "--batch") == 0 || strcmp(argv[i], "--limit") == 0) {
      const long v = strtol(argv[i + 1], &end, 10);
      if (*end != '\0' || v < 1) usage(argv[0]);
      *(strcmp(argv[i], "--batch") == 0 ? &batch : &limit) = v;
    } else if (strcmp(argv[i], "--min-acc") == 0) {
      min_acc = strtod(argv[i + 1], &end);
      if (*end != '\0') usage(argv[0]);
    } else {
      usage(argv[0]);
    }
  }

  const double t0 = now_s();
  check(dp_model_from_onnx_file(model_path, NULL, &app.model), model_path);
  const double import_ms = (now_s() - t0) * 1e3;
  dp_string_list* inputs = NULL;
  dp_string_list* params = NULL;
  check(dp_model_blobs(app.model, DP_MODEL_INPUTS, &inputs), "dp_model_blobs");
  check(dp_model_blobs(app.model, DP_MODEL_PARAMS, &params), "dp_model_blobs");
  char input[256];
  snprintf(input, sizeof input, "%s", dp_string_list_size(inputs) > 0 ? dp_string_list_get(inputs, 0) : "");
  const size_t num_inputs = dp_string_list_size(inputs), num_params = dp_string_list_size(params);
  dp_string_list_free(inputs);
  dp_string_list_free(params);
  if (num_inputs != 1) die("the model must have one input (the images)", "");

  check(dp_model_net(app.model, DP_MODEL_INIT_NET, &app.init_def), "dp_model_net");
  check(dp_model_build_inference(app.model, NULL, 0, NULL, &app.infer_def), "dp_model_build_inference");
  check(dp_workspace_create(&app.ws), "dp_workspace_create");
  check(dp_net_create(app.ws, app.init_def, NULL, &app.init), "creating the init net");
  check(dp_net_run(app.init), "running the init net");
  check(dp_net_create(app.ws, app.infer_def, NULL, &app.infer), "creating the inference net");
  const size_t num_outputs = dp_netdef_num_external_outputs(app.infer_def);
  const char* scores = dp_netdef_external_output(app.infer_def, num_outputs - 1);
  printf("onnx_infer: %s imported in %.1f ms: %zu params, %zu inference ops, input '%s', scores '%s'\n", model_path,
         import_ms, num_params, dp_netdef_num_ops(app.infer_def), input, scores);

  size_t n = read_test_set(data_dir);
  if (limit > 0 && (size_t)limit < n) n = (size_t)limit;
  const uint8_t* labels = dp_tensor_data(app.labels);
  size_t correct = 0;
  const double t1 = now_s();
  for (size_t off = 0; off < n; off += (size_t)batch) {
    const size_t b = n - off < (size_t)batch ? n - off : (size_t)batch;
    const int64_t xd[4] = {(int64_t)b, 1, 28, 28};
    dp_tensor* x = NULL;
    check(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, xd, 4, app.x + off * IMAGE_PIXELS,
                                    b * IMAGE_PIXELS * sizeof(float), &x),
          "dp_tensor_create_borrowed (test images)");
    dp_status* s = dp_workspace_feed(app.ws, input, x);
    dp_tensor_free(x);
    check(s, "feeding the test images");
    check(dp_net_run(app.infer), "running the inference net");
    if (off == 0 && dump_dir != NULL) dump_first_batch(dump_dir, model_path, input, xd);
    dp_tensor* y = NULL;
    check(dp_workspace_fetch(app.ws, scores, &y), scores);
    if (dp_tensor_dtype(y) != DP_DTYPE_FLOAT32 || dp_tensor_ndim(y) != 2 || dp_tensor_dims(y)[0] != (int64_t)b ||
        dp_tensor_dims(y)[1] != NUM_CLASSES) {
      dp_tensor_free(y);
      die("the scores are not float32 [N, 10]: ", scores);
    }
    const float* p = dp_tensor_data(y);
    for (size_t i = 0; i < b; ++i) {
      int best = 0;
      for (int c = 1; c < NUM_CLASSES; ++c)
        if (p[i * NUM_CLASSES + (size_t)c] > p[i * NUM_CLASSES + (size_t)best]) best = c;
      correct += best == labels[off + i];
    }
    dp_tensor_free(y);
  }
  const double acc = n ? (double)correct / (double)n : 0.0;
  printf("test_acc=%.4f images=%zu images_per_s=%.1f\n", acc, n, (double)n / (now_s() - t1));
  app_free();
  if (min_acc >= 0 && !(acc >= min_acc)) {
    fprintf(stderr, "%s: test accuracy %.4f is below --min-acc %.4f\n", argv[0], acc, min_acc);
    return 3;
  }
  return 0;
}
