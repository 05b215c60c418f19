/*
 * Test of dp's public C API (include/dp/dp.h), written in strict C11 so that
 * the header is checked to be valid C and the library is exercised exactly as
 * an embedding application would use it.
 *
 * Every check is counted; a failure prints file:line, the expression and the
 * status message. The last line of output is "<passed> passed, <failed>
 * failed" (counts of checks); the exit status is nonzero on any failure.
 *
 * Temporary files go to $DP_BUILD_ROOT (set by meson) or the current
 * directory, under names made unique per run, and are removed afterwards.
 */
#include <dp/dp.h>

#include "check.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Tiny deterministic generator for garbage inputs (numerical recipes LCG). */
static uint32_t g_lcg = 12345u;
static uint32_t lcg_next(void) {
  g_lcg = g_lcg * 1664525u + 1013904223u;
  return g_lcg >> 8;
}

static int near(double a, double b, double tol) { return fabs(a - b) <= tol * (1.0 + fabs(b)); }

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static dp_netdef* load_json(const char* json) {
  dp_netdef* def = NULL;
  if (!EXPECT_OK(dp_netdef_from_json(json, strlen(json), &def))) return NULL;
  return def;
}

static dp_workspace* new_workspace(void) {
  dp_workspace* ws = NULL;
  if (!EXPECT_OK(dp_workspace_create(&ws))) return NULL;
  return ws;
}

static dp_net* new_net(dp_workspace* ws, const char* json) {
  dp_net* net = NULL;
  dp_netdef* def = load_json(json);
  if (def == NULL) return NULL;
  if (!EXPECT_OK(dp_net_create(ws, def, NULL, &net))) net = NULL;
  dp_netdef_free(def);
  return net;
}

/* Feeds a float32 tensor copied from `data`. */
static int feed_floats(dp_workspace* ws, const char* name, const int64_t* dims, size_t ndim, const float* data) {
  dp_tensor* t = NULL;
  size_t n = 1, i;
  int ok;
  for (i = 0; i < ndim; ++i) n *= (size_t)dims[i];
  if (!EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, ndim, data, n * sizeof(float), &t))) return 0;
  ok = EXPECT_OK(dp_workspace_feed(ws, name, t));
  dp_tensor_free(t);
  return ok;
}

static char g_tmp_dir[1024];
static char g_tmp_prefix[1024];

/* Unique-per-run path for a temporary file named `leaf`. */
static const char* tmp_path(char* buf, size_t size, const char* leaf) {
  snprintf(buf, size, "%s_%s", g_tmp_prefix, leaf);
  return buf;
}

static int write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  size_t n;
  if (f == NULL) return 0;
  n = fwrite(data, 1, size, f);
  return fclose(f) == 0 && n == size;
}

static void init_tmp_prefix(void) {
  const char* dir = getenv("DP_BUILD_ROOT");
  int local = 0;
  if (dir == NULL || dir[0] == '\0') dir = ".";
  snprintf(g_tmp_dir, sizeof g_tmp_dir, "%s", dir);
  /* time, processor time and a stack address (randomised per process) keep
   * concurrent runs apart without POSIX getpid. */
  snprintf(g_tmp_prefix, sizeof g_tmp_prefix, "%s/test_capi_%lx_%lx_%lx", dir, (unsigned long)time(NULL),
           (unsigned long)clock(), (unsigned long)(uintptr_t)&local);
}

/* ------------------------------------------------------------------------ */
/* 1. Version and codes                                                      */
/* ------------------------------------------------------------------------ */

static void test_version(void) {
  char want[64];
  snprintf(want, sizeof want, "%d.%d.%d", DP_VERSION_MAJOR, DP_VERSION_MINOR, DP_VERSION_PATCH);
  CHECK(dp_version() != NULL);
  CHECK(strcmp(dp_version(), want) == 0);
  CHECK(dp_version_number() == (uint32_t)DP_VERSION_NUMBER);
  CHECK(DP_VERSION_NUMBER == DP_VERSION_MAJOR * 10000 + DP_VERSION_MINOR * 100 + DP_VERSION_PATCH);
}

static void test_code_names(void) {
  CHECK(strcmp(dp_status_code_name(DP_OK), "OK") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_NOT_FOUND), "NOT_FOUND") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_UNIMPLEMENTED), "UNIMPLEMENTED") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_UNAVAILABLE), "UNAVAILABLE") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_FAILED_PRECONDITION), "FAILED_PRECONDITION") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_IO), "IO") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_PARSE), "PARSE") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_INVALID_NET), "INVALID_NET") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_SHAPE), "SHAPE") == 0);
  CHECK(strcmp(dp_status_code_name(DP_ERR_DTYPE), "DTYPE") == 0);
  CHECK(strcmp(dp_status_code_name(1000), "UNKNOWN") == 0); /* far beyond any code likely to be added */
  CHECK(strcmp(dp_status_code_name(-1), "UNKNOWN") == 0);
  CHECK(strcmp(dp_status_code_name(INT32_MAX), "UNKNOWN") == 0);
  CHECK(strcmp(dp_status_code_name(INT32_MIN), "UNKNOWN") == 0);
}

/* ------------------------------------------------------------------------ */
/* 2. Status                                                                 */
/* ------------------------------------------------------------------------ */

static void test_status_null(void) {
  CHECK(dp_status_code(NULL) == DP_OK);
  CHECK(dp_status_message(NULL) != NULL);
  CHECK(strcmp(dp_status_message(NULL), "") == 0);
  dp_status_free(NULL);
}

/* ------------------------------------------------------------------------ */
/* 3. Logging                                                                */
/* ------------------------------------------------------------------------ */

typedef struct {
  int calls;
  int bad_level;
  int named_net; /* messages that name the net 'logged' */
} log_record;

static void log_cb(void* user_data, int32_t level, const char* message) {
  log_record* r = (log_record*)user_data;
  ++r->calls;
  if (level < DP_LOG_DEBUG || level > DP_LOG_ERROR || message == NULL) ++r->bad_level;
  if (message != NULL && strstr(message, "net 'logged'") != NULL) ++r->named_net;
}

static void create_logged_net(void) {
  const char* json = "{\"name\":\"logged\",\"ops\":[{\"type\":\"ConstantFill\",\"outputs\":[\"y\"]}]}";
  dp_workspace* ws = NULL;
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  EXPECT_OK(dp_workspace_create(&ws));
  EXPECT_OK(dp_netdef_from_json(json, strlen(json), &def));
  EXPECT_OK(dp_net_create(ws, def, NULL, &net));
  dp_net_free(net);
  dp_netdef_free(def);
  dp_workspace_free(ws);
}

static void test_logging(void) {
  /* Net creation logs at info level: the callback sees it at INFO, not at
   * WARNING; out-of-range levels are clamped; NULL restores stderr. */
  log_record rec = {0, 0, 0};
  dp_log_set_callback(log_cb, &rec, DP_LOG_INFO);
  create_logged_net();
  CHECK(rec.named_net == 1);
  dp_log_set_callback(log_cb, &rec, DP_LOG_WARNING);
  create_logged_net();
  CHECK(rec.named_net == 1);
  dp_log_set_callback(log_cb, &rec, -5); /* clamped to DEBUG */
  create_logged_net();
  CHECK(rec.named_net == 2);
  dp_log_set_callback(log_cb, &rec, 99); /* clamped to ERROR */
  create_logged_net();
  CHECK(rec.named_net == 2);
  dp_log_set_callback(NULL, NULL, DP_LOG_WARNING);
  create_logged_net();
  CHECK(rec.named_net == 2);
  CHECK(rec.bad_level == 0);
}

/* ------------------------------------------------------------------------ */
/* 4. Devices                                                                */
/* ------------------------------------------------------------------------ */

static void test_devices(void) {
  int32_t n = -7;
  EXPECT_OK(dp_device_count(DP_DEVICE_CPU, &n));
  CHECK(n == 1);
  n = -7;
  EXPECT_OK(dp_device_count(DP_DEVICE_CUDA, &n));
  CHECK(n >= 0);
  n = -7;
  EXPECT_ERR(dp_device_count(42, &n), DP_ERR_INVALID_ARGUMENT, "42");
  CHECK(n == -7);
  EXPECT_ERR(dp_device_count(-1, &n), DP_ERR_INVALID_ARGUMENT, "device_type");
  CHECK(n == -7);
  EXPECT_ERR(dp_device_count(DP_DEVICE_CPU, NULL), DP_ERR_INVALID_ARGUMENT, "out_count");
}

/* Per-device memory statistics: the host's count dp's own tensors; out is
 * written only within struct_size and untouched on failure. */
static void test_device_memory_stats(void) {
  dp_memory_stats before, during, after, other;
  const int64_t dims[1] = {25000};
  float* data = calloc(25000, sizeof(float));
  dp_tensor* t = NULL;
  int32_t cuda_devices = 0;
  char needle[32];
  memset(&before, 0, sizeof before);
  before.struct_size = sizeof before;
  during = after = other = before;
  CHECK(data != NULL);
  EXPECT_OK(dp_device_reset_peak_memory(DP_DEVICE_CPU, 0));
  EXPECT_OK(dp_device_memory_stats(DP_DEVICE_CPU, 0, &before));
  CHECK(before.struct_size == sizeof before);
  CHECK(before.reserved == before.allocated);
  CHECK(before.peak == before.allocated);
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, data, sizeof(float) * 25000, &t))) {
    EXPECT_OK(dp_device_memory_stats(DP_DEVICE_CPU, 0, &during));
    CHECK(during.allocated == before.allocated + 100000);
    CHECK(during.raw_allocs == before.raw_allocs + 1);
    EXPECT_OK(dp_device_memory_stats(DP_DEVICE_CPU, 2, &other)); /* every CPU replica is the host */
    CHECK(other.allocated == during.allocated && other.raw_allocs == during.raw_allocs);
    dp_tensor_free(t);
  }
  EXPECT_OK(dp_device_memory_stats(DP_DEVICE_CPU, 0, &after));
  CHECK(after.allocated == before.allocated);
  CHECK(after.peak == before.allocated + 100000);
  CHECK(after.raw_frees == before.raw_frees + 1);
  EXPECT_OK(dp_device_reset_peak_memory(DP_DEVICE_CPU, 0));
  EXPECT_OK(dp_device_memory_stats(DP_DEVICE_CPU, 0, &after));
  CHECK(after.peak == after.allocated);
  free(data);

  /* An older, shorter struct: only the fields it holds are written. */
  memset(&other, 0xAB, sizeof other);
  other.struct_size = (uint32_t)(offsetof(dp_memory_stats, allocated) + sizeof other.allocated);
  EXPECT_OK(dp_device_memory_stats(DP_DEVICE_CPU, 0, &other));
  CHECK(other.struct_size == offsetof(dp_memory_stats, allocated) + sizeof other.allocated);
  CHECK(other.peak == 0xABABABABABABABABull && other.raw_frees == 0xABABABABABABABABull);

  /* Bad arguments: statuses naming them, out untouched. */
  memset(&other, 0xCD, sizeof other);
  other.struct_size = sizeof other;
  EXPECT_ERR2(dp_device_memory_stats(42, 0, &other), DP_ERR_INVALID_ARGUMENT, "dp_device_memory_stats", "device_type");
  EXPECT_ERR2(dp_device_memory_stats(DP_DEVICE_CPU, -1, &other), DP_ERR_INVALID_ARGUMENT, "dp_device_memory_stats",
              "device_id");
  EXPECT_ERR(dp_device_memory_stats(DP_DEVICE_CPU, 0, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_OK(dp_device_count(DP_DEVICE_CUDA, &cuda_devices));
  snprintf(needle, sizeof needle, "cuda:%d", (int)cuda_devices);
  EXPECT_ERR2(dp_device_memory_stats(DP_DEVICE_CUDA, cuda_devices, &other), DP_ERR_UNAVAILABLE,
              "dp_device_memory_stats", needle);
  CHECK(other.allocated == 0xCDCDCDCDCDCDCDCDull && other.raw_allocs == 0xCDCDCDCDCDCDCDCDull);
  other.struct_size = 2;
  EXPECT_ERR(dp_device_memory_stats(DP_DEVICE_CPU, 0, &other), DP_ERR_INVALID_ARGUMENT, "struct_size");
  CHECK(other.allocated == 0xCDCDCDCDCDCDCDCDull);
  EXPECT_ERR2(dp_device_reset_peak_memory(-3, 0), DP_ERR_INVALID_ARGUMENT, "dp_device_reset_peak_memory",
              "device_type");
  EXPECT_ERR(dp_device_reset_peak_memory(DP_DEVICE_CUDA, -2), DP_ERR_INVALID_ARGUMENT, "device_id");
  EXPECT_ERR(dp_device_reset_peak_memory(DP_DEVICE_CUDA, cuda_devices), DP_ERR_UNAVAILABLE, needle);
}

/* ------------------------------------------------------------------------ */
/* 5. Tensors                                                                */
/* ------------------------------------------------------------------------ */

static void test_dtype_size(void) {
  CHECK(dp_dtype_size(DP_DTYPE_FLOAT32) == 4);
  CHECK(dp_dtype_size(DP_DTYPE_FLOAT16) == 2);
  CHECK(dp_dtype_size(DP_DTYPE_BFLOAT16) == 2);
  CHECK(dp_dtype_size(DP_DTYPE_FLOAT64) == 8);
  CHECK(dp_dtype_size(DP_DTYPE_INT32) == 4);
  CHECK(dp_dtype_size(DP_DTYPE_INT64) == 8);
  CHECK(dp_dtype_size(DP_DTYPE_UINT8) == 1);
  CHECK(dp_dtype_size(DP_DTYPE_BOOL) == 1);
  CHECK(dp_dtype_size(0) == 0);
  CHECK(dp_dtype_size(1000) == 0);
  CHECK(dp_dtype_size(-3) == 0);
}

static void test_tensor_copy(void) {
  int64_t dims[2] = {2, 3};
  float src[6] = {1, 2, 3, 4, 5, 6};
  float out[6];
  dp_tensor* t = NULL;
  const float* p;
  if (!EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 2, src, sizeof src, &t))) return;
  dims[0] = 99; /* the tensor keeps its own copy of the dims too */
  src[0] = -100.0f;
  CHECK(dp_tensor_dtype(t) == DP_DTYPE_FLOAT32);
  CHECK(dp_tensor_ndim(t) == 2);
  CHECK(dp_tensor_dims(t) != NULL && dp_tensor_dims(t)[0] == 2 && dp_tensor_dims(t)[1] == 3);
  CHECK(dp_tensor_numel(t) == 6);
  CHECK(dp_tensor_nbytes(t) == 6 * sizeof(float));
  p = (const float*)dp_tensor_data(t);
  CHECK(p != NULL && p != src);
  CHECK(p != NULL && p[0] == 1.0f && p[5] == 6.0f);
  memset(out, 0, sizeof out);
  EXPECT_OK(dp_tensor_copy_to(t, out, sizeof out));
  CHECK(out[0] == 1.0f && out[1] == 2.0f && out[5] == 6.0f);
  EXPECT_ERR2(dp_tensor_copy_to(t, out, sizeof out - 1), DP_ERR_SHAPE, "23", "24");
  EXPECT_ERR(dp_tensor_copy_to(t, out, sizeof out + 4), DP_ERR_SHAPE, "28");
  EXPECT_ERR(dp_tensor_copy_to(t, NULL, sizeof out), DP_ERR_INVALID_ARGUMENT, "dst");
  EXPECT_ERR(dp_tensor_copy_to(NULL, out, sizeof out), DP_ERR_INVALID_ARGUMENT, "tensor");
  dp_tensor_free(t);
}

static void test_tensor_zero_scalar_empty(void) {
  int64_t dims[3] = {2, 2, 2};
  int64_t empty_dims[2] = {0, 3};
  double value = 2.5;
  dp_tensor* t = NULL;
  size_t i;
  /* NULL data: zero-filled, nbytes ignored. */
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_INT64, dims, 3, NULL, 12345, &t))) {
    const int64_t* p = (const int64_t*)dp_tensor_data(t);
    int zero = p != NULL;
    for (i = 0; zero && i < 8; ++i) zero = p[i] == 0;
    CHECK(zero);
    CHECK(dp_tensor_numel(t) == 8 && dp_tensor_nbytes(t) == 64);
    dp_tensor_free(t);
  }
  /* Scalars: ndim 0, dims NULL, one element. */
  t = NULL;
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT64, NULL, 0, &value, sizeof value, &t))) {
    CHECK(dp_tensor_ndim(t) == 0);
    CHECK(dp_tensor_dims(t) == NULL);
    CHECK(dp_tensor_numel(t) == 1);
    CHECK(dp_tensor_nbytes(t) == sizeof(double));
    CHECK(dp_tensor_data(t) != NULL && *(const double*)dp_tensor_data(t) == 2.5);
    dp_tensor_free(t);
  }
  t = NULL;
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_BOOL, NULL, 0, NULL, 0, &t))) {
    CHECK(dp_tensor_numel(t) == 1 && dp_tensor_nbytes(t) == 1);
    CHECK(dp_tensor_data(t) != NULL && *(const uint8_t*)dp_tensor_data(t) == 0);
    dp_tensor_free(t);
  }
  /* Zero elements. */
  t = NULL;
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, empty_dims, 2, NULL, 0, &t))) {
    CHECK(dp_tensor_numel(t) == 0 && dp_tensor_nbytes(t) == 0 && dp_tensor_ndim(t) == 2);
    EXPECT_OK(dp_tensor_copy_to(t, NULL, 0));
    dp_tensor_free(t);
  }
  t = NULL;
  if (EXPECT_OK(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, empty_dims, 2, NULL, 0, &t))) {
    CHECK(dp_tensor_numel(t) == 0);
    dp_tensor_free(t);
  }
}

static void test_tensor_borrowed(void) {
  int64_t dims[1] = {4};
  int32_t data[4] = {1, 2, 3, 4};
  dp_tensor* t = NULL;
  if (!EXPECT_OK(dp_tensor_create_borrowed(DP_DTYPE_INT32, dims, 1, data, sizeof data, &t))) return;
  CHECK(dp_tensor_data(t) == (const void*)data);
  data[2] = 33; /* borrowed: the tensor sees the caller's memory */
  CHECK(((const int32_t*)dp_tensor_data(t))[2] == 33);
  CHECK(dp_tensor_dtype(t) == DP_DTYPE_INT32 && dp_tensor_numel(t) == 4);
  dp_tensor_free(t);
  CHECK(data[0] == 1 && data[3] == 4); /* freeing a borrowed tensor leaves the memory alone */
}

