#!/usr/bin/env bash
# The web dashboard in a real browser: builds `sked` (debug), starts
# `sked server` on a free 127.0.0.1 port with a temporary data directory and 2 workers, and
# drives headless Chromium through it with Playwright's core library (scripts/dashboard/test.mjs:
# sign in, a one-shot's run succeeding on its job's page, a run's log followed live while it
# prints, pausing a job, the failed runs, a 375 px wide window), after the unit tests of the
# dashboard's words (scripts/dashboard/words.test.mjs, node's test runner). Screenshots go to
# target/dashboard/*.png. The server and the data directory go when the script ends — passed,
# failed or interrupted. Every request goes to 127.0.0.1.
#
# Installs what it needs, once, like scripts/moto-env.sh (idempotent, under flock):
# - Debian's `chromium` (apt-get; the version pinned in scripts/dashboard/chromium.version, or,
#   once Debian's archive has replaced that build with a security update, the archive's — with
#   a warning to move the pin) and fonts-liberation2, when /usr/bin/chromium is missing;
# - playwright-core from npm (scripts/dashboard/package.json, every package and its integrity
#   hash pinned in package-lock.json) with `npm ci` into .tools/dashboard/ (marker .installed
#   holds the hash of the pins, so changing them reinstalls). No browser download: Playwright
#   drives the Debian build (executablePath), and `--ignore-scripts` runs nothing at install.
#
# Usage: scripts/dashboard-test.sh
# Knobs: DASHBOARD_TOOLS [.tools/dashboard], DASHBOARD_SHOTS [target/dashboard],
#        CHROMIUM [/usr/bin/chromium], CARGO [cargo].
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pinned="$root/scripts/dashboard"
tools="${DASHBOARD_TOOLS:-$root/.tools/dashboard}"
shots="${DASHBOARD_SHOTS:-$root/target/dashboard}"
chromium="${CHROMIUM:-/usr/bin/chromium}"
cargo="${CARGO:-cargo}"
pins="$(cat "$pinned/package.json" "$pinned/package-lock.json" | sha256sum | cut -d' ' -f1)"
began=$(date +%s)

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi
}

install_chromium() {
    [ -x "$chromium" ] && return
    local want candidate
    want="$(tr -d '[:space:]' <"$pinned/chromium.version")"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    candidate="$(apt-cache policy chromium | awk '/Candidate:/ {print $2}')"
    if apt-cache madison chromium | awk '{print $3}' | grep -qxF "$want"; then
        as_root apt-get install -y -qq --no-install-recommends "chromium=$want" fonts-liberation2 >/dev/null
    else
        echo "dashboard-test: chromium $want is no longer in Debian's archive; installing $candidate" \
            "(move scripts/dashboard/chromium.version to it)" >&2
        as_root apt-get install -y -qq --no-install-recommends chromium fonts-liberation2 >/dev/null
    fi
}

install_node_modules() {
    if [ "$(cat "$tools/.installed" 2>/dev/null)" = "$pins" ] && [ -d "$tools/node_modules/playwright-core" ]; then
        return
    fi
    rm -rf "$tools/node_modules"
    cp "$pinned/package.json" "$pinned/package-lock.json" "$tools/"
    (cd "$tools" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$pins" >"$tools/.installed"
}

mkdir -p "$tools"
(
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$tools/.lock"
        flock 9
    fi
    install_chromium
    install_node_modules
)
echo "dashboard-test: $("$chromium" --version 2>/dev/null), playwright-core $(node -p "require('$tools/node_modules/playwright-core/package.json').version"), node $(node --version)"

# The words the pages use (schedules, durations, the timeline's kinds), without a browser.
node --test --test-reporter=dot "$pinned/words.test.mjs"

# shellcheck source=scripts/sked-server.lib.sh
. "$root/scripts/sked-server.lib.sh"
start_sked_server dashboard-test 2
mkdir -p "$shots"
rm -f "$shots"/*.png

status=0
SKED_URL="$url" SKED_KEY_FILE="$work/data/admin.key" CHROMIUM="$chromium" SHOTS="$shots" \
    NODE_MODULES="$tools/node_modules" node "$pinned/test.mjs" || status=$?
echo "dashboard-test: $(( $(date +%s) - began )) s, exit $status; screenshots in $shots"
if [ "$status" -ne 0 ]; then
    echo "dashboard-test: server log (last 40 lines):" >&2
    tail -n 40 "$work/server.log" >&2
fi
exit "$status"
