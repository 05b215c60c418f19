/*
 * Zero means default, for every options struct of the public C API (strict
 * C11, public header only). Bindings (Go, Rust, Java) create zeroed structs
 * and cannot use C macros, so for every struct:
 *   - a zeroed struct with struct_size set, dp_*_options_init and the
 *     *_INIT macro are the same bytes and behave the same;
 *   - a zeroed struct of every kind trains the sample's MLP
 *     (samples/nets/fashion_mlp.json) to the same params, bit for bit, as the
 *     *_INIT macros: on one device and data-parallel over two CPU replicas;
 *   - an older caller's shorter struct (struct_size ending before the later
 *     fields) takes the defaults for the fields it lacks;
 *   - a newer caller's longer struct is accepted when the extra bytes are
 *     zero, and refused (DP_ERR_UNIMPLEMENTED) otherwise.
 * Needs DP_SOURCE_ROOT (set by meson test) to find the sample's model.
 */
#include <dp/dp.h>

#include "check.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Whether `size` bytes at p are all zero. */
static int all_zero(const void* p, size_t size) {
  const unsigned char* b = (const unsigned char*)p;
  size_t i;
  for (i = 0; i < size; ++i)
    if (b[i] != 0) return 0;
  return 1;
}

/* ------------------------------------------------------------------------ */
/* The three ways of filling in defaults are the same bytes                  */
/* ------------------------------------------------------------------------ */

/* The macros in static storage, whose padding C11 zero-fills too, so that
 * whole structs compare with memcmp. */
static const dp_workspace_options k_ws_macro = DP_WORKSPACE_OPTIONS_INIT;
static const dp_net_options k_net_macro = DP_NET_OPTIONS_INIT;
static const dp_gradient_options k_grad_macro = DP_GRADIENT_OPTIONS_INIT;
static const dp_training_options k_train_macro = DP_TRAINING_OPTIONS_INIT;
static const dp_parallel_options k_par_macro = DP_PARALLEL_OPTIONS_INIT;
static const dp_inference_options k_inf_macro = DP_INFERENCE_OPTIONS_INIT;

/* Checks one struct type: the static macro value, a zeroed struct with
 * struct_size set and dp_*_options_init agree byte for byte, and the macro
 * in automatic storage agrees field by field (`auto_ok`). */
#define CHECK_SAME_BYTES(T, macro_value, init_fn)                  \
  do {                                                            \
    T zeroed_, inited_;                                           \
    memset(&zeroed_, 0, sizeof zeroed_);                          \
    zeroed_.struct_size = (uint32_t)sizeof zeroed_;               \
    memset(&inited_, 0xab, sizeof inited_);                       \
    init_fn(&inited_, sizeof inited_);                            \
    CHECK((macro_value).struct_size == sizeof(T));                \
    CHECK(memcmp(&zeroed_, &(macro_value), sizeof(T)) == 0);      \
    CHECK(memcmp(&inited_, &(macro_value), sizeof(T)) == 0);      \
  } while (0)

static void test_same_bytes(void) {
  CHECK_SAME_BYTES(dp_workspace_options, k_ws_macro, dp_workspace_options_init);
  CHECK_SAME_BYTES(dp_net_options, k_net_macro, dp_net_options_init);
  CHECK_SAME_BYTES(dp_gradient_options, k_grad_macro, dp_gradient_options_init);
  CHECK_SAME_BYTES(dp_training_options, k_train_macro, dp_training_options_init);
  CHECK_SAME_BYTES(dp_parallel_options, k_par_macro, dp_parallel_options_init);
  CHECK_SAME_BYTES(dp_inference_options, k_inf_macro, dp_inference_options_init);
  {
    /* The macros in automatic storage: every field zero but struct_size. */
    dp_workspace_options w = DP_WORKSPACE_OPTIONS_INIT;
    dp_net_options n = DP_NET_OPTIONS_INIT;
    dp_gradient_options g = DP_GRADIENT_OPTIONS_INIT;
    dp_training_options t = DP_TRAINING_OPTIONS_INIT;
    dp_parallel_options p = DP_PARALLEL_OPTIONS_INIT;
    CHECK(w.struct_size == sizeof w && w.max_bytes == 0);
    CHECK(n.struct_size == sizeof n && n.executor == DP_EXECUTOR_DEFAULT && n.num_workers == 0 &&
          n.streams_per_gpu == 0 && n.profile == 0);
    CHECK(g.struct_size == sizeof g && g.losses == NULL && g.num_losses == 0 && g.wrt == NULL && g.num_wrt == 0 &&
          g.stop == NULL && g.num_stop == 0 && g.loss_scale == 0.0);
    CHECK(t.struct_size == sizeof t && t.loss_scale == 0.0 && t.lr == 0.0);
    CHECK(p.struct_size == sizeof p && p.device_type == DP_DEVICE_CPU && p.device_ids == NULL &&
          p.num_devices == 0 && p.first_bucket_bytes == 0 && p.bucket_bytes == 0 && p.uneven_split == 0 &&
          p.no_fuse == 0 && p.lr == 0.0 && p.accumulate_steps == 0 && p.bmuf == 0 && p.bmuf_block_lr == 0.0 &&
          p.bmuf_block_momentum == 0.0 && p.bmuf_no_nesterov == 0 && p.bmuf_block_length == 0 &&
          p.computed_params == DP_COMPUTED_PARAMS_BROADCAST && p.cuda_collectives == DP_CUDA_COLLECTIVES_NCCL &&
          p.shared_model == 0 && p.sync_bn == 0);
  }
}

