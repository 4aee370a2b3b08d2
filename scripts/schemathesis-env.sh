#!/usr/bin/env bash
# Installs schemathesis (PyPI) into .venv-schemathesis/ at the repository root, once.
# Idempotent: does nothing when the same pins were installed before (marker
# .venv-schemathesis/.installed), and safe to run from several processes at once (flock).
# scripts/schemathesis.sh runs it against a real `sked server` in `make test`.
#
# Usage: scripts/schemathesis-env.sh   (prints the path of the venv's `st` when done)
# SCHEMATHESIS_VENV=<dir> installs elsewhere.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${SCHEMATHESIS_VENV:-$root/.venv-schemathesis}"
st="$venv/bin/st"
# schemathesis and every dependency pinned: a new schemathesis (or hypothesis) generates other
# cases and checks other things, so a run is reproducible only with the same versions. The
# marker holds the hash of the pins, so changing them reinstalls.
requirements="$root/scripts/schemathesis-requirements.txt"
pins="$(sha256sum "$requirements" | cut -d' ' -f1)"

install() {
    if [ "$(cat "$venv/.installed" 2>/dev/null)" = "$pins" ] && [ -x "$st" ]; then
        return
    fi
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    echo "$pins" >"$venv/.installed"
}

mkdir -p "$venv"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$venv/.lock"
    flock 9
fi
install
echo "$st"
