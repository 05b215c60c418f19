/* Checkpoints: save (sync/async), wait, load, info, step directories. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name
#define INFO(v) DPJ_PTR(dp_checkpoint_info, v)

void dpj_save_options(dp_checkpoint_save_options* o, const char* model_name, jlong iteration, jdouble share) {
  dp_checkpoint_save_options_init(o, sizeof *o);
  o->model_name = model_name;
  o->iteration = iteration;
  o->async_write_share = share;
}

void dpj_load_options(dp_checkpoint_load_options* o, const char** names, size_t num_names, jint lenient,
                      jint no_verify, jint mmap) {
  dp_checkpoint_load_options_init(o, sizeof *o);
  o->names = names;
  o->num_names = num_names;
  o->lenient = lenient;
  o->no_verify = no_verify;
  o->mmap = mmap;
}

/* Runs save (async when out_job is set) with the Java arguments converted. */
static jlong save(JNIEnv* env, jlong ws, jobjectArray jnames, jbyteArray jpath, jboolean has_options,
                  jbyteArray jmodel_name, jlong iteration, jdouble share, int async) {
  int ok1, ok2 = 1, ok3 = 1;
  size_t n = 0;
  jlong result = 0;
  char* path = dpj_cstr(env, jpath, &ok1);
  char* model_name = ok1 ? dpj_cstr(env, jmodel_name, &ok2) : NULL;
  const char** names = ok1 && ok2 ? dpj_cstrs(env, jnames, &n, &ok3) : NULL;
  if (ok1 && ok2 && ok3) {
    dp_checkpoint_save_options o;
    dpj_save_options(&o, model_name, iteration, share);
    const dp_workspace* w = DPJ_PTR(const dp_workspace, ws);
    if (async) {
      dp_checkpoint_job* job = NULL;
      if (dpj_ok(env, dp_checkpoint_save_async(w, names, n, path, has_options ? &o : NULL, &job)))
        result = DPJ_JLONG(job);
    } else {
      dpj_ok(env, dp_checkpoint_save(w, names, n, path, has_options ? &o : NULL));
    }
  }
  dpj_free_cstrs(names, n);
  free(model_name);
  free(path);
  return result;
}

JNIEXPORT void JNICALL FN(checkpointSave)(JNIEnv* env, jclass c, jlong ws, jobjectArray names, jbyteArray path,
                                          jboolean has_options, jbyteArray model_name, jlong iteration,
                                          jdouble share) {
  (void)c;
  save(env, ws, names, path, has_options, model_name, iteration, share, 0);
}

JNIEXPORT jlong JNICALL FN(checkpointSaveAsync)(JNIEnv* env, jclass c, jlong ws, jobjectArray names,
                                                jbyteArray path, jboolean has_options, jbyteArray model_name,
                                                jlong iteration, jdouble share) {
  (void)c;
  return save(env, ws, names, path, has_options, model_name, iteration, share, 1);
}

/* true once the write finished well, false on DP_ERR_TIMEOUT; throws the
 * write's error. */
