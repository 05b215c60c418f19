/* Tensors: created from Java arrays (copied: the GC moves heap arrays), from
 * direct ByteBuffers (copied, borrowed, or owned through a global reference
 * that dp's deleter drops), from IDX files; accessors and copies out. */
#include "dp_jni.h"

#include <stdatomic.h>
#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name

static atomic_long g_live_owned; /* global refs held for owned tensors */

JNIEXPORT jlong JNICALL FN(tensorCreateArray)(JNIEnv* env, jclass c, jint dtype, jlongArray jdims, jobject array,
                                              jlong nbytes) {
  (void)c;
  size_t ndim;
  int ok;
  int64_t* dims = dpj_dims(env, jdims, &ndim, &ok);
  if (!ok) return 0;
  dp_tensor* t = NULL;
  dp_status* s;
  if (array == NULL) {
    s = dp_tensor_create(dtype, dims, ndim, NULL, 0, &t);
  } else {
    /* Critical access avoids a second copy; dp only memcpy's inside. */
    void* data = (*env)->GetPrimitiveArrayCritical(env, (jarray)array, NULL);
    if (data == NULL) {
      free(dims);
      return 0;
    }
    s = dp_tensor_create(dtype, dims, ndim, data, (size_t)nbytes, &t);
    (*env)->ReleasePrimitiveArrayCritical(env, (jarray)array, data, JNI_ABORT);
  }
  free(dims);
  return dpj_ok(env, s) ? DPJ_JLONG(t) : 0;
}

/* The deleter of owned tensors: drops the buffer's global reference, from
 * whichever thread frees the last reference (possibly a dp worker). */
static void release_buffer(void* data, void* user_data) {
  (void)data;
  JNIEnv* env = dpj_env();
  if (env != NULL) (*env)->DeleteGlobalRef(env, (jobject)user_data);
  atomic_fetch_sub(&g_live_owned, 1);
}

JNIEXPORT jlong JNICALL FN(tensorCreateDirect)(JNIEnv* env, jclass c, jint dtype, jlongArray jdims, jobject buffer,
                                               jlong offset, jlong nbytes, jint mode) {
  (void)c;
  char* base = buffer ? (char*)(*env)->GetDirectBufferAddress(env, buffer) : NULL;
  jlong capacity = buffer ? (*env)->GetDirectBufferCapacity(env, buffer) : -1;
  if (base == NULL || capacity < 0) {
    dpj_throw_illegal_argument(env, "dp: the ByteBuffer must be a direct buffer");
    return 0;
  }
  if (offset < 0 || nbytes < 0 || offset > capacity || nbytes > capacity - offset) {
    dpj_throw_illegal_argument(env, "dp: the tensor's bytes lie past the ByteBuffer's end");
    return 0;
  }
  size_t ndim;
  int ok;
  int64_t* dims = dpj_dims(env, jdims, &ndim, &ok);
  if (!ok) return 0;
  void* data = base + offset;
  dp_tensor* t = NULL;
  dp_status* s;
  if (mode == 0) {
    s = dp_tensor_create(dtype, dims, ndim, data, (size_t)nbytes, &t);
  } else if (mode == 1) {
    s = dp_tensor_create_borrowed(dtype, dims, ndim, data, (size_t)nbytes, &t);
  } else {
    jobject ref = (*env)->NewGlobalRef(env, buffer);
    if (ref == NULL) {
      free(dims);
      dpj_throw_oom(env, "dp: global reference");
      return 0;
    }
    atomic_fetch_add(&g_live_owned, 1);
    s = dp_tensor_create_owned(dtype, dims, ndim, data, (size_t)nbytes, release_buffer, ref, &t);
    if (s != NULL) { /* ownership stayed with us: the deleter will not run */
      (*env)->DeleteGlobalRef(env, ref);
      atomic_fetch_sub(&g_live_owned, 1);
    }
  }
  free(dims);
  return dpj_ok(env, s) ? DPJ_JLONG(t) : 0;
}

JNIEXPORT jlong JNICALL FN(liveOwnedBuffers)(JNIEnv* env, jclass c) {
  (void)env, (void)c;
  return atomic_load(&g_live_owned);
}

