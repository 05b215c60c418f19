#!/usr/bin/env python3
"""A small ONNX interpreter on torch ops, to check dp's ONNX import and export
against something that is not dp (there is no onnxruntime here).

    onnx_reference.py MODEL.onnx --input NAME=FILE.f32:D0,D1,... [--input ...]
                      [--compare NAME=FILE.f32[:D0,D1,...] ...] [--tol 1e-4]
                      [--write-outputs DIR]
    onnx_reference.py --check-manifest OUT_DIR/manifest.txt [--tol 1e-4]
    onnx_reference.py --self-test

Runs the model in float32 on CPU. Input files are raw little-endian float32.
For each --compare (a graph output, or any value the graph computes) it
prints `NAME max_rel_err=X`, X = max_i |got_i - want_i| / max_i |want_i|
(the plain max abs error when want is all zeros), and exits 1 if any X
exceeds --tol, or on a shape or element-count mismatch or a NaN; it exits 2
when it cannot run at all (unreadable model or file, unsupported op, an
input missing or of the wrong size).
--write-outputs DIR writes each graph output as DIR/NAME.f32 (float32,
whatever its ONNX type) and its dims, comma separated on one line, as
DIR/NAME.dims; characters of NAME outside [A-Za-z0-9._-] become '_'.

--check-manifest runs every model of a manifest written by torch_models.py
and compares with its expected outputs: one line per model with the max error
and the time. --self-test checks the interpreter on the semantics torch's
exports do not reach (pre-13 Softmax, SAME padding, asymmetric pool pads,
allowzero, ...) against hand-written numpy.

Ops (default domain; the opset is the model's opset_import for it): Gemm,
MatMul, Conv, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool,
BatchNormalization, Relu, Sigmoid, Tanh, Softmax, LogSoftmax, Add, Sub, Mul,
Div, Sum, Concat, Flatten, Reshape, Transpose, Identity, Dropout, Constant,
Clip, Shape, Gather, Unsqueeze, Squeeze, Pad, Cast. Any other op fails with
its name, node and opset.
"""
import argparse
import math
import os
import re
import sys
import time

try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the pyenv python3 on PATH may lack Debian's torch
    sys.exit("onnx_reference.py: %s (needs python3-torch, python3-onnx and "
             "python3-numpy; this is %s)" % (e, sys.executable))


class RefError(Exception):
    """A model this interpreter cannot run, or bad command-line data."""


# --- helpers ------------------------------------------------------------------

def to_torch(array):
    # copy: numpy_helper may hand back read-only views of the protobuf bytes
    return torch.from_numpy(np.array(array, copy=True))


def attr_value(a):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        return to_torch(onnx.numpy_helper.to_array(v))
    if isinstance(v, bytes):
        return v.decode("utf-8")
    return v


def ints_of(t):
    """A 1-D int tensor (shape, axes, pads input) as a list of ints."""
    return [int(i) for i in t.reshape(-1).tolist()]


def scalar_of(t):
    return t.reshape(-1)[0].item()


