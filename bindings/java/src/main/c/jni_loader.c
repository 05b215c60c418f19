/* The input pipeline (dp_loader_*): loaders over tensors, and loaders whose
 * samples a Java LoaderCallback writes. dp calls the callback on the
 * loader's own thread, which dpj_env attaches to the JVM as a daemon (and
 * detaches when it exits): the trampoline hands org.dp.Loader$Fill.run the
 * indices as a long[] and direct ByteBuffers over the batch buffers. The
 * Java handle is a dpj_loader, which owns the global reference to the Fill
 * and drops it once dp_loader_free has stopped the thread. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name

typedef struct {
  dp_loader* loader;
  jobject fill; /* global reference to the org.dp.Loader$Fill; NULL for tensor loaders */
} dpj_loader;

#define LOADER(v) (DPJ_PTR(dpj_loader, v)->loader)

static jclass g_byte_buffer_class; /* java.nio.ByteBuffer */
static jmethodID g_fill_run;       /* int Loader$Fill.run(long[], ByteBuffer[]) */

void dpj_loader_on_load(JNIEnv* env) {
  jclass local = (*env)->FindClass(env, "java/nio/ByteBuffer");
  if (local == NULL) return;
  g_byte_buffer_class = (jclass)(*env)->NewGlobalRef(env, local);
  (*env)->DeleteLocalRef(env, local);
  local = (*env)->FindClass(env, "org/dp/Loader$Fill");
  if (local == NULL) return;
  g_fill_run = (*env)->GetMethodID(env, local, "run", "([J[Ljava/nio/ByteBuffer;)I");
  (*env)->DeleteLocalRef(env, local);
}

static void loader_options(dp_loader_options* o, jlong batch_size, jlong seed, jint no_shuffle, jint keep_last,
                           jint num_shards, jint shard_id, jint prefetch, jint timeout_ms, jint device_type,
                           jint device_id, jint host_dataset) {
  dp_loader_options_init(o, sizeof *o);
  o->batch_size = batch_size;
  o->seed = (uint64_t)seed;
  o->no_shuffle = no_shuffle;
  o->keep_last = keep_last;
  o->num_shards = num_shards;
  o->shard_id = shard_id;
  o->prefetch = prefetch;
  o->timeout_ms = timeout_ms;
  o->device_type = device_type;
  o->device_id = device_id;
  o->host_dataset = host_dataset;
}

/* Wraps a created loader; on failure (no memory) frees it and throws. */
static jlong wrap(JNIEnv* env, dp_loader* loader, jobject fill) {
  dpj_loader* h = malloc(sizeof *h);
  if (h == NULL) {
    dp_loader_free(loader);
    if (fill != NULL) (*env)->DeleteGlobalRef(env, fill);
    dpj_throw_oom(env, "dp: loader handle");
    return 0;
  }
  h->loader = loader;
  h->fill = fill;
  return DPJ_JLONG(h);
}

JNIEXPORT jlong JNICALL FN(loaderCreate)(JNIEnv* env, jclass c, jlong ws, jobjectArray jblobs, jlongArray jtensors,
                                         jboolean has_options, jlong batch_size, jlong seed, jint no_shuffle,
                                         jint keep_last, jint num_shards, jint shard_id, jint prefetch,
                                         jint timeout_ms, jint device_type, jint device_id, jint host_dataset) {
  (void)c;
  size_t n;
  int ok;
  const char** blobs = dpj_cstrs(env, jblobs, &n, &ok);
  if (!ok) return 0;
  jsize nt = jtensors != NULL ? (*env)->GetArrayLength(env, jtensors) : 0;
  if ((size_t)nt != n) {
    dpj_free_cstrs(blobs, n);
    dpj_throw_illegal_argument(env, "dp: as many tensors as blob names are needed");
    return 0;
  }
  const dp_tensor** tensors = malloc(((size_t)nt + 1) * sizeof *tensors);
  jlong* ptrs = malloc(((size_t)nt + 1) * sizeof *ptrs);
  if (tensors == NULL || ptrs == NULL) {
    free(ptrs);
    free((void*)tensors);
    dpj_free_cstrs(blobs, n);
    dpj_throw_oom(env, "dp: tensor array");
    return 0;
  }
  if (nt > 0) (*env)->GetLongArrayRegion(env, jtensors, 0, nt, ptrs);
  for (jsize i = 0; i < nt; ++i) tensors[i] = DPJ_PTR(const dp_tensor, ptrs[i]);
  dp_loader_options o;
  loader_options(&o, batch_size, seed, no_shuffle, keep_last, num_shards, shard_id, prefetch, timeout_ms,
                 device_type, device_id, host_dataset);
  dp_loader* loader = NULL;
  dp_status* s = dp_loader_create(DPJ_PTR(dp_workspace, ws), blobs, tensors, n, has_options ? &o : NULL, &loader);
  free(ptrs);
  free((void*)tensors);
  dpj_free_cstrs(blobs, n);
  return dpj_ok(env, s) ? wrap(env, loader, NULL) : 0;
}

