/*
 * ONNX models exported by PyTorch (tests/onnx/torch_models.py) through dp's
 * C API alone. For each model of the manifest:
 *   - import it (timed: "import_ms"), run its init net, then its inference
 *     net (dp_model_build_inference of the graph's outputs) on the inputs
 *     PyTorch ran, and compare each output with PyTorch's: the largest
 *     difference over the largest magnitude of PyTorch's output
 *     ("max_rel_err") must be at most --tol (1e-4);
 *   - export it (dp_model_to_onnx, the workspace's params) and import that
 *     again: the outputs must be the same bits;
 *   - with --export DIR, write the exported model, its inputs and dp's
 *     outputs there with a manifest of the same format, for
 *     tests/onnx/onnx_reference.py --check-manifest to run independently.
 * Usage: check_torch_models MANIFEST [--tol T] [--export DIR] [--only NAME]
 * Last line: "<passed> passed, <failed> failed".
 */
#define _POSIX_C_SOURCE 200809L
#include <dp/dp.h>

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../capi/check.h"

#define MAX_BLOBS 8
#define MAX_DIMS 8

typedef struct {
  char name[256];
  int64_t dims[MAX_DIMS];
  size_t ndim;
  char file[512];
} blob_spec;

typedef struct {
  char name[128];
  char onnx[512];
  int opset;
  blob_spec inputs[MAX_BLOBS];
  int num_inputs;
  blob_spec outputs[MAX_BLOBS];
  int num_outputs;
} model_spec;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* snprintf into `out`; a path that does not fit is an error (exits). */
static void format_path(char* out, size_t cap, const char* fmt, ...) {
  va_list args;
  int n;
  va_start(args, fmt);
  n = vsnprintf(out, cap, fmt, args);
  va_end(args);
  if (n < 0 || (size_t)n >= cap) {
    fprintf(stderr, "path too long: %s\n", out);
    exit(2);
  }
}

static int64_t numel_of(const blob_spec* b) {
  int64_t n = 1;
  size_t i;
  for (i = 0; i < b->ndim; ++i) n *= b->dims[i];
  return n;
}

static int parse_blob(char* rest, const char* dir, blob_spec* b) {
  char* name = strtok(rest, " \n");
  char* dims = strtok(NULL, " \n");
  char* file = strtok(NULL, " \n");
  char* d;
  if (name == NULL || dims == NULL || file == NULL) return 0;
  snprintf(b->name, sizeof b->name, "%s", name);
  format_path(b->file, sizeof b->file, "%s/%s", dir, file);
  b->ndim = 0;
  for (d = strtok(dims, ","); d != NULL && b->ndim < MAX_DIMS; d = strtok(NULL, ",")) b->dims[b->ndim++] = atoll(d);
  return 1;
}

/* The manifest's models (at most `cap`); its directory holds their files. */
static int read_manifest(const char* path, model_spec* models, int cap) {
  char dir[512], line[2048];
  const char* slash = strrchr(path, '/');
  int n = -1;
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "cannot open manifest %s: %s\n", path, strerror(errno));
    return -1;
  }
  format_path(dir, sizeof dir, "%.*s", slash != NULL ? (int)(slash - path) : 1, slash != NULL ? path : ".");
  while (fgets(line, sizeof line, f) != NULL) {
    char* kind = strtok(line, " \n");
    char* rest = kind != NULL ? kind + strlen(kind) + 1 : NULL;
    if (kind == NULL || strcmp(kind, "end") == 0) continue;
    if (strcmp(kind, "model") == 0 && n + 1 < cap) {
      model_spec* m = &models[++n];
      char* name = strtok(rest, " \n");
      char* file = strtok(NULL, " \n");
      char* opset = strtok(NULL, " \n");
      memset(m, 0, sizeof *m);
      if (name == NULL || file == NULL || opset == NULL) break;
      snprintf(m->name, sizeof m->name, "%s", name);
      format_path(m->onnx, sizeof m->onnx, "%s/%s", dir, file);
      m->opset = atoi(opset);
    } else if (n >= 0 && strcmp(kind, "input") == 0 && models[n].num_inputs < MAX_BLOBS) {
      if (!parse_blob(rest, dir, &models[n].inputs[models[n].num_inputs++])) break;
    } else if (n >= 0 && strcmp(kind, "output") == 0 && models[n].num_outputs < MAX_BLOBS) {
      if (!parse_blob(rest, dir, &models[n].outputs[models[n].num_outputs++])) break;
    }
  }
  fclose(f);
  return n + 1;
}

