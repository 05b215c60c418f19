/*
 * The status audit: every error code dp.h documents, one table entry per
 * function and bad input: the call, the code dp.h promises, and what the
 * message must hold. Argument checks of a dp_* function start with its name
 * ("dp_loader_create: ") and name the parameter or field as dp.h spells it
 * ("options->keep_last", "json"); errors of the engine name the file, blob
 * or op instead. Every failing call must also leave its out-parameters as
 * they were.
 *
 * The conventions dp.h states once for all functions are audited on
 * representative calls: NULL handles and out-parameters, struct_size too
 * small or too large, NULL with a size of 0 (an empty input: its parse
 * error) against NULL with a nonzero size (INVALID_ARGUMENT).
 *
 * Strict C11 + POSIX (mkdtemp, a directory of its own for the files).
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include "check.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */
/* ------------------------------------------------------------------------ */

static const char* kNetJson =
    "{\"name\":\"audit\",\"external_inputs\":[\"x\"],\"ops\":["
    "{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"c\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]},"
    "{\"name\":\"value\",\"f\":1.5}]},"
    "{\"type\":\"Save\",\"inputs\":[\"c\"],\"args\":[{\"name\":\"path\",\"s\":\"unused.dpckpt\"},"
    "{\"name\":\"names\",\"strings\":[\"c\"]}]}]}";

/* Reads a blob nobody feeds. */
static const char* kUnfedJson =
    "{\"name\":\"unfed\",\"external_inputs\":[\"never_fed\"],\"ops\":["
    "{\"type\":\"Relu\",\"inputs\":[\"never_fed\"],\"outputs\":[\"z\"]}]}";

/* An op on a GPU this process does not have (cuda:63). */
static const char* kGpuJson =
    "{\"name\":\"gpu\",\"external_inputs\":[\"x\"],\"ops\":["
    "{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"g\"],\"device\":{\"type\":\"CUDA\",\"id\":63}}]}";

static const char* kUnknownOpJson = "{\"name\":\"bad\",\"ops\":[{\"type\":\"Relux\",\"outputs\":[\"y\"]}]}";

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
    "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.5}}";

static const char* kPlainModelJson =
    "{\"name\":\"plain\","
    "\"init_net\":{\"ops\":["
    "{\"type\":\"XavierFill\",\"outputs\":[\"w\"],\"args\":[{\"name\":\"shape\",\"ints\":[3,4]}]},"
    "{\"type\":\"ConstantFill\",\"outputs\":[\"b\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]}]}]},"
    "\"forward_net\":{\"ops\":["
    "{\"type\":\"FC\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"logits\"]},"
    "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"logits\",\"label\"],\"outputs\":[\"p\",\"loss\"]}]},"
    "\"params\":[\"w\",\"b\"],\"inputs\":[\"x\",\"label\"],\"losses\":[\"loss\"]}";

/* Lists a param that its init net does not create. */
static const char* kBadModelJson =
    "{\"name\":\"bad\","
    "\"init_net\":{\"ops\":["
    "{\"type\":\"ConstantFill\",\"outputs\":[\"b\"],\"args\":[{\"name\":\"shape\",\"ints\":[3]}]}]},"
    "\"forward_net\":{\"ops\":["
    "{\"type\":\"Relu\",\"inputs\":[\"b\"],\"outputs\":[\"loss\"]}]},"
    "\"params\":[\"b\",\"zz\"],\"losses\":[\"loss\"]}";

static char g_dir[512];                         /* this run's directory */
static char p_paced[600], p_short[600], p_ckpt[600], p_trunc[600], p_text[600], p_missing[600], p_missing_dir[600], p_idx_bad[600],
    p_idx_trunc[600], p_store[600], p_new[600];
static const char* const p_proc = "/proc/dp_status_audit.dpckpt"; /* a directory no file can be created in */

static dp_workspace* g_ws;   /* x: float [2, 3]; the parallel model's blobs after its init net */
static dp_workspace* g_fresh; /* empty */
static dp_workspace* g_big_ws; /* big: float [262145], where no net runs */
static dp_netdef* g_def;
static dp_netdef* g_unfed_def;
static dp_netdef* g_gpu_def;
static dp_net* g_unfed;
static dp_net* g_idle;
static dp_model* g_model;
static dp_model* g_plain;
static dp_parallel_model* g_pm;      /* cpu:2 */
static dp_parallel_model* g_pm_bmuf; /* two processes with BMUF, never run */
static dp_parallel_model* g_pm_alone; /* rank 1 of 2, whose rank 0 never comes */
static dp_tensor* g_t23;             /* float [2, 3] */
static dp_tensor* g_t3;              /* float [3] */
static dp_tensor* g_t4x1;            /* float [4, 1] */
static dp_tensor* g_i23;             /* int32 [2, 3] */
static const dp_argdef* g_value;     /* ConstantFill's FLOAT "value" */
static const dp_argdef* g_names;     /* Save's STRINGS "names" (one element) */
static dp_loader* g_loader;          /* over g_t4x1, batch 2 */
static char g_non_tensor[256];       /* a blob of g_ws holding something other than a tensor */
static int32_t g_cuda_devices;

static const int64_t kDims23[2] = {2, 3};
static const int64_t kDimsNeg[2] = {2, -1};
static const int64_t kDimsHuge[2] = {INT64_MAX / 2, 4}; /* bytes past SIZE_MAX */
static const int32_t kDup[2] = {0, 0};
static const int32_t kNegId[1] = {-1};
static const int32_t kTwo[2] = {0, 1};
static const char* const kX[1] = {"x"};
static const char* const kXX[2] = {"x", "x"};
static const char* const kEmptyName[1] = {""};
static const char* const kMissing[1] = {"missing_blob"};
static const char* const kNullName[1] = {NULL};
static const char* const kLosses[1] = {"y"};
static const char* const kNoSuchWrt[1] = {"c"};
static const char* const kLogitsTypo[1] = {"logist"};
static const char* const kLogitsTwice[2] = {"logits", "logits"};
static const char* const kParamOut[1] = {"w"};
static float g_floats[8];
static const dp_tensor* g_two_tensors[2];
static dp_loader_input g_cb_input;
static dp_loader_input g_cb_inputs2[2];

/* Option structs, reset to their defaults before each case. */
static dp_workspace_options o_wso;
static dp_net_options o_neto;
static dp_gradient_options o_grado;
static dp_training_options o_traino;
static dp_parallel_options o_par;
static dp_checkpoint_save_options o_save;
static dp_checkpoint_load_options o_load;
static dp_loader_options o_lo;
static dp_build_info o_bi;
static dp_optimizer_info o_opt;
static dp_inference_options o_info_opts;
static dp_onnx_import_options o_onnx_in;
static dp_onnx_export_options o_onnx_out;
static dp_optimizer_info o_onnx_opt;
/* A caller from a newer header: one byte past dp_net_options set. */
static struct {
  dp_net_options o;
  unsigned char newer[8];
} o_net_newer;

/* Out-parameters: sentinels before each case, checked after it. */
static dp_tensor* o_tensor;
static dp_workspace* o_ws;
static dp_netdef* o_def;
static dp_netdef* o_def2;
static dp_net* o_net;
static dp_model* o_model;
static dp_parallel_model* o_pm;
static dp_buffer* o_buf;
static dp_string_list* o_list;
static dp_checkpoint_info* o_info;
static dp_checkpoint_job* o_job;
static dp_loader* o_loader;
static dp_opschema* o_schema;
static int32_t o_i32;
static int64_t o_i64;
static double o_f64;
static const char* o_str;
static const int64_t* o_i64s;
static size_t o_size;
static float o_dst[6];
static dp_memory_stats o_ms;

#define INT_SENTINEL (-12345)

static void reset_outs(void) {
  o_tensor = SENTINEL;
  o_ws = SENTINEL;
  o_def = SENTINEL;
  o_def2 = SENTINEL;
  o_net = SENTINEL;
  o_model = SENTINEL;
  o_pm = SENTINEL;
  o_buf = SENTINEL;
  o_list = SENTINEL;
  o_info = SENTINEL;
  o_job = SENTINEL;
  o_loader = SENTINEL;
  o_schema = SENTINEL;
  o_i32 = INT_SENTINEL;
  o_i64 = INT_SENTINEL;
  o_f64 = INT_SENTINEL;
  o_str = SENTINEL;
  o_i64s = SENTINEL;
  o_size = 12345;
  memset(o_dst, 0x5a, sizeof o_dst);
  memset(&o_ms, 0x77, sizeof o_ms);
  o_ms.struct_size = sizeof o_ms;
}

static int outs_untouched(void) {
  float fresh[6];
  memset(fresh, 0x5a, sizeof fresh);
  return o_tensor == SENTINEL && o_ws == SENTINEL && o_def == SENTINEL && o_def2 == SENTINEL && o_net == SENTINEL &&
         o_model == SENTINEL && o_pm == SENTINEL && o_buf == SENTINEL && o_list == SENTINEL && o_info == SENTINEL &&
         o_job == SENTINEL && o_loader == SENTINEL && o_schema == SENTINEL && o_i32 == INT_SENTINEL && o_i64 == INT_SENTINEL &&
         o_f64 == INT_SENTINEL && o_str == SENTINEL && o_i64s == SENTINEL && o_size == 12345 &&
         memcmp(o_dst, fresh, sizeof fresh) == 0 && o_ms.allocated == 0x7777777777777777ull &&
         o_ms.peak == 0x7777777777777777ull && o_ms.reserved == 0x7777777777777777ull &&
         o_ms.raw_allocs == 0x7777777777777777ull && o_ms.raw_frees == 0x7777777777777777ull;
}