/* dp_*_options_init writes exactly struct_size bytes: an older caller's
 * shorter struct is not written past, a newer caller's longer one is zeroed
 * whole. NULL and sizes below sizeof(uint32_t) do nothing. */
static void test_init_writes_struct_size_bytes(void) {
  unsigned char buf[sizeof(dp_parallel_options) + 32];
  const size_t short_size = offsetof(dp_parallel_options, lr);
  const size_t long_size = sizeof(dp_parallel_options) + 16;
  dp_parallel_options* p = (dp_parallel_options*)(void*)buf;
  uint32_t size_field;
  size_t i;
  int untouched = 1;

  memset(buf, 0xab, sizeof buf);
  dp_parallel_options_init(p, short_size);
  memcpy(&size_field, buf, sizeof size_field);
  CHECK(size_field == short_size);
  CHECK(all_zero(buf + sizeof(uint32_t), short_size - sizeof(uint32_t)));
  for (i = short_size; i < sizeof buf; ++i) untouched &= buf[i] == 0xab;
  CHECK(untouched);

  memset(buf, 0xab, sizeof buf);
  dp_parallel_options_init(p, long_size);
  memcpy(&size_field, buf, sizeof size_field);
  CHECK(size_field == long_size);
  CHECK(all_zero(buf + sizeof(uint32_t), long_size - sizeof(uint32_t)));
  untouched = 1;
  for (i = long_size; i < sizeof buf; ++i) untouched &= buf[i] == 0xab;
  CHECK(untouched);

  memset(buf, 0xab, sizeof buf);
  dp_parallel_options_init(p, sizeof(uint32_t) - 1);
  dp_parallel_options_init(p, 0);
  untouched = 1;
  for (i = 0; i < sizeof buf; ++i) untouched &= buf[i] == 0xab;
  CHECK(untouched);
  dp_workspace_options_init(NULL, sizeof(dp_workspace_options));
  dp_net_options_init(NULL, sizeof(dp_net_options));
  dp_gradient_options_init(NULL, sizeof(dp_gradient_options));
  dp_training_options_init(NULL, sizeof(dp_training_options));
  dp_parallel_options_init(NULL, sizeof(dp_parallel_options));
  dp_inference_options_init(NULL, sizeof(dp_inference_options));
}

/* ------------------------------------------------------------------------ */
/* Behaviour: zeroed == init function == macro                               */
/* ------------------------------------------------------------------------ */

/* The text of a netdef's JSON (malloc'd), or NULL. */
static char* netdef_json(const dp_netdef* def) {
  dp_buffer* buf = NULL;
  char* text = NULL;
  if (def != NULL && EXPECT_OK(dp_netdef_to_json(def, &buf))) {
    text = (char*)malloc(dp_buffer_size(buf) + 1);
    if (text != NULL) {
      memcpy(text, dp_buffer_data(buf), dp_buffer_size(buf));
      text[dp_buffer_size(buf)] = '\0';
    }
  }
  dp_buffer_free(buf);
  return text;
}

/* Whether two netdefs serialise to the same JSON. */
static int same_netdef(const dp_netdef* a, const dp_netdef* b) {
  char* ja = netdef_json(a);
  char* jb = netdef_json(b);
  int same = ja != NULL && jb != NULL && strcmp(ja, jb) == 0;
  free(ja);
  free(jb);
  return same;
}

/* The sample's MLP (784 -> 512 -> 512 -> 10, Adam). */
static dp_model* load_mlp(void) {
  const char* root = getenv("DP_SOURCE_ROOT");
  char path[4096];
  dp_model* model = NULL;
  if (!CHECK(root != NULL)) return NULL;
  snprintf(path, sizeof path, "%s/samples/nets/fashion_mlp.json", root);
  if (!EXPECT_OK(dp_model_from_file(path, &model))) return NULL;
  return model;
}

