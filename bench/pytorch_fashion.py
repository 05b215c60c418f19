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

  pytorch_fashion.py [--model mlp|cnn] [--epochs E] [--batch B] [--threads T]
                     [--limit N] [--data DIR] [--seed S] [--device cpu|cuda]
                     [--data-on-gpu]

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
    a = p.parse_args()
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
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=937, gamma=0.3)
    loss_fn = nn.CrossEntropyLoss()
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
    print(f"pytorch_fashion model={a.model} device={a.device} threads={a.threads} batch={a.batch} "
          f"torch={torch.__version__} "
          f"final test_acc={acc:.4f} samples_per_s={steps * a.batch * a.epochs / total:.1f}", flush=True)


if __name__ == "__main__":
    main()
