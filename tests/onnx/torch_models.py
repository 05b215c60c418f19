#!/usr/bin/env python3
"""Exports reference models to ONNX with PyTorch, plus their inputs and
PyTorch's outputs, for dp's ONNX importer tests.

    torch_models.py OUT_DIR [--models a,b,...] [--opset N] [-v]

For each model (random weights, fixed seeds, eval mode) it writes
OUT_DIR/NAME.onnx, every input and every PyTorch output as raw little-endian
float32 (NAME.in.BLOB.f32, NAME.out.BLOB.f32), and one manifest,
OUT_DIR/manifest.txt, one record a line, fields separated by one space:

    model NAME FILE.onnx OPSET
    input BLOBNAME D0,D1,... FILE.f32      (graph input order)
    output BLOBNAME D0,D1,... FILE.f32     (graph output order)
    end

File names are relative to OUT_DIR. Expected values are the torch model's
outputs, not an ONNX runtime's. Every model passes onnx.checker.check_model.

Models: mlp, cnn, resnet18 (BN folded into Conv by torch's eval export),
resnet18_bn (same weights, BatchNormalization kept: exported with
training=TrainingMode.PRESERVE on the eval-mode model), mobilenet_v2, and
ops_opset9/11/13/17: one small graph that covers dp's op mapping, exported at
that opset; the script fails if an op or attribute it is meant to cover is
missing from the exported graph, or an op outside that list appears.
"""
import argparse
import collections
import os
import sys
import time
import warnings

try:
    import onnx
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
except ImportError as e:  # the pyenv python3 on PATH may lack Debian's torch
    sys.exit("torch_models.py: %s (needs python3-torch, python3-torchvision and "
             "python3-onnx; this is %s)" % (e, sys.executable))

DEFAULT_OPSET = 13
OPS_OPSETS = (9, 11, 13, 17)


# --- ONNX nodes that torch's exporter would not emit on its own --------------
# Each Function computes its value with the ordinary torch op (that is what
# the expected outputs hold) and exports as exactly one ONNX node.

class AvgPoolIncludePad(torch.autograd.Function):
    """avg_pool2d(k3, s2, p1, count_include_pad=True) as one AveragePool node
    (torch 1.13 exports it as Pad + AveragePool with zero pads)."""

    @staticmethod
    def forward(ctx, x):
        return F.avg_pool2d(x, 3, 2, 1, count_include_pad=True)

    @staticmethod
    def symbolic(g, x):
        return g.op("AveragePool", x, kernel_shape_i=[3, 3], strides_i=[2, 2],
                    pads_i=[1, 1, 1, 1], count_include_pad_i=1)


class EvalDropout(torch.autograd.Function):
    """Identity in torch; a Dropout node in the graph (eval export drops
    nn.Dropout altogether). Ratio: an attribute before opset 12, an input
    from 12."""

    @staticmethod
    def forward(ctx, x, opset):
        return x.clone()

    @staticmethod
    def symbolic(g, x, opset):
        if opset < 12:
            return g.op("Dropout", x, ratio_f=0.25)
        ratio = g.op("Constant", value_t=torch.tensor(0.25, dtype=torch.float32))
        return g.op("Dropout", x, ratio)


