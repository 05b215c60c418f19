#!/bin/sh
# Compiles the org.dp sources and packs them: build_jar.sh JAVAC JAR VERSION OUT.jar OUTDIR WORKDIR SOURCES...
# The manifest's Implementation-Version is VERSION (meson.build's).
# javac -h also writes org_dp_Native.h into OUTDIR, which the JNI glue
# includes, so that a native signature that drifts from Native.java fails
# to compile instead of failing at run time.
set -eu
javac=$1 jar=$2 version=$3 out=$4 outdir=$5 work=$6
shift 6
rm -rf "$work/classes"
mkdir -p "$work/classes"
"$javac" -encoding UTF-8 --release 11 -Xlint:all -Werror -h "$outdir" -d "$work/classes" "$@"
printf 'Implementation-Title: dp\nImplementation-Version: %s\n' "$version" >"$work/manifest.txt"
"$jar" --create --file "$out" --manifest "$work/manifest.txt" -C "$work/classes" .
