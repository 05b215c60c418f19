#!/usr/bin/env python3
"""Writes a C++ header that holds schema text as a string constant.

Used at build time to compile schemas/*.fbs into libdp, so that JSON is
parsed with exactly the schema the binary reader was generated from.

    embed_text.py OUTPUT SYMBOL FILE [FILE...]

Several files are concatenated into one self-contained schema: `include`
lines are dropped (the included files are listed before), and so are the
root_type / file_identifier / file_extension lines of every file but the last.
"""
import re
import sys

dst, symbol, srcs = sys.argv[1], sys.argv[2], sys.argv[3:]
parts = []
for n, src in enumerate(srcs):
    with open(src, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    last = n == len(srcs) - 1
    keep = []
    for line in lines:
        if re.match(r"\s*include\s+\"", line):
            continue
        if not last and re.match(r"\s*(root_type|file_identifier|file_extension)\b", line):
            continue
        keep.append(line)
    parts.append("".join(keep))
text = "\n".join(parts)
body = ", ".join(str(b) for b in text.encode("utf-8"))
with open(dst, "w", encoding="utf-8") as f:
    f.write("// Generated from %s by tools/embed_text.py. Do not edit.\n" % " + ".join(srcs))
    f.write("#pragma once\n#include <string_view>\n")
    f.write("namespace dp::generated {\n")
    f.write("inline constexpr char %s_data[] = {%s, 0};\n" % (symbol, body))
    f.write("inline constexpr std::string_view %s(%s_data, sizeof(%s_data) - 1);\n"
            % (symbol, symbol, symbol))
    f.write("}  // namespace dp::generated\n")
