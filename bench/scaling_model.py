#!/usr/bin/env python3
"""The alpha-beta model of allreduce time for 8 to 4,096 ranks, calibrated on
measurements (docs/SCALING.md explains it).

  T_ring(p, n) = 2 (p - 1) alpha + 2 (p - 1) / p * n * beta        (Gloo's chunked ring, NCCL's ring)
  T_hd(p, n)   = 2 log2(p) alpha + 2 (p - 1) / p * n * beta        (halving-doubling, p a power of two)
  T_tree(p, n) = 2 log2(p) (alpha + n * beta)                      (binary tree reduce + broadcast, unpipelined)
  T_hier(p, n) = 2 (l - 1) alpha_l + 2 (l - 1) / l n beta_l        (reduce-scatter inside a machine of l ranks,
                 + T_ring(p / l, n / l) + same again                ring across machines on 1/l of the data,
                                                                    allgather inside: Horovod's hierarchical)

alpha: per-message latency (s); beta: seconds per byte of one link. The
calibration comes from `dp-bench gloo-allreduce` between 2 processes: alpha
from the smallest size with the plain ring (2 (p - 1) = 2 messages), beta
from the largest with halving-doubling (2 (p - 1) / p = 1 buffer per link).

  scaling_model.py [--alpha-us A] [--beta-gbs B] [--sizes-mib 0.004,1,25,100] [--gpu-step-ms S]

Prints, per size, the time of each algorithm at 8 .. 4096 ranks and the
parallel efficiency of a step whose compute takes --step-ms (default 100 ms,
gradients of --grad-mib) if communication were not overlapped at all.
"""
import argparse
import math


def ring(p, n, a, b):
    return 2 * (p - 1) * a + 2 * (p - 1) / p * n * b


def hd(p, n, a, b):
    return 2 * math.log2(p) * a + 2 * (p - 1) / p * n * b


def tree(p, n, a, b):
    return 2 * math.log2(p) * (a + n * b)


def hier(p, n, a, b, local, a_l, b_l):
    if p <= local:
        return ring(p, n, a_l, b_l)
    inside = 2 * (local - 1) * a_l + 2 * (local - 1) / local * n * b_l
    return inside + ring(p // local, n / local, a, b)


def fmt(s):
    return f"{s * 1e3:9.2f}" if s < 10 else f"{s:8.1f}s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--alpha-us", type=float, default=70.0, help="per-message latency, microseconds")
    ap.add_argument("--beta-gbs", type=float, default=1.2, help="link bandwidth, GB/s (1e9 bytes/s)")
    ap.add_argument("--local", type=int, default=8, help="ranks per machine for the hierarchical variant")
    ap.add_argument("--alpha-local-us", type=float, default=10.0)
    ap.add_argument("--beta-local-gbs", type=float, default=10.0)
    ap.add_argument("--sizes-mib", default="0.004,1,25,100")
    ap.add_argument("--step-ms", type=float, default=100.0)
    ap.add_argument("--grad-mib", type=float, default=100.0)
    a = ap.parse_args()
    alpha, beta = a.alpha_us * 1e-6, 1 / (a.beta_gbs * 1e9)
    al, bl = a.alpha_local_us * 1e-6, 1 / (a.beta_local_gbs * 1e9)
    ranks = [8, 32, 128, 512, 1024, 4096]
    print(f"alpha = {a.alpha_us} us, beta = 1 / ({a.beta_gbs} GB/s); hierarchical: {a.local} ranks per machine "
          f"(alpha {a.alpha_local_us} us, {a.beta_local_gbs} GB/s inside)")
    for mib in [float(x) for x in a.sizes_mib.split(",")]:
        n = mib * (1 << 20)
        print(f"\nallreduce of {mib:g} MiB, milliseconds")
        print("  ranks      ring        hd      tree      hier")
        for p in ranks:
            print(f"  {p:5d} {fmt(ring(p, n, alpha, beta))} {fmt(hd(p, n, alpha, beta))} "
                  f"{fmt(tree(p, n, alpha, beta))} {fmt(hier(p, n, alpha, beta, a.local, al, bl))}")
    n = a.grad_mib * (1 << 20)
    step = a.step_ms * 1e-3
    print(f"\nefficiency of a {a.step_ms:g} ms step with {a.grad_mib:g} MiB of gradients, nothing overlapped "
          "(compute / (compute + allreduce)):")
    print("  ranks   ring     hd   tree   hier")
    for p in ranks:
        effs = [step / (step + f) for f in (ring(p, n, alpha, beta), hd(p, n, alpha, beta), tree(p, n, alpha, beta),
                                            hier(p, n, alpha, beta, a.local, al, bl))]
        print(f"  {p:5d} " + " ".join(f"{e:6.3f}" for e in effs))


if __name__ == "__main__":
    main()
