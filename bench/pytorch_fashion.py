#!/usr/bin/env python3
"""PyTorch counterpart of samples/train_fashion_mnist.c, end to end: the same
models (mlp: 784-512-512-10; cnn: conv5x5x32, pool, conv5x5x64, pool, fc256,
fc10, as samples/nets/fashion_*.json), Adam (lr 1e-3) with the step policy
(x0.3 every 937 iterations), inputs standardised with the same constants,
a new shuffle every epoch (torch.randperm) and an `x[idx]` gather per step,
tensors in memory. Times the training loop of each epoch as the sample does
(not the data loading or the evaluation).

With --device cuda the model trains on the GPU the way the sample's
`--devices cuda:1` does: batches are gathered on the host (pinned memory)
and copied to the GPU without blocking; the loss is read back every step as
the sample reads it. --data-on-gpu keeps the whole training set on the GPU
instead (the figures of ../shared/gpu/README.md: training step only).
--cuda-graphs (with --device cuda) captures the training step (forward,
backward, Adam with capturable=True and a tensor learning rate that the
schedule fills) into one CUDA graph, as torch.cuda.graphs' whole-network
recipe does, and replays it each step after copying the batch into its
static inputs: PyTorch at its fastest for the sample's loop. The warm-up
the capture needs runs with a learning rate of 0 and the optimizer state is
zeroed after it, so the training is the eager one's.

  pytorch_fashion.py [--model mlp|cnn] [--epochs E] [--batch B] [--threads T]
                     [--limit N] [--data DIR] [--seed S] [--device cpu|cuda]
                     [--data-on-gpu] [--cuda-graphs]

Output: one line per epoch and a last line
  pytorch_fashion model=M threads=T batch=B final test_acc=... samples_per_s=...
"""
import argparse
import gzip
import time

import numpy as np
import torch
from torch import nn


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, split):
    x = read_idx(f"{data_dir}/{split}-images-idx3-ubyte.gz").astype(np.float32)
    y = read_idx(f"{data_dir}/{split}-labels-idx1-ubyte.gz").astype(np.int64)
    x = (x * (1.0 / 255.0) - 0.2860) * (1.0 / 0.3530)
    return torch.from_numpy(x.reshape(-1, 1, 28, 28).copy()), torch.from_numpy(y.copy())


def make_model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))


def capture_step(model, opt, loss_fn, batch, dev):
    """The training step as one CUDA graph over static inputs (the
    torch.cuda.graphs whole-network recipe): warm-up steps on a side stream
    with a learning rate of 0 (the params do not move), the optimizer state
    zeroed after them, then the capture. Returns (x, y, loss, graph)."""
    static_x = torch.zeros((batch, 1, 28, 28), device=dev)
    static_y = torch.zeros((batch,), dtype=torch.int64, device=dev)
    lr = opt.param_groups[0]["lr"]
    saved_lr = lr.clone()
    lr.fill_(0.0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    for state in opt.state.values():  # as if no step had run
        for t in state.values():
            if torch.is_tensor(t):
                t.zero_()
    lr.copy_(saved_lr)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    return static_x, static_y, static_loss, graph


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--data-on-gpu", action="store_true")
    p.add_argument("--cuda-graphs", action="store_true")
    a = p.parse_args()
    if a.cuda_graphs and a.device != "cuda":
        p.error("--cuda-graphs needs --device cuda")
    dev = torch.device(a.device)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    x, y = load(a.data, "train")
    tx, ty = load(a.data, "t10k")
    if a.limit > 0:
        x, y = x[:a.limit], y[:a.limit]
    n = x.shape[0]
    steps = n // a.batch
    if a.device == "cuda":
        if a.data_on_gpu:
            x, y = x.to(dev), y.to(dev)
        else:
            x, y = x.pin_memory(), y.pin_memory()
        tx, ty = tx.to(dev), ty.to(dev)
    model = make_model(a.model).to(dev)
    if a.cuda_graphs:
        opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(1e-3, device=dev), betas=(0.9, 0.999), eps=1e-8,
                               capturable=True)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=937, gamma=0.3)
    loss_fn = nn.CrossEntropyLoss()
    graph = capture_step(model, opt, loss_fn, a.batch, dev) if a.cuda_graphs else None
    total = 0.0
    acc = 0.0
    for e in range(1, a.epochs + 1):
        model.train()
        perm = torch.randperm(n, device=x.device)
        loss_sum = 0.0
        t0 = time.perf_counter()
        for s in range(steps):
            idx = perm[s * a.batch:(s + 1) * a.batch]
            xb, yb = x[idx], y[idx]
            if graph is not None:  # into the graph's static inputs, then one replay
                static_x, static_y, static_loss, g = graph
                static_x.copy_(xb.pin_memory() if xb.device != dev else xb, non_blocking=True)
                static_y.copy_(yb.pin_memory() if yb.device != dev else yb, non_blocking=True)
                g.replay()
                sched.step()
                loss_sum += static_loss.item()
                continue
            if xb.device != dev:  # gathered on the host, copied without blocking
                xb, yb = xb.pin_memory().to(dev, non_blocking=True), yb.pin_memory().to(dev, non_blocking=True)
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item()
        if a.device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        total += dt
        model.eval()
        with torch.no_grad():
            correct = sum((model(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum().item()
                          for i in range(0, tx.shape[0], 1000))
        acc = correct / tx.shape[0]
        print(f"epoch {e}/{a.epochs} loss={loss_sum / steps:.4f} test_acc={acc:.4f} "
              f"samples_per_s={steps * a.batch / dt:.1f}", flush=True)
    print(f"pytorch_fashion model={a.model} device={a.device} graphs={int(a.cuda_graphs)} threads={a.threads} "
          f"batch={a.batch} "
          f"torch={torch.__version__} "
          f"final test_acc={acc:.4f} samples_per_s={steps * a.batch * a.epochs / total:.1f}", flush=True)


if __name__ == "__main__":
    main()
