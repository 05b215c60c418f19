# shellcheck shell=bash
# Shell helpers shared by the bench runners (sourced, not run).

# Debian's torch is installed for the system interpreter; install it with apt
# when missing. Sets $py.
ensure_torch() {
  py=${PYTHON:-/usr/bin/python3}
  if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "python3-torch missing for $py: installing it with apt" >&2
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get install -y python3-torch || { $sudo apt-get update && $sudo apt-get install -y python3-torch; }
  fi
}

# One run of bench/pytorch_fashion.py on CPUS (a taskset list) with THREADS
# threads and ARGS: its last line printed, its samples/s appended to
# $tmp/KEY. Needs $py (ensure_torch), $here (bench/) and $tmp.
# shellcheck disable=SC2154  # $here and $tmp: the sourcing script's
torch_run() {  # CPUS THREADS KEY ARGS...
  local on=$1 threads=$2 key=$3
  shift 3
  local out
  out=$(taskset -c "$on" "$py" "$here/pytorch_fashion.py" --threads "$threads" --epochs 1 "$@" | tail -n 1)
  echo "$out" | field samples_per_s >>"$tmp/$key"
  echo "  torch $key: $out"
}

# The value of key=NUMBER in the first line of stdin that has it.
field() { grep -o "$1=[0-9.]*" | head -1 | cut -d= -f2; }

# Median of the numbers on stdin, one a line ("nan" when there are none).
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# One header line: date, machine, CPUs.
machine_header() {
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -m), $(nproc) CPUs available, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
}
