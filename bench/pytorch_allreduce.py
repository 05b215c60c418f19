#!/usr/bin/env python3
"""torch.distributed.all_reduce (gloo) between processes per buffer size, the
counterpart of `dp-run -n N -- dp-bench gloo-allreduce`: float32 sums of
4 KiB .. MAX MiB, each process pinned to its own CPU with 1 torch thread,
rendezvous through a FileStore in a temporary directory (loopback traffic).
Calls per sample and the statistics are dp-bench's: about 64 MiB moved per
sample (1..2000 calls), median over REPEATS samples after 2 warm-up calls.
Rank 0 prints one line per size:

  torch_allreduce ranks=N bytes=... calls=... median_us=... min_us=... algbw_gbs=... busbw_gbs=...

  pytorch_allreduce.py [--procs N] [--repeats R] [--max-mib M]
"""
import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, a, init_file, cpus):
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=a.procs)
    nbytes = 4 << 10
    while nbytes <= a.max_mib << 20:
        buf = torch.ones(nbytes // 4)
        calls = max(1, min(2000, (64 << 20) // nbytes))
        for _ in range(2):
            dist.all_reduce(buf)
        us = []
        for _ in range(a.repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                dist.all_reduce(buf)
            us.append((time.perf_counter() - t0) / calls * 1e6)
            buf.fill_(1.0)
        med = statistics.median(us)
        algbw = nbytes / (med * 1e3)
        if rank == 0:
            print(f"torch_allreduce ranks={a.procs} bytes={nbytes} calls={calls} median_us={med:.1f} "
                  f"min_us={min(us):.1f} algbw_gbs={algbw:.3f} busbw_gbs={algbw * 2 * (a.procs - 1) / a.procs:.3f}",
                  flush=True)
        nbytes *= 4
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--max-mib", type=int, default=256)
    a = p.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="pytorch_allreduce.") as d:
        mp.spawn(worker, args=(a, os.path.join(d, "rendezvous"), cpus), nprocs=a.procs, join=True)


if __name__ == "__main__":
    main()
