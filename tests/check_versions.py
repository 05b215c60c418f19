#!/usr/bin/env python3
"""meson.build's version is the only one: every other place that states dp's
version agrees with it.

  check_versions.py VERSION SOURCE_ROOT BUILD_ROOT LIBDP

dp.h's DP_VERSION_MAJOR/MINOR/PATCH, the Rust crate (bindings/rust/Cargo.toml),
the Debian package (debian/changelog's newest entry), the generated pkg-config
file and CMake version file, the jar's manifest (where the Java binding is
built), and dp_version() of the built library."""
import ctypes
import pathlib
import re
import sys
import zipfile

version, src, build, lib = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]), sys.argv[4]
found = {}

header = (src / "include/dp/dp.h").read_text()
parts = [re.search(rf"#define DP_VERSION_{p} (\d+)", header) for p in ("MAJOR", "MINOR", "PATCH")]
found["include/dp/dp.h (DP_VERSION_*)"] = ".".join(m[1] for m in parts) if all(parts) else None

cargo = re.search(r'^version\s*=\s*"([^"]+)"', (src / "bindings/rust/Cargo.toml").read_text(), re.M)
found["bindings/rust/Cargo.toml"] = cargo and cargo[1]

changelog = re.match(r"dp \(([^)]+)\)", (src / "debian/changelog").read_text())
found["debian/changelog"] = changelog and changelog[1]

pc = re.search(r"^Version: (\S+)", (build / "meson-private/dp.pc").read_text(), re.M)
found["dp.pc"] = pc and pc[1]

cmake = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', (build / "meson-private/dpConfigVersion.cmake").read_text())
found["dpConfigVersion.cmake"] = cmake and cmake[1]

jar = build / "bindings/java/dp.jar"
if jar.exists():
    manifest = zipfile.ZipFile(jar).read("META-INF/MANIFEST.MF").decode()
    m = re.search(r"^Implementation-Version: (\S+)", manifest, re.M)
    found["dp.jar (Implementation-Version)"] = m and m[1]

dp = ctypes.CDLL(lib)
dp.dp_version.restype = ctypes.c_char_p
found["dp_version()"] = dp.dp_version().decode()

bad = {where: v for where, v in found.items() if v != version}
for where, v in found.items():
    print(f"{where}: {v}")
for where, v in bad.items():
    print(f"{where} says {v}, meson.build says {version}", file=sys.stderr)
sys.exit(1 if bad else 0)
