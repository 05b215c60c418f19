// dp-bench allreduce: bandwidth of the in-process CPU allreduce
// (dp::CpuCollectives::AllreduceSum: one float32 tensor replicated on N CPU
// devices, summed in place into all N buffers) against copy bounds measured
// in the same run.
//
// The bound: an in-place N-way allreduce of S-byte buffers must read N*S bytes
// and write N*S bytes. A bound is the time a copy takes to read and write as
// much with as many threads, over N other buffers of S bytes (the same
// footprint), each thread on its slice of every buffer (the communicator's
// slicing). Three copies, since none is the fastest everywhere:
//   memcpy   buffer i into buffer (i+1) mod N with glibc's memcpy (the
//            issue's bound). Below its non-temporal threshold, derived from
//            the L3 size the CPU reports (288 MiB on a VM that reports its
//            host's 384 MiB), it reads each destination line before writing
//            it: a third more traffic than the allreduce needs.
//   stream   the same copy with non-temporal stores (no destination reads).
//   inplace  every buffer, 32 KiB chunk by chunk, through a scratch back
//            onto itself: the allreduce's own access pattern (read a chunk,
//            write the same lines while cached) without its arithmetic.
// The allreduce and the three copies are timed in turn per repeat after a
// warm-up; results are medians over repeats.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/dtype.h"
#include "core/error.h"
#include "comm/cpu_collectives.h"
#include "comm/thread_team.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dpbench {
namespace {

using Clock = std::chrono::steady_clock;
using dp::CpuCollectives;

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = kKiB * kKiB;
// Sizes from here up count for the target: their N >= 2 buffers fill a 32 MiB L3 or more.
constexpr size_t kLargeBytes = 16 * kMiB;
constexpr double kTargetFraction = 0.8;

struct Options {
  bool json = false;
  bool quick = false;
  int repeats = 9;
  int devices = 2;
  int threads = 0;  // communicator team size; 0: CpuCollectives' default for `devices`
  int cpus = 0;
};

// N page-aligned buffers of `bytes` each.
class Buffers {
 public:
  Buffers(int n, size_t bytes) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    for (int i = 0; i < n; ++i) {
      void* p = std::aligned_alloc(4096, rounded);
      DP_ENFORCE(p != nullptr, "allreduce bench: out of memory allocating ", n, " x ", bytes, " bytes");
      owned_.emplace_back(p);
      ptrs_.push_back(p);
    }
  }
  const std::vector<void*>& ptrs() const { return ptrs_; }
  float* f(int i) const { return static_cast<float*>(ptrs_[static_cast<size_t>(i)]); }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<void, Free>> owned_;
  std::vector<void*> ptrs_;
};

// What is timed: the allreduce, then the copies.
enum Measured { kAllreduce, kMemcpy, kStream, kInPlace, kMeasured };
constexpr const char* kNames[kMeasured] = {"allreduce", "memcpy", "stream", "inplace"};

// The copy bounds: `threads` members of a team, each copying its 64-byte
// aligned slice of every buffer (see the file comment).
class CopyBound {
 public:
  explicit CopyBound(int team_size) : team_(team_size) {}

