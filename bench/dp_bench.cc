// dp-bench: benchmarks of the engine, one subcommand per benchmark.
//   dp-bench executor [--json] [--quick] [--repeats N] [--threads N[,M...]] [--only SHAPES]
//   dp-bench allreduce [--json] [--quick] [--repeats N] [--devices N] [--threads T]
//   dp-run -n N -- dp-bench process-allreduce [--quick] [--repeats N] [--max-mib M] [--transports shm,gloo]
//   dp-bench half-convert [--repeats N]
// See bench/README.md.
#include <cstdio>
#include <cstring>
#include <string>

namespace dpbench {
int ExecutorMain(int argc, char** argv);   // executor_bench.cc
int AllreduceMain(int argc, char** argv);  // allreduce_bench.cc
int ProcessAllreduceMain(int argc, char** argv);  // process_allreduce_bench.cc
int HalfConvertMain(int argc, char** argv);  // half_convert_bench.cc
}

namespace {

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: dp-bench <subcommand> [options]\n"
               "\n"
               "subcommands:\n"
               "  executor   scheduling overhead of the simple and async executors on NoOp nets\n"
               "             (chain, unfusable chain, fan-out/fan-in, binary tree, random DAG,\n"
               "             32-op re-run)\n"
               "             options: --json      one JSON object per line per measurement\n"
               "                      --quick     small sizes and few repeats (smoke run)\n"
               "                      --repeats N samples per measurement (default 7)\n"
               "                      --threads N async CPU worker counts to measure: 1 and N\n"
               "                                  (default 2), or a list such as 1,2,4\n"
               "                      --only S    comma-separated shapes: chain,ladder,fanout,\n"
               "                                  tree,random,rerun\n"
               "  allreduce  in-process CPU allreduce (CpuCollectives) bandwidth per buffer size,\n"
               "             1 KiB .. 256 MiB, against copy bounds (memcpy, non-temporal,\n"
               "             in-place) measured alongside\n"
               "             options: --json      one JSON object per line per buffer size\n"
               "                      --quick     sizes up to 1 MiB, 3 repeats (smoke run)\n"
               "                      --repeats N samples per size (default 9)\n"
               "                      --devices N replicas, i.e. buffers per allreduce (default 2)\n"
               "                      --threads T communicator team size (default min(N, CPUs))\n"
               "  process-allreduce  allreduce between processes, 4 KiB .. 256 MiB, through shared\n"
               "             memory and over Gloo (auto, ring, halving-doubling, bcube), against one\n"
               "             core's memcpy bandwidth; run under dp-run -n N\n"
               "             options: --quick     sizes up to 1 MiB, 3 repeats\n"
               "                      --repeats N samples per size (default 7)\n"
               "                      --max-mib M largest size (default 256)\n"
               "                      --transports shm,gloo  which to measure (default both)\n"
               "  half-convert  float32 <-> binary16 in bulk (compressed fp16 gradients): the scalar\n"
               "             loop, the portable path (SSE2) and F16C's, interleaved, in GB/s\n"
               "             options: --repeats N samples per size and path (default 15)\n"
               "\n"
               "Benchmarks are never tests; run them on a quiet machine (see bench/README.md).\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage(stderr);
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    Usage(stdout);
    return 0;
  }
  if (cmd == "executor") return dpbench::ExecutorMain(argc - 2, argv + 2);
  if (cmd == "allreduce") return dpbench::AllreduceMain(argc - 2, argv + 2);
  if (cmd == "process-allreduce" || cmd == "gloo-allreduce")  // the latter: its name before 0.4
    return dpbench::ProcessAllreduceMain(argc - 2, argv + 2);
  if (cmd == "half-convert") return dpbench::HalfConvertMain(argc - 2, argv + 2);
  std::fprintf(stderr, "dp-bench: unknown subcommand '%s'\n\n", cmd.c_str());
  Usage(stderr);
  return 2;
}