/* dp_loader_fill_fn: runs Loader$Fill.run on the loader's thread. Any
 * failure to reach Java fails the batch (-1); nothing stays pending. */
static int32_t fill_trampoline(void* user_data, const int64_t* indices, size_t count, void* const* buffers,
                               const size_t* row_bytes, size_t num_inputs) {
  static char empty; /* the address of zero-byte buffers */
  jobject fill = (jobject)user_data;
  JNIEnv* env = dpj_env();
  if (env == NULL) return -1; /* the JVM is shutting down */
  if ((*env)->PushLocalFrame(env, 4) != 0) {
    (*env)->ExceptionClear(env);
    return -1;
  }
  int32_t rc = -1;
  jlongArray idx = (*env)->NewLongArray(env, (jsize)count);
  jobjectArray bufs = idx != NULL ? (*env)->NewObjectArray(env, (jsize)num_inputs, g_byte_buffer_class, NULL) : NULL;
  int ok = bufs != NULL;
  if (ok && count > 0) (*env)->SetLongArrayRegion(env, idx, 0, (jsize)count, (const jlong*)indices);
  for (size_t j = 0; ok && j < num_inputs; ++j) {
    size_t n = count * row_bytes[j];
    jobject b = (*env)->NewDirectByteBuffer(env, n > 0 && buffers[j] != NULL ? buffers[j] : &empty,
                                            n > 0 && buffers[j] != NULL ? (jlong)n : 0);
    if (b == NULL) {
      ok = 0;
      break;
    }
    (*env)->SetObjectArrayElement(env, bufs, (jsize)j, b);
    (*env)->DeleteLocalRef(env, b);
  }
  if (ok) rc = (*env)->CallIntMethod(env, fill, g_fill_run, idx, bufs);
  /* Fill.run catches everything, but a JNI failure above may have thrown. */
  if ((*env)->ExceptionCheck(env)) {
    (*env)->ExceptionClear(env);
    rc = -1;
  }
  (*env)->PopLocalFrame(env, NULL);
  return rc;
}

