#!/usr/bin/env bash
# Installs moto server (PyPI `moto[server]`) into .venv-moto/ at the repository root, once.
# Idempotent: does nothing when the same pins were installed before (marker .venv-moto/.installed), and
# safe to run from several processes at once (flock). The AWS adapter's tests
# (crates/sked-aws/tests) start that server on 127.0.0.1 and run against it.
#
# Usage: scripts/moto-env.sh        (prints the path of the venv's python when done; start the
#        server with `<python> scripts/moto-server.py -H 127.0.0.1 -p <port>`, which handles
#        DynamoDB requests one at a time: see that file)
# MOTO_VENV=<dir> installs elsewhere.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MOTO_VENV:-$root/.venv-moto}"
python="$venv/bin/python"
# moto and every dependency pinned: a new moto can change what the tests see. The marker holds
# the hash of the pins, so changing them reinstalls.
requirements="$root/scripts/moto-requirements.txt"
pins="$(sha256sum "$requirements" | cut -d' ' -f1)"

install() {
    if [ "$(cat "$venv/.installed" 2>/dev/null)" = "$pins" ] && [ -x "$python" ]; then
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
echo "$python"
