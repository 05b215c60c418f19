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

# The value of key=NUMBER in the first line of stdin that has it.
field() { grep -o "$1=[0-9.]*" | head -1 | cut -d= -f2; }

# Median of the numbers on stdin, one a line ("nan" when there are none).
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# One header line: date, machine, CPUs.
machine_header() {
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -m), $(nproc) CPUs available, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
}