/* A tiny net reading "x" for the workspace and net options. */
static const char kScaleJson[] =
    "{\"name\":\"scale\",\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Scale\",\"inputs\":[\"x\"],"
    "\"outputs\":[\"y\"],\"args\":[{\"name\":\"scale\",\"f\":3}]}]}";

/* Creates a workspace with `wo` and a net with `no`, runs it, and returns y[1] (NAN on failure). */
static float run_scale(const dp_workspace_options* wo, const dp_net_options* no) {
  dp_workspace* ws = NULL;
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_tensor *x = NULL, *y = NULL;
  const float xs[2] = {1.5f, -2.0f};
  const int64_t dims[1] = {2};
  float out[2] = {NAN, NAN};
  if (EXPECT_OK(dp_workspace_create_with_options(wo, &ws)) &&
      EXPECT_OK(dp_netdef_from_json(kScaleJson, strlen(kScaleJson), &def)) &&
      EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, xs, sizeof xs, &x)) &&
      EXPECT_OK(dp_workspace_feed(ws, "x", x)) && EXPECT_OK(dp_net_create(ws, def, no, &net)) &&
      EXPECT_OK(dp_net_run(net)) && EXPECT_OK(dp_workspace_fetch(ws, "y", &y)))
    EXPECT_OK(dp_tensor_copy_to(y, out, sizeof out));
  dp_tensor_free(y);
  dp_tensor_free(x);
  dp_net_free(net);
  dp_netdef_free(def);
  dp_workspace_free(ws);
  return out[1];
}

static void test_workspace_and_net_behave_alike(void) {
  dp_workspace_options wz, wi, wm = DP_WORKSPACE_OPTIONS_INIT;
  dp_net_options nz, ni, nm = DP_NET_OPTIONS_INIT;
  memset(&wz, 0, sizeof wz);
  wz.struct_size = (uint32_t)sizeof wz;
  dp_workspace_options_init(&wi, sizeof wi);
  memset(&nz, 0, sizeof nz);
  nz.struct_size = (uint32_t)sizeof nz;
  dp_net_options_init(&ni, sizeof ni);
  CHECK(run_scale(&wz, &nz) == -6.0f);
  CHECK(run_scale(&wi, &ni) == -6.0f);
  CHECK(run_scale(&wm, &nm) == -6.0f);
  CHECK(run_scale(NULL, NULL) == -6.0f);
  {
    /* An older dp_net_options ending before streams_per_gpu: the later
     * fields are not read (these values would be refused). */
    dp_net_options old = DP_NET_OPTIONS_INIT;
    old.struct_size = (uint32_t)offsetof(dp_net_options, streams_per_gpu);
    old.streams_per_gpu = -5;
    old.profile = 1;
    CHECK(run_scale(NULL, &old) == -6.0f);
  }
}

static void test_gradient_options_behave_alike(void) {
  static const char kFwd[] =
      "{\"name\":\"fwd\",\"external_inputs\":[\"x\",\"w\",\"b\",\"label\"],\"ops\":["
      "{\"type\":\"FC\",\"inputs\":[\"x\",\"w\",\"b\"],\"outputs\":[\"y\"]},"
      "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"y\",\"label\"],\"outputs\":[\"p\",\"loss\"]}]}";
  const char* losses[] = {"loss"};
  const char* wrt[] = {"w", "b"};
  dp_netdef* fwd = NULL;
  dp_netdef *gz = NULL, *gi = NULL, *gm = NULL, *g1 = NULL;
  dp_gradient_options z, i, m = DP_GRADIENT_OPTIONS_INIT, one = DP_GRADIENT_OPTIONS_INIT;
  if (!EXPECT_OK(dp_netdef_from_json(kFwd, strlen(kFwd), &fwd))) return;
  memset(&z, 0, sizeof z);
  z.struct_size = (uint32_t)sizeof z;
  dp_gradient_options_init(&i, sizeof i);
  z.losses = i.losses = m.losses = one.losses = losses;
  z.num_losses = i.num_losses = m.num_losses = one.num_losses = 1;
  z.wrt = i.wrt = m.wrt = one.wrt = wrt;
  z.num_wrt = i.num_wrt = m.num_wrt = one.num_wrt = 2;
  one.loss_scale = 1.0; /* the documented default of loss_scale 0 */
  if (EXPECT_OK(dp_netdef_add_gradients(fwd, &z, &gz, NULL)) && EXPECT_OK(dp_netdef_add_gradients(fwd, &i, &gi, NULL)) &&
      EXPECT_OK(dp_netdef_add_gradients(fwd, &m, &gm, NULL)) && EXPECT_OK(dp_netdef_add_gradients(fwd, &one, &g1, NULL))) {
    CHECK(dp_netdef_num_ops(gz) > dp_netdef_num_ops(fwd));
    CHECK(same_netdef(gz, gi));
    CHECK(same_netdef(gz, gm));
    CHECK(same_netdef(gz, g1));
  }
  {
    /* No losses: the one field without a default. */
    dp_netdef* untouched = SENTINEL;
    dp_gradient_options none;
    dp_gradient_options_init(&none, sizeof none);
    dp_status* st = dp_netdef_add_gradients(fwd, &none, &untouched, NULL);
    CHECK(st != NULL && strstr(dp_status_message(st), "loss") != NULL);
    dp_status_free(st);
    CHECK(untouched == SENTINEL);
  }
  dp_netdef_free(gz);
  dp_netdef_free(gi);
  dp_netdef_free(gm);
  dp_netdef_free(g1);
  dp_netdef_free(fwd);
}

