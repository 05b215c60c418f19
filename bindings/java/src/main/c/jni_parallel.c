/* Data parallelism: dp_model_parallelize with dp_parallel_options, the
 * parallel model's nets, sync, join, replicas, shards, save and load. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name
#define PM(v) DPJ_PTR(dp_parallel_model, v)

JNIEXPORT jlong JNICALL FN(modelParallelize)(JNIEnv* env, jclass c, jlong m, jint device_type, jintArray ids,
                                             jlong first_bucket_bytes, jlong bucket_bytes, jint uneven_split,
                                             jint no_fuse, jdouble lr, jint accumulate_steps, jint bmuf,
                                             jdouble bmuf_block_lr, jdouble bmuf_block_momentum,
                                             jint bmuf_no_nesterov, jint bmuf_block_length, jint computed_params,
                                             jint cuda_collectives, jint shared_model, jint sync_bn,
                                             jint shard_id, jint num_shards, jbyteArray jstore, jlong timeout_ms,
                                             jbyteArray jnetwork_interface, jbyteArray jrun_id,
                                             jbyteArray jlocal_transport, jint memory, jint gradient_compression,
                                             jint shard_optimizer_state, jint loss_scaling,
                                             jdouble initial_loss_scale) {
  (void)c;
  dp_parallel_options o;
  dp_parallel_options_init(&o, sizeof o);
  /* The strings are copied to C (NULL stays NULL: the environment's value)
   * and freed after the call. */
  int ok1, ok2 = 1, ok3 = 1, ok4 = 1;
  char* store = dpj_cstr(env, jstore, &ok1);
  char* iface = ok1 ? dpj_cstr(env, jnetwork_interface, &ok2) : NULL;
  char* run_id = ok1 && ok2 ? dpj_cstr(env, jrun_id, &ok3) : NULL;
  char* transport = ok1 && ok2 && ok3 ? dpj_cstr(env, jlocal_transport, &ok4) : NULL;
  if (!(ok1 && ok2 && ok3 && ok4)) {
    free(transport);
    free(run_id);
    free(iface);
    free(store);
    return 0;
  }
  int32_t* dev = NULL;
  if (ids != NULL) {
    jsize n = (*env)->GetArrayLength(env, ids);
    dev = malloc(((size_t)n + 1) * sizeof *dev);
    if (dev == NULL) {
      free(transport);
      free(run_id);
      free(iface);
      free(store);
      dpj_throw_oom(env, "dp: device ids");
      return 0;
    }
    (*env)->GetIntArrayRegion(env, ids, 0, n, (jint*)dev);
    o.num_devices = (size_t)n;
  }
  o.device_type = device_type;
  o.device_ids = dev;
  o.memory = memory;
  o.gradient_compression = gradient_compression;
  o.shard_optimizer_state = shard_optimizer_state;
  o.loss_scaling = loss_scaling;
  o.initial_loss_scale = initial_loss_scale;
  o.first_bucket_bytes = first_bucket_bytes;
  o.bucket_bytes = bucket_bytes;
  o.uneven_split = uneven_split;
  o.no_fuse = no_fuse;
  o.lr = lr;
  o.accumulate_steps = accumulate_steps;
  o.bmuf = bmuf;
  o.bmuf_block_lr = bmuf_block_lr;
  o.bmuf_block_momentum = bmuf_block_momentum;
  o.bmuf_no_nesterov = bmuf_no_nesterov;
  o.bmuf_block_length = bmuf_block_length;
  o.computed_params = computed_params;
  o.cuda_collectives = cuda_collectives;
  o.shared_model = shared_model;
  o.sync_bn = sync_bn;
  o.shard_id = shard_id;
  o.num_shards = num_shards;
  o.store = store;
  o.timeout_ms = timeout_ms;
  o.network_interface = iface;
  o.run_id = run_id;
  o.local_transport = transport;
  dp_parallel_model* pm = NULL;
  dp_status* s = dp_model_parallelize(DPJ_PTR(dp_model, m), &o, &pm);
  free(dev);
  free(transport);
  free(run_id);
  free(iface);
  free(store);
  return dpj_ok(env, s) ? DPJ_JLONG(pm) : 0;
}

JNIEXPORT void JNICALL FN(parallelModelNets)(JNIEnv* env, jclass c, jlong pm, jlongArray out) {
  (void)c;
  dp_netdef* defs[3] = {NULL, NULL, NULL};
  if (!dpj_ok(env, dp_parallel_model_nets(PM(pm), &defs[0], &defs[1], &defs[2]))) return;
  jlong v[3] = {DPJ_JLONG(defs[0]), DPJ_JLONG(defs[1]), DPJ_JLONG(defs[2])};
  (*env)->SetLongArrayRegion(env, out, 0, 3, v);
}

