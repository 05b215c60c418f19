#!/usr/bin/env python3
"""Writes a C++ header that holds a text file as a string constant.

Used at build time to compile schemas/net.fbs into libdp, so that JSON nets
are parsed with exactly the schema the binary reader was generated from.
"""
import sys

src, dst, symbol = sys.argv[1], sys.argv[2], sys.argv[3]
with open(src, encoding="utf-8") as f:
    text = f.read()
body = ", ".join(str(b) for b in text.encode("utf-8"))
with open(dst, "w", encoding="utf-8") as f:
    f.write("// Generated from %s by tools/embed_text.py. Do not edit.\n" % src)
    f.write("#pragma once\n#include <string_view>\n")
    f.write("namespace dp::generated {\n")
    f.write("inline constexpr char %s_data[] = {%s, 0};\n" % (symbol, body))
    f.write("inline constexpr std::string_view %s(%s_data, sizeof(%s_data) - 1);\n"
            % (symbol, symbol, symbol))
    f.write("}  // namespace dp::generated\n")
