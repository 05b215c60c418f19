#!/usr/bin/env bash
# dp through its bindings vs C: the extra cost per call of a 1-op net, and the
# training throughput of the Fashion-MNIST MLP, in C, Go, Rust and Java.
#
#   bench/bindings/run_bindings_bench.sh [--build DIR] [--runs R] [--iters N] [--steps S]
#
# DIR is a configured and built dp build directory (default <repo>/build-cpu:
# libdp in DIR/capi, DIR/meson-uninstalled/dp-uninstalled.pc, and for Java
# DIR/bindings/java/dp.jar and libdp_jni.so). The four bench programs are
# built into DIR/bench-bindings (nothing is written to the source tree):
#   c/bindings_bench.c      cc, against DIR's libdp (pkg-config dp)
#   go/main.go              go build, module dp.dev/dp from bindings/go (offline)
#   rust/                   /usr/bin/cargo build --release --offline (Debian's toolchain)
#   java/BindingsBench.java javac against DIR/bindings/java/dp.jar
# Each takes `call ITERS` or `train STEPS MODEL` and prints one line in the
# same format (see c/bindings_bench.c for what is timed).
#
# Every program runs pinned to CPU 0 (taskset -c 0) with OPENBLAS_NUM_THREADS=1
# and dp's defaults otherwise (simple executor). R separate runs (default 3);
# in each, the four languages run `call` and then `train` in a rotating order
# (run 1: C Go Rust Java, run 2: Go Rust Java C, ...). The summary gives, per
# language, the median over the runs and min..max, the difference (per call)
# or ratio (training) against C's median, and the targets:
#   extra per run() call vs C: <= 500 ns for Go and Rust, <= 1000 ns for Java
#   training samples/s: within 3% of C (ratio binding/C >= 0.97)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build-cpu"
runs=3
iters=1000000
steps=300
usage() { echo "usage: $0 [--build DIR] [--runs R] [--iters N] [--steps S]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) [[ $# -ge 2 ]] || usage; build=$(cd "$2" && pwd); shift 2 ;;
    --runs) [[ $# -ge 2 ]] || usage; runs=$2; shift 2 ;;
    --iters) [[ $# -ge 2 ]] || usage; iters=$2; shift 2 ;;
    --steps) [[ $# -ge 2 ]] || usage; steps=$2; shift 2 ;;
    *) usage ;;
  esac
done
cmdline="bench/bindings/run_bindings_bench.sh --build $build --runs $runs --iters $iters --steps $steps"

model="$root/bench/nets/mlp_sgd.json"
out="$build/bench-bindings"
jdir="$build/bindings/java"
mkdir -p "$out"

# shellcheck source=bench/bench_lib.sh
source "$root/bench/bench_lib.sh"

export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$build/capi:$jdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! pkg-config --exists dp; then
  echo "error: no dp-uninstalled.pc in $build/meson-uninstalled: is $build a configured dp build?" >&2
  exit 1
fi
if [[ ! -e "$build/capi/libdp.so" ]]; then
  echo "error: $build/capi/libdp.so not found: build it (ninja -C $build)" >&2
  exit 1
fi
if [[ ! -f "$jdir/dp.jar" || ! -f "$jdir/libdp_jni.so" ]]; then
  echo "error: $jdir has no dp.jar/libdp_jni.so: ninja -C $build bindings/java/dp.jar bindings/java/libdp_jni.so" \
       "(Meson configured with a JDK)" >&2
  exit 1
fi

# --- build ------------------------------------------------------------------
echo "# building into $out" >&2
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -O2 -Wall -Wextra -o "$out/bindings_bench_c" "$here/c/bindings_bench.c" \
  $(pkg-config --cflags --libs dp) -Wl,-rpath,"$build/capi"

(cd "$here/go" &&
  GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GO111MODULE=on \
  go build -o "$out/bindings_bench_go" .)

had_lock=0
[[ -e "$here/rust/Cargo.lock" ]] && had_lock=1
(cd "$here/rust" &&
  PATH="/usr/bin:$PATH" RUSTC=/usr/bin/rustc CARGO_TARGET_DIR="$out/rust-target" \
  CARGO_HOME="${CARGO_HOME:-$out/cargo-home}" \
  /usr/bin/cargo build --release --offline --quiet)
[[ $had_lock -eq 0 ]] && rm -f "$here/rust/Cargo.lock"  # generated (no external crates)
cp "$out/rust-target/release/bindings_bench" "$out/bindings_bench_rust"

rm -rf "$out/java-classes"
mkdir -p "$out/java-classes"
javac -encoding UTF-8 -d "$out/java-classes" -cp "$jdir/dp.jar" "$here/java/BindingsBench.java"

# --- run --------------------------------------------------------------------
langs=(c go rust java)
run_prog() {  # lang args...: the program pinned to CPU 0, one BLAS thread
  local lang=$1; shift
  case "$lang" in
    java) OPENBLAS_NUM_THREADS=1 taskset -c 0 \
            java -cp "$jdir/dp.jar:$out/java-classes" -Djava.library.path="$jdir" BindingsBench "$@" ;;
    *) OPENBLAS_NUM_THREADS=1 taskset -c 0 "$out/bindings_bench_$lang" "$@" ;;
  esac
}

declare -A res  # "lang/key" -> newline-separated values
add() { res[$1]+="$2"$'\n'; }
val() { printf '%s' "${res[$1]}" | median; }
range() { printf '%s' "${res[$1]}" | sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s..%s", lo, hi}'; }

machine_header
echo "# $(${CC:-cc} --version | head -1); $(go version); $(/usr/bin/rustc --version); java $(java -version 2>&1 | head -1 | cut -d'"' -f2)"
echo "# $runs runs; call: $iters run() calls + $((iters / 4)) feed+run+fetch rounds per program;" \
     "train: $steps timed steps (20 warm-up), batch 256, $(basename "$model"); taskset -c 0, OPENBLAS_NUM_THREADS=1"
echo "# uptime:$(uptime | sed 's/.*load average/ load average/')"

for r in $(seq 1 "$runs"); do
  echo "run $r/$runs"
  order=()
  for i in 0 1 2 3; do order+=("${langs[$(((r - 1 + i) % 4))]}"); done
  for lang in "${order[@]}"; do
    line=$(run_prog "$lang" call "$iters")
    echo "  $line"
    add "$lang/run_ns" "$(echo "$line" | field run_ns)"
    add "$lang/round_ns" "$(echo "$line" | field round_ns)"
  done
  for lang in "${order[@]}"; do
    line=$(run_prog "$lang" train "$steps" "$model")
    echo "  $line"
    add "$lang/sps" "$(echo "$line" | field samples_per_s)"
    add "$lang/loss" "$(echo "$line" | field last_loss)"
  done
done

# --- summary ----------------------------------------------------------------
echo
echo "Per call: a 1-op net (Copy of float32[16], simple executor), ns per call, median of $runs runs (min..max)"
printf '%-5s %22s %12s %10s %-7s %24s %12s\n' lang "run() ns" "extra vs C" target met "feed+run+fetch ns" "extra vs C"
c_run=$(val c/run_ns)
c_round=$(val c/round_ns)
for lang in "${langs[@]}"; do
  m=$(val "$lang/run_ns"); rm_=$(val "$lang/round_ns")
  case $lang in go|rust) target=500 ;; java) target=1000 ;; *) target="" ;; esac
  awk -v l="$lang" -v m="$m" -v rg="$(range "$lang/run_ns")" -v c="$c_run" -v t="$target" \
      -v rm="$rm_" -v rr="$(range "$lang/round_ns")" -v cr="$c_round" 'BEGIN {
    if (l == "c") { ex = "-"; tg = "-"; met = "-"; exr = "-" }
    else { ex = sprintf("%+.1f", m - c); tg = "<= " t; met = (m - c <= t) ? "met" : "MISSED"; exr = sprintf("%+.1f", rm - cr) }
    printf "%-5s %22s %12s %10s %-7s %24s %12s\n", l, sprintf("%.1f (%s)", m, rg), ex, tg, met,
           sprintf("%.1f (%s)", rm, rr), exr }'
