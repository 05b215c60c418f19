#!/usr/bin/env python3
"""The exported functions agree everywhere they are listed.

  check_symbols.py DP_H LIBDP_MAP SYMBOLS_FILE LIBDP_SO PROJECT_VERSION

dp.h's DP_API declarations, the version script's nodes (capi/libdp.map), the
Debian symbols file (debian/libdp0.symbols) and the library's dynamic symbol
table must name the same functions, each in the same version node DP_<major>.<minor>,
the symbols file giving <major>.<minor>.0 as the version that introduced it.
No node may be newer than the project's version, and the nodes chain oldest
first. What the library exports outside dp_* is tests/check_exports.sh's job.
"""
import re
import subprocess
import sys


def version_key(v):
    return tuple(int(p) for p in v.split("."))


def header_functions(path):
    text = open(path, encoding="utf-8").read()
    return set(re.findall(r"DP_API[^;(]*?\b(dp_\w+)\s*\(", text))


def map_nodes(path):
    """{function: node} and the nodes in file order with what each inherits."""
    text = re.sub(r"/\*.*?\*/", "", open(path, encoding="utf-8").read(), flags=re.S)
    where, order = {}, []
    for m in re.finditer(r"(DP_[\d.]+)\s*\{(.*?)\}\s*(DP_[\d.]+)?\s*;", text, flags=re.S):
        node, body, parent = m[1], m[2], m[3]
        order.append((node, parent))
        globals_part = body.split("local:")[0].replace("global:", "")
        for name in re.findall(r"([A-Za-z_]\w*)\s*;", globals_part):
            if name in where:
                sys.exit(f"libdp.map: {name} is in both {where[name]} and {node}")
            where[name] = node
    return where, order


def symbols_file(path):
    """{name@node: minimum version} from a dpkg symbols file."""
    entries = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^ (\S+)@(\S+) (\S+)$", line.rstrip("\n"))
        if m:
            entries[m[1]] = (m[2], m[3])
    return entries


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    funcs, nodes = {}, set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, sym = parts[1], parts[2]
        name, _, version = sym.partition("@")
        version = version.lstrip("@")
        if kind == "A" and name.startswith("DP_"):
            nodes.add(name)
        elif name.startswith("dp_"):
            funcs[name] = version
    return funcs, nodes


def main():
    dp_h, map_path, symbols_path, lib, project_version = sys.argv[1:6]
    major, minor = project_version.split(".")[:2]
    current = f"{major}.{minor}"
    errors = []

    declared = header_functions(dp_h)
    in_map, order = map_nodes(map_path)
    in_symbols = symbols_file(symbols_path)
    in_lib, lib_nodes = exported(lib)

    for name in sorted(declared - set(in_map)):
        errors.append(f"{name}: declared in dp.h but in no node of capi/libdp.map "
                      f"(new functions go in DP_{current}, and in debian/libdp0.symbols as "
                      f"' {name}@DP_{current} {current}.0')")
    for name in sorted(set(in_map) - declared):
        errors.append(f"{name}: in capi/libdp.map but not declared DP_API in dp.h")

    functions = {k: v for k, v in in_symbols.items() if not k.startswith("DP_")}
    for name in sorted(set(in_map) | set(functions)):
        node = in_map.get(name)
        if name not in functions:
            errors.append(f"{name}: in {node} but missing from debian/libdp0.symbols")
            continue
        sym_node, minver = functions[name]
        if node is None:
            errors.append(f"{name}: in debian/libdp0.symbols but in no node of capi/libdp.map")
        elif sym_node != node:
            errors.append(f"{name}: node {node} in libdp.map but {sym_node} in debian/libdp0.symbols")
        elif minver != node[len("DP_"):] + ".0":
            errors.append(f"{name}: introduced by {node}, so its version is {node[3:]}.0, not {minver}")

    nodes = [n for n, _ in order]
    for i, (node, parent) in enumerate(order):
        if version_key(node[3:]) > version_key(current):
            errors.append(f"libdp.map: node {node} is newer than the project version {project_version}")
        expected_parent = nodes[i - 1] if i else None
        if parent != expected_parent:
            errors.append(f"libdp.map: node {node} must inherit {expected_parent or 'nothing'}, not {parent}")
        if i and version_key(node[3:]) <= version_key(nodes[i - 1][3:]):
            errors.append(f"libdp.map: nodes out of order ({nodes[i - 1]} before {node})")
        if in_symbols.get(node, (None,))[0] != node:
            errors.append(f"debian/libdp0.symbols: the node itself is missing (' {node}@{node} {node[3:]}.0')")
    if lib_nodes != set(nodes):
        errors.append(f"{lib}: defines version nodes {sorted(lib_nodes)}, libdp.map {nodes}")

    for name, node in sorted(in_map.items()):
        if name not in in_lib:
            errors.append(f"{name}: in libdp.map but {lib} does not export it")
        elif in_lib[name] != node:
            errors.append(f"{name}: exported as version '{in_lib[name]}', libdp.map says {node}")
    for name in sorted(set(in_lib) - set(in_map)):
        errors.append(f"{name}: exported by {lib} but in no node of libdp.map")

    if errors:
        print("\n".join(errors))
        return 1
    print(f"{len(in_map)} functions in {len(nodes)} version nodes ({', '.join(nodes)}): "
          "dp.h, libdp.map, debian/libdp0.symbols and the library agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