static float* read_floats(const char* path, int64_t count) {
  float* data = malloc((size_t)count * sizeof(float) + 1);
  FILE* f = fopen(path, "rb");
  size_t got = 0;
  if (f != NULL && data != NULL) {
    got = fread(data, sizeof(float), (size_t)count, f);
    fclose(f);
  }
  if (f == NULL || data == NULL || got != (size_t)count) {
    fprintf(stderr, "cannot read %lld floats from %s\n", (long long)count, path);
    free(data);
    return NULL;
  }
  return data;
}

static int write_bytes(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  int ok = f != NULL && fwrite(data, 1, size, f) == size;
  if (f != NULL && fclose(f) != 0) ok = 0;
  if (!ok) fprintf(stderr, "cannot write %s\n", path);
  return ok;
}

/* Runs `model` (init net, then the inference net of spec's outputs) on
 * spec's inputs in a new workspace, which it returns (NULL on failure);
 * outputs[i] receives a malloc'd copy of output i. */
static dp_workspace* run_model(const model_spec* spec, const dp_model* model, float** outputs) {
  dp_workspace* ws = NULL;
  dp_netdef *init = NULL, *inference = NULL;
  dp_net *init_net = NULL, *net = NULL;
  const char* names[MAX_BLOBS];
  int i, ok = 1;
  for (i = 0; i < spec->num_outputs; ++i) names[i] = spec->outputs[i].name;
  ok = EXPECT_OK(dp_workspace_create(&ws)) && EXPECT_OK(dp_model_net(model, DP_MODEL_INIT_NET, &init)) &&
       EXPECT_OK(dp_net_create(ws, init, NULL, &init_net)) && EXPECT_OK(dp_net_run(init_net)) &&
       EXPECT_OK(dp_model_build_inference(model, names, (size_t)spec->num_outputs, NULL, &inference));
  for (i = 0; ok && i < spec->num_inputs; ++i) {
    const blob_spec* b = &spec->inputs[i];
    float* data = read_floats(b->file, numel_of(b));
    dp_tensor* t = NULL;
    ok = data != NULL &&
         EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, b->dims, b->ndim, data, (size_t)numel_of(b) * 4, &t)) &&
         EXPECT_OK(dp_workspace_feed(ws, b->name, t));
    dp_tensor_free(t);
    free(data);
  }
  ok = ok && EXPECT_OK(dp_net_create(ws, inference, NULL, &net)) && EXPECT_OK(dp_net_run(net));
  for (i = 0; i < spec->num_outputs; ++i) outputs[i] = NULL;
  for (i = 0; ok && i < spec->num_outputs; ++i) {
    dp_tensor* t = NULL;
    ok = EXPECT_OK(dp_workspace_fetch(ws, spec->outputs[i].name, &t)) &&
         CHECK(dp_tensor_numel(t) == numel_of(&spec->outputs[i]));
    if (ok) {
      outputs[i] = malloc(dp_tensor_nbytes(t) + 1);
      ok = outputs[i] != NULL && EXPECT_OK(dp_tensor_copy_to(t, outputs[i], dp_tensor_nbytes(t)));
    }
    dp_tensor_free(t);
  }
  dp_net_free(net);
  dp_net_free(init_net);
  dp_netdef_free(inference);
  dp_netdef_free(init);
  if (!ok) {
    for (i = 0; i < spec->num_outputs; ++i) free(outputs[i]);
    dp_workspace_free(ws);
    return NULL;
  }
  return ws;
}

static double max_rel_err(const float* got, const float* want, int64_t n) {
  double diff = 0, scale = 0;
  int64_t i;
  for (i = 0; i < n; ++i) {
    const double d = fabs((double)got[i] - (double)want[i]);
    if (!(d <= diff)) diff = d; /* NaN sticks */
    if (fabs((double)want[i]) > scale) scale = fabs((double)want[i]);
  }
  return scale > 0 ? diff / scale : diff;
}

/* Writes the exported model, the inputs and dp's outputs under `dir`, and
 * appends its manifest record. */
static int export_files(const char* dir, FILE* manifest, const model_spec* spec, int opset, const dp_buffer* onnx,
                        float* const* outputs) {
  char path[1024];
  int i, ok;
  size_t d;
  format_path(path, sizeof path, "%s/%s.dp.onnx", dir, spec->name);
  ok = write_bytes(path, dp_buffer_data(onnx), dp_buffer_size(onnx));
  fprintf(manifest, "model %s %s.dp.onnx %d\n", spec->name, spec->name, opset);
  for (i = 0; ok && i < spec->num_inputs + spec->num_outputs; ++i) {
    const int is_input = i < spec->num_inputs;
    const blob_spec* b = is_input ? &spec->inputs[i] : &spec->outputs[i - spec->num_inputs];
    float* data = is_input ? read_floats(b->file, numel_of(b)) : outputs[i - spec->num_inputs];
    format_path(path, sizeof path, "%s/%s.%s%d.f32", dir, spec->name, is_input ? "in" : "out", i);
    ok = data != NULL && write_bytes(path, data, (size_t)numel_of(b) * 4);
    if (is_input) free(data);
    fprintf(manifest, "%s %s ", is_input ? "input" : "output", b->name);
    for (d = 0; d < b->ndim; ++d) fprintf(manifest, "%s%lld", d > 0 ? "," : "", (long long)b->dims[d]);
    fprintf(manifest, " %s.%s%d.f32\n", spec->name, is_input ? "in" : "out", i);
  }
  fprintf(manifest, "end\n");
  return ok;
}

