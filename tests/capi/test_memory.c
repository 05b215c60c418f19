/*
 * Host memory, from strict C11 (with POSIX for processes and cgroups):
 *
 * test_memory --zeros: dp_tensor_create(data = NULL) of 1 GiB takes no
 *   memory until written (the process's resident set grows by far less than
 *   the tensor) and reads as zeros; a small one is zeros too, though its
 *   memory was dirty before.
 * test_memory --cgroup: dp's default bound is the memory the process may
 *   use. The test makes a memory cgroup (v1 or v2, whichever has the memory
 *   controller) under its own with a 256 MiB limit and runs itself in it
 *   (--in-cgroup): in a default workspace, ConstantFills of 8 GiB and 1 GiB
 *   fail with DP_ERR_OUT_OF_MEMORY naming the cgroup's limit instead of the
 *   kernel killing the process, and 16 MiB still fits. It exits 77 (skipped)
 *   when it may not make cgroups (not root, no memory controller).
 */
#define _POSIX_C_SOURCE 200809L

#include <dp/dp.h>

#include "check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static const int kSkip = 77;


/* Resident pages of this process (the second field of /proc/self/statm). */
static long resident_pages(void) {
  long size = 0, resident = -1;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  fclose(f);
  return resident;
}

static int zeros_case(void) {
  const long page = sysconf(_SC_PAGESIZE);
  const int64_t big_dims[1] = {(int64_t)1 << 28}; /* 1 GiB of float32 */
  const int64_t small_dims[2] = {3, 5};
  float dirty[15];
  dp_tensor* t = NULL;
  long before, after;
  size_t i;

  before = resident_pages();
  CHECK(before > 0);
  if (EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, big_dims, 1, NULL, 0, &t))) {
    const float* p = (const float*)dp_tensor_data(t);
    const size_t n = (size_t)1 << 28;
    int zeros = 1;
    CHECK(dp_tensor_nbytes(t) == (size_t)1 << 30);
    CHECK(((uintptr_t)p) % 64 == 0);
    after = resident_pages();
    /* Filled eagerly, the tensor would be resident: 1 GiB. */
    if (!CHECK((after - before) * page < (64L << 20)))
      fprintf(stderr, "resident memory grew by %ld MiB\n", (after - before) * page >> 20);
    /* One element per 64 KiB, and the last: zeros, still not resident. */
    for (i = 0; i < n; i += 16384) zeros = zeros && p[i] == 0.0f;
    CHECK(zeros && p[n - 1] == 0.0f);
    after = resident_pages();
    if (!CHECK((after - before) * page < (64L << 20)))
      fprintf(stderr, "resident memory grew by %ld MiB after reading\n", (after - before) * page >> 20);
    dp_tensor_free(t);
  }

  /* A small one reuses freed, dirty memory and must still read as zeros. */
  for (i = 0; i < 15; ++i) dirty[i] = -1.0f;
  for (i = 0; i < 4; ++i) {
    t = NULL;
    if (EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, small_dims, 2, dirty, sizeof dirty, &t))) dp_tensor_free(t);
    t = NULL;
    if (EXPECT_OK(dp_tensor_create(DP_DTYPE_FLOAT32, small_dims, 2, NULL, 0, &t))) {
      const float* p = (const float*)dp_tensor_data(t);
      size_t k;
      int zeros = 1;
      for (k = 0; k < 15; ++k) zeros = zeros && p[k] == 0.0f;
      CHECK(zeros);
      dp_tensor_free(t);
    }
  }
  return check_report();
}

/* ---- the default bound inside a memory cgroup -------------------------- */

/* A memory cgroup hierarchy this process is in: the directory of its own
 * cgroup there, and whether it is cgroup v2. */
typedef struct {
  char dir[2100];
  int v2;
} cgroup_place;

/* The cgroup path of this process in the v1 memory hierarchy, or in v2
 * ("0::<path>"), from /proc/self/cgroup. */