  void Run(Measured kind, const std::vector<void*>& bufs, size_t bytes, int threads) {
    auto copy = [&](size_t lo, size_t hi) {
      if (lo < hi) CopySlice(kind, bufs, lo, hi);
    };
    if (threads == 1) {
      copy(0, bytes);
      return;
    }
    team_.Run([&](int index, int) {
      if (index >= threads) return;
      size_t per = (bytes + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
      per = (per + 63) / 64 * 64;
      const size_t lo = std::min(bytes, per * static_cast<size_t>(index));
      copy(lo, std::min(bytes, lo + per));
    });
  }

 private:
  static constexpr size_t kScratchBytes = 32 * 1024;  // CpuCollectives' chunk

  static void CopySlice(Measured kind, const std::vector<void*>& bufs, size_t lo, size_t hi) {
    const size_t n = bufs.size();
    auto buf = [&](size_t i) { return static_cast<char*>(bufs[i % n]); };
    if (kind == kInPlace) {
      // Chunk by chunk, all N buffers' chunks in turn, as the allreduce walks them.
      alignas(64) char scratch[kScratchBytes];
      for (size_t pos = lo; pos < hi; pos += kScratchBytes) {
        const size_t len = std::min(kScratchBytes, hi - pos);
        for (size_t i = 0; i < n; ++i) {
          std::memcpy(scratch, buf(i) + pos, len);
          asm volatile("" : : "r"(scratch) : "memory");  // the round trip must not be folded away
          std::memcpy(buf(i) + pos, scratch, len);
        }
      }
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      if (kind == kMemcpy)
        std::memcpy(buf(i + 1) + lo, buf(i) + lo, hi - lo);
      else
        StreamCopy(buf(i + 1) + lo, buf(i) + lo, hi - lo);
    }
  }

  // dst = src with non-temporal stores where available: the written lines go
  // to memory without being read first or evicting the cache.
  static void StreamCopy(char* dst, const char* src, size_t n) {
    size_t i = 0;
#if defined(__SSE2__)
    if (reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
      for (; i + 64 <= n; i += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
        const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
      }
      _mm_sfence();  // ordered before whatever reads them next
    }
#endif
    std::memcpy(dst + i, src + i, n - i);
  }

  dp::ThreadTeam team_;
};

// Seconds per call over `calls` back-to-back calls of fn.
template <typename Fn>
double SecondsPerCall(Fn&& fn, int64_t calls) {
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < calls; ++i) fn();
  const std::chrono::duration<double> dt = Clock::now() - t0;
  return dt.count() / static_cast<double>(calls);
}

// Back-to-back calls that make one sample last about target_s, from batches
// of doubling size: a single call can be much slower than a call among many
// (a team woken from sleep, cold caches).
template <typename Fn>
int64_t CallsPerSample(Fn&& fn, double target_s) {
  constexpr int64_t kMaxCalls = int64_t{1} << 20;
  int64_t calls = 1;
  double per_call = SecondsPerCall(fn, calls);
  while (per_call * static_cast<double>(calls) < target_s / 8 && calls < kMaxCalls) {
    calls *= 2;
    per_call = SecondsPerCall(fn, calls);
  }
  return std::clamp<int64_t>(static_cast<int64_t>(target_s / std::max(per_call, 1e-9)), 1, kMaxCalls);
}

struct Result {
  size_t bytes = 0;  // per buffer
  int threads = 0;   // team members used by one call
  int64_t calls[kMeasured] = {};  // per sample
  Stats us[kMeasured];            // per call
  // Medians over repeats of bound time / allreduce time, paired per repeat;
  // "best": the fastest of the copies.
  double of_memcpy = 0, of_best = 0;
};

// buffer i, element k = (i + 1) * (1 + k % 7): small integers, so that the sum
// (1 + k % 7) * N (N + 1) / 2 is exact in float32.
void FillPattern(const Buffers& b, int n, int64_t count) {
  for (int i = 0; i < n; ++i)
    for (int64_t k = 0; k < count; ++k) b.f(i)[k] = static_cast<float>((i + 1) * (1 + k % 7));
}

void VerifySum(const Buffers& b, int n, int64_t count) {
  const float nsum = static_cast<float>(n * (n + 1) / 2);
  for (int i = 0; i < n; ++i)
    for (int64_t k = 0; k < count; ++k) {
      const float want = static_cast<float>(1 + k % 7) * nsum;
      DP_ENFORCE(b.f(i)[k] == want, "allreduce bench: wrong sum in buffer ", i, " at element ", k, " of ", count,
                 ": got ", b.f(i)[k], ", want ", want);
    }
}