static void check_model(const model_spec* spec, double tol, const char* export_dir, FILE* manifest) {
  dp_model *model = NULL, *again = NULL;
  dp_workspace *ws = NULL, *ws2 = NULL;
  dp_buffer* onnx = NULL;
  dp_onnx_export_options eo = DP_ONNX_EXPORT_OPTIONS_INIT;
  float* outputs[MAX_BLOBS] = {0};
  float* outputs2[MAX_BLOBS] = {0};
  const char* names[MAX_BLOBS];
  double start = now_ms(), import_ms = 0;
  int i;
  if (!EXPECT_OK(dp_model_from_onnx_file(spec->onnx, NULL, &model))) return;
  import_ms = now_ms() - start;
  ws = run_model(spec, model, outputs);
  if (ws == NULL) {
    dp_model_free(model);
    return;
  }
  for (i = 0; i < spec->num_outputs; ++i) {
    const blob_spec* b = &spec->outputs[i];
    float* want = read_floats(b->file, numel_of(b));
    const double err = want != NULL ? max_rel_err(outputs[i], want, numel_of(b)) : INFINITY;
    printf("%s opset %d: import_ms=%.1f output '%s' max_rel_err=%.3g\n", spec->name, spec->opset, import_ms, b->name,
           err);
    if (!CHECK(err <= tol)) fprintf(stderr, "%s: output '%s' is off by %.3g (relative)\n", spec->name, b->name, err);
    free(want);
    names[i] = b->name;
  }
  /* Exported and imported again: the same ops on the same params. */
  eo.outputs = names;
  eo.num_outputs = (size_t)spec->num_outputs;
  eo.opset = spec->opset < 11 ? 11 : spec->opset;
  if (EXPECT_OK(dp_model_to_onnx(model, ws, &eo, &onnx)) &&
      EXPECT_OK(dp_model_from_onnx_buffer(dp_buffer_data(onnx), dp_buffer_size(onnx), NULL, &again))) {
    ws2 = run_model(spec, again, outputs2);
    for (i = 0; ws2 != NULL && i < spec->num_outputs; ++i)
      if (!CHECK(memcmp(outputs[i], outputs2[i], (size_t)numel_of(&spec->outputs[i]) * 4) == 0))
        fprintf(stderr, "%s: output '%s' differs after an export and an import\n", spec->name, spec->outputs[i].name);
    if (export_dir != NULL) CHECK(export_files(export_dir, manifest, spec, eo.opset, onnx, outputs));
  }
  for (i = 0; i < spec->num_outputs; ++i) {
    free(outputs[i]);
    free(outputs2[i]);
  }
  dp_buffer_free(onnx);
  dp_workspace_free(ws2);
  dp_workspace_free(ws);
  dp_model_free(again);
  dp_model_free(model);
}

int main(int argc, char** argv) {
  static model_spec models[32];
  const char *export_dir = NULL, *only = NULL;
  double tol = 1e-4;
  FILE* manifest = NULL;
  int i, n;
  if (argc < 2) {
    fprintf(stderr, "usage: %s MANIFEST [--tol T] [--export DIR] [--only NAME]\n", argv[0]);
    return 2;
  }
  for (i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--tol") == 0) tol = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--export") == 0) export_dir = argv[i + 1];
    else if (strcmp(argv[i], "--only") == 0) only = argv[i + 1];
  }
  n = read_manifest(argv[1], models, 32);
  if (!CHECK(n > 0)) return check_report();
  if (export_dir != NULL) {
    char path[1024];
    format_path(path, sizeof path, "%s/manifest.txt", export_dir);
    manifest = fopen(path, "w");
    if (!CHECK(manifest != NULL)) return check_report();
  }
  for (i = 0; i < n; ++i)
    if (only == NULL || strcmp(only, models[i].name) == 0) check_model(&models[i], tol, export_dir, manifest);
  if (manifest != NULL) fclose(manifest);
  return check_report();
}