/* The three training nets of `model` for `options`; 1 on success. */
static int build_training(const dp_model* model, const dp_training_options* options, dp_netdef* nets[3]) {
  return EXPECT_OK(dp_model_build_training(model, options, &nets[0], &nets[1], &nets[2]));
}

static void free_nets(dp_netdef* nets[3]) {
  int k;
  for (k = 0; k < 3; ++k) {
    dp_netdef_free(nets[k]);
    nets[k] = NULL;
  }
}

static int same_nets(dp_netdef* const a[3], dp_netdef* const b[3]) {
  return same_netdef(a[0], b[0]) && same_netdef(a[1], b[1]) && same_netdef(a[2], b[2]);
}

static void test_training_options_behave_alike(const dp_model* model) {
  dp_training_options z, i, m = DP_TRAINING_OPTIONS_INIT, old = DP_TRAINING_OPTIONS_INIT;
  dp_netdef *nz[3] = {0}, *ni[3] = {0}, *nm[3] = {0}, *nn[3] = {0}, *no[3] = {0};
  memset(&z, 0, sizeof z);
  z.struct_size = (uint32_t)sizeof z;
  dp_training_options_init(&i, sizeof i);
  /* An older struct ending before lr: lr is not read (-1 would be refused). */
  old.struct_size = (uint32_t)offsetof(dp_training_options, lr);
  old.lr = -1.0;
  if (build_training(model, &z, nz) && build_training(model, &i, ni) && build_training(model, &m, nm) &&
      build_training(model, NULL, nn) && build_training(model, &old, no)) {
    CHECK(same_nets(nz, ni));
    CHECK(same_nets(nz, nm));
    CHECK(same_nets(nz, nn));
    CHECK(same_nets(nz, no));
  }
  free_nets(nz);
  free_nets(ni);
  free_nets(nm);
  free_nets(nn);
  free_nets(no);
}

/* The nets of dp_model_parallelize(model, options); 1 on success. */
static int parallel_nets(const dp_model* model, const dp_parallel_options* options, dp_netdef* nets[3]) {
  dp_parallel_model* pm = NULL;
  int ok = EXPECT_OK(dp_model_parallelize(model, options, &pm)) &&
           EXPECT_OK(dp_parallel_model_nets(pm, &nets[0], &nets[1], &nets[2]));
  dp_parallel_model_free(pm);
  return ok;
}