static int own_cgroup_path(int v2, char* out, size_t size) {
  char line[2048];
  int found = 0;
  FILE* f = fopen("/proc/self/cgroup", "r");
  if (f == NULL) return 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char* c1 = strchr(line, ':');
    char* c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    char* nl = strchr(line, '\n');
    if (c2 == NULL) continue;
    if (nl != NULL) *nl = '\0';
    *c2 = '\0';
    if (v2 ? (strncmp(line, "0:", 2) == 0 && c1 + 1 == c2) : strstr(c1 + 1, "memory") != NULL) {
      snprintf(out, size, "%s", c2 + 1);
      found = 1;
    }
  }
  fclose(f);
  return found;
}

/* Where the hierarchy is mounted and what part of it the mount shows, from
 * /proc/self/mountinfo ("id parent dev root point opts ... - type src super"). */
static int hierarchy_mount(int v2, char* root, char* point, size_t size) {
  char line[4096];
  int found = 0;
  FILE* f = fopen("/proc/self/mountinfo", "r");
  if (f == NULL) return 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char r[1024], p[1024];
    const char* dash = strstr(line, " - ");
    char type[64], src[256], super[1024];
    super[0] = '\0';
    if (dash == NULL || sscanf(line, "%*s %*s %*s %1023s %1023s", r, p) != 2) continue;
    if (sscanf(dash + 3, "%63s %255s %1023s", type, src, super) < 2) continue;
    if (v2 ? streq(type, "cgroup2") : (streq(type, "cgroup") && strstr(super, "memory") != NULL)) {
      snprintf(root, size, "%s", r);
      snprintf(point, size, "%s", p);
      found = 1;
    }
  }
  fclose(f);
  return found;
}

static int file_exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static int write_text(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  int ok;
  if (f == NULL) return 0;
  ok = fputs(text, f) >= 0;
  ok = (fclose(f) == 0) && ok;
  return ok;
}

static int find_place(cgroup_place* out, char* why, size_t why_size) {
  int v2;
  for (v2 = 0; v2 < 2; ++v2) {
    char root[1024], point[1024], path[1024], probe[2200];
    const char* rel;
    if (!hierarchy_mount(v2, root, point, sizeof root) || !own_cgroup_path(v2, path, sizeof path)) continue;
    rel = path;
    if (!streq(root, "/")) rel = strncmp(path, root, strlen(root)) == 0 ? path + strlen(root) : "";
    snprintf(out->dir, sizeof out->dir, "%s%s", point, rel);
    out->v2 = v2;
    if (v2) {
      /* v2 needs the memory controller enabled for children. A cgroup that
       * holds processes cannot enable it (no internal processes); then the
       * test's cgroup goes beside this one, under the parent, if the parent
       * gives its children the controller (this one has memory.max). */
      snprintf(probe, sizeof probe, "%s/cgroup.subtree_control", out->dir);
      if (!write_text(probe, "+memory")) {
        char* slash = strrchr(out->dir, '/');
        snprintf(why, why_size, "cannot enable the v2 memory controller in %s: %s", out->dir, strerror(errno));
        snprintf(probe, sizeof probe, "%s/memory.max", out->dir);
        if (!file_exists(probe) || slash == NULL || (size_t)(slash - out->dir) < strlen(point)) continue;
        *slash = '\0';
      }
    }
    snprintf(probe, sizeof probe, "%s/%s", out->dir, v2 ? "cgroup.procs" : "memory.limit_in_bytes");
    if (file_exists(probe)) return 1;
    snprintf(why, why_size, "no %s", probe);
  }
  return 0;
}

