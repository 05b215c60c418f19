/*
 * ONNX through the C API (since 0.6), from strict C11: a model trained a few
 * steps is exported with its params and an example batch (dp_model_to_onnx),
 * saved atomically (dp_model_save_onnx), imported from the file and from the
 * bytes, and computes the same logits and softmax bit for bit in a workspace
 * of its own; imported with a head and an optimizer it trains, over two CPU
 * replicas as on one device; bad paths
 * and bytes are the documented errors. A build without ONNX (tools/test.sh
 * runs this test in one) must say so in its build info and from every call.
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* x [16, 4] -> FC -> logits [16, 3] -> SoftmaxWithLoss (p, loss), Accuracy. */
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

/* 16 samples of 4 features whose class (of 3) is the largest of the first three. */
static int feed_batch(dp_workspace* ws) {
  float x[16 * 4];
  int32_t label[16];
  const int64_t xd[2] = {16, 4}, ld[1] = {16};
  dp_tensor *tx = NULL, *tl = NULL;
  int i, k, ok;
  for (i = 0; i < 16; ++i) {
    int best = 0;
    for (k = 0; k < 4; ++k) x[i * 4 + k] = (float)((i * 7 + k * 13) % 17) / 8.0f - 1.0f;
    for (k = 1; k < 3; ++k)
      if (x[i * 4 + k] > x[i * 4 + best]) best = k;
    label[i] = best;
  }
  ok = EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, xd, 2, x, sizeof x, &tx)) &&
       EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, ld, 1, label, sizeof label, &tl)) &&
       EXPECT_OK(dp_workspace_feed(ws, "x", tx)) && EXPECT_OK(dp_workspace_feed(ws, "label", tl));
  dp_tensor_free(tx);
  dp_tensor_free(tl);
  return ok;
}

/* Five steps of `init` then `train` on feed_batch's batch; `param` (12
 * floats) after them into out. */
static int train_five(const dp_netdef* init, const dp_netdef* train, const char* param, float* out) {
  dp_workspace* ws = NULL;
  dp_net *init_net = NULL, *train_net = NULL;
  dp_tensor* w = NULL;
  int i, ok = EXPECT_OK(dp_workspace_create(&ws)) && EXPECT_OK(dp_net_create(ws, init, NULL, &init_net)) &&
              EXPECT_OK(dp_net_run(init_net)) && feed_batch(ws) && EXPECT_OK(dp_net_create(ws, train, NULL, &train_net));
  for (i = 0; ok && i < 5; ++i) ok = EXPECT_OK(dp_net_run(train_net));
  ok = ok && EXPECT_OK(dp_workspace_fetch(ws, param, &w)) && CHECK(dp_tensor_nbytes(w) == 12 * sizeof(float)) &&
       EXPECT_OK(dp_tensor_copy_to(w, out, 12 * sizeof(float)));
  dp_tensor_free(w);
  dp_net_free(train_net);
  dp_net_free(init_net);
  dp_workspace_free(ws);
  return ok;
}

/* An imported model trains like any other: over two CPU replicas of half
 * the batch each as on one device (the same W after five steps, to float
 * tolerance). */
static void check_trains_in_parallel(const dp_model* model) {
  dp_netdef *init = NULL, *train = NULL, *pinit = NULL, *ptrain = NULL;
  dp_parallel_model* pm = NULL;
  dp_parallel_options po = DP_PARALLEL_OPTIONS_INIT;
  const int32_t ids[2] = {0, 1};
  float one[12], two[12];
  int i;
  po.device_ids = ids;
  po.num_devices = 2;
  if (EXPECT_OK(dp_model_build_training(model, NULL, &init, &train, NULL)) && train_five(init, train, "w", one) &&
      EXPECT_OK(dp_model_parallelize(model, &po, &pm)) &&
      EXPECT_OK(dp_parallel_model_nets(pm, &pinit, &ptrain, NULL)) && train_five(pinit, ptrain, "cpu_1/w", two))
    for (i = 0; i < 12; ++i) CHECK(fabsf(one[i] - two[i]) <= 1e-5f);
  dp_netdef_free(ptrain);
  dp_netdef_free(pinit);
  dp_parallel_model_free(pm);
  dp_netdef_free(train);
  dp_netdef_free(init);
}

/* ONNX (since 0.6): the lin model exported with its trained params and an
 * example batch, saved atomically, imported from the file and from the
 * bytes, computes the same logits and softmax bit for bit; imported with a
 * head and an optimizer it trains. A build without ONNX says so in its
 * build info and from every ONNX call. */
