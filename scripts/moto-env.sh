#!/usr/bin/env bash
# Installs moto server (PyPI `moto[server]`) into .venv-moto/ at the repository root, once.
# Idempotent: does nothing when the install finished before (marker .venv-moto/.installed), and
# safe to run from several processes at once (flock). The AWS adapter's tests
# (crates/sked-aws/tests) start that server on 127.0.0.1 and run against it.
#
# Usage: scripts/moto-env.sh        (prints the path of moto_server when done)
# MOTO_VENV=<dir> installs elsewhere.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${MOTO_VENV:-$root/.venv-moto}"
server="$venv/bin/moto_server"

install() {
    if [ -f "$venv/.installed" ] && [ -x "$server" ]; then
        return
    fi
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'moto[server]'
    touch "$venv/.installed"
}

mkdir -p "$venv"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$venv/.lock"
    flock 9
fi
install
echo "$server"