JNIEXPORT jboolean JNICALL FN(checkpointWait)(JNIEnv* env, jclass c, jlong job, jlong timeout_ms) {
  (void)c;
  dp_status* s = dp_checkpoint_wait(DPJ_PTR(dp_checkpoint_job, job), timeout_ms);
  if (s != NULL && dp_status_code(s) == DP_ERR_TIMEOUT) {
    dp_status_free(s);
    return JNI_FALSE;
  }
  return dpj_ok(env, s) ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT void JNICALL FN(checkpointJobFree)(JNIEnv* env, jclass c, jlong job) {
  (void)env, (void)c;
  dp_checkpoint_job_free(DPJ_PTR(dp_checkpoint_job, job));
}

JNIEXPORT void JNICALL FN(checkpointLoad)(JNIEnv* env, jclass c, jlong ws, jbyteArray jpath, jboolean has_options,
                                          jobjectArray jnames, jint lenient, jint no_verify, jint mmap) {
  (void)c;
  int ok1, ok2 = 1;
  size_t n = 0;
  char* path = dpj_cstr(env, jpath, &ok1);
  const char** names = ok1 ? dpj_cstrs(env, jnames, &n, &ok2) : NULL;
  if (ok1 && ok2) {
    dp_checkpoint_load_options o;
    dpj_load_options(&o, names, n, lenient, no_verify, mmap);
    dpj_ok(env, dp_checkpoint_load(DPJ_PTR(dp_workspace, ws), path, has_options ? &o : NULL));
  }
  dpj_free_cstrs(names, n);
  free(path);
}

JNIEXPORT jlong JNICALL FN(checkpointInfoFromFile)(JNIEnv* env, jclass c, jbyteArray jpath) {
  (void)c;
  int ok;
  char* path = dpj_cstr(env, jpath, &ok);
  if (!ok) return 0;
  dp_checkpoint_info* info = NULL;
  dp_status* s = dp_checkpoint_info_from_file(path, &info);
  free(path);
  return dpj_ok(env, s) ? DPJ_JLONG(info) : 0;
}

JNIEXPORT jstring JNICALL FN(checkpointInfoDpVersion)(JNIEnv* env, jclass c, jlong info) {
  (void)c;
  return dpj_string(env, dp_checkpoint_info_dp_version(INFO(info)));
}

JNIEXPORT jstring JNICALL FN(checkpointInfoModelName)(JNIEnv* env, jclass c, jlong info) {
  (void)c;
  return dpj_string(env, dp_checkpoint_info_model_name(INFO(info)));
}

JNIEXPORT jlong JNICALL FN(checkpointInfoIteration)(JNIEnv* env, jclass c, jlong info) {
  (void)env, (void)c;
  return dp_checkpoint_info_iteration(INFO(info));
}

JNIEXPORT jlong JNICALL FN(checkpointInfoNumTensors)(JNIEnv* env, jclass c, jlong info) {
  (void)env, (void)c;
  return (jlong)dp_checkpoint_info_num_tensors(INFO(info));
}

JNIEXPORT jstring JNICALL FN(checkpointInfoTensorName)(JNIEnv* env, jclass c, jlong info, jlong i) {
  (void)c;
  return dpj_string(env, dp_checkpoint_info_tensor_name(INFO(info), (size_t)i));
}

JNIEXPORT jint JNICALL FN(checkpointInfoTensorDtype)(JNIEnv* env, jclass c, jlong info, jlong i) {
  (void)env, (void)c;
  return dp_checkpoint_info_tensor_dtype(INFO(info), (size_t)i);
}

JNIEXPORT jlong JNICALL FN(checkpointInfoTensorNdim)(JNIEnv* env, jclass c, jlong info, jlong i) {
  (void)env, (void)c;
  return (jlong)dp_checkpoint_info_tensor_ndim(INFO(info), (size_t)i);
}

JNIEXPORT jlongArray JNICALL FN(checkpointInfoTensorDims)(JNIEnv* env, jclass c, jlong info, jlong i) {
  (void)c;
  return dpj_longs(env, dp_checkpoint_info_tensor_dims(INFO(info), (size_t)i),
                   dp_checkpoint_info_tensor_ndim(INFO(info), (size_t)i));
}

JNIEXPORT jlong JNICALL FN(checkpointInfoTensorNbytes)(JNIEnv* env, jclass c, jlong info, jlong i) {
  (void)env, (void)c;
  return (jlong)dp_checkpoint_info_tensor_nbytes(INFO(info), (size_t)i);
}

JNIEXPORT void JNICALL FN(checkpointInfoFree)(JNIEnv* env, jclass c, jlong info) {
  (void)env, (void)c;
  dp_checkpoint_info_free(INFO(info));
}

JNIEXPORT jobjectArray JNICALL FN(checkpointListSteps)(JNIEnv* env, jclass c, jbyteArray jdir) {
  (void)c;
  int ok;
  char* dir = dpj_cstr(env, jdir, &ok);
  if (!ok) return NULL;
  dp_string_list* list = NULL;
  dp_status* s = dp_checkpoint_list_steps(dir, &list);
  free(dir);
  return dpj_ok(env, s) ? dpj_string_list(env, list) : NULL;
}

JNIEXPORT void JNICALL FN(checkpointPrune)(JNIEnv* env, jclass c, jbyteArray jdir, jint keep) {
  (void)c;
  int ok;
  char* dir = dpj_cstr(env, jdir, &ok);
  if (!ok) return;
  dp_status* s = dp_checkpoint_prune(dir, keep);
  free(dir);
  dpj_ok(env, s);
}
