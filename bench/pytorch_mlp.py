#!/usr/bin/env python3
"""PyTorch counterpart of bench/train_step.c: one training step of the
Fashion-MNIST MLP (784-512-512-10, ReLU, CrossEntropyLoss, SGD lr 0.01
momentum 0.9) on random batches, timed like train_step: warm-up steps, then
each step timed on its own; the median is reported.

  pytorch_mlp.py [THREADS] [--batch B] [--warmup W] [--steps N]

THREADS (default 1) goes to torch.set_num_threads. Output, one line:
  pytorch_mlp threads=T batch=B steps=N median_ms=... samples_per_s=... gflop_per_step=... gflops=...
"""
import argparse
import statistics
import time

import torch
from torch import nn

NUM_BATCHES = 4


def main():
    p = argparse.ArgumentParser()
    p.add_argument("threads", nargs="?", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=100)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs = [torch.rand(a.batch, 1, 28, 28) for _ in range(NUM_BATCHES)]
    ys = [torch.randint(0, 10, (a.batch,)) for _ in range(NUM_BATCHES)]

    times = []
    loss = None
    for s in range(-a.warmup, a.steps):
        k = (s + a.warmup) % NUM_BATCHES
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(xs[k]), ys[k])
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if s >= 0:
            times.append(dt)

    b = float(a.batch)
    fwd = 2.0 * b * (784 * 512 + 512 * 512 + 512 * 10)
    flop = fwd + fwd + (fwd - 2.0 * b * 784 * 512)
    med = statistics.median(times)
    print(f"pytorch_mlp threads={a.threads} torch={torch.__version__} batch={a.batch} steps={a.steps} "
          f"median_ms={med * 1e3:.3f} samples_per_s={b / med:.1f} gflop_per_step={flop * 1e-9:.4f} "
          f"gflops={flop / med * 1e-9:.2f} last_loss={loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
