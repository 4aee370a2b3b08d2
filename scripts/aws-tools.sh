#!/usr/bin/env bash
# Installs the AWS deployment tools into .venv-aws/ at the repository root, once: AWS SAM CLI,
# cfn-lint, cargo-lambda and ziglang (cargo-lambda cross-links through `python3 -m ziglang`).
# All from PyPI, every version pinned in scripts/aws-tools-requirements.txt. Idempotent: does
# nothing when the same pins were installed before (marker .venv-aws/.installed holds their
# hash), and safe to run from several processes at once (flock).
#
# Usage: scripts/aws-tools.sh          (prints the venv's bin directory when done)
#        PATH="$(scripts/aws-tools.sh):$PATH" sam --version
# AWS_VENV=<dir> installs elsewhere.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${AWS_VENV:-$root/.venv-aws}"
export SAM_CLI_TELEMETRY=0
requirements="$root/scripts/aws-tools-requirements.txt"
pins="$(sha256sum "$requirements" | cut -d' ' -f1)"

install() {
    if [ "$(cat "$venv/.installed" 2>/dev/null)" = "$pins" ] && [ -x "$venv/bin/sam" ] \
        && [ -x "$venv/bin/cfn-lint" ] && [ -x "$venv/bin/cargo-lambda" ]; then
        return
    fi
    echo "installing aws-sam-cli, cfn-lint, cargo-lambda, ziglang into $venv (about a minute, once)" >&2
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
echo "$venv/bin"
