/* The op catalogue (dp_opschema_*, since 0.6). OpSchema.of opens a handle,
 * reads everything through these getters into plain Java objects and frees
 * the handle; argument defaults are read through the dp_argdef glue of
 * jni_introspect.c. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name
#define SCHEMA(v) DPJ_PTR(const dp_opschema, v)

JNIEXPORT jobjectArray JNICALL FN(opschemaListTypes)(JNIEnv* env, jclass c) {
  (void)c;
  dp_string_list* list = NULL;
  return dpj_ok(env, dp_opschema_list_types(&list)) ? dpj_string_list(env, list) : NULL;
}

JNIEXPORT jlong JNICALL FN(opschemaFromType)(JNIEnv* env, jclass c, jbyteArray jtype) {
  (void)c;
  int ok;
  char* type = dpj_cstr(env, jtype, &ok);
  if (!ok) return 0;
  dp_opschema* s = NULL;
  dp_status* st = dp_opschema_from_type(type, &s);
  free(type);
  return dpj_ok(env, st) ? DPJ_JLONG(s) : 0;
}

JNIEXPORT void JNICALL FN(opschemaFree)(JNIEnv* env, jclass c, jlong s) {
  (void)env, (void)c;
  dp_opschema_free(DPJ_PTR(dp_opschema, s));
}

JNIEXPORT jstring JNICALL FN(opschemaType)(JNIEnv* env, jclass c, jlong s) {
  (void)c;
  return dpj_string(env, dp_opschema_type(SCHEMA(s)));
}

JNIEXPORT jstring JNICALL FN(opschemaDoc)(JNIEnv* env, jclass c, jlong s) {
  (void)c;
  return dpj_string(env, dp_opschema_doc(SCHEMA(s)));
}

/* min inputs, max inputs, min outputs, max outputs, in-place shift, gradient. */
JNIEXPORT void JNICALL FN(opschemaCounts)(JNIEnv* env, jclass c, jlong s, jintArray out) {
  (void)c;
  const jint v[6] = {dp_opschema_min_inputs(SCHEMA(s)),  dp_opschema_max_inputs(SCHEMA(s)),
                     dp_opschema_min_outputs(SCHEMA(s)), dp_opschema_max_outputs(SCHEMA(s)),
                     dp_opschema_inplace_shift(SCHEMA(s)), dp_opschema_gradient(SCHEMA(s))};
  (*env)->SetIntArrayRegion(env, out, 0, 6, v);
}

static const char* input_name(const void* s, size_t i) { return dp_opschema_input_name((const dp_opschema*)s, i); }
static const char* output_name(const void* s, size_t i) { return dp_opschema_output_name((const dp_opschema*)s, i); }

JNIEXPORT jobjectArray JNICALL FN(opschemaInputNames)(JNIEnv* env, jclass c, jlong s) {
  (void)c;
  return dpj_strings(env, SCHEMA(s), dp_opschema_num_named_inputs(SCHEMA(s)), input_name);
}

JNIEXPORT jobjectArray JNICALL FN(opschemaOutputNames)(JNIEnv* env, jclass c, jlong s) {
  (void)c;
  return dpj_strings(env, SCHEMA(s), dp_opschema_num_named_outputs(SCHEMA(s)), output_name);
}

JNIEXPORT jlong JNICALL FN(opschemaNumArgs)(JNIEnv* env, jclass c, jlong s) {
  (void)env, (void)c;
  return (jlong)dp_opschema_num_args(SCHEMA(s));
}

/* Argument i's name, doc and default text. */
JNIEXPORT void JNICALL FN(opschemaArgStrings)(JNIEnv* env, jclass c, jlong s, jlong i, jobjectArray out) {
  (void)c;
  const char* v[3] = {dp_opschema_arg_name(SCHEMA(s), (size_t)i), dp_opschema_arg_doc(SCHEMA(s), (size_t)i),
                      dp_opschema_arg_default_text(SCHEMA(s), (size_t)i)};
  for (jsize k = 0; k < 3; ++k) {
    jstring js = dpj_string(env, v[k] ? v[k] : "");
    if (js == NULL) return;
    (*env)->SetObjectArrayElement(env, out, k, js);
    (*env)->DeleteLocalRef(env, js);
  }
}

JNIEXPORT jint JNICALL FN(opschemaArgKind)(JNIEnv* env, jclass c, jlong s, jlong i) {
  (void)env, (void)c;
  return dp_opschema_arg_kind(SCHEMA(s), (size_t)i);
}

JNIEXPORT jboolean JNICALL FN(opschemaArgRequired)(JNIEnv* env, jclass c, jlong s, jlong i) {
  (void)env, (void)c;
  return dp_opschema_arg_required(SCHEMA(s), (size_t)i) ? JNI_TRUE : JNI_FALSE;
}

/* The default's dp_argdef view (0 for none), valid while the handle is open. */
JNIEXPORT jlong JNICALL FN(opschemaArgDefault)(JNIEnv* env, jclass c, jlong s, jlong i) {
  (void)env, (void)c;
  return DPJ_JLONG(dp_opschema_arg_default(SCHEMA(s), (size_t)i));
}

JNIEXPORT jlong JNICALL FN(opschemaNumInplace)(JNIEnv* env, jclass c, jlong s) {
  (void)env, (void)c;
  return (jlong)dp_opschema_num_inplace(SCHEMA(s));
}

/* Pair i as {input, output, rule}. */
JNIEXPORT void JNICALL FN(opschemaInplaceAt)(JNIEnv* env, jclass c, jlong s, jlong i, jintArray out) {
  (void)c;
  int32_t in = 0, o = 0;
  const int32_t rule = dp_opschema_inplace_at(SCHEMA(s), (size_t)i, &in, &o);
  const jint v[3] = {in, o, rule};
  (*env)->SetIntArrayRegion(env, out, 0, 3, v);
}

JNIEXPORT jboolean JNICALL FN(opschemaHasKernel)(JNIEnv* env, jclass c, jlong s, jint device_type) {
  (void)env, (void)c;
  return dp_opschema_has_kernel(SCHEMA(s), device_type) ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jobjectArray JNICALL FN(opschemaEngines)(JNIEnv* env, jclass c, jlong s, jint device_type) {
  (void)c;
  dp_string_list* list = NULL;
  return dpj_ok(env, dp_opschema_engines(SCHEMA(s), device_type, &list)) ? dpj_string_list(env, list) : NULL;
}
