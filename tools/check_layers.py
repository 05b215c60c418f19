#!/usr/bin/env python3
"""Fails when a folder of src/ includes from a floor above its own.

The engine is built in floors; each may include its own and lower floors,
never a higher one. docs/ARCHITECTURE.md draws them. A new folder must be
given a floor here before it can be built on.

Usage: tools/check_layers.py [repo root]   (exit 0: clean, 1: violations)
"""
import pathlib
import re
import sys

# Lowest first. capi/ (the C API, outside src/) sits on top of all of them.
FLOORS = [
    "core",      # tensors, devices, contexts, workspaces, events, errors
    "data",      # readers of training data into tensors
    "graph",     # net definitions, formats, dependency graph, rewrites
    "ops",       # schemas, operators, CPU kernels, gradient makers, net checks
    "cuda",      # the CUDA device backend: runtime, contexts, events, allocator, module table
    "ops/cuda",  # CUDA kernels of the ops (beside their CPU twins in ops/cpu)
    "comm",      # communicators and collective ops (in-process, NCCL)
    "cuda_module",  # libdp_cuda.so's entry: kernels and CUDA libraries in one table for libdp
    "checkpoint",  # checkpoint files: format, atomic writes, verified loads
    "exec",      # nets and executors
    "autodiff",  # gradient nets
    "model",     # models and their training nets
    "onnx_io",   # ONNX models in and out of dp models
    "parallel",  # data-parallel rewriting of models
]
RANK = {name: i for i, name in enumerate(FLOORS)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SUFFIXES = {".h", ".cc", ".cu", ".cuh"}


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    src = root / "src"
    errors = []
    checked = 0
    for path in sorted(src.rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(src)
        # The deepest floor the path lies in ("ops/cuda" before "ops").
        floor = rel.parts[0]
        for depth in range(len(rel.parts) - 1, 1, -1):
            candidate = "/".join(rel.parts[:depth])
            if candidate in RANK:
                floor = candidate
                break
        if floor not in RANK:
            errors.append(f"src/{rel}: folder '{floor}' has no floor in tools/check_layers.py")
            continue
        checked += 1
        text = path.read_text(encoding="utf-8")
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            if target.startswith("../") or "/../" in target:
                errors.append(f"src/{rel}:{line}: relative include \"{target}\"")
                continue
            parts = target.split("/")
            top = parts[0]
            for depth in range(len(parts) - 1, 1, -1):
                if "/".join(parts[:depth]) in RANK:
                    top = "/".join(parts[:depth])
                    break
            if "/" in target and top in RANK and RANK[top] > RANK[floor]:
                errors.append(f"src/{rel}:{line}: {floor} includes \"{target}\" from the higher floor {top}")
    for e in errors:
        print(e)
    print(f"layers: {checked} files in {len(FLOORS)} floors, {len(errors)} upward includes")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
