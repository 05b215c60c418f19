#!/usr/bin/env python3
"""The ninja targets that a selection of a build directory's tests needs: the
tests' executables and dependencies, plus every installed target (the package
suite installs them). Prints them relative to the build directory, one line.

  tools/test_targets.py BUILD_DIR [--suite S ...] [--test NAME ...]

tools/test.sh builds only these in the CUDA configuration, whose other tests
(the CPU-only suites) run in build-cpu and under the sanitizers."""
import json
import os
import subprocess
import sys


def introspect(build, what):
    return json.loads(subprocess.check_output(["meson", "introspect", what, build]))


def main(argv):
    build = os.path.abspath(argv[1])
    suites, names, i = set(), set(), 2
    while i + 1 < len(argv):
        (suites if argv[i] == "--suite" else names).add(argv[i + 1])
        i += 2
    targets = introspect(build, "--targets")
    by_id = {t["id"]: t for t in targets}
    by_file = {f: t for t in targets for f in t["filename"]}
    wanted = [t for t in targets if t.get("installed")]
    for test in introspect(build, "--tests"):
        in_suite = any(s.split(":")[-1] in suites for s in test["suite"])
        if not (in_suite or test["name"] in names):
            continue
        wanted += [by_id[d] for d in test.get("depends", []) if d in by_id]
        if test["cmd"] and test["cmd"][0] in by_file:
            wanted.append(by_file[test["cmd"][0]])
    out = sorted({os.path.relpath(f, build) for t in wanted for f in t["filename"]})
    print(" ".join(out))


if __name__ == "__main__":
    main(sys.argv)