static void reset_options(void) {
  dp_workspace_options_init(&o_wso, sizeof o_wso);
  dp_net_options_init(&o_neto, sizeof o_neto);
  dp_gradient_options_init(&o_grado, sizeof o_grado);
  o_grado.losses = kLosses;
  o_grado.num_losses = 1;
  dp_training_options_init(&o_traino, sizeof o_traino);
  dp_parallel_options_init(&o_par, sizeof o_par);
  dp_checkpoint_save_options_init(&o_save, sizeof o_save);
  dp_checkpoint_load_options_init(&o_load, sizeof o_load);
  dp_loader_options_init(&o_lo, sizeof o_lo);
  o_lo.batch_size = 2;
  dp_inference_options_init(&o_info_opts, sizeof o_info_opts);
  dp_onnx_import_options_init(&o_onnx_in, sizeof o_onnx_in);
  dp_onnx_export_options_init(&o_onnx_out, sizeof o_onnx_out);
  memset(&o_onnx_opt, 0, sizeof o_onnx_opt);
  o_onnx_opt.struct_size = sizeof o_onnx_opt;
  memset(&o_bi, 0, sizeof o_bi);
  o_bi.struct_size = sizeof o_bi;
  memset(&o_opt, 0, sizeof o_opt);
  o_opt.struct_size = sizeof o_opt;
  memset(&g_cb_input, 0, sizeof g_cb_input);
  g_cb_input.blob = "cb";
  g_cb_input.dtype = DP_DTYPE_FLOAT32;
  g_cb_inputs2[0] = g_cb_input;
  g_cb_inputs2[1] = g_cb_input;
  g_two_tensors[0] = g_t4x1;
  g_two_tensors[1] = g_t4x1;
  memset(&o_net_newer, 0, sizeof o_net_newer);
  o_net_newer.o.struct_size = (uint32_t)sizeof o_net_newer;
  o_net_newer.newer[3] = 1;
}

/* A fill callback that fails, and one that waits for a flag (for TIMEOUT). */
static int32_t fill_fails(void* user_data, const int64_t* indices, size_t count, void* const* buffers,
                          const size_t* row_bytes, size_t num_inputs) {
  (void)user_data, (void)indices, (void)count, (void)buffers, (void)row_bytes, (void)num_inputs;
  return 42;
}

static atomic_int g_release_fill;
static int32_t fill_waits(void* user_data, const int64_t* indices, size_t count, void* const* buffers,
                          const size_t* row_bytes, size_t num_inputs) {
  (void)user_data, (void)indices, (void)count, (void)buffers, (void)row_bytes, (void)num_inputs;
  while (!atomic_load(&g_release_fill)) {
  }
  return 0;
}

/* dp_loader_next on a callback loader whose fill fails or outlasts timeout_ms. */
static dp_status* next_of_callback_loader(dp_loader_fill_fn fill, int32_t timeout_ms) {
  dp_loader* loader = NULL;
  dp_loader_options lo = DP_LOADER_OPTIONS_INIT;
  dp_status* st;
  lo.batch_size = 2;
  lo.prefetch = 1;
  lo.timeout_ms = timeout_ms;
  st = dp_loader_create_callback(g_fresh, &g_cb_input, 1, 4, fill, NULL, &lo, &loader);
  if (st != NULL) return st;
  st = dp_loader_next(loader, &o_i32);
  atomic_store(&g_release_fill, 1);
  dp_loader_free(loader);
  atomic_store(&g_release_fill, 0);
  return st;
}

/* probe(net) while a run started by dp_net_run_async on an async relu net
 * counts as running (until dp_net_wait collects it, however fast it was). */
static dp_status* while_running(dp_status* (*probe)(dp_net*)) {
  static const char* kJson =
      "{\"name\":\"busy\",\"external_inputs\":[\"x\"],\"ops\":["
      "{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"busy_y\"]}]}";
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_net_options o = DP_NET_OPTIONS_INIT;
  dp_status* st;
  o.executor = DP_EXECUTOR_ASYNC;
  o.num_workers = 1;
  if (!EXPECT_OK(dp_netdef_from_json(kJson, strlen(kJson), &def)) || !EXPECT_OK(dp_net_create(g_ws, def, &o, &net)) ||
      !EXPECT_OK(dp_net_run_async(net))) {
    dp_netdef_free(def);
    dp_net_free(net);
    return NULL;
  }
  st = probe(net);
  EXPECT_OK(dp_net_wait(net, -1));
  dp_net_free(net);
  dp_netdef_free(def);
  return st;
}
static dp_status* probe_run(dp_net* net) { return dp_net_run(net); }
static dp_status* probe_run_async(dp_net* net) { return dp_net_run_async(net); }
static dp_status* probe_trace(dp_net* net) { return dp_net_trace_json(net, &o_buf); }

/* dp_net_wait(0) during a run that lasts: rank 1 of 2 alone, whose init net
 * waits 500 ms in its rendezvous for rank 0. */
static dp_status* wait_on_lasting_run(void) {
  dp_netdef* init = NULL;
  dp_net* net = NULL;
  dp_net_options o = DP_NET_OPTIONS_INIT;
  dp_workspace* ws = NULL;
  dp_status* st = NULL;
  o.executor = DP_EXECUTOR_ASYNC;
  if (EXPECT_OK(dp_parallel_model_nets(g_pm_alone, &init, NULL, NULL)) && EXPECT_OK(dp_workspace_create(&ws)) &&
      EXPECT_OK(dp_net_create(ws, init, &o, &net)) && EXPECT_OK(dp_net_run_async(net))) {
    st = dp_net_wait(net, 0);
    EXPECT_CODE(dp_net_wait(net, -1), DP_ERR_TIMEOUT); /* rank 0 never came */
  }
  dp_net_free(net);
  dp_workspace_free(ws);
  dp_netdef_free(init);
  return st;
}

/* dp_checkpoint_wait(0) during a paced save (two pieces with a rest of about
 * 19 times the first's time between them). */
static dp_status* wait_on_paced_save(void) {
  static const char* const kBig[1] = {"big"};
  dp_checkpoint_save_options so = DP_CHECKPOINT_SAVE_OPTIONS_INIT;
  dp_checkpoint_job* job = NULL;
  dp_status* st;
  so.async_write_share = 0.05;
  st = dp_checkpoint_save_async(g_big_ws, kBig, 1, p_paced, &so, &job);
  if (st != NULL) return st;
  st = dp_checkpoint_wait(job, 0);
  EXPECT_OK(dp_checkpoint_wait(job, -1));
  dp_checkpoint_job_free(job);
  return st;
}

/* dp_checkpoint_wait on an async save into `path`, then the job freed. */
static dp_status* wait_of_async_save(const char* path) {
  dp_checkpoint_job* job = NULL;
  dp_status* st = dp_checkpoint_save_async(g_ws, kX, 1, path, NULL, &job);
  if (st != NULL) return st;
  st = dp_checkpoint_wait(job, -1);
  dp_checkpoint_job_free(job);
  return st;
}

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

/* X(id, call, expected code, substring, substring): each substring must be
 * in the message (NULL: none). */
