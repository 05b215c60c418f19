#!/usr/bin/env python3
"""Writes a copy of a model file whose forward net's FC ops run on a kernel
engine (e.g. CUBLASLT: cuBLASLt with the bias and relu in the GEMM's epilogue),
for the GPU benchmark and acceptance runs.

    tools/with_fc_engine.py MODEL.json OUT.json ENGINE
"""
import json
import sys


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    src, dst, engine = sys.argv[1:]
    with open(src, encoding="utf-8") as f:
        model = json.load(f)
    fcs = 0
    for op in model["forward_net"]["ops"]:
        if op["type"] == "FC":
            op["engine"] = engine
            fcs += 1
    if fcs == 0:
        print(f"{src}: no FC op in its forward net", file=sys.stderr)
        return 1
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(model, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