done

echo
echo "Training: Fashion-MNIST MLP 784-512-512-10, momentum SGD, batch 256, samples/s, median of $runs runs (min..max)"
printf '%-5s %28s %14s %10s %-7s %10s\n' lang "samples/s" "binding/C" target met last_loss
c_sps=$(val c/sps)
c_loss=$(printf '%s' "${res[c/loss]}" | head -1)
same_loss=1
for lang in "${langs[@]}"; do
  m=$(val "$lang/sps")
  loss=$(printf '%s' "${res[$lang/loss]}" | head -1)
  [[ "$(printf '%s' "${res[$lang/loss]}" | sort -u | wc -l)" -eq 1 && "$loss" == "$c_loss" ]] || same_loss=0
  awk -v l="$lang" -v m="$m" -v rg="$(range "$lang/sps")" -v c="$c_sps" -v loss="$loss" 'BEGIN {
    if (l == "c") { ra = "-"; tg = "-"; met = "-" }
    else { ra = sprintf("%.3f", m / c); tg = ">= 0.97"; met = (m / c >= 0.97) ? "met" : "MISSED" }
    printf "%-5s %28s %14s %10s %-7s %10s\n", l, sprintf("%.1f (%s)", m, rg), ra, tg, met, loss }'
done
if [[ $same_loss -eq 1 ]]; then
  echo "# every language ended with the same loss in every run (same data, same steps)"
else
  echo "# WARNING: the final losses differ between languages or runs"
fi
echo
echo "# reproduce: $cmdline"
