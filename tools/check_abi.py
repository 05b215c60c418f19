#!/usr/bin/env python3
"""The ABI guard: libdp.so.0 against the baseline in abi/ (docs/RELEASING.md).

    tools/check_abi.py LIB                 compare LIB with the baseline
    tools/check_abi.py --update LIB        write LIB's ABI as the baseline
    options: --baseline DIR (default abi/), --header FILE (default include/dp/dp.h)

LIB must carry debug info for the C API's translation units (meson option
abi_debuginfo, or any -g build). The ABI is three files:
  - libdp.abi: abidw's description of the exported functions, their symbol
    versions and every type they reach that dp.h defines (struct layouts,
    typedefs, callbacks);
  - constants.txt: the value of every enumerator and integer macro of dp.h
    (its enums are anonymous, typed int32_t in the structs, so abidw cannot
    see them), except the DP_VERSION_* of the release;
  - prototypes.txt: the header's declaration of every dp_* function
    (compiled after the current header: C refuses an incompatible
    redeclaration).

Checking: identical to the baseline (abidiff finds nothing, the constants
agree) passes. Any difference fails, saying whether it is incompatible (a
removed or changed function or symbol version, a changed struct member, a
struct that changed size other than an option struct, one that starts with
struct_size, growing at its end, a changed or removed constant) or compatible
(additions), which the same change must record with --update, with
debian/libdp0.symbols. --update refuses an incompatible change unless the
soname differs from the baseline's (a new major ABI).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ABIDW_FLAGS = ["--exported-interfaces-only", "--drop-private-types", "--no-show-locs", "--no-corpus-path"]


def abidw(lib, header_dir, out):
    subprocess.run(["abidw", "--headers-dir", header_dir, *ABIDW_FLAGS, "--out-file", out, lib], check=True)


# ---- constants -------------------------------------------------------------------

def constant_names(header_text):
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    names = []
    for body in re.findall(r"\benum\b[^{;]*\{(.*?)\}", text, flags=re.S):
        for item in body.split(","):
            m = re.match(r"\s*([A-Za-z_]\w*)", item)
            if m:
                names.append(m[1])
    for name, value in re.findall(r"^\s*#\s*define\s+(DP_\w+)[ \t]+([^\n]+)$", text, flags=re.M):
        if re.fullmatch(r"[\s()0-9xXa-fA-FuUlL+\-*|<>A-Z_]+", value) and not name.endswith("_"):
            names.append(name)
    return sorted({n for n in names if not n.startswith("DP_VERSION")})


def constants(header, cc="cc"):
    """name -> value, for every enumerator and integer macro of the header."""
    names = constant_names(open(header).read())
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "constants.c")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include "%s"\nint main(void) {\n' % os.path.abspath(header))
            for n in names:
                f.write('  printf("%%s %%lld\\n", "%s", (long long)(%s));\n' % (n, n))
            f.write("  return 0;\n}\n")
        exe = os.path.join(tmp, "constants")
        subprocess.run([cc, "-std=c11", "-o", exe, src], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return dict(line.split() for line in out.splitlines())


def read_constants(path):
    return dict(line.split() for line in open(path) if line.strip())


# ---- prototypes ------------------------------------------------------------------
# abidw describes a function from its DWARF, and misses one whose only
# out-of-line instance is a concrete copy of an inlined abstract one (gcc 12:
# dp_argdef_name). The header's prototypes cover every function: the
# baseline's declarations, compiled after the current header, must redeclare
# each function compatibly (C rejects any other redeclaration).

def prototypes(header_text):
    """name -> declaration (whitespace normalised, marker macros dropped), for
    every dp_* function the header declares."""
    text = re.sub(r"/\*.*?\*/", " ", header_text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    text = re.sub(r'extern\s*"C"\s*\{', " ", text)  # (its closing brace ends the text)
    decls, depth, start = {}, 0, 0
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            stmt = " ".join(text[start:i].split())
            start = i + 1
            if "{" in stmt or "}" in stmt or stmt.startswith("typedef"):
                continue
            stmt = re.sub(r"^(?:(?:DP_[A-Z_]+|extern)\s+)+", "", stmt)
            m = re.match(r"[^()]*?\b(dp_\w+)\s*\(.*\)$", stmt)
            if m:
                decls[m[1]] = stmt
    return decls


def read_prototypes(path):
    return {m[1]: line.strip() for line in open(path) if (m := re.match(r"[^()]*?\b(dp_\w+)\s*\(", line))}


def incompatible_prototypes(header, old, cc="cc"):
    """The baseline declarations (name -> text) the header now declares
    otherwise: each compiled after the header, on its own, must compile."""
    with tempfile.TemporaryDirectory() as tmp:
        def compiles(decls):
            src = os.path.join(tmp, "prototypes.c")
            with open(src, "w") as f:
                f.write('#include "%s"\n' % os.path.abspath(header))
                f.writelines("%s;\n" % d for d in decls)
            return subprocess.run([cc, "-std=c11", "-fsyntax-only", src], capture_output=True).returncode == 0
        if compiles(old.values()):
            return []
        return [name for name, decl in sorted(old.items()) if not compiles([decl])]


# ---- the abidw description, reduced to what compatibility depends on -------------

class Abi:
    def __init__(self, path):
        root = ET.parse(path).getroot()
        self.soname = root.get("soname", "")
        self.types = {}
        for el in root.iter():
            if el.get("id") and el.tag != "abi-instr":
                # A declaration-only duplicate never replaces a definition.
                if el.get("id") in self.types and el.get("is-declaration-only") == "yes":
                    continue
                self.types[el.get("id")] = el
        self.symbols = {}
        for sym in root.iter("elf-symbol"):
            if sym.get("type") == "func-type" or sym.get("type") is None:
                self.symbols[sym.get("name")] = sym.get("version", "")
        self.functions = {}
        for fn in root.iter("function-decl"):
            if fn.get("elf-symbol-id"):
                self.functions[fn.get("name")] = self.signature(fn)
        self.structs = {}
        for el in root.iter("class-decl"):
            if el.get("name", "").startswith("dp_") and el.get("is-declaration-only") != "yes":
                members = []
                for dm in el.findall("data-member"):
                    var = dm.find("var-decl")
                    members.append((var.get("name"), int(dm.get("layout-offset-in-bits", "0")),
                                    self.canon(var.get("type-id"))))
                self.structs[el.get("name")] = (int(el.get("size-in-bits", "0")), members)

    def signature(self, fn):
        params = [self.canon(p.get("type-id")) if p.get("type-id") else "..." for p in fn.findall("parameter")]
        ret = fn.find("return")
        return "%s(%s)" % (self.canon(ret.get("type-id")) if ret is not None else "void", ", ".join(params))

    def canon(self, type_id, depth=0):
        """A type as a string that differs whenever its ABI differs (structs
        by name: their layouts are compared on their own)."""
        el = self.types.get(type_id)
        if el is None or depth > 20:
            return "?" if el is None else "..."
        tag, name = el.tag, el.get("name", "")
        if tag == "type-decl":
            return "%s:%s" % (name, el.get("size-in-bits", ""))
        if tag in ("class-decl", "union-decl"):
            return ("union " if tag == "union-decl" else "struct ") + name
        if tag == "enum-decl":
            return "enum " + name
        if tag == "typedef-decl":
            under = self.types.get(el.get("type-id"))
            if under is not None and under.tag in ("class-decl", "union-decl"):
                return name
            return "%s=%s" % (name, self.canon(el.get("type-id"), depth + 1))
        if tag == "pointer-type-def":
            return self.canon(el.get("type-id"), depth + 1) + "*"
        if tag == "qualified-type-def":
            quals = " ".join(q for q in ("const", "volatile", "restrict") if el.get(q) == "yes")
            return "%s %s" % (quals, self.canon(el.get("type-id"), depth + 1))
        if tag == "array-type-def":
            dims = [s.get("length", "?") for s in el.findall("subrange")]
            return self.canon(el.get("element-type-id"), depth + 1) + "".join("[%s]" % d for d in dims)
        if tag == "function-type":
            return "fn " + self.signature(el)
        return "%s %s" % (tag, name)


def compare(old, new, old_consts, new_consts, old_protos, new_protos, header):
    """(incompatible changes, compatible changes), each a list of lines."""
    bad, good = [], []
    for name in sorted(set(old_protos) - set(new_protos)):
        bad.append("%s is no longer declared in %s" % (name, os.path.basename(header)))
    for name in incompatible_prototypes(header, {n: d for n, d in old_protos.items() if n in new_protos}):
        bad.append("%s changed: %s -> %s" % (name, old_protos[name], new_protos[name]))
    good += ["declared %s" % new_protos[n] for n in sorted(set(new_protos) - set(old_protos))]
    for name, version in old.symbols.items():
        if name not in new.symbols:
            bad.append("removed function %s" % name)
        elif new.symbols[name] != version:
            bad.append("%s moved from symbol version %s to %s" % (name, version, new.symbols[name]))
    good += ["added function %s (%s)" % (n, new.symbols[n]) for n in sorted(set(new.symbols) - set(old.symbols))]
    for name, sig in old.functions.items():
        if name in new.functions and new.functions[name] != sig:
            bad.append("%s changed: %s -> %s" % (name, sig, new.functions[name]))
    for name, (size, members) in old.structs.items():
        if name not in new.structs:
            # Unreachable now (its functions went, reported above) or made opaque.
            bad.append("struct %s is no longer defined by an exported interface" % name)
            continue
        new_size, new_members = new.structs[name]
        by_name = {m[0]: m for m in new_members}
        for m in members:
            now = by_name.get(m[0])
            if now is None:
                bad.append("struct %s: member %s removed" % (name, m[0]))
            elif now != m:
                bad.append("struct %s: member %s was %s at bit %d, is %s at bit %d" % (name, m[0], m[2], m[1],
                                                                                     now[2], now[1]))
        option = bool(members) and members[0][0] == "struct_size" and members[0][1] == 0
        added = [m for m in new_members if m[0] not in {o[0] for o in members}]
        if new_size < size:
            bad.append("struct %s shrank from %d to %d bits" % (name, size, new_size))
        elif new_size > size and not added:
            if not any(b.startswith("struct %s:" % name) for b in bad):
                bad.append("struct %s grew from %d to %d bits without a new member" % (name, size, new_size))
        elif new_size > size or added:
            if not option:
                bad.append("struct %s grew from %d to %d bits, and it is no option struct (struct_size first): "
                           "callers allocate it" % (name, size, new_size))
            elif any(m[1] < size for m in added):
                bad.append("struct %s: a member was inserted before its old end" % name)
            else:
                good.append("struct %s grew at its end: %s" % (name, ", ".join(m[0] for m in added)))
    good += ["struct %s added" % n for n in sorted(set(new.structs) - set(old.structs))]
    for name, value in old_consts.items():
        if name not in new_consts:
            bad.append("constant %s removed" % name)
        elif new_consts[name] != value:
            bad.append("constant %s changed from %s to %s" % (name, value, new_consts[name]))
    good += ["constant %s = %s added" % (n, new_consts[n]) for n in sorted(set(new_consts) - set(old_consts))]
    return bad, good


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lib")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--baseline", default=os.path.join(ROOT, "abi"))
    ap.add_argument("--header", default=os.path.join(ROOT, "include", "dp", "dp.h"))
    args = ap.parse_args()
    base_abi = os.path.join(args.baseline, "libdp.abi")
    base_consts = os.path.join(args.baseline, "constants.txt")
    base_protos = os.path.join(args.baseline, "prototypes.txt")
    with tempfile.TemporaryDirectory() as tmp:
        cur_abi = os.path.join(tmp, "libdp.abi")
        abidw(args.lib, os.path.dirname(os.path.abspath(args.header)), cur_abi)
        consts = constants(args.header)
        protos = prototypes(open(args.header).read())
        new = Abi(cur_abi)
        if not new.functions:
            sys.exit("check_abi: %s has no debug info for its exported functions (build it with -g or "
                     "-Dabi_debuginfo=true)" % args.lib)
        have_base = all(os.path.exists(p) for p in (base_abi, base_consts, base_protos))
        if have_base:
            old = Abi(base_abi)
            bad, good = compare(old, new, read_constants(base_consts), consts, read_prototypes(base_protos), protos,
                                args.header)
            # abidiff's own report, for the reader: it exits 0 only when it finds nothing.
            diff = subprocess.run(["abidiff", base_abi, cur_abi], capture_output=True, text=True)
            same = diff.returncode == 0 and not bad and not good
        if args.update:
            if have_base and bad and old.soname == new.soname:
                print("\n".join("  incompatible: " + b for b in bad))
                sys.exit("check_abi: refusing to record an incompatible ABI under the same soname (%s): bump "
                         "the soname (meson.build's abi version) in the same change" % new.soname)
            os.makedirs(args.baseline, exist_ok=True)
            shutil.copyfile(cur_abi, base_abi)
            with open(base_consts, "w") as f:
                f.writelines("%s %s\n" % kv for kv in sorted(consts.items()))
            with open(base_protos, "w") as f:
                f.writelines("%s\n" % d for _, d in sorted(protos.items()))
            print("check_abi: baseline written to %s (%d functions, %d structs, %d constants, %d prototypes, "
                  "soname %s)" % (args.baseline, len(new.functions), len(new.structs), len(consts), len(protos),
                                  new.soname))
            return
        if not have_base:
            sys.exit("check_abi: no baseline in %s (tools/check_abi.py --update LIB writes it)" % args.baseline)
        if same:
            print("check_abi: ok: %s matches the baseline (%d functions, %d structs, %d constants, %d prototypes, "
                  "soname %s)" % (args.lib, len(new.functions), len(new.structs), len(consts), len(protos),
                                  new.soname))
            return
        print(diff.stdout.rstrip())
        for b in bad:
            print("  incompatible: " + b)
        for g in good:
            print("  compatible: " + g)
        if bad and old.soname == new.soname:
            sys.exit("check_abi: INCOMPATIBLE ABI change under soname %s: undo it, or bump the soname and "
                     "record the new baseline (--update) in the same change" % new.soname)
        if bad:
            sys.exit("check_abi: the soname changed (%s -> %s): record the new baseline with --update" %
                     (old.soname, new.soname))
        if not good:
            sys.exit("check_abi: abidiff reports a change the guard does not classify; read it above")
        sys.exit("check_abi: compatible additions: record them in the same change (tools/check_abi.py --update "
                 "LIB, and debian/libdp0.symbols)")


if __name__ == "__main__":
    main()