static void test_parallel_options_behave_alike(const dp_model* model) {
  const int32_t one_id[1] = {0};
  const int32_t two_ids[2] = {0, 1};
  dp_parallel_options z, i, m = DP_PARALLEL_OPTIONS_INIT, e = DP_PARALLEL_OPTIONS_INIT;
  dp_netdef *nz[3] = {0}, *ni[3] = {0}, *nm[3] = {0}, *ne[3] = {0};
  dp_parallel_model* untouched = SENTINEL;

  /* Zeroed: the default device set, one CPU replica (cpu:0). */
  memset(&z, 0, sizeof z);
  z.struct_size = (uint32_t)sizeof z;
  dp_parallel_options_init(&i, sizeof i);
  /* Every documented default spelled out. */
  e.device_type = DP_DEVICE_CPU;
  e.device_ids = one_id;
  e.num_devices = 1;
  e.first_bucket_bytes = 1 << 20;
  e.bucket_bytes = 25 << 20;
  e.accumulate_steps = 1;
  e.computed_params = DP_COMPUTED_PARAMS_BROADCAST;
  e.cuda_collectives = DP_CUDA_COLLECTIVES_NCCL;
  if (parallel_nets(model, &z, nz) && parallel_nets(model, &i, ni) && parallel_nets(model, &m, nm) &&
      parallel_nets(model, &e, ne)) {
    CHECK(same_nets(nz, ni));
    CHECK(same_nets(nz, nm));
    CHECK(same_nets(nz, ne));
  }
  {
    dp_parallel_model* pm = NULL;
    if (EXPECT_OK(dp_model_parallelize(model, &z, &pm))) {
      CHECK(dp_parallel_model_num_replicas(pm) == 1);
      CHECK(strcmp(dp_parallel_model_scope(pm, 0), "cpu_0/") == 0);
    }
    dp_parallel_model_free(pm);
  }
  free_nets(nz);
  free_nets(ne);

  /* no_fuse = 1 keeps FC and Relu apart: more ops than the default. */
  z.device_ids = two_ids;
  z.num_devices = 2;
  if (parallel_nets(model, &z, nz)) {
    dp_netdef* nf[3] = {0};
    z.no_fuse = 1;
    if (parallel_nets(model, &z, nf)) CHECK(dp_netdef_num_ops(nf[1]) > dp_netdef_num_ops(nz[1]));
    z.no_fuse = 0;
    free_nets(nf);
  }
  free_nets(nz);

  {
    /* BMUF with zeros: block_lr 1, block_momentum 1 - 1/2, Nesterov, 8 steps. */
    dp_parallel_model *bz = NULL, *be = NULL, *bn = NULL, *bp = NULL;
    dp_netdef *kz = NULL, *ke = NULL, *kn = NULL, *kp = NULL;
    int32_t lz = 0, le = 0;
    dp_parallel_options b = z, x = z;
    b.bmuf = 1;
    x.bmuf = 1;
    x.bmuf_block_lr = 1.0;
    x.bmuf_block_momentum = 0.5;
    x.bmuf_block_length = 8;
    if (EXPECT_OK(dp_model_parallelize(model, &b, &bz)) && EXPECT_OK(dp_parallel_model_block_net(bz, &kz, &lz)) &&
        EXPECT_OK(dp_model_parallelize(model, &x, &be)) && EXPECT_OK(dp_parallel_model_block_net(be, &ke, &le))) {
      CHECK(lz == 8 && le == 8);
      CHECK(same_netdef(kz, ke));
    }
    /* Negative momentum: none (mu = 0), which differs from the default. */
    b.bmuf_block_momentum = -1.0;
    if (EXPECT_OK(dp_model_parallelize(model, &b, &bn)) && EXPECT_OK(dp_parallel_model_block_net(bn, &kn, NULL)))
      CHECK(!same_netdef(kn, kz));
    b.bmuf_block_momentum = 0.0;
    /* bmuf_no_nesterov differs from the default too. */
    b.bmuf_no_nesterov = 1;
    if (EXPECT_OK(dp_model_parallelize(model, &b, &bp)) && EXPECT_OK(dp_parallel_model_block_net(bp, &kp, NULL)))
      CHECK(!same_netdef(kp, kz));
    b.bmuf_no_nesterov = 0;
    /* Bad values name the option; the out-parameter stays untouched. */
    b.bmuf_block_momentum = 1.0;
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "bmuf_block_momentum");
    b.bmuf_block_momentum = NAN;
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "bmuf_block_momentum");
    b.bmuf_block_momentum = 0.0;
    b.bmuf_block_lr = -1.0;
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "bmuf_block_lr");
    b.bmuf_block_lr = 0.0;
    b.bmuf_block_length = -1;
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "bmuf_block_length");
    dp_netdef_free(kz);
    dp_netdef_free(ke);
    dp_netdef_free(kn);
    dp_netdef_free(kp);
    dp_parallel_model_free(bz);
    dp_parallel_model_free(be);
    dp_parallel_model_free(bn);
    dp_parallel_model_free(bp);
  }
  {
    /* accumulate_steps 0 is 1: no accumulate net. */
    dp_parallel_model* pm = NULL;
    dp_netdef* acc = SENTINEL;
    if (EXPECT_OK(dp_model_parallelize(model, &z, &pm))) {
      EXPECT_CODE(dp_parallel_model_accumulate_net(pm, &acc), DP_ERR_FAILED_PRECONDITION);
      CHECK(acc == SENTINEL);
    }
    dp_parallel_model_free(pm);
  }
  {
    /* Negative sizes and counts, bad enums and device lists are errors naming the option. */
    dp_parallel_options b = z;
    b.first_bucket_bytes = -1;
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "first_bucket_bytes");
    b = z;
    b.bucket_bytes = -1;
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "bucket_bytes");
    b = z;
    b.accumulate_steps = -2;
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "accumulate_steps");
    b = z;
    b.cuda_collectives = 2;
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "cuda_collectives");
    b = z;
    b.num_devices = 0; /* device_ids set, no devices */
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "num_devices");
    b = z;
    b.device_ids = NULL; /* num_devices 2, no ids */
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "device_ids");
    b = z;
    b.struct_size = (uint32_t)offsetof(dp_parallel_options, no_fuse); /* below the minimum */
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "struct_size");
    b = z;
    b.struct_size = 0; /* forgotten */
    EXPECT_ERR(dp_model_parallelize(model, &b, &untouched), DP_ERR_INVALID_ARGUMENT, "struct_size");
    CHECK(untouched == SENTINEL);
  }
  {
    /* The default CUDA device set: refused unless a GPU is visible. */
    dp_parallel_options c;
    int32_t gpus = 0;
    dp_parallel_options_init(&c, sizeof c);
    c.device_type = DP_DEVICE_CUDA;
    if (EXPECT_OK(dp_device_count(DP_DEVICE_CUDA, &gpus)) && gpus == 0)
      EXPECT_ERR(dp_model_parallelize(model, &c, &untouched), DP_ERR_UNAVAILABLE, "device_ids is NULL");
    CHECK(untouched == SENTINEL);
  }
  free_nets(ni);
  free_nets(nm);
}

