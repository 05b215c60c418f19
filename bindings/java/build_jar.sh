#!/bin/sh
# Compiles the org.dp sources and packs them: build_jar.sh JAVAC JAR OUT.jar OUTDIR WORKDIR SOURCES...
# javac -h also writes org_dp_Native.h into OUTDIR, which the JNI glue
# includes, so that a native signature that drifts from Native.java fails
# to compile instead of failing at run time.
set -eu
javac=$1 jar=$2 out=$3 outdir=$4 work=$5
shift 5
rm -rf "$work/classes"
mkdir -p "$work/classes"
"$javac" -encoding UTF-8 --release 11 -Xlint:all -Werror -h "$outdir" -d "$work/classes" "$@"
"$jar" --create --file "$out" -C "$work/classes" .
