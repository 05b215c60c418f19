/* Net definitions: parse, serialise, the definition-level getters and
 * dp_netdef_add_gradients. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name
#define DEF(v) DPJ_PTR(dp_netdef, v)

JNIEXPORT jlong JNICALL FN(netdefFromBuffer)(JNIEnv* env, jclass c, jbyteArray data) {
  (void)c;
  size_t n;
  int ok;
  char* p = dpj_bytes(env, data, &n, &ok);
  if (!ok) return 0;
  dp_netdef* def = NULL;
  dp_status* s = dp_netdef_from_buffer(p, n, &def);
  free(p);
  return dpj_ok(env, s) ? DPJ_JLONG(def) : 0;
}

JNIEXPORT jlong JNICALL FN(netdefFromJson)(JNIEnv* env, jclass c, jbyteArray json) {
  (void)c;
  size_t n;
  int ok;
  char* p = dpj_bytes(env, json, &n, &ok);
  if (!ok) return 0;
  dp_netdef* def = NULL;
  dp_status* s = dp_netdef_from_json(p, n, &def);
  free(p);
  return dpj_ok(env, s) ? DPJ_JLONG(def) : 0;
}

JNIEXPORT jlong JNICALL FN(netdefFromFile)(JNIEnv* env, jclass c, jbyteArray jpath) {
  (void)c;
  int ok;
  char* path = dpj_cstr(env, jpath, &ok);
  if (!ok) return 0;
  dp_netdef* def = NULL;
  dp_status* s = dp_netdef_from_file(path, &def);
  free(path);
  return dpj_ok(env, s) ? DPJ_JLONG(def) : 0;
}

JNIEXPORT jbyteArray JNICALL FN(netdefToBuffer)(JNIEnv* env, jclass c, jlong def) {
  (void)c;
  dp_buffer* b = NULL;
  return dpj_ok(env, dp_netdef_to_buffer(DEF(def), &b)) ? dpj_buffer_bytes(env, b) : NULL;
}

JNIEXPORT jbyteArray JNICALL FN(netdefToJson)(JNIEnv* env, jclass c, jlong def) {
  (void)c;
  dp_buffer* b = NULL;
  return dpj_ok(env, dp_netdef_to_json(DEF(def), &b)) ? dpj_buffer_bytes(env, b) : NULL;
}

JNIEXPORT jbyteArray JNICALL FN(netdefToDot)(JNIEnv* env, jclass c, jlong def) {
  (void)c;
  dp_buffer* b = NULL;
  return dpj_ok(env, dp_netdef_to_dot(DEF(def), &b)) ? dpj_buffer_bytes(env, b) : NULL;
}

JNIEXPORT jstring JNICALL FN(netdefName)(JNIEnv* env, jclass c, jlong def) {
  (void)c;
  return dpj_string(env, dp_netdef_name(DEF(def)));
}

JNIEXPORT jlong JNICALL FN(netdefNumOps)(JNIEnv* env, jclass c, jlong def) {
  (void)env, (void)c;
  return (jlong)dp_netdef_num_ops(DEF(def));
}

JNIEXPORT void JNICALL FN(netdefFree)(JNIEnv* env, jclass c, jlong def) {
  (void)env, (void)c;
  dp_netdef_free(DEF(def));
}

static const char* ext_in(const void* d, size_t i) { return dp_netdef_external_input((const dp_netdef*)d, i); }
static const char* ext_out(const void* d, size_t i) { return dp_netdef_external_output((const dp_netdef*)d, i); }

JNIEXPORT jobjectArray JNICALL FN(netdefExternalInputs)(JNIEnv* env, jclass c, jlong def) {
  (void)c;
  return dpj_strings(env, DEF(def), dp_netdef_num_external_inputs(DEF(def)), ext_in);
}

JNIEXPORT jobjectArray JNICALL FN(netdefExternalOutputs)(JNIEnv* env, jclass c, jlong def) {
  (void)c;
  return dpj_strings(env, DEF(def), dp_netdef_num_external_outputs(DEF(def)), ext_out);
}

JNIEXPORT jint JNICALL FN(netdefDeviceType)(JNIEnv* env, jclass c, jlong def) {
  (void)env, (void)c;
  return dp_netdef_device_type(DEF(def));
}

JNIEXPORT jint JNICALL FN(netdefDeviceId)(JNIEnv* env, jclass c, jlong def) {
  (void)env, (void)c;
  return dp_netdef_device_id(DEF(def));
}

JNIEXPORT jint JNICALL FN(netdefExecutor)(JNIEnv* env, jclass c, jlong def) {
  (void)env, (void)c;
  return dp_netdef_executor(DEF(def));
}

JNIEXPORT jint JNICALL FN(netdefNumWorkers)(JNIEnv* env, jclass c, jlong def) {
  (void)env, (void)c;
  return dp_netdef_num_workers(DEF(def));
}

JNIEXPORT jint JNICALL FN(netdefMemory)(JNIEnv* env, jclass c, jlong def) {
  (void)env, (void)c;
  return dp_netdef_memory(DEF(def));
}

JNIEXPORT jlong JNICALL FN(netdefOp)(JNIEnv* env, jclass c, jlong def, jlong i) {
  (void)env, (void)c;
  return i < 0 ? 0 : DPJ_JLONG(dp_netdef_op(DEF(def), (size_t)i));
}

JNIEXPORT jlong JNICALL FN(netdefAddGradients)(JNIEnv* env, jclass c, jlong def, jobjectArray jlosses,
                                               jobjectArray jwrt, jobjectArray jstop, jdouble loss_scale,
                                               jint memory, jobjectArray grad_map_out) {
  (void)c;
  dp_gradient_options o;
  dp_gradient_options_init(&o, sizeof o);
  int ok1, ok2 = 1, ok3 = 1;
  const char** losses = dpj_cstrs(env, jlosses, &o.num_losses, &ok1);
  const char** wrt = ok1 ? dpj_cstrs(env, jwrt, &o.num_wrt, &ok2) : NULL;
  const char** stop = ok1 && ok2 ? dpj_cstrs(env, jstop, &o.num_stop, &ok3) : NULL;
  jlong result = 0;
  if (ok1 && ok2 && ok3) {
    o.losses = losses;
    o.wrt = wrt;
    o.stop = stop;
    o.loss_scale = loss_scale;
    o.memory = memory;
    dp_netdef* out = NULL;
    dp_string_list* map = NULL;
    if (dpj_ok(env, dp_netdef_add_gradients(DEF(def), &o, &out, &map))) {
      jobjectArray arr = dpj_string_list(env, map);
      if (arr != NULL) {
        (*env)->SetObjectArrayElement(env, grad_map_out, 0, arr);
        result = DPJ_JLONG(out);
      } else {
        dp_netdef_free(out);
      }
    }
  }
  dpj_free_cstrs(losses, o.num_losses);
  dpj_free_cstrs(wrt, o.num_wrt);
  dpj_free_cstrs(stop, o.num_stop);
  return result;
}