/* A newer caller's longer struct: accepted when the bytes past this
 * library's struct are zero (their defaults), refused otherwise. */
static void test_longer_structs(const dp_model* model) {
  struct {
    dp_parallel_options o;
    uint64_t newer[2];
  } p;
  struct {
    dp_net_options o;
    int32_t newer[3];
  } n;
  struct {
    dp_workspace_options o;
    uint64_t newer;
  } w;
  struct {
    dp_training_options o;
    double newer;
  } t;
  struct {
    dp_gradient_options o;
    double newer;
  } g;
  struct {
    dp_inference_options o;
    int32_t newer;
  } inf;
  dp_parallel_model* pm = NULL;
  dp_parallel_model* untouched = SENTINEL;
  dp_netdef* def = SENTINEL;
  dp_workspace* ws = NULL;
  const char* losses[] = {"loss"};
  const char* xs[] = {"x"};

  dp_parallel_options_init(&p.o, sizeof p);
  CHECK(p.o.struct_size == sizeof p && p.newer[0] == 0 && p.newer[1] == 0);
  if (EXPECT_OK(dp_model_parallelize(model, &p.o, &pm))) CHECK(dp_parallel_model_num_replicas(pm) == 1);
  dp_parallel_model_free(pm);
  p.newer[1] = 1;
  EXPECT_ERR(dp_model_parallelize(model, &p.o, &untouched), DP_ERR_UNIMPLEMENTED, "struct_size");
  CHECK(untouched == SENTINEL);

  dp_net_options_init(&n.o, sizeof n);
  CHECK(run_scale(NULL, &n.o) == -6.0f);
  {
    dp_netdef* scale = NULL;
    dp_net* net = SENTINEL;
    n.newer[2] = 7;
    if (EXPECT_OK(dp_workspace_create(&ws)) &&
        EXPECT_OK(dp_netdef_from_json(kScaleJson, strlen(kScaleJson), &scale)))
      EXPECT_ERR(dp_net_create(ws, scale, &n.o, &net), DP_ERR_UNIMPLEMENTED, "dp_net_options");
    CHECK(net == SENTINEL);
    dp_netdef_free(scale);
    dp_workspace_free(ws);
    ws = NULL;
  }

  dp_workspace_options_init(&w.o, sizeof w);
  if (EXPECT_OK(dp_workspace_create_with_options(&w.o, &ws))) dp_workspace_free(ws);
  ws = SENTINEL;
  w.newer = 1;
  EXPECT_ERR(dp_workspace_create_with_options(&w.o, &ws), DP_ERR_UNIMPLEMENTED, "dp_workspace_options");
  CHECK(ws == SENTINEL);

  dp_training_options_init(&t.o, sizeof t);
  if (EXPECT_OK(dp_model_build_training(model, &t.o, &def, NULL, NULL))) dp_netdef_free(def);
  def = SENTINEL;
  t.newer = 1.0;
  EXPECT_ERR(dp_model_build_training(model, &t.o, &def, NULL, NULL), DP_ERR_UNIMPLEMENTED, "dp_training_options");
  CHECK(def == SENTINEL);

  dp_inference_options_init(&inf.o, sizeof inf);
  if (EXPECT_OK(dp_model_build_inference(model, NULL, 0, &inf.o, &def))) dp_netdef_free(def);
  def = SENTINEL;
  inf.newer = 1;
  EXPECT_ERR(dp_model_build_inference(model, NULL, 0, &inf.o, &def), DP_ERR_UNIMPLEMENTED, "dp_inference_options");
  CHECK(def == SENTINEL);

  {
    static const char kFwd[] =
        "{\"name\":\"fwd\",\"external_inputs\":[\"x\",\"label\"],\"ops\":["
        "{\"type\":\"SoftmaxWithLoss\",\"inputs\":[\"x\",\"label\"],\"outputs\":[\"p\",\"loss\"]}]}";
    dp_netdef* fwd = NULL;
    if (EXPECT_OK(dp_netdef_from_json(kFwd, strlen(kFwd), &fwd))) {
      dp_gradient_options_init(&g.o, sizeof g);
      g.o.losses = losses;
      g.o.num_losses = 1;
      g.o.wrt = xs;
      g.o.num_wrt = 1;
      def = NULL;
      if (EXPECT_OK(dp_netdef_add_gradients(fwd, &g.o, &def, NULL))) dp_netdef_free(def);
      def = SENTINEL;
      g.newer = 2.0;
      EXPECT_ERR(dp_netdef_add_gradients(fwd, &g.o, &def, NULL), DP_ERR_UNIMPLEMENTED, "dp_gradient_options");
      CHECK(def == SENTINEL);
    }
    dp_netdef_free(fwd);
  }
}