typedef struct {
  int calls;
  void* last;
} deleter_record;

static void counting_deleter(void* data, void* user_data) {
  deleter_record* r = (deleter_record*)user_data;
  ++r->calls;
  r->last = data;
  free(data);
}

static dp_tensor* new_owned(deleter_record* rec, float first) {
  int64_t dims[2] = {2, 2};
  float* mem = (float*)malloc(4 * sizeof(float));
  dp_tensor* t = NULL;
  if (mem == NULL) return NULL;
  mem[0] = first;
  mem[1] = mem[2] = mem[3] = 0.0f;
  if (!EXPECT_OK(dp_tensor_create_owned(DP_DTYPE_FLOAT32, dims, 2, mem, 4 * sizeof(float), counting_deleter, rec,
                                        &t))) {
    free(mem);
    return NULL;
  }
  CHECK(dp_tensor_data(t) == (const void*)mem);
  return t;
}

static void test_tensor_owned(void) {
  deleter_record rec = {0, NULL};
  dp_tensor* t;
  dp_tensor* fetched = NULL;
  dp_workspace* ws;
  const void* mem;
  static float no_deleter[2] = {1, 2};
  int64_t dims1[1] = {2};

  /* Freed with its handle. */
  t = new_owned(&rec, 1.0f);
  if (t == NULL) return;
  mem = dp_tensor_data(t);
  CHECK(rec.calls == 0);
  dp_tensor_free(t);
  CHECK(rec.calls == 1);
  CHECK(rec.last == mem);

  /* Fed: the workspace blob keeps the memory until the workspace goes. */
  rec.calls = 0;
  ws = new_workspace();
  t = new_owned(&rec, 2.0f);
  if (ws == NULL || t == NULL) {
    dp_tensor_free(t);
    dp_workspace_free(ws);
    return;
  }
  EXPECT_OK(dp_workspace_feed(ws, "owned", t));
  dp_tensor_free(t);
  CHECK(rec.calls == 0);
  dp_workspace_free(ws);
  CHECK(rec.calls == 1);

  /* Fed and fetched: the last of workspace and fetched handle frees it. */
  rec.calls = 0;
  ws = new_workspace();
  t = new_owned(&rec, 3.0f);
  if (ws == NULL || t == NULL) {
    dp_tensor_free(t);
    dp_workspace_free(ws);
    return;
  }
  EXPECT_OK(dp_workspace_feed(ws, "owned", t));
  dp_tensor_free(t);
  EXPECT_OK(dp_workspace_fetch(ws, "owned", &fetched));
  dp_workspace_free(ws);
  CHECK(rec.calls == 0);
  CHECK(fetched != NULL && ((const float*)dp_tensor_data(fetched))[0] == 3.0f);
  dp_tensor_free(fetched);
  CHECK(rec.calls == 1);

  /* Overwriting the blob with another feed releases it. */
  rec.calls = 0;
  ws = new_workspace();
  t = new_owned(&rec, 4.0f);
  if (ws == NULL || t == NULL) {
    dp_tensor_free(t);
    dp_workspace_free(ws);
    return;
  }
  EXPECT_OK(dp_workspace_feed(ws, "owned", t));
  dp_tensor_free(t);
  CHECK(rec.calls == 0);
  t = NULL;
  EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, NULL, 0, NULL, 0, &t));
  EXPECT_OK(dp_workspace_feed(ws, "owned", t));
  dp_tensor_free(t);
  CHECK(rec.calls == 1);
  dp_workspace_free(ws);
  CHECK(rec.calls == 1);

  /* A NULL deleter is allowed: nothing is called. */
  t = NULL;
  if (EXPECT_OK(dp_tensor_create_owned(DP_DTYPE_FLOAT32, dims1, 1, no_deleter, sizeof no_deleter, NULL, NULL, &t))) {
    CHECK(dp_tensor_data(t) == (const void*)no_deleter);
    dp_tensor_free(t);
  }
}

static void test_tensor_accessors_null(void) {
  CHECK(dp_tensor_dtype(NULL) == 0);
  CHECK(dp_tensor_ndim(NULL) == 0);
  CHECK(dp_tensor_dims(NULL) == NULL);
  CHECK(dp_tensor_numel(NULL) == 0);
  CHECK(dp_tensor_nbytes(NULL) == 0);
  CHECK(dp_tensor_data(NULL) == NULL);
  dp_tensor_free(NULL);
}

static void test_tensor_bad_inputs(void) {
  int64_t dims[2] = {2, 3};
  int64_t neg[2] = {2, -3};
  int64_t many[65];
  int64_t huge64[1];
  int64_t huge2[2];
  double buf[8];
  float fdata[6] = {0};
  deleter_record rec = {0, NULL};
  dp_tensor* t;
  size_t i;
  for (i = 0; i < 65; ++i) many[i] = 1;
  huge64[0] = (int64_t)1 << 61; /* 2^61 float64 elements: 2^64 bytes, wraps size_t to 0 */
  huge2[0] = (int64_t)1 << 40;
  huge2[1] = (int64_t)1 << 40;

  /* Unknown dtype. */
  t = SENTINEL;
  EXPECT_ERR2(dp_tensor_create(99, dims, 2, NULL, 0, &t), DP_ERR_DTYPE, "dtype", "99");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create(0, dims, 2, fdata, sizeof fdata, &t), DP_ERR_DTYPE, "dtype");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_borrowed(-1, dims, 2, fdata, sizeof fdata, &t), DP_ERR_DTYPE, "dtype");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_owned(99, dims, 2, fdata, sizeof fdata, counting_deleter, &rec, &t), DP_ERR_DTYPE,
             "dtype");
  CHECK(t == SENTINEL);

  /* Negative dimension. */
  t = SENTINEL;
  EXPECT_ERR2(dp_tensor_create(DP_DTYPE_FLOAT32, neg, 2, NULL, 0, &t), DP_ERR_SHAPE, "dims[1]", "-3");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, neg, 2, fdata, sizeof fdata, &t), DP_ERR_SHAPE, "-3");
  CHECK(t == SENTINEL);

  /* nbytes mismatch. */
  t = SENTINEL;
  EXPECT_ERR2(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 2, fdata, sizeof fdata - 4, &t), DP_ERR_SHAPE, "nbytes",
              "20");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, dims, 2, fdata, sizeof fdata + 4, &t), DP_ERR_SHAPE,
             "nbytes");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_owned(DP_DTYPE_FLOAT32, dims, 2, fdata, 1, counting_deleter, &rec, &t), DP_ERR_SHAPE,
             "nbytes");
  CHECK(t == SENTINEL);

  /* NULL dims with ndim > 0; too many dims. */
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create(DP_DTYPE_FLOAT32, NULL, 2, NULL, 0, &t), DP_ERR_INVALID_ARGUMENT, "dims");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, NULL, 1, fdata, 4, &t), DP_ERR_INVALID_ARGUMENT, "dims");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create(DP_DTYPE_UINT8, many, 65, NULL, 0, &t), DP_ERR_INVALID_ARGUMENT, "65");
  CHECK(t == SENTINEL);

  /* NULL out. */
  EXPECT_ERR(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 2, fdata, sizeof fdata, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, dims, 2, fdata, sizeof fdata, NULL),
             DP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(dp_tensor_create_owned(DP_DTYPE_FLOAT32, dims, 2, fdata, sizeof fdata, counting_deleter, &rec, NULL),
             DP_ERR_INVALID_ARGUMENT, "out");

  /* NULL data with a non-zero size for caller memory. */
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, dims, 2, NULL, sizeof fdata, &t), DP_ERR_INVALID_ARGUMENT,
             "data");
  CHECK(t == SENTINEL);

  /* Misaligned caller memory. */
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, dims, 2, (const char*)buf + 1, 6 * sizeof(float), &t),
             DP_ERR_INVALID_ARGUMENT, "aligned");
  CHECK(t == SENTINEL);
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_owned(DP_DTYPE_FLOAT64, dims, 2, (char*)buf + 4, 6 * sizeof(double), counting_deleter,
                                    &rec, &t),
             DP_ERR_INVALID_ARGUMENT, "aligned");
  CHECK(t == SENTINEL);
  /* A copy needs no alignment. */
  t = NULL;
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 2, (const char*)buf + 1, 6 * sizeof(float), &t)))
    dp_tensor_free(t);

  /* Element counts whose byte size overflows size_t must not wrap around. */
  t = SENTINEL;
  {
    dp_status* st = dp_tensor_create(DP_DTYPE_FLOAT64, huge64, 1, NULL, 0, &t);
    CHECK(st != NULL);
    CHECK(dp_status_code(st) == DP_ERR_SHAPE || dp_status_code(st) == DP_ERR_OUT_OF_MEMORY);
    CHECK(dp_status_message(st)[0] != '\0');
    dp_status_free(st);
    CHECK(t == SENTINEL);
    if (t != SENTINEL) dp_tensor_free(t);
  }
  t = SENTINEL;
  EXPECT_ERR(dp_tensor_create_borrowed(DP_DTYPE_FLOAT64, huge64, 1, NULL, 0, &t), DP_ERR_SHAPE, "does not fit");
  CHECK(t == SENTINEL);
  if (t != SENTINEL) dp_tensor_free(t);
  t = SENTINEL;
  {
    dp_status* st = dp_tensor_create(DP_DTYPE_FLOAT32, huge2, 2, NULL, 0, &t);
    CHECK(dp_status_code(st) == DP_ERR_SHAPE || dp_status_code(st) == DP_ERR_OUT_OF_MEMORY);
    dp_status_free(st);
    CHECK(t == SENTINEL);
  }

  /* Ownership stays with the caller on failure: the deleter never ran. */
  CHECK(rec.calls == 0);
}

/* ------------------------------------------------------------------------ */
/* 6. Workspaces                                                             */
/* ------------------------------------------------------------------------ */

