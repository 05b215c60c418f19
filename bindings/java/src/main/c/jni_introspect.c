/* Borrowed views into a net definition: ops (dp_opdef) and their arguments
 * (dp_argdef). The Java objects keep their NetDef open while they are used. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name
#define OP(v) DPJ_PTR(const dp_opdef, v)
#define ARG(v) DPJ_PTR(const dp_argdef, v)

JNIEXPORT jstring JNICALL FN(opdefType)(JNIEnv* env, jclass c, jlong op) {
  (void)c;
  return dpj_string(env, dp_opdef_type(OP(op)));
}

JNIEXPORT jstring JNICALL FN(opdefName)(JNIEnv* env, jclass c, jlong op) {
  (void)c;
  return dpj_string(env, dp_opdef_name(OP(op)));
}

JNIEXPORT jstring JNICALL FN(opdefEngine)(JNIEnv* env, jclass c, jlong op) {
  (void)c;
  return dpj_string(env, dp_opdef_engine(OP(op)));
}

static const char* in(const void* op, size_t i) { return dp_opdef_input((const dp_opdef*)op, i); }
static const char* out(const void* op, size_t i) { return dp_opdef_output((const dp_opdef*)op, i); }
static const char* ctl(const void* op, size_t i) { return dp_opdef_control_input((const dp_opdef*)op, i); }

JNIEXPORT jobjectArray JNICALL FN(opdefInputs)(JNIEnv* env, jclass c, jlong op) {
  (void)c;
  return dpj_strings(env, OP(op), dp_opdef_num_inputs(OP(op)), in);
}

JNIEXPORT jobjectArray JNICALL FN(opdefOutputs)(JNIEnv* env, jclass c, jlong op) {
  (void)c;
  return dpj_strings(env, OP(op), dp_opdef_num_outputs(OP(op)), out);
}

JNIEXPORT jobjectArray JNICALL FN(opdefControlInputs)(JNIEnv* env, jclass c, jlong op) {
  (void)c;
  return dpj_strings(env, OP(op), dp_opdef_num_control_inputs(OP(op)), ctl);
}

JNIEXPORT jint JNICALL FN(opdefDeviceType)(JNIEnv* env, jclass c, jlong op) {
  (void)env, (void)c;
  return dp_opdef_device_type(OP(op));
}

JNIEXPORT jint JNICALL FN(opdefDeviceId)(JNIEnv* env, jclass c, jlong op) {
  (void)env, (void)c;
  return dp_opdef_device_id(OP(op));
}

JNIEXPORT jlong JNICALL FN(opdefNumArgs)(JNIEnv* env, jclass c, jlong op) {
  (void)env, (void)c;
  return (jlong)dp_opdef_num_args(OP(op));
}

JNIEXPORT jlong JNICALL FN(opdefArg)(JNIEnv* env, jclass c, jlong op, jlong i) {
  (void)env, (void)c;
  return i < 0 ? 0 : DPJ_JLONG(dp_opdef_arg(OP(op), (size_t)i));
}

JNIEXPORT jlong JNICALL FN(opdefFindArg)(JNIEnv* env, jclass c, jlong op, jbyteArray jname) {
  (void)c;
  int ok;
  char* name = dpj_cstr(env, jname, &ok);
  if (!ok) return 0;
  const dp_argdef* arg = dp_opdef_find_arg(OP(op), name);
  free(name);
  return DPJ_JLONG(arg);
}

JNIEXPORT jstring JNICALL FN(argdefName)(JNIEnv* env, jclass c, jlong arg) {
  (void)c;
  return dpj_string(env, dp_argdef_name(ARG(arg)));
}

JNIEXPORT jint JNICALL FN(argdefKind)(JNIEnv* env, jclass c, jlong arg) {
  (void)env, (void)c;
  return dp_argdef_kind(ARG(arg));
}

JNIEXPORT jlong JNICALL FN(argdefNumValues)(JNIEnv* env, jclass c, jlong arg) {
  (void)env, (void)c;
  return (jlong)dp_argdef_num_values(ARG(arg));
}

JNIEXPORT jdouble JNICALL FN(argdefGetFloat)(JNIEnv* env, jclass c, jlong arg) {
  (void)c;
  double v = 0;
  return dpj_ok(env, dp_argdef_get_float(ARG(arg), &v)) ? v : 0;
}

JNIEXPORT jlong JNICALL FN(argdefGetInt)(JNIEnv* env, jclass c, jlong arg) {
  (void)c;
  int64_t v = 0;
  return dpj_ok(env, dp_argdef_get_int(ARG(arg), &v)) ? v : 0;
}

JNIEXPORT jstring JNICALL FN(argdefGetString)(JNIEnv* env, jclass c, jlong arg) {
  (void)c;
  const char* v = NULL;
  return dpj_ok(env, dp_argdef_get_string(ARG(arg), &v)) ? dpj_string(env, v) : NULL;
}

JNIEXPORT jdoubleArray JNICALL FN(argdefGetFloats)(JNIEnv* env, jclass c, jlong arg) {
  (void)c;
  const double* v = NULL;
  size_t n = 0;
  if (!dpj_ok(env, dp_argdef_get_floats(ARG(arg), &v, &n))) return NULL;
  jdoubleArray arr = (*env)->NewDoubleArray(env, (jsize)n);
  if (arr != NULL && n > 0) (*env)->SetDoubleArrayRegion(env, arr, 0, (jsize)n, v);
  return arr;
}

JNIEXPORT jlongArray JNICALL FN(argdefGetInts)(JNIEnv* env, jclass c, jlong arg) {
  (void)c;
  const int64_t* v = NULL;
  size_t n = 0;
  if (!dpj_ok(env, dp_argdef_get_ints(ARG(arg), &v, &n))) return NULL;
  return dpj_longs(env, v, n);
}

JNIEXPORT jstring JNICALL FN(argdefGetStringAt)(JNIEnv* env, jclass c, jlong arg, jlong i) {
  (void)c;
  const char* v = NULL;
  if (i < 0) i = (jlong)SIZE_MAX >> 1; /* dp reports OUT_OF_RANGE */
  return dpj_ok(env, dp_argdef_get_string_at(ARG(arg), (size_t)i, &v)) ? dpj_string(env, v) : NULL;
}

JNIEXPORT jlong JNICALL FN(argdefGetNet)(JNIEnv* env, jclass c, jlong arg) {
  (void)c;
  dp_netdef* def = NULL;
  return dpj_ok(env, dp_argdef_get_net(ARG(arg), &def)) ? DPJ_JLONG(def) : 0;
}

JNIEXPORT jlong JNICALL FN(argdefGetNetAt)(JNIEnv* env, jclass c, jlong arg, jlong i) {
  (void)c;
  dp_netdef* def = NULL;
  if (i < 0) i = (jlong)SIZE_MAX >> 1;
  return dpj_ok(env, dp_argdef_get_net_at(ARG(arg), (size_t)i, &def)) ? DPJ_JLONG(def) : 0;
}
