/* Workspaces: create (with options), feed, fetch, has, list. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name

JNIEXPORT jlong JNICALL FN(workspaceCreate)(JNIEnv* env, jclass c) {
  (void)c;
  dp_workspace* ws = NULL;
  return dpj_ok(env, dp_workspace_create(&ws)) ? DPJ_JLONG(ws) : 0;
}

JNIEXPORT jlong JNICALL FN(workspaceCreateWithOptions)(JNIEnv* env, jclass c, jboolean has_options,
                                                       jlong max_bytes) {
  (void)c;
  dp_workspace_options o;
  dp_workspace_options_init(&o, sizeof o);
  o.max_bytes = (uint64_t)max_bytes;
  dp_workspace* ws = NULL;
  return dpj_ok(env, dp_workspace_create_with_options(has_options ? &o : NULL, &ws)) ? DPJ_JLONG(ws) : 0;
}

JNIEXPORT void JNICALL FN(workspaceFree)(JNIEnv* env, jclass c, jlong ws) {
  (void)env, (void)c;
  dp_workspace_free(DPJ_PTR(dp_workspace, ws));
}

JNIEXPORT void JNICALL FN(workspaceFeed)(JNIEnv* env, jclass c, jlong ws, jbyteArray jname, jlong t) {
  (void)c;
  int ok;
  char* name = dpj_cstr(env, jname, &ok);
  if (!ok) return;
  dp_status* s = dp_workspace_feed(DPJ_PTR(dp_workspace, ws), name, DPJ_PTR(dp_tensor, t));
  free(name);
  dpj_ok(env, s);
}

JNIEXPORT jlong JNICALL FN(workspaceFetch)(JNIEnv* env, jclass c, jlong ws, jbyteArray jname) {
  (void)c;
  int ok;
  char* name = dpj_cstr(env, jname, &ok);
  if (!ok) return 0;
  dp_tensor* t = NULL;
  dp_status* s = dp_workspace_fetch(DPJ_PTR(dp_workspace, ws), name, &t);
  free(name);
  return dpj_ok(env, s) ? DPJ_JLONG(t) : 0;
}

JNIEXPORT jboolean JNICALL FN(workspaceHasBlob)(JNIEnv* env, jclass c, jlong ws, jbyteArray jname) {
  (void)c;
  int ok;
  char* name = dpj_cstr(env, jname, &ok);
  if (!ok) return JNI_FALSE;
  int32_t has = 0;
  dp_status* s = dp_workspace_has_blob(DPJ_PTR(dp_workspace, ws), name, &has);
  free(name);
  return dpj_ok(env, s) && has ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jobjectArray JNICALL FN(workspaceListBlobs)(JNIEnv* env, jclass c, jlong ws, jbyteArray jprefix) {
  (void)c;
  int ok;
  char* prefix = dpj_cstr(env, jprefix, &ok);
  if (!ok) return NULL;
  dp_string_list* list = NULL;
  dp_status* s = dp_workspace_list_blobs(DPJ_PTR(dp_workspace, ws), prefix, &list);
  free(prefix);
  return dpj_ok(env, s) ? dpj_string_list(env, list) : NULL;
}