static void test_workspace_blobs(void) {
  dp_workspace* ws = new_workspace();
  dp_string_list* list = SENTINEL;
  dp_tensor* t = NULL;
  dp_tensor* old = NULL;
  int64_t dims[1] = {2};
  float a[2] = {1, 2}, b[2] = {3, 4}, c[2] = {5, 6};
  int32_t has = -1;
  if (ws == NULL) return;

  EXPECT_OK(dp_workspace_has_blob(ws, "cpu_0/a", &has));
  CHECK(has == 0);
  /* Fed out of order; listing is sorted. */
  feed_floats(ws, "cpu_1/a", dims, 1, c);
  feed_floats(ws, "cpu_0/b", dims, 1, b);
  feed_floats(ws, "cpu_0/a", dims, 1, a);
  EXPECT_OK(dp_workspace_has_blob(ws, "cpu_0/a", &has));
  CHECK(has == 1);
  has = -1;
  EXPECT_OK(dp_workspace_has_blob(ws, "cpu_0/", &has));
  CHECK(has == 0);

  list = SENTINEL;
  if (EXPECT_OK(dp_workspace_list_blobs(ws, "cpu_0/", &list))) {
    CHECK(dp_string_list_size(list) == 2);
    CHECK(dp_string_list_get(list, 0) != NULL && strcmp(dp_string_list_get(list, 0), "cpu_0/a") == 0);
    CHECK(dp_string_list_get(list, 1) != NULL && strcmp(dp_string_list_get(list, 1), "cpu_0/b") == 0);
    CHECK(dp_string_list_get(list, 2) == NULL);
    CHECK(dp_string_list_get(list, (size_t)-1) == NULL);
    dp_string_list_free(list);
  }
  list = NULL;
  if (EXPECT_OK(dp_workspace_list_blobs(ws, NULL, &list))) {
    CHECK(dp_string_list_size(list) == 3);
    CHECK(strcmp(dp_string_list_get(list, 0), "cpu_0/a") == 0);
    CHECK(strcmp(dp_string_list_get(list, 2), "cpu_1/a") == 0);
    dp_string_list_free(list);
  }
  list = NULL;
  if (EXPECT_OK(dp_workspace_list_blobs(ws, "", &list))) {
    CHECK(dp_string_list_size(list) == 3);
    dp_string_list_free(list);
  }
  list = NULL;
  if (EXPECT_OK(dp_workspace_list_blobs(ws, "cpu_2/", &list))) {
    CHECK(dp_string_list_size(list) == 0);
    CHECK(dp_string_list_get(list, 0) == NULL);
    dp_string_list_free(list);
  }
  CHECK(dp_string_list_size(NULL) == 0);
  CHECK(dp_string_list_get(NULL, 0) == NULL);
  dp_string_list_free(NULL);

  /* Fetch shares the blob's data; a later feed does not change it. */
  if (EXPECT_OK(dp_workspace_fetch(ws, "cpu_0/b", &old))) {
    CHECK(dp_tensor_numel(old) == 2 && ((const float*)dp_tensor_data(old))[1] == 4.0f);
    feed_floats(ws, "cpu_0/b", dims, 1, c);
    CHECK(((const float*)dp_tensor_data(old))[0] == 3.0f && ((const float*)dp_tensor_data(old))[1] == 4.0f);
    if (EXPECT_OK(dp_workspace_fetch(ws, "cpu_0/b", &t))) {
      CHECK(((const float*)dp_tensor_data(t))[0] == 5.0f);
      dp_tensor_free(t);
    }
    dp_tensor_free(old);
  }

  /* Missing blob. */
  t = SENTINEL;
  EXPECT_ERR(dp_workspace_fetch(ws, "cpu_0/missing", &t), DP_ERR_NOT_FOUND, "cpu_0/missing");
  CHECK(t == SENTINEL);

  /* Bad names and NULL arguments. */
  t = NULL;
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, a, sizeof a, &t))) {
    EXPECT_ERR(dp_workspace_feed(ws, "", t), DP_ERR_INVALID_ARGUMENT, "empty");
    EXPECT_ERR(dp_workspace_feed(ws, NULL, t), DP_ERR_INVALID_ARGUMENT, "name");
    EXPECT_ERR(dp_workspace_feed(NULL, "x", t), DP_ERR_INVALID_ARGUMENT, "workspace");
    dp_tensor_free(t);
  }
  EXPECT_ERR(dp_workspace_feed(ws, "x", NULL), DP_ERR_INVALID_ARGUMENT, "tensor");
  has = -1;
  EXPECT_OK(dp_workspace_has_blob(ws, "x", &has));
  CHECK(has == 0);
  t = SENTINEL;
  EXPECT_ERR(dp_workspace_fetch(ws, "", &t), DP_ERR_NOT_FOUND, "''");
  CHECK(t == SENTINEL);
  EXPECT_ERR(dp_workspace_fetch(ws, NULL, &t), DP_ERR_INVALID_ARGUMENT, "name");
  EXPECT_ERR(dp_workspace_fetch(NULL, "cpu_0/a", &t), DP_ERR_INVALID_ARGUMENT, "workspace");
  EXPECT_ERR(dp_workspace_fetch(ws, "cpu_0/a", NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(t == SENTINEL);
  has = -1;
  EXPECT_ERR(dp_workspace_has_blob(NULL, "a", &has), DP_ERR_INVALID_ARGUMENT, "workspace");
  EXPECT_ERR(dp_workspace_has_blob(ws, NULL, &has), DP_ERR_INVALID_ARGUMENT, "name");
  EXPECT_ERR(dp_workspace_has_blob(ws, "a", NULL), DP_ERR_INVALID_ARGUMENT, "out_has");
  CHECK(has == -1);
  list = SENTINEL;
  EXPECT_ERR(dp_workspace_list_blobs(NULL, NULL, &list), DP_ERR_INVALID_ARGUMENT, "workspace");
  EXPECT_ERR(dp_workspace_list_blobs(ws, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(list == SENTINEL);
  EXPECT_ERR(dp_workspace_create(NULL), DP_ERR_INVALID_ARGUMENT, "out");
  dp_workspace_free(ws);
  dp_workspace_free(NULL);
}

/* ------------------------------------------------------------------------ */
/* 7. Net definitions                                                        */
/* ------------------------------------------------------------------------ */

/* Parameters of a two-layer perceptron: 4 inputs, 8 hidden units, 3 classes. */
static const char* kInitJson =
    "{\"name\":\"init\",\"ops\":["
    "{\"type\":\"XavierFill\",\"outputs\":[\"W1\"],\"args\":[{\"name\":\"shape\",\"ints\":[8,4]},"
    "{\"name\":\"seed\",\"i\":7}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"b1\"],\"args\":[{\"name\":\"shape\",\"ints\":[8]},"
    "{\"name\":\"value\",\"f\":0.125}]},"
    "{\"type\":\"XavierFill\",\"outputs\":[\"W2\"],\"args\":[{\"name\":\"shape\",\"ints\":[3,8]}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"b2\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]},"
    "{\"name\":\"value\",\"f\":-0.25}]}"
    "]}";

static const char* kMlpJson =
    "{\"name\":\"mlp\",\"external_inputs\":[\"data\",\"W1\",\"b1\",\"W2\",\"b2\"],"
    "\"external_outputs\":[\"prob\"],\"ops\":["
    "{\"type\":\"FC\",\"name\":\"fc1\",\"inputs\":[\"data\",\"W1\",\"b1\"],\"outputs\":[\"h\"]},"
    "{\"type\":\"Relu\",\"inputs\":[\"h\"],\"outputs\":[\"h\"]},"
    "{\"type\":\"FC\",\"name\":\"fc2\",\"inputs\":[\"h\",\"W2\",\"b2\"],\"outputs\":[\"logits\"]},"
    "{\"type\":\"Softmax\",\"inputs\":[\"logits\"],\"outputs\":[\"prob\"]}"
    "]}";

static void test_netdef_json_roundtrip(void) {
  dp_netdef* def = load_json(kMlpJson);
  dp_netdef* back = NULL;
  dp_buffer* json = SENTINEL;
  dp_buffer* json2 = NULL;
  if (def == NULL) return;
  CHECK(strcmp(dp_netdef_name(def), "mlp") == 0);
  CHECK(dp_netdef_num_ops(def) == 4);
  json = NULL;
  if (EXPECT_OK(dp_netdef_to_json(def, &json))) {
    const char* text = (const char*)dp_buffer_data(json);
    CHECK(text != NULL);
    CHECK(dp_buffer_size(json) > 0);
    CHECK(text != NULL && strlen(text) == dp_buffer_size(json)); /* NUL-terminated, size excludes it */
    CHECK(text != NULL && strstr(text, "fc2") != NULL && strstr(text, "Softmax") != NULL);
    if (EXPECT_OK(dp_netdef_from_json(text, dp_buffer_size(json), &back))) {
      CHECK(strcmp(dp_netdef_name(back), "mlp") == 0);
      CHECK(dp_netdef_num_ops(back) == 4);
      /* Printing is deterministic: the round trip prints the same text. */
      if (EXPECT_OK(dp_netdef_to_json(back, &json2))) {
        CHECK(dp_buffer_size(json2) == dp_buffer_size(json) &&
              memcmp(dp_buffer_data(json2), dp_buffer_data(json), dp_buffer_size(json)) == 0);
        dp_buffer_free(json2);
      }
      dp_netdef_free(back);
    }
    dp_buffer_free(json);
  }
  /* The JSON need not be NUL-terminated: only `size` bytes are read. */
  {
    size_t n = strlen(kMlpJson);
    char* copy = (char*)malloc(n);
    if (copy != NULL) {
      memcpy(copy, kMlpJson, n);
      back = NULL;
      if (EXPECT_OK(dp_netdef_from_json(copy, n, &back))) {
        CHECK(dp_netdef_num_ops(back) == 4);
        dp_netdef_free(back);
      }
      free(copy);
    }
  }
  /* An empty object is a valid, empty net. */
  back = NULL;
  if (EXPECT_OK(dp_netdef_from_json("{}", 2, &back))) {
    CHECK(strcmp(dp_netdef_name(back), "") == 0);
    CHECK(dp_netdef_num_ops(back) == 0);
    dp_netdef_free(back);
  }
  dp_netdef_free(def);
}

static void test_netdef_buffer_roundtrip(void) {
  dp_netdef* def = load_json(kMlpJson);
  dp_netdef* back = NULL;
  dp_buffer* buf = NULL;
  dp_buffer* buf2 = NULL;
  if (def == NULL) return;
  if (EXPECT_OK(dp_netdef_to_buffer(def, &buf))) {
    const unsigned char* bytes = (const unsigned char*)dp_buffer_data(buf);
    size_t size = dp_buffer_size(buf);
    CHECK(size > 8);
    CHECK(bytes != NULL && memcmp(bytes + 4, "DPNT", 4) == 0);
    if (EXPECT_OK(dp_netdef_from_buffer(bytes, size, &back))) {
      CHECK(strcmp(dp_netdef_name(back), "mlp") == 0);
      CHECK(dp_netdef_num_ops(back) == 4);
      if (EXPECT_OK(dp_netdef_to_buffer(back, &buf2))) {
        CHECK(dp_buffer_size(buf2) == size && memcmp(dp_buffer_data(buf2), bytes, size) == 0);
        dp_buffer_free(buf2);
      }
      dp_netdef_free(back);
    }
    /* Unaligned input is accepted. */
    {
      unsigned char* shifted = (unsigned char*)malloc(size + 1);
      if (shifted != NULL) {
        memcpy(shifted + 1, bytes, size);
        back = NULL;
        if (EXPECT_OK(dp_netdef_from_buffer(shifted + 1, size, &back))) {
          CHECK(dp_netdef_num_ops(back) == 4);
          dp_netdef_free(back);
        }
        free(shifted);
      }
    }
    dp_buffer_free(buf);
  }
  CHECK(dp_buffer_data(NULL) == NULL);
  CHECK(dp_buffer_size(NULL) == 0);
  dp_buffer_free(NULL);
  CHECK(strcmp(dp_netdef_name(NULL), "") == 0);
  CHECK(dp_netdef_num_ops(NULL) == 0);
  dp_netdef_free(NULL);
  dp_netdef_free(def);
}

static void test_netdef_files(void) {
  char json_path[1200], bin_path[1200], bad_path[1200], invalid_path[1200], missing_path[1200];
  dp_netdef* def = load_json(kMlpJson);
  dp_netdef* loaded;
  dp_buffer* buf = NULL;
  static const char bad_json[] = "{\"name\": \"x\", ";
  static const char invalid_json[] = "{\"ops\":[{\"type\":\"NoSuchOp\",\"outputs\":[\"y\"]}]}";
  if (def == NULL) return;
  tmp_path(json_path, sizeof json_path, "net.json");
  tmp_path(bin_path, sizeof bin_path, "net.dpnet");
  tmp_path(bad_path, sizeof bad_path, "bad.json");
  tmp_path(invalid_path, sizeof invalid_path, "invalid.json");
  tmp_path(missing_path, sizeof missing_path, "no_such_net.json");

  CHECK(write_file(json_path, kMlpJson, strlen(kMlpJson)));
  if (EXPECT_OK(dp_netdef_to_buffer(def, &buf))) {
    CHECK(write_file(bin_path, dp_buffer_data(buf), dp_buffer_size(buf)));
    dp_buffer_free(buf);
  }
  CHECK(write_file(bad_path, bad_json, strlen(bad_json)));
  CHECK(write_file(invalid_path, invalid_json, strlen(invalid_json)));

  loaded = NULL;
  if (EXPECT_OK(dp_netdef_from_file(json_path, &loaded))) {
    CHECK(dp_netdef_num_ops(loaded) == 4 && strcmp(dp_netdef_name(loaded), "mlp") == 0);
    dp_netdef_free(loaded);
  }
  loaded = NULL;
  if (EXPECT_OK(dp_netdef_from_file(bin_path, &loaded))) {
    CHECK(dp_netdef_num_ops(loaded) == 4 && strcmp(dp_netdef_name(loaded), "mlp") == 0);
    dp_netdef_free(loaded);
  }
  loaded = SENTINEL;
  EXPECT_ERR(dp_netdef_from_file(missing_path, &loaded), DP_ERR_NOT_FOUND, missing_path);
  CHECK(loaded == SENTINEL);
  /* FlatBuffers reports positions as "<line>: <column>: ". */
  EXPECT_ERR2(dp_netdef_from_file(bad_path, &loaded), DP_ERR_PARSE, bad_path, "1: 14: ");
  CHECK(loaded == SENTINEL);
  EXPECT_ERR3(dp_netdef_from_file(invalid_path, &loaded), DP_ERR_INVALID_NET, invalid_path, "NoSuchOp", "op 0");
  CHECK(loaded == SENTINEL);
  /* A directory cannot be read. */
  EXPECT_ERR2(dp_netdef_from_file(g_tmp_dir, &loaded), DP_ERR_IO, g_tmp_dir, "directory");
  CHECK(loaded == SENTINEL);
  EXPECT_ERR(dp_netdef_from_file(NULL, &loaded), DP_ERR_INVALID_ARGUMENT, "path");
  EXPECT_ERR(dp_netdef_from_file(json_path, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(loaded == SENTINEL);

  remove(json_path);
  remove(bin_path);
  remove(bad_path);
  remove(invalid_path);
  dp_netdef_free(def);
}

/* Cuts a valid buffer at every shorter length (into an exactly sized heap
 * block, so that memory checkers see any overread). Each must fail, except
 * that cutting only trailing alignment padding (zero bytes after the first
 * string the builder wrote) loses nothing: such a buffer must load as the
 * same net. */
static int is_zero(const unsigned char* p, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (p[i] != 0) return 0;
  return 1;
}

static void test_netdef_truncated_buffers(void) {
  dp_netdef* def = load_json(kMlpJson);
  dp_buffer* buf = NULL;
  size_t size, len;
  int all_parse = 1, all_untouched = 1, all_messages = 1;
  if (def == NULL) return;
  if (!EXPECT_OK(dp_netdef_to_buffer(def, &buf))) {
    dp_netdef_free(def);
    return;
  }
  size = dp_buffer_size(buf);
  for (len = 0; len < size; ++len) {
    unsigned char* cut = (unsigned char*)malloc(len ? len : 1);
    dp_netdef* out = SENTINEL;
    dp_status* st;
    if (cut == NULL) break;
    memcpy(cut, dp_buffer_data(buf), len);
    st = dp_netdef_from_buffer(cut, len, &out);
    if (st == NULL && out != SENTINEL && len + 4 > size &&
        is_zero((const unsigned char*)dp_buffer_data(buf) + len, size - len)) {
      dp_buffer* again = NULL;
      if (!EXPECT_OK(dp_netdef_to_buffer(out, &again)) || dp_buffer_size(again) != size ||
          memcmp(dp_buffer_data(again), dp_buffer_data(buf), size) != 0)
        all_parse = 0;
      dp_buffer_free(again);
      dp_netdef_free(out);
      out = SENTINEL;
    } else if (dp_status_code(st) != DP_ERR_PARSE) {
      fprintf(stderr, "truncated to %zu of %zu bytes: %s: %s\n", len, size, dp_status_code_name(dp_status_code(st)),
              dp_status_message(st));
      all_parse = 0;
    }
    if (st != NULL && dp_status_message(st)[0] == '\0') all_messages = 0;
    if (out != SENTINEL) {
      all_untouched = 0;
      if (st == NULL) dp_netdef_free(out);
    }
    dp_status_free(st);
    free(cut);
  }
  CHECK(all_parse);
  CHECK(all_messages);
  CHECK(all_untouched);
  EXPECT_ERR(dp_netdef_from_buffer(NULL, size, &def), DP_ERR_INVALID_ARGUMENT, "data");
  EXPECT_ERR(dp_netdef_from_buffer(NULL, 0, &def), DP_ERR_PARSE, "empty"); /* zero bytes: an empty input */
  EXPECT_ERR(dp_netdef_from_buffer(dp_buffer_data(buf), size, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(dp_netdef_from_buffer(dp_buffer_data(buf), 3, &def), DP_ERR_PARSE, "3 bytes");
  dp_buffer_free(buf);
  dp_netdef_free(def);
}

static void test_netdef_garbage_buffers(void) {
  int iter, all_failed = 1, all_parse = 1;
  g_lcg = 20240601u;
  for (iter = 0; iter < 400; ++iter) {
    size_t len = 8 + lcg_next() % 512, i;
    unsigned char* bytes = (unsigned char*)malloc(len);
    dp_netdef* out = SENTINEL;
    dp_status* st;
    if (bytes == NULL) break;
    for (i = 0; i < len; ++i) bytes[i] = (unsigned char)lcg_next();
    if (iter % 2 == 1) memcpy(bytes + 4, "DPNT", 4); /* get past the identifier check */
    if (iter % 4 == 3) {
      /* A plausible root offset too. */
      bytes[0] = (unsigned char)(8 + lcg_next() % 32);
      bytes[1] = bytes[2] = bytes[3] = 0;
    }
    st = dp_netdef_from_buffer(bytes, len, &out);
    if (st == NULL) {
      all_failed = 0;
      dp_netdef_free(out);
    } else if (dp_status_code(st) != DP_ERR_PARSE || dp_status_message(st)[0] == '\0') {
      fprintf(stderr, "garbage buffer %d: %s: %s\n", iter, dp_status_code_name(dp_status_code(st)),
              dp_status_message(st));
      all_parse = 0;
    }
    dp_status_free(st);
    free(bytes);
  }
  CHECK(all_failed);
  CHECK(all_parse);
  /* Text that is not a dp buffer names the missing identifier. */
  {
    static const char not_dp[] = "0123456789abcdef";
    dp_netdef* out = SENTINEL;
    EXPECT_ERR(dp_netdef_from_buffer(not_dp, sizeof not_dp - 1, &out), DP_ERR_PARSE, "DPNT");
    CHECK(out == SENTINEL);
  }
}

/* Flips every bit of a valid buffer in turn: each result either loads (and
 * then serialises again) or fails with a parse or validation status. */
static void test_netdef_bit_flips(void) {
  dp_netdef* def = load_json(kMlpJson);
  dp_buffer* buf = NULL;
  size_t size, byte;
  int bit, all_sane = 1, loaded = 0, failed = 0;
  unsigned char* copy;
  if (def == NULL) return;
  if (!EXPECT_OK(dp_netdef_to_buffer(def, &buf))) {
    dp_netdef_free(def);
    return;
  }
  size = dp_buffer_size(buf);
  copy = (unsigned char*)malloc(size);
  if (copy != NULL) {
    for (byte = 0; byte < size; ++byte) {
      for (bit = 0; bit < 8; ++bit) {
        dp_netdef* out = SENTINEL;
        dp_status* st;
        memcpy(copy, dp_buffer_data(buf), size);
        copy[byte] ^= (unsigned char)(1u << bit);
        st = dp_netdef_from_buffer(copy, size, &out);
        if (st == NULL) {
          dp_buffer* again = NULL;
          dp_status* st2 = dp_netdef_to_buffer(out, &again);
          ++loaded;
          if (st2 != NULL || out == SENTINEL) all_sane = 0;
          dp_status_free(st2);
          dp_buffer_free(again);
          dp_netdef_free(out);
        } else {
          int32_t code = dp_status_code(st);
          ++failed;
          if ((code != DP_ERR_PARSE && code != DP_ERR_INVALID_NET) || dp_status_message(st)[0] == '\0' ||
              out != SENTINEL) {
            fprintf(stderr, "bit %d of byte %zu: %s: %s\n", bit, byte, dp_status_code_name(code),
                    dp_status_message(st));
            all_sane = 0;
          }
          dp_status_free(st);
        }
      }
    }
    free(copy);
  }
  CHECK(all_sane);
  CHECK(loaded > 0); /* e.g. flips inside blob names */
  CHECK(failed > 0); /* e.g. flips in the identifier */
  dp_buffer_free(buf);
  dp_netdef_free(def);
}

/* Every proper prefix of a JSON net lacks its closing brace. */
static void test_netdef_truncated_json(void) {
  size_t n = strlen(kMlpJson), len;
  int all_parse = 1;
  for (len = 0; len < n; ++len) {
    char* cut = (char*)malloc(len ? len : 1);
    dp_netdef* out = SENTINEL;
    dp_status* st;
    if (cut == NULL) break;
    memcpy(cut, kMlpJson, len);
    st = dp_netdef_from_json(cut, len, &out);
    if (dp_status_code(st) != DP_ERR_PARSE || out != SENTINEL || dp_status_message(st)[0] == '\0') {
      fprintf(stderr, "JSON cut at %zu: %s: %s\n", len, dp_status_code_name(dp_status_code(st)), dp_status_message(st));
      all_parse = 0;
      if (st == NULL) dp_netdef_free(out);
    }
    dp_status_free(st);
    free(cut);
  }
  CHECK(all_parse);
}

/* Loads `json` expecting `code`, a message containing s1 and s2 (if non-NULL)
 * and an untouched out-parameter. */
static void expect_bad_json(const char* file, int line, const char* json, int32_t code, const char* s1,
                            const char* s2) {
  dp_netdef* out = SENTINEL;
  if (!expect_status(file, line, json, dp_netdef_from_json(json, strlen(json), &out), code, s1, s2, NULL)) return;
  if (!check_impl(out == SENTINEL, "out-parameter untouched", file, line) && out != NULL) dp_netdef_free(out);
}
#define EXPECT_BAD_JSON(json, code, s1, s2) expect_bad_json(__FILE__, __LINE__, (json), (code), (s1), (s2))

static void test_netdef_bad_json(void) {
  dp_netdef* out = SENTINEL;
  static const char with_nul[] = "{\"name\":\"a\0b\"}";
  /* Syntax. */
  /* A missing closing brace; positions are "<line>: <column>: ". */
  EXPECT_BAD_JSON("{\"name\":\"t\",\"ops\":[]", DP_ERR_PARSE, "1: 20: ", "end of file");
  EXPECT_BAD_JSON("{\"name\":\"t\",\n\"ops\":[{\"type\":\"Relu\" \"inputs\":[]}]}", DP_ERR_PARSE, "2: 30: ", NULL);
  EXPECT_BAD_JSON("", DP_ERR_PARSE, NULL, NULL);
  EXPECT_BAD_JSON("[1,2,3]", DP_ERR_PARSE, NULL, NULL);
  EXPECT_BAD_JSON("{\"name\":\"t\"} trailing", DP_ERR_PARSE, NULL, NULL);
  EXPECT_ERR(dp_netdef_from_json(with_nul, sizeof with_nul - 1, &out), DP_ERR_PARSE, "NUL");
  CHECK(out == SENTINEL);
  /* Schema. */
  EXPECT_BAD_JSON("{\"name\":\"t\",\"bogus_field\":1}", DP_ERR_PARSE, "bogus_field", NULL);
  EXPECT_BAD_JSON("{\"ops\":[{\"type\":\"Relu\",\"colour\":\"red\"}]}", DP_ERR_PARSE, "colour", NULL);
  EXPECT_BAD_JSON("{\"ops\":[{\"inputs\":[],\"outputs\":[\"y\"]}]}", DP_ERR_PARSE, "type", NULL);
  EXPECT_BAD_JSON("{\"name\":5}", DP_ERR_PARSE, NULL, NULL);
  EXPECT_BAD_JSON("{\"device\":{\"type\":\"TPU\"}}", DP_ERR_PARSE, "TPU", NULL);
  EXPECT_BAD_JSON("{\"schema_version\":2}", DP_ERR_PARSE, "version 2", NULL);
  EXPECT_BAD_JSON("{\"num_workers\":-1}", DP_ERR_PARSE, "num_workers", NULL);
  EXPECT_BAD_JSON("{\"device\":{\"type\":\"CPU\",\"id\":-1}}", DP_ERR_PARSE, "device id", NULL);
  /* Arguments set exactly one value. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                  "\"args\":[{\"name\":\"scale\",\"f\":2,\"i\":3}]}]}",
                  DP_ERR_PARSE, "'scale'", "exactly one");
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                  "\"args\":[{\"name\":\"scale\"}]}]}",
                  DP_ERR_PARSE, "'scale'", "op 0");
  EXPECT_BAD_JSON("{\"ops\":[{\"type\":\"ConstantFill\",\"outputs\":[\"y\"],\"args\":[{\"f\":1}]}]}", DP_ERR_PARSE,
                  "name", NULL);
  /* NULL arguments. */
  EXPECT_ERR(dp_netdef_from_json(NULL, 4, &out), DP_ERR_INVALID_ARGUMENT, "json");
  EXPECT_ERR(dp_netdef_from_json("{}", 2, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(dp_netdef_from_json(NULL, 0, &out), DP_ERR_PARSE, NULL);
  CHECK(out == SENTINEL);
}

static void test_netdef_invalid_nets(void) {
  /* Unknown operator type. */
  EXPECT_BAD_JSON("{\"name\":\"t\",\"external_inputs\":[\"x\"],"
                  "\"ops\":[{\"type\":\"Frobnicate\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}",
                  DP_ERR_INVALID_NET, "Frobnicate", "op 0");
  /* The op index is counted. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]},"
                  "{\"type\":\"Frobnicate\",\"name\":\"frob\",\"inputs\":[\"y\"],\"outputs\":[\"z\"]}]}",
                  DP_ERR_INVALID_NET, "op 1", "'frob'");
  EXPECT_BAD_JSON("{\"ops\":[{\"type\":\"\",\"outputs\":[\"y\"]}]}", DP_ERR_INVALID_NET, "op 0", "empty");
  /* Wrong arity. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\",\"w\"],"
                  "\"ops\":[{\"type\":\"FC\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"]}]}",
                  DP_ERR_INVALID_NET, "FC", "got 2");
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[]}]}",
                  DP_ERR_INVALID_NET, "Relu", "outputs");
  /* No operator schema has a required argument today (none is declared with
   * required=true), so that rule cannot be exercised through the C API. */
  /* In place where the schema forbids it. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\",\"w\",\"b\"],"
                  "\"ops\":[{\"type\":\"FC\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"x\"]}]}",
                  DP_ERR_INVALID_NET, "'x'", "in place");
  /* An op writing one blob twice. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\",\"l\"],"
                  "\"ops\":[{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"x\",\"l\"],\"outputs\":[\"p\",\"p\"]}]}",
                  DP_ERR_INVALID_NET, "'p'", "twice");
  /* Input never produced. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],"
                  "\"ops\":[{\"type\":\"Add\",\"inputs\":[\"x\",\"ghost\"],\"outputs\":[\"y\"]}]}",
                  DP_ERR_INVALID_NET, "'ghost'", "op 0");
  EXPECT_BAD_JSON("{\"ops\":[{\"type\":\"Relu\",\"inputs\":[\"\"],\"outputs\":[\"y\"]}]}", DP_ERR_INVALID_NET,
                  "empty", NULL);
  /* A cycle: op 0 reads what op 1 writes. */
  EXPECT_BAD_JSON("{\"name\":\"cyc\",\"ops\":[{\"type\":\"Relu\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]},"
                  "{\"type\":\"Relu\",\"inputs\":[\"b\"],\"outputs\":[\"a\"]}]}",
                  DP_ERR_INVALID_NET, "cycle", "'a'");
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                  "\"control_inputs\":[\"z\"]},{\"type\":\"Relu\",\"inputs\":[\"y\"],\"outputs\":[\"z\"]}]}",
                  DP_ERR_INVALID_NET, "cycle", "control input");
  /* External output nobody writes. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"external_outputs\":[\"nobody\"]}", DP_ERR_INVALID_NET, "'nobody'",
                  NULL);
  /* No operator takes a nested net yet, so nested validation (test_netdef) cannot be reached from C: the op's
   * schema refuses the argument first. */
  EXPECT_BAD_JSON("{\"ops\":[{\"type\":\"ConstantFill\",\"outputs\":[\"y\"],\"args\":[{\"name\":\"body\","
                  "\"net\":{\"ops\":[{\"type\":\"Nope\",\"outputs\":[\"q\"]}]}}]}]}",
                  DP_ERR_INVALID_ARGUMENT, "unknown argument 'body'", "ConstantFill");
}

/* Arguments are checked against the op's schema when a net is loaded: a
 * misspelt one used to load and be ignored (a Scale by "scael" scaled by 1). */
static void test_netdef_unknown_args(void) {
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                  "\"args\":[{\"name\":\"scael\",\"f\":2}]}]}",
                  DP_ERR_INVALID_ARGUMENT, "unknown argument 'scael'", "did you mean 'scale'");
  /* Of the wrong kind. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                  "\"args\":[{\"name\":\"scale\",\"ints\":[2]}]}]}",
                  DP_ERR_INVALID_ARGUMENT, "'scale'", "must be a float, got ints");
  /* Given twice. */
  EXPECT_BAD_JSON("{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
                  "\"args\":[{\"name\":\"scale\",\"f\":2},{\"name\":\"scale\",\"f\":3}]}]}",
                  DP_ERR_INVALID_ARGUMENT, "'scale'", "twice");
}

/* ------------------------------------------------------------------------ */
/* 8. Nets                                                                   */
/* ------------------------------------------------------------------------ */

enum { kBatch = 3, kIn = 4, kHidden = 8, kOut = 3 };

/* Fetches a float32 blob with the expected element count into dst. */
static int fetch_floats(dp_workspace* ws, const char* name, float* dst, int64_t numel) {
  dp_tensor* t = NULL;
  int ok;
  if (!EXPECT_OK(dp_workspace_fetch(ws, name, &t))) return 0;
  ok = CHECK(dp_tensor_dtype(t) == DP_DTYPE_FLOAT32) && CHECK(dp_tensor_numel(t) == numel);
  if (ok) ok = EXPECT_OK(dp_tensor_copy_to(t, dst, (size_t)numel * sizeof(float)));
  dp_tensor_free(t);
  return ok;
}

/* softmax(relu(x W1^T + b1) W2^T + b2), in double. */
static void reference_mlp(const float* x, const float* w1, const float* b1, const float* w2, const float* b2,
                          double* prob) {
  int r, i, j;
  for (r = 0; r < kBatch; ++r) {
    double h[kHidden], logits[kOut], mx, sum = 0;
    for (j = 0; j < kHidden; ++j) {
      double s = b1[j];
      for (i = 0; i < kIn; ++i) s += (double)x[r * kIn + i] * w1[j * kIn + i];
      h[j] = s > 0 ? s : 0;
    }
    for (j = 0; j < kOut; ++j) {
      double s = b2[j];
      for (i = 0; i < kHidden; ++i) s += h[i] * w2[j * kHidden + i];
      logits[j] = s;
    }
    mx = logits[0];
    for (j = 1; j < kOut; ++j) mx = logits[j] > mx ? logits[j] : mx;
    for (j = 0; j < kOut; ++j) sum += exp(logits[j] - mx);
    for (j = 0; j < kOut; ++j) prob[r * kOut + j] = exp(logits[j] - mx) / sum;
  }
}

static int check_prob(dp_workspace* ws, const float* x, const float* params[4], float* got) {
  double want[kBatch * kOut];
  int r, j, rows_ok = 1, match = 1;
  if (!fetch_floats(ws, "prob", got, kBatch * kOut)) return 0;
  reference_mlp(x, params[0], params[1], params[2], params[3], want);
  for (r = 0; r < kBatch; ++r) {
    double sum = 0;
    for (j = 0; j < kOut; ++j) {
      sum += got[r * kOut + j];
      if (!near(got[r * kOut + j], want[r * kOut + j], 1e-5)) match = 0;
    }
    if (!near(sum, 1.0, 1e-5)) rows_ok = 0;
  }
  return CHECK(rows_ok) && CHECK(match);
}

static void test_net_mlp(void) {
  static const int64_t x_dims[2] = {kBatch, kIn};
  static const int64_t bad_dims[2] = {kBatch, kIn + 1};
  float x[kBatch * kIn], x2[kBatch * kIn], bad[kBatch * (kIn + 1)];
  float w1[kHidden * kIn], b1[kHidden], w2[kOut * kHidden], b2[kOut];
  const float* params[4];
  float prob1[kBatch * kOut], prob2[kBatch * kOut], prob3[kBatch * kOut], saved[kBatch * kOut];
  int32_t xi[kBatch * kIn];
  dp_workspace* ws = new_workspace();
  dp_net* init = NULL;
  dp_net* mlp = NULL;
  dp_tensor* t = NULL;
  dp_tensor* before = NULL;
  int i, differs;
  if (ws == NULL) return;
  for (i = 0; i < kBatch * kIn; ++i) {
    x[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    x2[i] = -x[i] * 1.5f + 0.25f;
    xi[i] = i;
  }
  for (i = 0; i < kBatch * (kIn + 1); ++i) bad[i] = 0.5f;
  params[0] = w1;
  params[1] = b1;
  params[2] = w2;
  params[3] = b2;

  init = new_net(ws, kInitJson);
  mlp = new_net(ws, kMlpJson);
  if (init == NULL || mlp == NULL) goto done;

  /* External input never fed. */
  EXPECT_ERR3(dp_net_run(mlp), DP_ERR_NOT_FOUND, "'data'", "mlp", "never fed");
  EXPECT_OK(dp_net_run(init));
  if (!fetch_floats(ws, "W1", w1, kHidden * kIn) || !fetch_floats(ws, "b1", b1, kHidden) ||
      !fetch_floats(ws, "W2", w2, kOut * kHidden) || !fetch_floats(ws, "b2", b2, kOut))
    goto done;
  CHECK(b1[0] == 0.125f && b1[kHidden - 1] == 0.125f && b2[2] == -0.25f);
  {
    /* Xavier: within +-sqrt(3 / fan_in), and not all equal. */
    double s = sqrt(3.0 / kIn);
    int in_range = 1;
    for (i = 0; i < kHidden * kIn; ++i) in_range = in_range && fabs(w1[i]) <= s + 1e-6;
    CHECK(in_range);
    CHECK(w1[0] != w1[1] || w1[1] != w1[2]);
  }

  if (!feed_floats(ws, "data", x_dims, 2, x)) goto done;
  EXPECT_OK(dp_net_run(mlp));
  check_prob(ws, x, params, prob1);
  /* Nets run again, with the same result. */
  EXPECT_OK(dp_net_run(mlp));
  check_prob(ws, x, params, prob2);
  CHECK(memcmp(prob1, prob2, sizeof prob1) == 0);

  /* A fetched tensor keeps its values when a later run rewrites the blob. */
  if (EXPECT_OK(dp_workspace_fetch(ws, "prob", &before))) {
    memcpy(saved, dp_tensor_data(before), sizeof saved);
    if (feed_floats(ws, "data", x_dims, 2, x2)) {
      EXPECT_OK(dp_net_run(mlp));
      check_prob(ws, x2, params, prob3);
      CHECK(memcmp(dp_tensor_data(before), saved, sizeof saved) == 0);
      differs = memcmp(prob3, saved, sizeof saved) != 0;
      CHECK(differs);
    }
    dp_tensor_free(before);
  }

  /* Wrong dtype fed: the error names the op, its type and the blob. */
  t = NULL;
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, x_dims, 2, xi, sizeof xi, &t))) {
    EXPECT_OK(dp_workspace_feed(ws, "data", t));
    dp_tensor_free(t);
    EXPECT_ERR3(dp_net_run(mlp), DP_ERR_DTYPE, "op 0", "FC", "'data'");
  }
  /* Wrong feature count. */
  if (feed_floats(ws, "data", bad_dims, 2, bad)) EXPECT_ERR3(dp_net_run(mlp), DP_ERR_SHAPE, "op 0", "FC", "'data'");
  /* Wrong weight shape, in the second FC. */
  if (feed_floats(ws, "data", x_dims, 2, x) && feed_floats(ws, "b2", x_dims, 2, x)) {
    EXPECT_ERR3(dp_net_run(mlp), DP_ERR_SHAPE, "op 2", "fc2", "'b2'");
    EXPECT_OK(dp_net_run(init));
  }
  /* The net still works after errors. */
  if (feed_floats(ws, "data", x_dims, 2, x)) {
    EXPECT_OK(dp_net_run(mlp));
    check_prob(ws, x, params, prob3);
    CHECK(memcmp(prob1, prob3, sizeof prob1) == 0);
  }

done:
  dp_net_free(init);
  dp_net_free(mlp);
  dp_workspace_free(ws);
}

/* dp never writes into caller memory, even for an in-place op. */
static void test_net_borrowed_input_not_written(void) {
  static const char* json =
      "{\"name\":\"inplace\",\"external_inputs\":[\"x\"],\"ops\":["
      "{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"x\"]},"
      "{\"type\":\"Scale\",\"inputs\":[\"x\"],\"outputs\":[\"x\"],\"args\":[{\"name\":\"scale\",\"f\":2}]}]}";
  int64_t dims[1] = {4};
  float data[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
  float out[4];
  dp_workspace* ws = new_workspace();
  dp_net* net = NULL;
  dp_tensor* t = NULL;
  if (ws == NULL) return;
  net = new_net(ws, json);
  if (net != NULL && EXPECT_OK(dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, dims, 1, data, sizeof data, &t))) {
    EXPECT_OK(dp_workspace_feed(ws, "x", t));
    dp_tensor_free(t);
    EXPECT_OK(dp_net_run(net));
    CHECK(data[0] == -1.0f && data[1] == 2.0f && data[2] == -3.0f && data[3] == 4.0f);
    if (fetch_floats(ws, "x", out, 4)) CHECK(out[0] == 0.0f && out[1] == 4.0f && out[2] == 0.0f && out[3] == 8.0f);
  }
  dp_net_free(net);
  dp_workspace_free(ws);
}

static void test_net_options(void) {
  dp_workspace* ws = new_workspace();
  dp_netdef* def = load_json(kInitJson);
  dp_net_options opts = DP_NET_OPTIONS_INIT;
  dp_net* net = NULL;
  if (ws == NULL || def == NULL) goto done;
  CHECK(opts.struct_size == sizeof(dp_net_options));
  CHECK(opts.executor == DP_EXECUTOR_DEFAULT && opts.num_workers == 0);
  if (EXPECT_OK(dp_net_create(ws, def, &opts, &net))) {
    EXPECT_OK(dp_net_run(net));
    dp_net_free(net);
  }
  net = NULL;
  opts.executor = DP_EXECUTOR_SIMPLE;
  opts.num_workers = 2;
  if (EXPECT_OK(dp_net_create(ws, def, &opts, &net))) {
    EXPECT_OK(dp_net_run(net));
    dp_net_free(net);
  }
  /* An older caller whose struct ends after `executor`: num_workers is not read. */
  net = NULL;
  opts.struct_size = (uint32_t)(offsetof(dp_net_options, executor) + sizeof(int32_t));
  opts.executor = DP_EXECUTOR_SIMPLE;
  opts.num_workers = -99;
  if (EXPECT_OK(dp_net_create(ws, def, &opts, &net))) dp_net_free(net);
  /* Too small to hold even `executor`. */
  net = SENTINEL;
  opts.struct_size = (uint32_t)sizeof(uint32_t);
  EXPECT_ERR(dp_net_create(ws, def, &opts, &net), DP_ERR_INVALID_ARGUMENT, "struct_size");
  CHECK(net == SENTINEL);
  opts.struct_size = 0;
  EXPECT_ERR(dp_net_create(ws, def, &opts, &net), DP_ERR_INVALID_ARGUMENT, "struct_size");
  CHECK(net == SENTINEL);
  /* Bad values. */
  opts.struct_size = (uint32_t)sizeof opts;
  opts.executor = 7;
  opts.num_workers = 0;
  EXPECT_ERR(dp_net_create(ws, def, &opts, &net), DP_ERR_INVALID_ARGUMENT, "executor");
  CHECK(net == SENTINEL);
  opts.executor = DP_EXECUTOR_DEFAULT;
  opts.num_workers = -1;
  EXPECT_ERR(dp_net_create(ws, def, &opts, &net), DP_ERR_INVALID_ARGUMENT, "num_workers");
  CHECK(net == SENTINEL);
done:
  dp_netdef_free(def);
  dp_workspace_free(ws);
}

/* The async executor is not implemented yet. When it lands, this test must
 * change to expect success (it is kept apart for that reason). */
/* The async executor through the C API: same results as the simple one,
 * async run + wait, cancellation, trace and DOT export. */
static void test_net_async_executor(void) {
  static const char* chain_json =
      "{\"name\":\"chain\",\"external_inputs\":[\"x\"],\"ops\":["
      "{\"type\":\"Scale\",\"name\":\"s1\",\"inputs\":[\"x\"],\"outputs\":[\"a\"],\"args\":[{\"name\":\"scale\",\"f\":2}]},"
      "{\"type\":\"Scale\",\"name\":\"s2\",\"inputs\":[\"x\"],\"outputs\":[\"b\"],\"args\":[{\"name\":\"scale\",\"f\":3}]},"
      "{\"type\":\"Add\",\"name\":\"sum\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}]}";
  dp_workspace* ws = new_workspace();
  dp_netdef* def = load_json(chain_json);
  dp_net_options opts = DP_NET_OPTIONS_INIT;
  dp_net* net = NULL;
  dp_tensor* x = NULL;
  dp_tensor* y = NULL;
  dp_buffer* buf = NULL;
  float xv[3] = {1, -2, 4};
  int64_t dims[1] = {3};
  int round;
  if (ws == NULL || def == NULL) goto done;
  opts.executor = DP_EXECUTOR_ASYNC;
  opts.num_workers = 2;
  opts.profile = 1;
  if (!EXPECT_OK(dp_net_create(ws, def, &opts, &net))) goto done;
  EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, xv, sizeof xv, &x));
  EXPECT_OK(dp_workspace_feed(ws, "x", x));
  for (round = 0; round < 3; ++round) {
    if (round == 0) {
      EXPECT_OK(dp_net_run(net));
    } else {
      EXPECT_OK(dp_net_run_async(net));
      EXPECT_ERR(dp_net_run(net), DP_ERR_FAILED_PRECONDITION, "already running");
      EXPECT_OK(dp_net_wait(net, -1));
    }
    if (EXPECT_OK(dp_workspace_fetch(ws, "y", &y))) {
      const float* p = (const float*)dp_tensor_data(y);
      CHECK(p[0] == 5.0f && p[1] == -10.0f && p[2] == 20.0f);
      dp_tensor_free(y);
      y = NULL;
    }
  }
  EXPECT_ERR(dp_net_wait(net, 0), DP_ERR_FAILED_PRECONDITION, "no run");
  /* Cancelling before the run starts has no effect on the next run. */
  dp_net_cancel(net);
  dp_net_cancel(NULL);
  EXPECT_OK(dp_net_run(net));
  if (EXPECT_OK(dp_net_trace_json(net, &buf))) {
    const char* t = (const char*)dp_buffer_data(buf);
    CHECK(strstr(t, "\"traceEvents\"") != NULL);
    CHECK(strstr(t, "\"Add sum\"") != NULL);
    CHECK(strstr(t, "\"ph\":\"X\"") != NULL);
    dp_buffer_free(buf);
  }
  if (EXPECT_OK(dp_net_to_dot(net, &buf))) {
    const char* t = (const char*)dp_buffer_data(buf);
    CHECK(strncmp(t, "digraph \"chain\" {", 17) == 0);
    CHECK(strstr(t, "op0 -> op2") != NULL);
    CHECK(strstr(t, "op1 -> op2") != NULL);
    dp_buffer_free(buf);
  }
  EXPECT_CODE(dp_net_trace_json(NULL, &buf), DP_ERR_INVALID_ARGUMENT);
  EXPECT_CODE(dp_net_to_dot(net, NULL), DP_ERR_INVALID_ARGUMENT);
  EXPECT_CODE(dp_net_run_async(NULL), DP_ERR_INVALID_ARGUMENT);
  EXPECT_CODE(dp_net_wait(NULL, 0), DP_ERR_INVALID_ARGUMENT);
  opts.streams_per_gpu = -1;
  EXPECT_ERR(dp_net_create(ws, def, &opts, &net), DP_ERR_INVALID_ARGUMENT, "streams_per_gpu");
done:
  dp_tensor_free(x);
  dp_net_free(net);
  dp_netdef_free(def);
  dp_workspace_free(ws);
}

static void test_net_cuda_unavailable(void) {
  static const char* json =
      "{\"name\":\"gpu\",\"device\":{\"type\":\"CUDA\",\"id\":0},\"ops\":[{\"type\":\"ConstantFill\","
      "\"outputs\":[\"c\"],\"args\":[{\"name\":\"shape\",\"ints\":[2]}]}]}";
  static const char* op_json =
      "{\"name\":\"gpu_op\",\"ops\":[{\"type\":\"ConstantFill\",\"name\":\"fill\",\"device\":{\"type\":\"CUDA\","
      "\"id\":3},\"outputs\":[\"c\"],\"args\":[{\"name\":\"shape\",\"ints\":[2]}]}]}";
  int32_t n = -1;
  dp_workspace* ws;
  dp_netdef* def;
  dp_net* net = SENTINEL;
  if (!EXPECT_OK(dp_device_count(DP_DEVICE_CUDA, &n)) || n != 0) return; /* only checkable without GPUs */
  ws = new_workspace();
  def = load_json(json);
  if (ws != NULL && def != NULL) {
    EXPECT_ERR3(dp_net_create(ws, def, NULL, &net), DP_ERR_UNAVAILABLE, "op 0", "ConstantFill", "gpu");
    CHECK(net == SENTINEL);
  }
  dp_netdef_free(def);
  def = load_json(op_json);
  if (ws != NULL && def != NULL) {
    EXPECT_ERR3(dp_net_create(ws, def, NULL, &net), DP_ERR_UNAVAILABLE, "op 0", "'fill'", "3");
    CHECK(net == SENTINEL);
  }
  dp_netdef_free(def);
  dp_workspace_free(ws);
}

static void test_net_null_arguments(void) {
  dp_workspace* ws = new_workspace();
  dp_netdef* def = load_json(kInitJson);
  dp_net* net = SENTINEL;
  dp_buffer* buf = SENTINEL;
  if (ws == NULL || def == NULL) goto done;
  EXPECT_ERR(dp_net_create(NULL, def, NULL, &net), DP_ERR_INVALID_ARGUMENT, "workspace");
  EXPECT_ERR(dp_net_create(ws, NULL, NULL, &net), DP_ERR_INVALID_ARGUMENT, "netdef");
  EXPECT_ERR(dp_net_create(ws, def, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(net == SENTINEL);
  EXPECT_ERR(dp_net_run(NULL), DP_ERR_INVALID_ARGUMENT, "net");
  EXPECT_ERR(dp_netdef_to_buffer(NULL, &buf), DP_ERR_INVALID_ARGUMENT, "netdef");
  EXPECT_ERR(dp_netdef_to_buffer(def, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(dp_netdef_to_json(NULL, &buf), DP_ERR_INVALID_ARGUMENT, "netdef");
  EXPECT_ERR(dp_netdef_to_json(def, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(buf == SENTINEL);
  dp_net_free(NULL);
done:
  dp_netdef_free(def);
  dp_workspace_free(ws);
}

/* A net definition is copied into the net; a net keeps its workspace. */
static void test_net_lifetimes(void) {
  static const char* json =
      "{\"name\":\"life\",\"external_inputs\":[\"in\"],\"ops\":["
      "{\"type\":\"Scale\",\"inputs\":[\"in\"],\"outputs\":[\"out\"],\"args\":[{\"name\":\"scale\",\"f\":3}]}]}";
  deleter_record rec = {0, NULL};
  dp_workspace* ws = new_workspace();
  dp_netdef* def = load_json(json);
  dp_net* net = NULL;
  dp_tensor* t;
  if (ws == NULL || def == NULL) {
    dp_netdef_free(def);
    dp_workspace_free(ws);
    return;
  }
  if (!EXPECT_OK(dp_net_create(ws, def, NULL, &net))) {
    dp_netdef_free(def);
    dp_workspace_free(ws);
    return;
  }
  dp_netdef_free(def);
  t = new_owned(&rec, 5.0f);
  if (t != NULL) {
    EXPECT_OK(dp_workspace_feed(ws, "in", t));
    dp_tensor_free(t);
  }
  dp_workspace_free(ws); /* the net still holds it */
  CHECK(rec.calls == 0);
  EXPECT_OK(dp_net_run(net));
  EXPECT_OK(dp_net_run(net));
  dp_net_free(net);
  CHECK(rec.calls == 1);
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Gradients, models, training                                               */
/* ------------------------------------------------------------------------ */

static const char* kLossNetJson =
    "{\"name\":\"lin\",\"external_inputs\":[\"x\",\"w\",\"b\",\"label\"],\"ops\":["
    "{\"type\":\"FC\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"logits\"]},"
    "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"logits\",\"label\"],\"outputs\":[\"p\",\"loss\"]},"
    "{\"type\":\"Accuracy\",\"inputs\":[\"p\",\"label\"],\"outputs\":[\"acc\"]}]}";

static void test_add_gradients(void) {
  dp_netdef* fwd = load_json(kLossNetJson);
  dp_netdef* out = SENTINEL;
  dp_string_list* map = SENTINEL;
  const char* losses[] = {"loss"};
  const char* wrt[] = {"w", "b"};
  const char* bad_losses[] = {"acc"};
  dp_gradient_options opt = DP_GRADIENT_OPTIONS_INIT;
  dp_buffer* json = NULL;
  if (fwd == NULL) return;
  opt.losses = losses;
  opt.num_losses = 1;
  opt.wrt = wrt;
  opt.num_wrt = 2;
  if (EXPECT_OK(dp_netdef_add_gradients(fwd, &opt, &out, &map))) {
    CHECK(dp_string_list_size(map) == 4);
    CHECK(strcmp(dp_string_list_get(map, 0), "w") == 0);
    CHECK(strcmp(dp_string_list_get(map, 1), "w_grad") == 0);
    CHECK(strcmp(dp_string_list_get(map, 3), "b_grad") == 0);
    CHECK(dp_netdef_num_ops(out) > dp_netdef_num_ops(fwd));
    if (EXPECT_OK(dp_netdef_to_json(out, &json))) {
      CHECK(strstr((const char*)dp_buffer_data(json), "FCGradient") != NULL);
      CHECK(strstr((const char*)dp_buffer_data(json), "SoftmaxWithLossGradient") != NULL);
    }
    dp_buffer_free(json);
    dp_string_list_free(map);
    dp_netdef_free(out);
  }
  /* The map is optional. */
  out = NULL;
  if (EXPECT_OK(dp_netdef_add_gradients(fwd, &opt, &out, NULL))) dp_netdef_free(out);
  /* A loss reached only through Accuracy is not differentiable; out-params stay untouched. */
  out = SENTINEL;
  map = SENTINEL;
  opt.losses = bad_losses;
  EXPECT_ERR2(dp_netdef_add_gradients(fwd, &opt, &out, &map), DP_ERR_INVALID_NET, "Accuracy", "not differentiable");
  CHECK(out == SENTINEL && map == SENTINEL);
  opt.losses = NULL;
  EXPECT_ERR(dp_netdef_add_gradients(fwd, &opt, &out, &map), DP_ERR_INVALID_ARGUMENT, "options->losses");
  opt.losses = losses;
  opt.struct_size = 8;
  EXPECT_ERR(dp_netdef_add_gradients(fwd, &opt, &out, &map), DP_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_ERR(dp_netdef_add_gradients(NULL, &opt, &out, &map), DP_ERR_INVALID_ARGUMENT, "netdef");
  EXPECT_ERR(dp_netdef_add_gradients(fwd, NULL, &out, &map), DP_ERR_INVALID_ARGUMENT, "options");
  CHECK(out == SENTINEL && map == SENTINEL);
  dp_netdef_free(fwd);
}

static const char* kModelJson =
    "{\"name\":\"lin\","
    "\"init_net\":{\"ops\":["
    "{\"type\":\"XavierFill\",\"outputs\":[\"w\"],\"args\":[{\"name\":\"shape\",\"ints\":[3,4]},{\"name\":\"seed\",\"i\":5}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"b\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]}]}]},"
    "\"forward_net\":{\"ops\":["
    "{\"type\":\"FC\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"logits\"]},"
    "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"logits\",\"label\"],\"outputs\":[\"p\",\"loss\"]},"
    "{\"type\":\"Accuracy\",\"inputs\":[\"p\",\"label\"],\"outputs\":[\"acc\"]}]},"
    "\"params\":[\"w\",\"b\"],\"inputs\":[\"x\",\"label\"],\"losses\":[\"loss\"],\"metrics\":[\"acc\"],"
    "\"optimizer\":{\"type\":\"momentum\",\"lr\":0.5,\"momentum\":0.5}}";

/* Feeds 16 samples of 4 features whose class (of 3) is the argmax of the first three. */
static int feed_batch(dp_workspace* ws) {
  float x[16 * 4];
  int32_t label[16];
  int64_t xd[2] = {16, 4}, ld[1] = {16};
  dp_tensor* t = NULL;
  int i, k, ok;
  for (i = 0; i < 16; ++i) {
    int best = 0;
    for (k = 0; k < 4; ++k) x[i * 4 + k] = (float)((int)(lcg_next() % 2001) - 1000) / 1000.0f;
    for (k = 1; k < 3; ++k)
      if (x[i * 4 + k] > x[i * 4 + best]) best = k;
    label[i] = best;
  }
  if (!feed_floats(ws, "x", xd, 2, x)) return 0;
  if (!EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, ld, 1, label, sizeof label, &t))) return 0;
  ok = EXPECT_OK(dp_workspace_feed(ws, "label", t));
  dp_tensor_free(t);
  return ok;
}

static float fetch_scalar(dp_workspace* ws, const char* name) {
  float v = -1.0f;
  dp_tensor* t = NULL;
  if (EXPECT_OK(dp_workspace_fetch(ws, name, &t))) EXPECT_OK(dp_tensor_copy_to(t, &v, sizeof v));
  dp_tensor_free(t);
  return v;
}

static void test_model_training(void) {
  dp_model* model = SENTINEL;
  dp_model* again = NULL;
  dp_buffer* buf = NULL;
  dp_string_list* list = NULL;
  dp_netdef *init = NULL, *train = NULL, *eval = NULL;
  dp_workspace* ws = NULL;
  dp_net *init_net = NULL, *train_net = NULL, *eval_net = NULL;
  dp_training_options topt = DP_TRAINING_OPTIONS_INIT;
  float first, last;
  int step;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;
  if (EXPECT_OK(dp_model_blobs(model, DP_MODEL_PARAMS, &list))) {
    CHECK(dp_string_list_size(list) == 2);
    CHECK(strcmp(dp_string_list_get(list, 1), "b") == 0);
  }
  dp_string_list_free(list);
  list = SENTINEL;
  EXPECT_ERR(dp_model_blobs(model, 99, &list), DP_ERR_INVALID_ARGUMENT, "99");
  CHECK(list == SENTINEL);
  /* Binary round trip. */
  if (EXPECT_OK(dp_model_to_buffer(model, &buf))) {
    if (EXPECT_OK(dp_model_from_buffer(dp_buffer_data(buf), dp_buffer_size(buf), &again))) dp_model_free(again);
    /* A flipped identifier is rejected. */
    {
      unsigned char* copy = (unsigned char*)malloc(dp_buffer_size(buf));
      if (copy) {
        memcpy(copy, dp_buffer_data(buf), dp_buffer_size(buf));
        copy[4] ^= 0xff;
        again = SENTINEL;
        EXPECT_ERR(dp_model_from_buffer(copy, dp_buffer_size(buf), &again), DP_ERR_PARSE, "DPMD");
        CHECK(again == SENTINEL);
        free(copy);
      }
    }
  }
  dp_buffer_free(buf);
  buf = NULL;
  if (EXPECT_OK(dp_model_to_json(model, &buf))) CHECK(strstr((const char*)dp_buffer_data(buf), "\"momentum\"") != NULL);
  dp_buffer_free(buf);

  topt.lr = 0.2;
  if (!EXPECT_OK(dp_model_build_training(model, &topt, &init, &train, &eval))) goto done;
  ws = new_workspace();
  if (ws == NULL || !EXPECT_OK(dp_net_create(ws, init, NULL, &init_net)) ||
      !EXPECT_OK(dp_net_create(ws, train, NULL, &train_net)) || !EXPECT_OK(dp_net_create(ws, eval, NULL, &eval_net)))
    goto done;
  EXPECT_OK(dp_net_run(init_net));
  g_lcg = 777u;
  feed_batch(ws);
  EXPECT_OK(dp_net_run(eval_net));
  first = fetch_scalar(ws, "loss");
  for (step = 0; step < 200; ++step) {
    feed_batch(ws);
    if (!EXPECT_OK(dp_net_run(train_net))) break;
  }
  CHECK(near(fetch_scalar(ws, "optimizer/lr"), 0.2, 1e-6));
  g_lcg = 777u;
  feed_batch(ws);
  EXPECT_OK(dp_net_run(eval_net));
  last = fetch_scalar(ws, "loss");
  CHECK(last < 0.5f * first);
  CHECK(fetch_scalar(ws, "acc") >= 0.8f);

  /* Bad options: out-parameters untouched. */
  {
    dp_netdef* untouched = SENTINEL;
    topt.lr = -1;
    EXPECT_ERR(dp_model_build_training(model, &topt, &untouched, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "lr");
    topt.lr = 0;
    topt.struct_size = 4;
    EXPECT_ERR(dp_model_build_training(model, &topt, &untouched, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK(untouched == SENTINEL);
  }
done:
  dp_net_free(eval_net);
  dp_net_free(train_net);
  dp_net_free(init_net);
  dp_workspace_free(ws);
  dp_netdef_free(init);
  dp_netdef_free(train);
  dp_netdef_free(eval);
  dp_model_free(model);
}

/* Trains kModelJson 5 steps with memory mode `mode` (DP_MEMORY_*), the
 * train net created with net option `net_mode`; leaves the params in w[12],
 * b[3] and the net's memory figures in *mem. Returns 0 on a failure. */
static int train_with_memory(int32_t mode, int32_t net_mode, float* w, float* b, dp_net_memory* mem) {
  dp_model* model = NULL;
  dp_netdef *init = NULL, *train = NULL;
  dp_workspace* ws = NULL;
  dp_net *init_net = NULL, *train_net = NULL;
  dp_training_options topt = DP_TRAINING_OPTIONS_INIT;
  dp_net_options nopt = DP_NET_OPTIONS_INIT;
  dp_tensor* t = NULL;
  int ok = 0, step;
  topt.memory = mode;
  nopt.memory = net_mode;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model)) ||
      !EXPECT_OK(dp_model_build_training(model, &topt, &init, &train, NULL)))
    goto done;
  CHECK(dp_netdef_memory(train) == (mode == DP_MEMORY_DEFAULT ? DP_MEMORY_SHARE : mode));
  CHECK(dp_netdef_memory(init) == DP_MEMORY_DEFAULT);
  CHECK(dp_netdef_memory(NULL) == DP_MEMORY_DEFAULT);
  ws = new_workspace();
  if (ws == NULL || !EXPECT_OK(dp_net_create(ws, init, NULL, &init_net)) ||
      !EXPECT_OK(dp_net_create(ws, train, &nopt, &train_net)) || !EXPECT_OK(dp_net_run(init_net)))
    goto done;
  g_lcg = 4242u;
  for (step = 0; step < 5; ++step)
    if (!feed_batch(ws) || !EXPECT_OK(dp_net_run(train_net))) goto done;
  if (!EXPECT_OK(dp_workspace_fetch(ws, "w", &t)) || !EXPECT_OK(dp_tensor_copy_to(t, w, 12 * sizeof(float)))) goto done;
  dp_tensor_free(t);
  t = NULL;
  if (!EXPECT_OK(dp_workspace_fetch(ws, "b", &t)) || !EXPECT_OK(dp_tensor_copy_to(t, b, 3 * sizeof(float)))) goto done;
  mem->struct_size = sizeof *mem;
  if (!EXPECT_OK(dp_net_memory_stats(train_net, DP_DEVICE_CPU, 0, mem))) goto done;
  /* The logits are a temporary unless the net keeps every blob. */
  dp_tensor_free(t);
  t = SENTINEL;
  if (mem->mode == DP_MEMORY_KEEP) {
    if (EXPECT_OK(dp_workspace_fetch(ws, "logits", &t))) dp_tensor_free(t);
  } else {
    EXPECT_ERR(dp_workspace_fetch(ws, "logits", &t), DP_ERR_NOT_FOUND, "memory plan");
    CHECK(t == SENTINEL);
  }
  t = NULL;
  CHECK(near(fetch_scalar(ws, "optimizer/lr"), 0.5, 1e-6)); /* kept: an output of the train net */
  ok = 1;
done:
  if (t != SENTINEL) dp_tensor_free(t);
  dp_net_free(train_net);
  dp_net_free(init_net);
  dp_workspace_free(ws);
  dp_netdef_free(init);
  dp_netdef_free(train);
  dp_model_free(model);
  return ok;
}

static void test_memory_modes(void) {
  float w[3][12], b[3][3];
  dp_net_memory mem[3], untouched;
  const int32_t modes[3] = {DP_MEMORY_KEEP, DP_MEMORY_DEFAULT, DP_MEMORY_FREE};
  int i;
  for (i = 0; i < 3; ++i)
    if (!train_with_memory(modes[i], DP_MEMORY_DEFAULT, w[i], b[i], &mem[i])) return;
  for (i = 1; i < 3; ++i) { /* bit for bit what keeping every blob gives */
    CHECK(memcmp(w[i], w[0], sizeof w[0]) == 0);
    CHECK(memcmp(b[i], b[0], sizeof b[0]) == 0);
  }
  CHECK(mem[0].mode == DP_MEMORY_KEEP && mem[0].temporaries == 0 && mem[0].slots == 0);
  CHECK(mem[1].mode == DP_MEMORY_SHARE && mem[1].temporaries > 0 && mem[1].slots > 0 && mem[1].slot_bytes > 0);
  CHECK(mem[2].mode == DP_MEMORY_FREE && mem[2].temporaries == mem[1].temporaries && mem[2].slot_bytes == 0);
  for (i = 0; i < 3; ++i) CHECK(mem[i].peak_bytes >= mem[i].bytes_in_use && mem[i].peak_bytes > 0);
  CHECK(mem[1].peak_bytes < mem[0].peak_bytes);
  CHECK(mem[2].bytes_in_use < mem[0].bytes_in_use);
  /* The net's option overrides the definition's mode. */
  if (train_with_memory(DP_MEMORY_DEFAULT, DP_MEMORY_KEEP, w[1], b[1], &mem[1])) {
    CHECK(mem[1].mode == DP_MEMORY_KEEP);
    CHECK(memcmp(w[1], w[0], sizeof w[0]) == 0);
  }
  /* Dynamic loss scaling, which FP16 math needs in a net that computes
   * gradients: a train net without it is refused, one with it accepted; a
   * bad value of the option is INVALID_ARGUMENT. */
  {
    dp_model* model = NULL;
    dp_netdef* plain = NULL;
    dp_netdef* scaled = NULL;
    dp_netdef* untouched_def = SENTINEL;
    dp_training_options topt = DP_TRAINING_OPTIONS_INIT;
    dp_parallel_options popt = DP_PARALLEL_OPTIONS_INIT;
    dp_parallel_model* pm = SENTINEL;
    dp_net_options fp16 = DP_NET_OPTIONS_INIT;
    dp_workspace* ws = new_workspace();
    dp_net* net = SENTINEL;
    int32_t one_cpu[1] = {0};
    fp16.math_mode = DP_MATH_FP16;
    if (EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model)) && ws != NULL) {
      if (EXPECT_OK(dp_model_build_training(model, NULL, NULL, &plain, NULL)))
        EXPECT_ERR2(dp_net_create(ws, plain, &fp16, &net), DP_ERR_INVALID_ARGUMENT, "math_mode", "loss scaling");
      CHECK(net == SENTINEL);
      topt.loss_scaling = DP_LOSS_SCALING_DYNAMIC;
      if (EXPECT_OK(dp_model_build_training(model, &topt, NULL, &scaled, NULL)) &&
          EXPECT_OK(dp_net_create(ws, scaled, &fp16, &net))) {
        dp_net_free(net);
        net = SENTINEL;
      }
      topt.initial_loss_scale = -2;
      EXPECT_ERR(dp_model_build_training(model, &topt, NULL, &untouched_def, NULL), DP_ERR_INVALID_ARGUMENT,
                 "options->initial_loss_scale");
      topt.initial_loss_scale = 0;
      topt.loss_scaling = 7;
      EXPECT_ERR2(dp_model_build_training(model, &topt, NULL, &untouched_def, NULL), DP_ERR_INVALID_ARGUMENT,
                  "options->loss_scaling", "7");
      CHECK(untouched_def == SENTINEL);
      popt.device_type = DP_DEVICE_CPU;
      popt.device_ids = one_cpu;
      popt.num_devices = 1;
      popt.num_shards = 1;
      popt.loss_scaling = 7;
      EXPECT_ERR(dp_model_parallelize(model, &popt, &pm), DP_ERR_INVALID_ARGUMENT, "options->loss_scaling");
      CHECK(pm == SENTINEL);
    }
    dp_netdef_free(plain);
    dp_netdef_free(scaled);
    dp_workspace_free(ws);
    dp_model_free(model);
  }
  /* Bad values: INVALID_ARGUMENT naming the option, out-parameters untouched. */
  {
    dp_model* model = NULL;
    dp_netdef* out = SENTINEL;
    dp_training_options topt = DP_TRAINING_OPTIONS_INIT;
    dp_net_options nopt = DP_NET_OPTIONS_INIT;
    dp_workspace* ws = new_workspace();
    dp_net* net = SENTINEL;
    topt.memory = 7;
    if (EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model)))
      EXPECT_ERR2(dp_model_build_training(model, &topt, &out, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "options->memory",
                  "7");
    CHECK(out == SENTINEL);
    topt.memory = DP_MEMORY_KEEP;
    if (ws != NULL && model != NULL && EXPECT_OK(dp_model_build_training(model, &topt, &out, NULL, NULL))) {
      nopt.memory = -1;
      EXPECT_ERR(dp_net_create(ws, out, &nopt, &net), DP_ERR_INVALID_ARGUMENT, "options->memory");
      CHECK(net == SENTINEL);
      nopt.memory = DP_MEMORY_DEFAULT;
      nopt.cuda_graphs = DP_CUDA_GRAPHS_OFF + 1;
      EXPECT_ERR(dp_net_create(ws, out, &nopt, &net), DP_ERR_INVALID_ARGUMENT, "options->cuda_graphs");
      CHECK(net == SENTINEL);
      nopt.cuda_graphs = DP_CUDA_GRAPHS_OFF; /* a CPU net runs the same either way */
      if (EXPECT_OK(dp_net_create(ws, out, &nopt, &net))) {
        dp_net_free(net);
        net = SENTINEL;
      }
      nopt.math_mode = DP_MATH_FP16 + 1;
      EXPECT_ERR(dp_net_create(ws, out, &nopt, &net), DP_ERR_INVALID_ARGUMENT, "options->math_mode");
      CHECK(net == SENTINEL);
      nopt.math_mode = -1;
      EXPECT_ERR(dp_net_create(ws, out, &nopt, &net), DP_ERR_INVALID_ARGUMENT, "options->math_mode");
      CHECK(net == SENTINEL);
      nopt.math_mode = DP_MATH_BF16; /* a CPU net computes in float32 in every mode */
      if (EXPECT_OK(dp_net_create(ws, out, &nopt, &net))) {
        dp_net_free(net);
        net = SENTINEL;
      }
      nopt.math_mode = DP_MATH_DEFAULT;
      if (EXPECT_OK(dp_net_create(ws, out, NULL, &net))) {
        untouched.struct_size = 0;
        EXPECT_ERR(dp_net_memory_stats(net, DP_DEVICE_CPU, 0, &untouched), DP_ERR_INVALID_ARGUMENT, "struct_size");
        untouched.struct_size = sizeof untouched;
        untouched.peak_bytes = 99;
        EXPECT_ERR(dp_net_memory_stats(net, 7, 0, &untouched), DP_ERR_INVALID_ARGUMENT, "device_type");
        EXPECT_ERR(dp_net_memory_stats(net, DP_DEVICE_CPU, -1, &untouched), DP_ERR_INVALID_ARGUMENT, "device_id");
        CHECK(untouched.peak_bytes == 99);
        /* An older caller's shorter struct: only the fields it has are written. */
        untouched.struct_size = (uint32_t)(offsetof(dp_net_memory, peak_bytes));
        untouched.mode = 99;
        EXPECT_OK(dp_net_memory_stats(net, DP_DEVICE_CPU, 0, &untouched));
        CHECK(untouched.mode == DP_MEMORY_KEEP && untouched.peak_bytes == 99);
        dp_net_free(net);
      }
      EXPECT_ERR(dp_net_memory_stats(NULL, DP_DEVICE_CPU, 0, &untouched), DP_ERR_INVALID_ARGUMENT, "net");
      dp_netdef_free(out);
    }
    dp_workspace_free(ws);
    dp_model_free(model);
  }
}