JNIEXPORT jlong JNICALL FN(tensorFromIdxFile)(JNIEnv* env, jclass c, jbyteArray jpath) {
  (void)c;
  int ok;
  char* path = dpj_cstr(env, jpath, &ok);
  if (!ok) return 0;
  dp_tensor* t = NULL;
  dp_status* s = dp_tensor_from_idx_file(path, &t);
  free(path);
  return dpj_ok(env, s) ? DPJ_JLONG(t) : 0;
}

JNIEXPORT jint JNICALL FN(tensorDtype)(JNIEnv* env, jclass c, jlong t) {
  (void)env, (void)c;
  return dp_tensor_dtype(DPJ_PTR(dp_tensor, t));
}

JNIEXPORT jlong JNICALL FN(tensorNdim)(JNIEnv* env, jclass c, jlong t) {
  (void)env, (void)c;
  return (jlong)dp_tensor_ndim(DPJ_PTR(dp_tensor, t));
}

JNIEXPORT jlongArray JNICALL FN(tensorDims)(JNIEnv* env, jclass c, jlong t) {
  (void)c;
  const dp_tensor* tensor = DPJ_PTR(dp_tensor, t);
  return dpj_longs(env, dp_tensor_dims(tensor), dp_tensor_ndim(tensor));
}

JNIEXPORT jlong JNICALL FN(tensorNumel)(JNIEnv* env, jclass c, jlong t) {
  (void)env, (void)c;
  return dp_tensor_numel(DPJ_PTR(dp_tensor, t));
}

JNIEXPORT jlong JNICALL FN(tensorNbytes)(JNIEnv* env, jclass c, jlong t) {
  (void)env, (void)c;
  return (jlong)dp_tensor_nbytes(DPJ_PTR(dp_tensor, t));
}

/* A direct ByteBuffer over the tensor's (read-only) bytes, NULL when empty. */
JNIEXPORT jobject JNICALL FN(tensorData)(JNIEnv* env, jclass c, jlong t) {
  (void)c;
  const dp_tensor* tensor = DPJ_PTR(dp_tensor, t);
  size_t n = dp_tensor_nbytes(tensor);
  const void* data = dp_tensor_data(tensor);
  if (n == 0 || data == NULL) return NULL;
  return (*env)->NewDirectByteBuffer(env, (void*)data, (jlong)n);
}

JNIEXPORT void JNICALL FN(tensorCopyToArray)(JNIEnv* env, jclass c, jlong t, jobject array, jlong nbytes) {
  (void)c;
  void* dst = (*env)->GetPrimitiveArrayCritical(env, (jarray)array, NULL);
  if (dst == NULL) return;
  dp_status* s = dp_tensor_copy_to(DPJ_PTR(dp_tensor, t), dst, (size_t)nbytes);
  (*env)->ReleasePrimitiveArrayCritical(env, (jarray)array, dst, 0);
  dpj_ok(env, s);
}

JNIEXPORT void JNICALL FN(tensorCopyToDirect)(JNIEnv* env, jclass c, jlong t, jobject buffer, jlong offset,
                                              jlong nbytes) {
  (void)c;
  char* base = buffer ? (char*)(*env)->GetDirectBufferAddress(env, buffer) : NULL;
  jlong capacity = buffer ? (*env)->GetDirectBufferCapacity(env, buffer) : -1;
  if (base == NULL || capacity < 0) {
    dpj_throw_illegal_argument(env, "dp: the ByteBuffer must be a direct buffer");
    return;
  }
  if (offset < 0 || nbytes < 0 || offset > capacity || nbytes > capacity - offset) {
    dpj_throw_illegal_argument(env, "dp: the ByteBuffer has no room for the tensor's bytes");
    return;
  }
  dpj_ok(env, dp_tensor_copy_to(DPJ_PTR(dp_tensor, t), base + offset, (size_t)nbytes));
}

JNIEXPORT void JNICALL FN(tensorFree)(JNIEnv* env, jclass c, jlong t) {
  (void)env, (void)c;
  dp_tensor_free(DPJ_PTR(dp_tensor, t));
}
