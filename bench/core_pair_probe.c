/* core_pair_probe: how well two CPUs share data, the property that decides
 * how a step whose threads hand data to each other scales (replicas, and
 * one device's split GEMMs), as opposed to independent work.
 *
 *   core_pair_probe [CPU_A CPU_B]        (default 0 1)
 *
 * Two threads, pinned to CPU_A and CPU_B:
 *   - ping-pong: the median round trip of a cache line passed back and forth;
 *   - remote read: CPU_B sums 1.6 MB (a layer's weights or gradient) that
 *     CPU_A has just written, against the same read of data CPU_B wrote
 *     itself (medians of 50 rounds each).
 * One line:
 *   core_pair cpus=0,1 pingpong_ns=131 remote_read_us=14.4 local_read_us=12.9 remote_over_local=1.12 shared_cache=yes
 * shared_cache=yes when the remote read costs less than 1.5x the local one:
 * the two CPUs share a last-level cache. On the 2-vCPU cloud VMs dp is
 * benchmarked on, the host moves the vCPUs between placements that do
 * (pingpong ~130 ns, remote/local ~1.1) and placements that do not (~400 ns,
 * ~2.5), minutes apart; the benches print this line with each round so that
 * their figures can be read against it (bench/README.md). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kFloats = 400 * 1024, kRounds = 50, kPings = 20000 };

static float* buf;
static atomic_int turn;      /* 0: writer's turn (on CPU_A), 1: reader's */
static atomic_long ball;     /* the ping-pong line */
static int cpu_a, cpu_b;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static int cmp_double(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return a < b ? -1 : a > b;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  return v[n / 2];
}

static void write_all(float value) {
  for (int i = 0; i < kFloats; ++i) buf[i] = value + (float)(i & 7);
}

/* 32 sums at once (vectors, at -O3): a read bound by where the data is,
 * not by a chain of dependent adds. */
static float read_all(void) {
  float s[32] = {0};
  for (int i = 0; i < kFloats; i += 32)
    for (int j = 0; j < 32; ++j) s[j] += buf[i + j];
  float t = 0;
  for (int j = 0; j < 32; ++j) t += s[j];
  return t;
}

/* CPU_A: returns the ball, then writes the buffer whenever it is its turn. */
static void* partner(void* arg) {
  (void)arg;
  if (pin(cpu_a) != 0) return (void*)1;
  for (long i = 0; i < kPings; ++i) {
    while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1) {
    }
    atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
  }
  for (int r = 0; r < kRounds; ++r) {
    while (atomic_load_explicit(&turn, memory_order_acquire) != 0) {
    }
    write_all((float)r);
    atomic_store_explicit(&turn, 1, memory_order_release);
  }
  return NULL;
}

int main(int argc, char** argv) {
  cpu_a = argc > 2 ? atoi(argv[1]) : 0;
  cpu_b = argc > 2 ? atoi(argv[2]) : 1;
  buf = aligned_alloc(64, kFloats * sizeof(float));
  double* pings = malloc(kPings * sizeof(double));
  if (!buf || !pings) {
    fprintf(stderr, "core_pair_probe: out of memory\n");
    return 1;
  }
  memset(buf, 0, kFloats * sizeof(float));
  pthread_t t;
  if (pthread_create(&t, NULL, partner, NULL) != 0 || pin(cpu_b) != 0) {
    fprintf(stderr, "core_pair_probe: cannot run threads on CPUs %d and %d\n", cpu_a, cpu_b);
    return 1;
  }
  for (long i = 0; i < kPings; ++i) {
    const double t0 = now_s();
    atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2) {
    }
    pings[i] = now_s() - t0;
  }
  double remote[kRounds], local[kRounds];
  volatile float sink = 0;
  for (int r = 0; r < kRounds; ++r) {
    while (atomic_load_explicit(&turn, memory_order_acquire) != 1) {
    }
    double t0 = now_s();
    sink += read_all();
    remote[r] = now_s() - t0;
    write_all((float)r);  /* the same read of data this CPU wrote */
    t0 = now_s();
    sink += read_all();
    local[r] = now_s() - t0;
    atomic_store_explicit(&turn, 0, memory_order_release);
  }
  void* rc = NULL;
  pthread_join(t, &rc);
  if (rc != NULL) {
    fprintf(stderr, "core_pair_probe: cannot pin a thread to CPU %d\n", cpu_a);
    return 1;
  }
  const double ping = median(pings, kPings), rr = median(remote, kRounds), lr = median(local, kRounds);
  printf("core_pair cpus=%d,%d pingpong_ns=%.0f remote_read_us=%.1f local_read_us=%.1f remote_over_local=%.2f "
         "shared_cache=%s\n",
         cpu_a, cpu_b, ping * 1e9, rr * 1e6, lr * 1e6, rr / lr, rr < 1.5 * lr ? "yes" : "no");
  free(pings);
  free(buf);
  return 0;
}
