/* Models: parse, serialise, lists, introspection, optimizer, training nets
 * and the checkpoint blob list. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name
#define MODEL(v) DPJ_PTR(dp_model, v)

JNIEXPORT jlong JNICALL FN(modelFromBuffer)(JNIEnv* env, jclass c, jbyteArray data) {
  (void)c;
  size_t n;
  int ok;
  char* p = dpj_bytes(env, data, &n, &ok);
  if (!ok) return 0;
  dp_model* m = NULL;
  dp_status* s = dp_model_from_buffer(p, n, &m);
  free(p);
  return dpj_ok(env, s) ? DPJ_JLONG(m) : 0;
}

JNIEXPORT jlong JNICALL FN(modelFromJson)(JNIEnv* env, jclass c, jbyteArray json) {
  (void)c;
  size_t n;
  int ok;
  char* p = dpj_bytes(env, json, &n, &ok);
  if (!ok) return 0;
  dp_model* m = NULL;
  dp_status* s = dp_model_from_json(p, n, &m);
  free(p);
  return dpj_ok(env, s) ? DPJ_JLONG(m) : 0;
}

JNIEXPORT jlong JNICALL FN(modelFromFile)(JNIEnv* env, jclass c, jbyteArray jpath) {
  (void)c;
  int ok;
  char* path = dpj_cstr(env, jpath, &ok);
  if (!ok) return 0;
  dp_model* m = NULL;
  dp_status* s = dp_model_from_file(path, &m);
  free(path);
  return dpj_ok(env, s) ? DPJ_JLONG(m) : 0;
}

JNIEXPORT jbyteArray JNICALL FN(modelToJson)(JNIEnv* env, jclass c, jlong m) {
  (void)c;
  dp_buffer* b = NULL;
  return dpj_ok(env, dp_model_to_json(MODEL(m), &b)) ? dpj_buffer_bytes(env, b) : NULL;
}

JNIEXPORT jbyteArray JNICALL FN(modelToBuffer)(JNIEnv* env, jclass c, jlong m) {
  (void)c;
  dp_buffer* b = NULL;
  return dpj_ok(env, dp_model_to_buffer(MODEL(m), &b)) ? dpj_buffer_bytes(env, b) : NULL;
}

JNIEXPORT jobjectArray JNICALL FN(modelBlobs)(JNIEnv* env, jclass c, jlong m, jint which) {
  (void)c;
  dp_string_list* list = NULL;
  return dpj_ok(env, dp_model_blobs(MODEL(m), which, &list)) ? dpj_string_list(env, list) : NULL;
}

JNIEXPORT void JNICALL FN(modelFree)(JNIEnv* env, jclass c, jlong m) {
  (void)env, (void)c;
  dp_model_free(MODEL(m));
}

JNIEXPORT jstring JNICALL FN(modelName)(JNIEnv* env, jclass c, jlong m) {
  (void)c;
  return dpj_string(env, dp_model_name(MODEL(m)));
}

JNIEXPORT jlong JNICALL FN(modelNet)(JNIEnv* env, jclass c, jlong m, jint which) {
  (void)c;
  dp_netdef* def = NULL;
  return dpj_ok(env, dp_model_net(MODEL(m), which, &def)) ? DPJ_JLONG(def) : 0;
}

JNIEXPORT jboolean JNICALL FN(modelHasOptimizer)(JNIEnv* env, jclass c, jlong m) {
  (void)env, (void)c;
  return dp_model_has_optimizer(MODEL(m)) ? JNI_TRUE : JNI_FALSE;
}

/* strings: type, lr_policy; doubles: lr, momentum, beta1, beta2, epsilon,
 * weight_decay, gamma, power, warmup_start_factor; longs: nesterov,
 * stepsize, max_iter, warmup_iters. */
JNIEXPORT void JNICALL FN(modelGetOptimizer)(JNIEnv* env, jclass c, jlong m, jobjectArray strings,
                                             jdoubleArray doubles, jlongArray longs) {
  (void)c;
  dp_optimizer_info o = {0};
  o.struct_size = (uint32_t)sizeof o;
  if (!dpj_ok(env, dp_model_get_optimizer(MODEL(m), &o))) return;
  const char* s[2] = {o.type, o.lr_policy};
  for (int i = 0; i < 2; ++i) {
    jstring js = dpj_string(env, s[i] ? s[i] : "");
    if (js == NULL) return;
    (*env)->SetObjectArrayElement(env, strings, i, js);
    (*env)->DeleteLocalRef(env, js);
  }
  jdouble d[9] = {o.lr, o.momentum, o.beta1, o.beta2, o.epsilon, o.weight_decay, o.gamma, o.power,
                  o.warmup_start_factor};
  (*env)->SetDoubleArrayRegion(env, doubles, 0, 9, d);
  jlong l[4] = {o.nesterov, o.stepsize, o.max_iter, o.warmup_iters};
  (*env)->SetLongArrayRegion(env, longs, 0, 4, l);
}

JNIEXPORT void JNICALL FN(modelBuildTraining)(JNIEnv* env, jclass c, jlong m, jboolean has_options,
                                              jdouble loss_scale, jdouble lr, jint memory, jint loss_scaling,
                                              jdouble initial_loss_scale, jlongArray out) {
  (void)c;
  dp_training_options o;
  dp_training_options_init(&o, sizeof o);
  o.loss_scale = loss_scale;
  o.lr = lr;
  o.memory = memory;
  o.loss_scaling = loss_scaling;
  o.initial_loss_scale = initial_loss_scale;
  dp_netdef* defs[3] = {NULL, NULL, NULL};
  if (!dpj_ok(env, dp_model_build_training(MODEL(m), has_options ? &o : NULL, &defs[0], &defs[1], &defs[2])))
    return;
  jlong v[3] = {DPJ_JLONG(defs[0]), DPJ_JLONG(defs[1]), DPJ_JLONG(defs[2])};
  (*env)->SetLongArrayRegion(env, out, 0, 3, v);
}

JNIEXPORT jlong JNICALL FN(modelBuildInference)(JNIEnv* env, jclass c, jlong m, jobjectArray joutputs,
                                                jboolean has_options, jint no_fuse) {
  (void)c;
  int ok;
  size_t n = 0;
  const char** outputs = dpj_cstrs(env, joutputs, &n, &ok);
  if (!ok) return 0;
  dp_inference_options o;
  dp_inference_options_init(&o, sizeof o);
  o.no_fuse = no_fuse;
  dp_netdef* def = NULL;
  dp_status* s = dp_model_build_inference(MODEL(m), outputs, n, has_options ? &o : NULL, &def);
  dpj_free_cstrs(outputs, n);
  return dpj_ok(env, s) ? DPJ_JLONG(def) : 0;
}

JNIEXPORT jobjectArray JNICALL FN(modelCheckpointBlobs)(JNIEnv* env, jclass c, jlong m) {
  (void)c;
  dp_string_list* list = NULL;
  return dpj_ok(env, dp_model_checkpoint_blobs(MODEL(m), &list)) ? dpj_string_list(env, list) : NULL;
}