static void test_onnx_api(void) {
  dp_build_info info;
  dp_model *model = NULL, *from_file = SENTINEL, *from_bytes = NULL, *trainable = NULL;
  dp_netdef *init = NULL, *train = NULL, *inference = NULL, *again_init = NULL, *again_inference = NULL;
  dp_workspace *ws = NULL, *ws2 = NULL;
  dp_net *init_net = NULL, *train_net = NULL, *inference_net = NULL, *net2 = NULL, *init2 = NULL;
  dp_buffer* bytes = SENTINEL;
  dp_onnx_export_options eo = DP_ONNX_EXPORT_OPTIONS_INIT;
  dp_onnx_import_options io = DP_ONNX_IMPORT_OPTIONS_INIT;
  dp_optimizer_info adam, back;
  dp_string_list* list = NULL;
  char path[1024], bad_path[1100];
  const char* outputs[2] = {"logits", "p"};
  int i, ok;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (!EXPECT_OK(dp_build_info_get(&info))) return;
  if (!EXPECT_OK(dp_model_from_json(kModelJson, strlen(kModelJson), &model))) return;
  if (info.onnx == 0) {
    CHECK(streq(info.onnx_version, ""));
    EXPECT_ERR(dp_model_from_onnx_buffer("0123", 4, NULL, &from_file), DP_ERR_UNIMPLEMENTED, "built without ONNX");
    CHECK(from_file == SENTINEL);
    if (EXPECT_OK(dp_workspace_create(&ws)))
      EXPECT_ERR(dp_model_to_onnx(model, ws, NULL, &bytes), DP_ERR_UNIMPLEMENTED, "built without ONNX");
    CHECK(bytes == SENTINEL);
    dp_workspace_free(ws);
    dp_model_free(model);
    return;
  }
  CHECK(info.onnx_version != NULL && info.onnx_version[0] != '\0');
  {
    const char* dir = getenv("DP_BUILD_ROOT");
    if (snprintf(path, sizeof path, "%s/test_onnx_api_%ld.onnx", dir != NULL && dir[0] != '\0' ? dir : ".",
                 (long)getpid()) >= (int)sizeof path ||
        snprintf(bad_path, sizeof bad_path, "%s.no_such_dir/lin.onnx", path) >= (int)sizeof bad_path) {
      CHECK(!"DP_BUILD_ROOT is too long");
      dp_model_free(model);
      return;
    }
  }
  /* Trained a few steps, then exported with the batch as the example. */
  ok = EXPECT_OK(dp_model_build_training(model, NULL, &init, &train, NULL)) && EXPECT_OK(dp_workspace_create(&ws)) &&
       EXPECT_OK(dp_net_create(ws, init, NULL, &init_net)) && EXPECT_OK(dp_net_run(init_net)) && feed_batch(ws) &&
       EXPECT_OK(dp_net_create(ws, train, NULL, &train_net));
  for (i = 0; ok && i < 5; ++i) ok = EXPECT_OK(dp_net_run(train_net));
  ok = ok && EXPECT_OK(dp_model_build_inference(model, outputs, 2, NULL, &inference)) &&
       EXPECT_OK(dp_net_create(ws, inference, NULL, &inference_net)) && EXPECT_OK(dp_net_run(inference_net));
  eo.outputs = outputs;
  eo.num_outputs = 2;
  if (ok && EXPECT_OK(dp_model_to_onnx(model, ws, &eo, &bytes)) && CHECK(dp_buffer_size(bytes) > 100) &&
      EXPECT_OK(dp_model_save_onnx(model, ws, &eo, path)) &&
      EXPECT_OK(dp_model_from_onnx_file(path, NULL, &from_file)) &&
      EXPECT_OK(dp_model_from_onnx_buffer(dp_buffer_data(bytes), dp_buffer_size(bytes), NULL, &from_bytes))) {
    size_t n = 0;
    unsigned char* saved = read_whole_file(path, &n);
    CHECK(saved != NULL && n == dp_buffer_size(bytes) && memcmp(saved, dp_buffer_data(bytes), n) == 0);
    free(saved);
    /* The graph's params and input, named as in dp. */
    if (EXPECT_OK(dp_model_blobs(from_file, DP_MODEL_PARAMS, &list))) {
      CHECK(dp_string_list_size(list) == 2 && streq(dp_string_list_get(list, 0), "w"));
      dp_string_list_free(list);
    }
    if (EXPECT_OK(dp_model_blobs(from_file, DP_MODEL_INPUTS, &list))) {
      CHECK(dp_string_list_size(list) == 1 && streq(dp_string_list_get(list, 0), "x"));
      dp_string_list_free(list);
    }
    /* Run in a workspace of its own on the same batch: the same bits. */
    if (EXPECT_OK(dp_model_net(from_file, DP_MODEL_INIT_NET, &again_init)) && EXPECT_OK(dp_workspace_create(&ws2)) &&
        EXPECT_OK(dp_net_create(ws2, again_init, NULL, &init2)) && EXPECT_OK(dp_net_run(init2)) &&
        EXPECT_OK(dp_model_build_inference(from_file, NULL, 0, NULL, &again_inference)) &&
        EXPECT_OK(dp_net_create(ws2, again_inference, NULL, &net2))) {
      dp_tensor* x = NULL;
      if (EXPECT_OK(dp_workspace_fetch(ws, "x", &x)) && EXPECT_OK(dp_workspace_feed(ws2, "x", x)) &&
          EXPECT_OK(dp_net_run(net2))) {
        for (i = 0; i < 2; ++i) {
          dp_tensor *a = NULL, *b = NULL;
          if (EXPECT_OK(dp_workspace_fetch(ws, outputs[i], &a)) && EXPECT_OK(dp_workspace_fetch(ws2, outputs[i], &b)))
            CHECK(dp_tensor_nbytes(a) == dp_tensor_nbytes(b) &&
                  memcmp(dp_tensor_data(a), dp_tensor_data(b), dp_tensor_nbytes(a)) == 0);
          dp_tensor_free(a);
          dp_tensor_free(b);
        }
      }
      dp_tensor_free(x);
    }
  }
  /* A path that cannot be written: IO, and no file. */
  EXPECT_ERR(dp_model_save_onnx(model, ws, &eo, bad_path), DP_ERR_IO, "no_such_dir");
  {
    FILE* f = fopen(bad_path, "rb");
    CHECK(f == NULL);
    if (f != NULL) fclose(f);
  }
  EXPECT_ERR(dp_model_from_onnx_file(bad_path, NULL, &from_file), DP_ERR_NOT_FOUND, bad_path);
  EXPECT_ERR(dp_model_from_onnx_buffer("0123456789abcdef", 16, NULL, &trainable), DP_ERR_PARSE, "not an ONNX model");
  CHECK(trainable == NULL);

  /* With a head and an optimizer: trainable, the optimizer as given. */
  memset(&adam, 0, sizeof adam);
  adam.struct_size = sizeof adam;
  adam.type = "adam";
  adam.lr = 0.01;
  adam.beta1 = 0.8;
  adam.beta2 = 0.99;
  adam.epsilon = 1e-7;
  io.head = DP_ONNX_HEAD_SOFTMAX_CROSS_ENTROPY;
  io.optimizer = &adam;
  eo.outputs = outputs;
  eo.num_outputs = 1; /* the logits alone */
  if (bytes != SENTINEL) dp_buffer_free(bytes);
  bytes = NULL;
  if (EXPECT_OK(dp_model_to_onnx(model, ws, &eo, &bytes)) &&
      EXPECT_OK(dp_model_from_onnx_buffer(dp_buffer_data(bytes), dp_buffer_size(bytes), &io, &trainable))) {
    memset(&back, 0, sizeof back);
    back.struct_size = sizeof back;
    if (EXPECT_OK(dp_model_get_optimizer(trainable, &back)))
      CHECK(streq(back.type, "adam") && back.lr == 0.01 && back.beta1 == 0.8 && streq(back.lr_policy, "fixed"));
    if (EXPECT_OK(dp_model_blobs(trainable, DP_MODEL_INPUTS, &list))) {
      CHECK(dp_string_list_size(list) == 2 && streq(dp_string_list_get(list, 1), "label"));
      dp_string_list_free(list);
    }
    if (EXPECT_OK(dp_model_blobs(trainable, DP_MODEL_LOSSES, &list))) {
      CHECK(dp_string_list_size(list) == 1 && streq(dp_string_list_get(list, 0), "loss"));
      dp_string_list_free(list);
    }
    check_trains_in_parallel(trainable);
  }
  io.labels = "x"; /* the graph has it */
  if (bytes != NULL) {
    dp_model* taken = SENTINEL;
    EXPECT_ERR(dp_model_from_onnx_buffer(dp_buffer_data(bytes), dp_buffer_size(bytes), &io, &taken),
               DP_ERR_INVALID_ARGUMENT, "'x'");
    CHECK(taken == SENTINEL);
  }
  remove(path);
  dp_buffer_free(bytes);
  dp_net_free(net2);
  dp_net_free(init2);
  dp_net_free(inference_net);
  dp_net_free(train_net);
  dp_net_free(init_net);
  dp_netdef_free(again_inference);
  dp_netdef_free(again_init);
  dp_netdef_free(inference);
  dp_netdef_free(train);
  dp_netdef_free(init);
  dp_workspace_free(ws2);
  dp_workspace_free(ws);
  dp_model_free(trainable);
  dp_model_free(from_bytes);
  if (from_file != SENTINEL) dp_model_free(from_file);
  dp_model_free(model);
}

int main(void) {
  test_onnx_api();
  return check_report();
}
