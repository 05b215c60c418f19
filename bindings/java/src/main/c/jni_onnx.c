/* ONNX import and export (since 0.6): models from ONNX bytes or files, and
 * a model's inference net as ONNX bytes or a file. */
#include "dp_jni.h"

#include <stdlib.h>

#define FN(name) Java_org_dp_Native_##name
#define MODEL(v) DPJ_PTR(dp_model, v)

/* The import options' strings and optimizer, copied from Java for the call. */
typedef struct {
  dp_onnx_import_options o;
  dp_optimizer_info opt;
  char* labels;
  char* type;
  char* lr_policy;
} import_options;

static void import_options_free(import_options* io) {
  free(io->labels);
  free(io->type);
  free(io->lr_policy);
}

/* Fills *io from the Java arguments; 0 with an exception pending. doubles:
 * lr, momentum, beta1, beta2, epsilon, weight_decay, gamma, power,
 * warmup_start_factor; longs: nesterov, stepsize, max_iter, warmup_iters (as
 * modelGetOptimizer writes them). */
static int import_options_from_java(JNIEnv* env, import_options* io, jint head, jbyteArray jlabels,
                                    jboolean has_optimizer, jbyteArray jtype, jbyteArray jpolicy,
                                    jdoubleArray jdoubles, jlongArray jlongs) {
  int ok = 1;
  io->labels = io->type = io->lr_policy = NULL;
  dp_onnx_import_options_init(&io->o, sizeof io->o);
  io->o.head = head;
  io->labels = dpj_cstr(env, jlabels, &ok);
  if (!ok) return 0;
  io->o.labels = io->labels;
  if (!has_optimizer) return 1;
  io->type = dpj_cstr(env, jtype, &ok);
  if (!ok) return 0;
  io->lr_policy = dpj_cstr(env, jpolicy, &ok);
  if (!ok) return 0;
  jdouble d[9];
  jlong l[4];
  (*env)->GetDoubleArrayRegion(env, jdoubles, 0, 9, d);
  if ((*env)->ExceptionCheck(env)) return 0;
  (*env)->GetLongArrayRegion(env, jlongs, 0, 4, l);
  if ((*env)->ExceptionCheck(env)) return 0;
  dp_optimizer_info* o = &io->opt;
  *o = (dp_optimizer_info){0};
  o->struct_size = (uint32_t)sizeof *o;
  o->type = io->type;
  /* "" is "fixed", as NULL. */
  o->lr_policy = io->lr_policy != NULL && io->lr_policy[0] != '\0' ? io->lr_policy : NULL;
  o->lr = d[0];
  o->momentum = d[1];
  o->beta1 = d[2];
  o->beta2 = d[3];
  o->epsilon = d[4];
  o->weight_decay = d[5];
  o->gamma = d[6];
  o->power = d[7];
  o->warmup_start_factor = d[8];
  o->nesterov = (int32_t)l[0];
  o->stepsize = l[1];
  o->max_iter = l[2];
  o->warmup_iters = l[3];
  io->o.optimizer = o;
  return 1;
}

JNIEXPORT jlong JNICALL FN(modelFromOnnxBuffer)(JNIEnv* env, jclass c, jbyteArray data, jboolean has_options,
                                                jint head, jbyteArray labels, jboolean has_optimizer,
                                                jbyteArray type, jbyteArray lr_policy, jdoubleArray doubles,
                                                jlongArray longs) {
  (void)c;
  import_options io;
  if (!import_options_from_java(env, &io, head, labels, has_optimizer, type, lr_policy, doubles, longs)) {
    import_options_free(&io);
    return 0;
  }
  size_t n;
  int ok;
  char* p = dpj_bytes(env, data, &n, &ok);
  dp_model* m = NULL;
  dp_status* s = ok ? dp_model_from_onnx_buffer(p, n, has_options ? &io.o : NULL, &m) : NULL;
  free(p);
  import_options_free(&io);
  return ok && dpj_ok(env, s) ? DPJ_JLONG(m) : 0;
}

JNIEXPORT jlong JNICALL FN(modelFromOnnxFile)(JNIEnv* env, jclass c, jbyteArray jpath, jboolean has_options,
                                              jint head, jbyteArray labels, jboolean has_optimizer, jbyteArray type,
                                              jbyteArray lr_policy, jdoubleArray doubles, jlongArray longs) {
  (void)c;
  import_options io;
  if (!import_options_from_java(env, &io, head, labels, has_optimizer, type, lr_policy, doubles, longs)) {
    import_options_free(&io);
    return 0;
  }
  int ok;
  char* path = dpj_cstr(env, jpath, &ok);
  dp_model* m = NULL;
  dp_status* s = ok ? dp_model_from_onnx_file(path, has_options ? &io.o : NULL, &m) : NULL;
  free(path);
  import_options_free(&io);
  return ok && dpj_ok(env, s) ? DPJ_JLONG(m) : 0;
}

/* The export options' strings, copied from Java for the call. */
typedef struct {
  dp_onnx_export_options o;
  const char** outputs;
  size_t num_outputs;
  char* param_prefix;
} export_options;

static void export_options_free(export_options* eo) {
  dpj_free_cstrs(eo->outputs, eo->num_outputs);
  free(eo->param_prefix);
}

/* 0 with an exception pending. */
static int export_options_from_java(JNIEnv* env, export_options* eo, jint opset, jobjectArray joutputs,
                                    jbyteArray jprefix) {
  int ok = 1;
  eo->outputs = NULL;
  eo->num_outputs = 0;
  eo->param_prefix = NULL;
  dp_onnx_export_options_init(&eo->o, sizeof eo->o);
  eo->o.opset = opset;
  eo->outputs = dpj_cstrs(env, joutputs, &eo->num_outputs, &ok);
  if (!ok) return 0;
  eo->o.outputs = eo->outputs;
  eo->o.num_outputs = eo->num_outputs;
  eo->param_prefix = dpj_cstr(env, jprefix, &ok);
  if (!ok) return 0;
  eo->o.param_prefix = eo->param_prefix;
  return 1;
}

JNIEXPORT jbyteArray JNICALL FN(modelToOnnx)(JNIEnv* env, jclass c, jlong m, jlong ws, jboolean has_options,
                                             jint opset, jobjectArray outputs, jbyteArray param_prefix) {
  (void)c;
  export_options eo;
  dp_buffer* b = NULL;
  dp_status* s = NULL;
  int ok = export_options_from_java(env, &eo, opset, outputs, param_prefix);
  if (ok) s = dp_model_to_onnx(MODEL(m), DPJ_PTR(dp_workspace, ws), has_options ? &eo.o : NULL, &b);
  export_options_free(&eo);
  return ok && dpj_ok(env, s) ? dpj_buffer_bytes(env, b) : NULL;
}

JNIEXPORT void JNICALL FN(modelSaveOnnx)(JNIEnv* env, jclass c, jlong m, jlong ws, jboolean has_options, jint opset,
                                         jobjectArray outputs, jbyteArray param_prefix, jbyteArray jpath) {
  (void)c;
  export_options eo;
  int ok = export_options_from_java(env, &eo, opset, outputs, param_prefix), ok2 = 0;
  char* path = ok ? dpj_cstr(env, jpath, &ok2) : NULL;
  if (ok && ok2)
    dpj_ok(env, dp_model_save_onnx(MODEL(m), DPJ_PTR(dp_workspace, ws), has_options ? &eo.o : NULL, path));
  free(path);
  export_options_free(&eo);
}