static void test_model_errors(void) {
  dp_model* m = SENTINEL;
  EXPECT_ERR(dp_model_from_json("{", 1, &m), DP_ERR_PARSE, "model JSON");
  EXPECT_ERR(dp_model_from_file("/nonexistent/dp_model.json", &m), DP_ERR_NOT_FOUND, "/nonexistent/dp_model.json");
  EXPECT_ERR(dp_model_from_buffer(NULL, 10, &m), DP_ERR_INVALID_ARGUMENT, "data");
  EXPECT_ERR(dp_model_from_json(kModelJson, strlen(kModelJson), NULL), DP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(dp_model_build_training(NULL, NULL, NULL, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "model");
  CHECK(m == SENTINEL);
  dp_model_free(NULL);
}

/* Trains the model 5 steps with `nets` in a fresh workspace (batches from
 * seed 99); copies the 12 values of `w_name` into w. */
static int train_five(dp_netdef* init, dp_netdef* train, const char* w_name, float* w) {
  dp_workspace* ws = new_workspace();
  dp_net *init_net = NULL, *train_net = NULL;
  dp_tensor* t = NULL;
  int step, ok = 0;
  if (ws == NULL || !EXPECT_OK(dp_net_create(ws, init, NULL, &init_net)) ||
      !EXPECT_OK(dp_net_create(ws, train, NULL, &train_net)) || !EXPECT_OK(dp_net_run(init_net)))
    goto done;
  g_lcg = 99u;
  for (step = 0; step < 5; ++step)
    if (!feed_batch(ws) || !EXPECT_OK(dp_net_run(train_net))) goto done;
  if (EXPECT_OK(dp_workspace_fetch(ws, w_name, &t))) ok = EXPECT_OK(dp_tensor_copy_to(t, w, 12 * sizeof(float)));
done:
  dp_tensor_free(t);
  dp_net_free(train_net);
  dp_net_free(init_net);
  dp_workspace_free(ws);
  return ok;
}

/* Gradient compression (since 0.6): two CPU replicas whose allreduce goes
 * through bfloat16 or binary16 train close to float32's, not to its bits. */
static void test_gradient_compression(void) {
  dp_model* model = NULL;
  dp_parallel_model* pm = NULL;
  dp_parallel_model* untouched = SENTINEL;
  dp_netdef *init = NULL, *train = NULL;
  const int32_t ids[2] = {0, 1};
  const int32_t modes[2] = {DP_GRADIENT_COMPRESSION_BF16, DP_GRADIENT_COMPRESSION_FP16};
  float plain[12], packed[12];
  int m, i;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;
  for (m = -1; m < 2; ++m) {
    dp_parallel_options o = DP_PARALLEL_OPTIONS_INIT;
    o.device_ids = ids;
    o.num_devices = 2;
    o.gradient_compression = m < 0 ? DP_GRADIENT_COMPRESSION_NONE : modes[m];
    if (!EXPECT_OK(dp_model_parallelize(model, &o, &pm)) || !EXPECT_OK(dp_parallel_model_nets(pm, &init, &train, NULL)) ||
        !train_five(init, train, "cpu_0/w", m < 0 ? plain : packed))
      break;
    if (m >= 0) {
      int same = 1, near = 1;
      for (i = 0; i < 12; ++i) {
        same = same && packed[i] == plain[i];
        near = near && fabsf(packed[i] - plain[i]) <= 2e-2f * (1.0f + fabsf(plain[i]));
      }
      CHECK(!same);
      CHECK(near);
    }
    dp_netdef_free(init);
    dp_netdef_free(train);
    init = train = NULL;
    dp_parallel_model_free(pm);
    pm = NULL;
  }
  {
    dp_parallel_options o = DP_PARALLEL_OPTIONS_INIT;
    o.device_ids = ids;
    o.num_devices = 2;
    o.gradient_compression = 3;
    EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "gradient_compression");
    o.gradient_compression = DP_GRADIENT_COMPRESSION_BF16;
    o.bmuf = 1;
    EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "BMUF");
    CHECK(untouched == SENTINEL);
  }
  dp_netdef_free(init);
  dp_netdef_free(train);
  dp_parallel_model_free(pm);
  dp_model_free(model);
}