JNIEXPORT jlong JNICALL FN(loaderCreateCallback)(JNIEnv* env, jclass c, jlong ws, jobjectArray jblobs,
                                                 jintArray jdtypes, jobjectArray jdims, jlong num_samples,
                                                 jobject jfill, jboolean has_options, jlong batch_size, jlong seed,
                                                 jint no_shuffle, jint keep_last, jint num_shards, jint shard_id,
                                                 jint prefetch, jint timeout_ms, jint device_type,
                                                 jint device_id, jint host_dataset) {
  (void)c;
  size_t n;
  int ok;
  const char** blobs = dpj_cstrs(env, jblobs, &n, &ok);
  if (!ok) return 0;
  dp_loader_input* inputs = calloc(n + 1, sizeof *inputs);
  jint* dtypes = malloc((n + 1) * sizeof *dtypes);
  if (inputs == NULL || dtypes == NULL) {
    free(dtypes);
    free(inputs);
    dpj_free_cstrs(blobs, n);
    dpj_throw_oom(env, "dp: loader inputs");
    return 0;
  }
  if (n > 0) (*env)->GetIntArrayRegion(env, jdtypes, 0, (jsize)n, dtypes);
  size_t filled = 0;
  for (; ok && filled < n; ++filled) {
    dp_loader_input* in = &inputs[filled];
    in->blob = blobs[filled];
    in->dtype = dtypes[filled];
    jlongArray d = (jlongArray)(*env)->GetObjectArrayElement(env, jdims, (jsize)filled);
    in->sample_dims = dpj_dims(env, d, &in->sample_ndim, &ok);
    (*env)->DeleteLocalRef(env, d);
  }
  dp_status* s = NULL;
  dp_loader* loader = NULL;
  jobject fill = NULL;
  if (ok) {
    fill = (*env)->NewGlobalRef(env, jfill);
    if (fill == NULL && jfill != NULL) {
      ok = 0;
      dpj_throw_oom(env, "dp: global reference");
    }
  }
  if (ok) {
    dp_loader_options o;
    loader_options(&o, batch_size, seed, no_shuffle, keep_last, num_shards, shard_id, prefetch, timeout_ms,
                   device_type, device_id, host_dataset);
    /* A null callback reaches dp as a NULL fill function (INVALID_ARGUMENT). */
    s = dp_loader_create_callback(DPJ_PTR(dp_workspace, ws), n > 0 ? inputs : NULL, n, num_samples,
                                  fill != NULL ? fill_trampoline : NULL, fill, has_options ? &o : NULL, &loader);
  }
  for (size_t i = 0; i < filled; ++i) free((void*)inputs[i].sample_dims);
  free(dtypes);
  free(inputs);
  dpj_free_cstrs(blobs, n);
  if (!ok) return 0;
  if (!dpj_ok(env, s)) {
    /* Not created: dp never calls the trampoline. */
    if (fill != NULL) (*env)->DeleteGlobalRef(env, fill);
    return 0;
  }
  return wrap(env, loader, fill);
}

/* true when a batch was fed, false at the end of the epoch. */
JNIEXPORT jboolean JNICALL FN(loaderNext)(JNIEnv* env, jclass c, jlong l) {
  (void)c;
  int32_t fed = 0;
  return dpj_ok(env, dp_loader_next(LOADER(l), &fed)) && fed ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT void JNICALL FN(loaderSeek)(JNIEnv* env, jclass c, jlong l, jlong epoch, jlong step) {
  (void)c;
  dpj_ok(env, dp_loader_seek(LOADER(l), epoch, step));
}

JNIEXPORT jlong JNICALL FN(loaderStepsPerEpoch)(JNIEnv* env, jclass c, jlong l) {
  (void)env, (void)c;
  return dp_loader_steps_per_epoch(LOADER(l));
}

JNIEXPORT jlong JNICALL FN(loaderEpoch)(JNIEnv* env, jclass c, jlong l) {
  (void)env, (void)c;
  return dp_loader_epoch(LOADER(l));
}

JNIEXPORT jlong JNICALL FN(loaderStep)(JNIEnv* env, jclass c, jlong l) {
  (void)env, (void)c;
  return dp_loader_step(LOADER(l));
}

JNIEXPORT jlong JNICALL FN(loaderBatchRows)(JNIEnv* env, jclass c, jlong l) {
  (void)env, (void)c;
  return dp_loader_batch_rows(LOADER(l));
}

/* Stops the loader's thread (so the callback is not running), then drops
 * the callback's global reference. */
JNIEXPORT void JNICALL FN(loaderFree)(JNIEnv* env, jclass c, jlong l) {
  (void)c;
  dpj_loader* h = DPJ_PTR(dpj_loader, l);
  if (h == NULL) return;
  dp_loader_free(h->loader);
  if (h->fill != NULL) (*env)->DeleteGlobalRef(env, h->fill);
  free(h);
}
