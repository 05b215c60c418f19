#!/usr/bin/env python3
"""Writes small ONNX models, built with onnx.helper (no torch), as seed inputs
for dp's ONNX-import libFuzzer target.

    make_fuzz_seeds.py OUT_DIR [--run-reference]

Valid seeds (each passes onnx.checker.check_model and stays under 4 KiB)
cover the ops dp maps: Gemm, MatMul, Conv, Relu, MaxPool, AveragePool,
GlobalAveragePool, BatchNormalization, Softmax, LogSoftmax, Reshape with a
constant shape, Concat, Transpose, Clip in both forms, Dropout, Identity,
Flatten, Add/Sub/Mul/Div, Sigmoid, Tanh, Constant nodes; initializers stored
as float_data and as raw_data; opsets 9 to 17. Malformed seeds (names start
with malformed_): truncated bytes, a node reading an undefined name, an
initializer whose raw_data is shorter than its dims say; onnx must reject
each (parse, checker, or reading the initializers). File names say what each seed is; they have no extension.
The output is byte-for-byte the same on every run (fixed seeds).

--run-reference also runs every valid seed through onnx_reference.py (needs
torch), to show that each is a model that can actually be evaluated.
"""
import argparse
import os
import sys
import time

try:
    import numpy as np
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper
except ImportError as e:
    sys.exit("make_fuzz_seeds.py: %s (needs python3-onnx and python3-numpy; this is %s)"
             % (e, sys.executable))

MAX_BYTES = 4096


def rand(rng, *shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def raw_init(name, array):
    """An initializer in raw_data (numpy_helper writes raw little-endian bytes)."""
    return numpy_helper.from_array(np.asarray(array), name)


def float_data_init(name, array):
    """An initializer in the repeated float_data field instead of raw_data."""
    array = np.asarray(array, dtype=np.float32)
    return h.make_tensor(name, TP.FLOAT, array.shape, array.reshape(-1).tolist(), raw=False)


def int64_init(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def model(name, nodes, inputs, outputs, inits, opset):
    graph = h.make_graph(nodes, name,
                         [h.make_tensor_value_info(n, TP.FLOAT, s) for n, s in inputs],
                         [h.make_tensor_value_info(n, TP.FLOAT, s) for n, s in outputs],
                         inits)
    # a fixed IR version (not the installed onnx's newest) keeps the bytes stable
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)],
                     producer_name="dp make_fuzz_seeds.py", ir_version=7 if opset <= 12 else 8)
    return m


