/* Nets: create with dp_net_options, run (sync/async), wait, cancel, trace. */
#include "dp_jni.h"

#define FN(name) Java_org_dp_Native_##name
#define NET(v) DPJ_PTR(dp_net, v)

JNIEXPORT jlong JNICALL FN(netCreate)(JNIEnv* env, jclass c, jlong ws, jlong def, jboolean has_options,
                                      jint executor, jint num_workers, jint streams_per_gpu, jint profile,
                                      jint unread_feed_error, jint memory, jint cuda_graphs,
                                      jint math_mode) {
  (void)c;
  dp_net_options o;
  dp_net_options_init(&o, sizeof o);
  o.executor = executor;
  o.num_workers = num_workers;
  o.streams_per_gpu = streams_per_gpu;
  o.profile = profile;
  o.unread_feed_error = unread_feed_error;
  o.memory = memory;
  o.cuda_graphs = cuda_graphs;
  o.math_mode = math_mode;
  dp_net* net = NULL;
  dp_status* s = dp_net_create(DPJ_PTR(dp_workspace, ws), DPJ_PTR(dp_netdef, def), has_options ? &o : NULL, &net);
  return dpj_ok(env, s) ? DPJ_JLONG(net) : 0;
}

JNIEXPORT void JNICALL FN(netRun)(JNIEnv* env, jclass c, jlong net) {
  (void)c;
  dpj_ok(env, dp_net_run(NET(net)));
}

JNIEXPORT void JNICALL FN(netRunAsync)(JNIEnv* env, jclass c, jlong net) {
  (void)c;
  dpj_ok(env, dp_net_run_async(NET(net)));
}

/* true when the run is over (successfully), false on DP_ERR_TIMEOUT. */
JNIEXPORT jboolean JNICALL FN(netWait)(JNIEnv* env, jclass c, jlong net, jlong timeout_ms) {
  (void)c;
  dp_status* s = dp_net_wait(NET(net), timeout_ms);
  if (s != NULL && dp_status_code(s) == DP_ERR_TIMEOUT) {
    dp_status_free(s);
    return JNI_FALSE;
  }
  return dpj_ok(env, s) ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT void JNICALL FN(netCancel)(JNIEnv* env, jclass c, jlong net) {
  (void)env, (void)c;
  dp_net_cancel(NET(net));
}

/* values: mode, peak_bytes, bytes_in_use, temporaries, slots, slot_bytes (the Java array has 6). */
JNIEXPORT void JNICALL FN(netMemoryStats)(JNIEnv* env, jclass c, jlong net, jint type, jint id, jlongArray values) {
  (void)c;
  dp_net_memory m = {0};
  m.struct_size = (uint32_t)sizeof m;
  if (!dpj_ok(env, dp_net_memory_stats(NET(net), type, id, &m))) return;
  jlong v[6] = {(jlong)m.mode,        (jlong)m.peak_bytes, (jlong)m.bytes_in_use,
                (jlong)m.temporaries, (jlong)m.slots,      (jlong)m.slot_bytes};
  (*env)->SetLongArrayRegion(env, values, 0, 6, v);
}

JNIEXPORT jbyteArray JNICALL FN(netTraceJson)(JNIEnv* env, jclass c, jlong net) {
  (void)c;
  dp_buffer* b = NULL;
  return dpj_ok(env, dp_net_trace_json(NET(net), &b)) ? dpj_buffer_bytes(env, b) : NULL;
}

JNIEXPORT jbyteArray JNICALL FN(netToDot)(JNIEnv* env, jclass c, jlong net) {
  (void)c;
  dp_buffer* b = NULL;
  return dpj_ok(env, dp_net_to_dot(NET(net), &b)) ? dpj_buffer_bytes(env, b) : NULL;
}

JNIEXPORT void JNICALL FN(netFree)(JNIEnv* env, jclass c, jlong net) {
  (void)env, (void)c;
  dp_net_free(NET(net));
}
