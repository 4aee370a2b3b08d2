#!/usr/bin/env bash
# schemathesis against a real `sked server` (issue: the API contract): builds the server, starts
# it on a free 127.0.0.1 port with a fresh data directory and NO workers (`--workers 0`: runs
# are created but nothing generated is ever executed on this machine), reads the operator key it
# wrote to <data dir>/admin.key, and runs schemathesis with every check, a fixed seed and a
# bounded number of examples (scripts/schemathesis.toml says what is configured and why). The
# server and the data directory go when the script ends — passed, failed or interrupted.
#
# Usage: scripts/schemathesis.sh [extra `st run` arguments]
# Knobs: SCHEMATHESIS_SEED [20261201], SCHEMATHESIS_EXAMPLES [25 per operation],
#        SCHEMATHESIS_REPORT_DIR [target/schemathesis] (JUnit report), CARGO [cargo].
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seed="${SCHEMATHESIS_SEED:-20261201}"
examples="${SCHEMATHESIS_EXAMPLES:-25}"
report_dir="${SCHEMATHESIS_REPORT_DIR:-$root/target/schemathesis}"
cargo="${CARGO:-cargo}"

st="$(scripts/schemathesis-env.sh)"
# shellcheck source=scripts/sked-server.lib.sh
. "$root/scripts/sked-server.lib.sh"
start_sked_server schemathesis.sh 0

echo "schemathesis.sh: sked server at $url (no workers), seed $seed, $examples examples per operation"
start=$(date +%s)
status=0
# Every check but use_after_free: a deleted job stays readable (state DELETED); see the toml.
"$st" --config-file scripts/schemathesis.toml --no-color run "$url/v1/openapi.json" \
    --checks all \
    --exclude-checks use_after_free \
    --seed "$seed" \
    --max-examples "$examples" \
    --generation-database none \
    --workers 1 \
    --request-timeout 10 \
    --header "Authorization: Bearer $(cat "$work/data/admin.key")" \
    --report junit --report-junit-path "$report_dir/junit.xml" \
    "$@" || status=$?
echo "schemathesis.sh: $(( $(date +%s) - start )) s, exit $status"
if [ "$status" -ne 0 ]; then
    echo "schemathesis.sh: server log (last 40 lines):" >&2
    tail -n 40 "$work/server.log" >&2
fi
exit "$status"
