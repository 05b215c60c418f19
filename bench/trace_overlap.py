#!/usr/bin/env python3
"""How much of a data-parallel step's allreduce time is hidden behind backward,
from the Chrome trace that `train_step --devices N --trace FILE` writes (one
run of the train net: one event per op, "name" = op type [+ " " + op name],
"tid" = executor thread, "ts"/"dur" in microseconds).

  trace_overlap.py TRACE.json [TRACE.json ...]

Definitions (wall time, per trace):
  allreduce ops  type "Allreduce" (each bucket of gradients is one op).
  backward ops   type ending in "Gradient": the gradient operators autodiff
                 made from the forward ops (FCGradient, ReluGradient,
                 SoftmaxWithLossGradient, ...). The loss-gradient seed
                 (ConstantFill) and autodiff's gradient-summing ops are left
                 out: microseconds, and a trace cannot tell them from the
                 loss-averaging Sum/Scale.
  hidden         the part of an allreduce op's interval during which at least
                 one backward op runs on another thread; hidden_share = hidden
                 time / total allreduce time, over the step's allreduce ops.
  overlap_any    the same against every other op that is not a collective
                 (optimizer updates of buckets already reduced count too): the
                 share of communication that ran next to any useful work.
  backward_end   end of the last backward op of any replica; backward_skew is
                 the last replica's backward end minus the first's (a bucket
                 cannot start before its slowest replica has the gradients).
  tail           step end (last op end) minus backward_end: the part of the
                 step after all backward compute, of which tail_allreduce is
                 allreduce time (exposed communication) and the rest mostly
                 optimizer updates.

Output: one line per trace, then, with several traces, one line of medians:
  trace_overlap file=... allreduce_ops=K allreduce_us=... hidden_us=... hidden_share=... overlap_any_share=...
                step_us=... backward_end_us=... backward_skew_us=... tail_us=... tail_allreduce_us=...
  trace_overlap_median traces=T hidden_share=... overlap_any_share=... tail_us=... tail_allreduce_us=... step_us=...
"""
import json
import statistics
import sys

COLLECTIVES = {"Allreduce", "Broadcast"}


def merged(intervals):
    """Union of [start, end) intervals as a sorted list of disjoint ones."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def covered(s, e, union):
    """Length of [s, e) covered by a merged union."""
    return sum(max(0.0, min(e, ue) - max(s, us)) for us, ue in union)


def analyse(path):
    with open(path) as f:
        trace = json.load(f)
    ops = []
    for ev in trace["traceEvents"]:
        if ev.get("ph") != "X":
            continue
        ops.append({"type": ev["name"].split(" ", 1)[0], "s": ev["ts"], "e": ev["ts"] + ev["dur"], "tid": ev["tid"],
                    "device": ev.get("args", {}).get("device", "")})
    allreduce = [o for o in ops if o["type"] == "Allreduce"]
    backward = [o for o in ops if o["type"].endswith("Gradient")]
    compute = [o for o in ops if o["type"] not in COLLECTIVES]
    if not allreduce or not backward:
        sys.exit(f"trace_overlap: {path} has no Allreduce or no *Gradient op: is it a train_step --devices N trace?")

    total = hidden = any_overlap = 0.0
    for a in allreduce:
        others_bw = merged([(o["s"], o["e"]) for o in backward if o["tid"] != a["tid"]])
        others_any = merged([(o["s"], o["e"]) for o in compute if o["tid"] != a["tid"]])
        total += a["e"] - a["s"]
        hidden += covered(a["s"], a["e"], others_bw)
        any_overlap += covered(a["s"], a["e"], others_any)

    start = min(o["s"] for o in ops)
    end = max(o["e"] for o in ops)
    backward_end = max(o["e"] for o in backward)
    ends_by_device = {}
    for o in backward:
        ends_by_device[o["device"]] = max(ends_by_device.get(o["device"], o["e"]), o["e"])
    skew = max(ends_by_device.values()) - min(ends_by_device.values())
    tail_allreduce = covered(backward_end, end, merged([(a["s"], a["e"]) for a in allreduce]))
    return {
        "allreduce_ops": len(allreduce),
        "allreduce_us": total,
        "hidden_us": hidden,
        "hidden_share": hidden / total if total > 0 else 0.0,
        "overlap_any_share": any_overlap / total if total > 0 else 0.0,
        "step_us": end - start,
        "backward_end_us": backward_end - start,
        "backward_skew_us": skew,
        "tail_us": end - backward_end,
        "tail_allreduce_us": tail_allreduce,
    }


def fmt(v):
    return str(v) if isinstance(v, int) else f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"


def main():
    paths = sys.argv[1:]
    if not paths or any(p in ("-h", "--help") for p in paths):
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    results = [analyse(p) for p in paths]
    for p, r in zip(paths, results):
        print(f"trace_overlap file={p} " + " ".join(f"{k}={fmt(v)}" for k, v in r.items()))
    if len(results) > 1:
        keys = ["hidden_share", "overlap_any_share", "tail_us", "tail_allreduce_us", "step_us"]
        print(f"trace_overlap_median traces={len(results)} " +
              " ".join(f"{k}={fmt(statistics.median(r[k] for r in results))}" for k in keys))


if __name__ == "__main__":
    main()