/* A parallel model of kModelJson on 2 CPU replicas, sharded or not, its
 * init net run in a new workspace: 1 when all went well. */
static int sharded_job(dp_model* model, int32_t shard, dp_workspace** ws, dp_parallel_model** pm, dp_net** train) {
  const int32_t ids[2] = {0, 1};
  dp_parallel_options o = DP_PARALLEL_OPTIONS_INIT;
  dp_netdef *init = NULL, *train_def = NULL;
  dp_net* init_net = NULL;
  int ok;
  o.device_ids = ids;
  o.num_devices = 2;
  o.shard_optimizer_state = shard;
  *ws = new_workspace();
  ok = *ws != NULL && EXPECT_OK(dp_model_parallelize(model, &o, pm)) &&
       EXPECT_OK(dp_parallel_model_nets(*pm, &init, &train_def, NULL)) &&
       EXPECT_OK(dp_net_create(*ws, init, NULL, &init_net)) && EXPECT_OK(dp_net_run(init_net)) &&
       EXPECT_OK(dp_net_create(*ws, train_def, NULL, train));
  dp_net_free(init_net);
  dp_netdef_free(init);
  dp_netdef_free(train_def);
  return ok;
}

/* 12 floats of blob `name` into out. */
static int fetch12(dp_workspace* ws, const char* name, float* out) {
  dp_tensor* t = NULL;
  int ok = EXPECT_OK(dp_workspace_fetch(ws, name, &t)) && CHECK(dp_tensor_numel(t) == 12) &&
           EXPECT_OK(dp_tensor_copy_to(t, out, 12 * sizeof(float)));
  dp_tensor_free(t);
  return ok;
}