JNIEXPORT jlong JNICALL FN(parallelModelAccumulateNet)(JNIEnv* env, jclass c, jlong pm) {
  (void)c;
  dp_netdef* def = NULL;
  return dpj_ok(env, dp_parallel_model_accumulate_net(PM(pm), &def)) ? DPJ_JLONG(def) : 0;
}

JNIEXPORT jlong JNICALL FN(parallelModelBlockNet)(JNIEnv* env, jclass c, jlong pm, jintArray out_len) {
  (void)c;
  dp_netdef* def = NULL;
  int32_t len = 0;
  if (!dpj_ok(env, dp_parallel_model_block_net(PM(pm), &def, &len))) return 0;
  jint v = len;
  (*env)->SetIntArrayRegion(env, out_len, 0, 1, &v);
  return DPJ_JLONG(def);
}

JNIEXPORT jlong JNICALL FN(parallelModelSyncNet)(JNIEnv* env, jclass c, jlong pm) {
  (void)c;
  dp_netdef* def = NULL;
  return dpj_ok(env, dp_parallel_model_sync_net(PM(pm), &def)) ? DPJ_JLONG(def) : 0;
}

JNIEXPORT void JNICALL FN(parallelModelSync)(JNIEnv* env, jclass c, jlong pm, jlong ws) {
  (void)c;
  dpj_ok(env, dp_parallel_model_sync(PM(pm), DPJ_PTR(dp_workspace, ws)));
}

JNIEXPORT jlong JNICALL FN(parallelModelNumReplicas)(JNIEnv* env, jclass c, jlong pm) {
  (void)env, (void)c;
  return (jlong)dp_parallel_model_num_replicas(PM(pm));
}

JNIEXPORT jlong JNICALL FN(parallelModelJoin)(JNIEnv* env, jclass c, jlong pm, jlong ws) {
  (void)c;
  int64_t steps = 0;
  return dpj_ok(env, dp_parallel_model_join(PM(pm), DPJ_PTR(dp_workspace, ws), &steps)) ? (jlong)steps : 0;
}

JNIEXPORT jint JNICALL FN(parallelModelNumShards)(JNIEnv* env, jclass c, jlong pm) {
  (void)env, (void)c;
  return (jint)dp_parallel_model_num_shards(PM(pm));
}

JNIEXPORT jint JNICALL FN(parallelModelShardId)(JNIEnv* env, jclass c, jlong pm) {
  (void)env, (void)c;
  return (jint)dp_parallel_model_shard_id(PM(pm));
}

JNIEXPORT jstring JNICALL FN(parallelModelScope)(JNIEnv* env, jclass c, jlong pm, jlong i) {
  (void)c;
  return i < 0 ? NULL : dpj_string(env, dp_parallel_model_scope(PM(pm), (size_t)i));
}

JNIEXPORT void JNICALL FN(parallelModelFree)(JNIEnv* env, jclass c, jlong pm) {
  (void)env, (void)c;
  dp_parallel_model_free(PM(pm));
}

JNIEXPORT void JNICALL FN(parallelModelSave)(JNIEnv* env, jclass c, jlong pm, jlong ws, jbyteArray jpath,
                                             jboolean has_options, jbyteArray jmodel_name, jlong iteration,
                                             jdouble share) {
  (void)c;
  int ok1, ok2 = 1;
  char* path = dpj_cstr(env, jpath, &ok1);
  char* name = ok1 ? dpj_cstr(env, jmodel_name, &ok2) : NULL;
  if (ok1 && ok2) {
    dp_checkpoint_save_options o;
    dpj_save_options(&o, name, iteration, share);
    dpj_ok(env, dp_parallel_model_save(PM(pm), DPJ_PTR(dp_workspace, ws), path, has_options ? &o : NULL));
  }
  free(name);
  free(path);
}

JNIEXPORT void JNICALL FN(parallelModelLoad)(JNIEnv* env, jclass c, jlong pm, jlong ws, jbyteArray jpath,
                                             jboolean has_options, jobjectArray jnames, jint lenient,
                                             jint no_verify, jint mmap) {
  (void)c;
  int ok1, ok2 = 1;
  size_t n = 0;
  char* path = dpj_cstr(env, jpath, &ok1);
  const char** names = ok1 ? dpj_cstrs(env, jnames, &n, &ok2) : NULL;
  if (ok1 && ok2) {
    dp_checkpoint_load_options o;
    dpj_load_options(&o, names, n, lenient, no_verify, mmap);
    dpj_ok(env, dp_parallel_model_load(PM(pm), DPJ_PTR(dp_workspace, ws), path, has_options ? &o : NULL));
  }
  dpj_free_cstrs(names, n);
  free(path);
}
