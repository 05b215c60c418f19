#!/usr/bin/env python3
"""Where a GPU training step's time goes, without nsight: from the Chrome
trace that `train_fashion_mnist --devices cuda:1 --trace FILE` writes (the
last step of the train net, profiled).

  gpu_step_breakdown.py TRACE.json [TRACE.json ...]

Per trace, one line:
  kernels      the kernel nodes of the step's CUDA graph (cuBLAS's included):
               the launches one graph launch stands for
  host_ops     the ops that ran outside the graph (host ops before and after
               it, and the copies into the GPU at its start)
  step_us      the step's wall time: first op start to last op (or graph) end
  graph_us     the graph's host span: its launch until the host saw it done
  device_us    the device's own time for the graph (timing events around it)
  busy         device_us / step_us: the share of the step the GPU computed
               (the rest is host work, launches and copies the GPU waited for)
A trace without a graph (--no-graphs, a net that does not qualify) prints
kernels=0 and busy=n/a.
"""
import json
import sys


def breakdown(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("op", "graph")]
    if not spans:
        return f"{path}: no op spans"
    start = min(e["ts"] for e in spans)
    end = max(e["ts"] + e["dur"] for e in spans)
    step = end - start
    graphs = [e for e in spans if e["cat"] == "graph"]
    host_ops = sum(1 for e in spans if e["cat"] == "op")
    if not graphs:
        return f"{path}: kernels=0 host_ops={host_ops} step_us={step:.1f} graph_us=0 device_us=0 busy=n/a"
    g = graphs[0]
    args = g.get("args", {})
    device = float(args.get("device_us", -1))
    busy = f"{device / step:.2f}" if device >= 0 and step > 0 else "n/a"
    return (f"{path}: kernels={args.get('kernels', 0)} host_ops={host_ops} step_us={step:.1f} "
            f"graph_us={g['dur']:.1f} device_us={device:.1f} busy={busy}")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for path in sys.argv[1:]:
        print(breakdown(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
