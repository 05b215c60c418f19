/* Library-wide queries: version, code names, devices, build info, dtypes,
 * and the thread budget (dp_set_cpu_threads, dp_cpu_threads).
 * (dp_status_code/message/free are used by dpj_ok in jni_common.c.) */
#include "dp_jni.h"

#define FN(name) Java_org_dp_Native_##name

JNIEXPORT jstring JNICALL FN(version)(JNIEnv* env, jclass c) {
  (void)c;
  return dpj_string(env, dp_version());
}

JNIEXPORT jint JNICALL FN(versionNumber)(JNIEnv* env, jclass c) {
  (void)env, (void)c;
  return (jint)dp_version_number();
}

JNIEXPORT jstring JNICALL FN(statusCodeName)(JNIEnv* env, jclass c, jint code) {
  (void)c;
  return dpj_string(env, dp_status_code_name(code));
}

JNIEXPORT jint JNICALL FN(deviceCount)(JNIEnv* env, jclass c, jint type) {
  (void)c;
  int32_t n = 0;
  return dpj_ok(env, dp_device_count(type, &n)) ? n : 0;
}

/* strings: version, cuda_archs, blas, blas_config, compiler, build_type,
 * cuda_state_detail, cuda_module, onnx_version;
 * ints: cuda, cuda_runtime_version, cuda_driver_version, cublas_version,
 * nccl_version, cuda_state, cuda_loaded_runtime_version, onnx. */
JNIEXPORT void JNICALL FN(buildInfo)(JNIEnv* env, jclass c, jobjectArray strings, jintArray ints) {
  (void)c;
  dp_build_info info = {0};
  info.struct_size = (uint32_t)sizeof info;
  if (!dpj_ok(env, dp_build_info_get(&info))) return;
  const char* s[9] = {info.version,  info.cuda_archs, info.blas,
                      info.blas_config, info.compiler, info.build_type,
                      info.cuda_state_detail, info.cuda_module, info.onnx_version};
  for (int i = 0; i < 9; ++i) {
    jstring js = dpj_string(env, s[i] ? s[i] : "");
    if (js == NULL) return;
    (*env)->SetObjectArrayElement(env, strings, i, js);
    (*env)->DeleteLocalRef(env, js);
  }
  jint v[8] = {info.cuda,         info.cuda_runtime_version, info.cuda_driver_version,        info.cublas_version,
               info.nccl_version, info.cuda_state,           info.cuda_loaded_runtime_version, info.onnx};
  (*env)->SetIntArrayRegion(env, ints, 0, 8, v);
}

/* values: allocated, peak, reserved, raw_allocs, raw_frees (the Java array has 5). */
JNIEXPORT void JNICALL FN(deviceMemoryStats)(JNIEnv* env, jclass c, jint type, jint id, jlongArray values) {
  (void)c;
  dp_memory_stats stats = {0};
  stats.struct_size = (uint32_t)sizeof stats;
  if (!dpj_ok(env, dp_device_memory_stats(type, id, &stats))) return;
  jlong v[5] = {(jlong)stats.allocated, (jlong)stats.peak, (jlong)stats.reserved, (jlong)stats.raw_allocs,
                (jlong)stats.raw_frees};
  (*env)->SetLongArrayRegion(env, values, 0, 5, v);
}

JNIEXPORT void JNICALL FN(resetPeakMemory)(JNIEnv* env, jclass c, jint type, jint id) {
  (void)c;
  dpj_ok(env, dp_device_reset_peak_memory(type, id));
}

JNIEXPORT jlong JNICALL FN(dtypeSize)(JNIEnv* env, jclass c, jint dtype) {
  (void)env, (void)c;
  return (jlong)dp_dtype_size(dtype);
}

JNIEXPORT void JNICALL FN(setCpuThreads)(JNIEnv* env, jclass c, jint max_threads) {
  (void)c;
  dpj_ok(env, dp_set_cpu_threads(max_threads));
}

JNIEXPORT jint JNICALL FN(cpuThreads)(JNIEnv* env, jclass c) {
  (void)env, (void)c;
  return (jint)dp_cpu_threads();
}
