#!/usr/bin/env bash
# The ceiling of any PostgreSQL queue on this machine, for the PostgreSQL burst target of
# BENCHMARKS.md: pgbench drives the barest SKIP LOCKED queue (setup.sql) on a private cluster
# with durability on (fsync, synchronous_commit: scripts/postgres-server.sh), 8 clients, and
# prints jobs per second. pgbench's clients cost little CPU; sked's engine
# and workers would take their share of the same cores.
#
# Usage: crates/sked-bench/pg-ceiling/run.sh      (make bench-pg-ceiling)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
bin="$("$root/scripts/postgres-env.sh")"
dir="$(mktemp -d)"
chmod 755 "$dir" # the cluster runs as `postgres` when this runs as root
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$root/scripts/postgres-server.sh" "$dir/data" "$port" >"$dir/server.log" 2>&1 &
server=$!
cleanup() {
    kill -INT "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    [ -n "${KEEP:-}" ] && echo "kept $dir" || rm -rf "$dir"
}
trap cleanup EXIT
until "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; do
    kill -0 "$server" 2>/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    sleep 0.1
done
psql() { "$bin/psql" -q -X -h 127.0.0.1 -p "$port" -U sked postgres "$@"; }
echo "synchronous_commit=$(psql -At -c 'SHOW synchronous_commit') fsync=$(psql -At -c 'SHOW fsync')"
printf '%-40s %8s %12s\n' case batch jobs/s
for case in claim-complete:1 claim-complete:10 insert-claim-complete:10; do
    script="${case%%:*}" batch="${case##*:}"
    psql -f "$here/setup.sql" 2>/dev/null
    # claim-complete drains the 40,000 jobs (a fixed count of cycles, so none finds the queue
    # empty); insert-claim-complete keeps it full and runs 10 s.
    if [ "$script" = claim-complete ]; then length=(-t $((40000 / 8 / batch))); else length=(-T 10); fi
    tps="$("$bin/pgbench" -n -h 127.0.0.1 -p "$port" -U sked -c 8 -j 2 "${length[@]}" -D batch="$batch" \
        -f "$here/$script.sql" postgres 2>/dev/null | sed -n 's/^tps = \([0-9.]*\) .*/\1/p')"
    printf '%-40s %8s %12.0f\n' "$script" "$batch" "$(awk -v t="$tps" -v b="$batch" 'BEGIN { print t * b }')"
done