#define AUDIT_CASES(X)                                                                                               \
  /* Status, logging, devices, threads, build information. */                                                        \
  X(device_count_type, dp_device_count(7, &o_i32), DP_ERR_INVALID_ARGUMENT, "dp_device_count: ", "device_type")      \
  X(device_count_out, dp_device_count(DP_DEVICE_CPU, NULL), DP_ERR_INVALID_ARGUMENT, "dp_device_count: ",           \
    "out_count")                                                                                                     \
  X(set_cpu_threads_negative, dp_set_cpu_threads(-1), DP_ERR_INVALID_ARGUMENT, "dp_set_cpu_threads: ", "max_threads") \
  X(build_info_null, dp_build_info_get(NULL), DP_ERR_INVALID_ARGUMENT, "dp_build_info_get: ", "out")                 \
  X(build_info_size, (o_bi.struct_size = 2, dp_build_info_get(&o_bi)), DP_ERR_INVALID_ARGUMENT,                      \
    "dp_build_info_get: ", "out->struct_size")                                                                       \
  X(memory_stats_type, dp_device_memory_stats(9, 0, &o_ms), DP_ERR_INVALID_ARGUMENT, "dp_device_memory_stats: ",     \
    "device_type")                                                                                                   \
  X(memory_stats_id, dp_device_memory_stats(DP_DEVICE_CPU, -1, &o_ms), DP_ERR_INVALID_ARGUMENT,                      \
    "dp_device_memory_stats: ", "device_id")                                                                         \
  X(memory_stats_out, dp_device_memory_stats(DP_DEVICE_CPU, 0, NULL), DP_ERR_INVALID_ARGUMENT,                       \
    "dp_device_memory_stats: ", "out")                                                                               \
  X(memory_stats_size, (o_ms.struct_size = 2, dp_device_memory_stats(DP_DEVICE_CPU, 0, &o_ms)),                     \
    DP_ERR_INVALID_ARGUMENT, "dp_device_memory_stats: ", "out->struct_size")                                         \
  X(memory_stats_gpu, dp_device_memory_stats(DP_DEVICE_CUDA, 63, &o_ms), DP_ERR_UNAVAILABLE,                         \
    "dp_device_memory_stats: ", "cuda:63")                                                                           \
  X(reset_peak_type, dp_device_reset_peak_memory(9, 0), DP_ERR_INVALID_ARGUMENT, "dp_device_reset_peak_memory: ",    \
    "device_type")                                                                                                   \
  X(reset_peak_id, dp_device_reset_peak_memory(DP_DEVICE_CUDA, -1), DP_ERR_INVALID_ARGUMENT,                         \
    "dp_device_reset_peak_memory: ", "device_id")                                                                    \
  X(reset_peak_gpu, dp_device_reset_peak_memory(DP_DEVICE_CUDA, 63), DP_ERR_UNAVAILABLE,                             \
    "dp_device_reset_peak_memory: ", "cuda:63")                                                                      \
  /* Tensors. */                                                                                                     \
  X(tensor_create_dtype, dp_tensor_create(99, kDims23, 2, NULL, 0, &o_tensor), DP_ERR_DTYPE, "dp_tensor_create: ",   \
    "dtype")                                                                                                         \
  X(tensor_create_negative_dim, dp_tensor_create(DP_DTYPE_FLOAT32, kDimsNeg, 2, NULL, 0, &o_tensor), DP_ERR_SHAPE,   \
    "dp_tensor_create: ", "dims")                                                                                    \
  X(tensor_create_overflow, dp_tensor_create(DP_DTYPE_FLOAT32, kDimsHuge, 2, NULL, 0, &o_tensor), DP_ERR_SHAPE,      \
    "dp_tensor_create: ", NULL)                                                                                      \
  X(tensor_create_null_dims, dp_tensor_create(DP_DTYPE_FLOAT32, NULL, 2, NULL, 0, &o_tensor),                        \
    DP_ERR_INVALID_ARGUMENT, "dp_tensor_create: ", "dims")                                                           \
  X(tensor_create_nbytes, dp_tensor_create(DP_DTYPE_FLOAT32, kDims23, 2, g_floats, 4, &o_tensor), DP_ERR_SHAPE,      \
    "dp_tensor_create: ", "nbytes")                                                                                  \
  X(tensor_create_out, dp_tensor_create(DP_DTYPE_FLOAT32, kDims23, 2, NULL, 0, NULL), DP_ERR_INVALID_ARGUMENT,       \
    "dp_tensor_create: ", "out")                                                                                     \
  X(tensor_borrowed_null_data, dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, kDims23, 2, NULL, 24, &o_tensor),         \
    DP_ERR_INVALID_ARGUMENT, "dp_tensor_create_borrowed: ", "data")                                                  \
  X(tensor_borrowed_misaligned,                                                                                      \
    dp_tensor_create_borrowed(DP_DTYPE_FLOAT32, kDims23 + 1, 1, (const char*)g_floats + 1, 12, &o_tensor),           \
    DP_ERR_INVALID_ARGUMENT, "dp_tensor_create_borrowed: ", "aligned")                                               \
  X(tensor_owned_nbytes, dp_tensor_create_owned(DP_DTYPE_FLOAT32, kDims23, 2, g_floats, 8, NULL, NULL, &o_tensor),   \
    DP_ERR_SHAPE, "dp_tensor_create_owned: ", "nbytes")                                                              \
  X(tensor_copy_to_size, dp_tensor_copy_to(g_t23, o_dst, 8), DP_ERR_SHAPE, "dp_tensor_copy_to: ", "nbytes")          \
  X(tensor_copy_to_null_dst, dp_tensor_copy_to(g_t23, NULL, 24), DP_ERR_INVALID_ARGUMENT, "dp_tensor_copy_to: ",     \
    "dst")                                                                                                           \
  X(tensor_copy_to_null, dp_tensor_copy_to(NULL, o_dst, 24), DP_ERR_INVALID_ARGUMENT, "dp_tensor_copy_to: ",         \
    "tensor")                                                                                                        \
  /* Workspaces. */                                                                                                  \
  X(workspace_create_out, dp_workspace_create(NULL), DP_ERR_INVALID_ARGUMENT, "dp_workspace_create: ", "out")        \
  X(workspace_options_small, (o_wso.struct_size = 4, dp_workspace_create_with_options(&o_wso, &o_ws)),               \
    DP_ERR_INVALID_ARGUMENT, "dp_workspace_create_with_options: ", "options->struct_size")                           \
  X(workspace_feed_null, dp_workspace_feed(NULL, "x", g_t23), DP_ERR_INVALID_ARGUMENT, "dp_workspace_feed: ",        \
    "workspace")                                                                                                     \
  X(workspace_feed_empty_name, dp_workspace_feed(g_ws, "", g_t23), DP_ERR_INVALID_ARGUMENT, "dp_workspace_feed: ",   \
    "name")                                                                                                          \
  X(workspace_feed_null_tensor, dp_workspace_feed(g_ws, "x", NULL), DP_ERR_INVALID_ARGUMENT, "dp_workspace_feed: ",  \
    "tensor")                                                                                                        \
  X(workspace_fetch_missing, dp_workspace_fetch(g_ws, "missing_blob", &o_tensor), DP_ERR_NOT_FOUND,                  \
    "'missing_blob'", NULL)                                                                        \
  X(workspace_fetch_empty, dp_workspace_fetch(g_ws, "declared_only", &o_tensor), DP_ERR_NOT_FOUND,                   \
    "'declared_only'", NULL)                                                                       \
  X(workspace_fetch_non_tensor, dp_workspace_fetch(g_ws, g_non_tensor, &o_tensor), DP_ERR_DTYPE,                     \
    g_non_tensor, NULL)                                                                            \
  X(workspace_has_blob_name, dp_workspace_has_blob(g_ws, NULL, &o_i32), DP_ERR_INVALID_ARGUMENT,                     \
    "dp_workspace_has_blob: ", "name")                                                                               \
  X(workspace_list_out, dp_workspace_list_blobs(g_ws, NULL, NULL), DP_ERR_INVALID_ARGUMENT,                          \
    "dp_workspace_list_blobs: ", "out")                                                                              \
  /* Net definitions: NULL with size 0 is an empty input, NULL with a size a bad argument. */                        \
  X(netdef_json_null_empty, dp_netdef_from_json(NULL, 0, &o_def), DP_ERR_PARSE, "dp_netdef_from_json: ", "empty")    \
  X(netdef_json_null_sized, dp_netdef_from_json(NULL, 10, &o_def), DP_ERR_INVALID_ARGUMENT, "dp_netdef_from_json: ", \
    "json")                                                                                                          \
  X(netdef_json_empty, dp_netdef_from_json("", 0, &o_def), DP_ERR_PARSE, "dp_netdef_from_json: ", "empty")           \
  X(netdef_json_malformed, dp_netdef_from_json("{", 1, &o_def), DP_ERR_PARSE, "net JSON", NULL)                      \
  X(netdef_json_invalid, dp_netdef_from_json(kUnknownOpJson, strlen(kUnknownOpJson), &o_def), DP_ERR_INVALID_NET,    \
    "'Relux'", NULL)                                                                                                 \
  X(netdef_json_out, dp_netdef_from_json(kNetJson, strlen(kNetJson), NULL), DP_ERR_INVALID_ARGUMENT,                 \
    "dp_netdef_from_json: ", "out")                                                                                  \
  X(netdef_buffer_null_empty, dp_netdef_from_buffer(NULL, 0, &o_def), DP_ERR_PARSE, "dp_netdef_from_buffer: ",       \
    "empty")                                                                                                         \
  X(netdef_buffer_null_sized, dp_netdef_from_buffer(NULL, 10, &o_def), DP_ERR_INVALID_ARGUMENT,                      \
    "dp_netdef_from_buffer: ", "data")                                                                               \
  X(netdef_buffer_garbage, dp_netdef_from_buffer("0123456789abcdef", 16, &o_def), DP_ERR_PARSE, "DPNT", NULL)        \
  X(netdef_file_missing, dp_netdef_from_file(p_missing, &o_def), DP_ERR_NOT_FOUND, p_missing, NULL)                  \
  X(netdef_file_directory, dp_netdef_from_file(g_dir, &o_def), DP_ERR_IO, g_dir, NULL)                               \
  X(netdef_file_garbage, dp_netdef_from_file(p_text, &o_def), DP_ERR_PARSE, p_text, NULL)                          \
  X(netdef_file_null, dp_netdef_from_file(NULL, &o_def), DP_ERR_INVALID_ARGUMENT, "dp_netdef_from_file: ", "path")   \
  X(netdef_to_json_null, dp_netdef_to_json(NULL, &o_buf), DP_ERR_INVALID_ARGUMENT, "dp_netdef_to_json: ", "netdef")  \
  /* Arguments of a definition. */                                                                                   \
  X(argdef_null, dp_argdef_get_float(NULL, &o_f64), DP_ERR_INVALID_ARGUMENT, "dp_argdef_get_float: ", "arg")         \
  X(argdef_out, dp_argdef_get_float(g_value, NULL), DP_ERR_INVALID_ARGUMENT, "dp_argdef_get_float: ", "out")         \
  X(argdef_kind, dp_argdef_get_int(g_value, &o_i64), DP_ERR_INVALID_ARGUMENT, "dp_argdef_get_int: ", "'value'")      \
  X(argdef_kind_list, dp_argdef_get_ints(g_value, &o_i64s, &o_size), DP_ERR_INVALID_ARGUMENT,                        \
    "dp_argdef_get_ints: ", "'value'")                                                                               \
  X(argdef_index, dp_argdef_get_string_at(g_names, 1, &o_str), DP_ERR_OUT_OF_RANGE, "dp_argdef_get_string_at: ",     \
    "'names'")                                                                                                       \
  X(argdef_net_kind, dp_argdef_get_net(g_value, &o_def), DP_ERR_INVALID_ARGUMENT, "dp_argdef_get_net: ", "'value'")  \
  X(argdef_net_index, dp_argdef_get_net_at(g_names, 0, &o_def), DP_ERR_INVALID_ARGUMENT, "dp_argdef_get_net_at: ",   \
    "'names'")                                                                                                       \
  /* Nets. */                                                                                                        \
  X(net_create_null_workspace, dp_net_create(NULL, g_def, NULL, &o_net), DP_ERR_INVALID_ARGUMENT, "dp_net_create: ", \
    "workspace")                                                                                                     \
  X(net_create_options_small, (o_neto.struct_size = 4, dp_net_create(g_ws, g_def, &o_neto, &o_net)),                 \
    DP_ERR_INVALID_ARGUMENT, "dp_net_create: ", "options->struct_size")                                              \
  X(net_create_options_newer, dp_net_create(g_ws, g_def, &o_net_newer.o, &o_net), DP_ERR_UNIMPLEMENTED,              \
    "dp_net_create: ", "options->struct_size")                                                                       \
  X(net_create_executor, (o_neto.executor = 9, dp_net_create(g_ws, g_def, &o_neto, &o_net)),                         \
    DP_ERR_INVALID_ARGUMENT, "dp_net_create: ", "options->executor")                                                 \
  X(net_create_workers, (o_neto.num_workers = 1025, dp_net_create(g_ws, g_def, &o_neto, &o_net)),                    \
    DP_ERR_INVALID_ARGUMENT, "dp_net_create: ", "options->num_workers")                                              \
  X(net_create_streams, (o_neto.streams_per_gpu = 65, dp_net_create(g_ws, g_def, &o_neto, &o_net)),                  \
    DP_ERR_INVALID_ARGUMENT, "dp_net_create: ", "options->streams_per_gpu")                                          \
  X(net_create_no_device, dp_net_create(g_ws, g_gpu_def, NULL, &o_net), DP_ERR_UNAVAILABLE, "cuda:63", "'gpu'")      \
  X(net_run_null, dp_net_run(NULL), DP_ERR_INVALID_ARGUMENT, "dp_net_run: ", "net")                                  \
  X(net_run_unfed, dp_net_run(g_unfed), DP_ERR_NOT_FOUND, "'unfed'", "'never_fed'")                                  \
  X(net_wait_not_started, dp_net_wait(g_idle, 0), DP_ERR_FAILED_PRECONDITION, "'audit'", "no run")                   \
  X(net_trace_out, dp_net_trace_json(g_idle, NULL), DP_ERR_INVALID_ARGUMENT, "dp_net_trace_json: ", "out")           \
  X(net_run_while_running, while_running(probe_run), DP_ERR_FAILED_PRECONDITION, "'busy'", "already running")        \
  X(net_run_async_while_running, while_running(probe_run_async), DP_ERR_FAILED_PRECONDITION, "'busy'",              \
    "already running")                                                                                               \
  X(net_trace_while_running, while_running(probe_trace), DP_ERR_FAILED_PRECONDITION, "'busy'", "in progress")        \
  X(net_wait_timeout, wait_on_lasting_run(), DP_ERR_TIMEOUT, "lin_parallel_init", "still running")                   \
  /* Gradients. */                                                                                                   \
  X(gradients_options_null, dp_netdef_add_gradients(g_def, NULL, &o_def, NULL), DP_ERR_INVALID_ARGUMENT,             \
    "dp_netdef_add_gradients: ", "options")                                                                          \
  X(gradients_options_small, (o_grado.struct_size = 4, dp_netdef_add_gradients(g_def, &o_grado, &o_def, NULL)),     \
    DP_ERR_INVALID_ARGUMENT, "dp_netdef_add_gradients: ", "options->struct_size")                                    \
  X(gradients_losses_null, (o_grado.losses = NULL, dp_netdef_add_gradients(g_def, &o_grado, &o_def, NULL)),          \
    DP_ERR_INVALID_ARGUMENT, "dp_netdef_add_gradients: ", "options->losses")                                         \
  X(gradients_no_losses, (o_grado.num_losses = 0, dp_netdef_add_gradients(g_def, &o_grado, &o_def, NULL)),           \
    DP_ERR_INVALID_ARGUMENT, "dp_netdef_add_gradients: ", "options->losses")                                         \
  X(gradients_wrt_unrelated,                                                                                         \
    (o_grado.wrt = kNoSuchWrt, o_grado.num_wrt = 1, dp_netdef_add_gradients(g_def, &o_grado, &o_def, NULL)),         \
    DP_ERR_INVALID_NET, "'c'", NULL)                                                                                 \
  /* Models. */                                                                                                      \
  X(model_json_null_empty, dp_model_from_json(NULL, 0, &o_model), DP_ERR_PARSE, "dp_model_from_json: ", "empty")     \
  X(model_json_null_sized, dp_model_from_json(NULL, 10, &o_model), DP_ERR_INVALID_ARGUMENT, "dp_model_from_json: ",  \
    "json")                                                                                                          \
  X(model_json_empty, dp_model_from_json("", 0, &o_model), DP_ERR_PARSE, "dp_model_from_json: ", "empty")            \
  X(model_json_malformed, dp_model_from_json("{", 1, &o_model), DP_ERR_PARSE, "model JSON", NULL)                    \
  X(model_buffer_null_empty, dp_model_from_buffer(NULL, 0, &o_model), DP_ERR_PARSE, "dp_model_from_buffer: ",        \
    "empty")                                                                                                         \
  X(model_buffer_null_sized, dp_model_from_buffer(NULL, 10, &o_model), DP_ERR_INVALID_ARGUMENT,                      \
    "dp_model_from_buffer: ", "data")                                                                                \
  X(model_buffer_garbage, dp_model_from_buffer("0123456789abcdef", 16, &o_model), DP_ERR_PARSE, "DPMD", NULL)        \
  X(model_file_missing, dp_model_from_file(p_missing, &o_model), DP_ERR_NOT_FOUND, p_missing, NULL)                  \
  X(model_file_directory, dp_model_from_file(g_dir, &o_model), DP_ERR_IO, g_dir, NULL)                               \
  X(model_invalid, dp_model_from_json(kBadModelJson, strlen(kBadModelJson), &o_model), DP_ERR_INVALID_NET, "'zz'",  \
    NULL)                                                                                                            \
  X(model_blobs_which, dp_model_blobs(g_model, 99, &o_list), DP_ERR_INVALID_ARGUMENT, "dp_model_blobs: ", "which")   \
  X(model_net_which, dp_model_net(g_model, 5, &o_def), DP_ERR_INVALID_ARGUMENT, "dp_model_net: ", "which")           \
  X(model_optimizer_none, dp_model_get_optimizer(g_plain, &o_opt), DP_ERR_NOT_FOUND, "dp_model_get_optimizer: ",     \
    "'plain'")                                                                                                       \
  X(model_optimizer_size, (o_opt.struct_size = 2, dp_model_get_optimizer(g_model, &o_opt)), DP_ERR_INVALID_ARGUMENT, \
    "dp_model_get_optimizer: ", "out->struct_size")                                                                  \
  X(training_options_small,                                                                                          \
    (o_traino.struct_size = 4, dp_model_build_training(g_model, &o_traino, &o_def, NULL, NULL)),                     \
    DP_ERR_INVALID_ARGUMENT, "dp_model_build_training: ", "options->struct_size")                                    \
  X(training_lr, (o_traino.lr = -1, dp_model_build_training(g_model, &o_traino, &o_def, NULL, NULL)),                \
    DP_ERR_INVALID_ARGUMENT, "dp_model_build_training: ", "options->lr")                                             \
  X(training_lr_no_optimizer, (o_traino.lr = 0.1, dp_model_build_training(g_plain, &o_traino, &o_def, NULL, NULL)),  \
    DP_ERR_INVALID_ARGUMENT, "dp_model_build_training: ", "options->lr")                                             \
  /* Inference nets (since 0.6). */                                                                                   \
  X(inference_model_null, dp_model_build_inference(NULL, kX, 1, NULL, &o_def), DP_ERR_INVALID_ARGUMENT,              \
    "dp_model_build_inference: ", "model")                                                                           \
  X(inference_out_null, dp_model_build_inference(g_model, kX, 1, NULL, NULL), DP_ERR_INVALID_ARGUMENT,               \
    "dp_model_build_inference: ", "out")                                                                             \
  X(inference_outputs_null, dp_model_build_inference(g_model, NULL, 1, NULL, &o_def), DP_ERR_INVALID_ARGUMENT,       \
    "dp_model_build_inference: ", "outputs")                                                                         \
  X(inference_options_small,                                                                                         \
    (o_info_opts.struct_size = 2, dp_model_build_inference(g_model, NULL, 0, &o_info_opts, &o_def)),                 \
    DP_ERR_INVALID_ARGUMENT, "dp_model_build_inference: ", "options->struct_size")                                   \
  X(inference_empty_name, dp_model_build_inference(g_model, kEmptyName, 1, NULL, &o_def), DP_ERR_INVALID_ARGUMENT,   \
    "model 'lin'", "output name is empty")                                                                           \
  X(inference_repeated, dp_model_build_inference(g_model, kLogitsTwice, 2, NULL, &o_def), DP_ERR_INVALID_ARGUMENT,   \
    "'logits'", "twice")                                                                                             \
  X(inference_unknown_output, dp_model_build_inference(g_model, kLogitsTypo, 1, NULL, &o_def), DP_ERR_NOT_FOUND,     \
    "'logist'", "did you mean 'logits'?")                                                                            \
  X(inference_param_output, dp_model_build_inference(g_model, kParamOut, 1, NULL, &o_def), DP_ERR_NOT_FOUND, "'w'",  \
    "param")                                                                                                         \
  /* ONNX (since 0.6): the argument checks, which builds without ONNX make too. */                                   \
  X(onnx_buffer_null_empty, dp_model_from_onnx_buffer(NULL, 0, NULL, &o_model), DP_ERR_PARSE,                         \
    "dp_model_from_onnx_buffer: ", "empty")                                                                          \
  X(onnx_buffer_null_sized, dp_model_from_onnx_buffer(NULL, 10, NULL, &o_model), DP_ERR_INVALID_ARGUMENT,             \
    "dp_model_from_onnx_buffer: ", "data")                                                                           \
  X(onnx_buffer_out_null, dp_model_from_onnx_buffer("0123", 4, NULL, NULL), DP_ERR_INVALID_ARGUMENT,                  \
    "dp_model_from_onnx_buffer: ", "out")                                                                            \
  X(onnx_import_options_small, (o_onnx_in.struct_size = 2, dp_model_from_onnx_buffer("0123", 4, &o_onnx_in, &o_model)), \
    DP_ERR_INVALID_ARGUMENT, "dp_model_from_onnx_buffer: ", "options->struct_size")                                  \
  X(onnx_import_head, (o_onnx_in.head = 7, dp_model_from_onnx_file(p_missing, &o_onnx_in, &o_model)),                 \
    DP_ERR_INVALID_ARGUMENT, "dp_model_from_onnx_file: ", "options->head")                                           \
  X(onnx_import_optimizer_type,                                                                                      \
    (o_onnx_in.optimizer = &o_onnx_opt, dp_model_from_onnx_file(p_missing, &o_onnx_in, &o_model)),                   \
    DP_ERR_INVALID_ARGUMENT, "dp_model_from_onnx_file: ", "options->optimizer->type")                                \
  X(onnx_file_null, dp_model_from_onnx_file(NULL, NULL, &o_model), DP_ERR_INVALID_ARGUMENT,                           \
    "dp_model_from_onnx_file: ", "path")                                                                             \
  X(onnx_to_model_null, dp_model_to_onnx(NULL, g_ws, NULL, &o_buf), DP_ERR_INVALID_ARGUMENT, "dp_model_to_onnx: ",    \
    "model")                                                                                                         \
  X(onnx_to_workspace_null, dp_model_to_onnx(g_model, NULL, NULL, &o_buf), DP_ERR_INVALID_ARGUMENT,                   \
    "dp_model_to_onnx: ", "workspace")                                                                               \
  X(onnx_to_out_null, dp_model_to_onnx(g_model, g_ws, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "dp_model_to_onnx: ",     \
    "out")                                                                                                           \
  X(onnx_export_options_small, (o_onnx_out.struct_size = 3, dp_model_to_onnx(g_model, g_ws, &o_onnx_out, &o_buf)),   \
    DP_ERR_INVALID_ARGUMENT, "dp_model_to_onnx: ", "options->struct_size")                                           \
  X(onnx_export_outputs_null, (o_onnx_out.num_outputs = 1, dp_model_to_onnx(g_model, g_ws, &o_onnx_out, &o_buf)),    \
    DP_ERR_INVALID_ARGUMENT, "dp_model_to_onnx: ", "options->outputs")                                               \
  X(onnx_save_path_null, dp_model_save_onnx(g_model, g_ws, NULL, NULL), DP_ERR_INVALID_ARGUMENT,                      \
    "dp_model_save_onnx: ", "path")                                                                                  \
  /* The op catalogue (since 0.6). */                                                                                \
  X(opschema_list_out_null, dp_opschema_list_types(NULL), DP_ERR_INVALID_ARGUMENT, "dp_opschema_list_types: ", "out") \
  X(opschema_type_null, dp_opschema_from_type(NULL, &o_schema), DP_ERR_INVALID_ARGUMENT, "dp_opschema_from_type: ",  \
    "type")                                                                                                          \
  X(opschema_out_null, dp_opschema_from_type("Relu", NULL), DP_ERR_INVALID_ARGUMENT, "dp_opschema_from_type: ",      \
    "out")                                                                                                           \
  X(opschema_unknown, dp_opschema_from_type("Relux", &o_schema), DP_ERR_NOT_FOUND, "'Relux'",                        \
    "did you mean 'Relu'?")                                                                                          \
  /* Data parallelism: bad options name the field. */                                                                \
  X(par_options_null, dp_model_parallelize(g_model, NULL, &o_pm), DP_ERR_INVALID_ARGUMENT,                           \
    "dp_model_parallelize: ", "options")                                                                             \
  X(par_options_small, (o_par.struct_size = 8, dp_model_parallelize(g_model, &o_par, &o_pm)),                        \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->struct_size")                                       \
  X(par_device_type, (o_par.device_type = 7, dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT, \
    "dp_model_parallelize: ", "options->device_type")                                                                \
  X(par_ids_null, (o_par.num_devices = 2, dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT,    \
    "dp_model_parallelize: ", "options->device_ids")                                                                 \
  X(par_ids_count, (o_par.device_ids = kTwo, dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT, \
    "dp_model_parallelize: ", "options->num_devices")                                                                \
  X(par_ids_negative,                                                                                                \
    (o_par.device_ids = kNegId, o_par.num_devices = 1, dp_model_parallelize(g_model, &o_par, &o_pm)),                \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->device_ids")                                        \
  X(par_ids_repeated, (o_par.device_ids = kDup, o_par.num_devices = 2, dp_model_parallelize(g_model, &o_par, &o_pm)), \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->device_ids")                                        \
  X(par_bucket, (o_par.bucket_bytes = -1, dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT,    \
    "dp_model_parallelize: ", "options->bucket_bytes")                                                               \
  X(par_first_bucket, (o_par.first_bucket_bytes = -1, dp_model_parallelize(g_model, &o_par, &o_pm)),                 \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->first_bucket_bytes")                                \
  X(par_accumulate, (o_par.accumulate_steps = -1, dp_model_parallelize(g_model, &o_par, &o_pm)),                     \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->accumulate_steps")                                  \
  X(par_lr, (o_par.lr = -1, dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT,                  \
    "dp_model_parallelize: ", "options->lr")                                                                         \
  X(par_bmuf_lr, (o_par.bmuf = 1, o_par.bmuf_block_lr = -1, dp_model_parallelize(g_model, &o_par, &o_pm)),           \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->bmuf_block_lr")                                     \
  X(par_bmuf_momentum, (o_par.bmuf = 1, o_par.bmuf_block_momentum = 1, dp_model_parallelize(g_model, &o_par, &o_pm)), \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->bmuf_block_momentum")                               \
  X(par_bmuf_length, (o_par.bmuf = 1, o_par.bmuf_block_length = -1, dp_model_parallelize(g_model, &o_par, &o_pm)),   \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->bmuf_block_length")                                 \
  X(par_bmuf_accumulate, (o_par.bmuf = 1, o_par.accumulate_steps = 2, dp_model_parallelize(g_model, &o_par, &o_pm)),  \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->accumulate_steps")                                  \
  X(par_bmuf_shared, (o_par.bmuf = 1, o_par.shared_model = 1, dp_model_parallelize(g_model, &o_par, &o_pm)),         \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->shared_model")                                      \
  X(par_bmuf_sync_bn, (o_par.bmuf = 1, o_par.sync_bn = 1, dp_model_parallelize(g_model, &o_par, &o_pm)),             \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->sync_bn")                                           \
  X(par_computed_params, (o_par.computed_params = 9, dp_model_parallelize(g_model, &o_par, &o_pm)),                  \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->computed_params")                                   \
  X(par_cuda_collectives, (o_par.cuda_collectives = 9, dp_model_parallelize(g_model, &o_par, &o_pm)),                \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->cuda_collectives")                                  \
  X(par_num_shards, (o_par.num_shards = -1, dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT,  \
    "dp_model_parallelize: ", "options->num_shards")                                                                 \
  X(par_shard_id, (o_par.num_shards = 2, o_par.shard_id = 2, dp_model_parallelize(g_model, &o_par, &o_pm)),          \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->shard_id")                                          \
  X(par_timeout, (o_par.timeout_ms = -1, dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT,     \
    "dp_model_parallelize: ", "options->timeout_ms")                                                                 \
  X(par_run_id, (o_par.run_id = "a/b", dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT,       \
    "dp_model_parallelize: ", "options->run_id")                                                                     \
  X(par_transport, (o_par.local_transport = "udp", dp_model_parallelize(g_model, &o_par, &o_pm)),                    \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->local_transport")                                   \
  X(par_no_store, (o_par.num_shards = 2, dp_model_parallelize(g_model, &o_par, &o_pm)), DP_ERR_INVALID_ARGUMENT,     \
    "dp_model_parallelize: ", "options->store")                                                                      \
  X(par_bad_store, (o_par.num_shards = 2, o_par.store = "ftp://x", dp_model_parallelize(g_model, &o_par, &o_pm)),    \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->store")                                             \
  X(par_uneven_shards,                                                                                               \
    (o_par.num_shards = 2, o_par.store = p_store, o_par.uneven_split = 1, dp_model_parallelize(g_model, &o_par, &o_pm)), \
    DP_ERR_INVALID_ARGUMENT, "dp_model_parallelize: ", "options->uneven_split")                                      \
  X(par_cuda, (o_par.device_type = DP_DEVICE_CUDA, dp_model_parallelize(g_model, &o_par, &o_pm)),                    \
    g_cuda_devices == 0 ? DP_ERR_UNAVAILABLE : DP_ERR_UNIMPLEMENTED, "dp_model_parallelize: ", NULL)                 \
  X(par_accumulate_net, dp_parallel_model_accumulate_net(g_pm, &o_def), DP_ERR_FAILED_PRECONDITION,                  \
    "dp_parallel_model_accumulate_net: ", "accumulate_steps")                                                        \
  X(par_block_net, dp_parallel_model_block_net(g_pm, &o_def, &o_i32), DP_ERR_FAILED_PRECONDITION,                    \
    "dp_parallel_model_block_net: ", "BMUF")                                                                         \
  X(par_nets_null, dp_parallel_model_nets(NULL, &o_def, NULL, NULL), DP_ERR_INVALID_ARGUMENT,                        \
    "dp_parallel_model_nets: ", "model")                                                                             \
  X(par_sync_missing, dp_parallel_model_sync(g_pm, g_fresh), DP_ERR_NOT_FOUND, "never fed", NULL)                         \
  X(par_join_bmuf, dp_parallel_model_join(g_pm_bmuf, g_fresh, &o_i64), DP_ERR_FAILED_PRECONDITION,                   \
    "dp_parallel_model_join: ", "BMUF")                                                                              \
  /* Checkpoints. */                                                                                                 \
  X(save_missing_blob, dp_checkpoint_save(g_ws, kMissing, 1, p_new, NULL), DP_ERR_NOT_FOUND, "'missing_blob'",       \
    p_new)                                                                                                           \
  X(save_non_tensor, dp_checkpoint_save(g_ws, (const char* const*)&g_non_tensor_ptr, 1, p_new, NULL), DP_ERR_DTYPE,  \
    g_non_tensor, NULL)                                                                                              \
  X(save_unwritable_dir, dp_checkpoint_save(g_ws, kX, 1, p_proc, NULL), DP_ERR_IO, "/proc", NULL)                    \
  X(save_missing_dir, dp_checkpoint_save(g_ws, kX, 1, p_missing_dir, NULL), DP_ERR_IO, "no_such_dir", NULL)          \
  X(save_directory, dp_checkpoint_save(g_ws, kX, 1, g_dir, NULL), DP_ERR_IO, g_dir, NULL)                            \
  X(save_path_null, dp_checkpoint_save(g_ws, kX, 1, NULL, NULL), DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_save: ",    \
    "path")                                                                                                          \
  X(save_path_empty, dp_checkpoint_save(g_ws, kX, 1, "", NULL), DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_save: ",     \
    "path")                                                                                                          \
  X(save_names_null, dp_checkpoint_save(g_ws, NULL, 1, p_new, NULL), DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_save: ", \
    "names")                                                                                                         \
  X(save_name_null, dp_checkpoint_save(g_ws, kNullName, 1, p_new, NULL), DP_ERR_INVALID_ARGUMENT,                    \
    "dp_checkpoint_save: ", "names[0]")                                                                              \
  X(save_options_small, (o_save.struct_size = 4, dp_checkpoint_save(g_ws, kX, 1, p_new, &o_save)),                   \
    DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_save: ", "options->struct_size")                                         \
  X(save_iteration, (o_save.iteration = -2, dp_checkpoint_save(g_ws, kX, 1, p_new, &o_save)),                        \
    DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_save: ", "options->iteration")                                           \
  X(save_write_share, (o_save.async_write_share = 2, dp_checkpoint_save(g_ws, kX, 1, p_new, &o_save)),               \
    DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_save: ", "options->async_write_share")                                   \
  X(save_async_missing_blob, dp_checkpoint_save_async(g_ws, kMissing, 1, p_new, NULL, &o_job), DP_ERR_NOT_FOUND,     \
    "'missing_blob'", NULL)                                                                                          \
  X(save_async_write_share, (o_save.async_write_share = -1, dp_checkpoint_save_async(g_ws, kX, 1, p_new, &o_save,    \
                                                                                     &o_job)),                       \
    DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_save_async: ", "options->async_write_share")                             \
  X(save_async_unwritable_dir, wait_of_async_save(p_proc), DP_ERR_IO, "/proc", NULL)                                 \
  X(save_async_missing_dir, wait_of_async_save(p_missing_dir), DP_ERR_IO, "no_such_dir", NULL)                       \
  X(checkpoint_wait_timeout, wait_on_paced_save(), DP_ERR_TIMEOUT, p_paced, "still being written")                     \
  X(checkpoint_wait_null, dp_checkpoint_wait(NULL, 0), DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_wait: ", "job")       \
  X(load_missing_file, dp_checkpoint_load(g_ws, p_missing, NULL), DP_ERR_NOT_FOUND, p_missing, NULL)                 \
  X(load_directory, dp_checkpoint_load(g_ws, g_dir, NULL), DP_ERR_IO, g_dir, NULL)                                   \
  X(load_not_checkpoint, dp_checkpoint_load(g_ws, p_text, NULL), DP_ERR_PARSE, p_text, NULL)                         \
  X(load_truncated, dp_checkpoint_load(g_ws, p_trunc, NULL), DP_ERR_DATA_LOSS, p_trunc, NULL)                        \
  X(load_strict_missing_blob, dp_checkpoint_load(g_fresh, p_ckpt, NULL), DP_ERR_NOT_FOUND, p_ckpt, "'x'")            \
  X(load_missing_name, (o_load.names = kMissing, o_load.num_names = 1, dp_checkpoint_load(g_ws, p_ckpt, &o_load)),   \
    DP_ERR_NOT_FOUND, p_ckpt, "'missing_blob'")                                                                      \
  X(load_names_null, (o_load.num_names = 1, dp_checkpoint_load(g_ws, p_ckpt, &o_load)), DP_ERR_INVALID_ARGUMENT,     \
    "dp_checkpoint_load: ", "options->names")                                                                        \
  X(load_options_small, (o_load.struct_size = 4, dp_checkpoint_load(g_ws, p_ckpt, &o_load)),                         \
    DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_load: ", "options->struct_size")                                         \
  X(load_dtype, dp_checkpoint_load(g_dtype_ws, p_ckpt, NULL), DP_ERR_DTYPE, p_ckpt, "'x'")                           \
  X(load_shape, dp_checkpoint_load(g_shape_ws, p_ckpt, NULL), DP_ERR_SHAPE, p_ckpt, "'x'")                           \
  X(info_missing, dp_checkpoint_info_from_file(p_missing, &o_info), DP_ERR_NOT_FOUND, p_missing, NULL)               \
  X(info_not_checkpoint, dp_checkpoint_info_from_file(p_text, &o_info), DP_ERR_PARSE, p_text, NULL)                  \
  X(info_truncated_header, dp_checkpoint_info_from_file(p_short, &o_info), DP_ERR_DATA_LOSS, p_short, NULL)         \
  X(info_out, dp_checkpoint_info_from_file(p_ckpt, NULL), DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_info_from_file: ", \
    "out")                                                                                                           \
  X(list_steps_missing, dp_checkpoint_list_steps(p_missing, &o_list), DP_ERR_NOT_FOUND, p_missing, NULL)             \
  X(list_steps_file, dp_checkpoint_list_steps(p_text, &o_list), DP_ERR_IO, p_text, NULL)                             \
  X(prune_keep, dp_checkpoint_prune(g_dir, -1), DP_ERR_INVALID_ARGUMENT, "dp_checkpoint_prune: ", "keep")            \
  X(prune_missing, dp_checkpoint_prune(p_missing, 1), DP_ERR_NOT_FOUND, p_missing, NULL)                             \
  X(checkpoint_blobs_out, dp_model_checkpoint_blobs(g_model, NULL), DP_ERR_INVALID_ARGUMENT,                         \
    "dp_model_checkpoint_blobs: ", "out")                                                                            \
  X(par_save_unwritable_dir, dp_parallel_model_save(g_pm, g_ws, p_proc, NULL), DP_ERR_IO, "/proc", NULL)             \
  X(par_save_missing_blob, dp_parallel_model_save(g_pm, g_fresh, p_new, NULL), DP_ERR_NOT_FOUND, "cpu_0/", NULL)     \
  X(par_save_options, (o_save.iteration = -5, dp_parallel_model_save(g_pm, g_ws, p_new, &o_save)),                   \
    DP_ERR_INVALID_ARGUMENT, "dp_parallel_model_save: ", "options->iteration")                                       \
  X(par_load_names, (o_load.names = kX, o_load.num_names = 1, dp_parallel_model_load(g_pm, g_ws, p_ckpt, &o_load)),  \
    DP_ERR_INVALID_ARGUMENT, "dp_parallel_model_load: ", "options->names")                                           \
  X(par_load_missing, dp_parallel_model_load(g_pm, g_ws, p_missing, NULL), DP_ERR_NOT_FOUND, p_missing, NULL)        \
  /* Data. */                                                                                                        \
  X(loader_options_null, dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, NULL, &o_loader),        \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options")                                                        \
  X(loader_options_small,                                                                                            \
    (o_lo.struct_size = 8, dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),    \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options->struct_size")                                           \
  X(loader_batch_size,                                                                                               \
    (o_lo.batch_size = 0, dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),     \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options->batch_size")                                            \
  X(loader_num_shards,                                                                                               \
    (o_lo.num_shards = -2, dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),    \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options->num_shards")                                            \
  X(loader_shard_id,                                                                                                 \
    (o_lo.num_shards = 2, o_lo.shard_id = 2,                                                                         \
     dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),                          \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options->shard_id")                                              \
  X(loader_batch_shards,                                                                                             \
    (o_lo.batch_size = 3, o_lo.num_shards = 2,                                                                       \
     dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),                          \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options->num_shards")                                            \
  X(loader_keep_last_shards,                                                                                         \
    (o_lo.keep_last = 1, o_lo.num_shards = 2,                                                                        \
     dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),                          \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options->keep_last")                                             \
  X(loader_prefetch,                                                                                                 \
    (o_lo.prefetch = 65, dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),      \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options->prefetch")                                              \
  X(loader_timeout,                                                                                                  \
    (o_lo.timeout_ms = -1, dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),    \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "options->timeout_ms")                                            \
  X(loader_no_full_batch,                                                                                            \
    (o_lo.batch_size = 5, dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader)),     \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "batch_size 5")                                                   \
  X(loader_empty_name, dp_loader_create(g_fresh, kEmptyName, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &o_loader), \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "blob_names[0]")                                                  \
  X(loader_repeated_name, dp_loader_create(g_fresh, kXX, g_two_tensors, 2, &o_lo, &o_loader),                        \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "blob_names[1]")                                                  \
  X(loader_dim0, (g_two_tensors[1] = g_t23, dp_loader_create(g_fresh, kLoaderNames, g_two_tensors, 2, &o_lo,        \
                                                             &o_loader)),                                            \
    DP_ERR_SHAPE, "dp_loader_create: ", "tensors[1]")                                                                \
  X(loader_no_inputs, dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 0, &o_lo, &o_loader),          \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create: ", "num_inputs")                                                     \
  X(loader_cb_samples, dp_loader_create_callback(g_fresh, &g_cb_input, 1, 0, fill_fails, NULL, &o_lo, &o_loader),    \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create_callback: ", "num_samples")                                           \
  X(loader_cb_dtype, (g_cb_input.dtype = 99, dp_loader_create_callback(g_fresh, &g_cb_input, 1, 4, fill_fails, NULL, \
                                                                       &o_lo, &o_loader)),                           \
    DP_ERR_DTYPE, "dp_loader_create_callback: ", "inputs[0].dtype")                                                  \
  X(loader_cb_repeated, dp_loader_create_callback(g_fresh, g_cb_inputs2, 2, 4, fill_fails, NULL, &o_lo, &o_loader),  \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create_callback: ", "inputs[1].blob")                                        \
  X(loader_cb_batch_size,                                                                                            \
    (o_lo.batch_size = -1,                                                                                           \
     dp_loader_create_callback(g_fresh, &g_cb_input, 1, 4, fill_fails, NULL, &o_lo, &o_loader)),                     \
    DP_ERR_INVALID_ARGUMENT, "dp_loader_create_callback: ", "options->batch_size")                                   \
  X(loader_next_fill_fails, next_of_callback_loader(fill_fails, 0), DP_ERR_INTERNAL, "batch 0", "42")       \
  X(loader_next_timeout, next_of_callback_loader(fill_waits, 50), DP_ERR_TIMEOUT, "batch 0", "50 ms")      \
  X(loader_next_out, dp_loader_next(g_loader, NULL), DP_ERR_INVALID_ARGUMENT, "dp_loader_next: ", "out_fed")         \
  X(loader_seek_step, dp_loader_seek(g_loader, 0, 2), DP_ERR_OUT_OF_RANGE, "dp_loader_seek: ", "step")               \
  X(loader_seek_epoch, dp_loader_seek(g_loader, -1, 0), DP_ERR_OUT_OF_RANGE, "dp_loader_seek: ", "epoch")            \
  X(idx_missing, dp_tensor_from_idx_file(p_missing, &o_tensor), DP_ERR_NOT_FOUND, p_missing, NULL)                   \
  X(idx_directory, dp_tensor_from_idx_file(g_dir, &o_tensor), DP_ERR_IO, g_dir, NULL)                                \
  X(idx_bad_header, dp_tensor_from_idx_file(p_idx_bad, &o_tensor), DP_ERR_PARSE, p_idx_bad, NULL)                    \
  X(idx_truncated, dp_tensor_from_idx_file(p_idx_trunc, &o_tensor), DP_ERR_DATA_LOSS, p_idx_trunc, NULL)             \
  X(idx_path_empty, dp_tensor_from_idx_file("", &o_tensor), DP_ERR_INVALID_ARGUMENT, "dp_tensor_from_idx_file: ",    \
    "path")

/* Workspaces whose blob x disagrees with the checkpoint's float [2, 3]. */
static dp_workspace* g_dtype_ws;
static dp_workspace* g_shape_ws;
static const char* g_non_tensor_ptr = g_non_tensor;
static const char* const kLoaderNames[2] = {"a", "b"};

#define DEFINE_CALL(id, call, code, s1, s2) \
  static dp_status* call_##id(void) { return (call); }
AUDIT_CASES(DEFINE_CALL)

struct audit_case {
  const char* id;
  dp_status* (*call)(void);
  int32_t code;
  const char* s1;
  const char* s2;
};

#define CASE_ENTRY(id, call, code, s1, s2) {#id, call_##id, (code), (s1), (s2)},

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */

static int write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  size_t n;
  if (f == NULL) return 0;
  n = fwrite(data, 1, size, f);
  return fclose(f) == 0 && n == size;
}

/* The first `size` bytes of `from` into `to`. */
static int copy_prefix(const char* from, const char* to, size_t size) {
  unsigned char buf[4096];
  FILE* f = fopen(from, "rb");
  size_t n;
  if (f == NULL) return 0;
  n = fread(buf, 1, size < sizeof buf ? size : sizeof buf, f);
  fclose(f);
  return n == size && write_file(to, buf, n);
}

static long file_size(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static dp_tensor* new_tensor(int32_t dtype, const int64_t* dims, size_t ndim) {
  dp_tensor* t = NULL;
  EXPECT_OK(dp_tensor_create(dtype, dims, ndim, NULL, 0, &t));
  return t;
}

static dp_workspace* workspace_with_x(dp_tensor* x) {
  dp_workspace* ws = NULL;
  if (EXPECT_OK(dp_workspace_create(&ws))) EXPECT_OK(dp_workspace_feed(ws, "x", x));
  return ws;
}

static int set_up(void) {
  const char* tmp = getenv("TMPDIR");
  static const unsigned char kIdxBad[8] = {1, 2, 3, 4, 0, 0, 0, 1};
  static const unsigned char kIdxTrunc[12] = {0, 0, 8, 1, 0, 0, 0, 100, 1, 2, 3, 4}; /* 100 bytes promised */
  static const int64_t kDims4x1[2] = {4, 1}, kDims3[1] = {3}, kDims32[2] = {3, 2};
  dp_netdef* net_def = NULL;
  dp_netdef* par_init = NULL;
  dp_net* par_init_net = NULL;
  dp_string_list* blobs = NULL;
  dp_parallel_options po;
  const dp_opdef* op;
  size_t i;
  int ok = 1;

  snprintf(g_dir, sizeof g_dir, "%s/dp_status_audit_XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (!CHECK(mkdtemp(g_dir) != NULL)) return 0;
  snprintf(p_ckpt, sizeof p_ckpt, "%s/x.dpckpt", g_dir);
  snprintf(p_trunc, sizeof p_trunc, "%s/truncated.dpckpt", g_dir);
  snprintf(p_short, sizeof p_short, "%s/short.dpckpt", g_dir);
  snprintf(p_paced, sizeof p_paced, "%s/paced.dpckpt", g_dir);
  snprintf(p_text, sizeof p_text, "%s/text.txt", g_dir);
  snprintf(p_missing, sizeof p_missing, "%s/missing_file", g_dir);
  snprintf(p_missing_dir, sizeof p_missing_dir, "%s/no_such_dir/x.dpckpt", g_dir);
  snprintf(p_idx_bad, sizeof p_idx_bad, "%s/bad.idx", g_dir);
  snprintf(p_idx_trunc, sizeof p_idx_trunc, "%s/truncated.idx", g_dir);
  snprintf(p_store, sizeof p_store, "file://%s/store", g_dir);
  snprintf(p_new, sizeof p_new, "%s/new.dpckpt", g_dir);
  ok &= CHECK(write_file(p_text, "not a checkpoint, long enough to have a header's size\n", 54));
  ok &= CHECK(write_file(p_idx_bad, kIdxBad, sizeof kIdxBad));
  ok &= CHECK(write_file(p_idx_trunc, kIdxTrunc, sizeof kIdxTrunc));

  for (i = 0; i < 8; ++i) g_floats[i] = (float)i;
  g_t23 = new_tensor(DP_DTYPE_FLOAT32, kDims23, 2);
  g_t3 = new_tensor(DP_DTYPE_FLOAT32, kDims3, 1);
  g_t4x1 = new_tensor(DP_DTYPE_FLOAT32, kDims4x1, 2);
  g_i23 = new_tensor(DP_DTYPE_INT32, kDims23, 2);
  g_ws = workspace_with_x(g_t23);
  g_dtype_ws = workspace_with_x(g_i23);
  {
    dp_tensor* t32 = new_tensor(DP_DTYPE_FLOAT32, kDims32, 2);
    g_shape_ws = workspace_with_x(t32);
    dp_tensor_free(t32);
  }
  ok &= EXPECT_OK(dp_workspace_create(&g_fresh));
  {
    /* 1 MiB and 4 bytes: a paced save writes it in two pieces. */
    static const int64_t kBigDims[1] = {262145};
    dp_tensor* big = new_tensor(DP_DTYPE_FLOAT32, kBigDims, 1);
    ok &= EXPECT_OK(dp_workspace_create(&g_big_ws));
    ok &= EXPECT_OK(dp_workspace_feed(g_big_ws, "big", big));
    dp_tensor_free(big);
  }
  ok &= EXPECT_OK(dp_checkpoint_save(g_ws, kX, 1, p_ckpt, NULL));
  ok &= CHECK(file_size(p_ckpt) > 64 && copy_prefix(p_ckpt, p_trunc, (size_t)file_size(p_ckpt) - 8));
  ok &= CHECK(copy_prefix(p_ckpt, p_short, 40));

  ok &= EXPECT_OK(dp_netdef_from_json(kNetJson, strlen(kNetJson), &g_def));
  ok &= EXPECT_OK(dp_netdef_from_json(kUnfedJson, strlen(kUnfedJson), &g_unfed_def));
  ok &= EXPECT_OK(dp_netdef_from_json(kGpuJson, strlen(kGpuJson), &g_gpu_def));
  if (!ok) return 0;
  op = dp_netdef_op(g_def, 1);
  g_value = dp_opdef_find_arg(op, "value");
  g_names = dp_opdef_find_arg(dp_netdef_op(g_def, 2), "names");
  ok &= CHECK(g_value != NULL && g_names != NULL);
  ok &= EXPECT_OK(dp_net_create(g_fresh, g_unfed_def, NULL, &g_unfed));
  ok &= EXPECT_OK(dp_net_create(g_ws, g_def, NULL, &g_idle));
  {
    /* A blob a net declares but nothing has written: it exists, empty. */
    static const char* kDeclJson =
        "{\"name\":\"decl\",\"external_inputs\":[\"declared_only\"],\"ops\":["
        "{\"type\":\"Relu\",\"inputs\":[\"declared_only\"],\"outputs\":[\"d\"]}]}";
    dp_net* decl = NULL;
    ok &= EXPECT_OK(dp_netdef_from_json(kDeclJson, strlen(kDeclJson), &net_def));
    ok &= EXPECT_OK(dp_net_create(g_ws, net_def, NULL, &decl));
    dp_net_free(decl);
    dp_netdef_free(net_def);
  }

  ok &= EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &g_model));
  ok &= EXPECT_OK(dp_model_from_json(kPlainModelJson, strlen(kPlainModelJson), &g_plain));
  ok &= EXPECT_OK(dp_device_count(DP_DEVICE_CUDA, &g_cuda_devices));
  if (!ok) return 0;
  dp_parallel_options_init(&po, sizeof po);
  po.device_ids = kTwo;
  po.num_devices = 2;
  ok &= EXPECT_OK(dp_model_parallelize(g_model, &po, &g_pm));
  dp_parallel_options_init(&po, sizeof po);
  po.bmuf = 1;
  po.num_shards = 2;
  po.store = p_store;
  ok &= EXPECT_OK(dp_model_parallelize(g_model, &po, &g_pm_bmuf));
  dp_parallel_options_init(&po, sizeof po);
  po.num_shards = 2;
  po.shard_id = 1;
  po.store = p_store;
  po.timeout_ms = 500;
  ok &= EXPECT_OK(dp_model_parallelize(g_model, &po, &g_pm_alone));
  if (!ok) return 0;
  /* The parallel init net in g_ws: its communicator is a blob that holds no tensor. */
  ok &= EXPECT_OK(dp_parallel_model_nets(g_pm, &par_init, NULL, NULL));
  ok &= EXPECT_OK(dp_net_create(g_ws, par_init, NULL, &par_init_net));
  ok &= EXPECT_OK(dp_net_run(par_init_net));
  dp_net_free(par_init_net);
  dp_netdef_free(par_init);
  if (ok && EXPECT_OK(dp_workspace_list_blobs(g_ws, NULL, &blobs))) {
    for (i = 0; i < dp_string_list_size(blobs) && g_non_tensor[0] == '\0'; ++i) {
      dp_tensor* t = NULL;
      dp_status* st = dp_workspace_fetch(g_ws, dp_string_list_get(blobs, i), &t);
      if (dp_status_code(st) == DP_ERR_DTYPE)
        snprintf(g_non_tensor, sizeof g_non_tensor, "%s", dp_string_list_get(blobs, i));
      dp_status_free(st);
      dp_tensor_free(t);
    }
  }
  dp_string_list_free(blobs);
  ok &= CHECK(g_non_tensor[0] != '\0');
  ok &= EXPECT_OK(dp_loader_create(g_fresh, kX, (const dp_tensor* const*)&g_t4x1, 1, &o_lo, &g_loader));
  return ok;
}

static void tear_down(void) {
  char cmd[700];
  dp_loader_free(g_loader);
  dp_net_free(g_unfed);
  dp_net_free(g_idle);
  dp_parallel_model_free(g_pm);
  dp_parallel_model_free(g_pm_bmuf);
  dp_parallel_model_free(g_pm_alone);
  dp_model_free(g_model);
  dp_model_free(g_plain);
  dp_netdef_free(g_def);
  dp_netdef_free(g_unfed_def);
  dp_netdef_free(g_gpu_def);
  dp_workspace_free(g_ws);
  dp_workspace_free(g_fresh);
  dp_workspace_free(g_big_ws);
  dp_workspace_free(g_dtype_ws);
  dp_workspace_free(g_shape_ws);
  dp_tensor_free(g_t23);
  dp_tensor_free(g_t3);
  dp_tensor_free(g_t4x1);
  dp_tensor_free(g_i23);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  CHECK(system(cmd) == 0);
}

int main(void) {
  static const char* const kEnv[] = {"DP_WORLD_SIZE", "DP_RANK",      "DP_STORE",          "DP_TIMEOUT_MS",
                                     "DP_INTERFACE",  "DP_RUN_ID",    "DP_LOCAL_TRANSPORT"};
  size_t i;
  /* The several-processes fallbacks must not change what the options say. */
  for (i = 0; i < sizeof kEnv / sizeof kEnv[0]; ++i) unsetenv(kEnv[i]);
  reset_options();
  if (set_up()) {
    struct audit_case cases[] = {AUDIT_CASES(CASE_ENTRY)};
    for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
      dp_status* st;
      int32_t code;
      reset_options();
      reset_outs();
      st = cases[i].call();
      code = dp_status_code(st);
      if (!expect_status(__FILE__, __LINE__, cases[i].id, st, cases[i].code, cases[i].s1, cases[i].s2, NULL))
        fprintf(stderr, "  (case %s)\n", cases[i].id);
      if (code != DP_OK && !CHECK(outs_untouched())) fprintf(stderr, "  (case %s changed an out-parameter)\n", cases[i].id);
    }
    /* The failed saves left no file, temporary or not, behind. */
    CHECK(file_size(p_new) < 0);
  }
  tear_down();
  return check_report();
}
