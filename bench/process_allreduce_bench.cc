// dp-bench process-allreduce: allreduce between processes (float32 sums)
// per buffer size, 4 KiB .. 256 MiB: through shared memory
// (ShmCommunicator, what processes of one host use by default) and over
// Gloo's TCP transport (GlooCommunicator: dp's choice, auto, and Gloo's
// ring, halving-doubling and bcube algorithms), against the memcpy
// bandwidth of one core measured alongside. Run under dp-run, one process
// per core:
//   dp-run -n 2 -- taskset-wrapper dp-bench process-allreduce [--quick] [--repeats N] [--max-mib M]
//                                                             [--transports shm,gloo]
//                                                             [--dtype float32|bfloat16|float16]
// (bench/run_multiprocess_bench.sh does that). Rank 0 prints one line per
// size and transport/algorithm:
//   process_allreduce transport=gloo algorithm=ring ranks=2 bytes=... calls=... median_us=... min_us=...
//   algbw_gbs=... busbw_gbs=... memcpy_gbs=... busbw_of_memcpy=... dtype=... wire_bytes_per_call=...
// bytes is the float32 gradient's size; with --dtype bfloat16 or float16 (a
// compressed gradient allreduce) the same elements cross in 16 bits, and
// wire_bytes_per_call, counted by the communicator (allreduce_bytes), is half.
// algbw = bytes / time; busbw = algbw * 2 (n - 1) / n (what each rank's link
// carries in a ring: NCCL's convention), comparable across rank counts.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "comm/gloo_communicator.h"
#include "comm/shm_communicator.h"
#include "comm/store.h"
#include "comm/store_address.h"
#include "core/error.h"

namespace dpbench {
namespace {

using Clock = std::chrono::steady_clock;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

double MemcpyGbs(size_t bytes, int calls) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) {
      std::memcpy(b.data(), a.data(), bytes);
      a[static_cast<size_t>(i) % bytes] = b[bytes - 1];  // keep the copies
    }
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / calls);
  }
  return static_cast<double>(bytes) / Summarise(t).median * 1e-9;
}

}  // namespace

int ProcessAllreduceMain(int argc, char** argv) {
  bool quick = false;
  int repeats = 7;
  long max_mib = 256;
  std::string transports = "shm,gloo";
  std::string dtype_name = "float32";
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--max-mib" && i + 1 < argc) {
      max_mib = std::max(1L, std::atol(argv[++i]));
    } else if (a == "--transports" && i + 1 < argc) {
      transports = argv[++i];
    } else if (a == "--dtype" && i + 1 < argc) {
      dtype_name = argv[++i];
    } else {
      std::fprintf(stderr, "dp-bench process-allreduce: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const dp::DType dtype = dtype_name == "bfloat16" ? dp::DType::kBFloat16
                          : dtype_name == "float16"  ? dp::DType::kFloat16
                                                     : dp::DType::kFloat32;
  if (dtype == dp::DType::kFloat32 && dtype_name != "float32") {
    std::fprintf(stderr, "dp-bench process-allreduce: --dtype must be float32, bfloat16 or float16\n");
    return 2;
  }
  if (quick) {
    repeats = 3;
    max_mib = 1;
  }
  const int rank = EnvInt("DP_RANK", -1), size = EnvInt("DP_WORLD_SIZE", 0);
  const char* store_url = std::getenv("DP_STORE");
  const char* run_id = std::getenv("DP_RUN_ID");
  if (rank < 0 || size < 2 || store_url == nullptr) {
    std::fprintf(stderr, "dp-bench process-allreduce: run it under dp-run with 2 or more processes\n");
    return 2;
  }
  try {
    // (transport, algorithm) pairs in the order asked for.
    std::vector<std::pair<std::string, std::string>> runs;
    if (transports.find("shm") != std::string::npos) runs.emplace_back("shm", "reduce_scatter");
    if (transports.find("gloo") != std::string::npos)
      for (const char* a : {"auto", "ring", "halving_doubling", "bcube", "direct"}) runs.emplace_back("gloo", a);
    for (const auto& [transport, algorithm] : runs) {
      auto store = dp::Store::Open(dp::ParseStoreAddress(store_url), std::string(run_id ? run_id : "dp") + "/bench/" +
                                                                         transport + "/" + algorithm);
      std::unique_ptr<dp::Communicator> comm;
      if (transport == "shm") {
        dp::ShmOptions o;
        o.rank = rank;
        o.size = size;
        o.timeout = std::chrono::milliseconds(120000);
        comm = dp::ShmCommunicator::Connect(store, o);
      } else {
        dp::GlooOptions o;
        o.rank = rank;
        o.size = size;
        o.timeout = std::chrono::milliseconds(120000);
        o.algorithm = algorithm;
        comm = dp::ConnectGloo(store, o);
      }
      for (size_t bytes = size_t{4} << 10; bytes <= (static_cast<size_t>(max_mib) << 20); bytes *= 4) {
        const int64_t count = static_cast<int64_t>(bytes / sizeof(float));  // the gradient's elements
        const size_t item = dp::DTypeSize(dtype);
        std::vector<char> buf(static_cast<size_t>(count) * item);
        auto fill_ones = [&] {  // finite values, as 1.0 in the dtype
          for (int64_t i = 0; i < count; ++i) {
            char* at = buf.data() + static_cast<size_t>(i) * item;
            const float one = 1.0f;
            const uint16_t bf = 0x3f80, hf = 0x3c00;
            if (dtype == dp::DType::kFloat32) std::memcpy(at, &one, 4);
            else std::memcpy(at, dtype == dp::DType::kBFloat16 ? &bf : &hf, 2);
          }
        };
        fill_ones();
        // Calls per sample: about 64 MiB moved, at least 1, at most 2000
        // (the same on every rank: it depends on the size only).
        const int calls = static_cast<int>(std::clamp<size_t>((size_t{64} << 20) / bytes, 1, 2000));
        // Prepared once, as the Allreduce op does for a bucket's staging buffer.
        auto allreduce = comm->PrepareAllreduceSum(buf.data(), count, dtype);
        for (int w = 0; w < 2; ++w) allreduce->Run();
        std::vector<double> us;
        const uint64_t wire_before = comm->allreduce_bytes();
        for (int r = 0; r < repeats; ++r) {
          comm->Barrier();
          const auto t0 = Clock::now();
          for (int c = 0; c < calls; ++c) allreduce->Run();
          us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
          fill_ones();  // keep the values finite
        }
        const double wire_per_call =
            static_cast<double>(comm->allreduce_bytes() - wire_before) / (static_cast<double>(repeats) * calls);
        const Stats s = Summarise(us);
        const double algbw = static_cast<double>(bytes) / (s.median * 1e3);
        const double busbw = algbw * 2.0 * (size - 1) / size;
        const double mem = MemcpyGbs(bytes, std::max(1, calls / 4));
        if (rank == 0)
          std::printf(
              "process_allreduce transport=%s algorithm=%s ranks=%d bytes=%zu calls=%d median_us=%.1f min_us=%.1f "
              "algbw_gbs=%.3f busbw_gbs=%.3f memcpy_gbs=%.2f busbw_of_memcpy=%.3f dtype=%s wire_bytes_per_call=%.0f\n",
              transport.c_str(), algorithm.c_str(), size, bytes, calls, s.median, s.min, algbw, busbw, mem,
              busbw / mem, dtype_name.c_str(), wire_per_call);
        std::fflush(stdout);
      }
    }
  } catch (const dp::Error& e) {
    std::fprintf(stderr, "dp-bench process-allreduce: rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}

}  // namespace dpbench