/* ------------------------------------------------------------------------ */
/* Done when: zeroed structs train the sample's MLP as the macros do         */
/* ------------------------------------------------------------------------ */

enum { kBatch = 8, kPixels = 784, kClasses = 10, kSteps = 3, kNumParams = 6 };
static const char* const kParams[kNumParams] = {"fc1_w", "fc1_b", "fc2_w", "fc2_b", "fc3_w", "fc3_b"};

static uint32_t g_lcg;
static uint32_t lcg_next(void) {
  g_lcg = g_lcg * 1664525u + 1013904223u;
  return g_lcg >> 8;
}

/* A deterministic synthetic batch: "data" [B, 1, 28, 28] in [0, 1), "label" [B]. */
static int feed_batch(dp_workspace* ws) {
  static float x[kBatch * kPixels];
  int32_t y[kBatch];
  const int64_t xdims[4] = {kBatch, 1, 28, 28};
  const int64_t ydims[1] = {kBatch};
  dp_tensor *tx = NULL, *ty = NULL;
  int ok;
  size_t k;
  for (k = 0; k < (size_t)kBatch * kPixels; ++k) x[k] = (float)(lcg_next() % 1000u) / 1000.0f;
  for (k = 0; k < kBatch; ++k) y[k] = (int32_t)(lcg_next() % kClasses);
  ok = EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, xdims, 4, x, sizeof x, &tx)) &&
       EXPECT_OK(dp_tensor_create(DP_DTYPE_INT32, ydims, 1, y, sizeof y, &ty)) &&
       EXPECT_OK(dp_workspace_feed(ws, "data", tx)) && EXPECT_OK(dp_workspace_feed(ws, "label", ty));
  dp_tensor_free(tx);
  dp_tensor_free(ty);
  return ok;
}

/* The params after training, each a malloc'd copy (`scope` prefixed). */
typedef struct params {
  float* data[kNumParams];
  size_t nbytes[kNumParams];
} params;

static void params_free(params* p) {
  int k;
  for (k = 0; k < kNumParams; ++k) {
    free(p->data[k]);
    p->data[k] = NULL;
    p->nbytes[k] = 0;
  }
}

static int fetch_params(dp_workspace* ws, const char* scope, params* out) {
  int k;
  for (k = 0; k < kNumParams; ++k) {
    char name[64];
    dp_tensor* t = NULL;
    snprintf(name, sizeof name, "%s%s", scope, kParams[k]);
    if (!EXPECT_OK(dp_workspace_fetch(ws, name, &t))) return 0;
    out->nbytes[k] = dp_tensor_nbytes(t);
    out->data[k] = (float*)malloc(out->nbytes[k]);
    if (out->data[k] != NULL) memcpy(out->data[k], dp_tensor_data(t), out->nbytes[k]);
    dp_tensor_free(t);
    if (!CHECK(out->data[k] != NULL)) return 0;
  }
  return 1;
}

static int same_params(const params* a, const params* b) {
  int k;
  for (k = 0; k < kNumParams; ++k)
    if (a->data[k] == NULL || b->data[k] == NULL || a->nbytes[k] != b->nbytes[k] ||
        memcmp(a->data[k], b->data[k], a->nbytes[k]) != 0)
      return 0;
  return 1;
}

/* Runs `init`, then kSteps of `train` on the synthetic batches, in a
 * workspace made with `wo` and nets made with `no`; fetches the params
 * under `scope` after init (`before`) and after training (`after`). */