Result MeasureSize(const Options& o, CpuCollectives& comm, CopyBound& bound, size_t bytes) {
  const int n = o.devices;
  const int64_t count = static_cast<int64_t>(bytes / sizeof(float));
  Buffers reduce(n, bytes), copy(n, bytes);

  // First touch of every page (and a known pattern), then one checked call,
  // so that nothing below can time page faults or a no-op.
  FillPattern(reduce, n, count);
  FillPattern(copy, n, count);
  const std::vector<CpuCollectives::Segment> segments{{reduce.ptrs(), count}};
  comm.AllreduceSum(segments, dp::DType::kFloat32);
  VerifySum(reduce, n, count);
  // Zeros from here on: sums of zeros stay zeros, neither overflowing to inf
  // nor going denormal over thousands of calls, and cost what any sum costs.
  for (int i = 0; i < n; ++i) std::memset(reduce.f(i), 0, bytes);

  const int threads = comm.ThreadsFor(static_cast<size_t>(n) * bytes);
  const std::function<void()> fns[kMeasured] = {
      [&] { comm.AllreduceSum(segments, dp::DType::kFloat32); },
      [&] { bound.Run(kMemcpy, copy.ptrs(), bytes, threads); },
      [&] { bound.Run(kStream, copy.ptrs(), bytes, threads); },
      [&] { bound.Run(kInPlace, copy.ptrs(), bytes, threads); },
  };

  // Warm-up (also wakes the teams), then size the samples.
  for (int i = 0; i < 2; ++i)
    for (const auto& fn : fns) fn();
  const double target_s = o.quick ? 2e-3 : 20e-3;
  Result r;
  r.bytes = bytes;
  r.threads = threads;
  for (int m = 0; m < kMeasured; ++m) r.calls[m] = CallsPerSample(fns[m], target_s);

  // Repeat -1 is an untimed warm-up; the order rotates every repeat.
  std::vector<double> us[kMeasured], of_memcpy, of_best;
  for (int rep = -1; rep < o.repeats; ++rep) {
    double t[kMeasured] = {};
    for (int k = 0; k < kMeasured; ++k) {
      const int m = (rep + 1 + k) % kMeasured;
      t[m] = SecondsPerCall(fns[m], r.calls[m]);
    }
    if (rep < 0) continue;
    for (int m = 0; m < kMeasured; ++m) us[m].push_back(t[m] * 1e6);
    of_memcpy.push_back(t[kMemcpy] / t[kAllreduce]);
    of_best.push_back(std::min({t[kMemcpy], t[kStream], t[kInPlace]}) / t[kAllreduce]);
  }
  for (int m = 0; m < kMeasured; ++m) r.us[m] = Summarise(us[m]);
  r.of_memcpy = Summarise(of_memcpy).median;
  r.of_best = Summarise(of_best).median;
  return r;
}

std::string SizeLabel(size_t bytes) {
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

// GB/s (1e9 bytes) for `bytes` in `us` microseconds.
double Gbs(double bytes, double us) { return us > 0 ? bytes / (us * 1e3) : 0; }

void PrintHeader(const Options& o) {
  if (o.json) return;
  std::printf("%10s %3s %12s %9s %10s %23s %9s %9s %8s\n", "", "", "", "", "", "copies: moved GB/s", "", "", "");
  std::printf("%10s %3s %12s %9s %10s %7s %7s %7s %9s %9s %8s\n", "size", "thr", "allreduce us", "alg GB/s",
              "moved GB/s", "memcpy", "stream", "inplace", "% memcpy", "% best", "calls");
}

void Print(const Options& o, const Result& r) {
  const double s = static_cast<double>(r.bytes);
  const double moved = 2.0 * o.devices * s;  // N buffers read + N written
  if (o.json) {
    std::printf("{\"bench\":\"allreduce\",\"size_bytes\":%zu,\"devices\":%d,\"threads\":%d,\"team\":%d,\"cpus\":%d,"
                "\"repeats\":%d,\"calls_per_sample\":%lld,\"algbw_gbs\":%.3f,",
                r.bytes, o.devices, r.threads, o.threads, o.cpus, o.repeats,
                static_cast<long long>(r.calls[kAllreduce]), Gbs(s, r.us[kAllreduce].median));
    for (int m = 0; m < kMeasured; ++m)
      std::printf("\"%s_us\":%.3f,\"%s_us_min\":%.3f,\"%s_moved_gbs\":%.3f,", kNames[m], r.us[m].median, kNames[m],
                  r.us[m].min, kNames[m], Gbs(moved, r.us[m].median));
    std::printf("\"fraction_of_memcpy\":%.4f,\"fraction_of_best_copy\":%.4f,\"stat\":\"median\"}\n", r.of_memcpy,
                r.of_best);
  } else {
    std::printf("%10s %3d %12.2f %9.2f %10.2f %7.1f %7.1f %7.1f %8.1f%% %8.1f%% %8lld\n", SizeLabel(r.bytes).c_str(),
                r.threads, r.us[kAllreduce].median, Gbs(s, r.us[kAllreduce].median),
                Gbs(moved, r.us[kAllreduce].median), Gbs(moved, r.us[kMemcpy].median), Gbs(moved, r.us[kStream].median),
                Gbs(moved, r.us[kInPlace].median), 100.0 * r.of_memcpy, 100.0 * r.of_best,
                static_cast<long long>(r.calls[kAllreduce]));
  }
  std::fflush(stdout);
}

int UsageError(const std::string& msg) {
  std::fprintf(stderr,
               "dp-bench allreduce: %s\n"
               "usage: dp-bench allreduce [--json] [--quick] [--repeats N] [--devices N] [--threads T]\n",
               msg.c_str());
  return 2;
}

}  // namespace