class IdentityNode(torch.autograd.Function):
    """An Identity node (the tracer never records nn.Identity)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def symbolic(g, x):
        return g.op("Identity", x)


class ReshapeKeepFirst(torch.autograd.Function):
    """x.reshape(x.shape[0], -1) as Reshape with the constant shape [0, -1]
    (torch writes the batch size itself, never 0)."""

    @staticmethod
    def forward(ctx, x):
        return x.reshape(x.shape[0], -1)

    @staticmethod
    def symbolic(g, x):
        shape = g.op("Constant", value_t=torch.tensor([0, -1], dtype=torch.int64))
        return g.op("Reshape", x, shape)


class OpsModel(nn.Module):
    """The op-mapping graph. Inputs x [2,3,8,8] and v [2,16]; outputs
    y [2,72] and feat [2,5,5,8]."""

    def __init__(self, opset):
        super().__init__()
        self.opset = opset
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        # groups and dilation; pads symmetric (2 on every side)
        self.gconv = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=4)
        self.fc1 = nn.Linear(16, 12)                               # Gemm transB=1
        self.w2 = nn.Parameter(torch.randn(12, 10) * 0.3)          # Gemm transB=0
        self.b2 = nn.Parameter(torch.randn(10) * 0.1)
        self.w3 = nn.Parameter(torch.randn(10, 8) * 0.3)           # MatMul, 2-D weight
        self.fc_b = nn.Linear(128, 8)
        # broadcast constants (initializers); the scalars below become Constant nodes
        self.register_buffer("k_add", torch.randn(8, 1, 1) * 0.1)
        self.register_buffer("k_sub", torch.randn(8, 1, 1) * 0.1)
        self.register_buffer("k_div", torch.rand(1, 8, 1, 1) + 0.5)

    def forward(self, x, v):
        h = self.bn(F.relu(self.conv1(x)))  # BN after Relu: nothing to fold it into
        g = F.relu6(self.gconv(h) * 8.0)     # scaled so ReLU6 clips at both ends
        if self.opset >= 10:  # MaxPool's ceil_mode attribute is opset 10
            a = F.max_pool2d(g, 3, 2, 1, ceil_mode=True)           # [2,8,5,5]
        else:
            a = F.max_pool2d(g, 2, 2, 1)                           # [2,8,5,5]
        b = AvgPoolIncludePad.apply(g)                             # [2,8,4,4]
        c = F.avg_pool2d(g, 2, 2, 1, count_include_pad=False)      # [2,8,5,5]

        e = (torch.softmax(c, dim=1) + self.k_add) * 2.0           # non-last axis
        feat = e.permute(0, 2, 3, 1)                               # Transpose

        a = (a - self.k_sub) / self.k_div
        pa = torch.flatten(F.adaptive_avg_pool2d(a, 1), 1)         # GAP, Flatten
        pb = self.fc_b(ReshapeKeepFirst.apply(torch.log_softmax(b, dim=1)))

        p = torch.tanh(self.fc1(v))
        q = torch.addmm(self.b2, p, self.w2, beta=0.5, alpha=2.0)
        r = torch.sigmoid(torch.matmul(q, self.w3))

        z = EvalDropout.apply(torch.cat([pa, pb, r], dim=1), self.opset)  # [2,24]
        y = torch.cat([torch.softmax(z, dim=-1), torch.log_softmax(z, dim=-1),
                       IdentityNode.apply(torch.clamp(z, -0.5, 0.7))], dim=1)
        return y, feat


# Ops the op-mapping graph must contain, and the only ones it may.
OPS_REQUIRED = {
    "Gemm", "MatMul", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
    "BatchNormalization", "Relu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
    "Add", "Sub", "Mul", "Div", "Concat", "Flatten", "Reshape", "Transpose",
    "Dropout", "Identity", "Clip",
}
OPS_ALLOWED = OPS_REQUIRED | {"Constant"}


def check_ops_graph(model, opset):
    """Fails unless the exported op-mapping graph holds what it must cover."""
    nodes = model.graph.node
    types = {n.op_type for n in nodes}
    problems = []
    if OPS_REQUIRED - types:
        problems.append("missing ops: %s" % sorted(OPS_REQUIRED - types))
    if types - OPS_ALLOWED:
        problems.append("unexpected ops: %s" % sorted(types - OPS_ALLOWED))

    def attrs(n):
        return {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}

    def has(op, pred, what):
        if not any(pred(attrs(n)) for n in nodes if n.op_type == op):
            problems.append("no %s with %s" % (op, what))

    has("Gemm", lambda a: a.get("transB", 0) == 1, "transB=1")
    has("Gemm", lambda a: a.get("transB", 0) == 0, "transB=0")
    has("Conv", lambda a: a.get("group", 1) > 1 and max(a.get("dilations", [1])) > 1,
        "group>1 and dilation>1")
    has("AveragePool", lambda a: a.get("count_include_pad", 0) == 1, "count_include_pad=1")
    has("AveragePool", lambda a: a.get("count_include_pad", 0) == 0 and any(a.get("pads", [])),
        "count_include_pad=0 and pads")
    if opset >= 10:
        has("MaxPool", lambda a: a.get("ceil_mode", 0) == 1, "ceil_mode=1")
    for op in ("Softmax", "LogSoftmax"):
        if opset >= 13:  # before 13 torch transposes a non-last axis to the end
            has(op, lambda a: a.get("axis") == 1, "axis=1")
    if problems:
        raise RuntimeError("ops_opset%d: %s" % (opset, "; ".join(problems)))


# --- models -------------------------------------------------------------------

def randomize_bn(model, seed, *calib_shapes):
    """Gives every BatchNorm non-trivial running stats and affine parameters.
    Stats are measured on seeded random batches (train-mode passes, cumulative
    average) so activations keep a sane scale through deep nets, then jittered;
    weight and bias are drawn at random."""
    gen = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    with torch.no_grad():
        for m in bns:
            m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.reset_running_stats()
            m.momentum = None  # cumulative moving average over the passes below
        model.train()
        for _ in range(2):
            model(*[torch.randn(*shape, generator=gen) for shape in calib_shapes])
        for m in bns:
            m.running_mean.add_(torch.randn(m.num_features, generator=gen) * 0.05)
            m.running_var.mul_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.75)
            m.momentum = 0.1
    model.eval()


def build_mlp(opset):
    torch.manual_seed(1)
    m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                      nn.Linear(512, 10))
    return m, {"input": torch.randn(2, 784)}, ["output"], {}


def build_cnn(opset):
    torch.manual_seed(2)
    m = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(1), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))
    return m, {"input": torch.randn(2, 1, 28, 28)}, ["output"], {}


def _resnet18():
    torch.manual_seed(3)
    m = torchvision.models.resnet18(weights=None)
    randomize_bn(m, 30, (2, 3, 64, 64))  # small calibration images: fast, same stats idea
    return m, {"input": torch.randn(1, 3, 224, 224)}, ["output"]


def build_resnet18(opset):
    return _resnet18() + ({},)


def build_resnet18_bn(opset):
    # PRESERVE on an eval-mode model exports inference BatchNormalization and
    # skips the eval peephole that folds BN into Conv (do_constant_folding=False
    # alone does not: the fold is not part of constant folding).
    return _resnet18() + ({"training": torch.onnx.TrainingMode.PRESERVE},)


def build_mobilenet_v2(opset):
    torch.manual_seed(4)
    m = torchvision.models.mobilenet_v2(weights=None)
    randomize_bn(m, 40, (2, 3, 64, 64))
    return m, {"input": torch.randn(1, 3, 224, 224)}, ["output"], {}


def make_build_ops(opset_n):
    def build(opset):
        torch.manual_seed(100 + opset_n)
        m = OpsModel(opset_n)
        randomize_bn(m, 200 + opset_n, (4, 3, 8, 8), (4, 16))
        inputs = {"x": torch.randn(2, 3, 8, 8), "v": torch.randn(2, 16)}
        return m, inputs, ["y", "feat"], {"training": torch.onnx.TrainingMode.PRESERVE,
                                          "fixed_opset": opset_n}
    return build


BUILDERS = collections.OrderedDict([
    ("mlp", build_mlp),
    ("cnn", build_cnn),
    ("resnet18", build_resnet18),
    ("resnet18_bn", build_resnet18_bn),
    ("mobilenet_v2", build_mobilenet_v2),
] + [("ops_opset%d" % n, make_build_ops(n)) for n in OPS_OPSETS])


def write_f32(path, t):
    t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tofile(path)


def dims(t):
    return ",".join(str(d) for d in t.shape)


def export_one(name, out_dir, opset, verbose):
    """Builds, runs, exports and checks one model; returns its manifest lines."""
    model, inputs, output_names, opts = BUILDERS[name](opset)
    opset = opts.pop("fixed_opset", opset)
    model.eval()
    args = tuple(inputs.values())
    with torch.no_grad():
        outs = model(*args)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)

    onnx_file = name + ".onnx"
    path = os.path.join(out_dir, onnx_file)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        # PRESERVE warns about constant folding in training mode; the model is in eval mode
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, opset_version=opset,
                          input_names=list(inputs), output_names=output_names, **opts)
    export_s = time.perf_counter() - t0

    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    if name.startswith("ops_opset"):
        check_ops_graph(proto, opset)
    # the manifest lists graph inputs/outputs in graph order: confirm that is ours
    inits = {i.name for i in proto.graph.initializer}
    graph_in = [i.name for i in proto.graph.input if i.name not in inits]
    graph_out = [o.name for o in proto.graph.output]
    if graph_in != list(inputs) or graph_out != output_names:
        raise RuntimeError("%s: graph inputs %s outputs %s, expected %s %s"
                           % (name, graph_in, graph_out, list(inputs), output_names))
    got = [(d.domain, d.version) for d in proto.opset_import]
    if got != [("", opset)]:
        raise RuntimeError("%s: opset_import %s, expected [('', %d)]" % (name, got, opset))

    lines = ["model %s %s %d" % (name, onnx_file, opset)]
    for blob, t in inputs.items():
        f = "%s.in.%s.f32" % (name, blob)
        write_f32(os.path.join(out_dir, f), t)
        lines.append("input %s %s %s" % (blob, dims(t), f))
    for blob, t in zip(output_names, outs):
        f = "%s.out.%s.f32" % (name, blob)
        write_f32(os.path.join(out_dir, f), t)
        lines.append("output %s %s %s" % (blob, dims(t), f))
    lines.append("end")

    hist = collections.Counter(n.op_type for n in proto.graph.node)
    print("%-14s opset %-2d export %6.2fs  %4d nodes  %8.1f KiB"
          % (name, opset, export_s, sum(hist.values()), os.path.getsize(path) / 1024.0))
    if verbose:
        print("    " + " ".join("%s:%d" % kv for kv in sorted(hist.items())))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=",".join(BUILDERS),
                    help="comma-separated subset of: %s" % ",".join(BUILDERS))
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                    help="opset of the non-ops models (default %(default)s)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print op histograms")
    args = ap.parse_args()

    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        ap.error("unknown model(s): %s" % ",".join(unknown))
    os.makedirs(args.out_dir, exist_ok=True)

    t0 = time.perf_counter()
    lines = []
    for n in names:
        lines += export_one(n, args.out_dir, args.opset, args.verbose)
    # written last, and whole, so a failed run leaves no manifest claiming files
    tmp = os.path.join(args.out_dir, "manifest.txt.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, os.path.join(args.out_dir, "manifest.txt"))
    print("%d models in %.2fs -> %s" % (len(names), time.perf_counter() - t0,
                                        os.path.join(args.out_dir, "manifest.txt")))


if __name__ == "__main__":
    main()
