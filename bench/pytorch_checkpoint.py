#!/usr/bin/env python3
"""torch.save / torch.load of the tensors checkpoint_bench io uses: N float32
tensors of M MiB (default 64 x 16 MiB = 1 GiB), in a state dict.

  pytorch_checkpoint.py [--dir DIR] [--tensors N] [--mib M]

One line: torch_save=<GiB/s> torch_load=<GiB/s> torch_load_mmap=<GiB/s>.
torch.save writes in place (no temporary file, no checksum); the file is
fsynced after it (inside the timing), as dp's save does. The page cache is
dropped (posix_fadvise DONTNEED) before each load, as in checkpoint_bench.
"""
import argparse
import os
import time

import torch


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=".")
    ap.add_argument("--tensors", type=int, default=64)
    ap.add_argument("--mib", type=int, default=16)
    a = ap.parse_args()
    torch.manual_seed(0)
    n = a.mib * 1024 * 1024 // 4
    state = {f"t{i:03d}": torch.rand(n) for i in range(a.tensors)}
    gib = a.tensors * a.mib / 1024.0
    path = os.path.join(a.dir, "pytorch_checkpoint_bench.pt")
    if os.path.exists(path):
        os.remove(path)
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    save = gib / (time.perf_counter() - t0)
    drop_cache(path)
    t0 = time.perf_counter()
    loaded = torch.load(path)
    load = gib / (time.perf_counter() - t0)
    assert all(torch.equal(loaded[k], state[k]) for k in ("t000", f"t{a.tensors - 1:03d}"))
    del loaded
    drop_cache(path)
    t0 = time.perf_counter()
    try:
        loaded = torch.load(path, mmap=True)
        for v in loaded.values():  # touch every page, as dp's verified mmap load reads them
            v.sum()
        load_mmap = gib / (time.perf_counter() - t0)
    except TypeError:  # torch older than 2.1: no mmap
        load_mmap = float("nan")
    os.remove(path)
    print(f"pytorch_checkpoint torch={torch.__version__} torch_save={save:.3f} torch_load={load:.3f} "
          f"torch_load_mmap={load_mmap:.3f} GiB/s")


if __name__ == "__main__":
    main()
