#!/bin/sh
# make test-real's installs: each real component in a venv of its own under REAL (default
# .venv-real), or from Debian's packages. A part that cannot be installed leaves REAL/NAME.unavailable
# saying why, and its tests skip with that reason (tests/real/conftest.py). Done again only when a
# part's requirements change.
set -u
REAL=${1:-.venv-real}
PY=${PYTHON:-python3}
HERE=$(dirname "$0")
mkdir -p "$REAL"

venv_part() {  # NAME REQUIREMENTS [FIRST]: FIRST installed alone before the rest
    name=$1 req=$2 first=${3:-}
    venv=$REAL/$name log=$REAL/$name.log
    if [ -f "$venv/.installed" ] && cmp -s "$req" "$venv/.installed"; then
        return 0
    fi
    rm -f "$REAL/$name.unavailable"
    echo "make test-real: installing $name into $venv (log: $log)"
    if { [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"; } >"$log" 2>&1 \
        && { [ -z "$first" ] || "$venv/bin/python" -m pip install -q --disable-pip-version-check "$first"; } >>"$log" 2>&1 \
        && "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >>"$log" 2>&1; then
        cp "$req" "$venv/.installed"
    else
        echo "pip could not install $(grep -v '^#' "$req" | tr '\n' ' ')($(grep -v '^WARNING: Location' "$log" | tail -n 1))" \
            >"$REAL/$name.unavailable"
        cat "$REAL/$name.unavailable"
    fi
}

venv_part vlm "$HERE/requirements-vlm.txt" torch==2.13.0
venv_part proxy "$HERE/requirements-proxy.txt"

# (c) a single-node SLURM from Debian's packages: needs root and apt-get.
rm -f "$REAL/slurm.unavailable"
if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then
    :
elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "SLURM is not installed, and installing slurm-wlm and munge needs root and apt-get" >"$REAL/slurm.unavailable"
else
    echo "make test-real: installing slurm-wlm and munge (Debian)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } \
        >"$REAL/slurm.log" 2>&1 \
        || echo "apt-get could not install slurm-wlm and munge ($(tail -n 1 "$REAL/slurm.log"))" >"$REAL/slurm.unavailable"
fi
exit 0