/* A sharded optimizer state (ZeRO-1, since 0.6): two CPU replicas train to
 * the unsharded bits; the checkpoint holds the state whole, so each kind
 * resumes from the other's; bad values are refused. */
static void test_shard_optimizer_state(void) {
  dp_model* model = NULL;
  dp_workspace* ws[2] = {NULL, NULL};
  dp_parallel_model* pm[2] = {NULL, NULL};
  dp_net* train[2] = {NULL, NULL};
  float w[2][12], m[12];
  char path[2][1100] = {"", ""};
  int k, step, ok = 1;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;
  for (k = 0; k < 2 && ok; ++k) { /* k = 1: sharded */
    ok = sharded_job(model, k, &ws[k], &pm[k], &train[k]);
    g_lcg = 99u;
    for (step = 0; ok && step < 5; ++step) ok = feed_batch(ws[k]) && EXPECT_OK(dp_net_run(train[k]));
    ok = ok && fetch12(ws[k], "cpu_1/w", w[k]);
    tmp_path(path[k], sizeof path[k], k ? "sharded.dpckpt" : "unsharded.dpckpt");
    ok = ok && EXPECT_OK(dp_parallel_model_save(pm[k], ws[k], path[k], NULL));
  }
  if (ok) {
    dp_tensor* t = NULL;
    CHECK(memcmp(w[0], w[1], sizeof w[0]) == 0);
    /* The unsharded replicas' state whole; the sharded ones' 1-D parts (w's 12 elements: part 0 holds them). */
    ok = fetch12(ws[0], "cpu_1/w/momentum", m) && EXPECT_OK(dp_workspace_fetch(ws[1], "cpu_1/w/momentum", &t)) &&
         CHECK(dp_tensor_numel(t) == 0) && CHECK(dp_tensor_ndim(t) == 1);
    dp_tensor_free(t);
    t = NULL;
    /* The gathered whole state does not stay in the workspace after the save. */
    {
      dp_status* st = dp_workspace_fetch(ws[1], "parallel/full/w/momentum", &t);
      CHECK(st != NULL && t == NULL);
      dp_status_free(st);
    }
  }
  for (k = 0; k < 2 && ok; ++k) {
    /* Job kind 1 - k resumes from kind k's file, then both take a step. */
    dp_workspace* rws = NULL;
    dp_parallel_model* rpm = NULL;
    dp_net* rtrain = NULL;
    float a[12], b[12];
    ok = sharded_job(model, 1 - k, &rws, &rpm, &rtrain) && EXPECT_OK(dp_parallel_model_load(rpm, rws, path[k], NULL));
    g_lcg = 7u;
    ok = ok && feed_batch(rws) && EXPECT_OK(dp_net_run(rtrain));
    g_lcg = 7u;
    ok = ok && feed_batch(ws[k]) && EXPECT_OK(dp_net_run(train[k])) && fetch12(rws, "cpu_0/w", a) &&
         fetch12(ws[k], "cpu_0/w", b) && CHECK(memcmp(a, b, sizeof a) == 0);
    /* The unsharded job resumed from the sharded file holds the unsharded run's whole state. */
    if (ok && k == 1)
      ok = fetch12(rws, "cpu_1/w/momentum", a) && fetch12(ws[0], "cpu_1/w/momentum", b) &&
           CHECK(memcmp(a, b, sizeof a) == 0);
    dp_net_free(rtrain);
    dp_parallel_model_free(rpm);
    dp_workspace_free(rws);
  }
  {
    const int32_t ids[2] = {0, 1};
    dp_parallel_model* untouched = SENTINEL;
    dp_parallel_options o = DP_PARALLEL_OPTIONS_INIT;
    o.device_ids = ids;
    o.num_devices = 2;
    o.shard_optimizer_state = 2;
    EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "shard_optimizer_state");
    o.shard_optimizer_state = 1;
    o.shared_model = DP_SHARED_MODEL_ON;
    EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "shared_model");
    o.shared_model = DP_SHARED_MODEL_OFF;
    o.bmuf = 1;
    EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "BMUF");
    CHECK(untouched == SENTINEL);
  }
  for (k = 0; k < 2; ++k) {
    dp_net_free(train[k]);
    dp_parallel_model_free(pm[k]);
    dp_workspace_free(ws[k]);
    if (path[k][0] != 0) remove(path[k]);
  }
  dp_model_free(model);
}