def valid_seeds(rng):
    """(file name, ModelProto) for each valid seed."""
    seeds = []

    # Gemm, weights in float_data, transB=1 plus a second Gemm without transB
    seeds.append(("gemm_transb_float_data_opset13", model(
        "gemm", [h.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
                 h.make_node("Relu", ["h"], ["r"]),
                 h.make_node("Gemm", ["r", "w2", "b2"], ["y"], alpha=0.5, beta=2.0)],
        [("x", [2, 8])], [("y", [2, 4])],
        [float_data_init("w1", rand(rng, 6, 8)), float_data_init("b1", rand(rng, 6)),
         float_data_init("w2", rand(rng, 6, 4)), float_data_init("b2", rand(rng, 4))], 13)))

    # Conv + Relu + MaxPool, raw_data weights
    seeds.append(("conv_relu_maxpool_raw_data_opset13", model(
        "conv", [h.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1], strides=[1, 1]),
                 h.make_node("Relu", ["c"], ["r"]),
                 h.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        [("x", [1, 3, 8, 8])], [("y", [1, 4, 4, 4])],
        [raw_init("w", rand(rng, 4, 3, 3, 3)), raw_init("b", rand(rng, 4))], 13)))

    # Conv with group and dilation, MaxPool ceil_mode, AveragePool both pad counts
    seeds.append(("conv_group_dilation_pools_opset11", model(
        "pools", [h.make_node("Conv", ["x", "w"], ["c"], group=2, dilations=[2, 2],
                              pads=[2, 2, 2, 2]),
                  h.make_node("MaxPool", ["c"], ["m"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], ceil_mode=1),
                  h.make_node("AveragePool", ["c"], ["a"], kernel_shape=[3, 3],
                              strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1),
                  h.make_node("AveragePool", ["c"], ["b"], kernel_shape=[2, 2],
                              strides=[2, 2], pads=[1, 1, 1, 1]),
                  h.make_node("GlobalAveragePool", ["m"], ["y"])],
        [("x", [1, 4, 7, 7])], [("y", [1, 4, 1, 1]), ("a", [1, 4, 4, 4]), ("b", [1, 4, 4, 4])],
        [raw_init("w", rand(rng, 4, 2, 3, 3))], 11)))

    # BatchNormalization, opset 9
    seeds.append(("batchnorm_conv_opset9", model(
        "bn", [h.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
               h.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["y"],
                           epsilon=1e-3)],
        [("x", [2, 3, 4, 4])], [("y", [2, 3, 4, 4])],
        [raw_init("w", rand(rng, 3, 3, 1, 1)), raw_init("s", rng.uniform(0.5, 1.5, 3)
                                                        .astype(np.float32)),
         raw_init("bb", rand(rng, 3)), raw_init("m", rand(rng, 3)),
         raw_init("v", rng.uniform(0.5, 1.5, 3).astype(np.float32))], 9)))

    # Softmax / LogSoftmax, opset 17 (single-axis semantics), non-last axis too
    seeds.append(("softmax_logsoftmax_opset17", model(
        "softmax", [h.make_node("Softmax", ["x"], ["s"], axis=1),
                    h.make_node("LogSoftmax", ["s"], ["y"], axis=-1)],
        [("x", [2, 3, 4, 5])], [("y", [2, 3, 4, 5])], [], 17)))

    # Softmax at opset 9: axis=1 on 4-D means the flattened [3*4*5]
    seeds.append(("softmax_coerced_2d_opset9", model(
        "softmax9", [h.make_node("Softmax", ["x"], ["y"], axis=1)],
        [("x", [2, 3, 4, 5])], [("y", [2, 3, 4, 5])], [], 9)))

    # Reshape with a shape from a Constant node (0 and -1), then Flatten, Transpose
    seeds.append(("reshape_constant_node_transpose_opset13", model(
        "reshape", [h.make_node("Constant", [], ["shape"],
                                value=numpy_helper.from_array(np.array([0, -1, 2], np.int64))),
                    h.make_node("Reshape", ["x", "shape"], ["r"]),
                    h.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
                    h.make_node("Flatten", ["t"], ["y"], axis=1)],
        [("x", [2, 3, 4])], [("y", [2, 12])], [], 13)))

    # Concat of an input with an initializer, Reshape shape as an initializer
    seeds.append(("concat_reshape_initializer_opset11", model(
        "concat", [h.make_node("Concat", ["x", "k"], ["c"], axis=1),
                   h.make_node("Reshape", ["c", "shape"], ["y"])],
        [("x", [2, 3])], [("y", [2, 5, 1])],
        [raw_init("k", rand(rng, 2, 2)), int64_init("shape", [2, -1, 1])], 11)))

    # Clip both ways: attributes at opset 9 ...
    seeds.append(("clip_attributes_relu6_opset9", model(
        "clip9", [h.make_node("Clip", ["x"], ["r6"], min=0.0, max=6.0),
                  h.make_node("Clip", ["r6"], ["y"], min=-0.5, max=0.7)],
        [("x", [2, 8])], [("y", [2, 8])], [], 9)))

    # ... and inputs from opset 11 (one empty: max only)
    seeds.append(("clip_inputs_opset13", model(
        "clip13", [h.make_node("Clip", ["x", "lo", "hi"], ["c"]),
                   h.make_node("Clip", ["c", "", "hi6"], ["y"])],
        [("x", [2, 8])], [("y", [2, 8])],
        [raw_init("lo", np.array(-0.5, np.float32)), raw_init("hi", np.array(0.7, np.float32)),
         raw_init("hi6", np.array(6.0, np.float32))], 13)))

    # MatMul with a 2-D weight, broadcast arithmetic against Constant nodes
    seeds.append(("matmul_broadcast_constants_opset13", model(
        "arith", [h.make_node("MatMul", ["x", "w"], ["m"]),
                  h.make_node("Constant", [], ["k1"], value_float=0.25),
                  h.make_node("Constant", [], ["k2"], value_floats=[1.0, 2.0, 3.0, 4.0]),
                  h.make_node("Add", ["m", "k1"], ["a"]),
                  h.make_node("Sub", ["a", "k2"], ["s"]),
                  h.make_node("Mul", ["s", "row"], ["p"]),
                  h.make_node("Div", ["p", "k2"], ["d"]),
                  h.make_node("Sigmoid", ["d"], ["g"]),
                  h.make_node("Tanh", ["g"], ["y"])],
        [("x", [2, 3, 5])], [("y", [2, 3, 4])],
        [raw_init("w", rand(rng, 5, 4)), raw_init("row", rand(rng, 3, 1))], 13)))

    # Gemm + Dropout (ratio input, opset 12+) + Identity + Softmax
    seeds.append(("gemm_dropout_identity_softmax_opset12", model(
        "dropout", [h.make_node("Gemm", ["x", "w"], ["g"], transB=1),
                    h.make_node("Dropout", ["g", "ratio"], ["d"]),
                    h.make_node("Identity", ["d"], ["i"]),
                    h.make_node("Softmax", ["i"], ["y"], axis=1)],
        [("x", [3, 4])], [("y", [3, 5])],
        [float_data_init("w", rand(rng, 5, 4)), raw_init("ratio", np.array(0.5, np.float32))],
        12)))
    return seeds


