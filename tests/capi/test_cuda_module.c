/*
 * CUDA as a module loaded on demand (dp_build_info, "CUDA is a module of its
 * own"): a process that works on the CPU maps no CUDA library, whichever way
 * libdp was built; the first CUDA device count loads the module; without it
 * (or with a broken one) there are zero CUDA devices and cuda_state says
 * why. tests/check_cuda_module.sh runs this program with the environment of
 * each case.
 *
 *   test_cuda_module check EXPECTED_STATE   the whole flow; EXPECTED_STATE is
 *                                           a DP_CUDA_STATE_* number, or
 *                                           "loaded" for any state in which
 *                                           the module loaded
 *   test_cuda_module rss                    prints the resident set (kB)
 *                                           after dp_version, nothing else
 */
#include <stdlib.h>

#include "check.h"

/* 1 if /proc/self/maps names a file whose name contains `needle`. */
static int mapped(const char* needle) {
  char line[4096];
  int found = 0;
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  while (!found && fgets(line, sizeof line, f) != NULL) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* The CUDA libraries and dp's module; libcuda.so is the driver's. */
static const char* const kCudaFiles[] = {"libdp_cuda.so", "libcudart.so", "libcublas", "libnccl.so", "libcuda.so"};

static int any_cuda_mapped(void) {
  size_t i;
  for (i = 0; i < sizeof kCudaFiles / sizeof kCudaFiles[0]; ++i) {
    if (mapped(kCudaFiles[i])) {
      fprintf(stderr, "mapped: %s\n", kCudaFiles[i]);
      return 1;
    }
  }
  return 0;
}

static long rss_kb(void) {
  char line[256];
  long kb = -1;
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, NULL, 10);
  }
  fclose(f);
  return kb;
}

/* A small net on the CPU: Scale by 2. */
static void run_cpu_net(void) {
  const char* json =
      "{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
      "\"args\":[{\"name\":\"scale\",\"f\":2}]}]}";
  const float x[3] = {1.0f, -2.0f, 0.5f};
  const int64_t dims[1] = {3};
  dp_workspace* ws = NULL;
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_tensor* t = NULL;
  dp_tensor* y = NULL;
  int32_t cpus = 0;
  EXPECT_OK(dp_device_count(DP_DEVICE_CPU, &cpus));
  CHECK(cpus == 1);
  EXPECT_OK(dp_workspace_create(&ws));
  EXPECT_OK(dp_netdef_from_json(json, strlen(json), &def));
  EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, x, sizeof x, &t));
  EXPECT_OK(dp_workspace_feed(ws, "x", t));
  EXPECT_OK(dp_net_create(ws, def, NULL, &net));
  EXPECT_OK(dp_net_run(net));
  EXPECT_OK(dp_workspace_fetch(ws, "y", &y));
  if (y != NULL) CHECK(((const float*)dp_tensor_data(y))[1] == -4.0f);
  dp_tensor_free(y);
  dp_tensor_free(t);
  dp_net_free(net);
  dp_netdef_free(def);
  dp_workspace_free(ws);
}

static int check(const char* expected) {
  dp_build_info info;
  int32_t count = -1;
  int module_loaded;
  int expect_loaded = strcmp(expected, "loaded") == 0;
  int32_t expected_state = expect_loaded ? -1 : (int32_t)atoi(expected);

  /* Everything CPU first: no CUDA library may be mapped by it. */
  printf("dp %s\n", dp_version());
  run_cpu_net();
  CHECK(mapped("libdp.so") == 1); /* the check itself can see libraries */
  CHECK(!any_cuda_mapped());

  /* The first CUDA count loads the module (when there is one). */
  EXPECT_OK(dp_device_count(DP_DEVICE_CUDA, &count));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(dp_build_info_get(&info));
  printf("cuda=%d cuda_state=%d devices=%d driver=%d runtime=%d loaded_runtime=%d module=\"%s\"\ndetail: %s\n",
         (int)info.cuda, (int)info.cuda_state, (int)count, (int)info.cuda_driver_version,
         (int)info.cuda_runtime_version, (int)info.cuda_loaded_runtime_version, info.cuda_module,
         info.cuda_state_detail);
  CHECK(info.cuda_state_detail != NULL && info.cuda_state_detail[0] != '\0');
  CHECK(info.cuda_module != NULL);
  module_loaded = info.cuda_state == DP_CUDA_STATE_AVAILABLE || info.cuda_state == DP_CUDA_STATE_NO_DRIVER ||
                  info.cuda_state == DP_CUDA_STATE_NO_DEVICE;
  if (expect_loaded) {
    if (!CHECK(module_loaded)) fprintf(stderr, "expected the module to load, got cuda_state %d\n", info.cuda_state);
  } else if (!CHECK(info.cuda_state == expected_state)) {
    fprintf(stderr, "expected cuda_state %d, got %d\n", expected_state, info.cuda_state);
  }
  CHECK((count > 0) == (info.cuda_state == DP_CUDA_STATE_AVAILABLE));
  CHECK(mapped("libdp_cuda.so") == module_loaded);
  if (info.cuda == 0) {
    CHECK(info.cuda_state == DP_CUDA_STATE_NOT_BUILT);
    CHECK(streq(info.cuda_module, ""));
    CHECK(streq(info.cuda_state_detail, "built without CUDA"));
    CHECK(!any_cuda_mapped());
  } else {
    CHECK(strstr(info.cuda_module, "libdp_cuda.so") != NULL || getenv("DP_CUDA_MODULE") != NULL);
    CHECK(module_loaded == (info.cuda_loaded_runtime_version > 0));
    if (module_loaded) CHECK(mapped("libcudart.so") == 1);
    if (!module_loaded) CHECK(!any_cuda_mapped());
    if (info.cuda_state == DP_CUDA_STATE_MODULE_NOT_FOUND || info.cuda_state == DP_CUDA_STATE_RUNTIME_MISSING) {
      CHECK(strstr(info.cuda_state_detail, "built with CUDA") != NULL);
    }
  }
  /* A CUDA net needs a device: without one its creation says why. */
  if (count == 0) {
    const char* json =
        "{\"external_inputs\":[\"x\"],\"device\":{\"type\":\"CUDA\",\"id\":0},"
        "\"ops\":[{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}";
    dp_workspace* ws = NULL;
    dp_netdef* def = NULL;
    dp_net* net = SENTINEL;
    EXPECT_OK(dp_workspace_create(&ws));
    EXPECT_OK(dp_netdef_from_json(json, strlen(json), &def));
    EXPECT_CODE(dp_net_create(ws, def, NULL, &net), DP_ERR_UNAVAILABLE);
    CHECK(net == SENTINEL);
    dp_netdef_free(def);
    dp_workspace_free(ws);
  }
  return check_report();
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "rss") == 0) {
    if (dp_version() == NULL) return 1;
    printf("%ld\n", rss_kb());
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "check") == 0) return check(argv[2]);
  fprintf(stderr, "usage: %s check STATE | rss\n", argv[0]);
  return 2;
}