def spatial_pads(attrs, in_sizes, kernel, strides, dilations):
    """Begin and end pads per spatial dim, auto_pad resolved as the spec says."""
    n = len(in_sizes)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0] * (2 * n)))
        if len(pads) != 2 * n:
            raise RefError("pads %s does not fit %d spatial dims" % (pads, n))
        return pads[:n], pads[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise RefError("auto_pad %r" % auto)
    begin, end = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        # SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the start
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin, end


def pad_spatial(x, begin, end, value=0.0):
    """F.pad takes the last dim first: (last_begin, last_end, ...)."""
    spec = []
    for b, e in zip(reversed(begin), reversed(end)):
        spec += [b, e]
    if not any(spec):
        return x
    return F.pad(x, spec, mode="constant", value=value)


def spatial_fn(kind, n):
    fns = {"conv": (F.conv1d, F.conv2d, F.conv3d),
           "max": (F.max_pool1d, F.max_pool2d, F.max_pool3d),
           "avg": (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)}[kind]
    if not 1 <= n <= 3:
        raise RefError("%d spatial dims (1 to 3 supported)" % n)
    return fns[n - 1]


# --- ops ------------------------------------------------------------------------
# Each takes (ctx, inputs, attrs) and returns a list of outputs; inputs holds
# None for an optional input left empty. ctx.opset is the default-domain opset.

def op_gemm(ctx, i, a):
    A, B = i[0], i[1]
    if a.get("transA", 0):
        A = A.t()
    if a.get("transB", 0):
        B = B.t()
    y = a.get("alpha", 1.0) * torch.matmul(A, B)
    if len(i) > 2 and i[2] is not None:
        y = y + a.get("beta", 1.0) * i[2]
    return [y]


def op_conv(ctx, i, a):
    x, w = i[0], i[1]
    b = i[2] if len(i) > 2 else None
    n = x.dim() - 2
    kernel = list(a.get("kernel_shape", w.shape[2:]))
    if kernel != list(w.shape[2:]):
        raise RefError("kernel_shape %s but weight %s" % (kernel, list(w.shape)))
    strides = list(a.get("strides", [1] * n))
    dil = list(a.get("dilations", [1] * n))
    begin, end = spatial_pads(a, list(x.shape[2:]), kernel, strides, dil)
    fn = spatial_fn("conv", n)
    if begin == end:
        return [fn(x, w, b, strides, begin, dil, a.get("group", 1))]
    return [fn(pad_spatial(x, begin, end), w, b, strides, 0, dil, a.get("group", 1))]


def pool_geometry(a, x, default_dil):
    """Pads, output sizes and the extra end padding that ceil_mode needs, per
    spatial dim. Output size as the spec: floor or ceil of
    (in + pads - ((k-1)*d+1)) / s + 1, and in ceil mode a last window that
    would start past the input and the begin pad is dropped (torch does too)."""
    n = x.dim() - 2
    kernel = list(a["kernel_shape"])
    strides = list(a.get("strides", [1] * n))
    dil = list(a.get("dilations", [default_dil] * n))
    sizes = list(x.shape[2:])
    begin, end = spatial_pads(a, sizes, kernel, strides, dil)
    same = a.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER")
    outs, extra = [], []
    for size, k, s, d, pb, pe in zip(sizes, kernel, strides, dil, begin, end):
        eff = (k - 1) * d + 1
        num = size + pb + pe - eff
        if same:
            out = -(-size // s)
        elif a.get("ceil_mode", 0):
            out = -(-num // s) + 1
            if (out - 1) * s >= size + pb:
                out -= 1
        else:
            out = num // s + 1
        if out < 1:
            raise RefError("pool output size %d (input %s, kernel %s)" % (out, sizes, kernel))
        outs.append(out)
        extra.append(max(0, (out - 1) * s + eff - (size + pb + pe)))
    return kernel, strides, dil, begin, end, outs, extra


def crop(y, outs):
    for dim, out in enumerate(outs):
        y = y.narrow(dim + 2, 0, out)
    return y


def op_maxpool(ctx, i, a):
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise RefError("MaxPool's Indices output is not supported")
    x = i[0]
    kernel, strides, dil, begin, end, outs, extra = pool_geometry(a, x, 1)
    # pad with -inf explicitly: handles asymmetric pads and ceil_mode alike
    xp = pad_spatial(x, begin, [e + x_ for e, x_ in zip(end, extra)], float("-inf"))
    fn = spatial_fn("max", len(kernel))
    return [crop(fn(xp, kernel, strides, 0, dil), outs)]


def op_avgpool(ctx, i, a):
    x = i[0]
    kernel, strides, dil, begin, end, outs, extra = pool_geometry(a, x, 1)
    if any(d != 1 for d in dil):
        raise RefError("AveragePool dilations %s" % dil)
    fn = spatial_fn("avg", len(kernel))
    ends = [e + x_ for e, x_ in zip(end, extra)]
    # mean over every full window of the zero-padded input, divided by the
    # fraction of the window that counts: pads count with count_include_pad,
    # the ceil_mode overhang never does (as torch)
    mean = fn(pad_spatial(x, begin, ends), kernel, strides, 0)
    ones = torch.ones([1, 1] + list(x.shape[2:]), dtype=x.dtype)
    if a.get("count_include_pad", 0):
        mask = pad_spatial(pad_spatial(ones, begin, end, 1.0), [0] * len(extra), extra)
    else:
        mask = pad_spatial(ones, begin, ends)
    frac = fn(mask, kernel, strides, 0)
    return [crop(mean / frac, outs)]


def op_batchnorm(ctx, i, a):
    if a.get("training_mode", 0):
        raise RefError("BatchNormalization training_mode=1")
    if any(o for o in ctx.node.output[1:]):
        raise RefError("BatchNormalization with training outputs")
    x, scale, bias, mean, var = i[:5]
    return [F.batch_norm(x, mean, var, scale, bias, False, 0.0, a.get("epsilon", 1e-5))]


def softmax_like(fn):
    def run(ctx, i, a):
        x = i[0]
        if ctx.opset >= 13:
            return [fn(x, dim=a.get("axis", -1))]
        # before 13: coerce to 2-D [prod(dims < axis), prod(dims >= axis)]
        axis = a.get("axis", 1)
        axis = axis + x.dim() if axis < 0 else axis
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        return [fn(x.reshape(rows, -1), dim=1).reshape(x.shape)]
    return run


def binary(fn):
    return lambda ctx, i, a: [fn(i[0], i[1])]


def op_div(ctx, i, a):
    x, y = i[0], i[1]
    if not x.is_floating_point() and not y.is_floating_point():
        return [torch.div(x, y, rounding_mode="trunc")]  # integer Div truncates
    return [x / y]


def op_sum(ctx, i, a):
    y = i[0]
    for t in i[1:]:
        y = y + t
    return [y]


def op_flatten(ctx, i, a):
    x = i[0]
    axis = a.get("axis", 1)
    axis = axis + x.dim() if axis < 0 else axis
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return [x.reshape(rows, -1) if x.numel() else x.reshape(rows, int(np.prod(x.shape[axis:])))]


def op_reshape(ctx, i, a):
    x = i[0]
    shape = list(a["shape"]) if ctx.opset < 5 else ints_of(i[1])
    if not a.get("allowzero", 0):
        # 0 copies the input's dim at that index
        shape = [x.shape[k] if d == 0 else d for k, d in enumerate(shape)]
    if shape.count(-1) > 1:
        raise RefError("Reshape shape %s has more than one -1" % shape)
    return [x.reshape(shape)]


def op_transpose(ctx, i, a):
    x = i[0]
    perm = a.get("perm", list(range(x.dim() - 1, -1, -1)))
    return [x.permute(*perm)]


def op_dropout(ctx, i, a):
    if ctx.opset >= 12 and len(i) > 2 and i[2] is not None and bool(scalar_of(i[2])):
        raise RefError("Dropout training_mode=true")
    outs = [i[0]]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        outs.append(torch.ones_like(i[0], dtype=torch.bool))
    return outs


def op_constant(ctx, i, a):
    if "value" in a:
        return [a["value"]]
    if "value_float" in a:
        return [torch.tensor(a["value_float"], dtype=torch.float32)]
    if "value_floats" in a:
        return [torch.tensor(a["value_floats"], dtype=torch.float32)]
    if "value_int" in a:
        return [torch.tensor(a["value_int"], dtype=torch.int64)]
    if "value_ints" in a:
        return [torch.tensor(a["value_ints"], dtype=torch.int64)]
    raise RefError("Constant with attribute(s) %s" % sorted(a))


def op_clip(ctx, i, a):
    x = i[0]
    if ctx.opset < 11:
        lo, hi = a.get("min"), a.get("max")
    else:
        lo = scalar_of(i[1]) if len(i) > 1 and i[1] is not None else None
        hi = scalar_of(i[2]) if len(i) > 2 and i[2] is not None else None
    if lo is None and hi is None:
        return [x.clone()]
    return [torch.clamp(x, lo, hi)]


def op_shape(ctx, i, a):
    shape = list(i[0].shape)
    start, end = a.get("start", 0), a.get("end", len(shape))
    return [torch.tensor(shape[start:end], dtype=torch.int64)]


def op_gather(ctx, i, a):
    data, idx = i[0], i[1].to(torch.int64)
    axis = a.get("axis", 0)
    axis = axis + data.dim() if axis < 0 else axis
    idx = torch.where(idx < 0, idx + data.shape[axis], idx)  # negative indices count from the end
    y = torch.index_select(data, axis, idx.reshape(-1))
    return [y.reshape(list(data.shape[:axis]) + list(idx.shape) + list(data.shape[axis + 1:]))]


def axes_of(ctx, i, a):
    if ctx.opset < 13:
        return a.get("axes")
    return ints_of(i[1]) if len(i) > 1 and i[1] is not None else None


def op_unsqueeze(ctx, i, a):
    x = i[0]
    axes = axes_of(ctx, i, a)
    rank = x.dim() + len(axes)
    shape = list(x.shape)
    for ax in sorted(ax + rank if ax < 0 else ax for ax in axes):
        shape.insert(ax, 1)
    return [x.reshape(shape)]


def op_squeeze(ctx, i, a):
    x = i[0]
    axes = axes_of(ctx, i, a)
    if axes is None:
        axes = [k for k, d in enumerate(x.shape) if d == 1]
    axes = {ax + x.dim() if ax < 0 else ax for ax in axes}
    if any(x.shape[ax] != 1 for ax in axes):
        raise RefError("Squeeze of a dim that is not 1 (shape %s, axes %s)" % (list(x.shape), sorted(axes)))
    return [x.reshape([d for k, d in enumerate(x.shape) if k not in axes])]


def op_pad(ctx, i, a):
    x = i[0]
    mode = a.get("mode", "constant")
    if ctx.opset < 11:
        pads, value = list(a["pads"]), a.get("value", 0.0)
    else:
        pads = ints_of(i[1])
        value = scalar_of(i[2]) if len(i) > 2 and i[2] is not None else 0.0
        if len(i) > 3 and i[3] is not None:
            raise RefError("Pad axes input")
    n = x.dim()
    spec = []
    for d in reversed(range(n)):
        spec += [pads[d], pads[d + n]]
    while len(spec) > 2 and spec[-2:] == [0, 0]:
        spec = spec[:-2]  # torch's reflect/replicate only pad trailing dims
    torch_mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}[mode]
    if torch_mode == "constant":
        return [F.pad(x, spec, mode="constant", value=value)]
    return [F.pad(x, spec, mode=torch_mode)]


CAST_TYPES = {
    onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.FLOAT16: torch.float16, onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.INT32: torch.int32, onnx.TensorProto.INT8: torch.int8,
    onnx.TensorProto.UINT8: torch.uint8, onnx.TensorProto.BOOL: torch.bool,
}


def op_cast(ctx, i, a):
    if a["to"] not in CAST_TYPES:
        raise RefError("Cast to type %d" % a["to"])
    return [i[0].to(CAST_TYPES[a["to"]])]


OPS = {
    "Gemm": op_gemm,
    "MatMul": binary(torch.matmul),
    "Conv": op_conv,
    "MaxPool": op_maxpool,
    "AveragePool": op_avgpool,
    "GlobalAveragePool": lambda c, i, a: [i[0].mean(dim=tuple(range(2, i[0].dim())), keepdim=True)],
    "GlobalMaxPool": lambda c, i, a: [i[0].amax(dim=tuple(range(2, i[0].dim())), keepdim=True)],
    "BatchNormalization": op_batchnorm,
    "Relu": lambda c, i, a: [torch.relu(i[0])],
    "Sigmoid": lambda c, i, a: [torch.sigmoid(i[0])],
    "Tanh": lambda c, i, a: [torch.tanh(i[0])],
    "Softmax": softmax_like(torch.softmax),
    "LogSoftmax": softmax_like(torch.log_softmax),
    "Add": binary(torch.add),
    "Sub": binary(torch.sub),
    "Mul": binary(torch.mul),
    "Div": op_div,
    "Sum": op_sum,
    "Concat": lambda c, i, a: [torch.cat(i, dim=a["axis"])],
    "Flatten": op_flatten,
    "Reshape": op_reshape,
    "Transpose": op_transpose,
    "Identity": lambda c, i, a: [i[0]],
    "Dropout": op_dropout,
    "Constant": op_constant,
    "Clip": op_clip,
    "Shape": op_shape,
    "Gather": op_gather,
    "Unsqueeze": op_unsqueeze,
    "Squeeze": op_squeeze,
    "Pad": op_pad,
    "Cast": op_cast,
}


class Context:
    def __init__(self, opset):
        self.opset = opset
        self.node = None


def default_opset(model):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise RefError("the model imports no default-domain opset")


def run_model(model, feeds):
    """Runs the graph; returns (every value by name, graph output names)."""
    ctx = Context(default_opset(model))
    g = model.graph
    values = {}
    for init in g.initializer:
        try:
            values[init.name] = to_torch(onnx.numpy_helper.to_array(init))
        except Exception as e:  # e.g. raw_data shorter than dims say
            raise RefError("initializer %r (dims %s): %s" % (init.name, list(init.dims), e))
    inits = set(values)
    for vi in g.input:
        if vi.name in feeds:
            values[vi.name] = feeds[vi.name]
        elif vi.name not in inits:
            raise RefError("no --input for graph input %r" % vi.name)
    unknown = set(feeds) - {vi.name for vi in g.input}
    if unknown:
        raise RefError("--input names no graph input: %s" % sorted(unknown))

    with torch.no_grad():
        for k, node in enumerate(g.node):
            where = "node %d %r (%s, opset %d)" % (k, node.name, node.op_type, ctx.opset)
            if node.domain not in ("", "ai.onnx"):
                raise RefError("unsupported op domain %r: %s" % (node.domain, where))
            fn = OPS.get(node.op_type)
            if fn is None:
                raise RefError("unsupported op %r: %s" % (node.op_type, where))
            ins = []
            for name in node.input:
                if name == "":
                    ins.append(None)
                elif name not in values:
                    raise RefError("%s reads %r, which nothing defined before" % (where, name))
                else:
                    ins.append(values[name])
            while ins and ins[-1] is None:
                ins.pop()
            attrs = {at.name: attr_value(at) for at in node.attribute}
            ctx.node = node
            try:
                outs = fn(ctx, ins, attrs)
            except RefError as e:
                raise RefError("%s: %s" % (where, e))
            except Exception as e:  # torch's own complaint, with the node that caused it
                raise RefError("%s failed: %s: %s" % (where, type(e).__name__, e))
            for name, t in zip(node.output, outs):
                if name:
                    values[name] = t
    for vi in g.output:
        if vi.name not in values:
            raise RefError("graph output %r is never computed" % vi.name)
    return values, [vi.name for vi in g.output]


# --- files and comparison ----------------------------------------------------

def parse_dims(text):
    try:
        dims = [int(d) for d in text.split(",")] if text else []
    except ValueError:
        raise RefError("bad dims %r" % text)
    if any(d < 0 for d in dims):
        raise RefError("negative dim in %r" % text)
    return dims


def read_f32(path, dims=None):
    data = np.fromfile(path, dtype="<f4")
    if dims is not None:
        want = int(np.prod(dims, dtype=np.int64))
        if data.size != want:
            raise RefError("%s holds %d floats, dims %s need %d" % (path, data.size, dims, want))
        data = data.reshape(dims)
    return torch.from_numpy(data.astype(np.float32))


def parse_spec(spec, need_dims):
    """NAME=FILE[:D0,D1,...]; the name ends at the first '=', dims follow the last ':'."""
    if "=" not in spec:
        raise RefError("%r: expected NAME=FILE%s" % (spec, ":D0,D1,..." if need_dims else ""))
    name, rest = spec.split("=", 1)
    dims = None
    if ":" in rest:
        path, d = rest.rsplit(":", 1)
        if re.fullmatch(r"[0-9,]*", d):
            rest, dims = path, parse_dims(d)
    if need_dims and dims is None:
        raise RefError("%r: expected NAME=FILE:D0,D1,..." % spec)
    return name, rest, dims


def max_rel_err(got, want):
    """max |got - want| / max |want|; the absolute error when want is all 0."""
    got = got.detach().to(torch.float64).reshape(-1)
    want = want.detach().to(torch.float64).reshape(-1)
    if got.numel() == 0:
        return 0.0
    if torch.isnan(got).any() or torch.isnan(want).any():
        return float("nan")
    scale = want.abs().max().item()
    err = (got - want).abs().max().item()
    return err / scale if scale > 0 else err


def compare(name, got, want, want_dims, tol):
    """Prints one line; returns True when it passes."""
    if want_dims is not None and list(got.shape) != list(want_dims):
        print("%s shape mismatch: got %s, want %s" % (name, list(got.shape), want_dims))
        return False
    if got.numel() != want.numel():
        print("%s element count mismatch: got %d, want %d" % (name, got.numel(), want.numel()))
        return False
    err = max_rel_err(got, want)
    ok = not math.isnan(err) and err <= tol
    print("%s max_rel_err=%.3g%s" % (name, err, "" if ok else "  FAIL (tol %g)" % tol))
    return ok


def safe_name(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def write_outputs(out_dir, values, output_names):
    os.makedirs(out_dir, exist_ok=True)
    for name in output_names:
        t = values[name]
        base = os.path.join(out_dir, safe_name(name))
        t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tofile(base + ".f32")
        with open(base + ".dims", "w") as f:
            f.write(",".join(str(d) for d in t.shape) + "\n")


def load_model(path):
    try:
        return onnx.load(path)
    except Exception as e:
        raise RefError("%s: cannot load: %s" % (path, e))


def run_cli(args):
    model = load_model(args.model)
    feeds = {}
    for spec in args.input:
        name, path, dims = parse_spec(spec, need_dims=True)
        feeds[name] = read_f32(path, dims)
    t0 = time.perf_counter()
    values, outputs = run_model(model, feeds)
    elapsed = time.perf_counter() - t0
    if args.write_outputs:
        write_outputs(args.write_outputs, values, outputs)
    ok = True
    for spec in args.compare:
        name, path, dims = parse_spec(spec, need_dims=False)
        if name not in values:
            raise RefError("--compare %r: the graph computes no value of that name" % name)
        ok &= compare(name, values[name], read_f32(path), dims, args.tol)
    if args.verbose:
        print("ran in %.3fs" % elapsed)
    return 0 if ok else 1


def parse_manifest(path):
    """[(name, onnx_file, opset, [(blob, dims, file)], [(blob, dims, file)])]"""
    models = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields == ["end"]:
                continue
            kind = fields[0]
            if kind == "model" and len(fields) == 4:
                models.append((fields[1], fields[2], int(fields[3]), [], []))
            elif kind in ("input", "output") and len(fields) == 4 and models:
                models[-1][3 if kind == "input" else 4].append(
                    (fields[1], parse_dims(fields[2]), fields[3]))
            else:
                raise RefError("%s:%d: cannot parse %r" % (path, lineno, line.rstrip("\n")))
    return models


def check_manifest(path, tol):
    base = os.path.dirname(os.path.abspath(path))
    failed = 0
    models = parse_manifest(path)
    for name, onnx_file, opset, inputs, outputs in models:
        t0 = time.perf_counter()
        try:
            model = load_model(os.path.join(base, onnx_file))
            if opset and default_opset(model) != opset:  # 0: not checked
                raise RefError("opset_import %d, manifest says %d" % (default_opset(model), opset))
            feeds = {b: read_f32(os.path.join(base, f), d) for b, d, f in inputs}
            values, graph_outputs = run_model(model, feeds)
            if graph_outputs != [b for b, _, _ in outputs]:
                raise RefError("graph outputs %s, manifest lists %s"
                               % (graph_outputs, [b for b, _, _ in outputs]))
            worst, problems = 0.0, []
            for blob, dims, f in outputs:
                got, want = values[blob], read_f32(os.path.join(base, f), dims)
                if list(got.shape) != dims:
                    problems.append("%s shape %s, want %s" % (blob, list(got.shape), dims))
                    continue
                err = max_rel_err(got, want)
                if math.isnan(err) or err > tol:
                    problems.append("%s max_rel_err=%.3g" % (blob, err))
                worst = err if math.isnan(err) else max(worst, err)
        except RefError as e:
            worst, problems = float("nan"), [str(e)]
        status = "ok" if not problems else "FAIL: " + "; ".join(problems)
        print("%-14s opset %-2d max_rel_err=%.3g  %.2fs  %s"
              % (name, opset, worst, time.perf_counter() - t0, status))
        failed += bool(problems)
    print("%d/%d models within %g" % (len(models) - failed, len(models), tol))
    return 1 if failed or not models else 0


# --- self-test: semantics torch's exports do not reach ------------------------

def self_test():
    """Small helper-built graphs against numpy written from the spec."""
    from onnx import TensorProto as TP, helper as h
    rng = np.random.RandomState(7)
    failures = []

    def check(label, nodes, opset, feeds, want, inits=()):
        ins = [h.make_tensor_value_info(n, TP.FLOAT, v.shape) for n, v in feeds.items()]
        outs = [h.make_tensor_value_info("y", TP.FLOAT, want.shape)]
        graph = h.make_graph(nodes, label, ins, outs, list(inits))
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
        try:
            onnx.checker.check_model(model)
            values, _ = run_model(model, {n: torch.from_numpy(v) for n, v in feeds.items()})
            got = values["y"].numpy()
            ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5)
            why = "" if ok else " (got shape %s, want %s)" % (got.shape, want.shape)
        except Exception as e:
            ok, why = False, " (%s: %s)" % (type(e).__name__, e)
        print("self-test %-40s %s%s" % (label, "ok" if ok else "FAIL", why))
        if not ok:
            failures.append(label)

    def np_softmax(x, axis):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    x4 = rng.randn(2, 3, 4, 5).astype(np.float32)
    # opset 11: axis=1 means softmax over the flattened [3*4*5] of each batch row
    want = np_softmax(x4.reshape(2, -1), 1).reshape(x4.shape)
    check("softmax opset11 axis1 coerced", [h.make_node("Softmax", ["x"], ["y"], axis=1)], 11,
          {"x": x4}, want)
    check("logsoftmax opset9 default axis", [h.make_node("LogSoftmax", ["x"], ["y"])], 9,
          {"x": x4}, np.log(want))
    check("softmax opset13 axis1", [h.make_node("Softmax", ["x"], ["y"], axis=1)], 13,
          {"x": x4}, np_softmax(x4, 1))

    def np_conv_valid(x, w, stride):
        n, c, hh, ww = x.shape
        o, _, kh, kw = w.shape
        oh, ow = (hh - kh) // stride + 1, (ww - kw) // stride + 1
        y = np.zeros((n, o, oh, ow), np.float64)
        for r in range(oh):
            for s in range(ow):
                patch = x[:, :, r * stride:r * stride + kh, s * stride:s * stride + kw]
                y[:, :, r, s] = np.einsum("nchw,ochw->no", patch, w)
        return y.astype(np.float32)

    x = rng.randn(1, 2, 6, 7).astype(np.float32)
    w = rng.randn(3, 2, 3, 3).astype(np.float32)
    winit = onnx.numpy_helper.from_array(w, "w")
    # in 6x7, k3, s2: out 3x4, total pad 1 (rows) and 2 (cols)
    for mode, rows, cols in (("SAME_UPPER", (0, 1), (1, 1)), ("SAME_LOWER", (1, 0), (1, 1))):
        xp = np.pad(x, ((0, 0), (0, 0), rows, cols))
        check("conv %s stride2" % mode,
              [h.make_node("Conv", ["x", "w"], ["y"], auto_pad=mode, strides=[2, 2])], 13,
              {"x": x}, np_conv_valid(xp, w, 2), [winit])
    xp = np.pad(x, ((0, 0), (0, 0), (2, 0), (1, 3)))
    check("conv asymmetric pads", [h.make_node("Conv", ["x", "w"], ["y"], pads=[2, 1, 0, 3])],
          11, {"x": x}, np_conv_valid(xp, w, 1), [winit])

    # AveragePool, pads [t=1,l=0,b=0,r=2], k2 s2, in 5x5 -> 3x3
    x = rng.randn(1, 1, 5, 5).astype(np.float32)
    for cip in (0, 1):
        want = np.zeros((1, 1, 3, 3), np.float32)
        for r in range(3):
            for s in range(3):
                vals = [x[0, 0, i, j] for i in range(2 * r - 1, 2 * r + 1)
                        for j in range(2 * s, 2 * s + 2) if 0 <= i < 5 and 0 <= j < 5]
                want[0, 0, r, s] = sum(vals) / (4 if cip else len(vals))
        check("avgpool asym pads count_include_pad=%d" % cip,
              [h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                           pads=[1, 0, 0, 2], count_include_pad=cip)], 11, {"x": x}, want)
    # MaxPool ceil_mode: in 5, k2 s2 -> 3 windows, the last one only [4]
    want = np.zeros((1, 1, 3, 3), np.float32)
    for r in range(3):
        for s in range(3):
            want[0, 0, r, s] = x[0, 0, 2 * r:2 * r + 2, 2 * s:2 * s + 2].max()
    check("maxpool ceil_mode", [h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                            strides=[2, 2], ceil_mode=1)], 11, {"x": x}, want)

    x = rng.randn(2, 3, 4).astype(np.float32)
    shape = onnx.numpy_helper.from_array(np.array([0, -1], np.int64), "s")
    check("reshape 0 -1", [h.make_node("Reshape", ["x", "s"], ["y"])], 13, {"x": x},
          x.reshape(2, 12), [shape])
    z = np.zeros((0, 3), np.float32)
    shape = onnx.numpy_helper.from_array(np.array([3, 0], np.int64), "s")
    check("reshape allowzero", [h.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)], 14,
          {"x": z}, z.reshape(3, 0), [shape])
    check("clip opset6 attributes", [h.make_node("Clip", ["x"], ["y"], min=-0.3, max=0.4)], 6,
          {"x": x}, np.clip(x, -0.3, 0.4))
    lo = onnx.numpy_helper.from_array(np.array(-0.2, np.float32), "lo")
    check("clip opset13 min only", [h.make_node("Clip", ["x", "lo"], ["y"])], 13, {"x": x},
          np.maximum(x, -0.2), [lo])
    a = rng.randn(4, 3).astype(np.float32)
    b = rng.randn(4, 5).astype(np.float32)
    binit = onnx.numpy_helper.from_array(b, "b")
    check("gemm transA no C", [h.make_node("Gemm", ["a", "b"], ["y"], transA=1, alpha=0.5)], 13,
          {"a": a}, 0.5 * a.T @ b, [binit])
    idx = onnx.numpy_helper.from_array(np.array([[-1, 0]], np.int64), "i")
    check("gather axis1 negative", [h.make_node("Gather", ["x", "i"], ["y"], axis=1)], 13,
          {"x": x}, x[:, [[2, 0]], :], [idx])
    check("unsqueeze/squeeze opset11",
          [h.make_node("Unsqueeze", ["x"], ["u"], axes=[0, -1]),
           h.make_node("Squeeze", ["u"], ["y"], axes=[0])], 11, {"x": x}, x[..., None])
    axes = onnx.numpy_helper.from_array(np.array([1], np.int64), "ax")
    check("unsqueeze opset13 input axes", [h.make_node("Unsqueeze", ["x", "ax"], ["y"])], 13,
          {"x": x}, x[:, None], [axes])
    check("flatten axis0", [h.make_node("Flatten", ["x"], ["y"], axis=0)], 13, {"x": x},
          x.reshape(1, -1))
    check("shape gather concat reshape",
          [h.make_node("Shape", ["x"], ["s"]),
           h.make_node("Constant", [], ["k"], value_ints=[0]),
           h.make_node("Gather", ["s", "k"], ["g"]),
           h.make_node("Constant", [], ["m"], value_ints=[-1]),
           h.make_node("Concat", ["g", "m"], ["t"], axis=0),
           h.make_node("Reshape", ["x", "t"], ["y"])], 13, {"x": x}, x.reshape(2, 12))
    if failures:
        print("self-test: %d failed" % len(failures))
        return 1
    print("self-test: all passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="MODEL.onnx")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE.f32:D0,D1,...")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=FILE.f32[:D0,...]")
    ap.add_argument("--tol", type=float, default=1e-4, help="max relative error (default %(default)g)")
    ap.add_argument("--write-outputs", metavar="DIR")
    ap.add_argument("--check-manifest", metavar="MANIFEST")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)  # nothing here is random; fixed anyway
    try:
        if args.self_test:
            return self_test()
        if args.check_manifest:
            return check_manifest(args.check_manifest, args.tol)
        if not args.model:
            ap.error("MODEL.onnx, --check-manifest or --self-test is required")
        return run_cli(args)
    except RefError as e:
        print("onnx_reference.py: error: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