int AllreduceMain(int argc, char** argv) {
  Options o;
  bool repeats_set = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--json") {
      o.json = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--repeats") {
      if (v == nullptr || !ParseInt(v, 1, 100000, &o.repeats)) return UsageError("--repeats needs a count >= 1");
      repeats_set = true;
      ++i;
    } else if (a == "--devices") {
      // One device would make the allreduce a no-op.
      if (v == nullptr || !ParseInt(v, 2, 64, &o.devices)) return UsageError("--devices needs a count in 2..64");
      ++i;
    } else if (a == "--threads") {
      if (v == nullptr || !ParseInt(v, 1, 256, &o.threads)) return UsageError("--threads needs a count in 1..256");
      ++i;
    } else {
      return UsageError("unknown option '" + a + "'");
    }
  }
  if (o.quick && !repeats_set) o.repeats = 3;
  o.cpus = PinToAllowedCpus();
  o.threads = CpuCollectives::DefaultThreads(o.threads, o.devices);

  // Buffer sizes 1 KiB .. 256 MiB (quick: .. 1 MiB), powers of 4.
  std::vector<size_t> sizes;
  for (size_t s = kKiB; s <= (o.quick ? kMiB : 256 * kMiB); s *= 4) sizes.push_back(s);

  if (!o.json) {
    std::printf("dp-bench allreduce: %d devices (float32 buffers), communicator team of %d threads, %d allowed CPUs "
                "(process pinned to them), %d repeats%s\n",
                o.devices, o.threads, o.cpus, o.repeats, o.quick ? " (quick)" : "");
    std::printf(
        "In-place AllreduceSum of N buffers of `size` vs copies that read N*size and write N*size bytes over the\n"
        "same footprint with the same threads: glibc memcpy (buffer i -> i+1), `stream` (the same, non-temporal\n"
        "stores), `inplace` (each buffer through a 32 KiB scratch onto itself). Medians over repeats, all four in\n"
        "turn. alg = size/t; moved = 2*N*size/t (bytes read + written); %% memcpy = memcpy time / allreduce time,\n"
        "%% best = the fastest copy's time / allreduce time (medians of the per-repeat ratios).\n\n");
  }
  PrintHeader(o);
  std::vector<Result> results;
  try {
    CpuCollectives comm(o.threads, o.devices);
    CopyBound bound(comm.num_threads());
    for (size_t s : sizes) {
      results.push_back(MeasureSize(o, comm, bound, s));
      Print(o, results.back());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dp-bench allreduce: %s\n", e.what());
    return 1;
  }

  // Target: >= 80% of the memcpy bound for large buffers (the bound;
  // the fastest copy is reported next to it).
  FILE* out = o.json ? stderr : stdout;
  const Result* worst = nullptr;
  double worst_best = -1;
  for (const auto& r : results) {
    if (r.bytes < kLargeBytes) continue;
    if (worst == nullptr || r.of_memcpy < worst->of_memcpy) worst = &r;
    if (worst_best < 0 || r.of_best < worst_best) worst_best = r.of_best;
  }
  std::fprintf(out, "\ntarget:\n");
  if (worst != nullptr)
    std::fprintf(out,
                 "  allreduce >= %.0f%% of the memcpy bound for buffers >= %s: worst %.1f%% at %s: %s"
                 " (of the fastest copy: worst %.1f%%)\n",
                 100 * kTargetFraction, SizeLabel(kLargeBytes).c_str(), 100 * worst->of_memcpy,
                 SizeLabel(worst->bytes).c_str(), worst->of_memcpy >= kTargetFraction ? "met" : "MISSED",
                 100 * worst_best);
  else
    std::fprintf(out, "  no buffer >= %s measured (--quick): not checked\n", SizeLabel(kLargeBytes).c_str());
  return 0;
}

}  // namespace dpbench