def malformed_seeds(valid):
    """(file name, bytes) for each malformed seed."""
    seeds = []
    conv = dict(valid)["conv_relu_maxpool_raw_data_opset13"].SerializeToString()
    # cut at half: a length-delimited field (the graph) overruns the end
    seeds.append(("malformed_truncated_conv_opset13", conv[:len(conv) // 2]))

    m = onnx.ModelProto()
    m.CopyFrom(dict(valid)["gemm_transb_float_data_opset13"])
    m.graph.node[1].input[0] = "undefined_blob"
    seeds.append(("malformed_undefined_input_gemm_opset13", m.SerializeToString()))

    m = onnx.ModelProto()
    m.CopyFrom(dict(valid)["conv_relu_maxpool_raw_data_opset13"])
    w = m.graph.initializer[0]  # dims [4,3,3,3]: 432 bytes; keep 100
    w.raw_data = w.raw_data[:100]
    seeds.append(("malformed_short_raw_data_conv_opset13", m.SerializeToString()))
    return seeds


def onnx_rejects(data):
    """True when onnx cannot parse it, its checker fails it, or an initializer
    cannot be read (the checker of onnx 1.12 does not compare raw_data's
    length with dims; numpy_helper does)."""
    try:
        m = onnx.load_model_from_string(data)
        onnx.checker.check_model(m)
        for init in m.graph.initializer:
            numpy_helper.to_array(init)
    except Exception:  # DecodeError, ValidationError, ValueError: all rejections
        return True
    return False


def run_reference(path, proto):
    """Evaluates one seed with onnx_reference.py on seeded random inputs."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    import onnx_reference as ref
    import torch
    gen = torch.Generator().manual_seed(0)
    feeds = {}
    for vi in proto.graph.input:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = torch.randn(*dims, generator=gen)
    values, outputs = ref.run_model(proto, feeds)
    for vi in proto.graph.output:
        want = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if list(values[vi.name].shape) != want:
            raise RuntimeError("%s: output %s has shape %s, declared %s"
                               % (path, vi.name, list(values[vi.name].shape), want))
    return {n: list(values[n].shape) for n in outputs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--run-reference", action="store_true",
                    help="also evaluate every valid seed with onnx_reference.py")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rng = np.random.default_rng(1234)
    os.makedirs(args.out_dir, exist_ok=True)

    valid = valid_seeds(rng)
    for name, proto in valid:
        onnx.checker.check_model(proto, full_check=True)  # full_check: shape inference too
        data = proto.SerializeToString()
        if len(data) > MAX_BYTES:
            raise RuntimeError("%s is %d bytes, over %d" % (name, len(data), MAX_BYTES))
        with open(os.path.join(args.out_dir, name), "wb") as f:
            f.write(data)
        line = "%-44s %5d bytes" % (name, len(data))
        if args.run_reference:
            line += "  outputs %s" % run_reference(name, proto)
        print(line)
    for name, data in malformed_seeds(valid):
        if not onnx_rejects(data):
            raise RuntimeError("%s: onnx accepts it" % name)
        with open(os.path.join(args.out_dir, name), "wb") as f:
            f.write(data)
        print("%-44s %5d bytes (onnx rejects it)" % (name, len(data)))
    print("seeds in %.2fs -> %s" % (time.perf_counter() - t0, args.out_dir))


if __name__ == "__main__":
    main()