static int cgroup_case(void) {
  cgroup_place place;
  char why[2400] = "no memory cgroup hierarchy mounted", dir[2200], file[2300], pid[32];
  pid_t child;
  int status = 0;
  if (geteuid() != 0) {
    printf("skipped: making a memory cgroup needs root\n");
    return kSkip;
  }
  if (!find_place(&place, why, sizeof why)) {
    printf("skipped: %s\n", why);
    return kSkip;
  }
  snprintf(dir, sizeof dir, "%s/dp_test_memory_XXXXXX", place.dir);
  if (mkdtemp(dir) == NULL) {
    printf("skipped: cannot make a cgroup under %s: %s\n", place.dir, strerror(errno));
    return kSkip;
  }
  snprintf(file, sizeof file, "%s/%s", dir, place.v2 ? "memory.max" : "memory.limit_in_bytes");
  if (CHECK(write_text(file, "268435456"))) {
    snprintf(file, sizeof file, "%s/cgroup.procs", dir);
    child = fork();
    if (child == 0) {
      char* argv[3];
      snprintf(pid, sizeof pid, "%ld", (long)getpid());
      if (!write_text(file, pid)) _exit(126);
      argv[0] = (char*)"test_memory";
      argv[1] = (char*)"--in-cgroup";
      argv[2] = NULL;
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    if (CHECK(child > 0) && CHECK(waitpid(child, &status, 0) == child)) {
      if (WIFSIGNALED(status)) fprintf(stderr, "the child was killed by signal %d\n", WTERMSIG(status));
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }
  if (!CHECK(rmdir(dir) == 0)) fprintf(stderr, "cannot remove cgroup %s: %s\n", dir, strerror(errno));
  return check_report();
}

/* Creates and runs a net of one ConstantFill of `elements` floats in `ws`. */
static dp_status* run_fill(dp_workspace* ws, const char* elements) {
  char json[512];
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_status* st;
  snprintf(json, sizeof json,
           "{\"name\": \"fill\", \"ops\": [{\"type\": \"ConstantFill\", \"name\": \"big\", \"outputs\": [\"x\"],"
           " \"args\": [{\"name\": \"shape\", \"ints\": [%s]}, {\"name\": \"value\", \"f\": 1.5}]}]}",
           elements);
  st = dp_netdef_from_json(json, strlen(json), &def);
  if (st == NULL) st = dp_net_create(ws, def, NULL, &net);
  if (st == NULL) st = dp_net_run(net);
  dp_net_free(net);
  dp_netdef_free(def);
  return st;
}

static int in_cgroup(void) {
  dp_workspace* ws = NULL;
  char path[1024];
  const int64_t gib[1] = {(int64_t)1 << 28};
  dp_tensor* t = (dp_tensor*)SENTINEL;
  /* Running where the parent put it: the last component names the test's cgroup. */
  CHECK(own_cgroup_path(0, path, sizeof path) || own_cgroup_path(1, path, sizeof path));
  if (!CHECK(strstr(path, "dp_test_memory_") != NULL)) return check_report();
  if (!EXPECT_OK(dp_workspace_create(&ws))) return check_report();
  /* The net: 8 GiB declared in a default workspace. */
  EXPECT_ERR3(run_fill(ws, "2147483648"), DP_ERR_OUT_OF_MEMORY, "ConstantFill 'big'", "268435456",
              "dp_test_memory_");
  EXPECT_ERR2(run_fill(ws, "268435456"), DP_ERR_OUT_OF_MEMORY, "ConstantFill 'big'", "cgroup");
  /* What fits still runs, and its memory is really there. */
  if (EXPECT_OK(run_fill(ws, "4194304"))) {
    dp_tensor* x = NULL;
    if (EXPECT_OK(dp_workspace_fetch(ws, "x", &x))) {
      CHECK(dp_tensor_numel(x) == 4194304 && ((const float*)dp_tensor_data(x))[4194303] == 1.5f);
      dp_tensor_free(x);
    }
  }
  /* Tensors made through the API are bounded the same way. */
  EXPECT_ERR(dp_tensor_create(DP_DTYPE_FLOAT32, gib, 1, NULL, 0, &t), DP_ERR_OUT_OF_MEMORY, "268435456");
  CHECK(t == (dp_tensor*)SENTINEL);
  dp_workspace_free(ws);
  return check_report();
}

int main(int argc, char** argv) {
  if (argc == 2 && streq(argv[1], "--zeros")) return zeros_case();
  if (argc == 2 && streq(argv[1], "--cgroup")) return cgroup_case();
  if (argc == 2 && streq(argv[1], "--in-cgroup")) return in_cgroup();
  fprintf(stderr, "usage: %s --zeros | --cgroup\n", argv[0]);
  return 2;
}