static void test_parallelize(void) {
  dp_model* model = NULL;
  dp_parallel_model* pm = NULL;
  dp_parallel_model* untouched = SENTINEL;
  dp_netdef *init = NULL, *train = NULL, *pinit = NULL, *ptrain = NULL, *peval = NULL;
  dp_parallel_options o = DP_PARALLEL_OPTIONS_INIT;
  const int32_t ids[4] = {0, 1, 2, 3};
  const int32_t dup[2] = {1, 1};
  float want[12], got[12];
  int i;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;

  /* One device on batches of 16 ... */
  if (!EXPECT_OK(dp_model_build_training(model, NULL, &init, &train, NULL)) || !train_five(init, train, "w", want))
    goto done;
  /* ... equals 4 CPU replicas of 4 samples each, one bucket per gradient. */
  o.device_ids = ids;
  o.num_devices = 4;
  o.first_bucket_bytes = o.bucket_bytes = 4;
  if (!EXPECT_OK(dp_model_parallelize(model, &o, &pm))) goto done;
  CHECK(dp_parallel_model_num_replicas(pm) == 4);
  CHECK(strcmp(dp_parallel_model_scope(pm, 3), "cpu_3/") == 0);
  CHECK(dp_parallel_model_scope(pm, 4) == NULL);
  if (!EXPECT_OK(dp_parallel_model_nets(pm, &pinit, &ptrain, &peval)) || !train_five(pinit, ptrain, "cpu_2/w", got))
    goto done;
  for (i = 0; i < 12; ++i) CHECK(near(got[i], want[i], 1e-5));
  {
    /* The parallel nets as DOT: every replica's ops and updates are there
     * (in one process, CPU replicas' updates sum the gradients themselves:
     * no Allreduce). */
    dp_buffer* dot = NULL;
    if (EXPECT_OK(dp_netdef_to_dot(ptrain, &dot))) {
      const char* text = (const char*)dp_buffer_data(dot);
      CHECK(strncmp(text, "digraph", 7) == 0 && strstr(text, "MomentumSGD") != NULL && strstr(text, "cpu:3") != NULL &&
            strstr(text, "Allreduce") == NULL);
    }
    dp_buffer_free(dot);
    EXPECT_ERR(dp_netdef_to_dot(NULL, &dot), DP_ERR_INVALID_ARGUMENT, "netdef");
  }
  {
    /* A shared model (one copy of the params, one optimizer) trains alike. */
    dp_parallel_model* shared = NULL;
    dp_netdef *sinit = NULL, *strain = NULL;
    o.shared_model = 1;
    if (EXPECT_OK(dp_model_parallelize(model, &o, &shared)) &&
        EXPECT_OK(dp_parallel_model_nets(shared, &sinit, &strain, NULL)) &&
        train_five(sinit, strain, "cpu_0/w", got))
      for (i = 0; i < 12; ++i) CHECK(near(got[i], want[i], 1e-5));
    o.bmuf = 1;
    EXPECT_ERR2(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "BMUF", "shared_model");
    o.bmuf = 0;
    dp_netdef_free(sinit);
    dp_netdef_free(strain);
    dp_parallel_model_free(shared);
    sinit = strain = NULL;
    shared = NULL;
    /* AUTO: dp picks the layout from where the replicas run; either trains
     * alike, and AUTO with BMUF means a copy per replica, without an error. */
    o.shared_model = DP_SHARED_MODEL_AUTO;
    if (EXPECT_OK(dp_model_parallelize(model, &o, &shared)) &&
        EXPECT_OK(dp_parallel_model_nets(shared, &sinit, &strain, NULL)) &&
        train_five(sinit, strain, "cpu_0/w", got))
      for (i = 0; i < 12; ++i) CHECK(near(got[i], want[i], 1e-5));
    dp_netdef_free(sinit);
    dp_netdef_free(strain);
    dp_parallel_model_free(shared);
    shared = NULL;
    o.bmuf = 1;
    if (EXPECT_OK(dp_model_parallelize(model, &o, &shared))) CHECK(shared != NULL);
    dp_parallel_model_free(shared);
    o.bmuf = 0;
    o.shared_model = 3;
    EXPECT_ERR2(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "shared_model", "3");
    o.shared_model = DP_SHARED_MODEL_OFF;
  }
  {
    /* dp_parallel_model_sync: a drifted replica gets replica 0's params back. */
    dp_workspace* ws = new_workspace();
    dp_net* init_net = NULL;
    dp_tensor *w3 = NULL, *w0 = NULL, *drift = NULL;
    const int64_t dims[2] = {3, 4};
    float zeros[12] = {0}, v0[12], v3[12];
    if (ws != NULL && EXPECT_OK(dp_net_create(ws, pinit, NULL, &init_net)) && EXPECT_OK(dp_net_run(init_net)) &&
        EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 2, zeros, sizeof zeros, &drift)) &&
        EXPECT_OK(dp_workspace_feed(ws, "cpu_3/w", drift)) && EXPECT_OK(dp_parallel_model_sync(pm, ws)) &&
        EXPECT_OK(dp_workspace_fetch(ws, "cpu_0/w", &w0)) && EXPECT_OK(dp_workspace_fetch(ws, "cpu_3/w", &w3)) &&
        EXPECT_OK(dp_tensor_copy_to(w0, v0, sizeof v0)) && EXPECT_OK(dp_tensor_copy_to(w3, v3, sizeof v3)))
      CHECK(memcmp(v0, v3, sizeof v0) == 0 && v0[0] != 0.0f);
    EXPECT_ERR(dp_parallel_model_sync(pm, NULL), DP_ERR_INVALID_ARGUMENT, "workspace");
    dp_tensor_free(drift);
    dp_tensor_free(w0);
    dp_tensor_free(w3);
    dp_net_free(init_net);
    dp_workspace_free(ws);
  }
  {
    dp_netdef* sync = NULL;
    if (EXPECT_OK(dp_parallel_model_sync_net(pm, &sync))) CHECK(dp_netdef_num_ops(sync) == 2);  /* Broadcast, Barrier */
    dp_netdef_free(sync);
  }

  {
    dp_netdef* acc = SENTINEL;
    EXPECT_CODE(dp_parallel_model_accumulate_net(pm, &acc), DP_ERR_FAILED_PRECONDITION);
    CHECK(acc == SENTINEL);
  }

  /* Bad options: clear statuses, the out-parameter untouched. */
  o.accumulate_steps = -1; /* 0 is the default, 1 */
  EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "accumulate_steps");
  o.accumulate_steps = 2;
  {
    dp_parallel_model* with_acc = NULL;
    dp_netdef* acc = NULL;
    if (EXPECT_OK(dp_model_parallelize(model, &o, &with_acc)) &&
        EXPECT_OK(dp_parallel_model_accumulate_net(with_acc, &acc)))
      CHECK(dp_netdef_num_ops(acc) > 0);
    dp_netdef_free(acc);
    dp_parallel_model_free(with_acc);
  }
  o.accumulate_steps = 1;
  {
    dp_parallel_model* bmuf = NULL;
    dp_netdef* block = SENTINEL;
    int32_t length = 0;
    EXPECT_CODE(dp_parallel_model_block_net(pm, &block, &length), DP_ERR_FAILED_PRECONDITION);
    CHECK(block == SENTINEL && length == 0);
    o.bmuf = 1;
    o.bmuf_block_length = 5;
    if (EXPECT_OK(dp_model_parallelize(model, &o, &bmuf)) &&
        EXPECT_OK(dp_parallel_model_block_net(bmuf, &block, &length))) {
      CHECK(length == 5 && dp_netdef_num_ops(block) > 0);
      dp_netdef_free(block);
    }
    dp_parallel_model_free(bmuf);
    o.bmuf_block_momentum = 1.5;
    EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "block_momentum");
    o.bmuf = 0;
  }
  o.computed_params = 3;
  EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "computed_params");
  o.computed_params = DP_COMPUTED_PARAMS_AVERAGE;
  EXPECT_ERR(dp_model_parallelize(model, NULL, &untouched), DP_ERR_INVALID_ARGUMENT, "options");
  o.num_devices = 0;
  EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "no devices");
  o.device_ids = dup;
  o.num_devices = 2;
  EXPECT_ERR2(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "cpu:1", "twice");
  o.device_ids = ids;
  o.bucket_bytes = -1; /* 0 is the default, 25 MiB */
  EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "bucket_bytes");
  o.bucket_bytes = 1024;
  o.device_type = 7;
  EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "device_type");
  o.device_type = DP_DEVICE_CUDA;
  {
    /* Built without CUDA: unavailable; with it the nets build (every training
     * op has a CUDA kernel or runs on the host); running them needs a GPU. */
    dp_build_info info;
    dp_parallel_model* gpu = NULL;
    dp_status* st;
    memset(&info, 0, sizeof info);
    info.struct_size = (uint32_t)sizeof info;
    st = dp_model_parallelize(model, &o, &gpu);
    if (EXPECT_OK(dp_build_info_get(&info)) && info.cuda) {
      CHECK(st == NULL && gpu != NULL && streq(dp_parallel_model_scope(gpu, 0), "cuda_0/"));
    } else {
      CHECK(st != NULL && dp_status_code(st) == DP_ERR_UNAVAILABLE && gpu == NULL);
    }
    dp_status_free(st);
    dp_parallel_model_free(gpu);
  }
  o.device_type = DP_DEVICE_CPU;
  o.device_ids = NULL;
  EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "device_ids");
  o.device_ids = ids;
  o.struct_size = 8;
  EXPECT_ERR(dp_model_parallelize(model, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_ERR(dp_model_parallelize(NULL, &o, &untouched), DP_ERR_INVALID_ARGUMENT, "model");
  CHECK(untouched == SENTINEL);
  CHECK(dp_parallel_model_num_replicas(NULL) == 0 && dp_parallel_model_scope(NULL, 0) == NULL);
  EXPECT_ERR(dp_parallel_model_nets(NULL, NULL, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "model");
done:
  dp_parallel_model_free(pm);
  dp_parallel_model_free(NULL);
  dp_netdef_free(init);
  dp_netdef_free(train);
  dp_netdef_free(pinit);
  dp_netdef_free(ptrain);
  dp_netdef_free(peval);
  dp_model_free(model);
}

/* ------------------------------------------------------------------------ */
/* IDX files                                                                 */
/* ------------------------------------------------------------------------ */

/* CRC-32 (gzip's polynomial), bit by bit: enough for a few bytes. */
static uint32_t crc32_of(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  size_t i;
  int k;
  for (i = 0; i < n; ++i) {
    c ^= p[i];
    for (k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

static void put_le32(unsigned char* p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

/* Wraps `n` (< 65536) bytes into a gzip member holding one stored
 * (uncompressed) deflate block; `out` needs n + 23 bytes. Returns its size. */
static size_t gzip_stored(const unsigned char* data, size_t n, unsigned char* out) {
  static const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  memcpy(out, header, sizeof header);
  out[10] = 1; /* the final block, stored */
  out[11] = (unsigned char)(n & 0xFF);
  out[12] = (unsigned char)(n >> 8);
  out[13] = (unsigned char)(~n & 0xFF);
  out[14] = (unsigned char)((~n >> 8) & 0xFF);
  memcpy(out + 15, data, n);
  put_le32(out + 15 + n, crc32_of(data, n));
  put_le32(out + 19 + n, (uint32_t)n);
  return n + 23;
}

static void test_read_idx(void) {
  /* uint8 [2, 3]: magic 00 00 08 02, then big-endian dims. */
  static const unsigned char u8[] = {0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 250, 251, 255};
  /* int32 [2], big-endian: 7, -2. */
  static const unsigned char i32[] = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 0, 7, 0xFF, 0xFF, 0xFF, 0xFE};
  /* float32 [1]: 1.5f = 0x3FC00000. */
  static const unsigned char f32[] = {0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3F, 0xC0, 0, 0};
  static const unsigned char bad_magic[] = {1, 0, 0x08, 1, 0, 0, 0, 1, 9};
  static const unsigned char bad_type[] = {0, 0, 0x07, 1, 0, 0, 0, 1, 9};
  unsigned char gz[sizeof u8 + 23];
  size_t gz_size;
  char path[1200], missing[1200];
  dp_tensor* t;
  tmp_path(path, sizeof path, "data.idx");
  tmp_path(missing, sizeof missing, "no_such.idx");

  t = NULL;
  CHECK(write_file(path, u8, sizeof u8));
  if (EXPECT_OK(dp_tensor_from_idx_file(path, &t))) {
    const uint8_t* v = (const uint8_t*)dp_tensor_data(t);
    CHECK(dp_tensor_dtype(t) == DP_DTYPE_UINT8 && dp_tensor_ndim(t) == 2);
    CHECK(dp_tensor_dims(t)[0] == 2 && dp_tensor_dims(t)[1] == 3);
    CHECK(v[0] == 1 && v[2] == 3 && v[3] == 250 && v[5] == 255);
    dp_tensor_free(t);
  }
  t = NULL;
  CHECK(write_file(path, i32, sizeof i32));
  if (EXPECT_OK(dp_tensor_from_idx_file(path, &t))) {
    const int32_t* v = (const int32_t*)dp_tensor_data(t);
    CHECK(dp_tensor_dtype(t) == DP_DTYPE_INT32 && dp_tensor_ndim(t) == 1 && dp_tensor_dims(t)[0] == 2);
    CHECK(v[0] == 7 && v[1] == -2);
    dp_tensor_free(t);
  }
  t = NULL;
  CHECK(write_file(path, f32, sizeof f32));
  if (EXPECT_OK(dp_tensor_from_idx_file(path, &t))) {
    CHECK(dp_tensor_dtype(t) == DP_DTYPE_FLOAT32 && *(const float*)dp_tensor_data(t) == 1.5f);
    dp_tensor_free(t);
  }

  /* The uint8 file gzip-compressed reads the same. */
  t = NULL;
  gz_size = gzip_stored(u8, sizeof u8, gz);
  CHECK(write_file(path, gz, gz_size));
  if (EXPECT_OK(dp_tensor_from_idx_file(path, &t))) {
    const uint8_t* v = (const uint8_t*)dp_tensor_data(t);
    CHECK(dp_tensor_ndim(t) == 2 && dp_tensor_dims(t)[0] == 2 && dp_tensor_dims(t)[1] == 3 && v[4] == 251);
    dp_tensor_free(t);
  }

  /* Every error names the file and leaves the out-parameter alone. */
  t = SENTINEL;
  CHECK(write_file(path, gz, gz_size - 12)); /* cut inside the stored data */
  EXPECT_ERR2(dp_tensor_from_idx_file(path, &t), DP_ERR_DATA_LOSS, path, "truncated");
  gz[15 + 13] ^= 0x40; /* a pixel: the CRC no longer matches */
  CHECK(write_file(path, gz, gz_size));
  EXPECT_ERR2(dp_tensor_from_idx_file(path, &t), DP_ERR_DATA_LOSS, path, "gzip");
  CHECK(write_file(path, u8, sizeof u8 - 1));
  EXPECT_ERR2(dp_tensor_from_idx_file(path, &t), DP_ERR_DATA_LOSS, path, "truncated");
  CHECK(write_file(path, u8, 6));
  EXPECT_ERR2(dp_tensor_from_idx_file(path, &t), DP_ERR_PARSE, path, "header is truncated");
  CHECK(write_file(path, bad_magic, sizeof bad_magic));
  EXPECT_ERR2(dp_tensor_from_idx_file(path, &t), DP_ERR_PARSE, path, "magic");
  CHECK(write_file(path, bad_type, sizeof bad_type));
  EXPECT_ERR2(dp_tensor_from_idx_file(path, &t), DP_ERR_PARSE, path, "element type");
  CHECK(write_file(path, "", 0));
  EXPECT_ERR2(dp_tensor_from_idx_file(path, &t), DP_ERR_PARSE, path, "empty");
  EXPECT_ERR(dp_tensor_from_idx_file(missing, &t), DP_ERR_NOT_FOUND, missing);
  EXPECT_ERR2(dp_tensor_from_idx_file(g_tmp_dir, &t), DP_ERR_IO, g_tmp_dir, "directory");
  EXPECT_ERR(dp_tensor_from_idx_file(NULL, &t), DP_ERR_INVALID_ARGUMENT, "path");
  EXPECT_ERR(dp_tensor_from_idx_file("", &t), DP_ERR_INVALID_ARGUMENT, "empty");
  EXPECT_ERR(dp_tensor_from_idx_file(path, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(t == SENTINEL);
  remove(path);
}

/* ------------------------------------------------------------------------ */
/* Memory: workspace limits, IDX headers announcing more than the file has   */

/* ------------------------------------------------------------------------ */
/* Checkpoints                                                               */
/* ------------------------------------------------------------------------ */

static int feed_iter(dp_workspace* ws, int64_t value) {
  const int64_t dims[1] = {1};
  dp_tensor* t = NULL;
  int ok;
  if (!EXPECT_OK(dp_tensor_create(DP_DTYPE_INT64, dims, 1, &value, sizeof value, &t))) return 0;
  ok = EXPECT_OK(dp_workspace_feed(ws, "optimizer/iter", t));
  dp_tensor_free(t);
  return ok;
}

static void test_checkpoint(void) {
  char path[1200], bad[1200];
  const int64_t wdims[2] = {2, 3};
  const float w[6] = {1, 2, 3, 4, 5, 6};
  const float zeros[6] = {0, 0, 0, 0, 0, 0};
  float got[6];
  const char* both[2] = {"w", "optimizer/iter"};
  const char* only_w[1] = {"w"};
  dp_workspace *ws = NULL, *fresh = NULL;
  dp_checkpoint_info* info = (dp_checkpoint_info*)SENTINEL;
  dp_checkpoint_save_options so, so_init;
  dp_checkpoint_load_options lo, lo_init;
  const dp_checkpoint_save_options so_macro = DP_CHECKPOINT_SAVE_OPTIONS_INIT;
  const dp_checkpoint_load_options lo_macro = DP_CHECKPOINT_LOAD_OPTIONS_INIT;
  FILE* f;

  memset(&so, 0, sizeof so);
  so.struct_size = (uint32_t)sizeof so;
  memset(&lo, 0, sizeof lo);
  lo.struct_size = (uint32_t)sizeof lo;
  dp_checkpoint_save_options_init(&so_init, sizeof so_init);
  dp_checkpoint_load_options_init(&lo_init, sizeof lo_init);
  CHECK(so_init.struct_size == sizeof so && so_init.model_name == NULL && so_init.iteration == 0 &&
        so_init.async_write_share == 0);
  CHECK(so_macro.struct_size == sizeof so && so_macro.model_name == NULL && so_macro.iteration == 0);
  CHECK(lo_init.struct_size == sizeof lo && lo_init.names == NULL && lo_init.lenient == 0 && lo_init.mmap == 0);
  CHECK(lo_macro.struct_size == sizeof lo && lo_macro.no_verify == 0);

  tmp_path(path, sizeof path, "ckpt.dpckpt");
  tmp_path(bad, sizeof bad, "ckpt_bad.dpckpt");
  if (!EXPECT_OK(dp_workspace_create(&ws)) || !EXPECT_OK(dp_workspace_create(&fresh))) goto done;
  if (!feed_floats(ws, "w", wdims, 2, w) || !feed_iter(ws, 17)) goto done;

  /* Save with the iteration taken from the counter, then read the header. */
  so.model_name = "tiny";
  if (!EXPECT_OK(dp_checkpoint_save(ws, both, 2, path, &so))) goto done;
  if (EXPECT_OK(dp_checkpoint_info_from_file(path, &info))) {
    CHECK(streq(dp_checkpoint_info_model_name(info), "tiny"));
    CHECK(streq(dp_checkpoint_info_dp_version(info), dp_version()));
    CHECK(dp_checkpoint_info_iteration(info) == 17);
    CHECK(dp_checkpoint_info_num_tensors(info) == 2);
    CHECK(streq(dp_checkpoint_info_tensor_name(info, 0), "w"));
    CHECK(dp_checkpoint_info_tensor_dtype(info, 0) == DP_DTYPE_FLOAT32);
    CHECK(dp_checkpoint_info_tensor_ndim(info, 0) == 2);
    CHECK(dp_checkpoint_info_tensor_dims(info, 0) != NULL && dp_checkpoint_info_tensor_dims(info, 0)[1] == 3);
    CHECK(dp_checkpoint_info_tensor_nbytes(info, 0) == sizeof w);
    CHECK(streq(dp_checkpoint_info_tensor_name(info, 1), "optimizer/iter"));
    CHECK(dp_checkpoint_info_tensor_dtype(info, 1) == DP_DTYPE_INT64);
    CHECK(dp_checkpoint_info_tensor_name(info, 2) == NULL);
    CHECK(dp_checkpoint_info_tensor_dims(info, 2) == NULL);
    CHECK(dp_checkpoint_info_tensor_nbytes(info, 2) == 0);
    dp_checkpoint_info_free(info);
  }
  CHECK(dp_checkpoint_info_num_tensors(NULL) == 0);
  CHECK(dp_checkpoint_info_iteration(NULL) == -1);
  CHECK(streq(dp_checkpoint_info_model_name(NULL), ""));
  dp_checkpoint_info_free(NULL);

  /* Strict loading into an empty workspace names the missing blob; lenient
   * creates it; a zeroed options struct and NULL are the same. */
  EXPECT_ERR2(dp_checkpoint_load(fresh, path, &lo), DP_ERR_NOT_FOUND, path, "'w'");
  EXPECT_ERR2(dp_checkpoint_load(fresh, path, NULL), DP_ERR_NOT_FOUND, path, "'w'");
  lo.lenient = 1;
  if (EXPECT_OK(dp_checkpoint_load(fresh, path, &lo)) && fetch_floats(fresh, "w", got, 6))
    CHECK(memcmp(got, w, sizeof w) == 0);
  /* Mapped, a subset, into existing blobs. */
  if (feed_floats(fresh, "w", wdims, 2, zeros)) {
    lo.lenient = 0;
    lo.mmap = 1;
    lo.names = only_w;
    lo.num_names = 1;
    if (EXPECT_OK(dp_checkpoint_load(fresh, path, &lo)) && fetch_floats(fresh, "w", got, 6))
      CHECK(memcmp(got, w, sizeof w) == 0);
  }
  /* A shape that does not match: nothing changes. */
  {
    const int64_t other[2] = {3, 2};
    if (feed_floats(fresh, "w", other, 2, zeros)) {
      EXPECT_ERR3(dp_checkpoint_load(fresh, path, NULL), DP_ERR_SHAPE, path, "'w'", "[2, 3]");
      if (fetch_floats(fresh, "w", got, 6)) CHECK(memcmp(got, zeros, sizeof zeros) == 0);
    }
  }
  /* Explicit iteration; every blob when names is NULL. */
  so.iteration = 5;
  if (EXPECT_OK(dp_checkpoint_save(ws, NULL, 0, path, &so)) &&
      EXPECT_OK(dp_checkpoint_info_from_file(path, &info))) {
    CHECK(dp_checkpoint_info_iteration(info) == 5);
    CHECK(dp_checkpoint_info_num_tensors(info) == 2);
    dp_checkpoint_info_free(info);
  }
  /* Without the counter among the saved blobs the iteration is unknown. */
  if (EXPECT_OK(dp_checkpoint_save(ws, only_w, 1, path, NULL)) &&
      EXPECT_OK(dp_checkpoint_info_from_file(path, &info))) {
    CHECK(dp_checkpoint_info_iteration(info) == -1);
    dp_checkpoint_info_free(info);
  }

  /* In the background: the same file; the wait's result repeats. */
  {
    dp_checkpoint_job* job = (dp_checkpoint_job*)SENTINEL;
    if (EXPECT_OK(dp_checkpoint_save_async(ws, both, 2, path, NULL, &job))) {
      EXPECT_OK(dp_checkpoint_wait(job, -1));
      EXPECT_OK(dp_checkpoint_wait(job, 0));
      dp_checkpoint_job_free(job);
      if (EXPECT_OK(dp_checkpoint_info_from_file(path, &info))) {
        CHECK(dp_checkpoint_info_num_tensors(info) == 2 && dp_checkpoint_info_iteration(info) == 17);
        dp_checkpoint_info_free(info);
      }
    }
    job = (dp_checkpoint_job*)SENTINEL;
    EXPECT_ERR(dp_checkpoint_save_async(ws, NULL, 0, path, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "out");
    {
      const char* missing[1] = {"missing"};
      EXPECT_ERR(dp_checkpoint_save_async(ws, missing, 1, path, NULL, &job), DP_ERR_NOT_FOUND, "'missing'");
    }
    CHECK(job == (dp_checkpoint_job*)SENTINEL);
    {
      char nodir[1300];
      snprintf(nodir, sizeof nodir, "%s/no_such_dir/x.dpckpt", g_tmp_dir);
      if (EXPECT_OK(dp_checkpoint_save_async(ws, both, 2, nodir, NULL, &job))) {
        EXPECT_ERR(dp_checkpoint_wait(job, -1), DP_ERR_IO, "no_such_dir");
        EXPECT_ERR(dp_checkpoint_wait(job, -1), DP_ERR_IO, "no_such_dir");
        dp_checkpoint_job_free(job);
      }
    }
    EXPECT_ERR(dp_checkpoint_wait(NULL, 0), DP_ERR_INVALID_ARGUMENT, "job");
    dp_checkpoint_job_free(NULL);
  }

  /* Paced background saves (async_write_share: 1 flat out, 0.5, 0 the
   * default, and a struct too old to have the field) write the same bytes as
   * a synchronous save; shares outside (0, 1] are refused at the call. */
  {
    char paced[1200];
    const double shares[4] = {1.0, 0.5, 0.0, 7.0};
    const double bad_shares[4] = {-0.5, 1.5, NAN, INFINITY};
    size_t ref_size = 0, got_size = 0, i;
    unsigned char *ref = NULL, *got;
    dp_checkpoint_save_options po = DP_CHECKPOINT_SAVE_OPTIONS_INIT;
    dp_checkpoint_job* job;
    tmp_path(paced, sizeof paced, "ckpt_paced.dpckpt");
    if (EXPECT_OK(dp_checkpoint_save(ws, both, 2, path, NULL)) && CHECK((ref = read_whole_file(path, &ref_size)) != NULL)) {
      for (i = 0; i < 4; ++i) {
        po.async_write_share = shares[i];
        po.struct_size = (uint32_t)(i == 3 ? offsetof(dp_checkpoint_save_options, async_write_share) : sizeof po);
        job = NULL;
        remove(paced);
        if (EXPECT_OK(dp_checkpoint_save_async(ws, both, 2, paced, &po, &job))) {
          EXPECT_OK(dp_checkpoint_wait(job, -1));
          dp_checkpoint_job_free(job);
          got = read_whole_file(paced, &got_size);
          CHECK(got != NULL && got_size == ref_size && memcmp(got, ref, ref_size) == 0);
          free(got);
        }
      }
    }
    free(ref);
    po.struct_size = (uint32_t)sizeof po;
    for (i = 0; i < 4; ++i) {
      po.async_write_share = bad_shares[i];
      job = (dp_checkpoint_job*)SENTINEL;
      EXPECT_ERR(dp_checkpoint_save_async(ws, both, 2, paced, &po, &job), DP_ERR_INVALID_ARGUMENT,
                 "async_write_share");
      CHECK(job == (dp_checkpoint_job*)SENTINEL);
    }
    /* Synchronous saves do not pace, but check the field as well. */
    EXPECT_ERR(dp_checkpoint_save(ws, both, 2, paced, &po), DP_ERR_INVALID_ARGUMENT, "async_write_share");
    po.async_write_share = 0.5;
    EXPECT_OK(dp_checkpoint_save(ws, both, 2, paced, &po));
    remove(paced);
  }

  /* Bad input: statuses naming what is wrong, out-parameters untouched. */
  info = (dp_checkpoint_info*)SENTINEL;
  f = fopen(bad, "wb");
  if (CHECK(f != NULL)) {
    fputs("not a checkpoint", f);
    fclose(f);
  }
  EXPECT_ERR2(dp_checkpoint_info_from_file(bad, &info), DP_ERR_PARSE, bad, "not a dp checkpoint");
  EXPECT_ERR2(dp_checkpoint_load(fresh, bad, NULL), DP_ERR_PARSE, bad, "not a dp checkpoint");
  remove(bad);
  EXPECT_ERR(dp_checkpoint_info_from_file(bad, &info), DP_ERR_NOT_FOUND, bad);
  CHECK(info == (dp_checkpoint_info*)SENTINEL);
  EXPECT_ERR(dp_checkpoint_info_from_file(NULL, &info), DP_ERR_INVALID_ARGUMENT, "path");
  EXPECT_ERR(dp_checkpoint_info_from_file(path, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(dp_checkpoint_save(NULL, NULL, 0, path, NULL), DP_ERR_INVALID_ARGUMENT, "workspace");
  EXPECT_ERR(dp_checkpoint_save(ws, NULL, 0, "", NULL), DP_ERR_INVALID_ARGUMENT, "path");
  EXPECT_ERR(dp_checkpoint_save(ws, NULL, 3, path, NULL), DP_ERR_INVALID_ARGUMENT, "names");
  {
    const char* missing[1] = {"missing"};
    EXPECT_ERR(dp_checkpoint_save(ws, missing, 1, path, NULL), DP_ERR_NOT_FOUND, "'missing'");
  }
  EXPECT_ERR(dp_checkpoint_save(ws, NULL, 0, g_tmp_dir, NULL), DP_ERR_IO, "directory");
  so.iteration = -2;
  EXPECT_ERR(dp_checkpoint_save(ws, NULL, 0, path, &so), DP_ERR_INVALID_ARGUMENT, "iteration");
  /* The counter is held to the same rule (-1 or >= 0) when it is recorded. */
  so.iteration = 0;
  if (feed_iter(ws, -3250000000000000000LL)) {
    EXPECT_ERR3(dp_checkpoint_save(ws, both, 2, path, &so), DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_save",
                "optimizer/iter", "iteration -3250000000000000000");
    feed_iter(ws, 17);
  }
  so.struct_size = 2;
  EXPECT_ERR(dp_checkpoint_save(ws, NULL, 0, path, &so), DP_ERR_INVALID_ARGUMENT, "struct_size");
  lo.struct_size = 4;
  EXPECT_ERR(dp_checkpoint_load(fresh, path, &lo), DP_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_ERR(dp_checkpoint_load(NULL, path, NULL), DP_ERR_INVALID_ARGUMENT, "workspace");
  EXPECT_ERR(dp_checkpoint_load(fresh, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "path");

done:
  remove(path);
  dp_workspace_free(ws);
  dp_workspace_free(fresh);
}

/* ------------------------------------------------------------------------ */

/* Runs the MLP of kInitJson / kMlpJson in a workspace capped at max_bytes
 * (0: unlimited) with a 256-row batch: its first FC output h is [256, 8],
 * 8192 bytes. */
static void run_mlp_with_limit(uint64_t max_bytes) {
  dp_workspace_options options = DP_WORKSPACE_OPTIONS_INIT;
  dp_workspace* ws = NULL;
  dp_net *init = NULL, *mlp = NULL;
  float* data = (float*)calloc(256 * 4, sizeof(float));
  const int64_t big[2] = {256, 4}, small[2] = {2, 4};
  dp_status* st;
  options.max_bytes = max_bytes;
  if (!CHECK(data != NULL) || !EXPECT_OK(dp_workspace_create_with_options(&options, &ws))) {
    free(data);
    return;
  }
  init = new_net(ws, kInitJson);
  mlp = new_net(ws, kMlpJson);
  if (init != NULL && mlp != NULL && EXPECT_OK(dp_net_run(init)) && feed_floats(ws, "data", big, 2, data)) {
    st = dp_net_run(mlp);
    if (max_bytes == 0) {
      EXPECT_OK(st);
    } else {
      /* Names the net, the op, the output blob, the limit and the bytes asked. */
      CHECK(strstr(dp_status_message(st), "8192") != NULL);
      CHECK(strstr(dp_status_message(st), "mlp") != NULL);
      EXPECT_ERR3(st, DP_ERR_OUT_OF_MEMORY, "op 0 (FC 'fc1')", "'h'", "4096");
      /* The workspace and the net stay usable: a small batch fits. */
      if (feed_floats(ws, "data", small, 2, data)) EXPECT_OK(dp_net_run(mlp));
    }
  }
  dp_net_free(mlp);
  dp_net_free(init);
  dp_workspace_free(ws);
  free(data);
}

static void test_workspace_memory_limit(void) {
  dp_workspace_options options = DP_WORKSPACE_OPTIONS_INIT;
  dp_workspace* ws = NULL;
  CHECK(options.struct_size == sizeof(dp_workspace_options) && options.max_bytes == 0);
  if (EXPECT_OK(dp_workspace_create_with_options(NULL, &ws))) dp_workspace_free(ws);
  ws = NULL;
  if (EXPECT_OK(dp_workspace_create_with_options(&options, &ws))) dp_workspace_free(ws);
  ws = (dp_workspace*)SENTINEL;
  options.struct_size = 4;
  EXPECT_ERR(dp_workspace_create_with_options(&options, &ws), DP_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_ERR(dp_workspace_create_with_options(NULL, NULL), DP_ERR_INVALID_ARGUMENT, "out");
  CHECK(ws == (dp_workspace*)SENTINEL);
  run_mlp_with_limit(4096);
  run_mlp_with_limit(0);
}

static void test_read_idx_huge_header(void) {
  /* float32 [1027423552]: the header announces 4,109,694,208 bytes, 320 follow. */
  unsigned char plain[328];
  unsigned char gz[sizeof plain + 23];
  size_t gz_size;
  char path[1200];
  dp_tensor* t = (dp_tensor*)SENTINEL;
  memset(plain, 0x41, sizeof plain);
  plain[0] = 0;
  plain[1] = 0;
  plain[2] = 0x0D;
  plain[3] = 1;
  plain[4] = 0x3D; /* 1027423552 = 0x3D3D3D40 */
  plain[5] = 0x3D;
  plain[6] = 0x3D;
  plain[7] = 0x40;
  tmp_path(path, sizeof path, "huge_header.idx");
  CHECK(write_file(path, plain, sizeof plain));
  EXPECT_ERR3(dp_tensor_from_idx_file(path, &t), DP_ERR_DATA_LOSS, path, "4109694208", "only 320 follow");
  gz_size = gzip_stored(plain, sizeof plain, gz);
  CHECK(write_file(path, gz, gz_size));
  EXPECT_ERR3(dp_tensor_from_idx_file(path, &t), DP_ERR_DATA_LOSS, path, "4109694208", "truncated");
  CHECK(t == (dp_tensor*)SENTINEL);
  remove(path);
}

typedef struct {
  const char* name;
  void (*fn)(void);
} test_case;

static const test_case kTests[] = {
    {"version", test_version},
    {"code_names", test_code_names},
    {"status_null", test_status_null},
    {"logging", test_logging},
    {"devices", test_devices},
    {"device_memory_stats", test_device_memory_stats},
    {"dtype_size", test_dtype_size},
    {"tensor_copy", test_tensor_copy},
    {"tensor_zero_scalar_empty", test_tensor_zero_scalar_empty},
    {"tensor_borrowed", test_tensor_borrowed},
    {"tensor_owned", test_tensor_owned},
    {"tensor_accessors_null", test_tensor_accessors_null},
    {"tensor_bad_inputs", test_tensor_bad_inputs},
    {"workspace_blobs", test_workspace_blobs},
    {"netdef_json_roundtrip", test_netdef_json_roundtrip},
    {"netdef_buffer_roundtrip", test_netdef_buffer_roundtrip},
    {"netdef_files", test_netdef_files},
    {"netdef_truncated_buffers", test_netdef_truncated_buffers},
    {"netdef_garbage_buffers", test_netdef_garbage_buffers},
    {"netdef_bit_flips", test_netdef_bit_flips},
    {"netdef_truncated_json", test_netdef_truncated_json},
    {"netdef_bad_json", test_netdef_bad_json},
    {"netdef_invalid_nets", test_netdef_invalid_nets},
    {"netdef_unknown_args", test_netdef_unknown_args},
    {"net_mlp", test_net_mlp},
    {"net_borrowed_input_not_written", test_net_borrowed_input_not_written},
    {"net_options", test_net_options},
    {"net_async_executor", test_net_async_executor},
    {"net_cuda_unavailable", test_net_cuda_unavailable},
    {"net_null_arguments", test_net_null_arguments},
    {"net_lifetimes", test_net_lifetimes},
    {"add_gradients", test_add_gradients},
    {"model_training", test_model_training},
    {"memory_modes", test_memory_modes},
    {"gradient_compression", test_gradient_compression},
    {"shard_optimizer_state", test_shard_optimizer_state},
    {"model_errors", test_model_errors},
    {"parallelize", test_parallelize},
    {"read_idx", test_read_idx},
    {"workspace_memory_limit", test_workspace_memory_limit},
    {"read_idx_huge_header", test_read_idx_huge_header},
    {"checkpoint", test_checkpoint},
};

int main(void) {
  size_t i;
  init_tmp_prefix();
  for (i = 0; i < sizeof kTests / sizeof kTests[0]; ++i) {
    int before = g_failures;
    kTests[i].fn();
    if (g_failures != before) fprintf(stderr, "FAILED: %s (%d failed checks)\n", kTests[i].name, g_failures - before);
  }
  return check_report();
}
