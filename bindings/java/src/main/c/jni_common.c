/* JNI_OnLoad (caches every class and method the glue uses, so that no call
 * looks anything up), thread attachment, strings and status -> exception. */
#define _POSIX_C_SOURCE 200809L
#include "dp_jni.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

JavaVM* dpj_vm;

static jclass g_exception_class;   /* org.dp.DpException */
static jmethodID g_exception_make; /* static DpException of(int, String) */
static jclass g_string_class;
static jmethodID g_string_from_bytes; /* String(byte[], String charsetName) */
static jstring g_utf8_name;           /* "UTF-8" */
static jclass g_illegal_argument;
static jclass g_oom;
static pthread_key_t g_detach_key;

void dpj_log_on_load(JNIEnv* env);    /* jni_log.c */
void dpj_loader_on_load(JNIEnv* env); /* jni_loader.c */

/* Threads we attached are detached when they exit (a pthread key's
 * destructor runs then), so that the JVM does not keep their Thread objects. */
static void detach_thread(void* unused) {
  (void)unused;
  if (dpj_vm != NULL) (*dpj_vm)->DetachCurrentThread(dpj_vm);
}

JNIEnv* dpj_env(void) {
  JNIEnv* env = NULL;
  if (dpj_vm == NULL) return NULL;
  jint rc = (*dpj_vm)->GetEnv(dpj_vm, (void**)&env, JNI_VERSION_1_8);
  if (rc == JNI_OK) return env;
  if (rc != JNI_EDETACHED) return NULL;
  JavaVMAttachArgs args = {JNI_VERSION_1_8, "dp-native", NULL};
  /* As a daemon: a dp worker thread must never keep the JVM from exiting. */
  if ((*dpj_vm)->AttachCurrentThreadAsDaemon(dpj_vm, (void**)&env, &args) != JNI_OK) return NULL;
  pthread_setspecific(g_detach_key, env);
  return env;
}

static jclass global_class(JNIEnv* env, const char* name) {
  jclass local = (*env)->FindClass(env, name);
  if (local == NULL) return NULL;
  jclass global = (jclass)(*env)->NewGlobalRef(env, local);
  (*env)->DeleteLocalRef(env, local);
  return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
  (void)reserved;
  JNIEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  dpj_vm = vm;
  if (pthread_key_create(&g_detach_key, detach_thread) != 0) return JNI_ERR;
  g_exception_class = global_class(env, "org/dp/DpException");
  g_string_class = global_class(env, "java/lang/String");
  g_illegal_argument = global_class(env, "java/lang/IllegalArgumentException");
  g_oom = global_class(env, "java/lang/OutOfMemoryError");
  if (!g_exception_class || !g_string_class || !g_illegal_argument || !g_oom) return JNI_ERR;
  g_exception_make =
      (*env)->GetStaticMethodID(env, g_exception_class, "of", "(ILjava/lang/String;)Lorg/dp/DpException;");
  g_string_from_bytes = (*env)->GetMethodID(env, g_string_class, "<init>", "([BLjava/lang/String;)V");
  if (!g_exception_make || !g_string_from_bytes) return JNI_ERR;
  jstring name = (*env)->NewStringUTF(env, "UTF-8");
  g_utf8_name = (jstring)(*env)->NewGlobalRef(env, name);
  (*env)->DeleteLocalRef(env, name);
  dpj_log_on_load(env);
  if ((*env)->ExceptionCheck(env)) return JNI_ERR;
  dpj_loader_on_load(env);
  if ((*env)->ExceptionCheck(env)) return JNI_ERR;
  return JNI_VERSION_1_8;
}

void dpj_throw_illegal_argument(JNIEnv* env, const char* message) {
  (*env)->ThrowNew(env, g_illegal_argument, message);
}

void dpj_throw_oom(JNIEnv* env, const char* what) { (*env)->ThrowNew(env, g_oom, what); }

int dpj_ok(JNIEnv* env, dp_status* status) {
  if (status == NULL) return 1;
  int32_t code = dp_status_code(status);
  jstring message = dpj_string(env, dp_status_message(status));
  dp_status_free(status); /* freed before anything is thrown */
  if (message == NULL) return 0; /* OutOfMemoryError pending */
  jobject ex = (*env)->CallStaticObjectMethod(env, g_exception_class, g_exception_make, (jint)code, message);
  if ((*env)->ExceptionCheck(env)) return 0; /* building it failed: that exception stands */
  (*env)->DeleteLocalRef(env, message);
  if (ex != NULL) {
    (*env)->Throw(env, (jthrowable)ex);
    (*env)->DeleteLocalRef(env, ex);
  }
  return 0;
}

