#!/usr/bin/env python3
"""PyTorch DistributedDataParallel counterpart of `train_step --devices N`:
the training step of bench/pytorch_mlp.py (Fashion-MNIST MLP 784-512-512-10,
ReLU, CrossEntropyLoss, SGD lr 0.01 momentum 0.9, random batches) run by N
processes under DDP with the gloo backend, one thread and one CPU each, the
global batch split evenly between them.

  pytorch_ddp.py [--procs N] [--batch GLOBAL_B] [--warmup W] [--steps N]

Each process is pinned to its own CPU (the k-th CPU this script may use; with
fewer CPUs than processes they share) and runs torch with 1 thread (1 BLAS
thread too: set OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 in the environment,
as run_parallel_bench.sh does). Rendezvous is a FileStore in a temporary
directory (file:// init_method), so no network is used; gloo's own traffic
goes over loopback. A step is zero_grad, forward, backward (DDP overlaps its
bucketed gradient allreduce with it) and the optimizer step, each timed on
every rank after the warm-up; a step's time is the slowest rank's and the
median over steps is reported. Output, one line (from rank 0):

  pytorch_ddp procs=N torch=... batch=B steps=N median_ms=... samples_per_s=... gflop_per_step=... gflops=... last_loss=...
"""
import argparse
import os
import statistics
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from pytorch_mlp import make_batches, make_model, report, timed_steps  # same directory


def worker(rank, a, init_file, cpus):
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=a.procs)
    ddp = nn.parallel.DistributedDataParallel(make_model())  # seeded: DDP also broadcasts rank 0's params
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    local = a.batch // a.procs
    torch.manual_seed(100 + rank)  # each rank its own shard of random data
    xs, ys = make_batches(local)
    dist.barrier()
    times, loss = timed_steps(ddp, opt, xs, ys, a.warmup, a.steps)

    # A step lasts as long as its slowest rank.
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    # The global loss, as dp's train net reports it (mean of the replicas').
    l = loss.detach().clone()
    dist.all_reduce(l)
    if rank == 0:
        report("pytorch_ddp", f"procs={a.procs}", local * a.procs, a.steps, statistics.median(t.tolist()),
               l.item() / a.procs)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--batch", type=int, default=256, help="global batch, split evenly between the processes")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=100)
    a = p.parse_args()
    if a.procs < 1 or a.batch % a.procs:
        p.error("--batch must be a multiple of --procs >= 1")
    cpus = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="pytorch_ddp.") as d:
        mp.spawn(worker, args=(a, os.path.join(d, "rendezvous"), cpus), nprocs=a.procs, join=True)


if __name__ == "__main__":
    main()
