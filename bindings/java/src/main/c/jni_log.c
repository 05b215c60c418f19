/* dp_log_set_callback -> org.dp.Log.dispatch(int, byte[]) on whichever
 * thread dp logs from. The Java side holds the user's callback, so the C
 * side keeps no reference that could dangle. */
#include "dp_jni.h"

#include <string.h>

static jclass g_log_class;      /* org.dp.Log */
static jmethodID g_log_dispatch; /* static void dispatch(int, byte[]) */

void dpj_log_on_load(JNIEnv* env) {
  jclass local = (*env)->FindClass(env, "org/dp/Log");
  if (local == NULL) return;
  g_log_class = (jclass)(*env)->NewGlobalRef(env, local);
  (*env)->DeleteLocalRef(env, local);
  g_log_dispatch = (*env)->GetStaticMethodID(env, g_log_class, "dispatch", "(I[B)V");
}

static void trampoline(void* user_data, int32_t level, const char* message) {
  (void)user_data;
  JNIEnv* env = dpj_env();
  if (env == NULL) return; /* the JVM is shutting down: drop the message */
  /* dp may log from inside a JNI call that already has an exception
   * pending; calling Java then is illegal, so park it and re-throw it. */
  jthrowable pending = (*env)->ExceptionOccurred(env);
  if (pending != NULL) (*env)->ExceptionClear(env);
  if ((*env)->PushLocalFrame(env, 4) == 0) {
    size_t n = strlen(message);
    jbyteArray bytes = (*env)->NewByteArray(env, (jsize)n);
    if (bytes != NULL) {
      (*env)->SetByteArrayRegion(env, bytes, 0, (jsize)n, (const jbyte*)message);
      (*env)->CallStaticVoidMethod(env, g_log_class, g_log_dispatch, (jint)level, bytes);
    }
    (*env)->PopLocalFrame(env, NULL);
  }
  /* Log.dispatch catches everything, but nothing may stay pending. */
  if ((*env)->ExceptionCheck(env)) (*env)->ExceptionClear(env);
  if (pending != NULL) {
    (*env)->Throw(env, pending);
    (*env)->DeleteLocalRef(env, pending);
  }
}

JNIEXPORT void JNICALL Java_org_dp_Native_logSetCallback(JNIEnv* env, jclass c, jboolean enabled, jint min_level) {
  (void)env, (void)c;
  dp_log_set_callback(enabled ? trampoline : NULL, NULL, min_level);
}