jstring dpj_string(JNIEnv* env, const char* s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s);
  int ascii = 1;
  for (size_t i = 0; i < n && ascii; ++i) ascii = (unsigned char)s[i] < 0x80;
  /* NewStringUTF takes modified UTF-8, which differs from UTF-8 only past
   * ASCII: those strings go through String(byte[], "UTF-8"). */
  if (ascii) return (*env)->NewStringUTF(env, s);
  jbyteArray bytes = (*env)->NewByteArray(env, (jsize)n);
  if (bytes == NULL) return NULL;
  (*env)->SetByteArrayRegion(env, bytes, 0, (jsize)n, (const jbyte*)s);
  jstring str = (jstring)(*env)->NewObject(env, g_string_class, g_string_from_bytes, bytes, g_utf8_name);
  (*env)->DeleteLocalRef(env, bytes);
  return str;
}

static const char* list_get(const void* list, size_t i) { return dp_string_list_get((const dp_string_list*)list, i); }

jobjectArray dpj_strings(JNIEnv* env, const void* obj, size_t n, const char* (*get)(const void*, size_t)) {
  jobjectArray arr = (*env)->NewObjectArray(env, (jsize)n, g_string_class, NULL);
  for (size_t i = 0; arr != NULL && i < n; ++i) {
    jstring s = dpj_string(env, get(obj, i));
    if ((*env)->ExceptionCheck(env)) return NULL;
    (*env)->SetObjectArrayElement(env, arr, (jsize)i, s);
    (*env)->DeleteLocalRef(env, s);
  }
  return arr;
}

jobjectArray dpj_string_list(JNIEnv* env, dp_string_list* list) {
  jobjectArray arr = dpj_strings(env, list, dp_string_list_size(list), list_get);
  dp_string_list_free(list);
  return arr;
}

jbyteArray dpj_buffer_bytes(JNIEnv* env, dp_buffer* buffer) {
  size_t n = dp_buffer_size(buffer);
  jbyteArray arr = (*env)->NewByteArray(env, (jsize)n);
  if (arr != NULL) (*env)->SetByteArrayRegion(env, arr, 0, (jsize)n, (const jbyte*)dp_buffer_data(buffer));
  dp_buffer_free(buffer);
  return arr;
}

jlongArray dpj_longs(JNIEnv* env, const int64_t* v, size_t n) {
  jlongArray arr = (*env)->NewLongArray(env, (jsize)n);
  if (arr != NULL && n > 0) (*env)->SetLongArrayRegion(env, arr, 0, (jsize)n, (const jlong*)v);
  return arr;
}

char* dpj_bytes(JNIEnv* env, jbyteArray bytes, size_t* n, int* ok) {
  *ok = 1;
  *n = 0;
  if (bytes == NULL) return NULL;
  jsize len = (*env)->GetArrayLength(env, bytes);
  char* p = malloc((size_t)len + 1);
  if (p == NULL) {
    *ok = 0;
    dpj_throw_oom(env, "dp: byte[] copy");
    return NULL;
  }
  (*env)->GetByteArrayRegion(env, bytes, 0, len, (jbyte*)p);
  p[len] = '\0'; /* Java already ends strings with 0; this guards a caller that did not */
  *n = (size_t)len;
  return p;
}

char* dpj_cstr(JNIEnv* env, jbyteArray bytes, int* ok) {
  size_t n;
  return dpj_bytes(env, bytes, &n, ok);
}

const char** dpj_cstrs(JNIEnv* env, jobjectArray arr, size_t* count, int* ok) {
  *ok = 1;
  *count = 0;
  if (arr == NULL) return NULL;
  jsize n = (*env)->GetArrayLength(env, arr);
  const char** strs = calloc((size_t)n + 1, sizeof *strs);
  if (strs == NULL) {
    *ok = 0;
    dpj_throw_oom(env, "dp: string array copy");
    return NULL;
  }
  for (jsize i = 0; i < n; ++i) {
    jbyteArray b = (jbyteArray)(*env)->GetObjectArrayElement(env, arr, i);
    strs[i] = dpj_cstr(env, b, ok); /* a null element stays NULL: dp reports it */
    (*env)->DeleteLocalRef(env, b);
    if (!*ok) {
      dpj_free_cstrs(strs, (size_t)i);
      return NULL;
    }
  }
  *count = (size_t)n;
  return strs;
}

void dpj_free_cstrs(const char** strs, size_t count) {
  if (strs == NULL) return;
  for (size_t i = 0; i < count; ++i) free((void*)strs[i]);
  free((void*)strs);
}

int64_t* dpj_dims(JNIEnv* env, jlongArray dims, size_t* ndim, int* ok) {
  *ok = 1;
  *ndim = 0;
  if (dims == NULL) return NULL;
  jsize n = (*env)->GetArrayLength(env, dims);
  int64_t* d = malloc(((size_t)n + 1) * sizeof *d);
  if (d == NULL) {
    *ok = 0;
    dpj_throw_oom(env, "dp: dims copy");
    return NULL;
  }
  (*env)->GetLongArrayRegion(env, dims, 0, n, (jlong*)d);
  *ndim = (size_t)n;
  return d;
}
