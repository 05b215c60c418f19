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


def make_model():
    """The MLP, seeded: every run (and every DDP rank) starts from the same params."""
    torch.manual_seed(1)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def make_batches(batch):
    """NUM_BATCHES random batches (images in [0, 1), labels 0..9), fed in rotation."""
    return ([torch.rand(batch, 1, 28, 28) for _ in range(NUM_BATCHES)],
            [torch.randint(0, 10, (batch,)) for _ in range(NUM_BATCHES)])


def timed_steps(model, opt, xs, ys, warmup, steps):
    """Runs warmup + steps training steps; returns the times of the last `steps` and the last loss."""
    loss_fn = nn.CrossEntropyLoss()
    times = []
    loss = None
    for s in range(-warmup, steps):
        k = (s + warmup) % NUM_BATCHES
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(xs[k]), ys[k])
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if s >= 0:
            times.append(dt)
    return times, loss


def step_flop(batch):
    """FLOP of one step: forward, backward (the first layer's input gradient is not needed)."""
    fwd = 2.0 * batch * (784 * 512 + 512 * 512 + 512 * 10)
    return fwd + fwd + (fwd - 2.0 * batch * 784 * 512)


def report(name, config, batch, steps, med, loss):
    flop = step_flop(batch)
    print(f"{name} {config} torch={torch.__version__} batch={batch} steps={steps} "
          f"median_ms={med * 1e3:.3f} samples_per_s={batch / med:.1f} gflop_per_step={flop * 1e-9:.4f} "
          f"gflops={flop / med * 1e-9:.2f} last_loss={loss:.4f}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("threads", nargs="?", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=100)
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs, ys = make_batches(a.batch)
    times, loss = timed_steps(model, opt, xs, ys, a.warmup, a.steps)
    report("pytorch_mlp", f"threads={a.threads}", a.batch, a.steps, statistics.median(times), loss.item())


if __name__ == "__main__":
    main()