static int train(const dp_netdef* init_def, const dp_netdef* train_def, const dp_workspace_options* wo,
                 const dp_net_options* no, const char* scope, params* before, params* after) {
  dp_workspace* ws = NULL;
  dp_net *init = NULL, *step = NULL;
  int ok = EXPECT_OK(dp_workspace_create_with_options(wo, &ws)) && EXPECT_OK(dp_net_create(ws, init_def, no, &init)) &&
           EXPECT_OK(dp_net_create(ws, train_def, no, &step)) && EXPECT_OK(dp_net_run(init)) &&
           fetch_params(ws, scope, before);
  int s;
  g_lcg = 20240611u;
  for (s = 0; ok && s < kSteps; ++s) ok = feed_batch(ws) && EXPECT_OK(dp_net_run(step));
  ok = ok && fetch_params(ws, scope, after);
  dp_net_free(step);
  dp_net_free(init);
  dp_workspace_free(ws);
  return ok;
}

static void test_zeroed_structs_train_like_macros(const dp_model* model) {
  dp_workspace_options wz, wm = DP_WORKSPACE_OPTIONS_INIT;
  dp_net_options nz, nm = DP_NET_OPTIONS_INIT;
  dp_training_options tz, tm = DP_TRAINING_OPTIONS_INIT;
  dp_parallel_options pz, pm = DP_PARALLEL_OPTIONS_INIT, pold = DP_PARALLEL_OPTIONS_INIT;
  const int32_t ids[2] = {0, 1};
  params b0 = {{0}, {0}}, a0 = {{0}, {0}}, b1 = {{0}, {0}}, a1 = {{0}, {0}}, b2 = {{0}, {0}}, a2 = {{0}, {0}};
  params rb = {{0}, {0}}, r1 = {{0}, {0}};
  dp_netdef *zn[3] = {0}, *mn[3] = {0}, *on[3] = {0};

  memset(&wz, 0, sizeof wz);
  wz.struct_size = (uint32_t)sizeof wz;
  memset(&nz, 0, sizeof nz);
  nz.struct_size = (uint32_t)sizeof nz;
  memset(&tz, 0, sizeof tz);
  tz.struct_size = (uint32_t)sizeof tz;
  memset(&pz, 0, sizeof pz);
  pz.struct_size = (uint32_t)sizeof pz;

  /* One device. */
  if (build_training(model, &tz, zn) && build_training(model, &tm, mn) &&
      train(zn[0], zn[1], &wz, &nz, "", &b0, &a0) && train(mn[0], mn[1], &wm, &nm, "", &b1, &a1)) {
    CHECK(same_params(&b0, &b1));
    CHECK(same_params(&a0, &a1));
    CHECK(!same_params(&b0, &a0)); /* training changed them */
  }
  free_nets(zn);
  free_nets(mn);
  params_free(&b0);
  params_free(&a0);
  params_free(&b1);
  params_free(&a1);

  /* Two CPU replicas; also an older caller's struct ending before lr, whose
   * later fields (refused values here) must not be read. */
  pz.device_ids = pm.device_ids = pold.device_ids = ids;
  pz.num_devices = pm.num_devices = pold.num_devices = 2;
  pold.struct_size = (uint32_t)offsetof(dp_parallel_options, lr);
  pold.lr = -1.0;
  pold.accumulate_steps = -3;
  pold.bmuf = 1;
  pold.bmuf_block_lr = -1.0;
  pold.computed_params = 99;
  pold.cuda_collectives = 7;
  pold.shared_model = 1;
  pold.sync_bn = 1;
  if (parallel_nets(model, &pz, zn) && parallel_nets(model, &pm, mn) && parallel_nets(model, &pold, on) &&
      train(zn[0], zn[1], &wz, &nz, "cpu_0/", &b0, &a0) && train(mn[0], mn[1], &wm, &nm, "cpu_0/", &b1, &a1) &&
      train(on[0], on[1], &wz, &nz, "cpu_0/", &b2, &a2) && train(zn[0], zn[1], &wz, &nz, "cpu_1/", &rb, &r1)) {
    CHECK(same_params(&b0, &b1));
    CHECK(same_params(&a0, &a1));
    CHECK(same_params(&a0, &a2));
    CHECK(same_params(&a0, &r1)); /* replica 1 holds what replica 0 holds */
    CHECK(!same_params(&b0, &a0));
  }
  free_nets(zn);
  free_nets(mn);
  free_nets(on);
  params_free(&b0);
  params_free(&a0);
  params_free(&b1);
  params_free(&a1);
  params_free(&b2);
  params_free(&a2);
  params_free(&rb);
  params_free(&r1);
}

int main(void) {
  dp_model* model = NULL;
  test_same_bytes();
  test_init_writes_struct_size_bytes();
  test_workspace_and_net_behave_alike();
  test_gradient_options_behave_alike();
  model = load_mlp();
  if (model != NULL) {
    test_training_options_behave_alike(model);
    test_parallel_options_behave_alike(model);
    test_longer_structs(model);
    test_zeroed_structs_train_like_macros(model);
  }
  dp_model_free(model);
  return check_report();
}
